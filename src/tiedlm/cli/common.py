"""What every ``tiedlm`` command module shares: the one-line-error parser, ``--json`` output, the helpers that
add a command or a command group, and the run arguments of ``tag train`` / ``translate train``."""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
from typing import Any

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


def show_progress(args) -> bool:
    """Whether a command draws progress bars: only on a terminal (a log file gets no bars), and not with ``--json``
    or ``--no-progress``."""
    quiet = getattr(args, "json", False) or getattr(args, "no_progress", False)
    return not quiet and sys.stderr.isatty()


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


def add_command(subparsers, name: str, func, help_: str, description: str | None = None):
    """A command (or a group's action) of ``subparsers`` with ``--json``, dispatching to ``func``."""
    sp = subparsers.add_parser(name, help=help_, description=description or help_)
    sp.add_argument("--json", action="store_true", help="machine-readable output on stdout")
    sp.set_defaults(func=func)
    return sp


def add_group(add, name: str, help_: str, dest: str, parser_class, metavar: str = "NAME"):
    """A command whose first argument picks one of its actions (``tiedlm tag train``); returns its subparsers."""
    return add(name, None, help_).add_subparsers(dest=dest, parser_class=parser_class, metavar=metavar, required=True)


def add_run_arguments(
    parser,
    example: str,
    resume_help: str,
    data_help: str,
    data: str = "train on a corpus of your own in FOLDER (read as it is; sets data_dir and own_data=true)",
    out: str = "run directory of a new run",
    tensorboard: bool = True,
    config: str = "settings to start from (a run's config.toml too); default: the task's own",
    config_metavar: str | None = "CONFIG.toml",
) -> None:
    """CONFIG.toml, --out, --set, --resume [DIR], --threads, --data, --data-dir and --no-progress: the grammar of
    every task's train command (`tiedlm train`, `tag train`, `translate train`, `experiment subspace`)."""
    parser.add_argument("config", nargs="?", metavar=config_metavar, help=config)
    parser.add_argument("--out", help=out)
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="SECTION.KEY=VALUE",
        help=f"override a setting, e.g. --set {example} (a list value is comma-separated, e.g. "
        "--set sweep.betas=0,0.5,1)",
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
    if tensorboard:
        parser.add_argument(
            "--tensorboard",
            metavar="DIR",
            help="also write each epoch's figures there for TensorBoard (needs: pip install 'tiedlm[tensorboard]')",
        )
    parser.add_argument("--data", metavar="FOLDER", help=data)
    parser.add_argument("--data-dir", help=data_help)
    parser.add_argument("--no-progress", action="store_true")


def _option_fields(settings, prefix: str = ""):
    """(field, dotted key, default) of every field of the dataclass instance ``settings`` declared with
    :func:`~tiedlm.registry.option`, its dataclass sections' too (``section.key``)."""
    for f in dataclasses.fields(settings):
        value, key = getattr(settings, f.name), f"{prefix}{f.name}"
        if "option" in f.metadata:
            yield f, key, value
        elif dataclasses.is_dataclass(value) and not isinstance(value, type):
            yield from _option_fields(value, f"{key}.")


def add_options(parser, settings) -> None:
    """``--FLAG`` for every setting of ``settings`` (a dataclass instance) declared with
    :func:`~tiedlm.registry.option`: its type, bounds, choices and default read from the field. An option not
    given is None (:func:`options_of` leaves it out), so the settings' default holds."""
    from .types import integer, number

    for f, _, default in _option_fields(settings):
        o, choices = f.metadata["option"], f.metadata["choices"]
        minimum, above, maximum, _ = f.metadata["bounds"]
        kind = type(default)
        if isinstance(default, list):  # the element type: list[float] or list[int]
            kind = int if str(f.type).replace(" ", "") == "list[int]" else float
        if kind is bool and default:  # a flag can only turn a setting on
            raise TypeError(f"option {o['flag']}: a bool setting that is an option defaults to False")
        extra: dict = {"action": "store_true"} if kind is bool else {"choices": choices} if choices else {}
        if kind is int:
            extra["type"] = integer(int(minimum if minimum is not None else -(2**62)))
        elif kind is float:
            extra["type"] = number(
                -math.inf if minimum is None else minimum, above, math.inf if maximum is None else maximum
            )
        if isinstance(default, list):
            extra["nargs"] = "+"
        if kind in (int, float):
            extra["metavar"] = "N" if kind is int else "X"
        shown = " ".join(_shown(v) for v in default) if isinstance(default, list) else _shown(default)
        given = f" (default: {shown})" if shown and kind is not bool else ""
        parser.add_argument(o["flag"], default=None, help=o["help"] + given, **extra)


def _shown(value) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def options_of(args, settings, flags: bool = False) -> dict[str, Any]:
    """The options of :func:`add_options` that were given, by the dotted key of their setting (``sweep.runs``):
    their values, or with ``flags`` their flags (``--runs``)."""
    given = {}
    for f, key, _ in _option_fields(settings):
        flag = f.metadata["option"]["flag"]
        value = getattr(args, flag.lstrip("-").replace("-", "_"), None)
        if value not in (None, False):
            given[key] = flag if flags else value
    return given


def as_overrides(given: dict[str, Any]) -> list[str]:
    """:func:`options_of`'s values as ``--set`` items (a list comma-separated)."""
    return [f"{k}={','.join(map(str, v)) if isinstance(v, list) else v}" for k, v in given.items()]
