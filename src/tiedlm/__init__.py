"""tiedlm: word-level language models whose output layer knows the embedding space.

Implements Inan, Khosravi & Socher (2017): the VD-LSTM, the augmented loss (AL) and reused
embeddings (RE). The pieces are importable for use in other PyTorch code::

    from tiedlm import Config, LanguageModel, AugmentedLoss, load_corpus, load_run

The names are imported on first use (PEP 562), so that ``tiedlm --help`` does not load PyTorch.
"""

from .registry import lazy_exports

__version__ = "0.1.0"

_names, __getattr__ = lazy_exports(
    __name__,
    {".tasks.lm.config": "Config", ".data": "Vocabulary load_corpus", ".losses": "AugmentedLoss LanguageModelLoss"}
    | {".models": "VDLSTM FullSoftmaxOutput LanguageModel TiedOutput", ".run": "load_run"},
)
__all__ = [*_names, "__version__"]


def __dir__() -> list[str]:
    return sorted(__all__)
