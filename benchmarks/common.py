"""What the interleaved benchmarks share: their command line, and timing variants in alternating blocks.

Interleaving (variant A, B, C, A, B, C, ...) makes other work on the machine fall on every variant alike,
so the ratios between them are fair even where the absolute figures are not.
"""

from __future__ import annotations

import argparse

from tiedlm.selfcheck.reference import interleaved_medians  # noqa: F401 (the benchmarks import it from here)


def interleaved_arguments(doc: str, reps: str, reps_help: str, reps_default: int) -> argparse.Namespace:
    """``--{reps}`` (work per timed block), ``--blocks`` and ``--threads``, with the script's first doc line."""
    p = argparse.ArgumentParser(description=doc.split("\n")[0])
    p.add_argument(f"--{reps}", type=int, default=reps_default, help=reps_help)
    p.add_argument("--blocks", type=int, default=5, help="timed blocks per variant (the median is reported)")
    p.add_argument("--threads", type=int, default=1, help="0: all cores")
    return p.parse_args()
