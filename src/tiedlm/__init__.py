"""tiedlm: word-level language models whose output layer knows the embedding space.

Implements Inan, Khosravi & Socher (2017): the VD-LSTM, the augmented loss (AL) and reused
embeddings (RE). The pieces are importable for use in other PyTorch code::

    from tiedlm import Config, LanguageModel, AugmentedLoss, load_corpus, load_run

The names are imported on first use (PEP 562), so that ``tiedlm --help`` does not load PyTorch.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

_EXPORTS = {
    "Config": ".tasks.lm.config",
    "Vocabulary": ".data",
    "load_corpus": ".data",
    "AugmentedLoss": ".losses",
    "LanguageModelLoss": ".losses",
    "VDLSTM": ".models",
    "FullSoftmaxOutput": ".models",
    "LanguageModel": ".models",
    "TiedOutput": ".models",
    "load_run": ".run",
}
__all__ = [*_EXPORTS, "__version__"]


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name], __name__), name)
    raise AttributeError(f"module 'tiedlm' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
