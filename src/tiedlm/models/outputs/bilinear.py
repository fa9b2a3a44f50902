"""The bilinear output layer (Gulordava et al. 2018), DRILL eq. (3)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .base import SharesEmbedding, reset_fan_in
from .configs import BilinearConfig


class BilinearOutput(SharesEmbedding):
    """Bilinear mapping (Gulordava et al. 2018), DRILL eq. (3): logits = E W h + b, W (d, d_h).

    Computed as E (W h): N·d·d_h extra multiply-adds instead of |V|·d·d_h for E W. Dedicated
    parameters d·d_h + |V|; h may have any size.
    """

    def __init__(self, embedding: nn.Embedding, hidden_size: int):
        super().__init__(embedding, bias=True)
        self.weight = nn.Parameter(torch.empty(embedding.embedding_dim, hidden_size))
        self.reset_parameters()

    @classmethod
    def from_config(cls, cfg: BilinearConfig, embedding: nn.Embedding, hidden_size: int) -> "BilinearOutput":
        return cls(embedding, hidden_size)

    @staticmethod
    def closed_form(cfg: BilinearConfig, vocab: int, d: int, d_h: int) -> int:
        return d * d_h + vocab

    def reset_parameters(self) -> None:
        reset_fan_in(self.weight, self.bias)

    def encode_labels(self) -> torch.Tensor:
        return self.embedding_weight

    def encode_context(self, h: torch.Tensor) -> torch.Tensor:
        return F.linear(h, self.weight)
