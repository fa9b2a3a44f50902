"""AWD-LSTM encoder (Merity, Keskar & Socher 2017, "Regularizing and Optimizing LSTM Language Models").

The encoder of DRILL's results (Pappas & Henderson 2019, §4). Its regularisers, each one option:

- **weight drop** (DropConnect on the hidden-to-hidden weights W_hh, §4.1): a dropped copy of W_hh per
  forward pass, computed functionally (:class:`~tiedlm.models.encoders.lstm_layer.VDLSTMLayer` with ``weight_drop``);
- **embedding dropout** (§4.3, :func:`embedding_dropout`): whole word types dropped from E per pass;
- **locked dropout** (§4.2, :func:`locked_dropout`): one mask per sequence shared over time, on the
  embeddings (``dropout_input``), between layers (``dropout_hidden``) and on the output (``dropout``);
- **AR / TAR** (§4.6): penalties on the last layer's activations, see
  :func:`tiedlm.losses.activation_regularization`. The encoder keeps the last layer's raw and dropped
  outputs of a training forward pass in :attr:`AWDLSTM.last_outputs` for them.

Layer sizes: ``input → hidden → … → hidden → output_size`` (400/1150/1150→400 on PTB); any one layer can
be a predefined-sparse layer (:mod:`tiedlm.models.encoders.sparse_lstm`, e.g. the middle one widened to 1725).
Every layer has one bias vector (nn.LSTM's two, b_ih + b_hh, are one parameter's worth of freedom).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .base import Encoder
from .configs import AWDLSTMConfig
from .lstm_layer import variational_mask
from .sparse_lstm import SparseLayerSpec, lstm_layers, sparse_spec
from .state import zero_state


def locked_dropout(x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    """x (T,B,H): one Bernoulli mask per sequence and unit, the same at every time step (Gal 2015)."""
    if not training or p == 0:
        return x
    return x * variational_mask(x.size(1), x.size(2), p, x).unsqueeze(0)


def embedding_dropout(embedding: nn.Embedding, ids: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    """Look ids up in ``embedding`` with whole rows (word types) dropped with probability p, scaled 1/(1−p)."""
    if not training or p == 0:
        return embedding(ids)
    w = embedding.weight
    keep = w.new_empty(w.size(0), 1).bernoulli_(1 - p).div_(1 - p)
    return F.embedding(ids, w * keep)


class AWDLSTM(Encoder):
    """Stack of LSTM layers with weight drop and locked dropout; returns the last layer's dropped outputs."""

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        layers: int,
        output_size: int,
        *,
        dropout: float = 0.4,
        dropout_input: float = 0.4,
        dropout_hidden: float = 0.25,
        weight_drop: float = 0.5,
        sparse: SparseLayerSpec | None = None,
    ):
        super().__init__()
        sizes = [input_size] + [hidden_size] * (layers - 1) + [output_size]
        self.layers = lstm_layers(sizes, weight_drop, sparse)
        self.dropout, self.dropout_input, self.dropout_hidden = dropout, dropout_input, dropout_hidden
        self.output_size = output_size
        self.last_outputs: tuple[torch.Tensor, torch.Tensor] | None = None

    # the model initialises the embedding and output layer its own way; this encoder resets itself
    init_everything_uniform = False

    @classmethod
    def from_config(cls, cfg: AWDLSTMConfig, input_size: int, output_size: int) -> "AWDLSTM":
        return cls(
            input_size,
            cfg.hidden_size,
            cfg.layers,
            output_size,
            dropout=cfg.dropout,
            dropout_input=cfg.dropout_input,
            dropout_hidden=cfg.dropout_hidden,
            weight_drop=cfg.weight_drop,
            sparse=sparse_spec(cfg),
        )

    def reset_parameters(self) -> None:
        """Each LSTM layer ±1/sqrt(H) (nn.LSTM's rule, as the reference code)."""
        for layer in self.layers:
            layer.reset_parameters()

    def init_state(self, batch: int, like: torch.Tensor):
        return zero_state(self.layers, batch, like)

    def forward(self, x: torch.Tensor, state):
        """x (T,B,I) embeddings (embedding dropout already applied) -> outputs (T,B,output_size), new state."""
        x = locked_dropout(x, self.dropout_input, self.training)
        new_state = []
        for i, (layer, s) in enumerate(zip(self.layers, state)):
            x, s = layer(x, s)
            new_state.append(s)
            if i < len(self.layers) - 1:
                x = locked_dropout(x, self.dropout_hidden, self.training)
        raw = x
        x = locked_dropout(x, self.dropout, self.training)
        self.last_outputs = (raw, x) if self.training else None
        return x, new_state
