"""Load a word-level corpus: find (or download) its files, verify them, tokenize, index.

Where files come from, first match wins:
1. an explicit folder (``data.data_dir`` / ``--data-dir``);
2. a mirror named by the ``TIEDLM_DATA`` environment variable, laid out like
   ``TIEDLM_DATA/ptb/train.txt`` (our machines point it at ``shared/data``);
3. the user cache (``$XDG_CACHE_HOME/tiedlm`` or ``~/.cache/tiedlm``), filled on first use by
   downloading from the canonical public locations in :mod:`tiedlm.data.sources`.
Files of the standard corpora are always checked against their SHA-256.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import torch

from ..errors import DataError, UsageError
from .sources import CORPORA, SOURCES, SPLITS, CorpusFile, CorpusSource
from .vocab import EOS, UNK, Vocabulary

ENV_VAR = "TIEDLM_DATA"


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tiedlm"


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _verify(path: Path, spec: CorpusFile, fix: str) -> None:
    got = sha256_of(path)
    if got != spec.sha256:
        raise DataError(
            f"{path}: sha256 {got[:16]}… does not match the expected {spec.sha256} "
            f"(damaged or a different version); {fix}"
        )


def _download(spec: CorpusFile, dest: Path) -> None:
    from tqdm import tqdm

    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(spec.url, timeout=60) as resp:
            total = int(resp.headers.get("Content-Length") or 0) or None
            with tqdm(total=total, unit="B", unit_scale=True, desc=f"download {dest.parent.name}/{dest.name}",
                      leave=False) as bar:
                for chunk in iter(lambda: resp.read(1 << 16), b""):
                    out.write(chunk)
                    bar.update(len(chunk))
        if spec.url.endswith(".gz"):  # the digest is the decompressed file's
            with gzip.open(tmp, "rb") as f:
                data = f.read()
            Path(tmp).write_bytes(data)
        _verify(Path(tmp), spec, f"the download from {spec.url} is not the expected file; try again later "
                                 f"or place a verified copy at {dest}")
        os.replace(tmp, dest)
    except (urllib.error.URLError, OSError, TimeoutError, EOFError) as exc:
        raise DataError(
            f"could not download {spec.url} ({getattr(exc, 'reason', exc)}); check the network, or set "
            f"{ENV_VAR} to a folder holding {dest.parent.name}/{dest.name}"
        ) from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def resolve_corpus_dir(name: str, data_dir: str = "", download: bool = True) -> Path:
    """Folder holding verified ``train.txt``, ``valid.txt`` and ``test.txt`` for corpus ``name``."""
    if name not in CORPORA:
        folder = Path(data_dir or name)
        if not folder.is_dir():
            raise UsageError(
                f"data.name = {name!r} is neither a known corpus ({', '.join(CORPORA)}) nor a folder; "
                "give one of those names or a folder holding train.txt, valid.txt and test.txt"
            )
        for split in SPLITS:
            if not (folder / f"{split}.txt").is_file():
                raise DataError(f"{folder / (split + '.txt')} is missing; a corpus folder needs train.txt, valid.txt and test.txt")
        return folder

    return resolve_source(SOURCES[CORPORA[name][0]], data_dir, download)


def resolve_source(source: CorpusSource, data_dir: str = "", download: bool = True) -> Path:
    """Folder holding the verified files of ``source``: ``data_dir``, else the mirror, else the download cache."""
    mirror = os.environ.get(ENV_VAR)
    if data_dir:
        folder, origin = Path(data_dir), "data.data_dir"
    elif mirror:
        folder, origin = Path(mirror) / source.name, f"the {ENV_VAR} mirror"
    else:
        folder, origin = cache_root() / source.name, "cache"
    for spec in source.files:
        path = folder / spec.name
        if origin == "cache":
            if not path.is_file():
                if not download:
                    raise DataError(f"{path} is missing; run once with network access to download it")
                _download(spec, path)
            _verify(path, spec, f"delete it to download it again from {spec.url}")
        else:
            if not path.is_file():
                raise DataError(
                    f"{path} is missing (from {origin}); expected the {source.name} {spec.split} split with "
                    f"sha256 {spec.sha256}, available at {spec.url}; put it there, or unset {ENV_VAR} to download"
                )
            _verify(path, spec, f"replace it with the file from {spec.url}")
    return folder


def read_tokens(path: Path) -> list[str]:
    """Whitespace tokens with ``<eos>`` after every line, empty lines included."""
    text = path.read_text(encoding="utf-8")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    tokens: list[str] = []
    for line in lines:
        tokens.extend(line.split())
        tokens.append(EOS)
    return tokens


@dataclass
class Corpus:
    """A tokenized corpus: vocabulary plus one 1-D LongTensor of ids per split."""

    name: str
    folder: Path
    vocab: Vocabulary
    splits: dict[str, torch.Tensor]
    unknown: dict[str, int] = field(default_factory=dict)  # tokens mapped to <unk> per split

    @property
    def train(self) -> torch.Tensor:
        return self.splits["train"]

    @property
    def valid(self) -> torch.Tensor:
        return self.splits["valid"]

    @property
    def test(self) -> torch.Tensor:
        return self.splits["test"]


def load_corpus(name: str, data_dir: str = "", vocab: Vocabulary | None = None) -> Corpus:
    """Load corpus ``name`` (see module docstring). With ``vocab`` given (a trained run's),
    ids follow it instead of a vocabulary built from the training split."""
    folder = resolve_corpus_dir(name, data_dir)
    part = CORPORA.get(name, (name, "all"))[1]
    tokens = {split: read_tokens(folder / f"{split}.txt") for split in SPLITS}
    if vocab is None:
        vocab = Vocabulary.build(tokens["train"])  # halves share the full training vocabulary
        if UNK not in vocab and any(t not in vocab for s in ("valid", "test") for t in tokens[s]):
            vocab.add(UNK)
    if part != "all":
        half = len(tokens["train"]) // 2
        tokens["train"] = tokens["train"][:half] if part == "half1" else tokens["train"][half:]
    splits, unknown = {}, {}
    for split in SPLITS:
        ids, n_unk = vocab.encode(tokens[split])
        splits[split] = torch.tensor(ids, dtype=torch.long)
        unknown[split] = n_unk
    return Corpus(name=name, folder=folder, vocab=vocab, splits=splits, unknown=unknown)

