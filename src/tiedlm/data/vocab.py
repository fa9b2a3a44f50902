"""Vocabulary sorted by training frequency."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Iterable

from ..errors import DataError
from ..paths import missing

EOS = "<eos>"
UNK = "<unk>"


class Vocabulary:
    """Word <-> id map; id 0 is the most frequent training word.

    Ties in frequency are broken by the word itself (code-point order), so the ids do not
    depend on the order of the text. Sorting by frequency is what frequency-band analyses
    and frequency-based sparse embeddings rely on.
    """

    def __init__(self, words: list[str], counts: list[int]):
        if len(words) != len(counts) or len(set(words)) != len(words):
            raise ValueError("words must be unique and match counts")
        self.words = list(words)
        self.counts = list(counts)
        self.index = {w: i for i, w in enumerate(self.words)}

    @classmethod
    def build(cls, tokens: Iterable[str]) -> "Vocabulary":
        return cls.from_counts(Counter(tokens))

    @classmethod
    def from_counts(cls, counts: dict[str, int]) -> "Vocabulary":
        """Words sorted by count, most frequent first; ties in code-point order."""
        items = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
        return cls([w for w, _ in items], [c for _, c in items])

    def __len__(self) -> int:
        return len(self.words)

    def __contains__(self, word: str) -> bool:
        return word in self.index

    def add(self, word: str, count: int = 0) -> int:
        if word not in self.index:
            self.index[word] = len(self.words)
            self.words.append(word)
            self.counts.append(count)
        return self.index[word]

    @property
    def unk_id(self) -> int | None:
        return self.index.get(UNK)

    def encode(self, tokens: Iterable[str]) -> tuple[list[int], int]:
        """Ids of ``tokens``; unknown words map to ``<unk>``. Returns (ids, number mapped to <unk>)."""
        unk = self.unk_id
        ids, n_unknown = [], 0
        for tok in tokens:
            i = self.index.get(tok)
            if i is None:
                if unk is None:
                    raise DataError(f"word {tok!r} is not in the vocabulary and the vocabulary has no {UNK}")
                i, n_unknown = unk, n_unknown + 1
            ids.append(i)
        return ids, n_unknown

    def save(self, path: Path) -> None:
        """One ``word<TAB>count`` line per id, in id order."""
        from ..run_dir import write_text_atomic  # atomic, and never through a link planted at path

        write_text_atomic(path, "".join(f"{w}\t{c}\n" for w, c in zip(self.words, self.counts)))

    @classmethod
    def load(cls, path: Path) -> "Vocabulary":
        path = Path(path)
        if not path.is_file():
            raise DataError(
                f"{path} {missing(path)}; a run folder needs the vocab.txt that `tiedlm train` wrote into it "
                f"(copy the whole run folder, not only its checkpoints)"
            )
        words, counts = [], []
        for n, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            word, _, count = line.rpartition("\t")
            if not word or not count.isdigit():
                raise DataError(f"{path}:{n}: expected 'word<TAB>count'; the vocabulary file is damaged")
            words.append(word)
            counts.append(int(count))
        return cls(words, counts)
