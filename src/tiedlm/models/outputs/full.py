"""The untied softmax, DRILL eq. (1) / Inan et al. eq. (2.3)."""

from __future__ import annotations

import torch
from torch import nn

from .base import OutputLayer, reset_fan_in
from .configs import FullConfig


class FullSoftmaxOutput(OutputLayer):
    """Untied softmax, DRILL eq. (1) / Inan et al. eq. (2.3): logits = W h + b, W (|V|, d_h), b (|V|).

    Dedicated parameters |V|·d_h + |V|.
    """

    def __init__(self, hidden_size: int, vocab_size: int):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(vocab_size, hidden_size))
        self.bias = nn.Parameter(torch.zeros(vocab_size))
        self.reset_parameters()

    @classmethod
    def from_config(cls, cfg: FullConfig, embedding: nn.Embedding, hidden_size: int) -> "FullSoftmaxOutput":
        return cls(hidden_size, embedding.num_embeddings)

    @staticmethod
    def closed_form(cfg: FullConfig, vocab: int, d: int, d_h: int) -> int:
        return vocab * d_h + vocab

    def reset_parameters(self) -> None:
        reset_fan_in(self.weight, self.bias)

    def encode_labels(self) -> torch.Tensor:
        return self.weight
