"""The run folder of every task (language model, tagger, translator): one class owns its layout, so no other
module spells a file name.

::

    RUN/
      config.toml                the task (``task = "lm"``) and its full resolved settings (what `--resume` and
                                 `evaluate` read)
      vocab.txt                  the vocabulary, one word per line, in id order
      metrics.jsonl              one JSON record per epoch
      summary.json               written once the run finished (test perplexity, wall time, command)
      checkpoints/last.safetensors   the resumable training state (weights, optimiser, RNG, position)
      checkpoints/best.safetensors   the weights of the best validation epoch

Every task's run has this layout, plus its own files (the tagger's ``tags.txt``; the translator's sentencepiece
models and ``test.hyp.txt``). Folders written in older layouts are rewritten once by ``tools/migrate_runs.py``.

Text files are replaced atomically (write a temporary file, then rename), so an interrupted write never
leaves a half-written config or summary behind. One process at a time trains in a run folder
(:meth:`RunDir.training_lock`): a second ``--resume`` of the same folder, or a second ``reproduce`` naming it,
stops with a one-line error instead of interleaving its checkpoints and metrics with the first one's.
"""

from __future__ import annotations

import json
import os
import tempfile
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import TiedlmError, UsageError
from .paths import make_folder, remove_empty

try:
    import fcntl
except ImportError:  # Windows: no advisory locks; the folder is not guarded there
    fcntl = None


@dataclass(frozen=True)
class RunDir:
    path: Path

    def __init__(self, path: str | Path):
        object.__setattr__(self, "path", Path(path))

    # ----- the layout -------------------------------------------------------------------------
    @property
    def config(self) -> Path:
        return self.path / "config.toml"

    @property
    def vocab(self) -> Path:
        return self.path / "vocab.txt"

    @property
    def tags(self) -> Path:
        """A tagger's tag set, one per line (the model's output classes, in order)."""
        return self.path / "tags.txt"

    def subword_models(self, joint: bool, source: str, target: str) -> list[Path]:
        """A translator's sentencepiece models, source first: ``spm.joint.model``, or ``spm.LANG.model`` per
        language (each beside its ``.vocab``, which sentencepiece writes with it)."""
        return [self.path / f"spm.{name}.model" for name in (["joint"] if joint else [source, target])]

    def hypotheses(self, split: str) -> Path:
        """A translator's detokenized translations of ``split``, one per line (written after training)."""
        return self.path / f"{split}.hyp.txt"

    @property
    def metrics(self) -> Path:
        return self.path / "metrics.jsonl"

    @property
    def summary(self) -> Path:
        return self.path / "summary.json"

    @property
    def checkpoints(self) -> Path:
        return self.path / "checkpoints"

    def checkpoint(self, which: str) -> Path:
        """``last`` (the resumable state) or ``best`` (the best validation epoch's weights)."""
        return self.checkpoints / f"{which}.safetensors"

    # ----- its state ----------------------------------------------------------------------------
    def status(self) -> str:
        """finished | running (another process trains here now) | interrupted | missing."""
        if self.summary.is_file():
            return "finished"
        if self.is_training():
            return "running"
        if self.checkpoint("last").is_file():
            return "interrupted"
        return "missing"

    def is_training(self) -> bool:
        """Whether a process holds :meth:`training_lock` on this folder now (False where there is no folder)."""
        if fcntl is None or not self.path.is_dir():
            return False
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except OSError:  # a folder this user cannot open: nobody here trains in it
            return False
        try:
            return not _try_lock(fd)
        finally:
            os.close(fd)  # a lock this probe took goes with it

    @property
    def task(self) -> str | None:
        """The name of the task whose run this folder holds, as its ``config.toml`` records it (None: no readable
        config here)."""
        try:
            return tomllib.loads(self.config.read_text(encoding="utf-8")).get("task")
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
            return None

    def other_task_error(self, wanted: str, resuming: bool = False) -> UsageError | None:
        """None where this folder holds a ``wanted`` task's run (or records no task); else the one-line error that
        names what it holds and the command that works on it (``resuming``: the one that resumes it)."""
        from .registry import tasks

        known = tasks()
        if self.task in (None, wanted) or self.task not in known:
            return None
        info, p = known[self.task], self.path
        train, evaluate = " ".join(info.train), " ".join(info.evaluate)
        if not info.evaluate:
            use = f"`tiedlm {train} --resume {p}` finishes it (its results: {info.results})"
        elif resuming:
            use = f"`tiedlm {train} --resume {p}`"
        else:
            use = f"`tiedlm {evaluate} {p}`" + (
                f" or `tiedlm {train} --resume {p}`" if self.status() == "interrupted" else ""
            )
        return UsageError(f"{p} is a {info.noun} run (`tiedlm {train}`), not a {known[wanted].noun}'s: use {use}")

    def held_run_error(self, info) -> UsageError:
        """The refusal of a new run of task ``info`` (a :class:`~tiedlm.registry.TaskInfo`) in this folder, which
        holds a run: its task named, and ``--resume`` offered where the run is of the same task."""
        from .registry import tasks

        held, p = tasks().get(self.task or ""), self.path
        again = f"resume it with --resume {p} or " if held is info else ""
        return UsageError(f"{p} already holds a {held.noun if held else 'tiedlm'} run; {again}pick another --out")

    def require_config(self) -> None:
        """A one-line error unless this is a language-model run folder (the config.toml `tiedlm train` wrote);
        another task's run is named as such, with the commands that work on it."""
        if not self.path.exists():
            raise UsageError(f"{self.path} does not exist; give the --out folder of a `tiedlm train` run")
        if not self.config.is_file():
            raise UsageError(
                f"{self.path} is not a tiedlm run directory (no config.toml); give the --out folder of `tiedlm train`"
            )
        if error := self.other_task_error("lm"):
            raise error

    def read_metrics(self) -> list[dict[str, Any]]:
        """The run's metrics lines. A last line cut off in the middle (a process killed while writing it) is left
        out with a one-line warning (a resume writes the file again without it); a damaged line before the last
        is a one-line error naming the file and the line."""
        if not self.metrics.exists():
            return []
        lines = self.metrics.read_text(encoding="utf-8", errors="replace").splitlines()
        numbered = [(n, line) for n, line in enumerate(lines, start=1) if line.strip()]
        records = []
        for k, (n, line) in enumerate(numbered):
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                if k < len(numbered) - 1:
                    raise TiedlmError(
                        f"{self.metrics}, line {n}: not a metrics record (the file is damaged); restore the file, or "
                        "delete that line"
                    ) from None
                import sys

                print(f"tiedlm: {self.metrics}: its last line was cut off while written; left out", file=sys.stderr)
        return records

    def read_summary(self) -> dict[str, Any] | None:
        return json.loads(self.summary.read_text()) if self.summary.is_file() else None

    def busy_error(self) -> UsageError:
        """The refusal of a run while another process trains in this folder."""
        return UsageError(
            f"another process is training in {self.path}; wait for it to end (or stop it) before starting or "
            "resuming this run there"
        )

    def missing_checkpoint(self, which: str) -> str:
        """Why this run folder has no ``which`` checkpoint, with what to do: it is training now (before its first
        epoch ended) or it was stopped before its first epoch ended ("": neither)."""
        if self.is_training():
            return f"{self.path} is training now and has no {which} checkpoint yet; use it once its first epoch ends"
        if which == "best" and self.checkpoint("last").is_file():
            return f"{self.path} has no best checkpoint: it stopped before its first epoch ended; resume it"
        if not self.checkpoint("best").is_file() and not self.checkpoint("last").is_file():
            return f"{self.path} has no checkpoint: it stopped before writing one; train it again (--out {self.path})"
        return ""

    @contextmanager
    def training_lock(self, option: str = "--out") -> Iterator[None]:
        """Hold this run folder for one training process, made if missing and checked writable (a one-line error
        naming ``option``, not an OSError mid-setup). The folders made for this run (its parents too) are removed
        again if nothing was written in them. The lock is the kernel's ``flock`` on the folder itself: no lock file
        to go stale, and a killed holder releases it. Raises :class:`UsageError` at once when another process
        holds it."""
        made = make_folder(self.path, option)
        try:
            with folder_lock(self.path, str(self.busy_error())):
                yield
        finally:
            remove_empty(made)


