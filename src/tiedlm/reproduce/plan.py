"""A table's runs on disk: each run's folder, status and config, and the commands that start or resume it."""

from __future__ import annotations

import shlex
from pathlib import Path

from ..registry import task_named
from ..run_dir import RunDir
from .tables import RunSpec, Table


def run_status(run_dir: Path) -> str:
    """finished | running (trained by another process now) | interrupted | missing."""
    return RunDir(run_dir).status()


RESUMED = ("interrupted", "running", "short")  # the statuses whose run goes on from its own checkpoint


def train_command(row: dict, threads: int) -> list[str]:
    """The ``tiedlm train`` (``tag train``, ``translate train``) arguments that start or resume a planned row
    (:func:`plan`); a run the table now asks more epochs of is resumed with the table's count. A resumed run keeps
    the thread count it started with (so that it ends as an uninterrupted run would), whatever ``threads`` is."""
    spec, run_dir = row["spec"], row["dir"]
    if row["status"] in RESUMED:
        resume = [*task_named(spec.task).train, "--resume", str(run_dir), "--no-progress"]
        return resume + [a for s in row.get("extend", ()) for a in ("--set", s)]
    start, sets = _start(spec, row["extra"])
    return [*start, "--out", str(run_dir), "--no-progress", "--threads", str(threads), *sets]


def run_train_config(spec: RunSpec, run_dir: Path):
    """The ``[train]`` settings a run folder holds (its config.toml), or None (no config yet): read once per row
    for :func:`epochs_to_extend` and :func:`settings_to_adopt`."""
    own = RunDir(run_dir).config
    return task_named(spec.task).config.load(own).train if own.is_file() else None


def epochs_to_extend(mine, config) -> list[str]:
    """The settings that raise a run folder's epoch counts (``mine``: its :func:`run_train_config`) to its table's
    (``train.epochs=N``, ``train.optimizer.finetune_epochs=N``; only those the folder has fewer of), for a resume: a
    table whose stated count went up after the run trained goes on from the run's checkpoint."""
    if mine is None:
        return []
    table = config.train
    sets = [f"train.epochs={table.epochs}"] if mine.epochs < table.epochs else []
    if mine.finetune_epochs < table.finetune_epochs:
        sets.append(f"train.optimizer.finetune_epochs={table.finetune_epochs}")
    return sets


def settings_to_adopt(mine, config) -> list[str]:
    """The resumable settings that change how an unfinished run goes on and that its table asks for but its folder
    (``mine``: its :func:`run_train_config`) lacks (``train.optimizer.stop_on_stall=true``): its resume takes them,
    so a table can change the stop of a run that is still training."""
    if mine is None:
        return []
    asked = getattr(getattr(config.train, "optimizer", None), "stop_on_stall", False)
    has = getattr(getattr(mine, "optimizer", None), "stop_on_stall", False)
    return ["train.optimizer.stop_on_stall=true"] if asked and not has else []


def _start(spec: RunSpec, extra: list[str]) -> tuple[list[str], list[str]]:
    """The command that starts ``spec`` (``train PRESET``, ``tag train``, ...) and its ``--set`` arguments."""
    command = [*task_named(spec.task).train, *([spec.preset] if spec.preset else [])]
    return command, [a for s in (*spec.overrides, *extra) for a in ("--set", s)]


def rerun_command(spec: RunSpec, extra: list[str]) -> str:
    """The command line that starts ``spec`` afresh (``RUN`` for its folder; thread count left to the default)."""
    start, sets = _start(spec, extra)
    return shlex.join(["tiedlm", *start, "--out", "RUN", *sets])


def run_config(spec: RunSpec, extra: list[str]):
    """The config a run of ``spec`` trains with (the table's and the caller's overrides applied)."""
    return task_named(spec.task).new_config(spec.preset, [*spec.overrides, *extra])


def data_settings(task: str, folder: str) -> list[str]:
    """``reproduce --data FOLDER`` as the task's settings: the LM's corpus, or the tagger's/translator's own data."""
    return [s.format(folder=folder) for s in task_named(task).own_data]


def plan(tab: Table, scale: str, runs_dir: Path, extra: list[str]) -> list[dict]:
    """One row per run: its folder, status (:func:`run_status`, or ``short``: finished with fewer epochs than the
    table now asks, so it is resumed for the rest) and config (with the table's and the caller's overrides), its table
    and the label it is logged by (the run's name; ``TABLE/RUN`` where several tables run together)."""
    rows = []
    for spec in tab.runs[scale]:
        run_dir = runs_dir / spec.folder(tab.name)
        status, config = run_status(run_dir), run_config(spec, extra)
        mine = run_train_config(spec, run_dir) if status != "missing" else None
        extend = epochs_to_extend(mine, config)
        adopt = settings_to_adopt(mine, config) if status in RESUMED else []
        rows.append(
            {
                "spec": spec,
                "dir": run_dir,
                "status": "short" if status == "finished" and extend else status,
                "config": config,
                "extend": extend + adopt,
                "extra": extra,
                "table": tab.name,
                "label": spec.name,
            }
        )
    return rows


def skip_published(rows: list[dict], runs_dir: Path, published: Path) -> None:
    """Mark ``published`` the rows not finished in ``runs_dir`` whose run is finished in the results folder
    ``published`` (``published/TABLE/RUN/summary.json``, as :func:`publish` writes it): a campaign on a machine
    without the run folders trains only what the committed results lack."""
    for r in rows:
        copy = published / r["dir"].relative_to(runs_dir)
        if r["status"] in ("missing", "interrupted") and (copy / "summary.json").is_file():
            r["status"], r["published"] = "published", copy


def planned_epochs(row: dict) -> int:
    """The epochs a planned row trains for: its ``train.total_epochs`` (a language model's NT-ASGD bound with the
    finetune stage)."""
    return row["config"].train.total_epochs


def fraction_left(row: dict, epochs_done: int | None = None) -> float:
    """The share of a planned run's epochs still to train: 1 for a missing run, 0 for a finished one, and for an
    interrupted (or short) one its epochs without a metrics record over all (the epoch it stopped in counts whole).
    ``epochs_done`` is the count of its metrics records where the caller has read them already."""
    if row["status"] not in RESUMED:
        return float(row["status"] == "missing")
    if epochs_done is None:
        epochs_done = len(RunDir(row["dir"]).read_metrics())
    total = planned_epochs(row)
    return max(total - epochs_done, 1) / total
