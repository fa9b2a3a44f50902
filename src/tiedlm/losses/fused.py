"""Cross-entropy J and the augmented loss's KL (Inan et al. 2017, eqs. 3.2–3.4) in one fused pass.

The output layer's logits are an (N, |V|) tensor — for the small PTB model 700 × 10,000 — and the
passes over it (upcast to fp32, log-softmax, its backward, the one-hot gradient's zero fill, the
downcast of the gradient) cost as much as the output matmuls themselves. :class:`FusedLMLoss` goes
over the logits in pieces that fit in the CPU cache, upcasting each to fp32 on the fly — on the CPU a row at
a time in C++ (``lm_loss.cpp`` in :mod:`tiedlm.native`: one read of the logits forward, one read and one
write backward, reusing each row's saved log-sum-exp), elsewhere (and as the fallback) in row chunks:

- forward: log-softmax of the chunk (J) and, with the augmented loss, of the chunk divided by τ (J_aug);
- backward: the closed-form gradients, ``softmax(z) − onehot(y*)`` for J and ``(ŷ − ỹ)/τ`` for J_aug
  (eq. 3.4), recomputed from the saved logits chunk by chunk and written once, in the logits' dtype.

Only the logits (in their own dtype, bf16 under autocast) are kept for backward; nothing |V|-sized
in fp32 outlives a chunk. ỹ (eq. 3.7) depends only on the target word, so on the CPU it is one row per
*distinct* target (see :func:`augmented_targets`) that the chunks index into.

On a GPU nothing here waits for the device: ỹ is one row per token (finding the distinct targets would
read them back to the host) and the backward scales by the incoming gradients as tensors, not Python
numbers, so the whole loss can be captured in a CUDA graph (:mod:`tiedlm.train.cuda_graph`).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .. import native

CHUNK_ELEMENTS = 1 << 19  # fp32 elements per chunk (2 MiB): rows = CHUNK_ELEMENTS // |V|


def at_least_fp32(x: torch.Tensor) -> torch.Tensor:
    """Upcast bf16/fp16 (from autocast) to fp32 for softmax and losses; leave fp32/fp64 alone."""
    return x.float() if x.dtype in (torch.bfloat16, torch.float16) else x


def augmented_targets(targets: torch.Tensor, embeddings: torch.Tensor, tau: float, distinct: bool | None = None):
    """ỹ = softmax(Lᵀ u / τ) for each distinct target (eqs. 3.6, 3.7), as a fixed target (no gradient).

    Returns ``(probs (U, |V|) fp32, inverse (N,) index of each token's row, neg_entropy (U,) Σ ỹ log ỹ)``.
    ``distinct`` (default: on the CPU) makes the rows the U distinct targets; otherwise, the default on a GPU,
    there is one row per token (U = N, ``inverse`` = 0..N−1), since ``torch.unique`` would wait for the device
    (and could not be captured in a CUDA graph).
    """
    with torch.no_grad():
        if distinct is None:
            distinct = targets.device.type != "cuda"
        if distinct:
            words, inverse = torch.unique(targets, return_inverse=True)
        else:
            words, inverse = targets, torch.arange(targets.numel(), device=targets.device)
        scores = embeddings[words] @ embeddings.t()  # (U, |V|) Lᵀ u, one matmul (bf16 under autocast)
        u, v = scores.shape
        dtype = torch.promote_types(embeddings.dtype, torch.float32)
        probs, neg_entropy = scores.new_empty(u, v, dtype=dtype), scores.new_empty(u, dtype=dtype)
        rows = max(1, CHUNK_ELEMENTS // v)
        for s in range(0, u, rows):  # row chunks in cache: scale, softmax, entropy
            z = at_least_fp32(scores[s : s + rows]).div_(tau)  # scores is our own temporary: divide in place
            p = probs[s : s + rows]
            p.copy_(F.softmax(z, dim=-1))
            neg_entropy[s : s + rows] = (p * F.log_softmax(z, dim=-1)).sum(-1)
        return probs, inverse, neg_entropy


class FusedLMLoss(torch.autograd.Function):
    """``(J, J_aug)``: mean cross-entropy and mean KL(ỹ‖softmax(z/τ)) over N tokens, fused and chunked.

    Arguments: logits (N, |V|) in any float dtype, targets (N,), ``with_ce`` (False: J is returned as 0
    and costs nothing), then for the augmented loss the three outputs of :func:`augmented_targets` and
    τ (all ``None`` without it). Gradients: eq. (3.4) for J_aug, ``softmax − onehot`` for J; ỹ is a
    fixed target. J_aug is 0 without the augmented loss.
    """

    @staticmethod
    def forward(ctx, logits, targets, with_ce, tgt_probs, inverse, neg_entropy, tau):
        n = logits.size(0)
        ctx.tau, ctx.with_ce, ctx.native = tau, with_ce, uses_native(logits, tgt_probs)
        if ctx.native:  # the C++ row kernel; saves each row's log-sum-exp for the backward
            targets = targets.contiguous()
            ce, cross, lse, lse_tau = torch.ops.tiedlm.lm_loss_forward(logits, targets, with_ce, tgt_probs, inverse,
                                                                       tau)
            ce, cross = ce.sum(), cross.sum()
            ctx.save_for_backward(logits, targets, tgt_probs, inverse, lse, lse_tau)
        else:
            ce, cross = _forward_python(logits, targets, with_ce, tgt_probs, inverse, tau)
            ctx.save_for_backward(logits, targets, tgt_probs, inverse)
        aug = (neg_entropy.index_select(0, inverse).sum() - cross) / n if tgt_probs is not None else cross
        return ce / n, aug

    @staticmethod
    def backward(ctx, g_ce, g_aug):
        logits, targets, tgt_probs, inverse, *lse = ctx.saved_tensors
        n = logits.size(0)
        if ctx.native:  # the C++ kernel takes the weights as numbers (a CPU tensor's .item() costs nothing)
            w_ce = g_ce.item() / n if ctx.with_ce else 0.0
            w_aug = g_aug.item() / n if tgt_probs is not None else 0.0
            grad = torch.ops.tiedlm.lm_loss_backward(logits, targets, *lse, w_ce, tgt_probs, inverse, ctx.tau, w_aug)
        else:  # 0-dim tensors: no read-back from a GPU
            w_ce = g_ce / n if ctx.with_ce else None  # the loss's own dtype: fp32, or fp64 for fp64 logits
            w_aug = g_aug / n if tgt_probs is not None else None
            grad = _backward_python(logits, targets, w_ce, tgt_probs, inverse, ctx.tau, w_aug)
        return grad, None, None, None, None, None, None


def uses_native(logits: torch.Tensor, tgt_probs: torch.Tensor | None = None) -> bool:
    """Whether the C++ row kernel (:mod:`tiedlm.native`) takes these: contiguous fp32/bf16 logits on the CPU."""
    return (logits.device.type == "cpu" and logits.dtype in (torch.float32, torch.bfloat16)
            and logits.is_contiguous() and (tgt_probs is None or tgt_probs.dtype == torch.float32)
            and native.available())


def _forward_python(logits, targets, with_ce, tgt_probs, inverse, tau):
    """Σ CE and Σ ỹ·log ŷ over the rows, chunk by chunk (the fallback of the C++ kernel)."""
    n, v = logits.shape
    rows = max(1, CHUNK_ELEMENTS // v)
    acc = torch.promote_types(logits.dtype, torch.float32)  # fp32, or fp64 for fp64 logits
    ce, cross = logits.new_zeros((), dtype=acc), logits.new_zeros((), dtype=acc)
    for s in range(0, n, rows):
        z = at_least_fp32(logits[s : s + rows])
        t = targets[s : s + rows]
        if with_ce:
            ce -= F.log_softmax(z, dim=-1).gather(1, t[:, None]).sum()
        if tgt_probs is not None:
            log_pred = F.log_softmax(z / tau, dim=-1)  # eq. (3.1)
            cross += (tgt_probs.index_select(0, inverse[s : s + rows]) * log_pred).sum()
    return ce, cross


def _backward_python(logits, targets, w_ce, tgt_probs, inverse, tau, w_aug):
    """w_ce·∂ΣJ/∂z + w_aug·∂ΣJ_aug/∂z chunk by chunk, in the logits' dtype (the fallback of the C++ kernel).

    The weights are 0-dim tensors (or None for a term that is off), so nothing waits for a GPU.
    """
    n, v = logits.shape
    rows = max(1, CHUNK_ELEMENTS // v)
    grad = torch.empty_like(logits)
    w_q = w_aug / tau if w_aug is not None else None
    for s in range(0, n, rows):
        z = at_least_fp32(logits[s : s + rows])
        g = None
        if w_ce is not None:  # ∂J/∂z = softmax(z) − onehot(y*)
            g = F.softmax(z, dim=-1).mul_(w_ce)
            g.scatter_add_(1, targets[s : s + rows, None], (-w_ce).to(g.dtype).expand(g.size(0), 1))
        if w_q is not None:  # ∂J_aug/∂z = (ŷ − ỹ)/τ, eq. (3.4)
            q = F.softmax(z / tau, dim=-1).sub_(tgt_probs.index_select(0, inverse[s : s + rows])).mul_(w_q)
            g = q if g is None else g.add_(q)
        grad[s : s + rows] = g
    return grad


def fused_lm_loss(logits: torch.Tensor, targets: torch.Tensor, embeddings: torch.Tensor | None = None,
                  tau: float = 1.0, with_ce: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """(J, J_aug) for logits (N, |V|) and targets (N,); J_aug (fixed ỹ from ``embeddings``) only if given."""
    if embeddings is None:
        return FusedLMLoss.apply(logits, targets, with_ce, None, None, None, float(tau))
    probs, inverse, neg_entropy = augmented_targets(targets, embeddings.detach(), tau)
    return FusedLMLoss.apply(logits, targets, with_ce, probs, inverse, neg_entropy, float(tau))
