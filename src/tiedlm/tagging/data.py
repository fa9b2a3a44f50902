"""UD English-EWT (CoNLL-U) for UPOS tagging: sentences, a frequency-sorted vocabulary, padded batches."""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import torch

from ..data.corpus import resolve_source
from ..data.sources import TAGGING_SOURCES
from ..data.vocab import UNK, Vocabulary
from ..errors import DataError

Sentence = tuple[list[str], list[str]]  # words, UPOS tags
SPLITS = ("train", "dev", "test")


def read_conllu(path: Path) -> list[Sentence]:
    """(words, UPOS tags) per sentence; comments, multiword-token ranges (1-2) and empty nodes (1.1) skipped."""
    sentences, words, tags = [], [], []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            if words:
                sentences.append((words, tags))
                words, tags = [], []
            continue
        if line.startswith("#"):
            continue
        cols = line.split("\t")
        if len(cols) != 10:
            raise DataError(f"{path}:{n}: expected 10 tab-separated CoNLL-U columns, got {len(cols)}")
        if "-" in cols[0] or "." in cols[0]:
            continue
        words.append(cols[1])
        tags.append(cols[3])
    if words:
        sentences.append((words, tags))
    return sentences


def build_vocabulary(sentences: list[Sentence], min_count: int) -> Vocabulary:
    """Training words seen ``min_count`` times or more, sorted by frequency; the rest pooled into ``<unk>``.

    ``<unk>`` takes its place in the frequency order with the pooled count, so the frequency-based sparse
    embedding gives it as many dimensions as a word that frequent.
    """
    counts = Counter(w for words, _ in sentences for w in words)
    kept = Counter({w: c for w, c in counts.items() if c >= min_count})
    kept[UNK] = sum(c for c in counts.values() if c < min_count) + 1
    return Vocabulary.from_counts(kept)


@dataclass
class TaggingCorpus:
    vocab: Vocabulary
    tags: list[str]
    splits: dict[str, list[tuple[torch.Tensor, torch.Tensor]]]  # (word ids, tag ids) per sentence
    folder: Path

    def tokens(self, split: str) -> int:
        return sum(len(w) for w, _ in self.splits[split])

    def batches(self, split: str, batch_size: int, shuffle_seed: int | None = None):
        """(ids (B,T), tags (B,T) padded with -100, lengths (B,)) batches; shuffled when a seed is given."""
        data = list(self.splits[split])
        if shuffle_seed is not None:
            random.Random(shuffle_seed).shuffle(data)
        for start in range(0, len(data), batch_size):
            chunk = data[start : start + batch_size]
            lengths = torch.tensor([len(w) for w, _ in chunk])
            ids = torch.nn.utils.rnn.pad_sequence([w for w, _ in chunk], batch_first=True)
            tags = torch.nn.utils.rnn.pad_sequence([t for _, t in chunk], batch_first=True, padding_value=-100)
            yield ids, tags, lengths


def load_tagging_corpus(data_dir: str = "", min_count: int = 2, vocab: Vocabulary | None = None,
                        tags: list[str] | None = None) -> TaggingCorpus:
    """UD English-EWT r2.16 from ``data_dir``, the ``TIEDLM_DATA`` mirror or the download cache (verified)."""
    folder = resolve_source(TAGGING_SOURCES["ud-english-ewt"], data_dir)
    raw = {s: read_conllu(folder / TAGGING_SOURCES["ud-english-ewt"].file(s).name) for s in SPLITS}
    vocab = vocab or build_vocabulary(raw["train"], min_count)
    tags = tags or sorted({t for _, ts in raw["train"] for t in ts})
    tag_index = {t: i for i, t in enumerate(tags)}
    splits = {}
    for split, sentences in raw.items():
        encoded = []
        for words, ts in sentences:
            unknown = [t for t in ts if t not in tag_index]
            if unknown:
                raise DataError(f"{split} split has tag {unknown[0]!r} that the training split lacks")
            encoded.append((torch.tensor(vocab.encode(words)[0]), torch.tensor([tag_index[t] for t in ts])))
        splits[split] = encoded
    return TaggingCorpus(vocab, tags, splits, folder)
