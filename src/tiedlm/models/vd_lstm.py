"""VD-LSTM: a stack of LSTM layers with variational dropout as in Inan et al. (2017) §6.1."""

from __future__ import annotations

import torch
from torch import nn

from .recurrence import fused_lstm, lstm_recurrence, use_fused

State = list[tuple[torch.Tensor, ...]]  # per layer: (h, c) for LSTMs; (memory,) for the Transformer


def detach_state(state: State) -> State:
    """The same state cut from the graph of earlier windows (truncated BPTT)."""
    return [tuple(t.detach() for t in s) for s in state]


def zero_state(layers, batch: int, like: torch.Tensor) -> State:
    """Zero (h, c) in fp32 for each layer of a stack, sized by each layer's ``hidden_size``."""
    return [(like.new_zeros(batch, layer.hidden_size, dtype=torch.float32),) * 2 for layer in layers]


def drop_connect(w_hh: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    """AWD-LSTM's weight drop (Wan et al. 2013): a dropped copy of W_hh for this forward pass, in training."""
    return torch.nn.functional.dropout(w_hh, p, training=True) if training and p > 0 else w_hh


def variational_mask(batch: int, size: int, p: float, like: torch.Tensor) -> torch.Tensor:
    """One Bernoulli keep-mask per sequence (row), scaled by 1/(1-p); reused at every time step."""
    return like.new_empty(batch, size).bernoulli_(1 - p).div_(1 - p)


class VDLSTMLayer(nn.Module):
    """One LSTM layer whose carried state and output share one variational dropout mask.

    Weights: ``weight_ih`` (4H, I), ``weight_hh`` (4H, H), ``bias`` (4H), gate order
    [input, forget, output, cell]. The input projections of all time steps are one matmul.
    """

    def __init__(self, input_size: int, hidden_size: int, weight_drop: float = 0.0):
        super().__init__()
        self.input_size, self.hidden_size, self.weight_drop = input_size, hidden_size, weight_drop
        self.weight_ih = nn.Parameter(torch.empty(4 * hidden_size, input_size))
        self.weight_hh = nn.Parameter(torch.empty(4 * hidden_size, hidden_size))
        self.bias = nn.Parameter(torch.empty(4 * hidden_size))
        self.reset_parameters()

    def reset_parameters(self, init_range: float | None = None) -> None:
        """Uniform in ±init_range (default ±1/sqrt(H), as nn.LSTM)."""
        r = init_range if init_range is not None else self.hidden_size ** -0.5
        for p in self.parameters():
            nn.init.uniform_(p, -r, r)

    def forward(self, x, state, mask=None):
        """x (T,B,I); state (h, c) each (B,H); mask (B,H) or None. Returns masked outputs (T,B,H), new state.

        With ``weight_drop`` > 0 (AWD-LSTM's DropConnect, Wan et al. 2013) a dropped copy of W_hh is made
        once per forward pass, in training, shared by every sequence and time step; the parameter itself
        is never replaced, so nothing is re-registered.
        """
        h0, c0 = state
        w_hh = drop_connect(self.weight_hh, self.weight_drop, self.training)
        if use_fused(x, mask):
            hs, hT, cT = fused_lstm(x, h0, c0, self.weight_ih, w_hh, self.bias)
            return hs, (hT, cT)
        xproj = torch.nn.functional.linear(x, self.weight_ih, self.bias)
        hs, hT, cT = lstm_recurrence(xproj, h0, c0, w_hh, mask)
        out = hs * mask if mask is not None else hs
        return out, (hT, cT)


class VDLSTM(nn.Module):
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

    def __init__(self, input_size: int, hidden_size: int, layers: int, dropout: float, sparse=None,
                 dropout_input: float = 0.0):
        super().__init__()
        from .sparse_lstm import lstm_layers

        self.num_layers, self.dropout, self.dropout_input = layers, dropout, dropout_input
        self.layers = lstm_layers([input_size] + [hidden_size] * layers, 0.0, sparse)
        self.hidden_size = self.output_size = self.layers[-1].hidden_size

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
