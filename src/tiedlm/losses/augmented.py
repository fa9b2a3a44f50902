"""The augmented loss of Inan, Khosravi & Socher (2017), §3."""

from __future__ import annotations

import torch
from torch import nn

from .fused import fused_lm_loss


class AugmentedLoss(nn.Module):
    """J_aug = KL(ỹ ‖ ŷ), Inan et al. (2017) eq. (3.2), averaged over tokens.

    - ŷ_t = softmax(logits_t / τ)                       (3.1)
    - u_t = L y*_t, the *input* embedding of the target  (3.6)
    - ỹ_t = softmax(Lᵀ u_t / τ)                          (3.7)

    With ``target_grad=False`` (default) ỹ is a fixed target: no gradient flows through it and
    ∂J_aug/∂logits_t = (ŷ_t − ỹ_t)/τ per token (eq. 3.4; divided by the number of tokens
    because of the mean). The paper does not say whether gradients flow through ỹ into L;
    ``target_grad=True`` lets them. Both run the fused, chunked pass of
    :class:`~tiedlm.losses.fused.FusedLMLoss` in fp32, which gives the gradient through ỹ in closed form.
    """

    def __init__(self, tau: float = 20.0, target_grad: bool = False):
        super().__init__()
        self.tau, self.target_grad = float(tau), target_grad

    def forward(self, logits: torch.Tensor, targets: torch.Tensor, embeddings: torch.Tensor) -> torch.Tensor:
        """logits (N, |V|), targets (N,), embeddings (|V|, d) -> scalar mean KL(ỹ ‖ ŷ)."""
        return fused_lm_loss(logits, targets, embeddings, self.tau, with_ce=False, target_grad=self.target_grad)[1]


class LanguageModelLoss(nn.Module):
    """Cross-entropy J, optionally with the augmented loss.

    - ``form="alpha"``: J_tot = J + α·J_aug with α = γτ            (eq. 3.3, §6.3 experiments)
    - ``form="beta"``:  J_tot = β·J_aug·τ²|V| + (1 − β)·J          (eq. 6.1, §6.2 experiment)
    """

    def __init__(
        self,
        augmented: bool = False,
        tau: float = 20.0,
        gamma: float = 0.5,
        form: str = "alpha",
        beta: float = 0.5,
        target_grad: bool = False,
        aug_bias: bool = True,
    ):
        super().__init__()
        self.augmented, self.form, self.gamma, self.beta, self.aug_bias = augmented, form, gamma, beta, aug_bias
        self.aug = AugmentedLoss(tau, target_grad) if augmented else None

    @classmethod
    def from_config(cls, cfg) -> "LanguageModelLoss":
        return cls(cfg.augmented, cfg.tau, cfg.gamma, cfg.form, cfg.beta, cfg.target_grad, cfg.aug_bias)

    def forward(
        self,
        logits: torch.Tensor,
        targets: torch.Tensor,
        embeddings: torch.Tensor | None = None,
        output_bias: torch.Tensor | None = None,
    ):
        """logits (..., |V|), targets (...) -> (total, ce, aug); ce and aug are detached floats-as-tensors.

        ``output_bias``: the b in logits = W h + b. With ``aug_bias=False`` ŷ is eq. (3.1) as printed,
        softmax(W h / τ): J_aug sees logits − b, so b gets no gradient from it (the two paths cancel).
        Either way J and J_aug take one fused pass over the logits.
        """
        logits = logits.reshape(-1, logits.size(-1))  # upcast to fp32 chunk by chunk inside the fused loss
        targets = targets.reshape(-1)
        if self.aug is None:
            ce, _ = fused_lm_loss(logits, targets)
            return ce, ce.detach(), None
        if embeddings is None:
            raise ValueError("the augmented loss needs the input embeddings")
        tau = self.aug.tau
        shift = None if self.aug_bias else output_bias  # J on W h + b, J_aug on W h (eq. 3.1 as printed)
        ce, aug = fused_lm_loss(logits, targets, embeddings, tau, target_grad=self.aug.target_grad, shift=shift)
        if self.form == "alpha":
            total = ce + self.gamma * tau * aug
        else:
            total = self.beta * aug * tau * tau * logits.size(-1) + (1 - self.beta) * ce
        return total, ce.detach(), aug.detach()
