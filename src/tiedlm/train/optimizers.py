"""The optimisers that ``[train.optimizer]`` names (:data:`tiedlm.optimizers.OPTIMIZERS`, their typed configs), built
for any task's parameters."""

from __future__ import annotations

import torch


def make_optimizer(cfg, params, lr: float, weight_decay: float) -> torch.optim.Optimizer:
    """The optimiser a ``[train.optimizer]`` config names (:data:`tiedlm.optimizers.OPTIMIZERS`)."""
    from ..optimizers import OPTIMIZERS

    return OPTIMIZERS[cfg.name].cls(cfg, params, lr, weight_decay)


def sgd(cfg, params, lr: float, weight_decay: float) -> torch.optim.Optimizer:
    """``sgd`` and ``nt-asgd``: SGD (NT-ASGD's averaging is beside the optimiser, :mod:`tiedlm.tasks.lm.nt_asgd`)."""
    return torch.optim.SGD(params, lr=lr, momentum=getattr(cfg, "momentum", 0.0), weight_decay=weight_decay)


def adamw(cfg, params, lr: float, weight_decay: float) -> torch.optim.Optimizer:
    """``adam``: AdamW, decoupled weight decay (Transformers; Vaswani et al.'s betas by default)."""
    return torch.optim.AdamW(params, lr=lr, betas=(cfg.beta1, cfg.beta2), eps=cfg.eps, weight_decay=weight_decay)
