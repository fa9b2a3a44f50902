"""The AWD-LSTM written the way its reference code writes it, as the speed baseline of tiedlm's own step.

salesforce/awd-lstm-lm trains one ``nn.LSTM`` per layer, each called with a weight-dropped ``weight_hh_l0``
(its ``WeightDrop`` wrapper), with embedding dropout, locked (variational) dropout between layers, a tied
softmax with ``F.cross_entropy``, AR/TAR on the last layer's outputs, clipping and SGD. :class:`ReferenceAWDLSTM`
does the same with today's PyTorch (``torch.func.functional_call`` in place of the wrapper's attribute juggling),
so that on a GPU it is cuDNN's fused LSTM used the usual way. ``tiedlm selfcheck`` and
the AWD-LSTM benchmark (docs/performance.md, "Fused LSTM kernels") time tiedlm's step against it in the same process.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn


def interleaved_medians(variants: dict[str, Callable[[], None]], blocks: int, warmup: int = 1) -> dict[str, float]:
    """Median wall seconds of one call of each variant, over ``blocks`` rounds that alternate the variants
    (so that other work on the machine falls on each alike). A variant on a GPU must synchronise itself."""
    for fn in variants.values():
        for _ in range(warmup):
            fn()
    seconds: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(blocks):
        for name, fn in variants.items():
            start = time.perf_counter()
            fn()
            seconds[name].append(time.perf_counter() - start)
    return {name: statistics.median(s) for name, s in seconds.items()}


def locked_dropout(x: torch.Tensor, p: float) -> torch.Tensor:
    """One dropout mask per sequence, shared over time steps (the reference's ``LockedDropout``)."""
    return x * x.new_empty(1, x.size(1), x.size(2)).bernoulli_(1 - p).div_(1 - p)


class ReferenceAWDLSTM(nn.Module):
    """The baseline, the reference code's way: nn.LSTM layers, each called with a weight-dropped W_hh.

    ``m`` is a :class:`~tiedlm.models.config.ModelConfig` of an AWD-LSTM; ``output`` another output layer (it
    is called as tiedlm's are), or None for the reference's tied softmax E h + b.
    """

    def __init__(self, m, vocab: int, output: nn.Module | None = None):
        super().__init__()
        self.m, self.vocab = m, vocab
        self.emb = nn.Embedding(vocab, m.embedding_size)
        e = m.encoder
        sizes = [m.embedding_size] + [e.hidden_size] * (e.layers - 1) + [m.embedding_size]
        self.rnns = nn.ModuleList(nn.LSTM(a, b) for a, b in zip(sizes, sizes[1:]))
        self.bias = nn.Parameter(torch.zeros(vocab))
        self.output = output

    def init_state(self, batch: int):
        w = self.bias
        return [(w.new_zeros(1, batch, r.hidden_size),) * 2 for r in self.rnns]

    def forward(self, x, state):
        """Logits, the last layer's raw outputs (TAR) and its dropped outputs (AR)."""
        from torch.func import functional_call

        m, w = self.m, self.emb.weight
        keep = w.new_empty(w.size(0), 1).bernoulli_(1 - m.dropout_embedding).div_(1 - m.dropout_embedding)
        h = locked_dropout(F.embedding(x, w * keep), m.encoder.dropout_input)
        for i, (rnn, s) in enumerate(zip(self.rnns, state)):
            w_hh = F.dropout(rnn.weight_hh_l0, m.encoder.weight_drop, training=True)
            h, _ = functional_call(rnn, {"weight_hh_l0": w_hh}, (h, s))
            if i < len(self.rnns) - 1:
                h = locked_dropout(h, m.encoder.dropout_hidden)
        raw, h = h, locked_dropout(h, m.encoder.dropout)
        logits = F.linear(h, w, self.bias) if self.output is None else self.output(h)[0]
        return logits, raw, h

    def loss(self, x: torch.Tensor, y: torch.Tensor, state, ar: float, tar: float) -> torch.Tensor:
        """The reference's training loss of one window: cross-entropy + AR + TAR."""
        logits, raw, dropped = self(x, state)
        loss = F.cross_entropy(logits.reshape(-1, self.vocab), y.reshape(-1))
        return loss + ar * dropped.pow(2).mean() + tar * (raw[1:] - raw[:-1]).pow(2).mean()
