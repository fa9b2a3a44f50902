"""Translation with a Transformer encoder-decoder and an output layer from DRILL's family (Multi30k En→De)."""

from .config import TranslationConfig
from .data import ParallelCorpus, SubwordVocab, load_parallel_corpus
from .model import TransformerTranslator
from .search import beam_search, greedy_search
from .task import TranslationTask, evaluate_translator, load_translator, translate_lines

__all__ = [
    "ParallelCorpus",
    "SubwordVocab",
    "TransformerTranslator",
    "TranslationConfig",
    "TranslationTask",
    "beam_search",
    "evaluate_translator",
    "greedy_search",
    "load_parallel_corpus",
    "load_translator",
    "translate_lines",
]
