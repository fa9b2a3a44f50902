"""A whole dynamic evaluation, resumable: gradient statistics on train, Krause et al.'s grid on valid, the split.

What ``tiedlm evaluate --dynamic [--grid] [--work DIR]`` runs, callable from Python as well
(:func:`run_dynamic_evaluation`). With a work folder (``work``) each stage keeps its result there, named in
:data:`WORK_FILES`, and the same call again takes them from there: the statistics, each grid point, the adapted
model of the pass in progress (at least every ``DEFAULT_SAVE_SECONDS``, and at a stop), and the final result.
SIGINT/SIGTERM set a stop flag (:class:`~tiedlm.interrupts.StopRequest`): the pass stops between two segments,
writes its progress and raises :class:`~tiedlm.errors.RunInterrupted`; the same call resumes to the very numbers
of an uninterrupted evaluation.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from ..errors import RunInterrupted, UsageError
from ..interrupts import StopRequest, StopRequested
from ..run_dir import write_json_atomic, write_text_atomic
from . import dynamic
from .dynamic_settings import GRID_LAMBDAS, GRID_LRS, Grid

WORK_FILES = {
    "identity": "evaluation.json",  # what this folder's progress belongs to (run, split, settings, grid)
    "statistics": "statistics.safetensors",  # the gradient RMS over the training split
    "grid": "grid.jsonl",  # one line per finished grid point
    "result": "result.json",  # the finished evaluation
    "threads": "threads.json",  # the thread count it started with, which a resumed evaluation keeps
}


def recorded_threads(work: Path | None) -> int:
    """The thread count the dynamic evaluation in ``work`` started with (0: none recorded, or no --work)."""
    path = work / WORK_FILES["threads"] if work is not None else None
    if path is None or not path.is_file():
        return 0
    try:
        return int(json.loads(path.read_text())["threads"])
    except (ValueError, KeyError, TypeError):
        return 0


def record_threads(work: Path, threads: int) -> None:
    """Keep the thread count of a dynamic evaluation starting in ``work`` (the first start's, never replaced)."""
    path = work / WORK_FILES["threads"]
    if not path.is_file():
        write_json_atomic(path, {"threads": threads})


def claim_work_folder(work: Path, identity: dict) -> None:
    """Refuse a folder holding another evaluation's progress; record this one's."""
    known = work / WORK_FILES["identity"]
    if known.is_file() and json.loads(known.read_text()) != identity:
        raise UsageError(
            f"--work {work} holds the progress of another dynamic evaluation (other run, split or settings); "
            f"give another --work folder"
        )
    write_json_atomic(known, identity)


def _statistics(model, corpus, settings, precision, work, progress):
    path = work / WORK_FILES["statistics"] if work is not None else None
    if path is not None and path.is_file():
        return dynamic.load_statistics(path)
    stats = dynamic.gradient_rms(model, corpus.train, settings, precision, progress=progress)
    if path is not None:
        dynamic.save_statistics(path, stats)
    return stats


def _grid_search(model, valid, stats, settings, grid: Grid, precision, work, progress, log, check) -> list[dict]:
    """Every (η, λ) of the grid on valid, finished points taken from the work folder; returns the points."""
    done_file = work / WORK_FILES["grid"] if work is not None else None
    done = [json.loads(x) for x in done_file.read_text().splitlines()] if done_file and done_file.is_file() else []
    scale = settings.bptt / 5  # Krause et al. scale their grid with the segment length
    lrs = grid.lrs or [v * scale for v in GRID_LRS]
    lambdas = grid.lambdas or [v * scale for v in GRID_LAMBDAS]
    points = []
    for lr in lrs:
        for lamb in lambdas:
            known = [g for g in done if g["lr"] == lr and g["lambda"] == lamb]
            if known:
                points.append(known[0])
                continue
            trial = dataclasses.replace(settings, lr=lr, lamb=lamb)
            r = dynamic.dynamic_evaluate(
                model, valid, stats, trial, precision, progress=progress, desc=f"grid lr={lr:g} λ={lamb:g}", check=check
            )
            points.append({"lr": lr, "lambda": lamb, "valid_ppl": r["ppl"], "tokens": r["tokens"]})
            log(f"grid: lr {lr:g} λ {lamb:g}: valid ppl {r['ppl']:.2f} ({r['tokens']:,} tokens)")
            if done_file is not None:
                done.append(points[-1])
                write_text_atomic(done_file, "".join(json.dumps(g) + "\n" for g in done))
    return points


def _grid_choice(model, corpus, stats, settings, grid: Grid, precision, work, progress, log, stop):
    """The settings with the grid's best η and λ on the valid split, and every grid point."""
    if settings.old_hyper:
        # Krause et al.'s --grid --oldhyper converts only ε: the grid's η and λ are already on the corrected
        # code's scale, so each point is used as it is (converting it again made 3e-5 / 0.001 into 6.7e-6 / 9.1e-5)
        eff = dynamic.effective_settings(settings, stats)
        settings = dataclasses.replace(eff, lr=settings.lr, lamb=settings.lamb)
    valid = corpus.valid[: grid.tokens + 1] if grid.tokens else corpus.valid
    points = _grid_search(model, valid, stats, settings, grid, precision, work, progress, log, stop.check)
    best = min(points, key=lambda g: g["valid_ppl"])
    return dataclasses.replace(settings, lr=best["lr"], lamb=best["lambda"]), points


def run_dynamic_evaluation(
    model,
    corpus,
    split: str,
    settings: dynamic.DynamicEvalSettings,
    precision: str,
    *,
    grid: Grid | None = None,
    work: Path | None = None,
    progress: bool = False,
    log=print,
    about: dict | None = None,
) -> dict:
    """Statistics, the grid (if asked) and the dynamic evaluation of ``split``; returns the result: ``about``
    (e.g. the run and its static perplexity) with ``"settings"`` as used, ``"effective"`` in the paper's scaling,
    ``"grid"`` and ``"statistics_segments"``, also written to the work folder's result.json; with
    ``"finished_before": True`` where that folder already held it."""
    if work is not None and (work / WORK_FILES["result"]).is_file():
        return {**json.loads((work / WORK_FILES["result"]).read_text()), "finished_before": True}
    asked = settings
    with StopRequest() as stop:
        try:
            stats = _statistics(model, corpus, settings, precision, work, progress)
            points = []
            if grid is not None:
                settings, points = _grid_choice(
                    model, corpus, stats, settings, grid, precision, work, progress, log, stop
                )
            res = dynamic.dynamic_evaluate(
                model,
                corpus.splits[split],
                stats,
                settings,
                precision,
                progress=progress,
                desc=f"dynamic {split}",
                save_to=work / f"{split}.safetensors" if work is not None else None,
                check=stop.check,
            )
        except StopRequested:
            where = (
                f"its progress is in {work}: run the same command to resume"
                if work is not None
                else "nothing was kept (give --work DIR to make it resumable)"
            )
            raise RunInterrupted(f"dynamic evaluation stopped; {where}") from None
    # as asked: with --grid, the grid's η and λ and the original-scale ε that the conversion applied to
    shown = dataclasses.replace(settings, epsilon=asked.epsilon, old_hyper=True) if asked.old_hyper else settings
    out = {**(about or {}), "split": split, "dynamic_ppl": res["ppl"], "tokens": res["tokens"]}
    out |= {"settings": dataclasses.asdict(shown), "effective": res["effective"], "statistics_segments": stats.segments}
    out |= {"grid": points, "precision": precision}
    if work is not None:
        write_json_atomic(work / WORK_FILES["result"], out)
    return out
