"""How much the augmented loss can say, and how hard it pulls (Inan et al. 2017, §3, eqs. 3.1–3.7).

The augmented loss compares the tempered prediction ŷ_t = softmax(W h_t / τ) (eq. 3.1) with the target
ỹ_t = softmax(Lᵀ L y*_t / τ) (eq. 3.7), built from the input embeddings. Two things decide whether it
can change a model:

- **How far ỹ is from uniform.** At a high temperature ỹ tends to the uniform distribution (eq. 4.2);
  then it carries little more than "spread the mass". :func:`target_distribution` gives ỹ, and
  :func:`augmented_loss_strength` reports its entropy, KL(ỹ ‖ uniform) and the mass it puts on the
  target word itself, in multiples of 1/|V|.
- **How large its gradient is next to the cross-entropy's.** On the logits z_t the cross-entropy J
  gives p_t − e_{y*} and α·J_aug gives α(ŷ_t − ỹ_t)/τ = γ(ŷ_t − ỹ_t) (eq. 3.4 with α = γτ, eq. 3.3).
  The report gives the mean L2 norm of each per token, the ratio of the two means, and the median of
  the per-token ratios. The median, not the mean: a token the model is certain of (p = 1 in fp32) has a
  cross-entropy gradient of exactly 0, and tokens near that make a mean of ratios unbounded. Such tokens
  are left out of the median and counted (``zero_ce_grad_tokens``).

Both are measured over a split with a trained model in eval mode (no dropout), for several τ.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ..evaluation import stream_logits
from .markdown import cell


def target_distribution(embeddings: torch.Tensor, targets: torch.Tensor, tau: float) -> torch.Tensor:
    """ỹ = softmax(Lᵀ u / τ) with u = L y* (Inan et al. eqs. 3.6–3.7): (N,) target ids -> (N, |V|).

    ``embeddings`` is the input embedding matrix, one row per word (|V|, d), i.e. Lᵀ."""
    u = embeddings[targets]
    return torch.softmax((u @ embeddings.T).float() / tau, dim=-1)


_FIELDS = ("entropy", "target_mass", "aug_grad", "aug")


def _add_tau_sums(s: dict, sims: torch.Tensor, tempered: torch.Tensor, y: torch.Tensor, t: float, gamma: float):
    """Add one batch's sums at temperature ``t`` to ``s`` (H(ỹ), ỹ(target)·|V|, ‖γ(ŷ_τ − ỹ_τ)‖₂, KL(ỹ ‖ ŷ_τ));
    returns the per-token ‖γ(ŷ_τ − ỹ_τ)‖₂."""
    log_target = torch.log_softmax(sims / t, -1)  # ỹ = softmax(Lᵀ L y* / τ), eq. 3.2
    target = log_target.exp()
    log_pred = torch.log_softmax(tempered / t, -1)  # ŷ_τ, eq. 3.1
    aug_grad = gamma * (log_pred.exp() - target).norm(dim=-1)
    s["entropy"] += -(target * log_target).sum().item()
    s["target_mass"] += target.gather(1, y[:, None]).sum().item() * tempered.size(-1)
    s["aug_grad"] += aug_grad.sum().item()
    s["aug"] += (target * (log_target - log_pred)).sum().item()
    return aug_grad


@torch.inference_mode()
def augmented_loss_strength(
    model,
    ids: torch.Tensor,
    taus,
    gamma: float,
    aug_bias: bool = True,
    batch_size: int = 10,
    bptt: int = 35,
    precision: str = "fp32",
    progress: bool = False,
) -> dict:
    """Per τ in ``taus``, means over every position of ``ids`` of: H(ỹ), ỹ(target)·|V|, ‖p − e_y‖₂,
    ‖γ(ŷ_τ − ỹ_τ)‖₂ and J_aug = KL(ỹ ‖ ŷ_τ); the ratio of the two gradient means (``ratio_of_means``) and
    the median over tokens of ‖γ(ŷ_τ − ỹ_τ)‖ / ‖p − e_y‖ (``ratio_median``), leaving out the
    ``zero_ce_grad_tokens`` whose cross-entropy gradient is exactly 0.

    ``aug_bias=False`` tempers W h without the output bias, eq. (3.1) as printed (the config's
    ``loss.aug_bias``). Returns ``{"vocab": |V|, "tokens": N, "zero_ce_grad_tokens": …,
    "uniform_entropy": log|V|, "rows": [...]}``."""
    emb = model.input_embeddings.detach().float()
    bias = model.output_bias
    shift = bias.detach().float() if (bias is not None and not aug_bias) else None
    taus = [float(t) for t in taus]
    sums = {t: dict.fromkeys(_FIELDS, 0.0) for t in taus}
    ratios = {t: [] for t in taus}
    ce_grad_sum, n, zero_ce = 0.0, 0, 0
    for logits, y in stream_logits(model, ids, batch_size, bptt, precision, progress, desc="augmented loss"):
        onehot = torch.nn.functional.one_hot(y, logits.size(-1)).float()
        ce_grad = (torch.softmax(logits, -1) - onehot).norm(dim=-1)
        ce_grad_sum += ce_grad.sum().item()
        moved = ce_grad > 0
        zero_ce += int((~moved).sum())
        tempered = logits - shift if shift is not None else logits
        sims = emb[y] @ emb.T
        for t in taus:
            aug_grad = _add_tau_sums(sums[t], sims, tempered, y, t, gamma)
            ratios[t].append(aug_grad[moved] / ce_grad[moved])
        n += y.numel()
    vocab = emb.size(0)
    rows = [
        {
            "tau": t,
            "gamma": gamma,
            "alpha": gamma * t,
            "ce_grad": ce_grad_sum / n,
            **{k: v / n for k, v in sums[t].items()},
            "ratio_median": _median(ratios[t]),
        }
        for t in taus
    ]
    for r in rows:
        r["kl_to_uniform"] = math.log(vocab) - r["entropy"]
        r["ratio_of_means"] = r["aug_grad"] / r["ce_grad"] if r["ce_grad"] > 0 else None
    return {
        "vocab": vocab,
        "tokens": n,
        "zero_ce_grad_tokens": zero_ce,
        "uniform_entropy": math.log(vocab),
        "rows": rows,
    }


def _median(parts: list[torch.Tensor]) -> float | None:
    """The median of the concatenated values (the mean of the two middle ones for an even count);
    None when there are none."""
    values = torch.cat(parts).double().numpy() if parts else np.empty(0)
    return float(np.median(values)) if values.size else None


def strength_markdown(name: str, result: dict) -> str:
    """One markdown table of :func:`augmented_loss_strength`'s rows."""
    zero = result["zero_ce_grad_tokens"]
    lines = [
        f"**{name}** ({result['tokens']:,} tokens, |V| = {result['vocab']:,}, "
        f"uniform entropy {result['uniform_entropy']:.3f} nats)",
        "",
        "| τ | γ | H(ỹ) | KL(ỹ ‖ uniform) | ỹ(target)·\\|V\\| | ‖p − e_y‖ | ‖γ(ŷ_τ − ỹ)‖ | "
        "ratio of the means | median ratio per token | J_aug |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in result["rows"]:
        lines.append(
            f"| {r['tau']:g} | {r['gamma']:g} | {r['entropy']:.3f} | {r['kl_to_uniform']:.4f} | "
            f"{r['target_mass']:.2f} | {r['ce_grad']:.3f} | {r['aug_grad']:.5f} | {cell(r['ratio_of_means'], '.5f')} | "
            f"{cell(r['ratio_median'], '.5f')} | {r['aug']:.5f} |"
        )
    if zero:
        lines += ["", f"Tokens with a cross-entropy gradient of exactly 0 (p = 1), left out of the median: {zero:,}."]
    return "\n".join(lines) + "\n"
