"""What every ``tiedlm`` command module shares: the one-line-error parser, ``--json`` output, the helpers that
add a command or a command group, and the run arguments of ``tag train`` / ``translate train``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..errors import UsageError
from .types import THREADS


class Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit code 2
        raise UsageError(f"{message} (see `{self.prog} --help`)")


def emit(args, obj, text: str) -> None:
    print(json.dumps(obj, indent=2) if args.json else text)


def progress_log(args):
    """Where a command's progress lines go: stdout, or stderr when ``--json`` keeps stdout for the result."""
    return (lambda *a, **k: print(*a, file=sys.stderr, **k)) if args.json else print


def refuse_empty(args, *names: str) -> None:
    """A one-line error for an option given as an empty string (``--out ''`` used to mean the default folder,
    ``--data ''`` the preset's corpus: a silent surprise)."""
    for name in names:
        value = getattr(args, name, None)
        if isinstance(value, str) and not value.strip():
            flag = "--" + name.replace("_", "-")
            raise UsageError(f"{flag} is empty; give a folder (or a corpus name), or leave {flag} out")


def tensorboard_folder(args) -> str:
    """``--tensorboard DIR`` (checked before training: the optional ``tensorboard`` package is there), or ""."""
    folder = getattr(args, "tensorboard", None)
    if not folder:
        return ""
    import importlib.util

    if importlib.util.find_spec("tensorboard") is None:
        raise UsageError("--tensorboard needs the tensorboard package: pip install 'tiedlm[tensorboard]'")
    return str(folder)


def device_setting(args) -> list[str]:
    """``--set`` with ``--device D`` as ``train.device=D`` (a new run; a resumed one keeps the device it trained
    on, whose random numbers it continues)."""
    if not getattr(args, "device", None):
        return list(args.set)
    if args.resume is not None:
        raise UsageError(
            "--device: a resumed run trains on its own device (train.device in its config.toml); leave --device out"
        )
    return [*args.set, f"train.device={args.device}"]


def train_task(args, config_class, train_fn) -> tuple[Path, dict]:
    """``tag train`` / ``translate train``: the run's config (a new one from --set/--data, or the stopped run's),
    then training in ``--out`` (or the ``--resume DIR``); returns the run folder and the trainer's metrics."""
    refuse_empty(args, "out", "data", "data_dir", "resume")
    args.set = device_setting(args)
    resume = args.resume is not None
    if isinstance(args.resume, str) and args.out and Path(args.out) != Path(args.resume):
        raise UsageError(f"--resume {args.resume} and --out {args.out} name two folders; give one")
    folder = args.resume if isinstance(args.resume, str) else args.out
    if not folder:
        raise UsageError("give --out DIR for a new run, or --resume DIR to continue a stopped one")
    run_dir = Path(folder)
    from ..runtime import resumed_threads_note

    threads = [f"train.threads={args.threads}"] if args.threads is not None else []
    recorded = config_class.for_run(run_dir, resume, []).train.threads if resume else 0
    cfg = config_class.for_run(run_dir, resume, args.set + data_settings(args) + threads)
    log = progress_log(args)
    if note := resumed_threads_note(recorded, args.threads):
        log(f"tiedlm: {note}")
    board = tensorboard_folder(args)
    return run_dir, train_fn(cfg, run_dir, resume=resume, progress=not args.no_progress, log=log, tensorboard=board)


def add_command(subparsers, name: str, func, help_: str, description: str | None = None):
    """A command (or a group's action) of ``subparsers`` with ``--json``, dispatching to ``func``."""
    sp = subparsers.add_parser(name, help=help_, description=description or help_)
    sp.add_argument("--json", action="store_true", help="machine-readable output on stdout")
    sp.set_defaults(func=func)
    return sp


def add_group(add, name: str, help_: str, dest: str, parser_class, metavar: str = "NAME"):
    """A command whose first argument picks one of its actions (``tiedlm tag train``); returns its subparsers."""
    return add(name, None, help_).add_subparsers(dest=dest, parser_class=parser_class, metavar=metavar, required=True)


def add_run_arguments(parser, example: str, resume_help: str, data_help: str) -> None:
    """--out, --set, --resume [DIR], --threads, --data, --data-dir and --no-progress of a `tag train` /
    `translate train` command: the grammar of `tiedlm train`."""
    parser.add_argument("--out", help="run directory of a new run")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="SECTION.KEY=VALUE",
        help=f"override a setting, e.g. --set {example} (the bare KEY=VALUE works too)",
    )
    parser.add_argument(
        "--resume",
        nargs="?",
        const=True,
        default=None,
        metavar="RUN_DIR",
        help=resume_help + " (as `tiedlm train --resume RUN_DIR`; `--out DIR --resume` works too)",
    )
    parser.add_argument("--threads", type=THREADS, help="CPU threads (0: the free cores); also on resume")
    parser.add_argument("--device", help="cpu, cuda or cuda:N (sets train.device; a new run only)")
    parser.add_argument("--tensorboard", metavar="DIR", help="also write each epoch's figures there for TensorBoard")
    parser.add_argument(
        "--data",
        metavar="FOLDER",
        help="train on a corpus of your own in FOLDER (read as it is; sets data_dir and own_data=true)",
    )
    parser.add_argument("--data-dir", help=data_help)
    parser.add_argument("--no-progress", action="store_true")


def data_settings(args) -> list[str]:
    """``--data`` / ``--data-dir`` of `tag train` and `translate train` as key=value settings of a new run."""
    if args.data and args.data_dir:
        raise UsageError(
            "give either --data (a corpus of your own) or --data-dir (a folder holding the built-in "
            "corpus, verified), not both"
        )
    if args.resume is not None and (args.data or args.data_dir):
        raise UsageError("a resumed run reads the data it was trained on; drop --data/--data-dir")
    if args.data:
        return [f"data.data_dir={Path(args.data).expanduser().resolve()}", "data.own_data=true"]
    return [f"data.data_dir={Path(args.data_dir).expanduser().resolve()}"] if args.data_dir else []
