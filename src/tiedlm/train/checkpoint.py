"""A training run's checkpoint contents: the model's and the optimiser's tensors and the resumable state inside
the checkpoint files of :mod:`tiedlm.checkpoint_file` (safetensors, no pickle, written atomically)."""

from __future__ import annotations

from pathlib import Path

import torch

from ..checkpoint_file import FORMAT, load_checkpoint, save_checkpoint  # noqa: F401 (this module's API too)


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
    weights so far, the optimizer's state, the RNG states (the CPU's, and the GPU's for a model on one) and
    ``progress`` (JSON metadata)."""
    tensors = {f"model.{k}": v for k, v in model.state_dict().items()}
    tensors |= {f"best.{k}": v for k, v in best.items()}
    opt_tensors, groups = optimizer_tensors(opt)
    tensors |= opt_tensors
    tensors["rng"] = torch.get_rng_state()
    device = next(model.parameters()).device
    if device.type == "cuda":  # dropout on a GPU draws from the CUDA generator: an exact resume needs it too
        tensors["rng.cuda"] = torch.cuda.get_rng_state(device)
    save_checkpoint(path, tensors, progress | {"param_groups": groups})


def load_training_state(path: Path, model: torch.nn.Module, opt: torch.optim.Optimizer) -> tuple[dict, dict]:
    """Restore what :func:`save_training_state` wrote into ``model``, ``opt`` and the RNG; return
    (best weights, progress)."""
    tensors, meta = load_checkpoint(path)
    model.load_state_dict(model_state(tensors))
    load_optimizer(opt, tensors, meta.pop("param_groups"))
    torch.set_rng_state(tensors["rng"])
    device = next(model.parameters()).device
    if "rng.cuda" in tensors and device.type == "cuda":
        torch.cuda.set_rng_state(tensors["rng.cuda"], device)
    return model_state(tensors, "best."), meta
