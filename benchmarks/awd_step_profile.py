"""Where the AWD-LSTM's training step spends its time: tiedlm's against the reference-style one, profiled.

Builds both steps of ``tiedlm selfcheck``'s baseline row (:func:`tiedlm.selfcheck.checks.baseline_steps`: the
preset's sizes, the same Zipfian window, SGD, clipping, AR/TAR), times them interleaved (median of
``--blocks``), then runs each under ``torch.profiler`` and prints the ops with the most self time on the
device (CUDA kernels on a GPU, CPU ops on the CPU), so that a ratio below 1 says what it comes from.

    python benchmarks/awd_step_profile.py --device cuda --preset ptb-awd-tied
"""

from __future__ import annotations

import argparse

import torch


def main() -> None:
    from tiedlm.selfcheck.checks import baseline_steps
    from tiedlm.selfcheck.reference import interleaved_medians
    from tiedlm.tasks.lm.config import Config

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", default="cuda")
    p.add_argument("--preset", default="ptb-awd-tied")
    p.add_argument("--steps", type=int, default=10, help="training steps per timed call")
    p.add_argument("--blocks", type=int, default=9, help="interleaved rounds; the median is reported")
    p.add_argument("--rows", type=int, default=15, help="profiler rows per variant")
    p.add_argument("--set", action="append", default=[], help="extra config overrides, key=value")
    args = p.parse_args()
    device = torch.device(args.device)
    cfg = Config.load(args.preset).with_overrides(args.set)
    steps = baseline_steps(cfg, device, args.steps)
    seconds = interleaved_medians(steps, args.blocks)
    tokens = args.steps * cfg.train.batch_size * cfg.train.bptt
    print(f"# {args.preset} on {device}, batch {cfg.train.batch_size} x bptt {cfg.train.bptt}, {args.blocks} blocks")
    for name, s in seconds.items():
        print(f"{name:9s} {tokens / s:10,.0f} tok/s  ({1e3 * s / args.steps:.2f} ms a step)")
    print(f"ratio tiedlm/baseline {seconds['baseline'] / seconds['tiedlm']:.3f}")
    from torch.profiler import ProfilerActivity, profile

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    key = "self_cuda_time_total" if device.type == "cuda" else "self_cpu_time_total"
    for name, fn in steps.items():
        with profile(activities=acts) as prof:
            fn()
        print(f"\n## {name}: top {args.rows} by {key}")
        print(prof.key_averages().table(sort_by=key, row_limit=args.rows, max_name_column_width=60))


if __name__ == "__main__":
    main()
