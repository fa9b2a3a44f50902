"""Output layers: map encoder states h_t to logits over the vocabulary (Pappas & Henderson 2019, §2).

Every output layer has the same interface, written in DRILL's general form (eq. 7)::

    logits_t = g_out(E) · g_in(h_t) + b

- :meth:`OutputLayer.encode_labels` returns g_out(E), the (|V|, d_j) label embeddings the logits are
  scored against. It is computed **once per forward pass** (per batch), never per token.
- :meth:`OutputLayer.encode_context` returns g_in(h_t).
- ``forward(h)`` returns ``(logits, labels)``: the loss and the analyses take it from there.
- :meth:`OutputLayer.dedicated_parameters` counts the parameters the layer owns (the shared input
  embedding E is not counted), the quantity of the paper's Ineq. (6) and eq. (11).

E is the *input* embedding (one shared tensor, never copied). The augmented loss of Inan et al.
builds its target distribution from that same input embedding whatever the output layer, so for
``full`` (whose W is separate from E) "tied" in the AL sense means only "ỹ comes from L".

The family: :class:`FullSoftmaxOutput` (eq. 1), :class:`TiedOutput` (eq. 2), :class:`BilinearOutput`
(eq. 3), :class:`DualOutput` (eqs. 4–5) and :class:`~tiedlm.models.drill.DrillOutput` (eqs. 8–12).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class OutputLayer(nn.Module):
    """Base class: logits = encode_context(h) · encode_labelsᵀ + bias (DRILL eq. 7)."""

    tied = False  # True where the label embeddings are built from the input embedding E
    bias: nn.Parameter | None

    def encode_labels(self) -> torch.Tensor:
        raise NotImplementedError

    def encode_context(self, h: torch.Tensor) -> torch.Tensor:
        return h

    def forward(self, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """h (..., d_h) -> logits (..., |V|) and the label embeddings (|V|, d_j) they were scored against."""
        labels = self.encode_labels()
        return F.linear(self.encode_context(h), labels, self.bias), labels

    def dedicated_parameters(self) -> int:
        """Parameters owned by this layer (the shared input embedding excluded)."""
        return sum(p.numel() for p in self.parameters())

    def reset_parameters(self) -> None:
        """The layer's own initialisation (used by encoders that do not overwrite every parameter)."""
        if self.bias is not None:
            nn.init.zeros_(self.bias)


def _reset_fan_in(weight: torch.Tensor, bias: torch.Tensor) -> None:
    """Weight uniform in ±1/sqrt(fan_in), bias 0."""
    r = weight.size(1) ** -0.5
    nn.init.uniform_(weight, -r, r)
    nn.init.zeros_(bias)


class _SharesEmbedding(OutputLayer):
    """Holds the input embedding module without registering it a second time."""

    tied = True

    def __init__(self, embedding: nn.Embedding, bias: bool):
        super().__init__()
        self._embedding = [embedding]  # a list: the shared weight stays registered under the model's embedding
        self.bias = nn.Parameter(torch.zeros(embedding.num_embeddings)) if bias else None

    @property
    def embedding_weight(self) -> torch.Tensor:
        """E, (|V|, d): the input embedding's weight."""
        return self._embedding[0].weight


class FullSoftmaxOutput(OutputLayer):
    """Untied softmax, DRILL eq. (1) / Inan et al. eq. (2.3): logits = W h + b, W (|V|, d_h), b (|V|).

    Dedicated parameters |V|·d_h + |V|.
    """

    def __init__(self, hidden_size: int, vocab_size: int):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(vocab_size, hidden_size))
        self.bias = nn.Parameter(torch.zeros(vocab_size))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        _reset_fan_in(self.weight, self.bias)

    def encode_labels(self) -> torch.Tensor:
        return self.weight


class TiedOutput(_SharesEmbedding):
    """Reused embeddings, DRILL eq. (2) / Inan et al. §4–5 (RE): logits = E h (+ b).

    With ``bias=False`` b = 0 and the layer owns no parameter (Inan et al.'s RE); with ``bias=True`` it
    owns a learnable b (|V| parameters): Press & Wolf (2017), and DRILL's "tied" row in Table 4.
    Needs d_h = d.
    """

    def __init__(self, embedding: nn.Embedding, bias: bool = False):
        super().__init__(embedding, bias)

    @property
    def weight(self) -> torch.Tensor:
        return self.embedding_weight

    def encode_labels(self) -> torch.Tensor:
        return self.embedding_weight


class BilinearOutput(_SharesEmbedding):
    """Bilinear mapping (Gulordava et al. 2018), DRILL eq. (3): logits = E W h + b, W (d, d_h).

    Computed as E (W h): N·d·d_h extra multiply-adds instead of |V|·d·d_h for E W. Dedicated
    parameters d·d_h + |V|; h may have any size.
    """

    def __init__(self, embedding: nn.Embedding, hidden_size: int):
        super().__init__(embedding, bias=True)
        self.weight = nn.Parameter(torch.empty(embedding.embedding_dim, hidden_size))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        _reset_fan_in(self.weight, self.bias)

    def encode_labels(self) -> torch.Tensor:
        return self.embedding_weight

    def encode_context(self, h: torch.Tensor) -> torch.Tensor:
        return F.linear(h, self.weight)


class DualOutput(_SharesEmbedding):
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

    def reset_parameters(self) -> None:
        self.label_proj.reset_parameters()
        self.context_proj.reset_parameters()
        nn.init.zeros_(self.bias)

    def encode_labels(self) -> torch.Tensor:
        return torch.sigmoid(self.label_proj(self.embedding_weight))

    def encode_context(self, h: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.context_proj(h))


def closed_form_parameters(kind: str, vocab: int, d: int, d_h: int, joint: int = 0, depth: int = 0,
                           bias: bool = True) -> int:
    """Dedicated output-layer parameters by the closed forms of DRILL Ineq. (6) and eq. (11).

    full |V|d_h + |V|; tied |V| (0 without bias); bilinear d·d_h + |V|; dual d·d_j + d_j·d_h + |V|
    (+ 2d_j for b_u, b_v); drill k(d² + d) + |V|.
    """
    forms = {
        "full": vocab * d_h + vocab,
        "tied": vocab if bias else 0,
        "bilinear": d * d_h + vocab,
        "dual": d * joint + joint * d_h + vocab + 2 * joint,
        "drill": depth * (d * d + d) + vocab,
    }
    if kind not in forms:
        raise ValueError(f"unknown output layer {kind!r}; one of {', '.join(forms)}")
    return forms[kind]
