"""Checkpoints: one safetensors file holding tensors plus a JSON metadata string.

No pickle: loading a checkpoint never executes code. Writes are atomic (temporary file in
the same folder, then ``os.replace``), so an interrupted write never leaves a broken file.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from ..errors import TiedlmError

FORMAT = "tiedlm-checkpoint/1"


def save_checkpoint(path: Path, tensors: dict[str, torch.Tensor], meta: dict) -> None:
    for name, t in tensors.items():
        if t.is_floating_point() and not torch.isfinite(t).all():
            raise TiedlmError(f"refusing to write {path.name}: tensor {name} has non-finite values")
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


def model_state(tensors: dict[str, torch.Tensor], prefix: str = "model.") -> dict[str, torch.Tensor]:
    """A state dict stored inside a checkpoint's tensors under ``prefix`` (the model's: ``model.``)."""
    return {k[len(prefix) :]: v for k, v in tensors.items() if k.startswith(prefix)}


def optimizer_tensors(opt: torch.optim.Optimizer, prefix: str = "opt.") -> tuple[dict[str, torch.Tensor], list]:
    """An optimizer's per-parameter state as named tensors, and its param groups (JSON-able metadata)."""
    state = opt.state_dict()
    tensors = {
        f"{prefix}{i}.{k}": (v if torch.is_tensor(v) else torch.tensor(v))
        for i, s in state["state"].items()
        for k, v in s.items()
    }
    return tensors, state["param_groups"]


def load_optimizer(
    opt: torch.optim.Optimizer, tensors: dict[str, torch.Tensor], groups: list, prefix: str = "opt."
) -> None:
    """Restore what :func:`optimizer_tensors` saved."""
    state: dict[int, dict[str, torch.Tensor]] = {}
    for name, value in tensors.items():
        if name.startswith(prefix):
            i, key = name[len(prefix) :].split(".", 1)
            state.setdefault(int(i), {})[key] = value
    opt.load_state_dict({"state": state, "param_groups": groups})


def save_training_state(
    path: Path, model: torch.nn.Module, best: dict[str, torch.Tensor], opt: torch.optim.Optimizer, progress: dict
) -> None:
    """One atomic checkpoint of a run kept by its best weights (tagger, translator): the model, the best
    weights so far, the optimizer's state, the RNG state and ``progress`` (JSON metadata)."""
    tensors = {f"model.{k}": v for k, v in model.state_dict().items()}
    tensors |= {f"best.{k}": v for k, v in best.items()}
    opt_tensors, groups = optimizer_tensors(opt)
    tensors |= opt_tensors
    tensors["rng"] = torch.get_rng_state()
    save_checkpoint(path, tensors, progress | {"param_groups": groups})


def load_training_state(path: Path, model: torch.nn.Module, opt: torch.optim.Optimizer) -> tuple[dict, dict]:
    """Restore what :func:`save_training_state` wrote into ``model``, ``opt`` and the RNG; return
    (best weights, progress)."""
    tensors, meta = load_checkpoint(path)
    model.load_state_dict(model_state(tensors))
    load_optimizer(opt, tensors, meta.pop("param_groups"))
    torch.set_rng_state(tensors["rng"])
    return model_state(tensors, "best."), meta
