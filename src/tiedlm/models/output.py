"""Output layers: map encoder states to logits over the vocabulary.

Each output layer returns the logits and exposes the label embeddings it projects onto, so
that a loss or an analysis can see them (the seam of idiap/drill). The augmented loss does
*not* use these: its target distribution is built from the *input* embedding L.
"""

from __future__ import annotations

import torch
from torch import nn


class FullSoftmaxOutput(nn.Module):
    """Untied softmax layer, Inan et al. eq. (2.3): y = softmax(W h + b), W (|V|, d_h), b (|V|)."""

    tied = False

    def __init__(self, hidden_size: int, vocab_size: int):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(vocab_size, hidden_size))
        self.bias = nn.Parameter(torch.zeros(vocab_size))
        nn.init.uniform_(self.weight, -hidden_size ** -0.5, hidden_size ** -0.5)

    @property
    def label_embeddings(self) -> torch.Tensor:
        return self.weight

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.linear(h, self.weight, self.bias)


class TiedOutput(nn.Module):
    """Reused embeddings (RE), Inan et al. §4–5: W = L^T (the input embedding, one shared tensor), b = 0.

    ``weight`` *is* the embedding module's weight. With ``bias=True`` the layer owns a learnable
    bias b (|V| parameters) — not the paper's RE, which fixes b = 0, but a common variant
    (Press & Wolf 2017) and DRILL's "tied" layer with bias.
    """

    tied = True

    def __init__(self, embedding: nn.Embedding, bias: bool = False):
        super().__init__()
        self.embedding = [embedding]  # a list, so the shared weight is not registered twice
        self.bias = nn.Parameter(torch.zeros(embedding.num_embeddings)) if bias else None

    @property
    def weight(self) -> torch.Tensor:
        return self.embedding[0].weight

    @property
    def label_embeddings(self) -> torch.Tensor:
        return self.weight

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.linear(h, self.weight, self.bias)
