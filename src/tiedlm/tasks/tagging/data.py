"""UD English-EWT (CoNLL-U) for UPOS tagging: sentences, a frequency-sorted vocabulary, padded batches."""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import torch

from ...data.corpus import read_text, resolve_source
from ...data.sources import TAGGING_SOURCES
from ...data.vocab import UNK, Vocabulary
from ...errors import DataError, UsageError

Sentence = tuple[list[str], list[str]]  # words, UPOS tags
SPLITS = ("train", "dev", "test")


def read_conllu(path: Path) -> list[Sentence]:
    """(words, UPOS tags) per sentence; comments, multiword-token ranges (1-2) and empty nodes (1.1) skipped."""
    sentences, words, tags = [], [], []
    for n, line in enumerate(read_text(path).splitlines(), 1):
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


def own_treebank_files(data_dir: str) -> dict[str, Path]:
    """The train, dev and test CoNLL-U files of a treebank folder of your own (one ``*{split}*.conllu`` each)."""
    folder = Path(data_dir).expanduser()
    if not folder.is_dir():
        raise UsageError(
            f"--data {data_dir!r} is not a folder; give a folder holding *train*.conllu, *dev*.conllu and *test*.conllu"
        )
    files = {}
    for split in SPLITS:
        found = sorted(folder.glob(f"*{split}*.conllu"))
        if len(found) != 1:
            what = "no" if not found else f"{len(found)}"
            raise DataError(
                f"{folder} has {what} *{split}*.conllu file{'s' if len(found) != 1 else ''}; a treebank "
                f"folder needs exactly one each of *train*.conllu, *dev*.conllu and *test*.conllu"
            )
        files[split] = found[0]
    return files


def load_tagging_corpus(
    data_dir: str = "",
    min_count: int = 2,
    vocab: Vocabulary | None = None,
    tags: list[str] | None = None,
    own_data: bool = False,
) -> TaggingCorpus:
    """UD English-EWT r2.16 from ``data_dir``, the ``TIEDLM_DATA`` mirror or the download cache (verified), or
    with ``own_data`` the treebank of your own in ``data_dir`` (read as it is)."""
    if own_data:
        files = own_treebank_files(data_dir)
    else:
        source = TAGGING_SOURCES["ud-english-ewt"]
        folder = resolve_source(
            source,
            data_dir,
            own=f"to train on a treebank of your own in that folder, use --data {data_dir}" if data_dir else "",
        )
        files = {s: folder / source.file(s).name for s in SPLITS}
    raw = {s: read_conllu(files[s]) for s in SPLITS}
    vocab = vocab or build_vocabulary(raw["train"], min_count)
    tags = tags or sorted({t for _, ts in raw["train"] for t in ts})
    splits = {split: encode_sentences(sentences, vocab, tags, f"{split} split") for split, sentences in raw.items()}
    return TaggingCorpus(vocab, tags, splits, files["train"].parent)


def encode_sentences(sentences, vocab: Vocabulary, tags: list[str], where: str) -> list:
    """(word ids, tag ids) per sentence; a tag the training split lacks is a one-line error naming ``where``."""
    tag_index = {t: i for i, t in enumerate(tags)}
    encoded = []
    for words, ts in sentences:
        unknown = [t for t in ts if t not in tag_index]
        if unknown:
            raise DataError(f"{where} has tag {unknown[0]!r} that the training split lacks")
        encoded.append((torch.tensor(vocab.encode(words)[0]), torch.tensor([tag_index[t] for t in ts])))
    return encoded
