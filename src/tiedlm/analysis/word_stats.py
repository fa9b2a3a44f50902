"""How much probability a model gives to particular words on average (Inan et al. 2017, §6.4).

The paper observes that VD-LSTM+REAL puts less probability on ``<unk>`` and on very frequent words
("a", "an", "the") than the baseline, because these are not close to particular words in the
embedding space. :func:`mean_word_probabilities` measures that over a whole split.
"""

from __future__ import annotations

import torch

from ..evaluation import stream_logits

PAPER_WORDS = ("<unk>", "a", "an", "the")
# The four PTB test phrases of the paper's table of next-word predictions, with the words that followed.
# ("unk" in the paper is PTB's <unk> token.) We condition on a sentence start and the phrase only.
PAPER_PHRASES = (
    ("information international said it believes that the complaints filed in", "federal court"),
    ("oil company refineries ran flat out to prepare for a robust holiday driving season in july and", "august"),
    ("southmark said it plans to <unk> its <unk> to provide financial results as soon as its audit is", "completed"),
    ("merieux said the government 's minister of industry science and", "technology"),
)


@torch.inference_mode()
def mean_word_probabilities(
    model,
    vocab,
    ids: torch.Tensor,
    words=PAPER_WORDS,
    batch_size: int = 10,
    bptt: int = 35,
    precision: str = "fp32",
    progress: bool = False,
) -> dict:
    """Mean over every position of ``ids`` of p(next = w) for each w in ``words``, and how often each w
    actually is the next word. Words missing from the vocabulary are skipped."""
    present = [w for w in words if w in vocab]
    cols = torch.tensor([vocab.index[w] for w in present], dtype=torch.long)
    sums = torch.zeros(len(present), dtype=torch.float64)
    hits = torch.zeros(len(present), dtype=torch.float64)
    n = 0
    for logits, y in stream_logits(model, ids, batch_size, bptt, precision, progress, desc="word stats"):
        probs = torch.softmax(logits, dim=-1)[:, cols.to(logits.device)]
        sums += probs.double().sum(0).cpu()
        hits += (y.unsqueeze(1) == cols.to(y.device)).double().sum(0).cpu()
        n += y.numel()
    return {w: {"mean_prob": float(s / n), "frequency": float(h / n)} for w, s, h in zip(present, sums, hits)} | {
        "_tokens": n
    }
