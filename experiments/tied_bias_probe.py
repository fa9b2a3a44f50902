"""Early-training probe: does the zero output bias of RE slow learning? (issue: REAL lags VD on PTB small)

Trains the PTB small presets for the first N BPTT windows (same seed, same data order) and prints the
training perplexity over those windows for: VD (untied W, b), RE with b = 0 (the paper's RE) and RE
with a learnable bias (``model.output.bias = true``).

    python experiments/tied_bias_probe.py --windows 400 --threads 1
"""

import argparse
import math
import tempfile
import time

from tiedlm.config import Config
from tiedlm.train import Interrupted, Trainer

VARIANTS = {
    "vd": ("ptb-small-vd", []),
    "re-zero-bias": ("ptb-small-re", []),
    "re-learnable-bias": ("ptb-small-re", ["model.output.bias=true"]),
}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--windows", type=int, default=400)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    args = p.parse_args()
    for name in args.variants:
        preset, extra = VARIANTS[name]
        cfg = Config.load(preset).with_overrides([f"train.threads={args.threads}"] + extra)
        tr = Trainer(cfg, tempfile.mkdtemp(), progress=False, log=lambda *a: None)
        tr.setup(False)
        t = time.perf_counter()
        try:
            tr.fit(budget_windows=args.windows)
        except Interrupted:
            pass
        s = tr.sums
        print(
            f"{name:18s} train ppl over the first {args.windows} windows: {math.exp(s['ce'] / s['tokens']):7.1f} "
            f"(seed {cfg.train.seed}, {time.perf_counter() - t:.0f} s)",
            flush=True,
        )


if __name__ == "__main__":
    main()
