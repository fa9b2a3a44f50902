"""A training run's checkpoint contents: the model's and the optimiser's tensors and the resumable state inside
the checkpoint files of :mod:`tiedlm.checkpoint_file` (safetensors, no pickle, written atomically)."""

from __future__ import annotations

from pathlib import Path

import torch

from ..checkpoint_file import FORMAT, load_checkpoint, save_checkpoint  # noqa: F401 (this module's API too)
from ..errors import DataError


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


def save_train_state(
    path: Path,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    progress: dict,
    extra_tensors: dict[str, torch.Tensor] | None = None,
    extra_meta: dict | None = None,
    rank_rng: list[torch.Tensor] | None = None,
) -> None:
    """The resumable checkpoint of a run of any task (``checkpoints/last.safetensors``), one schema: the model
    (``model.*``), the optimiser (``opt.*``, its param groups in the metadata), the RNG states (``rng.torch``;
    every rank's, ``rng.torch.rankN``, under torchrun; ``rng.cuda`` for a model on a GPU, whose dropout draws
    from it), the loop's position (``progress``: :meth:`tiedlm.train.loop.Progress.meta`, the metadata's top
    level) and what the task adds: tensors under prefixes of its own (NT-ASGD's ``avg.``, the language model's
    carried ``state.``) and JSON under ``task``. The best weights are the ``best`` checkpoint
    (:func:`save_best_weights`)."""
    tensors = {f"model.{k}": v for k, v in model.state_dict().items()}
    opt_tensors, groups = optimizer_tensors(optimizer)
    tensors |= opt_tensors
    tensors["rng.torch"] = torch.get_rng_state()
    tensors |= {f"rng.torch.rank{r}": state for r, state in enumerate(rank_rng or [])}
    device = next(model.parameters()).device
    if device.type == "cuda":
        tensors["rng.cuda"] = torch.cuda.get_rng_state(device)
    tensors |= extra_tensors or {}
    save_checkpoint(path, tensors, {**progress, "param_groups": groups, "task": extra_meta or {}})


def require_fit(model: torch.nn.Module, weights: dict[str, torch.Tensor], path: Path) -> None:
    """A one-line error where the checkpoint ``path``'s ``weights`` are not this model's (another model size or
    output layer: a checkpoint from another run), instead of PyTorch's size-mismatch or unexpected-keys trace."""
    want = model.state_dict()
    missing, extra = sorted(set(want) - set(weights)), sorted(set(weights) - set(want))
    shapes = [k for k in want if k in weights and weights[k].shape != want[k].shape]
    if not (missing or extra or shapes):
        return
    what = (
        f"{weights[shapes[0]].shape[:]} where this run's model has {want[shapes[0]].shape[:]} for {shapes[0]}"
        if shapes
        else f"{'no ' + missing[0] if missing else 'a tensor ' + extra[0] + ' this model lacks'}"
    )
    raise DataError(
        f"{path} does not fit the model of its run's config.toml ({what}): it comes from another run's model "
        "size or output layer; restore the run's own checkpoint, or its config.toml"
    )


def restore_train_state(
    path: Path, tensors: dict[str, torch.Tensor], meta: dict, model: torch.nn.Module, optimizer, rank: int = 0
) -> None:
    """Restore what :func:`save_train_state` wrote (``tensors`` and ``meta``, read from ``path``) into ``model``,
    ``optimizer`` and the RNG (this ``rank``'s)."""
    require_fit(model, model_state(tensors), path)
    model.load_state_dict(model_state(tensors))
    if meta.get("param_groups"):  # none in an SGD run's checkpoint migrated from before the one schema
        load_optimizer(optimizer, tensors, meta["param_groups"])
    torch.set_rng_state(tensors.get(f"rng.torch.rank{rank}", tensors["rng.torch"]))
    device = next(model.parameters()).device
    if "rng.cuda" in tensors and device.type == "cuda":
        torch.cuda.set_rng_state(tensors["rng.cuda"], device)


def save_best_weights(path: Path, weights: dict[str, torch.Tensor], meta: dict) -> None:
    """The ``best`` checkpoint of a run of any task: the weights of its best validation (``model.*``) and
    ``meta`` (the epoch and score, and what the task adds)."""
    save_checkpoint(path, {f"model.{k}": v for k, v in weights.items()}, {"which": "best", **meta})


def best_weights(files) -> dict[str, torch.Tensor]:
    """The best weights of the run folder ``files`` (a :class:`~tiedlm.run_dir.RunDir`): its ``best``
    checkpoint."""
    return model_state(load_checkpoint(files.checkpoint("best"))[0])


def state_tensors(state) -> dict[str, torch.Tensor]:
    """An encoder's carried state (per layer a tuple of tensors) as checkpoint tensors ``state.{layer}.{j}``."""
    return {f"state.{i}.{j}": t.clone() for i, layer in enumerate(state or []) for j, t in enumerate(layer)}


def carried_state(tensors: dict[str, torch.Tensor], device) -> list | None:
    """The carried state saved by :func:`state_tensors`; None where the checkpoint holds none."""
    layers: dict[int, dict[str, torch.Tensor]] = {}
    for name, t in tensors.items():
        if name.startswith("state."):
            _, i, j = name.split(".")
            layers.setdefault(int(i), {})[j] = t.to(device)
    if not layers:
        return None
    return [tuple(parts[j] for j in sorted(parts, key=int)) for _, parts in sorted(layers.items())]
