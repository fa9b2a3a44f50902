"""The settings of dynamic evaluation (Krause et al. 2018; :mod:`tiedlm.evaluation.dynamic`), importable without
torch: ``tiedlm evaluate --dynamic``'s options are generated from these fields (:func:`~tiedlm.registry.option`),
so each default is written here only. The defaults are Krause et al.'s public code's (benkrause/dynamic-evaluation)."""

from __future__ import annotations

from dataclasses import dataclass

from ..registry import check_settings, option

# Krause et al.'s grid (benkrause/dynamic-evaluation), for bptt = 5; scaled by bptt/5 like theirs
GRID_LRS = (3e-5, 4e-5, 5e-5, 6e-5, 7e-5, 1e-4)
GRID_LAMBDAS = (0.001, 0.002, 0.003, 0.005)


@dataclass
class DynamicEvalSettings:
    lr: float = option(5e-5, "--dyn-lr", "step size η (the paper's 0.002 needs --dyn-old-hyper)", minimum=0)
    lamb: float = option(0.002, "--dyn-lambda", "decay λ toward the trained weights", minimum=0)
    epsilon: float = option(2e-5, "--dyn-epsilon", "ε added to the gradient RMS", minimum=0)
    bptt: int = option(5, "--dyn-bptt", "segment length, for the statistics and the adaptation", minimum=1)
    batch_size: int = option(1, "--dyn-batch-size", "parallel streams of the split (1: the text in order)", minimum=1)
    stat_batch_size: int = option(
        100, "--stat-batch-size", "parallel training streams for the gradient statistics", minimum=1
    )
    stat_tokens: int = option(0, "--stat-tokens", "training tokens for the gradient RMS (0: all)", minimum=0)
    old_hyper: bool = option(
        False,
        "--dyn-old-hyper",
        "lr/λ/ε are in the original code's scaling (the paper's AWD-LSTM 0.002/0.02/0.001), converted like Krause "
        "et al.'s --oldhyper",
    )

    def __post_init__(self) -> None:  # built in Python too: the bounds its options have
        check_settings(self, type(self).__name__)


@dataclass
class Grid:
    """Krause et al.'s search over η and λ on (the first ``tokens`` of) valid; empty lists: their defaults
    (:data:`GRID_LRS`, :data:`GRID_LAMBDAS`), scaled by bptt / 5 as their code does."""

    lrs: list[float] = option([], "--grid-lrs", "η of the grid (none: Krause et al.'s, times bptt/5)", minimum=0)
    lambdas: list[float] = option([], "--grid-lambdas", "λ of the grid (none: Krause et al.'s, × bptt/5)", minimum=0)
    tokens: int = option(0, "--grid-tokens", "valid tokens per grid point (0: all)", minimum=0)

    def __post_init__(self) -> None:
        check_settings(self, type(self).__name__)
