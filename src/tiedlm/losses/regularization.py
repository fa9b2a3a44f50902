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


def encoder_regularization(model, ar: float, tar: float) -> torch.Tensor | None:
    """AR + TAR (:func:`activation_regularization`) on the outputs that ``model``'s encoder kept from its last
    training forward pass (``encoder.last_outputs``: the AWD-LSTM keeps (raw, dropped)); None for encoders
    without them, or with ``ar = tar = 0``. The kept outputs are used once and released, so that no graph
    stays alive (and the model stays deep-copyable)."""
    encoder = getattr(model, "encoder", model)
    outputs = getattr(encoder, "last_outputs", None)
    if outputs is None:
        return None
    encoder.last_outputs = None
    if not (ar or tar):
        return None
    return activation_regularization(*outputs, ar, tar)
