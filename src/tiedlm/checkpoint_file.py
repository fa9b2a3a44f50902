"""Checkpoint files: one safetensors file holding tensors plus a JSON metadata string.

No pickle: loading a checkpoint never executes code. Writes are atomic (temporary file in
the same folder, then ``os.replace``), so an interrupted write never leaves a broken file. The file format
sits at the bottom of the layers: training, dynamic evaluation and the run loader all read and write it.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from .errors import TiedlmError

FORMAT = "tiedlm-checkpoint/1"


def save_checkpoint(path: Path, tensors: dict[str, torch.Tensor], meta: dict) -> None:
    for name, t in tensors.items():
        if t.is_floating_point() and not torch.isfinite(t).all():
            raise TiedlmError(f"refusing to write {path.name}: tensor {name} has non-finite values")
    from safetensors import SafetensorError

    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        save_file(
            {k: v.detach().contiguous().cpu() for k, v in tensors.items()},
            tmp,
            metadata={"format": FORMAT, "meta": json.dumps(meta)},
        )
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except (OSError, SafetensorError) as exc:  # a full disk, a file-size limit, a folder gone read-only
        kept = f"the last good one, {path}, is kept" if path.is_file() else "no earlier one was written"
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise TiedlmError(
            f"could not write checkpoint {path.name} ({reason}); {kept}. Free disk space (or raise the file-size "
            "limit) and resume the run"
        ) from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def load_checkpoint(path: Path) -> tuple[dict[str, torch.Tensor], dict]:
    if not path.is_file():
        raise TiedlmError(f"checkpoint {path} does not exist; is this a tiedlm run directory?")
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
    return tensors, json.loads(header["meta"])
