"""What ``reproduce --dry-run`` says a run will cost on this machine: the task's own set-up and its own
:meth:`~tiedlm.train.loop.Task.train_step`, timed."""

from __future__ import annotations

import itertools
import statistics
import tempfile
import time
from pathlib import Path


def estimate_seconds(task, threads: int, steps: int = 2) -> float:
    """A whole run's wall seconds on this machine's CPU: ``task`` set up by the harness in a temporary folder (its data,
    model and optimiser, as a run has them) on ``threads`` threads, ``steps`` calls of its own ``train_step`` on its
    first training batches timed (after one warm-up), times its batches an epoch and its epochs (a finetune stage
    included), plus 10% for validation. An estimate, not a measurement of the run."""
    from .loop import Progress, Run

    s = task.settings()
    s.threads, s.device = threads, "cpu"  # the CPU's estimate (reproduce --dry-run notes rows that would use a GPU)
    with tempfile.TemporaryDirectory() as tmp, Run(task, Path(tmp) / "run", False, False, lambda *a, **k: None) as r:
        task.start_epoch(r.progress)
        batches, progress, seconds = task.batches(1), Progress(), []
        for i, batch in enumerate(itertools.islice(itertools.cycle(batches), steps + 1)):
            start = time.perf_counter()
            task.train_step(batch, progress)
            progress.updates += 1
            if i:  # the first call warms caches and kernels up
                seconds.append(time.perf_counter() - start)
    epochs = getattr(task.settings(), "total_epochs", task.epochs)
    return 1.1 * statistics.mean(seconds) * len(batches) * epochs
