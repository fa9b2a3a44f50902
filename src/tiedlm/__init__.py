"""tiedlm: word-level language models whose output layer knows the embedding space.

Implements Inan, Khosravi & Socher (2017): the VD-LSTM, the augmented loss (AL) and reused
embeddings (RE). The pieces are importable for use in other PyTorch code::

    from tiedlm import Config, LanguageModel, AugmentedLoss, load_corpus, load_run
"""

__version__ = "0.1.0"

from .config import Config  # noqa: E402
from .data import Vocabulary, load_corpus  # noqa: E402
from .losses import AugmentedLoss, LanguageModelLoss  # noqa: E402
from .models import VDLSTM, FullSoftmaxOutput, LanguageModel, TiedOutput  # noqa: E402
from .run import load_run  # noqa: E402

__all__ = ["Config", "Vocabulary", "load_corpus", "AugmentedLoss", "LanguageModelLoss", "VDLSTM",
           "FullSoftmaxOutput", "LanguageModel", "TiedOutput", "load_run", "__version__"]
