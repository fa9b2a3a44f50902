"""A results page's notes, with every figure that comes from the table's runs computed from their files.

A table's notes are text with placeholders in double braces, filled from the finished runs of the page:

- ``{{ROW.FIELD}}``: a figure of row ROW's run. FIELD is ``valid`` / ``test`` (the page's valid and test
  figures: perplexity, with test by batch 1 where the run has it; accuracy in %; BLEU), ``streams`` (test over
  the evaluation streams), ``wall`` (minutes), ``tps`` (tokens/s), ``params`` (millions), ``epochs``,
  ``valid@N`` (valid perplexity after epoch N, from metrics.jsonl), ``averaging`` / ``finetune`` (the first
  epoch validated on NT-ASGD's average / of the finetune stage, from metrics.jsonl's ``stage``);
- ``{{A.FIELD-B.FIELD}}``: the difference of two such figures (signed where the template writes ``{{+...}}``);
- ``{{bands:ROW:BAND}}``: Δ% of ROW against the bands' baseline in BAND (the page's Figure 3 table), signed.

So a changed run changes its page, and a page whose notes name a run that is not finished there renders no
claim about it: :func:`render_notes` leaves out each paragraph (text between blank lines) whose placeholders
name one; the other paragraphs stand. A paragraph about runs not finished yet can so be written before they
finish: it appears, with their figures, once they do.
"""

from __future__ import annotations

import re
from pathlib import Path

from ..analysis.report import stage_start
from ..registry import task_named
from ..run_dir import RunDir

PLACEHOLDER = re.compile(r"\{\{(\+?)([^{}]+)\}\}")


def batch1_test_ppl(summary: dict) -> float | None:
    """A run's test perplexity by the papers' protocol (batch 1), or None where its summary's test figure is over
    streams (``test_protocol`` says which; runs published before tiedlm measured both give the streamed one)."""
    return summary["test_ppl"] if summary.get("test_protocol", "").startswith("batch 1") else None


class Missing(Exception):
    """A placeholder names a run (or band) that is not finished on this page."""


def _figure(row: str, field: str, runs: dict[str, Path], task: str) -> float:
    folder = runs.get(row)
    files = RunDir(folder) if folder is not None else None
    summary = files.read_summary() if files is not None else None
    if summary is None:
        raise Missing(row)
    _, keys, fmt = task_named(task).metric
    scale = 100.0 if "%" in fmt else 1.0
    if field == "valid":
        return scale * summary[keys[0]]
    if field == "test":
        batch1 = batch1_test_ppl(summary) if task_named(task).batch1 else None
        return batch1 if batch1 is not None else scale * summary[keys[1]]
    if field == "streams":
        return summary.get("test_ppl_streams", summary["test_ppl"])
    if field == "wall":
        return summary.get("wall_time_s", summary.get("train_seconds", 0.0)) / 60
    if field == "tps":
        return summary["tokens_per_s"]
    if field == "params":
        return summary["parameters"]["total"] / 1e6
    return _from_metrics(row, field, files.read_metrics())


def _from_metrics(row: str, field: str, metrics: list[dict]) -> float:
    """The fields read from a run's metrics.jsonl: ``epochs``, ``averaging``, ``finetune``, ``valid@N``."""
    if field == "epochs":
        return float(len(metrics))
    if field in ("averaging", "finetune"):
        first = stage_start(metrics, {"averaging": "averaged"}.get(field, field))
        if first is None:
            raise Missing(f"{row} (no {field} stage)")
        return float(first)
    if field.startswith("valid@"):
        epoch = int(field[6:])
        return next(m["valid_ppl"] for m in metrics if m["epoch"] == epoch)
    raise ValueError(f"unknown note field {field!r} (row {row})")


def _value(expr: str, runs: dict[str, Path], task: str, bands: dict | None) -> tuple[float, str]:
    """(value, format) of one placeholder's expression."""
    if expr.startswith("bands:"):
        _, row, band = expr.split(":")
        if bands is None or row not in bands["runs"]:
            raise Missing(row)
        line = next((r for r in bands["rows"] if r["band"] == band), None)
        if line is None or line["relative_ce"].get(row) is None:  # no test target in that band
            raise Missing(f"{row} (band {band})")
        return 100 * line["relative_ce"][row], "+.2f"
    parts = [p.strip() for p in expr.split(" - ")] if " - " in expr else [expr.strip()]
    values = [_figure(*p.rsplit(".", 1), runs, task) for p in parts]
    field = parts[0].rsplit(".", 1)[1]
    fmt = {"wall": ".1f", "tps": ",.0f", "params": ".2f", "epochs": ".0f", "averaging": ".0f", "finetune": ".0f"}
    fmt = fmt.get(field, ".2f")
    return (values[0] - values[1] if len(values) == 2 else values[0]), fmt


def render_notes(notes: str, runs: dict[str, Path], task: str, bands: dict | None = None) -> str:
    """``notes`` with every placeholder filled, less each paragraph that names a run not finished here. The notes
    live in ``notes/`` below the page they are drawn into: a link that works where they stand (``../x.md``) is
    written for the page (``x.md``)."""
    paragraphs = (_render_paragraph(text, runs, task, bands) for text in notes.split("\n\n"))
    return re.sub(r"\]\(\.\./", "](", "\n\n".join(p for p in paragraphs if p is not None))


def _render_paragraph(text: str, runs: dict[str, Path], task: str, bands: dict | None) -> str | None:
    missing: list[str] = []

    def fill(m: re.Match) -> str:
        try:
            value, fmt = _value(m[2], runs, task, bands)
        except Missing as e:
            missing.append(str(e))
            return "?"
        if m[1] == "+" and not fmt.startswith("+"):
            fmt = "+" + fmt
        return format(value, fmt)

    text = PLACEHOLDER.sub(fill, text)
    return None if missing else text
