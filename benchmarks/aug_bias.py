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

import argparse
import statistics
import time

import torch

ROWS, VOCAB, DIM, TAU, GAMMA = 700, 10_000, 200, 20.0, 0.65


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--reps", type=int, default=20, help="forward + backward passes per timed block")
    p.add_argument("--blocks", type=int, default=5, help="timed blocks per variant (the median is reported)")
    p.add_argument("--threads", type=int, default=1, help="0: all cores")
    args = p.parse_args()

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

    def block(loss_fn) -> float:
        """Seconds per forward + backward, over one block of reps."""
        start = time.perf_counter()
        for _ in range(args.reps):
            loss_fn(wh + bias).backward()
        return (time.perf_counter() - start) / args.reps

    for fn in variants.values():  # warm-up (and the one-time kernel build)
        block(fn)
    times = {name: [] for name in variants}
    for _ in range(args.blocks):
        for name, fn in variants.items():
            times[name].append(block(fn))
    print(f"loss alone: {ROWS} x {VOCAB:,} fp32 logits, τ = {TAU:g}, {threads} thread(s), torch {torch.__version__}, "
          f"C++ kernels: {'yes' if native.available() else 'no'}; median of {args.blocks} blocks of {args.reps}")
    med = {name: statistics.median(t) for name, t in times.items()}
    for name, t in med.items():
        print(f"{name:<30} {t * 1e3:7.2f} ms per forward + backward")
    one, two = med["aug_bias = false, one pass"], med["aug_bias = false, two passes"]
    print(f"aug_bias = false: two passes / one pass {two / one:.2f}x; "
          f"one pass / aug_bias = true {one / med['aug_bias = true']:.2f}x")


if __name__ == "__main__":
    main()
