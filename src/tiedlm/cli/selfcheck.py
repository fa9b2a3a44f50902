"""``tiedlm selfcheck``: train every encoder for a few windows, resume after a SIGTERM, time the AWD-LSTM step
against the reference-style baseline, and (on a GPU) run the GPU tests; one table, exit 1 if anything failed."""

from __future__ import annotations

import json
from pathlib import Path

from ..run_dir import write_json_atomic
from .types import THREADS


def _tests_folder() -> Path | None:
    """A checkout's tests/: beside src/ of an editable install, or in the current folder."""
    import tiedlm

    for root in (Path(tiedlm.__file__).resolve().parents[2], Path.cwd()):
        if (root / "tests" / "conftest.py").is_file():
            return root / "tests"
    return None


def cmd_selfcheck(args) -> int:
    from dataclasses import asdict

    from ..selfcheck import format_report, run_selfcheck

    log = (lambda *a, **k: None) if args.json else (lambda line: print(line, flush=True))
    checks, header = run_selfcheck(
        args.device, args.quick, args.data_dir or "", args.threads or 0, _tests_folder(), log
    )
    record = {**header, "checks": [asdict(c) | {"status": c.status} for c in checks]}
    if args.json_file:
        write_json_atomic(Path(args.json_file), record)
    print(json.dumps(record, indent=2) if args.json else "\n" + format_report(checks, header))
    return 1 if any(c.ok is False for c in checks) else 0


def register(add) -> None:
    what = (
        "check that tiedlm trains, resumes and runs fast on this machine (CPU or GPU): one table, exit 1 on a failure"
    )
    s = add("selfcheck", cmd_selfcheck, what)
    s.add_argument("--device", choices=["cpu", "cuda"], default="cpu", help="where to run the checks (default cpu)")
    s.add_argument("--quick", action="store_true", help="fewer windows; on the CPU narrow models (under a minute)")
    s.add_argument("--json-file", metavar="FILE", help="also write the report as JSON to FILE")
    s.add_argument("--data-dir", help="folder holding PTB's train/valid/test.txt (default: the mirror or cache)")
    s.add_argument("--threads", type=THREADS, help="CPU threads (0: the free cores)")
