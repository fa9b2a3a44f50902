"""Dynamic evaluation (Krause et al. 2018, "Dynamic Evaluation of Neural Sequence Models"), RMS variant.

The model reads the evaluation stream segment by segment (``bptt`` = 5 tokens by default). Each segment
is scored *before* the model learns from it; then every weight tensor θ_p takes one step computed from the
weights *before* the step (Krause et al. eq. 9 with the global decay of §5):

    θ_p ← θ_p − η · ∇_p L(segment) / (MS_p + ε) + λ · decrate_p ⊙ (θ_p⁰ − θ_p)

- MS_p is the root-mean-square of the gradient of each weight over the segments of the *training* data
  (:func:`gradient_rms`: ``stat_batch_size`` = 100 parallel streams of ``bptt`` tokens, dropout off);
- θ⁰ are the trained weights;
- decrate_p = MS_p / mean_q(mean(MS_q)), the RMS normalised by its average over the parameter tensors,
  clipped at 1/λ so that the decay never overshoots θ⁰.

This is the convention of Krause et al.'s public code (benkrause/dynamic-evaluation) after they corrected it to
follow the paper's equations, and its defaults are that code's: η = 5e-5, λ = 0.002, ε = 2e-5, and the grid
η ∈ {3, 4, 5, 6, 7, 10}·10⁻⁵, λ ∈ {1, 2, 3, 5}·10⁻³ (both scaled by bptt/5). The paper's AWD-LSTM numbers
(η 0.002, λ 0.02, ε 0.001, which Pappas & Henderson also use) were found with the *original* code, which
summed where the paper averages; ``old_hyper = True`` converts them the way the reference's ``--oldhyper``
does: λ/n_tensors, η/√n_segments and ε/√n_segments, with n_segments the number of statistics segments.

Dropout is off. The caller's model is never modified: the adaptation runs on a copy, and nothing is written
to the run directory.

A long evaluation resumes: ``save_to`` (a file) receives the adapted weights, the carried state, the position
and the running sums at least every ``save_seconds`` (atomically, after a whole segment), and a later call with
the same file continues from there to the very numbers of an uninterrupted pass (dropout is off, so nothing
random is involved). :func:`save_statistics` / :func:`load_statistics` keep the gradient statistics.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import time
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from ..data.batching import batchify, bptt_windows, num_windows
from ..losses.fused import at_least_fp32
from ..models.encoders.state import detach_state
from ..runtime import autocast
from .dynamic_settings import GRID_LAMBDAS, GRID_LRS, DynamicEvalSettings  # noqa: F401 (its settings, here too)

DEFAULT_SAVE_SECONDS = 60.0  # a resumable pass saves its progress at least this often


@dataclass
class GradientStatistics:
    """MS per parameter tensor (:func:`gradient_rms`) and the number of training segments it averages."""

    rms: list[torch.Tensor]
    segments: int


def _segment_loss(model, x, y, state, device, precision):
    with autocast(device, precision):
        logits, state = model(x, state)
    return F.cross_entropy(at_least_fp32(logits).reshape(-1, logits.size(-1)), y.reshape(-1)), state


def gradient_rms(
    model, train_ids: torch.Tensor, settings: DynamicEvalSettings, precision: str = "fp32", progress: bool = False
) -> GradientStatistics:
    """MS_p = sqrt(mean over training segments of (∂L/∂θ_p)²), L the mean cross-entropy of a segment of
    ``stat_batch_size`` streams × ``bptt`` tokens, dropout off, state carried. The model is unchanged."""
    from tqdm import tqdm

    device = model.embedding.weight.device
    ids = train_ids[: settings.stat_tokens + 1] if settings.stat_tokens else train_ids
    streams = max(1, min(settings.stat_batch_size, (ids.numel() - 1) // 2))
    data = batchify(ids, streams).to(device)
    params = list(model.parameters())
    sums = [torch.zeros_like(p) for p in params]
    was_training = model.training
    model.eval()
    state, n = model.init_state(streams), 0
    try:
        for _, x, y in tqdm(
            bptt_windows(data, settings.bptt),
            total=num_windows(data, settings.bptt),
            desc="gradient statistics",
            disable=not progress,
            leave=False,
            unit="seg",
        ):
            model.zero_grad(set_to_none=True)
            loss, state = _segment_loss(model, x, y, detach_state(state), device, precision)
            loss.backward()
            for s, p in zip(sums, params):
                if p.grad is not None:
                    s.addcmul_(p.grad, p.grad)
            n += 1
    finally:
        model.zero_grad(set_to_none=True)
        model.train(was_training)
    return GradientStatistics([s.div_(max(n, 1)).sqrt_() for s in sums], n)


def save_statistics(path: Path, stats: GradientStatistics) -> None:
    from ..checkpoint_file import save_checkpoint

    save_checkpoint(path, {f"rms.{i}": t for i, t in enumerate(stats.rms)}, {"segments": stats.segments})


def load_statistics(path: Path) -> GradientStatistics:
    from ..checkpoint_file import load_checkpoint

    tensors, meta = load_checkpoint(path)
    return GradientStatistics([tensors[f"rms.{i}"] for i in range(len(tensors))], meta["segments"])


def effective_settings(settings: DynamicEvalSettings, stats: GradientStatistics) -> DynamicEvalSettings:
    """``settings`` in the paper's scaling: unchanged, or converted from the original code's (``old_hyper``)."""
    if not settings.old_hyper:
        return settings
    root = math.sqrt(max(stats.segments, 1))
    return dataclasses.replace(
        settings,
        lr=settings.lr / root,
        epsilon=settings.epsilon / root,
        lamb=settings.lamb / len(stats.rms),
        old_hyper=False,
    )


def decay_rates(rms: list[torch.Tensor], lamb: float) -> list[torch.Tensor]:
    """λ · decrate_p = λ · MS_p / mean_q(mean(MS_q)), clipped at 1 (decrate at 1/λ)."""
    mean = sum(ms.mean() for ms in rms) / len(rms)
    return [(lamb * ms / mean).clamp_(max=1.0) for ms in rms]


@torch.no_grad()
def dynamic_step(
    params: list[torch.Tensor],
    start: list[torch.Tensor],
    rms: list[torch.Tensor],
    decay: list[torch.Tensor],
    lr: float,
    epsilon: float,
) -> None:
    """One update of every tensor from the weights before it: θ += λ·decrate⊙(θ⁰ − θ) − η·g/(MS + ε)."""
    for p, p0, ms, k in zip(params, start, rms, decay):
        step = k * (p0 - p)
        if p.grad is not None:
            step.addcdiv_(p.grad, ms + epsilon, value=-lr)
        p.add_(step)


def dynamic_evaluate(
    model,
    ids: torch.Tensor,
    stats: GradientStatistics,
    settings: DynamicEvalSettings,
    precision: str = "fp32",
    progress: bool = False,
    desc: str = "dynamic eval",
    return_model: bool = False,
    save_to: Path | None = None,
    save_seconds: float | None = None,
    check=None,
) -> dict:
    """Mean cross-entropy and perplexity of ``ids`` under dynamic evaluation of a *copy* of ``model``
    (the adapted copy under ``"model"`` with ``return_model``); resumable through ``save_to`` (module docstring).

    ``check`` (optional) runs before each segment and raises to stop (a :class:`~tiedlm.interrupts.StopRequest`'s
    ``check``): the pass so far is saved to ``save_to`` first, so the same call resumes from there."""
    from tqdm import tqdm

    s = effective_settings(settings, stats)
    model = copy.deepcopy(model)
    model.eval()
    device = model.embedding.weight.device
    params = list(model.parameters())
    start = [p.detach().clone() for p in params]
    decay = decay_rates(stats.rms, s.lamb)
    data = batchify(ids, s.batch_size).to(device)
    state, total, count, first = model.init_state(s.batch_size), 0.0, 0, 0
    if save_to is not None and Path(save_to).is_file():
        state, total, count, first = _restore(Path(save_to), params, state, len(ids))
    saved, every = time.monotonic(), DEFAULT_SAVE_SECONDS if save_seconds is None else save_seconds
    for i, x, y in tqdm(
        bptt_windows(data, s.bptt, first),
        total=num_windows(data, s.bptt),
        initial=first,
        desc=desc,
        disable=not progress,
        leave=False,
        unit="seg",
    ):
        if check is not None:
            _check_saving(check, save_to, params, state, total, count, i, len(ids))
        model.zero_grad(set_to_none=True)
        loss, state = _segment_loss(model, x, y, detach_state(state), device, precision)
        total += loss.item() * y.numel()  # scored before the model learns from this segment
        count += y.numel()
        loss.backward()
        dynamic_step(params, start, stats.rms, decay, s.lr, s.epsilon)
        if save_to is not None and time.monotonic() - saved >= every:
            _save(Path(save_to), params, state, total, count, i + 1, len(ids))
            saved = time.monotonic()
    model.zero_grad(set_to_none=True)
    ce = total / count
    out = {"loss": ce, "ppl": math.exp(min(ce, 700.0)), "tokens": count}
    return (
        out
        | {"effective": {"lr": s.lr, "lamb": s.lamb, "epsilon": s.epsilon}}
        | ({"model": model} if return_model else {})
    )


def _check_saving(check, save_to, params, state, total: float, count: int, segment: int, n: int) -> None:
    """``check()``; where it raises (a stop), the pass so far is saved to ``save_to`` first (between two
    segments, the weights, state and sums agree), so that the same call resumes from there."""
    try:
        check()
    except BaseException:
        if save_to is not None:
            _save(Path(save_to), params, state, total, count, segment, n)
        raise


def _save(path: Path, params, state, total: float, count: int, next_window: int, n_ids: int) -> None:
    """The pass after a whole segment: adapted weights, the carried state, the running sums, the next window."""
    from ..checkpoint_file import save_checkpoint

    tensors = {f"param.{k}": p for k, p in enumerate(params)}
    tensors |= {f"state.{i}.{j}": t for i, layer in enumerate(state) for j, t in enumerate(layer)}
    meta = {"total": total, "count": count, "next_window": next_window, "tokens": n_ids}
    save_checkpoint(path, tensors, meta)


def _restore(path: Path, params, state, n_ids: int):
    from ..checkpoint_file import load_checkpoint
    from ..errors import UsageError

    tensors, meta = load_checkpoint(path)
    if meta["tokens"] != n_ids or any(f"param.{k}" not in tensors for k in range(len(params))):
        raise UsageError(f"{path} is the progress of another dynamic evaluation; give another --work folder")
    with torch.no_grad():
        for k, p in enumerate(params):
            p.copy_(tensors[f"param.{k}"])
    state = [
        tuple(tensors[f"state.{i}.{j}"].to(t.device) for j, t in enumerate(layer)) for i, layer in enumerate(state)
    ]
    return state, meta["total"], meta["count"], meta["next_window"]
