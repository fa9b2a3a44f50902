"""Evaluation: perplexity over a split with the hidden state carried across windows (:mod:`.perplexity`, the
papers' protocol; the language model validates with it), and dynamic evaluation (:mod:`.dynamic`, Krause et al.
2018)."""

__all__ = ["evaluate", "perplexity", "sentence_scores", "stream_logits", "token_losses"]


def __getattr__(name: str):  # torch on first use: the CLI reads the dynamic settings' options without it
    if name in __all__:
        import importlib

        module = importlib.import_module(f"{__name__}.perplexity")
        globals().update({n: getattr(module, n) for n in __all__})  # the function perplexity, not its module
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
