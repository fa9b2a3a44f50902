"""A wall time in words, as every run's lines, summaries and reports print it."""

from __future__ import annotations

import math


def duration(seconds: float) -> str:
    """A wall time in words, at a scale that shows it: seconds below 90 s, minutes below 90 min, hours above (a
    short run is not "0.0 min", a long one not "2400.0 min")."""
    if seconds < 90:
        return f"{math.ceil(seconds)} s"
    return f"{seconds / 60:.1f} min" if seconds < 90 * 60 else f"{seconds / 3600:.2f} h"
