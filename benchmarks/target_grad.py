"""Training speed of REAL with gradients through ỹ (``loss.target_grad``): fused closed form against autograd.

One process times full SGD steps (forward, J + γτ·J_aug, backward, clipping, update) of the small tied
PTB model (2 x 200, |V| = 10,000, batch 20, bptt 35, fp32) with three losses, in interleaved blocks so
that other work on the machine falls on all three alike:

- ``fixed ỹ``: the default, ỹ a target (eq. 3.4), fused;
- ``target_grad fused``: gradients through ỹ into L, in closed form inside the fused loss (fused.py);
- ``target_grad autograd``: the same loss written with log_softmax / kl_div and left to autograd, as
  tiedlm computed it before the closed form.

    python benchmarks/target_grad.py --threads 1 --steps 10 --blocks 5
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from common import interleaved_arguments, interleaved_medians

VOCAB, BATCH, BPTT, HIDDEN, TAU, GAMMA = 10_000, 20, 35, 200, 20.0, 0.65


def autograd_loss(logits, targets, emb):
    """J + γτ·KL(ỹ‖ŷ) with ỹ = softmax(L[y*] Lᵀ/τ) differentiated by autograd: the reference."""
    ce = F.cross_entropy(logits, targets)
    log_tgt = F.log_softmax(emb[targets] @ emb.t() / TAU, -1)
    kl = F.kl_div(F.log_softmax(logits / TAU, -1), log_tgt, reduction="batchmean", log_target=True)
    return ce + GAMMA * TAU * kl


def main() -> None:
    args = interleaved_arguments(__doc__, "steps", "training steps per timed block", 10)

    from tiedlm import native
    from tiedlm.losses import LanguageModelLoss
    from tiedlm.models import LanguageModel
    from tiedlm.models.config import ModelConfig
    from tiedlm.runtime import set_threads

    threads = set_threads(args.threads)
    torch.manual_seed(0)
    encoder = {"name": "vd-lstm", "hidden_size": HIDDEN, "layers": 2, "dropout": 0.3}
    model = LanguageModel(ModelConfig(embedding_size=HIDDEN, init_range=0.1, output="tied", encoder=encoder), VOCAB)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    state0 = model.init_state(BATCH)
    zipf = 1.0 / torch.arange(1, VOCAB + 1, dtype=torch.float64)  # ~300 distinct targets of 700, as in PTB
    data = torch.multinomial(zipf / zipf.sum(), (BPTT + 1) * BATCH, replacement=True).view(BPTT + 1, BATCH)
    fixed = LanguageModelLoss(True, TAU, GAMMA)
    fused = LanguageModelLoss(True, TAU, GAMMA, target_grad=True)
    losses = {
        "fixed ỹ (default)": lambda z, y, e: fixed(z, y, e)[0],
        "target_grad fused": lambda z, y, e: fused(z, y, e)[0],
        "target_grad autograd": lambda z, y, e: autograd_loss(z.reshape(-1, VOCAB), y.reshape(-1), e),
    }

    def step(loss_fn):
        logits, _ = model(data[:-1], state0)
        loss = loss_fn(logits, data[1:], model.input_embeddings)
        opt.zero_grad(set_to_none=True)
        (loss * BPTT).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        opt.step()

    def block(loss_fn):
        return lambda: [step(loss_fn) for _ in range(args.steps)]

    seconds = interleaved_medians({name: block(fn) for name, fn in losses.items()}, args.blocks)
    med = {name: args.steps * BATCH * BPTT / s for name, s in seconds.items()}
    print(
        f"small tied PTB model, fp32, {threads} thread(s), torch {torch.__version__}, "
        f"C++ kernels: {'yes' if native.available() else 'no'}; {args.blocks} blocks of {args.steps} steps"
    )
    for name, r in med.items():
        print(f"{name:<22} {r:8,.0f} tok/s")
    print(
        f"target_grad fused / autograd: {med['target_grad fused'] / med['target_grad autograd']:.2f}x; "
        f"target_grad fused / fixed ỹ: {med['target_grad fused'] / med['fixed ỹ (default)']:.2f}x"
    )


if __name__ == "__main__":
    main()
