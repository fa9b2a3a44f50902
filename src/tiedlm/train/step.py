"""The update every trainer shares (language model, tagger, translator): backward, clipping, the optimiser's step,
and what happens when a loss or gradient is not finite.

:func:`update` makes no update at all when the loss or the clipped gradient norm is not finite, so the last
good weights stay; :class:`NonFiniteSteps` counts such skipped steps and stops the run, with the fix in one
line, after ``limit`` in a row (a diverged run must not burn hours of compute).
"""

from __future__ import annotations

import math
from typing import Callable, Iterable

import torch

from ..errors import TiedlmError


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
    loss.backward()
    norm = torch.nn.utils.clip_grad_norm_(params, clip if clip > 0 else math.inf)
    if not bool(torch.isfinite(norm)):
        return False
    optimizer.step()
    return True


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
