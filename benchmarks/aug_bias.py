"""Cost of ``loss.aug_bias = false`` (ŷ = softmax(W h/τ) without b, Inan et al. eq. 3.1 as printed).

The loss alone, forward and backward, on the logits of one batch of the small untied PTB model
(20 x 35 = 700 rows, |V| = 10,000, fp32, τ = 20, γ = 0.65), three ways, in interleaved blocks so that
other work on the machine falls on all three alike:

- ``aug_bias = true``: J and J_aug on z = W h + b, one fused pass (the default; the floor);
- ``aug_bias = false, one pass``: J on z and J_aug on z − b inside the same fused pass (fused.py's ``shift``);
- ``aug_bias = false, two passes``: a fused J on z, then a fused J_aug on the tensor z − b, as tiedlm
  computed it before the shift existed.

    python benchmarks/aug_bias.py --threads 1 --reps 20 --blocks 5
"""

from __future__ import annotations

import torch
from common import interleaved_arguments, interleaved_medians

ROWS, VOCAB, DIM, TAU, GAMMA = 700, 10_000, 200, 20.0, 0.65


def main() -> None:
    args = interleaved_arguments(__doc__, "reps", "forward + backward passes per timed block", 20)

    from tiedlm import native
    from tiedlm.losses import LanguageModelLoss, fused
    from tiedlm.runtime import set_threads

    threads = set_threads(args.threads)
    g = torch.Generator().manual_seed(0)
    wh = torch.randn(ROWS, VOCAB, generator=g).requires_grad_()
    bias = (torch.randn(VOCAB, generator=g) * 0.1).requires_grad_()
    emb = torch.randn(VOCAB, DIM, generator=g) * 0.1
    zipf = 1.0 / torch.arange(1, VOCAB + 1, dtype=torch.float64)  # ~300 distinct targets of 700, as in PTB
    targets = torch.multinomial(zipf / zipf.sum(), ROWS, replacement=True, generator=g)
    with_b, printed = LanguageModelLoss(True, TAU, GAMMA), LanguageModelLoss(True, TAU, GAMMA, aug_bias=False)

    def two_passes(z):
        ce, _ = fused.fused_lm_loss(z, targets)
        _, aug = fused.fused_lm_loss(z - bias, targets, emb, TAU, with_ce=False)
        return ce + GAMMA * TAU * aug

    variants = {
        "aug_bias = true": lambda z: with_b(z, targets, emb, bias)[0],
        "aug_bias = false, one pass": lambda z: printed(z, targets, emb, bias)[0],
        "aug_bias = false, two passes": two_passes,
    }

    def block(loss_fn):
        return lambda: [loss_fn(wh + bias).backward() for _ in range(args.reps)]

    # the first (warm-up) round also builds the C++ kernels where they are not built yet
    med = {
        name: t / args.reps
        for name, t in interleaved_medians({name: block(fn) for name, fn in variants.items()}, args.blocks).items()
    }
    print(
        f"loss alone: {ROWS} x {VOCAB:,} fp32 logits, τ = {TAU:g}, {threads} thread(s), torch {torch.__version__}, "
        f"C++ kernels: {'yes' if native.available() else 'no'}; median of {args.blocks} blocks of {args.reps}"
    )
    for name, t in med.items():
        print(f"{name:<30} {t * 1e3:7.2f} ms per forward + backward")
    one, two = med["aug_bias = false, one pass"], med["aug_bias = false, two passes"]
    print(
        f"aug_bias = false: two passes / one pass {two / one:.2f}x; "
        f"one pass / aug_bias = true {one / med['aug_bias = true']:.2f}x"
    )


if __name__ == "__main__":
    main()
