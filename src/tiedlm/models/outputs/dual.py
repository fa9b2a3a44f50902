"""The dual nonlinear mapping (Pappas et al. 2018), DRILL eqs. (4–5), and its Table 4 setting (footnote 6)."""

from __future__ import annotations

import torch
from torch import nn

from ...errors import UsageError
from .base import SharesEmbedding, label_dropout
from .configs import DualConfig


class DualOutput(SharesEmbedding):
    """Dual nonlinear mapping (Pappas et al. 2018), DRILL eqs. (4–5).

    g_out(E) = σ(E U + b_u) (|V|, d_j), g_in(h) = σ(V h + b_v) (d_j), logits = g_out(E) g_in(h) + b.
    Dedicated parameters d·d_j + d_j + d_j·d_h + d_j + |V| (the paper's Ineq. 6 writes the two weight
    matrices and b; b_u and b_v add 2·d_j).

    DRILL's Table 4 row for this layer used "dropout and residual connections to E and h" (footnote 6), as the
    authors' code does with a dual encoder of depth 1: ``residual`` gives g_out(E) = σ(δ(E) U + b_u) + E and
    g_in(h) = σ(V h + b_v) + h (so d_j = d = d_h), δ being DRILL's dropout (eq. 12) on E only.
    """

    def __init__(
        self,
        embedding: nn.Embedding,
        hidden_size: int,
        joint_size: int,
        residual: bool = False,
        dropout: float = 0.0,
        variational: bool = True,
        init_range: float = 0.0,
    ):
        super().__init__(embedding, bias=True)
        d = embedding.embedding_dim
        if residual and not joint_size == d == hidden_size:
            raise UsageError(
                f"the dual layer's residual adds E and h to the joint space, so joint_size, embedding_size and the "
                f"encoder's output size must be equal; got {joint_size}, {d}, {hidden_size}"
            )
        self.residual, self.dropout, self.variational, self.init_range = residual, dropout, variational, init_range
        self.label_proj = nn.Linear(d, joint_size)  # U, b_u
        self.context_proj = nn.Linear(hidden_size, joint_size)  # V, b_v
        self.reset_parameters()

    @classmethod
    def from_config(cls, cfg: DualConfig, embedding: nn.Embedding, hidden_size: int) -> "DualOutput":
        return cls(
            embedding,
            hidden_size,
            cfg.joint_size or embedding.embedding_dim,
            residual=cfg.residual,
            dropout=cfg.dropout,
            variational=cfg.variational,
            init_range=cfg.init_range,
        )

    @staticmethod
    def closed_form(cfg: DualConfig, vocab: int, d: int, d_h: int) -> int:
        joint = cfg.joint_size or d
        return d * joint + joint * d_h + vocab + 2 * joint

    def reset_parameters(self) -> None:
        self.label_proj.reset_parameters()
        self.context_proj.reset_parameters()
        if self.init_range > 0:  # the authors' code: the weights uniform in ±0.1, the biases nn.Linear's
            for proj in (self.label_proj, self.context_proj):
                nn.init.uniform_(proj.weight, -self.init_range, self.init_range)
        nn.init.zeros_(self.bias)

    def encode_labels(self) -> torch.Tensor:
        e = self.embedding_weight
        g = torch.sigmoid(self.label_proj(label_dropout(e, self.dropout, self.variational, self.training)))
        return g + e if self.residual else g

    def encode_context(self, h: torch.Tensor) -> torch.Tensor:
        g = torch.sigmoid(self.context_proj(h))
        return g + h if self.residual else g
