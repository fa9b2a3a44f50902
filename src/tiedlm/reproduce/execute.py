"""Train a table's runs: start the missing ones and resume the interrupted ones, ``jobs`` at a time.

Stopping the queue stops its runs cleanly. Each run is a ``tiedlm train`` child in a process group of its own, so a
signal reaches it from here only, and once: Ctrl-C at the terminal, or SIGTERM to ``tiedlm reproduce``, starts
no further run and passes SIGTERM on to the running ones, which write a checkpoint at their next step and exit
130; a second signal is passed on too, and stops them at once on their last checkpoint, as ``tiedlm train``
does. Where a scheduler signals every process of a job, a run gets that signal and the one passed on at the
same moment, and takes them as one request (``SAME_REQUEST_S`` in :mod:`tiedlm.interrupts`). A run
stopped from outside (a signal to the child itself: it exits 130) also starts no further run; the others train
on. Either way :class:`~tiedlm.errors.RunInterrupted` then says what stopped and that the same
command resumes the queue.
"""

from __future__ import annotations

import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

from ..errors import RunInterrupted
from ..interrupts import StopRequest
from .plan import train_command


def _stopped(returncode: int) -> bool:
    """A run that ended on a signal: ``tiedlm train``'s exit code 130, or killed by one before its handlers."""
    return returncode == 130 or returncode < 0


def execute(rows: list[dict], jobs: int, threads: int, log=print) -> list[dict]:
    """Start the missing runs and resume the interrupted ones, in the order given, ``jobs`` at a time, ``threads``
    each; skip the finished ones. A row is named in the log by its ``label`` (:func:`plan`). Returns one record
    per run started (command, exit code, log file); raises :class:`RunInterrupted` once every run has exited
    if a signal stopped the queue or one of its runs (module docstring)."""
    todo = [r for r in rows if r["status"] not in ("finished", "running", "published")]
    _log_skipped(rows, log)
    running: list[tuple[dict, subprocess.Popen, list[str], Path]] = []
    done: list[dict] = []
    passed_on, halted = 0, False
    with StopRequest(second_stops_at_once=False) as stop:
        while running or (todo and not (halted or stop.requested)):
            while todo and len(running) < jobs and not (halted or stop.requested):
                running.append(_start(todo.pop(0), threads, log))
            time.sleep(0.2)
            if stop.signals > passed_on:  # pass each signal on, once, to every run still training
                if not passed_on:
                    log("stopping: no further run starts; the running ones write a checkpoint and stop")
                for _, proc, _, _ in running:
                    if proc.poll() is None:
                        proc.send_signal(signal.SIGTERM)
                passed_on = stop.signals
            for record in _reap(running, log):
                done.append(record)
                if _stopped(record["returncode"]) and not (halted or stop.requested):
                    halted = True
                    log(f"{record['run']}: stopped by a signal; no further run starts")
    stopped = [d["run"] for d in done if _stopped(d["returncode"])]
    if stop.requested or stopped:
        left = [r["label"] for r in todo]
        raise RunInterrupted(
            f"reproduce stopped: {len(stopped)} run(s) stopped where they were ({', '.join(stopped) or 'none'}), "
            f"{len(left)} not started ({', '.join(left) or 'none'}); run the same command again to resume them"
        )
    return done


def _log_skipped(rows: list[dict], log) -> None:
    """Say which runs are not started, and why."""
    for r in rows:
        if r["status"] == "finished":
            log(f"{r['label']}: finished, skipped")
        elif r["status"] == "published":
            log(f"{r['label']}: finished in {r['published']}, skipped")
        elif r["status"] == "running":
            log(f"{r['label']}: another process is training it in {r['dir']}, skipped")


def _start(r: dict, threads: int, log) -> tuple[dict, subprocess.Popen, list[str], Path]:
    """Start (or resume) one run in its own process, its output appended to ``RUN.log`` beside its folder."""
    args = train_command(r, threads)
    r["dir"].parent.mkdir(parents=True, exist_ok=True)
    log(
        f"{r['label']}: {'start' if r['status'] == 'missing' else 'resume'}: tiedlm "
        + " ".join(shlex.quote(a) for a in args)
    )
    log_file = r["dir"].parent / f"{r['dir'].name}.log"
    with open(log_file, "a") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tiedlm.cli", *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # out of the terminal's process group: Ctrl-C reaches it from here
        )
    return r, proc, args, log_file


def _reap(running: list, log) -> list[dict]:
    """The records of the runs that have exited since the last look (removed from ``running``)."""
    records = []
    for item in list(running):
        r, proc, args, log_file = item
        if proc.poll() is not None:
            running.remove(item)
            records.append({"run": r["label"], "command": args, "returncode": proc.returncode, "log": str(log_file)})
            log(f"{r['label']}: exit {proc.returncode}")
    return records
