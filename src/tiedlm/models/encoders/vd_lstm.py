"""VD-LSTM: a stack of LSTM layers with variational dropout as in Inan et al. (2017) §6.1."""

from __future__ import annotations

import torch

from .base import Encoder
from .configs import VDLSTMConfig
from .lstm_layer import VDLSTMLayer, drop_connect, variational_mask  # noqa: F401  (re-exported: older imports)
from .sparse_lstm import lstm_layers, sparse_spec
from .state import State, detach_state, zero_state  # noqa: F401  (re-exported: older imports)


class VDLSTM(Encoder):
    """Stack of :class:`VDLSTMLayer` with the dropout scheme of Inan et al. (2017), §6.1 / App. A.

    - One mask per sequence (per batch row and BPTT window), the same at every time step (Gal 2015).
    - The mask on layer l's hidden state is the same for its recurrent use and for its use as the
      input of layer l+1 (for the last layer: the input of the output layer).
    - ``dropout_input``: a variational mask on the embeddings x_t fed to the first layer (one per
      sequence, the same at every time step). Default 0, the digest's reading of App. A ("We don't use
      dropout in the input embedding layer"). The sentence after it, "the same dropout probability for
      inputs and hidden states", names Gal's (2015) p_x and p_h, which reads as x_t being dropped with
      ``dropout`` and "input embedding layer" as Gal's word-type embedding dropout (never used here);
      ``dropout_input = dropout`` is that reading.
    """

    def __init__(
        self, input_size: int, hidden_size: int, layers: int, dropout: float, sparse=None, dropout_input: float = 0.0
    ):
        super().__init__()
        self.num_layers, self.dropout, self.dropout_input = layers, dropout, dropout_input
        self.layers = lstm_layers([input_size] + [hidden_size] * layers, 0.0, sparse)
        self.hidden_size = self.output_size = self.layers[-1].hidden_size

    # Zaremba et al. (2014) and Inan et al.: every parameter of the model, embedding and output layer included,
    # uniform in ±init_range (LanguageModel.reset_parameters reads this)
    init_everything_uniform = True

    @classmethod
    def from_config(cls, cfg: VDLSTMConfig, input_size: int, output_size: int) -> "VDLSTM":
        return cls(
            input_size, cfg.hidden_size, cfg.layers, cfg.dropout, sparse_spec(cfg), dropout_input=cfg.dropout_input
        )

    def init_state(self, batch: int, like: torch.Tensor) -> State:
        return zero_state(self.layers, batch, like)

    def sample_masks(self, batch: int, like: torch.Tensor) -> list[torch.Tensor | None]:
        if not self.training or self.dropout == 0:
            return [None] * self.num_layers
        return [variational_mask(batch, layer.hidden_size, self.dropout, like) for layer in self.layers]

    def forward(self, x: torch.Tensor, state: State, masks=None):
        """x (T,B,I) embeddings; returns the last layer's (masked) outputs (T,B,H) and the new state."""
        if masks is None:
            masks = self.sample_masks(x.size(1), state[0][0])
        if self.training and self.dropout_input > 0:
            x = x * variational_mask(x.size(1), x.size(2), self.dropout_input, x)
        new_state = []
        for layer, s, m in zip(self.layers, state, masks):
            x, s = layer(x, s, m)
            new_state.append(s)
        return x, new_state
