"""Translation with a Transformer encoder-decoder and an output layer from DRILL's family (Multi30k En→De)."""

from ...registry import lazy_attributes

# each public name and its module, imported on first use: importing the package (its settings, which the task
# registry reads) loads no torch
_WHERE = {
    "TranslationConfig": ".config",
    "ParallelCorpus": ".data",
    "SubwordVocab": ".data",
    "load_parallel_corpus": ".data",
    "TransformerTranslator": ".model",
    "beam_search": ".search",
    "greedy_search": ".search",
    "TranslationTask": ".task",
    "evaluate_translator": ".task",
    "load_translator": ".task",
    "translate_lines": ".task",
}
__all__ = sorted(_WHERE)
__getattr__ = lazy_attributes(__name__, _WHERE)
