"""Publish a table's finished runs for committing, and Figure 3's frequency bands over them."""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import UsageError
from ..paths import portable
from ..run_dir import RunDir, write_json_atomic, write_text_atomic
from .estimate import ESTIMATE
from .tables import SEEDED, Table

PUBLISHED = ("config.toml", "metrics.jsonl", "summary.json")


def publish(rows: list[dict], into: Path, log=print) -> list[str]:
    """Copy each finished run's small files (config, metrics, summary) and its log into ``into/TABLE/RUN/``, for
    committing, each machine path in them written as a user types it (:func:`~tiedlm.paths.portable`); returns the
    runs copied. A file already there with other content is never overwritten (a one-line error: committed results
    stay as they are); an identical one is left."""
    copied = []
    for r in rows:
        if r["status"] != "finished":
            continue
        src, dst = r["dir"], into / r["dir"].parent.name / r["dir"].name
        files = [(src / name, dst / name) for name in PUBLISHED if (src / name).is_file()]
        log_file = src.parent / f"{src.name}.log"
        if log_file.is_file():
            files.append((log_file, dst / "train.log"))
        texts = [(portable(a.read_text(encoding="utf-8")), b) for a, b in files]  # no path of this machine
        for text, b in texts:
            if b.exists() and b.read_text(encoding="utf-8") != text:
                raise UsageError(
                    f"{b} already holds other results; published results are never overwritten "
                    f"(move it away first if this run replaces it)"
                )
        dst.mkdir(parents=True, exist_ok=True)
        for text, b in texts:
            if not b.exists():
                write_text_atomic(b, text)
        copied.append(r["spec"].name)
        log(f"{r['spec'].name}: published to {dst}")
    return copied


def publish_estimates(tab: Table, runs_dir: Path, into: Path, log=print) -> bool:
    """Copy ``RUNS/TABLE/estimate.json`` (``--dry-run``'s last estimates of the unfinished runs) into
    ``into/TABLE/``, replacing the one there: a plan, not a result, and the page shows it only beside runs that
    are not finished."""
    import shutil

    src, dst = runs_dir / tab.name / ESTIMATE, into / tab.name / ESTIMATE
    if not src.is_file() or (dst.is_file() and dst.read_bytes() == src.read_bytes()):
        return False
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dst)
    log(f"{tab.name}: the --dry-run estimates published to {dst}")
    return True


BANDS = "bands.json"  # a table's Figure-3 analysis of its finished runs: RUNS/TABLE/bands.json


def band_analysis(
    tab: Table, rows: list[dict], runs_dir: Path, threads: int, log=print, earlier: Path | None = None
) -> Path | None:
    """Figure 3 of Pappas & Henderson (2019) over a table's finished runs: cross-entropy per training-frequency
    band of the test targets, each row's best checkpoint at its first seed, against ``tab.bands_baseline``; written to
    ``RUNS/TABLE/bands.json``. A run already in that file, or in ``earlier`` (the published analysis), keeps
    its figures there and is not analysed again, so a run whose checkpoints are gone (a published folder has
    none; a machine handed back bare has none) still counts, the baseline included; only the finished runs
    with checkpoints that no analysis holds yet are analysed. None where there is nothing new, or where the
    baseline and one other run are not both there."""
    path = runs_dir / tab.name / BANDS
    known = [json.loads(p.read_text()) for p in (path, earlier) if p is not None and p.is_file()]
    done = {n for t in known for n in t["runs"]}
    todo = [
        r
        for r in rows
        if r["status"] == "finished"
        and r["spec"].name not in done
        and not SEEDED.match(r["spec"].name)  # Figure 3 compares the rows at their first seed
        and RunDir(r["dir"]).checkpoint("best").is_file()
    ]
    todo.sort(key=lambda r: r["spec"].name != tab.bands_baseline)  # stable: the baseline first, then table order
    names = [r["spec"].name for r in todo]
    analysed = done | set(names)
    if not todo or tab.bands_baseline not in analysed or len(analysed) < 2:
        return None
    from ..analysis.bands import bands_of_runs, merge_band_tables
    from ..run import load_run
    from ..runtime import set_threads

    set_threads(threads)
    fresh = bands_of_runs([load_run(r["dir"], which="best") for r in todo], names, "test")
    fresh.update(checkpoint="best")
    order = [s.name for specs in tab.runs.values() for s in specs]
    table = merge_band_tables([*known, fresh], tab.bands_baseline, order)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, table)
    log(
        f"bands (Figure 3) of {', '.join(names)}"
        + (f", beside {', '.join(sorted(done))}" if done else "")
        + f": {path}"
    )
    return path


def publish_bands(tab: Table, runs_dir: Path, into: Path, log=print) -> bool:
    """Copy ``RUNS/TABLE/bands.json`` into ``into/TABLE/``. One already there is replaced only by an analysis that
    holds each of its runs with the same cross-entropies (to 1e-5, relative) and more runs; anything else is a
    one-line error (published results are never overwritten)."""
    src, dst = runs_dir / tab.name / BANDS, into / tab.name / BANDS
    if not src.is_file():
        return False
    new = json.loads(src.read_text())
    if dst.is_file():
        old = json.loads(dst.read_text())

        def same(a, b):
            return (a is None and b is None) or (a is not None and b is not None and abs(a - b) <= 1e-5 * abs(a))

        kept = set(old["runs"]) <= set(new["runs"]) and all(
            same(o["ce"][n], w["ce"][n]) for o, w in zip(old["rows"], new["rows"]) for n in old["runs"]
        )
        if not kept or old["baseline"] != new["baseline"]:
            raise UsageError(
                f"{dst} holds other band figures than {src}; published results are never overwritten "
                f"(move it away first if this analysis replaces it)"
            )
        if len(new["runs"]) == len(old["runs"]):
            return False
    dst.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(dst, new)
    log(f"bands of {', '.join(new['runs'])}: published to {dst}")
    return True
