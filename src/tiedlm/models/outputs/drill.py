"""DRILL: the deep residual output layer of Pappas & Henderson (2019), §3 (eqs. 8–12)."""

from __future__ import annotations

import torch
from torch import nn

from .base import SharesEmbedding, label_dropout
from .configs import DrillConfig

ACTIVATIONS = {"sigmoid": torch.sigmoid, "relu": torch.relu, "tanh": torch.tanh, "identity": lambda x: x}


class LabelEncoder(nn.Module):
    """Depth-k label encoder g_out(E) = E⁽ᵏ⁾ (eqs. 8–10, 12).

    E⁽⁰⁾ = E;  E⁽ⁱ⁾ = σ(δ(E⁽ⁱ⁻¹⁾) U⁽ⁱ⁾ + b⁽ⁱ⁾) [+ E] [+ E⁽ⁱ⁻¹⁾ for i ≥ 2],  U⁽ⁱ⁾ (d, d).

    - δ is dropout on each layer's input, E itself included (as the authors' code applies it).
      ``variational=True`` samples one mask over the d dimensions per forward pass, shared by all
      labels; otherwise a new mask per label and dimension.
    - ``residual_embedding`` adds E to every layer's output (eq. 10, the paper's default);
      ``residual_previous`` adds the previous layer's output E⁽ⁱ⁻¹⁾ too, from layer 2 on (worse on PTB,
      Table 4): layer 1's input is E itself, which the residual to E already adds, so layer 1 never gets E
      twice.
    """

    def __init__(
        self,
        dim: int,
        depth: int,
        activation: str = "sigmoid",
        dropout: float = 0.0,
        variational: bool = True,
        residual_embedding: bool = True,
        residual_previous: bool = False,
        init_range: float = 0.1,
    ):
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ValueError(f"unknown activation {activation!r}; one of {', '.join(ACTIVATIONS)}")
        self.depth, self.activation, self.dropout = depth, activation, dropout
        self.variational, self.residual_embedding, self.residual_previous = (
            variational,
            residual_embedding,
            residual_previous,
        )
        self.init_range = init_range
        self.layers = nn.ModuleList(nn.Linear(dim, dim) for _ in range(depth))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Uniform in ±init_range (the paper: [−0.1, 0.1])."""
        for p in self.parameters():
            nn.init.uniform_(p, -self.init_range, self.init_range)

    def forward(self, embeddings: torch.Tensor) -> torch.Tensor:
        act = ACTIVATIONS[self.activation]
        x = embeddings
        for i, layer in enumerate(self.layers):
            y = act(layer(label_dropout(x, self.dropout, self.variational, self.training)))
            if self.residual_embedding:
                y = y + embeddings
            if self.residual_previous and i > 0:  # the residual to the previous layer starts at layer 2
                y = y + x
            x = y
        return x


class DrillOutput(SharesEmbedding):
    """DRILL output layer, eq. (7) with g_in(h) = h and g_out = :class:`LabelEncoder`:

    logits_t = E⁽ᵏ⁾ h_t + b. The label encoder runs once per forward pass, on the (|V|, d) table,
    not per token. Dedicated parameters k(d² + d) + |V| (eq. 11). Needs d_h = d.
    """

    def __init__(self, embedding: nn.Embedding, depth: int = 1, **encoder_options):
        super().__init__(embedding, bias=True)
        self.label_encoder = LabelEncoder(embedding.embedding_dim, depth, **encoder_options)

    @classmethod
    def from_config(cls, cfg: DrillConfig, embedding: nn.Embedding, hidden_size: int) -> "DrillOutput":
        return cls(
            embedding,
            cfg.depth,
            activation=cfg.activation,
            dropout=cfg.dropout,
            variational=cfg.variational,
            residual_embedding=cfg.residual_embedding,
            residual_previous=cfg.residual_previous,
            init_range=cfg.init_range,
        )

    @staticmethod
    def closed_form(cfg: DrillConfig, vocab: int, d: int, d_h: int) -> int:
        return cfg.depth * (d * d + d) + vocab

    def reset_parameters(self) -> None:
        self.label_encoder.reset_parameters()
        nn.init.zeros_(self.bias)

    def encode_labels(self) -> torch.Tensor:
        return self.label_encoder(self.embedding_weight)
