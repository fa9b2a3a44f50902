"""Train a table's runs: start the missing ones and resume the interrupted ones, ``jobs`` at a time."""

from __future__ import annotations

import shlex
import subprocess
import sys
import time
from pathlib import Path

from .plan import train_command


def execute(rows: list[dict], jobs: int, threads: int, log=print) -> list[dict]:
    """Start the missing runs and resume the interrupted ones, in the order given, ``jobs`` at a time, ``threads``
    each; skip the finished ones. A row is named in the log by its ``label`` (:func:`plan`). Returns one record
    per run started (command, exit code, log file)."""
    name = lambda r: r["label"]  # noqa: E731
    todo = [r for r in rows if r["status"] not in ("finished", "running", "published")]
    for r in rows:
        if r["status"] == "finished":
            log(f"{name(r)}: finished, skipped")
        elif r["status"] == "published":
            log(f"{name(r)}: finished in {r['published']}, skipped")
        elif r["status"] == "running":
            log(f"{name(r)}: another process is training it in {r['dir']}, skipped")
    running: list[tuple[dict, subprocess.Popen, list[str], Path]] = []
    done = []
    while todo or running:
        while todo and len(running) < jobs:
            r = todo.pop(0)
            args = train_command(r["spec"], r["dir"], r["extra"], threads)
            r["dir"].parent.mkdir(parents=True, exist_ok=True)
            log(
                f"{name(r)}: {'resume' if r['status'] == 'interrupted' else 'start'}: tiedlm "
                + " ".join(shlex.quote(a) for a in args)
            )
            log_file = r["dir"].parent / f"{r['dir'].name}.log"
            with open(log_file, "a") as out:
                proc = subprocess.Popen(
                    [sys.executable, "-m", "tiedlm.cli", *args], stdout=out, stderr=subprocess.STDOUT
                )
            running.append((r, proc, args, log_file))
        time.sleep(0.2)
        for item in list(running):
            r, proc, args, log_file = item
            if proc.poll() is not None:
                running.remove(item)
                done.append({"run": name(r), "command": args, "returncode": proc.returncode, "log": str(log_file)})
                log(f"{name(r)}: exit {proc.returncode}")
    return done
