"""Frequency-based predefined sparse word embeddings (Demeester et al. 2018, §4.1).

With the vocabulary sorted by training frequency (word 0 the most frequent, as :class:`tiedlm.data.Vocabulary`
orders it), the ⌈α^j·V⌉ most frequent words own a trainable entry in dimension j (j = 0 … k−1): frequent
words get full vectors, the long tail of rare words short ones. α ∈ (0, 1] follows from the embedding
density δ_E, the fraction of trainable entries of the V×k matrix (§4.1's equation):

    Σ_{j=0}^{k−1} α^j · V = δ_E · k · V,

solved with SciPy's ``brentq`` (:func:`solve_alpha`). δ_E = 1 is a dense embedding (α = 1); the smallest
density is 1/k (α → 0: every word keeps dimension 0 only).

:class:`SparseEmbedding` stores only the trainable entries and is a drop-in for ``nn.Embedding`` in the
language models and the tagger: its :attr:`~SparseEmbedding.weight` is the (V, k) matrix with zeros at the
predefined positions, rebuilt from the stored entries when read (so the tied output layer, the augmented
loss and embedding dropout see the same matrix, and gradients reach only the stored entries).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from scipy.optimize import brentq
from torch import nn

from ..errors import UsageError


def solve_alpha(density: float, dim: int) -> float:
    """α with Σ_{j<k} α^j = δ_E·k (Demeester et al. 2018, §4.1); 1.0 for a dense embedding."""
    if not 1 / dim <= density <= 1:
        raise UsageError(
            f"embedding density {density} is not possible for {dim} dimensions: every word keeps at "
            f"least one dimension, so the density must be in [1/{dim} = {1 / dim:.4f}, 1]"
        )
    if density == 1 or dim == 1:
        return 1.0
    target = density * dim
    if math.isclose(target, 1.0):
        return 0.0
    return brentq(lambda a: sum(a**j for j in range(dim)) - target, 0.0, 1.0, xtol=1e-14)


def dimension_counts(vocab_size: int, dim: int, alpha: float) -> list[int]:
    """n_j = ⌈α^j·V⌉ words (the most frequent ones) own dimension j; dimension 0 is always dense."""
    counts = [vocab_size] + [min(vocab_size, math.ceil(alpha**j * vocab_size - 1e-9)) for j in range(1, dim)]
    return counts


class SparseEmbedding(nn.Module):
    """A (V, k) embedding whose rare words own only their first dimensions; drop-in for ``nn.Embedding``."""

    def __init__(self, num_embeddings: int, embedding_dim: int, density: float):
        super().__init__()
        self.num_embeddings, self.embedding_dim, self.density = num_embeddings, embedding_dim, density
        self.alpha = solve_alpha(density, embedding_dim)
        counts = torch.tensor(dimension_counts(num_embeddings, embedding_dim, self.alpha))
        mask = torch.arange(num_embeddings).unsqueeze(1) < counts.unsqueeze(0)  # (V, k), staircase
        self.register_buffer("mask", mask, persistent=False)
        self.values = nn.Parameter(torch.empty(int(mask.sum())))  # the trainable entries, row-major
        self.reset_parameters()

    def reset_parameters(self, init_range: float | None = None) -> None:
        """Stored entries ~ N(0, 1) as nn.Embedding, or uniform in ±init_range."""
        if init_range is None:
            nn.init.normal_(self.values)
        else:
            nn.init.uniform_(self.values, -init_range, init_range)

    @property
    def weight(self) -> torch.Tensor:
        """The (V, k) matrix, zero at the predefined positions; differentiable w.r.t. :attr:`values`."""
        return self.values.new_zeros(self.mask.shape).masked_scatter(self.mask, self.values)

    def lengths(self) -> torch.Tensor:
        """Number of trainable dimensions of every word (V,)."""
        return self.mask.sum(1)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return F.embedding(ids, self.weight)

    def extra_repr(self) -> str:
        return (
            f"{self.num_embeddings}, {self.embedding_dim}, density={self.density}, alpha={self.alpha:.5f}, "
            f"trainable={self.values.numel():,}"
        )


def make_embedding(vocab_size: int, dim: int, density: float = 1.0) -> nn.Module:
    """``nn.Embedding`` for density 1, else a :class:`SparseEmbedding`."""
    return nn.Embedding(vocab_size, dim) if density >= 1 else SparseEmbedding(vocab_size, dim, density)
