"""Translation with a Transformer encoder-decoder and an output layer from DRILL's family (Multi30k En→De)."""

import importlib

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


def __getattr__(name: str):
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_WHERE[name], __name__), name)
