"""One LSTM layer with tiedlm's weights, its two dropouts (a per-sequence mask on the carried state; AWD-LSTM's
weight drop on W_hh) and the choice between tiedlm's recurrence and PyTorch's fused kernel."""

from __future__ import annotations

import torch
from torch import nn

from .recurrence import fused_lstm, lstm_recurrence, use_fused


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

    # (units, rows): the fused kernel runs at the hidden size and batch rounded up to these multiples (0: as they
    # are), the same layer at a shape it may run faster (recurrence.padded_lstm; train.lstm_pad_*)
    fused_pad: tuple[int, int] = (0, 0)

    def __init__(self, input_size: int, hidden_size: int, weight_drop: float = 0.0):
        super().__init__()
        self.input_size, self.hidden_size, self.weight_drop = input_size, hidden_size, weight_drop
        self.weight_ih = nn.Parameter(torch.empty(4 * hidden_size, input_size))
        self.weight_hh = nn.Parameter(torch.empty(4 * hidden_size, hidden_size))
        self.bias = nn.Parameter(torch.empty(4 * hidden_size))
        self.reset_parameters()

    def reset_parameters(self, init_range: float | None = None) -> None:
        """Uniform in ±init_range (default ±1/sqrt(H), as nn.LSTM)."""
        r = init_range if init_range is not None else self.hidden_size**-0.5
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
        if use_fused(mask):
            hs, hT, cT = fused_lstm(x, h0, c0, self.weight_ih, w_hh, self.bias, self.fused_pad)
            return hs, (hT, cT)
        xproj = torch.nn.functional.linear(x, self.weight_ih, self.bias)
        hs, hT, cT = lstm_recurrence(xproj, h0, c0, w_hh, mask)
        out = hs * mask if mask is not None else hs
        return out, (hT, cT)


def pad_fused_lstms(model: nn.Module, units: int, rows: int) -> None:
    """Run every LSTM layer of ``model`` that takes the fused kernel at its hidden size and batch rounded up to
    multiples of ``units`` and ``rows`` (:func:`~tiedlm.models.encoders.recurrence.padded_lstm`: the same model)."""
    for layer in model.modules():
        if isinstance(layer, VDLSTMLayer):
            layer.fused_pad = (units, rows)
