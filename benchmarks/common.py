"""What the interleaved benchmarks share: their command line, and timing variants in alternating blocks.

Interleaving (variant A, B, C, A, B, C, ...) makes other work on the machine fall on every variant alike,
so the ratios between them are fair even where the absolute figures are not.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Callable


def interleaved_arguments(doc: str, reps: str, reps_help: str, reps_default: int) -> argparse.Namespace:
    """``--{reps}`` (work per timed block), ``--blocks`` and ``--threads``, with the script's first doc line."""
    p = argparse.ArgumentParser(description=doc.split("\n")[0])
    p.add_argument(f"--{reps}", type=int, default=reps_default, help=reps_help)
    p.add_argument("--blocks", type=int, default=5, help="timed blocks per variant (the median is reported)")
    p.add_argument("--threads", type=int, default=1, help="0: all cores")
    return p.parse_args()


def interleaved_medians(variants: dict[str, Callable[[], None]], blocks: int, warmup: int = 1) -> dict[str, float]:
    """Median wall seconds of one call of each variant, over ``blocks`` rounds that alternate the variants."""
    for fn in variants.values():
        for _ in range(warmup):
            fn()
    seconds: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(blocks):
        for name, fn in variants.items():
            start = time.perf_counter()
            fn()
            seconds[name].append(time.perf_counter() - start)
    return {name: statistics.median(s) for name, s in seconds.items()}
