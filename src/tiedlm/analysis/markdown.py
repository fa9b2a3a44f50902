"""Markdown table cells shared by the analyses' reports."""

from __future__ import annotations


def cell(value: float | None, spec: str = ".2f") -> str:
    """``value`` formatted with ``spec`` (a format spec such as ``".3f"`` or ``"+.2f"``), or "–" where
    there is no value (a run without a test figure, a band without tokens, a ratio with a zero divisor)."""
    return "–" if value is None else format(value, spec)
