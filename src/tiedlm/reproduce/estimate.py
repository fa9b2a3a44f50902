"""``reproduce --dry-run``'s estimates: a run's wall time on this machine, from its own pace where it has trained
epochs already, else from timed training steps."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

from ..registry import task_named
from ..run_dir import RunDir, write_text_atomic
from ..train.timing import estimate_seconds

ESTIMATE = "estimate.json"  # a table's last --dry-run estimates of its unfinished runs: RUNS/TABLE/estimate.json
PACE_EPOCHS = 5  # a resumed run's pace: the median wall time of its last (up to) this many epochs


def machine_load(others) -> dict:
    """The machine the estimates were timed on: ``other_cores``, the cores other processes kept busy while the
    steps were timed (``others``: a :class:`~tiedlm.runtime.OtherLoad` made before them; None where it cannot be
    measured), and ``busy`` where that is at least half a core, so that the timed steps shared the CPU and the
    estimates run long (a dry run beside a training run measures the run slowed by it); ``cpu``: the CPU model
    (:func:`~tiedlm.runtime.cpu_model`), since hosts of one kind differ in speed; ``cpu_class``: the vector unit
    PyTorch's kernels use (``AVX2 CPU``, ``AVX512 CPU``), the class a results page names."""
    import os

    import torch

    from ..runtime import cpu_model

    cores = others.cores()
    return {
        "other_cores": None if cores is None else round(cores, 2),
        "busy": cores is not None and cores >= 0.5,
        "cpus": os.cpu_count() or 1,
        "cpu": cpu_model(),
        "cpu_class": f"{torch.backends.cpu.get_cpu_capability()} CPU",
    }


def epoch_walls(records: list[dict]) -> list[float]:
    """Each recorded epoch's wall time in seconds, as a run's metrics give it: a language model's cumulative
    ``wall_time_s`` (training, validation and checkpoint; its differences), a tagger's per-epoch ``seconds``
    (the same), a translator's ``epoch_seconds`` (training only). Records without one are left out."""
    walls, previous = [], 0.0
    for record in records:
        if "wall_time_s" in record:
            wall, previous = record["wall_time_s"] - previous, record["wall_time_s"]
        else:
            wall = record.get("seconds", record.get("epoch_seconds"))
        if wall is not None and wall > 0:
            walls.append(float(wall))
    return walls


def pace(records: list[dict]) -> tuple[float, int] | None:
    """``(seconds an epoch, epochs it is taken over)``: the median wall time of a run's last ``PACE_EPOCHS``
    recorded epochs (:func:`epoch_walls`), or None where none records its time. The run's own pace, beside
    whatever ran beside it: a better guide to what is left of it than steps timed by the dry run."""
    import statistics

    last = epoch_walls(records)[-PACE_EPOCHS:]
    return (statistics.median(last), len(last)) if last else None


def estimate_rows(rows: list[dict], threads: int, log=None) -> tuple[list[dict], float]:
    """``--dry-run``'s plan: for each planned row its run, status, folder, estimated seconds on this machine (0
    for a finished or published run; for an interrupted one the epochs it has left, at its own :func:`pace` where
    its metrics record one, else a share of the timed estimate) and the command that trains it; and their total.
    ``log`` (if given) says before each timing which run it times, so that a long dry run is never silent."""
    from .plan import RESUMED, fraction_left, planned_epochs, train_command

    plan_rows, total, timed = [], 0.0, 0
    to_time = sum(r["status"] not in ("finished", "published") for r in rows)
    for r in rows:
        cfg = r["config"]
        records = RunDir(r["dir"]).read_metrics()
        epochs_done = len(records)
        paced = pace(records) if r["status"] in RESUMED else None
        if r["status"] in ("finished", "published"):
            whole_run = 0.0
        elif paced:
            whole_run = paced[0] * planned_epochs(r)
        else:  # the task's own steps, timed
            timed += 1
            if log is not None:
                log(f"--dry-run: timing training steps of {r['label']} ({timed} of at most {to_time}) ...")
            whole_run = estimate_seconds(task_named(r["spec"].task).task_class()(cfg), threads)
        seconds = whole_run * fraction_left(r, epochs_done)  # an interrupted run: its epochs still to train
        total += seconds
        plan_rows.append(
            {
                "run": r["label"],
                "table": r["table"],
                "status": r["status"],
                "dir": str(r["dir"]),
                "estimated_s": round(seconds, 3),
                "epochs_done": epochs_done,
                "epochs": planned_epochs(r),
                "at_most": stops_early(cfg),
                "pace": _pace_entry(paced, records) if paced else None,
                "command": "tiedlm " + " ".join(train_command(r, threads)),
            }
        )
    return plan_rows, total


