"""Part-of-speech tagging with dense or frequency-sparse embeddings (Demeester et al. 2018, §4.2)."""

from ...registry import lazy_exports

# each public name imported from its module on first use: importing the package (its settings, which the task
# registry reads) loads no torch
__all__, __getattr__ = lazy_exports(
    __name__,
    {
        ".config": "TaggerConfig",
        ".data": "TaggingCorpus load_tagging_corpus read_conllu",
        ".model": "BiLSTMTagger",
        ".task": "TaggerTask evaluate_tagger load_tagger",
    },
)
