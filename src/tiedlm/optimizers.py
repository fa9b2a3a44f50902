"""The optimisers' typed configs, one registered dataclass each (``[train.optimizer]`` in a run's TOML).

Torch-free, like the encoders' and output layers' configs; each names the function that builds the optimiser
(:mod:`tiedlm.train.optimizers`). ``lr``, ``weight_decay`` and the schedule stay in ``[train]``: every optimiser
has them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from .registry import ComponentConfig, Registry, bounded, resumable

OPTIMIZERS = Registry("optimizer", "train.optimizer")


@dataclass
class OptimizerConfig(ComponentConfig):
    """Base of the optimisers' configs; what an optimiser does is declared here, never decided by its name."""

    averages_iterates: ClassVar[bool] = False  # keeps NT-ASGD's average of the iterates (validated and saved)
    graph_capturable: ClassVar[bool] = False  # its update is the SGD step a CUDA graph captures (tasks/lm/cuda_graph)


@OPTIMIZERS.register("sgd", builds="tiedlm.train.optimizers:sgd")
@dataclass
class SGDConfig(OptimizerConfig):
    """SGD (Inan et al.: lr 1 on the loss summed over time, decayed per epoch)."""

    graph_capturable: ClassVar[bool] = True

    momentum: float = bounded(0.0, 0, 1, below=True)  # heavy-ball momentum (the papers' runs: none)


@OPTIMIZERS.register("nt-asgd", builds="tiedlm.train.optimizers:sgd")
@dataclass
class NTASGDConfig(OptimizerConfig):
    """NT-ASGD: SGD, then the average of the iterates once validation stalls (Merity et al. 2017, Alg. 1)."""

    averages_iterates: ClassVar[bool] = True
    graph_capturable: ClassVar[bool] = True  # SGD's step in the graph; the average is updated after each replay

    nonmono: int = bounded(5, 1)  # average once valid has not improved on the value `nonmono` epochs back
    # after `train.epochs`, restart averaging from the best weights for N epochs
    finetune_epochs: int = bounded(0, 0, resumable=True)
    # end the averaged stage once the average's validation has not improved for `nonmono` epochs (then the
    # finetune stage); off, it runs to `train.epochs`, as in the reference's main.py
    stop_on_stall: bool = resumable(False)


@OPTIMIZERS.register("adam", builds="tiedlm.train.optimizers:adamw")
@dataclass
class AdamConfig(OptimizerConfig):
    """AdamW (decoupled weight decay), for Transformers with train.warmup_steps (Vaswani et al. §5.3)."""

    beta1: float = bounded(0.9, 0, 1, below=True)  # Vaswani et al.'s betas
    beta2: float = bounded(0.98, 0, 1, below=True)
    eps: float = bounded(1e-8, 0, above=True)  # added to the root of the second moment (Vaswani et al.: 1e-9)
