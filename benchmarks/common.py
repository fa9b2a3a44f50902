"""What the interleaved benchmarks share: their command line, and timing variants in alternating blocks.

Interleaving (variant A, B, C, A, B, C, ...) makes other work on the machine fall on every variant alike,
so the ratios between them are fair even where the absolute figures are not.
"""

from __future__ import annotations

import argparse
import contextlib
import tempfile
from pathlib import Path

from tiedlm.selfcheck.reference import interleaved_medians  # noqa: F401 (the benchmarks import it from here)


def interleaved_arguments(doc: str, reps: str, reps_help: str, reps_default: int) -> argparse.Namespace:
    """``--{reps}`` (work per timed block), ``--blocks`` and ``--threads``, with the script's first doc line."""
    p = argparse.ArgumentParser(description=doc.split("\n")[0])
    p.add_argument(f"--{reps}", type=int, default=reps_default, help=reps_help)
    p.add_argument("--blocks", type=int, default=5, help="timed blocks per variant (the median is reported)")
    p.add_argument("--threads", type=int, default=1, help="0: all cores")
    return p.parse_args()


@contextlib.contextmanager
def lm_task_step(preset: str, threads: int, overrides: tuple[str, ...] = ()):
    """The language model's own training step, as a run takes it: the preset's
    :class:`~tiedlm.tasks.lm.task.LanguageModelTask` set up by the harness in a temporary folder (its corpus, seeded
    model and optimiser) on ``threads`` CPU threads in fp32, lr 1e-3 (random ids stay finite). Yields
    ``(step, task)``: ``step(x) -> tokens`` takes its ``train_step`` on a (bptt, batch) window of ids ``x``, which is
    its own target (timing and hashing need no real text), the state carried over."""
    from tiedlm.tasks.lm.config import Config
    from tiedlm.tasks.lm.task import LanguageModelTask
    from tiedlm.train import Run

    sets = ["train.precision=fp32", "train.device=cpu", f"train.threads={threads}", "train.lr=0.001", *overrides]
    task = LanguageModelTask(Config.load(preset).with_overrides(sets))
    with tempfile.TemporaryDirectory() as tmp, Run(task, Path(tmp) / "run", False, False, lambda *a, **k: None) as r:
        task.start_epoch(r.progress)

        def step(x) -> int:
            made, _ = task.train_step((0, x, x), r.progress)
            r.progress.updates += made
            return x.numel()

        yield step, task
