"""Part-of-speech tagging with dense or frequency-sparse embeddings (Demeester et al. 2018, §4.2)."""

from ...registry import lazy_attributes

# each public name and its module, imported on first use: importing the package (its settings, which the task
# registry reads) loads no torch
_WHERE = {
    "TaggerConfig": ".config",
    "TaggingCorpus": ".data",
    "load_tagging_corpus": ".data",
    "read_conllu": ".data",
    "BiLSTMTagger": ".model",
    "TaggerTask": ".task",
    "evaluate_tagger": ".task",
    "load_tagger": ".task",
}
__all__ = sorted(_WHERE)
__getattr__ = lazy_attributes(__name__, _WHERE)
