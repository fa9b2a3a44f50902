"""Output folders: writable, and never a folder of committed results; paths written as a user types them."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .errors import UsageError


def missing(path: Path) -> str:
    """How a file that is needed is not there: ``is missing``, or ``is not a regular file`` (a folder, a device)."""
    return "is not a regular file" if Path(path).exists() else "is missing"


def ensure_writable_folder(folder: Path, option: str = "--out") -> None:
    """Create ``folder`` if needed and check that files can be written there, before any work is done."""
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"{option} {folder} is a file, not a folder; give a folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".write-test.")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise UsageError(
            f"{option} {folder}: cannot write there ({exc.strerror or exc}); choose a folder you can write to"
        ) from None


def make_folder(folder: Path, option: str = "--out") -> list[Path]:
    """``folder`` made and checked as :func:`ensure_writable_folder` does; returns the folders this made, the
    innermost first, for :func:`remove_empty`."""
    folder = Path(folder)
    made = [p for p in (folder, *folder.parents) if not p.exists()]
    ensure_writable_folder(folder, option)
    return made


def remove_empty(made: list[Path]) -> None:
    """Remove the folders :func:`make_folder` made, the innermost first, as long as each is empty."""
    for path in made:
        try:
            path.rmdir()  # only an empty one
        except OSError:
            break


@contextmanager
def output_folder(folder: Path, option: str = "--out") -> Iterator[Path]:
    """``folder`` (:func:`make_folder`); where the block fails with the folders made here still empty (a run that
    cannot be read, a stop), they go again: a failed command leaves nothing."""
    made = make_folder(folder, option)
    try:
        yield Path(folder)
    except BaseException:
        remove_empty(made)
        raise


# git as it runs inside a folder that a user (or a downloaded archive) may have put a repository above: no config
# of that repository may run a command (core.fsmonitor is a command git runs on `ls-files`), and neither may the
# machine's or the user's git config
SAFE_GIT = (
    "git",
    "-c",
    "core.fsmonitor=false",
    "-c",
    "core.untrackedCache=false",
    "-c",
    f"core.hooksPath={os.devnull}",
)


def _git_env() -> dict[str, str]:
    return {
        **os.environ,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_OPTIONAL_LOCKS": "0",  # a read leaves the index as it is
    }


def refuse_committed(folder: Path, option: str = "--out") -> None:
    """Refuse an output folder that holds files tracked by git (committed results are never overwritten)."""
    folder = Path(folder)
    if not folder.is_dir():
        return
    try:
        tracked = subprocess.run(
            [*SAFE_GIT, "ls-files", "--", "."], cwd=folder, capture_output=True, text=True, timeout=10, env=_git_env()
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return  # no git here: nothing can be committed
    if tracked:
        raise UsageError(
            f"{option} {folder} holds committed results (files tracked by git); write to another "
            f"folder, e.g. {option} runs/{folder.name}"
        )


# an absolute path of a machine's own folders (not a URL's path: those follow "//host")
_ABSOLUTE = re.compile(r"(?<![\w$~.:/])/(?:root|home|work|tmp|mnt|Users|srv|scratch|data)/[^\s\"',;)\]]*")
_DATA = re.compile(r"^/.*?/(?:\.?data)/(?P<rest>[^/]+.*)$")
_RUNS = re.compile(r"^/(?:.*/)?(?:tiedlm-runs(?:/reproduce)?|hfruns|runs|tmp)/(?P<rest>.+)$")


def portable_path(path: str, run: bool = True) -> str:
    """One machine path as a user types it: a corpus folder (``…/data/ptb``, ``…/.data/ptb``) is
    ``$TIEDLM_DATA/ptb``; a run folder (``…/tiedlm-runs/[reproduce/]TABLE/RUN``, ``…/runs/RUN``, ``/tmp/RUN``) is
    ``runs/TABLE/RUN``, the folder ``tiedlm reproduce TABLE --runs runs`` and ``--out runs/RUN`` use, unless the
    path is known to be no run's (``run`` False: a corpus of one's own, ``/tmp/corpus``, stays where it is); any
    other path is unchanged."""
    tail = ":" if path.endswith(":") else ""
    path = path.rstrip(":")
    if m := _DATA.match(path):
        return f"$TIEDLM_DATA/{m['rest']}{tail}"
    if run and (m := _RUNS.match(path)):
        return f"runs/{m['rest']}{tail}"
    return path + tail


def portable(text: str) -> str:
    """``text`` with each machine path in it made portable (:func:`portable_path`): what published run files and
    benchmark results hold, so that a command copied from them runs on another machine."""
    return _ABSOLUTE.sub(lambda m: portable_path(m.group(0)), text)


def machine_paths(text: str) -> list[str]:
    """The absolute paths of a machine's own folders that ``text`` holds."""
    return _ABSOLUTE.findall(text)


def portable_command(argv: list[str]) -> str:
    """A run's command as recorded in its summary: ``tiedlm`` and the arguments, each path relative to the working
    folder where it lies below it, ``~/…`` below the home folder (:func:`portable_path` for the rest; the folder of
    ``--data`` or ``--data-dir`` is never taken for a run's)."""
    home, cwd = Path.home().resolve(), Path.cwd().resolve()
    words = []
    for before, arg in zip(["", *argv], argv):
        option, eq, value = arg.partition("=") if arg.startswith("--") else ("", "", arg)
        if value.startswith("/"):
            path = Path(value)
            if path.is_relative_to(cwd) and path != cwd:
                value = path.relative_to(cwd).as_posix()
            elif path.is_relative_to(home) and path != home:
                value = "~/" + path.relative_to(home).as_posix()
            else:
                data = any(word in ("--data", "--data-dir") for word in (option, before))
                value = portable_path(value, run=not data)
        word = option + eq + value
        words.append(word if value.startswith(("~/", "$TIEDLM_DATA")) else shlex.quote(word))
    return " ".join(["tiedlm", *words])
