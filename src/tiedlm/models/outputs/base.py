"""Output layers: map encoder states h_t to logits over the vocabulary (Pappas & Henderson 2019, §2).

Every output layer has the same interface, written in DRILL's general form (eq. 7)::

    logits_t = g_out(E) · g_in(h_t) + b

- :meth:`OutputLayer.encode_labels` returns g_out(E), the (|V|, d_j) label embeddings the logits are
  scored against. It is computed **once per forward pass** (per batch), never per token, and once per
  evaluation inside :meth:`OutputLayer.labels_reused` (the weights fixed: every window's table is the same).
- :meth:`OutputLayer.encode_context` returns g_in(h_t).
- ``forward(h)`` returns ``(logits, labels)``: the loss and the analyses take it from there.
- :meth:`OutputLayer.dedicated_parameters` counts the parameters the layer owns (the shared input
  embedding E is not counted), the quantity of the paper's Ineq. (6) and eq. (11).

E is the *input* embedding (one shared tensor, never copied). The augmented loss of Inan et al.
builds its target distribution from that same input embedding whatever the output layer, so for
``full`` (whose W is separate from E) "tied" in the AL sense means only "ỹ comes from L".

The family, one module each: ``full.FullSoftmaxOutput`` (eq. 1), ``tied.TiedOutput`` (eq. 2),
``bilinear.BilinearOutput`` (eq. 3), ``dual.DualOutput`` (eqs. 4–5) and ``drill.DrillOutput`` (eqs. 8–12).
Each registers itself in :data:`OUTPUTS` with its typed config (``[model.output]`` in a run's TOML);
:func:`build_output` builds the one a config names.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import torch
import torch.nn.functional as F
from torch import nn

from ...errors import UsageError
from ...registry import ComponentConfig
from .configs import OUTPUTS


class OutputLayer(nn.Module):
    """Base class: logits = encode_context(h) · encode_labelsᵀ + bias (DRILL eq. 7)."""

    tied = False  # True where the label embeddings are built from the input embedding E
    bias: nn.Parameter | None
    _reused: list[torch.Tensor] | None = None  # None outside labels_reused(); inside: [] until a pass, then [g_out(E)]

    def encode_labels(self) -> torch.Tensor:
        raise NotImplementedError

    def encode_context(self, h: torch.Tensor) -> torch.Tensor:
        return h

    def forward(self, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """h (..., d_h) -> logits (..., |V|) and the label embeddings (|V|, d_j) they were scored against."""
        if self._reused is None:
            labels = self.encode_labels()
        else:
            if not self._reused:
                self._reused.append(self.encode_labels())
            labels = self._reused[0]
        return self.score(h, labels), labels

    def score(self, h: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """logits = g_in(h) · labelsᵀ + b (eq. 7) for a label table ``labels`` = g_out(E) computed before."""
        return F.linear(self.encode_context(h), labels, self.bias)

    @contextmanager
    def labels_reused(self) -> Iterator[None]:
        """Within the block, g_out(E) is computed by the first forward pass and reused by the ones after it.

        For evaluation over fixed weights (eval mode: no dropout δ, no update between windows), where each window
        would compute the same (|V|, d_j) table again. DRILL's label encoder (eqs. 8-12) costs depth·|V|·d_j²
        multiply-adds a pass, ~20 times a batch-1 window's own scoring (35·|V|·d_j) at depth 4: reusing it
        changes no figure, only the time. Not for training or dynamic evaluation, whose weights change between
        windows: it refuses a layer in training mode."""
        if self.training:
            raise RuntimeError("labels_reused() is for evaluation: call model.eval() first")
        if self._reused is not None:  # nested: the outer block owns the table
            yield
            return
        self._reused = []
        try:
            yield
        finally:
            self._reused = None

    @classmethod
    def from_config(cls, cfg: ComponentConfig, embedding: nn.Embedding, hidden_size: int) -> "OutputLayer":
        """The layer for ``cfg`` over encoder states of size ``hidden_size`` sharing ``embedding`` (E)."""
        raise NotImplementedError

    @staticmethod
    def closed_form(cfg: ComponentConfig, vocab: int, d: int, d_h: int) -> int:
        """Dedicated parameters by the paper's closed form (DRILL Ineq. 6, eq. 11), for tests and tables."""
        raise NotImplementedError

    def dedicated_parameters(self) -> int:
        """Parameters owned by this layer (the shared input embedding excluded)."""
        return sum(p.numel() for p in self.parameters())

    def reset_parameters(self) -> None:
        """The layer's own initialisation (used by encoders that do not overwrite every parameter)."""
        if self.bias is not None:
            nn.init.zeros_(self.bias)


def label_dropout(x: torch.Tensor, p: float, variational: bool, training: bool) -> torch.Tensor:
    """DRILL's dropout δ on a (|V|, d) table of label embeddings (eq. 12): ``variational`` samples one mask over
    the d dimensions per forward pass, shared by all labels (the authors' "locked" dropout); otherwise a new mask
    per label and dimension."""
    if not training or p == 0:
        return x
    if not variational:
        return F.dropout(x, p, training=True)
    return x * x.new_empty(1, x.size(1)).bernoulli_(1 - p).div_(1 - p)


def reset_fan_in(weight: torch.Tensor, bias: torch.Tensor) -> None:
    """Weight uniform in ±1/sqrt(fan_in), bias 0."""
    r = weight.size(1) ** -0.5
    nn.init.uniform_(weight, -r, r)
    nn.init.zeros_(bias)


class SharesEmbedding(OutputLayer):
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


def build_output(cfg: ComponentConfig, embedding: nn.Embedding, hidden_size: int) -> OutputLayer:
    """The output layer named by ``cfg`` (a registered output config, or a dict such as ``{"name": "drill",
    "depth": 2}``) over encoder states of size ``hidden_size``, sharing ``embedding`` (the ``nn.Embedding``).
    Arguments of another kind are a ``TypeError`` that says what to pass."""
    if isinstance(cfg, dict):
        cfg = OUTPUTS.config(cfg)
    if not isinstance(cfg, ComponentConfig):
        raise TypeError(
            f"build_output: cfg must be an output layer's config (OUTPUTS.config({{'name': 'drill', ...}})) or such a "
            f"dict, not {type(cfg).__name__}"
        )
    if not (isinstance(embedding, nn.Module) and hasattr(embedding, "embedding_dim")):  # nn.Embedding or alike
        raise TypeError(
            f"build_output: embedding must be the nn.Embedding whose weight the layer shares, not "
            f"{type(embedding).__name__}" + (" (pass the module, not its weight)" if torch.is_tensor(embedding) else "")
        )
    d = embedding.embedding_dim
    if cfg.needs_embedding_size and hidden_size != d:
        raise UsageError(
            f"output layer {cfg.name!r} needs an encoder output of size embedding_size = {d}, "
            f"got {hidden_size}; use output = 'bilinear' or 'dual' for other sizes"
        )
    return OUTPUTS[cfg.name].cls.from_config(cfg, embedding, hidden_size)


def closed_form_parameters(cfg: ComponentConfig, vocab: int, d: int, d_h: int) -> int:
    """Dedicated output-layer parameters of ``cfg`` by the closed forms of DRILL Ineq. (6) and eq. (11)."""
    return OUTPUTS[cfg.name].cls.closed_form(cfg, vocab, d, d_h)
