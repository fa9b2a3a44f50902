"""Corpora, vocabulary and batching: corpus -> token ids -> (bptt x batch) windows."""

from .batching import batchify, bptt_windows
from .corpus import Corpus, load_corpus, resolve_corpus_dir
from .vocab import Vocabulary

__all__ = ["Corpus", "Vocabulary", "batchify", "bptt_windows", "load_corpus", "resolve_corpus_dir"]
