"""The augmented loss of Inan, Khosravi & Socher (2017), §3."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def at_least_fp32(x: torch.Tensor) -> torch.Tensor:
    """Upcast bf16/fp16 (from autocast) to fp32 for softmax and losses; leave fp32/fp64 alone."""
    return x.float() if x.dtype in (torch.bfloat16, torch.float16) else x


class _FixedTargetKL(torch.autograd.Function):
    """Mean over tokens of KL(ỹ_t ‖ softmax(z_t/τ)) with ỹ a fixed target, fused (eqs. 3.2, 3.4, 3.7).

    ỹ depends only on the target word, so it is computed once per *distinct* target in the batch
    (U ≤ N rows of |V|), and the backward pass is the closed form (ŷ − ỹ)/τ of eq. (3.4) instead of an
    autograd graph through division, log-softmax and KL: fewer |V|-sized passes and tensors.
    """

    @staticmethod
    def forward(ctx, logits, targets, embeddings, tau):
        words, inverse = torch.unique(targets, return_inverse=True)
        scores = embeddings[words] @ embeddings.t()  # (U, |V|): Lᵀ u for each distinct target (3.6, 3.7)
        log_tgt = F.log_softmax(at_least_fp32(scores).div_(tau), dim=-1)  # scores is a temporary: divide in place
        tgt = log_tgt.exp()
        neg_entropy = (tgt * log_tgt).sum(-1)  # Σ ỹ log ỹ per distinct target
        log_pred = F.log_softmax(at_least_fp32(logits) / tau, dim=-1)  # (N, |V|), eq. (3.1)
        cross = (tgt.index_select(0, inverse) * log_pred).sum()
        n = logits.size(0)
        ctx.save_for_backward(log_pred, tgt, inverse)
        ctx.tau, ctx.n, ctx.dtype = tau, n, logits.dtype
        return (neg_entropy.index_select(0, inverse).sum() - cross) / n

    @staticmethod
    def backward(ctx, grad):
        log_pred, tgt, inverse = ctx.saved_tensors
        g = log_pred.exp_().sub_(tgt.index_select(0, inverse)).mul_(grad / (ctx.tau * ctx.n))  # (ŷ − ỹ)/τ (3.4)
        return g.to(ctx.dtype), None, None, None


class AugmentedLoss(nn.Module):
    """J_aug = KL(ỹ ‖ ŷ), Inan et al. (2017) eq. (3.2), averaged over tokens.

    - ŷ_t = softmax(logits_t / τ)                       (3.1)
    - u_t = L y*_t, the *input* embedding of the target  (3.6)
    - ỹ_t = softmax(Lᵀ u_t / τ)                          (3.7)

    With ``target_grad=False`` (default) ỹ is a fixed target: no gradient flows through it and
    ∂J_aug/∂logits_t = (ŷ_t − ỹ_t)/τ per token (eq. 3.4; divided by the number of tokens
    because of the mean). The paper does not say whether gradients flow through ỹ into L;
    ``target_grad=True`` lets them. Log-probabilities are computed with log_softmax in fp32.
    """

    def __init__(self, tau: float = 20.0, target_grad: bool = False):
        super().__init__()
        self.tau, self.target_grad = float(tau), target_grad

    def target_log_probs(self, targets: torch.Tensor, embeddings: torch.Tensor) -> torch.Tensor:
        """log ỹ for each target id: (N,) ids, (|V|, d) input embeddings -> (N, |V|)."""
        u = embeddings[targets]  # (N, d): u_t = L y*_t
        scores = u @ embeddings.t()  # (N, |V|): Lᵀ u_t
        return F.log_softmax(at_least_fp32(scores) / self.tau, dim=-1)

    def forward(self, logits: torch.Tensor, targets: torch.Tensor, embeddings: torch.Tensor) -> torch.Tensor:
        """logits (N, |V|), targets (N,), embeddings (|V|, d) -> scalar mean KL(ỹ ‖ ŷ)."""
        if not self.target_grad:
            return _FixedTargetKL.apply(logits, targets, embeddings.detach(), self.tau)
        log_pred = F.log_softmax(at_least_fp32(logits) / self.tau, dim=-1)
        log_tgt = self.target_log_probs(targets, embeddings)
        # KL(ỹ‖ŷ) = Σ ỹ (log ỹ − log ŷ), per token, then mean over tokens
        return F.kl_div(log_pred, log_tgt, reduction="sum", log_target=True) / logits.size(0)


class LanguageModelLoss(nn.Module):
    """Cross-entropy J, optionally with the augmented loss.

    - ``form="alpha"``: J_tot = J + α·J_aug with α = γτ            (eq. 3.3, §6.3 experiments)
    - ``form="beta"``:  J_tot = β·J_aug·τ²|V| + (1 − β)·J          (eq. 6.1, §6.2 experiment)
    """

    def __init__(self, augmented: bool = False, tau: float = 20.0, gamma: float = 0.5, form: str = "alpha",
                 beta: float = 0.5, target_grad: bool = False):
        super().__init__()
        self.augmented, self.form, self.gamma, self.beta = augmented, form, gamma, beta
        self.aug = AugmentedLoss(tau, target_grad) if augmented else None

    @classmethod
    def from_config(cls, cfg) -> "LanguageModelLoss":
        return cls(cfg.augmented, cfg.tau, cfg.gamma, cfg.form, cfg.beta, cfg.target_grad)

    def forward(self, logits: torch.Tensor, targets: torch.Tensor, embeddings: torch.Tensor | None = None):
        """logits (..., |V|), targets (...) -> (total, ce, aug); ce and aug are detached floats-as-tensors."""
        logits = at_least_fp32(logits.reshape(-1, logits.size(-1)))  # one fp32 copy, shared by J and J_aug
        targets = targets.reshape(-1)
        ce = F.cross_entropy(logits, targets)
        if self.aug is None:
            return ce, ce.detach(), None
        if embeddings is None:
            raise ValueError("the augmented loss needs the input embeddings")
        aug = self.aug(logits, targets, embeddings)
        tau = self.aug.tau
        if self.form == "alpha":
            total = ce + self.gamma * tau * aug
        else:
            total = self.beta * aug * tau * tau * logits.size(-1) + (1 - self.beta) * ce
        return total, ce.detach(), aug.detach()
