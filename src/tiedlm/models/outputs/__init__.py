"""The output-layer family of Pappas & Henderson (2019): one module per layer, each config registered in ``OUTPUTS``.

:mod:`.configs` holds the typed configs (torch-free); the layers are imported on first use, so that
``from tiedlm.models.outputs import OUTPUTS`` (config reading, ``tiedlm presets``) does not import torch.
A new output layer: its class in a new module here, its config registered in :mod:`.configs`.
"""

from importlib import import_module

from .configs import OUTPUTS, BilinearConfig, DrillConfig, DualConfig, FullConfig, TiedConfig

_LAZY = {
    "OutputLayer": "base",
    "SharesEmbedding": "base",
    "build_output": "base",
    "closed_form_parameters": "base",
    "FullSoftmaxOutput": "full",
    "TiedOutput": "tied",
    "BilinearOutput": "bilinear",
    "DualOutput": "dual",
    "DrillOutput": "drill",
    "LabelEncoder": "drill",
}

__all__ = ["OUTPUTS", "BilinearConfig", "DrillConfig", "DualConfig", "FullConfig", "TiedConfig", *_LAZY]


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
