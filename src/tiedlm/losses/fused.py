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
numbers, so the whole loss can be captured in a CUDA graph (:mod:`tiedlm.tasks.lm.cuda_graph`).

With ``target_grad`` (gradients through ỹ into L; the paper is silent on it) the target scores Lᵀ u
are an input of the function too, and its backward also returns their gradient in closed form, per
distinct target w with n_w tokens and A_w = Σ_{t: y*_t = w} log ŷ_t (from the saved log-sum-exps):
``∂ΣJ_aug/∂s_w = ỹ_w ⊙ (n_w (log ỹ_w − Σ ỹ_w log ỹ_w) − A_w + ⟨ỹ_w, A_w⟩) / τ``; autograd takes it
from there through s = L[words] Lᵀ (two (U, |V|, d) matmuls) instead of through a second, token-sized
log-softmax graph.

With a ``shift`` (|V|) the augmented loss tempers ``z − shift`` instead of z: ŷ = softmax(W h/τ) for logits
z = W h + b and shift = b, eq. (3.1) as printed (``loss.aug_bias = false``). J still sees z, so the pass
over the logits stays one pass, and the backward returns ∂/∂shift = −Σ_t (ŷ_t − ỹ_t)/τ (times the
incoming weight), which cancels the J_aug part that b receives through z: b learns from J only.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .. import native

CHUNK_ELEMENTS = 1 << 19  # fp32 elements per chunk (2 MiB): rows = CHUNK_ELEMENTS // |V|


def at_least_fp32(x: torch.Tensor) -> torch.Tensor:
    """Upcast bf16/fp16 (from autocast) to fp32 for softmax and losses; leave fp32/fp64 alone."""
    return x.float() if x.dtype in (torch.bfloat16, torch.float16) else x


