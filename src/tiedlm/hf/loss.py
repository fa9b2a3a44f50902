"""Inan et al.'s augmented loss for Hugging Face causal LMs (usable as ``Trainer(compute_loss_func=...)``)."""

from __future__ import annotations

import torch

from ..losses.augmented import LanguageModelLoss

IGNORE = -100  # transformers' label for a position that is not scored (padding, prompts)


class AugmentedLoss:
    """J_tot = J + γτ·J_aug (Inan et al. 2017, eq. 3.3): cross-entropy plus τ-softened KL(ỹ ‖ ŷ) towards
    ỹ_t = softmax(E E[y*_t] / τ) (eqs. 3.6–3.7), E the model's input embeddings; ``target_grad`` lets gradients
    flow through ỹ into E. Called as ``loss(outputs, labels, num_items_in_batch=None)``, the signature of
    ``Trainer``'s ``compute_loss_func``: logits at t score labels at t + 1 (the causal shift), labels of -100 are
    not scored, and with ``num_items_in_batch`` the sum over tokens is divided by it (gradient accumulation)."""

    def __init__(self, model, tau: float = 20.0, gamma: float = 0.5, target_grad: bool = False):
        self.model = model
        self.loss = LanguageModelLoss(augmented=True, tau=tau, gamma=gamma, target_grad=target_grad)

    def __call__(self, outputs, labels: torch.Tensor, num_items_in_batch=None) -> torch.Tensor:
        logits = outputs["logits"] if isinstance(outputs, dict) else outputs.logits
        logits, labels = logits[:, :-1], labels[:, 1:].to(logits.device)
        keep = labels != IGNORE
        embeddings = self.model.get_input_embeddings().weight
        total, _, _ = self.loss(logits[keep], labels[keep], embeddings)
        if num_items_in_batch is not None:
            total = total * keep.sum() / num_items_in_batch
        return total
