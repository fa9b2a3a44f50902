"""The output-layer family of Pappas & Henderson (2019): one module per layer, each config registered in ``OUTPUTS``.

:mod:`.configs` holds the typed configs (torch-free); the layers are imported on first use, so that
``from tiedlm.models.outputs import OUTPUTS`` (config reading, ``tiedlm presets``) does not import torch.
A new output layer: its class in a new module here, its config registered in :mod:`.configs`.
"""

from ...registry import lazy_exports
from .configs import OUTPUTS, BilinearConfig, DrillConfig, DualConfig, FullConfig, TiedConfig

_layers, __getattr__ = lazy_exports(
    __name__,
    {".base": "OutputLayer SharesEmbedding build_output closed_form_parameters", ".full": "FullSoftmaxOutput"}
    | {
        ".tied": "TiedOutput",
        ".bilinear": "BilinearOutput",
        ".dual": "DualOutput",
        ".drill": "DrillOutput LabelEncoder",
    },
)
__all__ = ["OUTPUTS", "BilinearConfig", "DrillConfig", "DualConfig", "FullConfig", "TiedConfig", *_layers]
