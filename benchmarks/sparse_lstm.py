"""Sparse LSTM layer speed: one batched computation vs its k components one after another vs dense.

Demeester et al. (2018)'s sparse layer is k dense LSTM components side by side. ``SparseLSTMLayer`` runs
them as one ``bmm`` per time step; the reference code runs them in a Python loop. This script times a
training step (forward + backward over a BPTT window) of, side by side and in alternating rounds:

- ``sparse batched``: :class:`tiedlm.models.SparseLSTMLayer` (h_s, k, slice w solved for equal parameters);
- ``sparse sequential``: the same k components as k separate dense ``VDLSTMLayer``s run one after another
  (same weights; the script checks that both give the same outputs);
- ``dense``: a dense ``VDLSTMLayer`` with the parameter count the sparse one was solved for.

    python benchmarks/sparse_lstm.py                       # AWD middle layer: 1150 -> 1725 (k=3) vs 1150
    python benchmarks/sparse_lstm.py --size budget --threads 1
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from tiedlm.models import SparseLSTMLayer, VDLSTMLayer, solve_equal_parameters
from tiedlm.runtime import autocast, set_threads

SIZES = {"paper": (1150, 1150, 1725), "budget": (400, 400, 600)}  # input, dense hidden, sparse hidden


class SequentialComponents(torch.nn.Module):
    """The k components of a sparse layer as k dense layers run one after another (the reference's loop)."""

    def __init__(self, sparse: SparseLSTMLayer):
        super().__init__()
        k, m = sparse.components, sparse.hidden_size // sparse.components
        self.index = sparse.input_index
        self.parts = torch.nn.ModuleList(VDLSTMLayer(sparse.slice_size, m) for _ in range(k))
        with torch.no_grad():
            for c, part in enumerate(self.parts):
                part.weight_ih.copy_(sparse.weight_ih[c])
                part.weight_hh.copy_(sparse.weight_hh[c])
                part.bias.copy_(sparse.bias[c])

    def forward(self, x, state, mask=None):
        hs, cs = state[0].chunk(len(self.parts), 1), state[1].chunk(len(self.parts), 1)
        outs = [part(x[:, :, idx], (h, c))[0] for part, idx, h, c in zip(self.parts, self.index, hs, cs)]
        return torch.cat(outs, -1), None


def timer(layer, x, state, precision: str):
    def step() -> float:
        t = time.perf_counter()
        with autocast(torch.device("cpu"), precision):
            out, _ = layer(x, state)
        out.float().pow(2).mean().backward()
        return time.perf_counter() - t

    return step


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", choices=SIZES, default="paper")
    ap.add_argument("--components", type=int, default=3)
    ap.add_argument("--batch", type=int, default=20)
    ap.add_argument("--bptt", type=int, default=70)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=3, help="timed steps per layer per round")
    ap.add_argument("--precision", choices=("bf16", "fp32"), default="bf16")
    ap.add_argument("--threads", type=int, default=0)
    args = ap.parse_args()
    set_threads(args.threads)
    torch.manual_seed(0)
    i, h, h_s = SIZES[args.size]
    k, w = solve_equal_parameters(i, h, h_s, args.components)
    sparse = SparseLSTMLayer(i, h_s, k, w).train()
    layers = {
        "sparse batched": sparse,
        "sparse sequential": SequentialComponents(sparse),
        "dense": VDLSTMLayer(i, h).train(),
    }
    x = torch.randn(args.bptt, args.batch, i)
    state_s = (torch.zeros(args.batch, h_s), torch.zeros(args.batch, h_s))
    state_d = (torch.zeros(args.batch, h), torch.zeros(args.batch, h))
    with torch.no_grad():
        diff = (layers["sparse batched"](x, state_s)[0] - layers["sparse sequential"](x, state_s)[0]).abs().max()
    steps = {
        name: timer(layer, x, state_d if name == "dense" else state_s, args.precision) for name, layer in layers.items()
    }
    times = {name: [] for name in layers}
    for step in steps.values():  # warm-up
        step()
    for _ in range(args.rounds):
        for name, step in steps.items():
            times[name] += [step() for _ in range(args.steps)]
    params = {name: sum(p.numel() for p in layer.parameters()) for name, layer in layers.items()}
    print(
        f"# sparse LSTM step time, {args.size} size: input {i}, sparse {h_s} units as k={k} components reading "
        f"{w}/{i} inputs (density {w / i:.3f}) vs dense {h} units; batch {args.batch}, bptt {args.bptt}, "
        f"{args.precision}, {torch.get_num_threads()} thread(s), {args.rounds}x{args.steps} steps each"
    )
    print(f"# batched vs sequential outputs: max |diff| = {diff:.2e}")
    base = statistics.median(times["sparse batched"])
    print(f"{'layer':<18} {'params':>11} {'ms/step':>9} {'vs batched':>11}")
    for name in layers:
        med = statistics.median(times[name])
        print(f"{name:<18} {params[name]:>11,} {1000 * med:>9.1f} {med / base:>10.2f}x")


if __name__ == "__main__":
    main()
