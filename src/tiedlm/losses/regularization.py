"""Activation regularisation of Merity, Keskar & Socher (2017), §4.6, for the AWD-LSTM encoder."""

from __future__ import annotations

import torch


def activation_regularization(raw: torch.Tensor, dropped: torch.Tensor, ar: float, tar: float) -> torch.Tensor:
    """AR + TAR over the last LSTM layer's outputs (T,B,H), as in the AWD-LSTM reference code.

    - AR  = α · mean(m ⊙ h_t)²: keeps the *dropped* outputs small;
    - TAR = β · mean(h_t − h_{t+1})²: keeps the *raw* outputs slowly changing in time.
    """
    total = raw.new_zeros((), dtype=torch.float32)
    if ar:
        total = total + ar * dropped.float().pow(2).mean()
    if tar and raw.size(0) > 1:
        total = total + tar * (raw[1:] - raw[:-1]).float().pow(2).mean()
    return total
