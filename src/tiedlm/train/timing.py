"""Timed training steps: what an estimate of a run's wall time on this machine is made of (``reproduce --dry-run``
asks each task for one, :data:`tiedlm.tasks.TASKS`)."""

from __future__ import annotations

import time


def seconds_per_token(step, batches, steps: int) -> float:
    """The least seconds per token over ``steps`` timed calls of ``step(batch) -> tokens`` (after one warm-up;
    ``batches`` is gone through again where it holds fewer)."""
    import itertools

    rates = []
    for i, batch in enumerate(itertools.islice(itertools.cycle(batches), steps + 1)):
        start = time.perf_counter()
        tokens = step(batch)
        if i:  # the first call warms caches and kernels up
            rates.append((time.perf_counter() - start) / tokens)
    return min(rates)


def estimate(step, batches, tokens: int, epochs: int, steps: int) -> float:
    """A whole run's seconds: :func:`seconds_per_token` of ``step`` times its training ``tokens`` and ``epochs``, plus
    10% for validation. An estimate, not a measurement of the run."""
    return 1.1 * seconds_per_token(step, batches, steps) * tokens * epochs
