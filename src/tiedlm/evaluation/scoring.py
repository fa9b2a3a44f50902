"""Perplexity of a language model on a token stream (hidden state carried across windows)."""

from __future__ import annotations

import contextlib
import math
from typing import Callable, Iterator

import torch
import torch.nn.functional as F

from ..data.batching import batchify, bptt_windows, num_windows
from ..losses.fused import at_least_fp32
from ..models.outputs.base import OutputLayer
from ..runtime import autocast


def stream_logits(
    model,
    ids: torch.Tensor,
    batch_size: int = 10,
    bptt: int = 35,
    precision: str = "fp32",
    progress: bool = False,
    desc: str = "eval",
    check: Callable[[], None] | None = None,
) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Run ``model`` over the 1-D id stream ``ids`` in eval mode; yield (fp32 logits (N, |V|), targets (N,))
    per BPTT window. Call under ``torch.inference_mode()``; the model's train/eval mode is restored after.
    ``check`` is called before every window (a training loop's stop check, which may raise). The output layer's
    label embeddings g_out(E) are computed once for the whole stream (``OutputLayer.labels_reused``)."""
    from tqdm import tqdm

    device = model.embedding.weight.device
    was_training = model.training
    model.eval()
    data = batchify(ids, batch_size).to(device)
    state = model.init_state(batch_size)
    output = getattr(model, "output", None)
    reuse = output.labels_reused() if isinstance(output, OutputLayer) else contextlib.nullcontext()
    try:
        with reuse:
            for _, x, y in tqdm(
                bptt_windows(data, bptt),
                total=num_windows(data, bptt),
                desc=desc,
                leave=False,
                disable=not progress,
                unit="win",
            ):
                if check is not None:
                    check()
                with autocast(device, precision):
                    logits, state = model(x, state)
                yield at_least_fp32(logits).reshape(-1, logits.size(-1)), y.reshape(-1)
    finally:
        model.train(was_training)


@torch.inference_mode()
def evaluate(
    model,
    ids: torch.Tensor,
    batch_size: int = 10,
    bptt: int = 35,
    precision: str = "fp32",
    progress: bool = False,
    desc: str = "eval",
    check: Callable[[], None] | None = None,
) -> dict:
    """Mean cross-entropy (nats/token) and perplexity of ``model`` on the 1-D id stream ``ids``
    (perplexity ``inf`` where the cross-entropy is too large for a float)."""
    total, count = 0.0, 0
    for logits, y in stream_logits(model, ids, batch_size, bptt, precision, progress, desc, check):
        total += F.cross_entropy(logits, y, reduction="sum").item()
        count += y.numel()
    ce = total / count
    return {"loss": ce, "ppl": perplexity(ce), "tokens": count}


@torch.inference_mode()
def token_losses(model, ids: torch.Tensor, bptt: int = 35, precision: str = "fp32") -> torch.Tensor:
    """The cross-entropy (nats) of every token of the 1-D stream ``ids`` but the first, read as one stream
    (batch 1, the papers' test protocol), in stream order: ``out[i]`` scores ``ids[i + 1]``."""
    parts = [
        F.cross_entropy(logits, y, reduction="none") for logits, y in stream_logits(model, ids, 1, bptt, precision)
    ]
    return torch.cat(parts).cpu()


def sentence_scores(losses: torch.Tensor, targets: torch.Tensor, eos: int) -> list[dict]:
    """Per line of a scored text (``losses`` from :func:`token_losses`, ``targets`` = ``ids[1:]``): the tokens
    scored (its words and its line end; the text's very first word is the stream's start, never scored), their
    summed cross-entropy and the line's perplexity."""
    lines, start = [], 0
    ends = (targets == eos).nonzero().flatten().tolist()
    for end in ends:
        nll = float(losses[start : end + 1].sum())
        tokens = end + 1 - start
        lines.append({"line": len(lines) + 1, "tokens": tokens, "nll": nll, "ppl": perplexity(nll / tokens)})
        start = end + 1
    return lines


def perplexity(cross_entropy: float) -> float:
    """exp(cross-entropy), ``inf`` past float range (a diverged model) and ``nan`` for ``nan``."""
    return (
        math.exp(cross_entropy) if cross_entropy < 709.0 else (math.inf if cross_entropy == cross_entropy else math.nan)
    )
