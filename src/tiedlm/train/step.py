"""The training step every task shares (language model, tagger, translator, subspace runs) and the CUDA graph captures.

- :func:`window_loss`: forward and loss of one language-model window (the eager step and the CUDA graph of
  :mod:`tiedlm.tasks.lm.cuda_graph` both call it, so the two cannot compute different losses);
- :func:`backward_and_clip`: backward and global-norm clipping (also shared with the graph);
- :func:`update`: the eager update around them: no update at all when the loss or the clipped gradient norm
  is not finite, so the last good weights stay (the graph makes the same decision on the device and undoes
  its update);
- :class:`NonFiniteSteps` counts skipped steps and stops the run, with the fix in one line, after ``limit``
  in a row (a diverged run must not burn hours of compute).
"""

from __future__ import annotations

import math
from typing import Callable, Iterable

import torch

from ..errors import TiedlmError
from ..losses import encoder_regularization
from ..runtime import autocast


def window_loss(
    model,
    loss_fn,
    x,
    y,
    state,
    precision: str,
    *,
    ar: float = 0.0,
    tar: float = 0.0,
    time_scale: float = 1.0,
    cache_enabled: bool = True,
    forward=None,
):
    """Forward and loss of one BPTT window: ``(loss to backpropagate, ce, aug, new_state)``.

    The loss is the language-model loss (cross-entropy, + γτ·J_aug), + AR/TAR of the AWD-LSTM, times
    ``time_scale`` (the window length for ``loss_reduction = "sum_over_time"``). ``forward`` is what runs the
    model (its DDP wrapper under torchrun); ``cache_enabled=False`` inside a CUDA graph.
    """
    with autocast(x.device, precision, cache_enabled=cache_enabled):
        logits, new_state = (forward or model)(x, state)
        loss, ce, aug = loss_fn(logits, y, model.input_embeddings, model.output_bias)
        reg = encoder_regularization(model, ar, tar)
    if reg is not None:
        loss = loss + reg
    if time_scale != 1.0:
        loss = loss * time_scale  # sum over time steps, mean over the batch
    return loss, ce, aug, new_state


def backward_and_clip(
    loss: torch.Tensor, params: list[torch.Tensor], clip: float, foreach: bool | None = None
) -> torch.Tensor:
    """``loss.backward()`` and clipping of the global gradient norm to ``clip`` (0: none); returns the norm (a
    device tensor: no host synchronisation, so a CUDA graph can capture it, with ``foreach=True``)."""
    loss.backward()
    return clip_gradients(params, clip, foreach)


def clip_gradients(params: list[torch.Tensor], clip: float, foreach: bool | None = None) -> torch.Tensor:
    """Clip the global gradient norm to ``clip`` (0: no clipping); returns the norm before clipping."""
    return torch.nn.utils.clip_grad_norm_(params, clip if clip > 0 else math.inf, foreach=foreach)


def update(
    loss: torch.Tensor,
    params: Iterable[torch.Tensor],
    optimizer: torch.optim.Optimizer,
    clip: float,
    all_true: Callable[[bool], bool] = lambda ok: ok,
) -> bool:
    """``loss.backward()``, clip the global gradient norm to ``clip`` (0: no clipping) and step; returns whether
    the update was made (False: the loss or the gradient was not finite, nothing changed).

    ``all_true`` agrees the decision across data-parallel ranks (every rank backpropagates, or none).
    """
    optimizer.zero_grad(set_to_none=True)
    if not all_true(bool(torch.isfinite(loss))):
        return False
    norm = backward_and_clip(loss, list(params), clip)
    if not bool(torch.isfinite(norm)):
        return False
    optimizer.step()
    return True


def scaled_update(
    window: Callable[[], tuple],
    params: list[torch.Tensor],
    optimizer: torch.optim.Optimizer,
    clip: float,
    scaler: torch.amp.GradScaler,
    all_true: Callable[[bool], bool] = lambda ok: ok,
) -> tuple[bool, tuple]:
    """:func:`update` for fp16 with dynamic loss scaling (PyTorch's ``GradScaler``, Micikevicius et al. 2018): the
    loss ``window()[0]`` is multiplied by the scale before backward and the gradient divided by it before clipping
    (the weights stay fp32). Where the scaled gradient overflowed, the scale is halved and the window computed
    again, so that every window makes its update as in fp32 and an overflow is never a skipped step; a gradient
    that is not finite at a scale below 1 is not an overflow of the scaling, and no update is made. Returns (made,
    ``window()``'s result)."""
    while True:
        out = window()
        optimizer.zero_grad(set_to_none=True)
        if not all_true(bool(torch.isfinite(out[0]))):
            return False, out
        scaler.scale(out[0]).backward()
        scaler.unscale_(optimizer)
        norm = clip_gradients(params, clip)
        if bool(torch.isfinite(norm)):
            scaler.step(optimizer)
            scaler.update()
            return True, out
        scaler.update()  # an overflow: the scale halves
        if scaler.get_scale() < 1.0:
            return False, out


class NonFiniteSteps:
    """Consecutive steps skipped for a non-finite loss or gradient; raises once ``limit`` happen in a row."""

    def __init__(self, limit: int, advice: Callable[[str], str], warn: Callable[[str], None] = print):
        self.limit, self.advice, self.warn = limit, advice, warn  # advice(what) -> the one-line message
        self.in_a_row = 0

    def __call__(self, made: bool, where: str) -> bool:
        """Record a step; returns ``made``. Warns for a skipped step; raises TiedlmError after ``limit`` in a row."""
        if made:
            self.in_a_row = 0
            return True
        self.in_a_row += 1
        self.warn(f"warning: non-finite loss/gradient {where}; step skipped ({self.in_a_row} in a row)")
        if self.in_a_row >= self.limit:
            raise TiedlmError(self.advice(f"{self.in_a_row} non-finite steps in a row ({where})"))
        return False
