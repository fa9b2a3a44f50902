"""Where the standard corpora live: their canonical public URLs, pinned to commits, and SHA-256 digests, read from
the data file ``sources.toml`` beside this module (which says whose distributions they are; docs/data.md)."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class CorpusFile:
    split: str
    url: str
    sha256: str
    filename: str = ""  # name in the folder; "" = {split}.txt
    # url ends in .gz: the download is gunzipped; sha256 is always that of the (decompressed) file

    @property
    def name(self) -> str:
        return self.filename or f"{self.split}.txt"


@dataclass(frozen=True)
class CorpusSource:
    name: str  # folder name in a mirror / the cache
    files: tuple[CorpusFile, ...]

    def file(self, split: str) -> CorpusFile:
        return next(f for f in self.files if f.split == split)


def _load_sources() -> dict[str, dict[str, CorpusSource]]:
    """The corpora of ``sources.toml``, by kind (lm, tagging, translation) and folder name."""
    table = tomllib.loads(Path(__file__).with_name("sources.toml").read_text(encoding="utf-8"))
    kinds: dict[str, dict[str, CorpusSource]] = {}
    for folder, corpus in table.items():
        files = tuple(
            CorpusFile(
                f["split"], corpus["url"].format(remote=f.get("remote", f["split"])), f["sha256"], f.get("name", "")
            )
            for f in corpus["files"]
        )
        kinds.setdefault(corpus["kind"], {})[folder] = CorpusSource(folder, files)
    return kinds


_KINDS = _load_sources()
SOURCES, TAGGING_SOURCES = _KINDS["lm"], _KINDS["tagging"]  # language-model corpora; UD English-EWT
TRANSLATION_SOURCES = _KINDS["translation"]  # Multi30k

# Named corpora derived from a source: (source, which part of the training stream is kept).
# The WikiText-2 halves are the paper's Table 2 set-up: the training token stream cut in two
# equal parts; valid/test and the vocabulary (built on the full training set) are unchanged.
CORPORA: dict[str, tuple[str, str]] = {
    "ptb": ("ptb", "all"),
    "wikitext-2": ("wikitext-2", "all"),
    "wikitext-2-half1": ("wikitext-2", "half1"),
    "wikitext-2-half2": ("wikitext-2", "half2"),
}
SPLITS = ("train", "valid", "test")

# Vocabulary sizes of the standard corpora (types of the training split + <eos>), for parameter
# counts without reading the corpus; tests check them against the loaded corpora.
VOCAB_SIZES = {"ptb": 10000, "wikitext-2": 33278, "wikitext-2-half1": 33278, "wikitext-2-half2": 33278}
