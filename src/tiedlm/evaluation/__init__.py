"""Evaluation: perplexity over a split with the hidden state carried across windows (:mod:`.perplexity`, the
papers' protocol; the language model validates with it), and dynamic evaluation (:mod:`.dynamic`, Krause et al.
2018)."""

from .perplexity import evaluate, perplexity, sentence_scores, stream_logits, token_losses

__all__ = ["evaluate", "perplexity", "sentence_scores", "stream_logits", "token_losses"]
