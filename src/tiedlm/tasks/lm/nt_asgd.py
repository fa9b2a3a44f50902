"""NT-ASGD: non-monotonically triggered averaged SGD (Merity et al. 2017, §3, Algorithm 1).

Plain SGD until validation has not improved for ``nonmono`` epochs; from then on every step also updates
the running average of the iterates (``torch.optim.swa_utils.AveragedModel``), and the average is what is
validated and saved. The averaged stage runs to ``train.epochs`` (the reference's main.py), or, with
``stop_on_stall``, until the average's own validation has not improved for ``nonmono`` epochs. The optional
finetune stage restarts from the best weights with a fresh average and history, and stops when validation
stalls again (the reference's finetune.py).

:class:`NTASGD` holds that state (the average, the validation history, where the averaged stage ended, whether
finetuning stopped) and saves and restores it with a run's ``last`` checkpoint, so that a resumed run averages
exactly as an uninterrupted one.
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import nn


class NTASGD:
    """The averaging state of NT-ASGD; inert (never averages) unless ``enabled``."""

    def __init__(self, enabled: bool, nonmono: int, log: Callable[[str], None] = print, stop_on_stall: bool = False):
        self.enabled, self.nonmono, self.log, self.stop_on_stall = enabled, nonmono, log, stop_on_stall
        self.averaged = None  # the iterate average once triggered
        self.history: list[float] = []  # valid cross-entropy per epoch of the current stage
        self.averaged_from: int | None = None  # the index in ``history`` of the average's first validation
        self.main_end: int | None = None  # the epoch the averaged stage stalled at (``stop_on_stall``)
        self.stopped = False  # finetune ended early by the non-monotone criterion

    @property
    def averaging(self) -> bool:
        return self.averaged is not None

    def weights(self, model: nn.Module) -> nn.Module:
        """The weights that are validated and saved: the iterate average once averaging, else ``model``."""
        return self.averaged.module if self.averaged is not None else model

    def start_averaging(self, model: nn.Module) -> None:
        from torch.optim.swa_utils import AveragedModel

        self.averaged = AveragedModel(model, use_buffers=False)

    def after_step(self, model: nn.Module) -> None:
        if self.averaged is not None:
            self.averaged.update_parameters(model)

    def check(self, valid_loss: float, epoch: int, finetuning: bool, model: nn.Module) -> None:
        """Alg. 1: trigger averaging (or end the finetune) when valid has not improved on the best value from
        more than ``nonmono`` epochs back; with ``stop_on_stall``, the same test on the average's own validations
        ends the averaged stage (``main_end``); then record ``valid_loss``."""
        h, n = self.history, self.nonmono
        if self.enabled and _stalled(h, valid_loss, n):
            if finetuning:
                self.stopped = True
                self.log(f"finetune: no improvement over {n} epochs; stopping")
            elif self.averaged is None:
                self.start_averaging(model)
                self.averaged_from = len(h) + 1  # this epoch's entry is the iterate's, the next the average's
                self.log(f"NT-ASGD: valid has not improved over {n} epochs; averaging from epoch {epoch + 1}")
        armed = (  # the stall stop applies: the main stage is averaging and has not ended
            self.stop_on_stall and not finetuning and self.main_end is None and self.averaged_from is not None
        )
        if self.enabled and armed and _stalled(h[self.averaged_from :], valid_loss, n):
            self.main_end = epoch
            self.log(f"NT-ASGD: the average has not improved over {n} epochs; its stage ends at epoch {epoch}")
        h.append(valid_loss)

    def start_finetune(self, model: nn.Module) -> None:
        """Restart from the weights already loaded into ``model`` (the best) with a fresh average and history."""
        self.start_averaging(model)
        self.history = []

    # ----- checkpoint -------------------------------------------------------------------------------
    def tensors(self) -> dict[str, torch.Tensor]:
        return {f"avg.{k}": v for k, v in self.averaged.state_dict().items()} if self.averaged is not None else {}

    def meta(self) -> dict:
        return {
            "valid_history": self.history,
            "stopped": self.stopped,
            "averaged_from": self.averaged_from,
            "main_end": self.main_end,
        }

    def restore(self, tensors: dict[str, torch.Tensor], meta: dict, model: nn.Module) -> None:
        self.history, self.stopped = meta.get("valid_history", []), meta.get("stopped", False)
        self.averaged_from, self.main_end = meta.get("averaged_from"), meta.get("main_end")
        if "avg.n_averaged" in tensors:
            self.start_averaging(model)
            self.averaged.load_state_dict({k[len("avg.") :]: v for k, v in tensors.items() if k.startswith("avg.")})


def _stalled(history: list[float], valid_loss: float, nonmono: int) -> bool:
    """Alg. 1's non-monotone test: ``valid_loss`` is worse than the best of ``history`` from more than ``nonmono``
    epochs back."""
    return len(history) > nonmono and valid_loss > min(history[:-nonmono])
