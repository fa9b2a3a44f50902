"""Analyses of trained models (Inan et al. 2017 §6.2, §6.4; DRILL's frequency bands; reports).

Names are imported on first use, so that ``tiedlm --help`` (which reads :mod:`.subspace_config` for its
defaults) does not import NumPy, SciPy or PyTorch.
"""

from ..registry import lazy_exports

__all__, __getattr__ = lazy_exports(__name__, {".subspace": "subspace_distance"})
