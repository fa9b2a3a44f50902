"""Do two settings train a preset's model to the same bits? A hash of the weights after a few training steps.

Each (source tree, thread count) pair runs in a fresh process: it builds the preset's model in fp32 (vocabulary
10,000, PTB's), takes ``--steps`` steps of the language model task's own ``train_step`` (``common.lm_task_step``,
set up by the harness: forward and loss of a window with the state carried, backward, clipping, the optimiser's
update) on seeded random ids, and prints the SHA-256 of the weights, with the host's numerics hash
(:func:`tiedlm.runtime.numerics_hash`). Equal hashes: the two settings train that model identically here.
``--src`` takes other checkouts' ``src`` folders (``git worktree add /tmp/old COMMIT``, of a tiedlm whose harness
runs the language model as a ``Task``), so that a change of code can be told from a change of host or of thread
count when two runs of one config drift apart. The corpus (PTB) comes from ``TIEDLM_DATA`` or the download cache.

    python benchmarks/step_hash.py ptb-awd-drill-budget --threads 1 2
    python benchmarks/step_hash.py ptb-awd-drill-budget --src /tmp/old/src src --threads 1
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
from pathlib import Path

VOCAB = 10_000


def child(preset: str, threads: int, steps: int) -> str:
    import torch
    from common import lm_task_step

    from tiedlm.runtime import numerics_hash

    with lm_task_step(preset, threads) as (step, task):
        g, t = torch.Generator().manual_seed(5), task.cfg.train
        for _ in range(steps):
            step(torch.randint(0, VOCAB, (t.bptt, t.batch_size), generator=g))
        digest = hashlib.sha256()
        for _, tensor in sorted(task.model.state_dict().items()):
            digest.update(tensor.detach().contiguous().numpy().tobytes())
    return f"weights {digest.hexdigest()[:16]} | numerics {numerics_hash()}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("preset")
    ap.add_argument("--threads", type=int, nargs="+", default=[1])
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--src", nargs="+", default=[str(Path(__file__).resolve().parents[1] / "src")])
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(child(args.preset, args.threads[0], args.steps))
        return 0
    for src in args.src:
        for threads in args.threads:
            env = {**os.environ, "PYTHONPATH": str(Path(src).resolve())}
            cmd = [sys.executable, __file__, args.preset, "--threads", str(threads), "--steps", str(args.steps)]
            out = subprocess.run([*cmd, "--child"], env=env, capture_output=True, text=True)
            line = out.stdout.strip() or f"failed: {out.stderr.strip().splitlines()[-1:]}"
            print(f"{args.preset} | {args.steps} steps | src {src} | {threads} thread(s) | {line}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
