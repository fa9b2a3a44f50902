"""Reused embeddings: the output layer is the input embedding, DRILL eq. (2) / Inan et al. §4–5 (RE)."""

from __future__ import annotations

import torch
from torch import nn

from .base import SharesEmbedding
from .configs import TiedConfig


class TiedOutput(SharesEmbedding):
    """Reused embeddings, DRILL eq. (2) / Inan et al. §4–5 (RE): logits = E h (+ b).

    With ``bias=False`` b = 0 and the layer owns no parameter (Inan et al.'s RE); with ``bias=True`` it
    owns a learnable b (|V| parameters): Press & Wolf (2017), and DRILL's "tied" row in Table 4.
    Needs d_h = d.
    """

    def __init__(self, embedding: nn.Embedding, bias: bool = False):
        super().__init__(embedding, bias)

    @classmethod
    def from_config(cls, cfg: TiedConfig, embedding: nn.Embedding, hidden_size: int) -> "TiedOutput":
        return cls(embedding, bias=cfg.bias)

    @staticmethod
    def closed_form(cfg: TiedConfig, vocab: int, d: int, d_h: int) -> int:
        return vocab if cfg.bias else 0

    @property
    def weight(self) -> torch.Tensor:
        return self.embedding_weight

    def encode_labels(self) -> torch.Tensor:
        return self.embedding_weight
