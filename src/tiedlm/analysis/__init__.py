"""Analyses of trained models (Inan et al. 2017 §6.2, §6.4; DRILL's frequency bands; reports).

Names are imported on first use, so that ``tiedlm --help`` (which reads :mod:`.subspace_config` for its
defaults) does not import NumPy, SciPy or PyTorch.
"""

from importlib import import_module

_LAZY = {"subspace_distance": "subspace"}

__all__ = list(_LAZY)


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
