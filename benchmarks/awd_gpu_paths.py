"""The AWD-LSTM's training paths side by side on one GPU: tokens/s against the reference-style step, and the
validation perplexity each path reaches after a few epochs.

Part 1 (throughput), for each preset (``ptb-awd-tied`` and ``ptb-awd-drill``, DRILL with 4 layers, by default):

- ``reference``: the reference-style step of :mod:`tiedlm.selfcheck.reference` (one ``nn.LSTM`` per layer,
  fp32, eager, as awd-lstm-lm and DRILL's code run), at the preset's sizes on Zipfian ids;
- tiedlm's trainer (:func:`gpu_training.measure`: the harness's own loop on real PTB) under each ``--variant``:
  ``default`` is what ``train.device = "cuda"`` uses today, the others add their ``--set`` items (``padded``:
  ``train.lstm_pad_units=8``, ``train.lstm_pad_batch=8``; ``fp32``: ``train.precision=fp32``; ``fp16``:
  ``train.precision=fp16``, eager with dynamic loss scaling; ...).

Part 2 (``--epochs N``, 0: skip): each variant trains the first preset ``N`` epochs from the same seed on real
PTB and reports each epoch's validation perplexity, so that a faster path is seen to train the same model.

Prints one line per measurement under a header (date, commit, device, command) and writes ``--json``.

    python benchmarks/awd_gpu_paths.py --json awd_gpu_paths.json
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import torch

VARIANTS = {
    "default": [],
    "fp32": ["train.precision=fp32"],
    "padded": ["train.lstm_pad_units=8", "train.lstm_pad_batch=8"],
    "padded-fp32": ["train.lstm_pad_units=8", "train.lstm_pad_batch=8", "train.precision=fp32"],
    "fp16": ["train.precision=fp16"],  # eager, with loss scaling (train.step.scaled_update)
    "padded-fp16": ["train.lstm_pad_units=8", "train.lstm_pad_batch=8", "train.precision=fp16"],
}


def reference_rate(preset: str, device: torch.device, steps: int, blocks: int, extra: list[str]) -> float:
    """Tokens/s of the reference-style AWD-LSTM step at the preset's sizes (fp32, eager)."""
    from tiedlm.selfcheck.checks import baseline_steps
    from tiedlm.selfcheck.reference import interleaved_medians
    from tiedlm.tasks.lm.config import Config

    cfg = Config.load(preset).with_overrides(extra)
    step = baseline_steps(cfg, device, steps)["baseline"]
    seconds = interleaved_medians({"baseline": step}, blocks)["baseline"]
    return steps * cfg.train.batch_size * cfg.train.bptt / seconds


def few_epochs(preset: str, epochs: int, extra: list[str]) -> dict:
    """Each epoch's validation perplexity of a run of ``preset`` cut to ``epochs`` epochs, and its wall time."""
    from tiedlm.tasks.lm.config import Config
    from tiedlm.tasks.lm.task import LanguageModelTask
    from tiedlm.train import run

    cfg = Config.load(preset).with_overrides([f"train.epochs={epochs}", *extra])
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        run(LanguageModelTask(cfg), Path(tmp) / "run", progress=False, log=lambda *a: None)
        history = [json.loads(line) for line in (Path(tmp) / "run" / "metrics.jsonl").read_text().splitlines()]
    return {
        "valid_ppl": [r["valid_ppl"] for r in history],
        "tokens_per_s": [r["tokens_per_s"] for r in history],
        "precision": history[-1]["precision"],
        "seconds": time.perf_counter() - start,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--presets", nargs="+", default=["ptb-awd-tied", "ptb-awd-drill"])
    p.add_argument("--variant", nargs="+", default=list(VARIANTS), choices=list(VARIANTS), help="trainer paths")
    p.add_argument("--device", default="cuda", help="cuda (cpu: a check of the script itself, with small --set)")
    p.add_argument("--warm", type=int, default=30, help="trainer windows before timing (graph capture included)")
    p.add_argument("--windows", type=int, default=200, help="timed trainer windows")
    p.add_argument("--steps", type=int, default=20, help="reference steps per timed block (5 blocks, median)")
    p.add_argument("--epochs", type=int, default=2, help="epochs of the perplexity check (0: none)")
    p.add_argument("--set", action="append", default=[], help="overrides for every run, key=value")
    p.add_argument("--json", help="also write the results to this file")
    args = p.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("awd_gpu_paths.py: error: no CUDA GPU visible; run it on a machine with one")
    sys.path.insert(0, str(Path(__file__).parent))
    from gpu_training import header, measure

    device = torch.device(args.device)
    settings = header(device.type, overrides=args.set)
    common = [f"train.device={args.device}", *args.set]
    rows, curves = [], []
    for preset in args.presets:
        base = reference_rate(preset, device, args.steps, 5, common)
        rows.append({"preset": preset, "variant": "reference", "precision": "fp32", "tokens_per_s": base})
        print(f"{preset:16s} reference     fp32  {base:9,.0f} tok/s", flush=True)
        for variant in args.variant:
            r = measure(preset, "auto", args.warm, args.windows, [*common, *VARIANTS[variant]], device.type)
            rows.append({"variant": variant, "vs_reference": r["tokens_per_s"] / base, **r})
            print(
                f"{preset:16s} {variant:13s} {r['precision']:5s} {r['tokens_per_s']:9,.0f} tok/s "
                f"{r['tokens_per_s'] / base:5.2f}x reference   graphs {r['graphs']}   "
                f"peak memory {r['peak_gpu_mb']:,.0f} MB",
                flush=True,
            )
    for variant in args.variant if args.epochs else []:
        c = few_epochs(args.presets[0], args.epochs, [*common, *VARIANTS[variant]])
        curves.append({"preset": args.presets[0], "variant": variant, **c})
        ppl = ", ".join(f"{v:.2f}" for v in c["valid_ppl"])
        print(f"{args.presets[0]:16s} {variant:13s} {c['precision']:5s} valid ppl by epoch: {ppl}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({**settings, "throughput": rows, "epochs": curves}, indent=2) + "\n")


if __name__ == "__main__":
    main()
