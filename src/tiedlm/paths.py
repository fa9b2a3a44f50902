"""Output folders: writable, and never a folder of committed results."""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

from .errors import UsageError


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


def refuse_committed(folder: Path, option: str = "--out") -> None:
    """Refuse an output folder that holds files tracked by git (committed results are never overwritten)."""
    folder = Path(folder)
    if not folder.is_dir():
        return
    try:
        tracked = subprocess.run(
            ["git", "ls-files", "--", "."], cwd=folder, capture_output=True, text=True, timeout=10
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return  # no git here: nothing can be committed
    if tracked:
        raise UsageError(
            f"{option} {folder} holds committed results (files tracked by git); write to another "
            f"folder, e.g. {option} runs/{folder.name}"
        )
