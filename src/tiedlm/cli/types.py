"""Argument types for the command line: numbers checked where they are parsed.

A bad value becomes argparse's usage error, which the CLI prints as one line with exit code 2
(``tiedlm: error: argument --top: expected an integer >= 1, got '0'``).
"""

from __future__ import annotations

import argparse
import math


def integer(minimum: int):
    """An ``int`` parser that accepts values >= ``minimum``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < minimum:
            raise argparse.ArgumentTypeError(f"expected an integer >= {minimum}, got {text!r}")
        return value

    parse.__name__ = f"integer >= {minimum}"
    return parse


def number(minimum: float = -math.inf, above: bool = False, maximum: float = math.inf):
    """A finite ``float`` parser: >= ``minimum`` (> with ``above``) and <= ``maximum``."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        low_ok = value > minimum if above else value >= minimum
        if not (math.isfinite(value) and low_ok and value <= maximum):
            bounds = [f"{'>' if above else '>='} {minimum:g}"] if minimum > -math.inf else []
            bounds += [f"<= {maximum:g}"] if maximum < math.inf else []
            raise argparse.ArgumentTypeError(f"expected a finite number {' and '.join(bounds)}, got {text!r}".strip())
        return value

    parse.__name__ = "number"
    return parse


THREADS = integer(0)  # 0: every core
POSITIVE = integer(1)