@contextmanager
def folder_lock(folder: Path, busy: str) -> Iterator[None]:
    """Hold ``folder`` (the kernel's ``flock`` on it) for this process; another holder: :class:`UsageError`
    ``busy`` at once."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        if not _try_lock(fd):
            raise UsageError(busy)
        yield
    finally:
        os.close(fd)  # releases the lock


def _try_lock(fd: int) -> bool:
    """Take the exclusive ``flock`` on an open folder without waiting; False where another process holds it."""
    if fcntl is None:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def write_text_atomic(path: Path, text: str) -> None:
    """Write ``text`` to a temporary file beside ``path``, flush it to disk, then rename it over ``path``."""
    write_bytes_atomic(path, text.encode("utf-8"))


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to a temporary file beside ``path``, flush it to disk, rename it over ``path`` and flush the
    folder: the file is the old one or the new one after any crash, and a symbolic link planted at ``path`` is
    replaced, never written through."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes it private; a run's files are readable like any other
        os.replace(tmp, path)
        fsync_folder(path.parent)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def fsync_folder(folder: Path) -> None:
    """Flush a folder's entries (a rename into it) to disk, where the system allows it."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some file systems cannot sync a folder: the rename is as durable as they make it
    finally:
        os.close(fd)


def append_text(path: Path, text: str) -> None:
    """Append ``text`` to ``path``, a file of a run, never through a symbolic link; a folder or file that cannot
    be written is one line naming it (the last checkpoint is kept)."""
    path = Path(path)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644)
        with os.fdopen(fd, "a", encoding="utf-8") as f:
            f.write(text)
    except OSError as exc:
        why = "it is a symbolic link" if path.is_symlink() else (exc.strerror or str(exc))
        raise TiedlmError(
            f"could not write {path} ({why}); the last checkpoint is kept: make the folder writable (and remove "
            "any link put there) and resume the run"
        ) from None


def write_figure_atomic(path: Path, figure, dpi: int) -> None:
    """A matplotlib ``figure`` saved as ``path`` (the format its suffix names), atomically as every run file is."""
    import io

    buffer = io.BytesIO()
    figure.savefig(buffer, format=Path(path).suffix.lstrip(".") or "png", dpi=dpi)
    write_bytes_atomic(Path(path), buffer.getvalue())


def write_json_atomic(path: Path, obj: Any) -> None:
    write_text_atomic(path, json.dumps(obj, indent=2) + "\n")