def target_rows(targets: torch.Tensor, distinct: bool | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """``(words (U,), inverse (N,))``: the rows of ỹ to build and each token's row among them.

    ``distinct`` (default: on the CPU) makes the rows the U distinct targets; otherwise, the default on a GPU,
    there is one row per token (U = N, ``inverse`` = 0..N−1), since ``torch.unique`` would wait for the device
    (and could not be captured in a CUDA graph).
    """
    if distinct is None:
        distinct = targets.device.type != "cuda"
    if distinct:
        return torch.unique(targets, return_inverse=True)
    return targets, torch.arange(targets.numel(), device=targets.device)


def augmented_targets(targets: torch.Tensor, embeddings: torch.Tensor, tau: float, distinct: bool | None = None):
    """ỹ = softmax(Lᵀ u / τ) for each distinct target (eqs. 3.6, 3.7), as a fixed target (no gradient).

    Returns ``(probs (U, |V|) fp32, inverse (N,) index of each token's row, neg_entropy (U,) Σ ỹ log ỹ)``;
    ``distinct`` as in :func:`target_rows`.
    """
    with torch.no_grad():
        words, inverse = target_rows(targets, distinct)
        scores = embeddings[words] @ embeddings.t()  # (U, |V|) Lᵀ u, one matmul (bf16 under autocast)
        probs, neg_entropy = target_distribution(scores, tau)
        return probs, inverse, neg_entropy


def target_distribution(scores: torch.Tensor, tau: float):
    """``(ỹ (U, |V|) fp32, Σ ỹ log ỹ (U,))`` from the target scores Lᵀ u (U, |V|), row chunk by row chunk."""
    with torch.no_grad():
        u, v = scores.shape
        dtype = torch.promote_types(scores.dtype, torch.float32)
        probs, neg_entropy = scores.new_empty(u, v, dtype=dtype), scores.new_empty(u, dtype=dtype)
        rows = max(1, CHUNK_ELEMENTS // v)
        for s in range(0, u, rows):  # row chunks in cache: scale, softmax, entropy
            z = at_least_fp32(scores[s : s + rows]) / tau  # a new chunk: scores may be saved for backward
            p = probs[s : s + rows]
            p.copy_(F.softmax(z, dim=-1))
            neg_entropy[s : s + rows] = (p * F.log_softmax(z, dim=-1)).sum(-1)
        return probs, neg_entropy


class FusedLMLoss(torch.autograd.Function):
    """``(J, J_aug)``: mean cross-entropy and mean KL(ỹ‖softmax(z/τ)) over N tokens, fused and chunked.

    Arguments: logits (N, |V|) in any float dtype, targets (N,), ``with_ce`` (False: J is returned as 0
    and costs nothing), then for the augmented loss the three outputs of :func:`augmented_targets`, τ,
    the target scores Lᵀ u (U, |V|) that ỹ came from if gradients are to flow through ỹ (else
    ``None``), and the ``shift`` (|V|) that J_aug subtracts from the logits (else ``None``; module
    docstring). Gradients: eq. (3.4) for J_aug, ``softmax − onehot`` for J, and with ``scores`` and
    ``shift`` the closed forms of the module docstring for them. J_aug is 0 without the augmented loss.
    """

    @staticmethod
    def forward(ctx, logits, targets, with_ce, tgt_probs, inverse, neg_entropy, tau, scores=None, shift=None):
        n = logits.size(0)
        ctx.tau, ctx.with_ce, ctx.native = tau, with_ce, uses_native(logits, tgt_probs, shift)
        if ctx.native:  # the C++ row kernel; saves each row's log-sum-exp for the backward
            targets = targets.contiguous()
            ce, cross, lse, lse_tau = torch.ops.tiedlm.lm_loss_forward(
                logits, targets, with_ce, tgt_probs, inverse, tau, shift
            )
            ce, cross = ce.sum(), cross.sum()
            saved = [lse, lse_tau]
        else:
            ce, cross = _forward_python(logits, targets, with_ce, tgt_probs, inverse, tau, shift)
            saved = []
        ctx.target_grad, ctx.shifted = scores is not None, shift is not None
        extra = [neg_entropy, scores] if ctx.target_grad else []
        ctx.save_for_backward(logits, targets, tgt_probs, inverse, shift, *extra, *saved)
        aug = (neg_entropy.index_select(0, inverse).sum() - cross) / n if tgt_probs is not None else cross
        return ce / n, aug

    @staticmethod
    def backward(ctx, g_ce, g_aug):
        logits, targets, tgt_probs, inverse, shift, *rest = ctx.saved_tensors
        neg_entropy, scores, *lse = rest if ctx.target_grad else [None, None, *rest]
        n = logits.size(0)
        if ctx.native:  # the C++ kernel takes the weights as numbers (a CPU tensor's .item() costs nothing)
            w_ce = g_ce.item() / n if ctx.with_ce else 0.0
            w_aug = g_aug.item() / n if tgt_probs is not None else 0.0
            grad, grad_shift = torch.ops.tiedlm.lm_loss_backward(
                logits, targets, *lse, w_ce, tgt_probs, inverse, ctx.tau, w_aug, shift
            )
        else:  # 0-dim tensors: no read-back from a GPU
            w_ce = g_ce / n if ctx.with_ce else None  # the loss's own dtype: fp32, or fp64 for fp64 logits
            w_aug = g_aug / n if tgt_probs is not None else None
            grad, grad_shift = _backward_python(logits, targets, w_ce, tgt_probs, inverse, ctx.tau, w_aug, shift)
        grad_scores = None
        if ctx.target_grad and ctx.needs_input_grad[7]:
            lse_tau = lse[1] if ctx.native else None
            grad_scores = _target_scores_grad(
                logits, inverse, tgt_probs, neg_entropy, scores, ctx.tau, w_aug, lse_tau, shift
            )
        grad_shift = grad_shift.to(shift.dtype) if ctx.shifted and ctx.needs_input_grad[8] else None
        return grad, None, None, None, None, None, None, grad_scores, grad_shift


def _target_scores_grad(logits, inverse, tgt_probs, neg_entropy, scores, tau, w_aug, lse_tau=None, shift=None):
    """w_aug · ∂ΣJ_aug/∂s for the target scores s = Lᵀ u (U, |V|): gradients through ỹ (module docstring).

    A_w = Σ_{t: y*_t = w} log ŷ_t is summed from the logits: (z_t − shift)/τ − lse_τ(z_t − shift) with the C++
    kernel's saved log-sum-exps (``lse_tau``), else by log-softmax chunk by chunk. Nothing waits for a GPU.
    """
    u, v = tgt_probs.shape
    acc = tgt_probs.dtype
    a = torch.zeros(u, v, dtype=acc, device=logits.device)
    rows = max(1, CHUNK_ELEMENTS // v)
    b = shift.detach().to(acc) if shift is not None else None
    for s in range(0, logits.size(0), rows):
        z = logits[s : s + rows].to(acc)  # no copy for fp32 logits
        if lse_tau is None:
            z = F.log_softmax((z if b is None else z - b) / tau, dim=-1)
        a.index_add_(0, inverse[s : s + rows], z)
    counts = torch.zeros(u, dtype=acc, device=logits.device).index_add_(
        0, inverse, torch.ones(inverse.numel(), dtype=acc, device=logits.device)
    )
    if lse_tau is not None:  # Σ_t log ŷ_t = (Σ_t z_t − n_w shift)/τ − Σ_t lse_τ(z_t − shift)
        lse_sum = torch.zeros(u, dtype=acc, device=logits.device).index_add_(0, inverse, lse_tau.to(acc))
        if b is not None:
            a.sub_(counts[:, None] * b)
        a.div_(tau).sub_(lse_sum[:, None])
    log_tgt = F.log_softmax(at_least_fp32(scores.detach()).to(acc) / tau, dim=-1)
    g = log_tgt.sub_(neg_entropy[:, None]).mul_(counts[:, None]).sub_(a)
    g.add_((tgt_probs * a).sum(-1, keepdim=True)).mul_(tgt_probs).mul_(w_aug / tau)
    return g.to(scores.dtype)


def uses_native(logits: torch.Tensor, tgt_probs: torch.Tensor | None = None, shift: torch.Tensor | None = None) -> bool:
    """Whether the C++ row kernel (:mod:`tiedlm.native`) takes these: contiguous fp32/bf16 logits on the CPU."""
    return (
        logits.device.type == "cpu"
        and logits.dtype in (torch.float32, torch.bfloat16)
        and logits.is_contiguous()
        and (tgt_probs is None or tgt_probs.dtype == torch.float32)
        and (shift is None or (shift.dtype == torch.float32 and shift.is_contiguous()))
        and native.available()
    )


def _forward_python(logits, targets, with_ce, tgt_probs, inverse, tau, shift=None):
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
            log_pred = F.log_softmax((z if shift is None else z - shift) / tau, dim=-1)  # eq. (3.1)
            cross += (tgt_probs.index_select(0, inverse[s : s + rows]) * log_pred).sum()
    return ce, cross


def _backward_python(logits, targets, w_ce, tgt_probs, inverse, tau, w_aug, shift=None):
    """``(w_ce·∂ΣJ/∂z + w_aug·∂ΣJ_aug/∂z, ∂/∂shift)`` chunk by chunk (the fallback of the C++ kernel).

    The first is in the logits' dtype; the second is −Σ_rows of the J_aug part (None without a shift).
    The weights are 0-dim tensors (or None for a term that is off), so nothing waits for a GPU.
    """
    n, v = logits.shape
    rows = max(1, CHUNK_ELEMENTS // v)
    grad = torch.empty_like(logits)
    w_q = w_aug / tau if w_aug is not None else None
    grad_shift = (
        None
        if shift is None
        else torch.zeros(v, dtype=torch.promote_types(logits.dtype, torch.float32), device=logits.device)
    )
    for s in range(0, n, rows):
        z = at_least_fp32(logits[s : s + rows])
        g = None
        if w_ce is not None:  # ∂J/∂z = softmax(z) − onehot(y*)
            g = F.softmax(z, dim=-1).mul_(w_ce)
            g.scatter_add_(1, targets[s : s + rows, None], (-w_ce).to(g.dtype).expand(g.size(0), 1))
        if w_q is not None:  # ∂J_aug/∂z = (ŷ − ỹ)/τ, eq. (3.4)
            zs = z if shift is None else z - shift
            q = F.softmax(zs / tau, dim=-1).sub_(tgt_probs.index_select(0, inverse[s : s + rows])).mul_(w_q)
            if grad_shift is not None:
                grad_shift.sub_(q.sum(0))
            g = q if g is None else g.add_(q)
        grad[s : s + rows] = g
    return grad, grad_shift


def fused_lm_loss(
    logits: torch.Tensor,
    targets: torch.Tensor,
    embeddings: torch.Tensor | None = None,
    tau: float = 1.0,
    with_ce: bool = True,
    target_grad: bool = False,
    shift: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(J, J_aug) for logits (N, |V|) and targets (N,); J_aug (ỹ from ``embeddings``) only if they are given.

    ỹ is a fixed target unless ``target_grad``, which lets the gradient of J_aug flow through ỹ into
    ``embeddings`` as well. J_aug tempers ``logits − shift`` where a ``shift`` (|V|) is given.
    """
    if embeddings is None:
        return FusedLMLoss.apply(logits, targets, with_ce, None, None, None, float(tau), None, None)
    if shift is not None and shift.dtype in (torch.bfloat16, torch.float16):
        shift = shift.float()
    if not target_grad:
        probs, inverse, neg_entropy = augmented_targets(targets, embeddings.detach(), tau)
        return FusedLMLoss.apply(logits, targets, with_ce, probs, inverse, neg_entropy, float(tau), None, shift)
    words, inverse = target_rows(targets)
    scores = embeddings[words] @ embeddings.t()  # (U, |V|) Lᵀ u, with gradient to L
    probs, neg_entropy = target_distribution(scores.detach(), tau)
    return FusedLMLoss.apply(logits, targets, with_ce, probs, inverse, neg_entropy, float(tau), scores, shift)
