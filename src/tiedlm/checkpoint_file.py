"""Checkpoint files: one safetensors file holding tensors plus a JSON metadata string.

No pickle: loading a checkpoint never executes code. Writes are atomic and durable (a temporary file in the same
folder, flushed to disk, then ``os.replace`` and the folder flushed), so an interrupted write never leaves a broken
file; a SHA-256 digest of the tensors and metadata is kept in the header and checked on loading, so a file damaged
later is named instead of evaluated. The file format sits at the bottom of the layers: training, dynamic evaluation
and the run loader all read and write it.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from .errors import TiedlmError
from .run_dir import RunDir, fsync_folder

FORMAT = "tiedlm-checkpoint/1"


def digest(tensors: dict[str, torch.Tensor], meta: str) -> str:
    """SHA-256 over the metadata string and every tensor's name, dtype, shape and bytes, in name order."""
    h = hashlib.sha256(meta.encode("utf-8"))
    for name in sorted(tensors):
        t = tensors[name].detach().contiguous().cpu()
        h.update(f"\0{name}\0{t.dtype}\0{tuple(t.shape)}\0".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def save_checkpoint(path: Path, tensors: dict[str, torch.Tensor], meta: dict) -> None:
    for name, t in tensors.items():
        if t.is_floating_point() and not torch.isfinite(t).all():
            raise TiedlmError(f"refusing to write {path.name}: tensor {name} has non-finite values")
    from safetensors import SafetensorError

    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        tensors = {k: v.detach().contiguous().cpu() for k, v in tensors.items()}
        text = json.dumps(meta)
        save_file(tensors, tmp, metadata={"format": FORMAT, "meta": text, "sha256": digest(tensors, text)})
        with open(tmp, "rb") as f:  # on disk before the rename: a crash leaves the old file or the new one
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
        fsync_folder(path.parent)
    except (OSError, SafetensorError) as exc:  # a full disk, a file-size limit, a folder gone read-only
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        if path.is_file():
            advice = (
                f"the last good one, {path}, is kept. Free disk space (or raise the file-size limit) and resume the run"
            )
        elif (path.parent / "last.safetensors").is_file():
            advice = "Free disk space (or raise the file-size limit) and resume the run"
        else:  # nothing to resume from: the run starts again in its folder
            advice = (
                "no checkpoint was written yet, so the run has nothing to resume: free disk space (or raise the "
                "file-size limit) and start it again with the same command"
            )
        raise TiedlmError(f"could not write checkpoint {path.name} ({reason}); {advice}") from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def clear_temporaries(folder: Path) -> list[Path]:
    """Remove the temporary files that a write killed before its rename left in ``folder`` and its
    ``checkpoints/`` (``.NAME.*.tmp``); only while the run's lock is held, so no write of another process is cut.
    Returns the files removed."""
    removed = []
    for where in (Path(folder), Path(folder) / "checkpoints"):
        for tmp in where.glob(".*.tmp") if where.is_dir() else ():
            if tmp.is_file() and not tmp.is_symlink():
                tmp.unlink()
                removed.append(tmp)
    return removed


def load_checkpoint(path: Path) -> tuple[dict[str, torch.Tensor], dict]:
    if not path.is_file():
        run = RunDir(path.parent.parent)  # in a run folder: why it has none
        why = run.missing_checkpoint(path.stem) if path == run.checkpoint(path.stem) and run.config.is_file() else ""
        raise TiedlmError(why or f"checkpoint {path} does not exist; is this a tiedlm run directory?")
    try:
        with safe_open(str(path), framework="pt") as f:
            header = f.metadata() or {}
        tensors = load_file(str(path))
    except Exception as exc:  # safetensors raises several types for damaged files
        other = "--checkpoint last" if path.stem == "best" else "--checkpoint best"
        raise TiedlmError(
            f"checkpoint {path} cannot be read ({str(exc).splitlines()[0]}); it is damaged: use the "
            f"other one ({other} for evaluate/predict; a run resumes only from last)"
        ) from None
    if header.get("format") != FORMAT:
        raise TiedlmError(f"{path} is not a {FORMAT} file")
    if "sha256" in header and digest(tensors, header["meta"]) != header["sha256"]:  # files from 0.1.0 have none
        other = "--checkpoint last" if path.stem == "best" else "--checkpoint best"
        raise TiedlmError(
            f"checkpoint {path} is damaged (its tensors do not match the SHA-256 digest written with them); use the "
            f"other one ({other} for evaluate/predict; a run resumes only from last)"
        )
    return tensors, json.loads(header["meta"])
