"""GPU training throughput: the eager step against the CUDA-graph step, side by side, on real PTB.

For each model size it builds the preset's run (``ptb-{size}-real`` unless ``--preset-pattern`` says
otherwise), trains ``--warm`` windows (which include the graph's capture), then times ``--windows`` more
with the trainer's own loop (the harness's ``Run.fit`` with a window budget; the per-window loss read-back
synchronises, so the loop time is the GPU's). ``train.cuda_graph = off`` is the eager step,
``on`` the captured one (:mod:`tiedlm.tasks.lm.cuda_graph`; ``auto`` would leave the REAL presets' ``target_grad``
eager). Prints tokens/s, the ratio and the peak
GPU memory of each, under a line (and in ``--json``) with the date, commit, device and command.

    python benchmarks/gpu_training.py --sizes small medium large
"""

from __future__ import annotations

import argparse
import json
import math
import tempfile
from pathlib import Path

import torch


def measure(preset: str, mode: str, warm: int, windows: int, extra: list[str], device: str = "cuda") -> dict:
    from tiedlm.errors import RunInterrupted
    from tiedlm.tasks.lm.config import Config
    from tiedlm.tasks.lm.task import LanguageModelTask
    from tiedlm.train import Run

    cfg = Config.load(preset).with_overrides([f"train.cuda_graph={mode}", f"train.device={device}", *extra])
    gpu = device == "cuda"
    with tempfile.TemporaryDirectory() as tmp:
        r = Run(LanguageModelTask(cfg), Path(tmp) / "run", progress=False, log=lambda *a: None).__enter__()
        tr, p = r.task, r.progress
        if gpu:
            torch.cuda.reset_peak_memory_stats()
        for budget in (warm, windows):
            t0, n0, ce0 = p.epoch_seconds, p.sums.get("count", 0), p.sums.get("loss", 0.0)
            try:
                r.fit(budget)
            except RunInterrupted:
                pass
        r.__exit__(None, None, None)
        rate = (p.sums["count"] - n0) / (p.epoch_seconds - t0)
        return {
            "preset": preset,
            "cuda_graph": mode,
            "tokens_per_s": rate,
            "precision": tr.precision,
            "graph_used": bool(tr.graphs and tr.graphs.by_length),
            # graphs captured (one per window length for the AWD-LSTM family), and the timed windows' training
            # perplexity: eager and graphed runs should learn alike (their dropout masks differ)
            "graphs": len(tr.graphs.by_length) if tr.graphs is not None else 0,
            "train_ppl": math.exp((p.sums["loss"] - ce0) / (p.sums["count"] - n0)),
            "peak_gpu_mb": torch.cuda.max_memory_allocated() / 2**20 if gpu else 0.0,
        }


def header(device: str, **extra) -> dict:
    """What a result file starts with (printed as its first line): date, commit, device, command, and ``extra``."""
    import datetime
    import subprocess
    import sys

    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    name = torch.cuda.get_device_name() if device == "cuda" else "CPU"
    settings = {
        "date": datetime.date.today().isoformat(),
        "commit": commit or "unknown",
        "device": f"{name}, torch {torch.__version__}, CUDA {torch.version.cuda}",
        "command": " ".join(["python", *sys.argv]),
        **extra,
    }
    print("# " + " | ".join(f"{k} {v}" for k, v in settings.items()), flush=True)
    return settings


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sizes", nargs="+", default=["small", "medium", "large"])
    p.add_argument("--preset-pattern", default="ptb-{size}-real")
    p.add_argument("--warm", type=int, default=30, help="windows before timing (capture included)")
    p.add_argument("--windows", type=int, default=300, help="timed windows")
    p.add_argument("--set", action="append", default=[], help="extra config overrides, key=value")
    p.add_argument("--json", help="also write the results to this file")
    args = p.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("gpu_training.py: error: no CUDA GPU visible; run it on a machine with one")
    settings = header("cuda", warm_windows=args.warm, timed_windows=args.windows, overrides=args.set)
    results = []
    for size in args.sizes:
        preset = args.preset_pattern.format(size=size)
        row = {m: measure(preset, m, args.warm, args.windows, args.set) for m in ("off", "on")}
        results += row.values()
        off, on = row["off"], row["on"]
        print(
            f"{preset:18s} {off['precision']}  eager {off['tokens_per_s']:9,.0f} tok/s   CUDA graph "
            f"{on['tokens_per_s']:9,.0f} tok/s   {on['tokens_per_s'] / off['tokens_per_s']:5.2f}x   "
            f"peak GPU memory {off['peak_gpu_mb']:,.0f} / {on['peak_gpu_mb']:,.0f} MB   train ppl "
            f"{off['train_ppl']:,.1f} / {on['train_ppl']:,.1f}   graphs {on['graphs']}",
            flush=True,
        )
    if args.json:
        Path(args.json).write_text(json.dumps({**settings, "rows": results}, indent=2) + "\n")


if __name__ == "__main__":
    main()
