"""The dual nonlinear mapping (Pappas et al. 2018), DRILL eqs. (4–5)."""

from __future__ import annotations

import torch
from torch import nn

from .base import SharesEmbedding
from .configs import DualConfig


class DualOutput(SharesEmbedding):
    """Dual nonlinear mapping (Pappas et al. 2018), DRILL eqs. (4–5).

    g_out(E) = σ(E U + b_u) (|V|, d_j), g_in(h) = σ(V h + b_v) (d_j), logits = g_out(E) g_in(h) + b.
    Dedicated parameters d·d_j + d_j + d_j·d_h + d_j + |V| (the paper's Ineq. 6 writes the two weight
    matrices and b; b_u and b_v add 2·d_j).
    """

    def __init__(self, embedding: nn.Embedding, hidden_size: int, joint_size: int):
        super().__init__(embedding, bias=True)
        d = embedding.embedding_dim
        self.label_proj = nn.Linear(d, joint_size)  # U, b_u
        self.context_proj = nn.Linear(hidden_size, joint_size)  # V, b_v
        self.reset_parameters()

    @classmethod
    def from_config(cls, cfg: DualConfig, embedding: nn.Embedding, hidden_size: int) -> "DualOutput":
        return cls(embedding, hidden_size, cfg.joint_size or embedding.embedding_dim)

    @staticmethod
    def closed_form(cfg: DualConfig, vocab: int, d: int, d_h: int) -> int:
        joint = cfg.joint_size or d
        return d * joint + joint * d_h + vocab + 2 * joint

    def reset_parameters(self) -> None:
        self.label_proj.reset_parameters()
        self.context_proj.reset_parameters()
        nn.init.zeros_(self.bias)

    def encode_labels(self) -> torch.Tensor:
        return torch.sigmoid(self.label_proj(self.embedding_weight))

    def encode_context(self, h: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.context_proj(h))
