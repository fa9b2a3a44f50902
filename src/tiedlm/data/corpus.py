"""Load a word-level corpus: find (or download) its files, verify them, tokenize, index.

Where files come from, first match wins:
1. an explicit folder (``data.data_dir`` / ``--data-dir``);
2. a mirror named by the ``TIEDLM_DATA`` environment variable, laid out like ``TIEDLM_DATA/ptb/train.txt``
   (a folder of verified copies, e.g. on a machine without internet);
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
from ..paths import missing
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
            f"{path} is not the verified {spec.split} file of this corpus (sha256 {got[:16]}…, expected "
            f"{spec.sha256[:16]}…: damaged, another version, or other text); {fix}"
        )


MAX_DECOMPRESSED = 1 << 30  # a verified corpus file is tens of MB: a .gz that expands past 1 GiB is not one


def _gunzip(path: Path, spec: CorpusFile, cap: int = MAX_DECOMPRESSED) -> None:
    """Replace the gzip file ``path`` by its content, decompressed in chunks; past ``cap`` bytes it is refused in one
    line (a decompression bomb fills neither memory nor disk)."""
    out_path = path.with_name(path.name + ".gunzip")
    try:
        with gzip.open(path, "rb") as f, open(out_path, "wb") as out:
            size = 0
            for chunk in iter(lambda: f.read(1 << 20), b""):
                size += len(chunk)
                if size > cap:
                    raise DataError(
                        f"the download from {spec.url} decompresses to more than {cap:,} bytes, so it is not the "
                        f"expected {spec.split} file; try again later or place a verified copy of it yourself"
                    )
                out.write(chunk)
        os.replace(out_path, path)
    finally:
        out_path.unlink(missing_ok=True)


def _download(spec: CorpusFile, dest: Path) -> None:
    from tqdm import tqdm

    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(spec.url, timeout=60) as resp:
            total = int(resp.headers.get("Content-Length") or 0) or None
            with tqdm(
                total=total, unit="B", unit_scale=True, desc=f"download {dest.parent.name}/{dest.name}", leave=False
            ) as bar:
                for chunk in iter(lambda: resp.read(1 << 16), b""):
                    out.write(chunk)
                    bar.update(len(chunk))
        if spec.url.endswith(".gz"):  # the digest is the decompressed file's: streamed, and never past the cap
            _gunzip(Path(tmp), spec)
        _verify(
            Path(tmp),
            spec,
            f"the download from {spec.url} is not the expected file; try again later "
            f"or place a verified copy at {dest}",
        )
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
        folder = Path(data_dir or name).expanduser()
        if not folder.is_dir():
            what = "a file, not a folder" if folder.exists() else "neither a known corpus nor an existing folder"
            raise UsageError(
                f"data {name!r} is {what}; give a corpus name ({', '.join(CORPORA)}) or a folder holding "
                "train.txt, valid.txt and test.txt (--data FOLDER)"
            )
        for split in SPLITS:
            if not (folder / f"{split}.txt").is_file():
                raise DataError(
                    f"{folder / (split + '.txt')} {missing(folder / (split + '.txt'))}{_found_instead(folder, split)}; "
                    "a corpus folder needs "
                    "train.txt, valid.txt and test.txt (one sentence or paragraph per line, tokens separated by spaces)"
                )
        return folder
    if data_dir and not Path(data_dir).expanduser().is_dir():
        raise UsageError(
            f"--data-dir {data_dir!r} is not a folder; give the folder holding the {name} files "
            f"train.txt, valid.txt and test.txt, or --data FOLDER to train on a corpus of your own"
        )
    own = f"to train on your own text in that folder, use --data {data_dir} (read as it is, no checksum)"
    return resolve_source(SOURCES[CORPORA[name][0]], data_dir, download, own=own if data_dir else "")


def _found_instead(folder: Path, split: str) -> str:
    """What stands in ``folder`` where ``SPLIT.txt`` should (another case, a compressed copy, a folder of that
    name), as the error says it: " (found Train.txt: rename it to train.txt)"; "" where nothing does."""
    want = f"{split}.txt"
    if (folder / want).is_dir():
        return f" (found a folder {want}: the split must be a file)"
    near = sorted(p.name for p in folder.iterdir() if p.name != want and p.name.lower().startswith(want.lower()))
    near += sorted(p.name for p in folder.iterdir() if p.name.lower() == want.lower() and p.name != want)
    if not near:
        return ""
    fix = "decompress it" if near[0].lower().endswith((".gz", ".bz2", ".xz", ".zip")) else f"rename it to {want}"
    return f" (found {near[0]}: {fix})"


def resolve_source(source: CorpusSource, data_dir: str = "", download: bool = True, own: str = "") -> Path:
    """Folder holding the verified files of ``source``: ``data_dir``, else the mirror, else the download cache.

    ``own`` tells a user whose folder holds other files how to use them as their own corpus instead."""
    mirror = os.environ.get(ENV_VAR, "")
    if data_dir:
        folder, origin = Path(data_dir).expanduser(), "--data-dir"
    elif mirror:
        folder, origin = Path(mirror) / source.name, f"the {ENV_VAR} mirror"
    else:
        folder, origin = cache_root() / source.name, "cache"
    for spec in source.files:
        path = folder / spec.name
        if origin == "cache":
            if not path.is_file():
                if not download:
                    raise DataError(f"{path} {missing(path)}; run once with network access to download it")
                _download(spec, path)
            _verify(path, spec, f"delete it to download it again from {spec.url}")
        else:
            if not path.is_file():
                fix = f"unset {ENV_VAR} to download it" if origin != "--data-dir" else "drop --data-dir"
                raise DataError(
                    f"{path} {missing(path)} (from {origin}); expected the {source.name} {spec.split} split with "
                    f"sha256 {spec.sha256}, available at {spec.url}; put it there, or {fix}"
                    + (f"; {own}" if own else "")
                )
            fix = f"to use {source.name}, replace it with the file from {spec.url}"
            _verify(path, spec, f"{own}; {fix}" if own else fix)
    return folder


def read_tokens(path: Path) -> list[str]:
    """Whitespace tokens with ``<eos>`` after every line, empty lines included. A file whose lines end in CR
    alone (old Mac line ends) is read line by line too, not as one line."""
    text = read_text(path)
    lines = text.split("\n" if "\n" in text or "\r" not in text else "\r")
    if lines and lines[-1] == "":
        lines.pop()
    tokens: list[str] = []
    for n, line in enumerate(lines, 1):
        words = line.split()
        if EOS in line and EOS in words:
            raise DataError(
                f"{path}, line {n}: the text holds the token {EOS}, which tiedlm adds at the end of every line "
                "(one sentence a line); remove it or write it otherwise, or it merges with the sentence ends"
            )
        tokens.extend(words)
        tokens.append(EOS)
    return tokens


def read_text(path: Path) -> str:
    """The file as UTF-8 text, without a byte-order mark (which would otherwise be part of the first word); a
    one-line error naming the file and line of the first byte that is not UTF-8."""
    data = path.read_bytes()
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise DataError(f"{path} is UTF-16 text; save it as UTF-8 (e.g. iconv -f utf-16 -t utf-8)")
    if b"\x00" in data:
        at = data.index(b"\x00")
        line = data.count(b"\n", 0, at) + 1
        raise DataError(
            f"{path}, line {line}: a NUL byte; this is not a text file (or not UTF-8: save it as UTF-8 text)"
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise DataError(
            f"{path}, line {line}, column {column}: byte 0x{data[exc.start]:02x} is not UTF-8 text; "
            f"save the file as UTF-8 (e.g. iconv -f latin1 -t utf-8)"
        ) from None


def check_split_sizes(corpus: "Corpus", streams: dict[str, int]) -> None:
    """Every split holds words, and enough tokens for its number of parallel ``streams`` (batch size):
    at least two time steps per stream. Raises a one-line error naming the file and the fix."""
    hints = {"train": "train.batch_size", "valid": "train.eval_batch_size", "test": "the test's one stream"}
    for split in corpus.splits:
        check_split(corpus, split, streams.get(split, 1), hints[split])


def check_split(corpus: "Corpus", split: str, streams: int, hint: str) -> None:
    """``split`` holds words, and at least two time steps for each of ``streams`` parallel streams; else a
    one-line error naming the file and the fix (``hint``: the setting that lowers the streams)."""
    ids, path = corpus.splits[split], corpus.folder / f"{split}.txt"
    if corpus.words.get(split, 1) == 0:
        raise DataError(
            f"{path} holds no words (it is empty or blank); put text in it, one sentence or paragraph per line"
        )
    need = 2 * streams + 1
    if ids.numel() < need:
        raise DataError(
            f"{path} holds {ids.numel()} tokens (words and line ends), too few for {streams} parallel stream"
            f"{'s' * (streams != 1)} of at least 2 steps (needs {need}); add text or lower {hint}"
        )


@dataclass
class Corpus:
    """A tokenized corpus: vocabulary plus one 1-D LongTensor of ids per split."""

    name: str
    folder: Path
    vocab: Vocabulary
    splits: dict[str, torch.Tensor]
    unknown: dict[str, int] = field(default_factory=dict)  # tokens mapped to <unk> per split
    words: dict[str, int] = field(default_factory=dict)  # tokens other than <eos> per split

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
        if UNK not in vocab:  # always: evaluate --data, predict and generate read an unseen word as <unk>
            vocab.add(UNK)
    if part != "all":
        half = len(tokens["train"]) // 2
        tokens["train"] = tokens["train"][:half] if part == "half1" else tokens["train"][half:]
    splits, unknown, words = {}, {}, {}
    for split in SPLITS:
        ids, n_unk = vocab.encode(tokens[split])
        splits[split] = torch.tensor(ids, dtype=torch.long)
        unknown[split] = n_unk
        words[split] = sum(t != EOS for t in tokens[split])
    return Corpus(name=name, folder=folder, vocab=vocab, splits=splits, unknown=unknown, words=words)
