"""The first windows of a selfcheck training row, traced: the validation slice's perplexity every few windows.

`tiedlm selfcheck --device cuda` passed a training row when the perplexity of a 20,000-token validation slice,
read once after 160 windows, was below the untrained model's (since 2026-11-28: the median of three readings).
The AWD-LSTM trains at lr 30 from random weights, so a single reading can land on a transient spike. This
traces the row the selfcheck runs (same preset, sizes, seed and settings: ``tiedlm.selfcheck._config``), reading
the slice every ``--every`` windows, to tell such a spike from a divergence, and, with ``--tree``, runs the same
trace on another checkout's ``src`` (e.g. one made with ``git archive COMMIT src``) in a fresh process, to tell
a change of code from a change of device.

    python benchmarks/gpu_early_training.py --preset ptb-awd-drill --set train.cuda_graph=off --windows 400 --every 20
    python benchmarks/gpu_early_training.py ... --tree .old/src     # the same trace on another tree's code

Prints one JSON line per trace: the settings, the untrained perplexity, and (window, perplexity) pairs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path


def trace(preset: str, overrides: list[str], windows: int, every: int, device: str) -> dict:
    import torch

    from tiedlm.evaluation import evaluate
    from tiedlm.selfcheck import _config, _corpus
    from tiedlm.selfcheck.checks import _budgeted_fit, sizes_for
    from tiedlm.train import Trainer

    sizes = sizes_for(device, False)
    with tempfile.TemporaryDirectory() as tmp:
        data, _ = _corpus("", Path(tmp) / "corpus")
        cfg = _config(preset, data, device, sizes, 0).with_overrides(overrides)
        tr = Trainer(cfg, Path(tmp) / "run", progress=False, log=lambda *a, **k: None)
        tr.setup(False)
        t = cfg.train
        valid = tr.corpus.valid[: sizes.eval_tokens]
        before = evaluate(tr.model, valid, t.eval_batch_size, t.bptt, tr.precision)["ppl"]
        points = []
        for i in range(1, windows // every + 1):
            _budgeted_fit(tr, every)
            ppl = evaluate(tr.eval_model, valid, t.eval_batch_size, t.bptt, tr.precision)["ppl"]
            points.append((i * every, round(ppl, 1)))
        return {
            "preset": preset,
            "set": overrides,
            "precision": tr.precision,
            "graphed": tr.graphed is not None,
            "skipped": int(tr.sums.get("skipped", 0)),
            "device": torch.cuda.get_device_name() if device == "cuda" else device,
            "tiedlm": str(Path(sys.modules["tiedlm"].__file__).parent),
            "before": round(before, 1),
            "trace": points,
        }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--preset", default="ptb-awd-drill")
    ap.add_argument("--set", action="append", default=[], help="a config override KEY=VALUE (repeatable)")
    ap.add_argument("--windows", type=int, default=400)
    ap.add_argument("--every", type=int, default=20)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tree", help="another checkout's src folder: run the trace there, in a fresh process")
    a = ap.parse_args()
    if a.tree:
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([a.tree, *os.environ.get("PYTHONPATH", "").split(os.pathsep)]),
        }
        args = [arg for arg in sys.argv[1:] if arg not in ("--tree", a.tree)]
        sys.exit(subprocess.run([sys.executable, __file__, *args], env=env).returncode)
    print(json.dumps(trace(a.preset, a.set, a.windows, a.every, a.device)), flush=True)


if __name__ == "__main__":
    main()
