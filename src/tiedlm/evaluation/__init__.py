"""Evaluation: perplexity over a split with the hidden state carried across windows (:mod:`.scoring`, the
papers' protocol; the language model validates with it), and dynamic evaluation (:mod:`.dynamic`, Krause et al.
2018)."""

from ..registry import lazy_exports

# torch on first use: the CLI reads the dynamic settings' options (.dynamic_settings) without it
__all__, __getattr__ = lazy_exports(
    __name__, {".scoring": "evaluate perplexity sentence_scores stream_logits token_losses"}
)
