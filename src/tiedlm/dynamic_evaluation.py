"""Dynamic evaluation (Krause et al. 2018, "Dynamic Evaluation of Neural Sequence Models"), RMS variant.

The model reads the evaluation stream segment by segment (``bptt`` = 5 tokens by default). Each segment
is scored *before* the model learns from it, then the weights take one step

    θ ← θ − lr · ∇_θ L(segment) / (MS + ε) + λ · decrate ⊙ (θ₀ − θ)

where MS is the root-mean-square of each weight's gradient over segments of the *training* data
(:func:`gradient_rms`), θ₀ the trained weights and decrate = MS / Σ_p mean(MS_p) (Krause et al.'s global
decay, clipped so that λ·decrate ≤ 1). Dropout is off. The caller's model is never modified: the
adaptation runs on a copy, and nothing is written to the run directory.

Pappas & Henderson (2019) use the AWD-LSTM settings lr 0.002, λ 0.02, ε 0.001 (the defaults here).
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from .data.batching import batchify, bptt_windows, num_windows
from .losses.fused import at_least_fp32
from .models.vd_lstm import detach_state
from .runtime import autocast


@dataclass
class DynamicEvalSettings:
    lr: float = 0.002
    lamb: float = 0.02  # λ: decay toward the trained weights
    epsilon: float = 0.001
    bptt: int = 5
    batch_size: int = 1  # parallel streams of the evaluation split (1: the text read once, in order)
    stat_tokens: int = 0  # training tokens used for the gradient statistics (0: the whole training split)


def _segment_loss(model, x, y, state, device, precision):
    with autocast(device, precision):
        logits, state = model(x, state)
    return F.cross_entropy(at_least_fp32(logits).reshape(-1, logits.size(-1)), y.reshape(-1)), state


def gradient_rms(model, train_ids: torch.Tensor, settings: DynamicEvalSettings, precision: str = "fp32",
                 progress: bool = False) -> list[torch.Tensor]:
    """MS per parameter: sqrt(mean over training segments of grad²), with dropout off. The model is unchanged."""
    from tqdm import tqdm

    device = model.embedding.weight.device
    ids = train_ids[: settings.stat_tokens + 1] if settings.stat_tokens else train_ids
    data = batchify(ids, settings.batch_size).to(device)
    params = list(model.parameters())
    sums = [torch.zeros_like(p) for p in params]
    was_training = model.training
    model.eval()
    state, n = model.init_state(settings.batch_size), 0
    try:
        for _, x, y in tqdm(bptt_windows(data, settings.bptt), total=num_windows(data, settings.bptt),
                            desc="gradient statistics", disable=not progress, leave=False, unit="seg"):
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
    return [s.div_(max(n, 1)).sqrt_() for s in sums]


def dynamic_evaluate(model, ids: torch.Tensor, rms: list[torch.Tensor], settings: DynamicEvalSettings,
                     precision: str = "fp32", progress: bool = False, desc: str = "dynamic eval") -> dict:
    """Mean cross-entropy and perplexity of ``ids`` under dynamic evaluation of a *copy* of ``model``."""
    from tqdm import tqdm

    model = copy.deepcopy(model)
    model.eval()
    device = model.embedding.weight.device
    params = list(model.parameters())
    start = [p.detach().clone() for p in params]
    gsum = sum(ms.mean() for ms in rms)
    decay = [(settings.lamb * ms / gsum).clamp_(max=1.0) for ms in rms]
    denom = [ms + settings.epsilon for ms in rms]
    data = batchify(ids, settings.batch_size).to(device)
    state, total, count = model.init_state(settings.batch_size), 0.0, 0
    for _, x, y in tqdm(bptt_windows(data, settings.bptt), total=num_windows(data, settings.bptt), desc=desc,
                        disable=not progress, leave=False, unit="seg"):
        model.zero_grad(set_to_none=True)
        loss, state = _segment_loss(model, x, y, detach_state(state), device, precision)
        total += loss.item() * y.numel()  # scored before the model learns from this segment
        count += y.numel()
        loss.backward()
        with torch.no_grad():
            for p, p0, d, k in zip(params, start, denom, decay):
                if p.grad is not None:
                    p.addcdiv_(p.grad, d, value=-settings.lr)
                p.add_(k * (p0 - p))
    ce = total / count
    return {"loss": ce, "ppl": math.exp(ce), "tokens": count}
