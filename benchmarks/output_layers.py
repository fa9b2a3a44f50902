"""Training-step time of every output layer on one fixed AWD-LSTM encoder, measured side by side.

Pappas & Henderson (2019) report 46 s per PTB epoch for AWD-LSTM (tied) and 53 s for AWD-LSTM-DRILL
(depth 4): a ratio of 1.15. This script times full training steps (forward, AR/TAR, backward, clipping,
SGD) of the ``ptb-awd-*`` models on random Zipf-distributed tokens, in rounds that visit every layer in
turn (so that machine noise hits all of them alike), and prints the median ms per step and the ratio to
``tied`` for each.

    python benchmarks/output_layers.py                     # paper size (400/1150, |V| 10k, batch 20, bptt 70)
    python benchmarks/output_layers.py --size budget --threads 1 --rounds 5
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from tiedlm.losses import LanguageModelLoss, encoder_regularization
from tiedlm.models import LanguageModel
from tiedlm.runtime import autocast, set_threads
from tiedlm.tasks.lm.config import Config

LAYERS = {
    "tied": ("tied", {}),
    "full": ("full", {}),
    "bilinear": ("bilinear", {}),
    "dual": ("dual", {}),
    **{f"drill-{k}": ("drill", {"model.output.depth": k}) for k in (1, 2, 3, 4)},
}


def build(layer: str, size: str, vocab: int) -> tuple[LanguageModel, Config]:
    output, extra = LAYERS[layer]
    cfg = Config.load(f"ptb-awd-{output}{'-budget' if size == 'budget' else ''}")
    cfg = cfg.with_overrides([f"{k}={v}" for k, v in extra.items()])
    return LanguageModel(cfg.model, vocab), cfg


def make_step(model: LanguageModel, cfg: Config, precision: str, batch: int, bptt: int, vocab: int):
    loss_fn = LanguageModelLoss()
    opt = torch.optim.SGD(model.parameters(), lr=1.0, weight_decay=cfg.train.weight_decay)
    zipf = 1.0 / torch.arange(1, vocab + 1, dtype=torch.float)
    data = torch.multinomial(zipf, (bptt + 1) * batch, replacement=True).view(bptt + 1, batch)
    state = model.init_state(batch)
    device = torch.device("cpu")

    def step() -> float:
        nonlocal state
        t = time.perf_counter()
        with autocast(device, precision):
            logits, new = model(data[:-1], [(h.detach(), c.detach()) for h, c in state])
            loss, _, _ = loss_fn(logits, data[1:])
            loss = loss + encoder_regularization(model, cfg.loss.ar, cfg.loss.tar)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.train.clip)
        opt.step()
        state = new
        return time.perf_counter() - t

    return step


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", choices=("paper", "budget"), default="paper")
    ap.add_argument("--layers", nargs="+", default=list(LAYERS), choices=list(LAYERS))
    ap.add_argument("--rounds", type=int, default=3, help="rounds over all layers")
    ap.add_argument("--steps", type=int, default=3, help="timed steps per layer per round")
    ap.add_argument("--precision", choices=("fp32", "bf16"), default="bf16")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    threads = set_threads(args.threads)
    torch.manual_seed(0)
    vocab, batch, bptt = 10_000, 20, 70 if args.size == "paper" else 35
    steps, params = {}, {}
    for name in args.layers:
        model, cfg = build(name, args.size, vocab)
        model.train()
        params[name] = model.parameter_counts()["total"]
        steps[name] = make_step(model, cfg, args.precision, batch, bptt, vocab)
        steps[name]()  # warm-up
    times = {name: [] for name in args.layers}
    for _ in range(args.rounds):
        for name in args.layers:
            times[name] += [steps[name]() for _ in range(args.steps)]
    med = {name: statistics.median(v) * 1000 for name, v in times.items()}
    base = med.get("tied")
    rows = [
        {
            "layer": n,
            "params": params[n],
            "ms_per_step": round(med[n], 1),
            "ratio_to_tied": round(med[n] / base, 3) if base else None,
            "tokens_per_s": round(batch * bptt / med[n] * 1000),
        }
        for n in args.layers
    ]
    meta = {
        "size": args.size,
        "precision": args.precision,
        "threads": threads,
        "batch": batch,
        "bptt": bptt,
        "vocab": vocab,
        "timed_steps_per_layer": args.rounds * args.steps,
        "torch": torch.__version__,
    }
    if args.json:
        print(json.dumps({"meta": meta, "rows": rows}, indent=1))
        return
    print(" ".join(f"{k}={v}" for k, v in meta.items()))
    print(f"{'layer':10s} {'params':>12s} {'ms/step':>9s} {'x tied':>7s} {'tok/s':>7s}")
    for r in rows:
        ratio = f"{r['ratio_to_tied']:.3f}" if r["ratio_to_tied"] else "-"
        print(f"{r['layer']:10s} {r['params']:12,d} {r['ms_per_step']:9.1f} {ratio:>7s} {r['tokens_per_s']:7,d}")
    if base and "drill-4" in med:
        print(f"DRILL depth 4 / tied step time: {med['drill-4'] / base:.3f} (target <= 1.15; paper 53 s / 46 s = 1.15)")


if __name__ == "__main__":
    main()
