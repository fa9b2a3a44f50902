"""Part-of-speech tagging with dense or frequency-sparse embeddings (Demeester et al. 2018, §4.2)."""

from .config import TaggerConfig
from .data import TaggingCorpus, load_tagging_corpus, read_conllu
from .model import BiLSTMTagger
from .task import TaggerTask, evaluate_tagger, load_tagger

__all__ = [
    "BiLSTMTagger",
    "TaggerConfig",
    "TaggerTask",
    "TaggingCorpus",
    "evaluate_tagger",
    "load_tagger",
    "load_tagging_corpus",
    "read_conllu",
]
