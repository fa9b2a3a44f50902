"""Translation with a Transformer encoder-decoder and an output layer from DRILL's family (Multi30k En→De)."""

from ...registry import lazy_exports

# each public name imported from its module on first use: importing the package (its settings, which the task
# registry reads) loads no torch
__all__, __getattr__ = lazy_exports(
    __name__,
    {
        ".config": "TranslationConfig",
        ".data": "ParallelCorpus SubwordVocab load_parallel_corpus",
        ".model": "TransformerTranslator",
        ".search": "beam_search greedy_search",
        ".task": "TranslationTask evaluate_translator load_translator translate_lines",
    },
)
