"""How a `tiedlm reproduce` queue should share the cores: one run on all of them, or one run per core.

`--jobs J --threads T` trains J runs at a time with T threads each. On a machine with C cores the two ends are
`--jobs 1 --threads C` and `--jobs C --threads 1`: the same cores, but the second runs C models at once,
which then share the memory bandwidth and the caches. This measures, for a preset's model, the training
tokens per second that each layout gets through in all (the sum over its runs), side by side in one run:

- each run is a child process that builds the preset's model, takes a few warm-up steps of the trainer's own
  training step (``common.lm_task_step``: the language model task's own ``train_step``, set up by the harness:
  forward and loss of a window, the state carried over, backward, the optimiser's update) on random ids, then
  waits;
- once every child of a layout is ready the parent starts them together, and each counts the tokens it trains
  in ``--seconds`` of wall time, so the concurrent runs overlap for the whole timed window;
- the layouts alternate for ``--rounds`` rounds (A, B, A, B, ...) so that other work on the machine falls on
  both alike; the median round is reported.

    python benchmarks/queue_layout.py                               # ptb-small-real-bias, all cores
    python benchmarks/queue_layout.py --presets ptb-small-real-bias ptb-awd-tied-budget --rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

VOCAB = 10_000  # PTB's vocabulary: the output layer's cost depends on it


def child(preset: str, threads: int, seconds: float) -> None:
    """One run of a layout: warm up, say "ready", wait for "go" on stdin, train for ``seconds``, print tokens/s."""
    import torch
    from common import lm_task_step

    with lm_task_step(preset, threads) as (step, task):
        x = torch.randint(0, VOCAB, (task.cfg.train.bptt, task.cfg.train.batch_size))
        for _ in range(3):
            step(x)
        print("ready", flush=True)
        sys.stdin.readline()
        tokens, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            tokens += step(x)
    print(json.dumps({"tokens_per_s": tokens / (time.perf_counter() - start)}), flush=True)


def layout(preset: str, jobs: int, threads: int, seconds: float) -> float:
    """Tokens/s in all of ``jobs`` concurrent runs at ``threads`` threads each, started together."""
    cmd = [sys.executable, __file__, "--_child", preset, "--threads", str(threads), "--seconds", str(seconds)]
    kids = [subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) for _ in range(jobs)]
    for k in kids:
        if k.stdout.readline().strip() != "ready":
            raise SystemExit(f"a child for {preset} failed before training (run it alone to see why)")
    for k in kids:
        k.stdin.write("go\n")
        k.stdin.flush()
    return sum(json.loads(k.communicate()[0])["tokens_per_s"] for k in kids)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--presets", nargs="+", default=["ptb-small-real-bias"])
    p.add_argument("--cores", type=int, default=os.cpu_count() or 1, help="C: compare 1 run x C threads, C x 1")
    p.add_argument("--seconds", type=float, default=20.0, help="timed training per run and round")
    p.add_argument("--rounds", type=int, default=3, help="rounds per layout (the median is reported)")
    p.add_argument("--json", help="also write the results to this file")
    p.add_argument("--_child", help=argparse.SUPPRESS)
    p.add_argument("--threads", type=int, default=1, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args._child:
        child(args._child, args.threads, args.seconds)
        return
    c = args.cores
    layouts = {f"1 run x {c} threads": (1, c), f"{c} runs x 1 thread": (c, 1)}
    print(f"machine: {os.cpu_count()} CPUs visible; {args.rounds} rounds of {args.seconds:g} s per layout, fp32")
    report = {}
    for preset in args.presets:
        rates = {name: [] for name in layouts}
        for _ in range(args.rounds):
            for name, (jobs, threads) in layouts.items():
                rates[name].append(layout(preset, jobs, threads, args.seconds))
        medians = {name: statistics.median(r) for name, r in rates.items()}
        one, many = medians.values()
        report[preset] = {"tokens_per_s": medians, "rounds": rates, "one_run_over_many": one / many}
        cells = "   ".join(f"{name}: {v:,.0f} tok/s in all" for name, v in medians.items())
        print(f"{preset:22s} {cells}   ratio {one / many:.2f}x", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2)


if __name__ == "__main__":
    main()