def _pace_entry(paced: tuple[float, int], records: list[dict]) -> dict:
    """The pace as the estimate keeps it, with the machine its last epoch trained on where the metrics name one
    (a run trained on a GPU and estimated on a CPU is estimated at the GPU's pace)."""
    entry = {"epoch_s": round(paced[0], 1), "epochs": paced[1]}
    if records[-1].get("machine"):
        entry["machine"] = records[-1]["machine"]
    return entry


def stops_early(cfg) -> bool:
    """Whether a run may end before its planned epochs (NT-ASGD's non-monotone stops: the finetune stage's, and the
    averaged stage's with ``stop_on_stall``), so that its estimate is an upper bound."""
    optimizer = getattr(cfg.train, "optimizer", None)
    return getattr(optimizer, "finetune_epochs", 0) > 0 or getattr(optimizer, "stop_on_stall", False)


def save_estimates(plan_rows: list[dict], runs_dir: Path, threads: int, load: dict) -> list[Path]:
    """Keep each estimated run's figure in ``RUNS/TABLE/estimate.json`` (one entry per run, replaced by the next
    estimate of that run, dated, with the threads and how busy the machine was), so that the results page can say
    what is left of each unfinished run. Only for a table whose run folder exists (a dry run creates nothing);
    ``--publish`` carries the file to the committed results. Returns the files written."""
    written = []
    for table in dict.fromkeys(r["table"] for r in plan_rows):
        folder = Path(runs_dir) / table
        if not folder.is_dir():
            continue
        path = folder / ESTIMATE
        entries = json.loads(path.read_text()) if path.is_file() else {}
        for r in (r for r in plan_rows if r["table"] == table):
            name = r["run"].rsplit("/", 1)[-1]
            if r["status"] in ("finished", "published"):
                entries.pop(name, None)  # nothing left of it to estimate
                continue
            entries[name] = {
                "date": date.today().isoformat(),
                "status": r["status"],
                "estimated_h": round(r["estimated_s"] / 3600, 2),
                "epochs_done": r["epochs_done"],
                "epochs": r["epochs"],
                "at_most": r["at_most"],
                "pace": r["pace"],
                "threads": threads,
                "cpus": load["cpus"],
                "other_cores": load["other_cores"],
                "busy": load["busy"],
                "cpu_class": load.get("cpu_class"),
            }
        write_text_atomic(path, json.dumps(entries, indent=1, sort_keys=True) + "\n")
        written.append(path)
    return written


def estimate_line(entry: dict | None, gpu_epoch_s: float | None = None, epochs: int = 0) -> str:
    """A page's words for what a run not finished yet costs: on a CPU, its saved ``--dry-run`` estimate
    (:func:`save_estimates`); on a GPU, ``epochs`` times an epoch's measured time there (a table row's
    ``gpu_epoch_s``). "" where neither is known."""
    parts = []
    if entry:
        bound = " at most (NT-ASGD's stops can end it sooner)" if entry.get("at_most") else ""
        done = f", {entry['epochs_done']} of {entry['epochs']} epochs done" if entry.get("epochs_done") else ""
        threads = f"{entry['threads']} thread{'s' * (entry['threads'] != 1)}"
        if entry.get("pace"):  # measured by the run itself, wherever it trained
            n, minutes = entry["pace"]["epochs"], entry["pace"]["epoch_s"] / 60
            where = (
                f"at the run's own pace ({minutes:.1f} min an epoch, the median of its last {n} epoch{'s' * (n > 1)})"
            )
        else:
            where = f"on a {entry['cpus']}-core {entry.get('cpu_class') or 'CPU'} at {threads}"
        left = " left" if entry.get("epochs_done") else ""
        parts.append(f"~{entry['estimated_h']:.1f} h{left}{bound} {where}{done} (`--dry-run`, {entry['date']})")
    if gpu_epoch_s:
        minutes = gpu_epoch_s * epochs / 60
        parts.append(
            f"~{minutes:.0f} min on a GPU ({epochs} epochs at {gpu_epoch_s:g} s an epoch, measured on an "
            "H100-class GPU)"
        )
    return "estimated " + "; ".join(parts) if parts else ""
