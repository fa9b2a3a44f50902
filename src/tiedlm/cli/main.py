"""tiedlm: word-level language models whose output layer knows the embedding space.

The command line: train, evaluate, predict, generate, info, presets, analyze, experiment, report, tag,
translate, reproduce, selfcheck.
Every command takes ``--json`` for machine-readable output. Problems a user can fix are one
line on stderr (``tiedlm: error: ...``) with exit code 2 for usage errors, 1 otherwise.
One module per command group registers its commands here; none of them imports this module.
"""

from __future__ import annotations

import argparse
import os
import sys

from ..errors import TiedlmError
from . import analysis, inference, reproduce, selfcheck, tagging, train, translation
from .common import Parser, add_command


def build_parser() -> argparse.ArgumentParser:
    from .. import __version__

    p = Parser(prog="tiedlm", description=__doc__.split("\n")[0])
    p.add_argument("--version", action="version", version=f"tiedlm {__version__}")
    sub = p.add_subparsers(dest="command", parser_class=Parser, metavar="COMMAND")

    def add(name, func, help_):
        return add_command(sub, name, func, help_)

    train.register(add)
    inference.register(add)
    analysis.register(add, Parser)
    groups = {**tagging.register(add, Parser), **translation.register(add, Parser)}
    train.register_tasks(add, Parser, groups)
    reproduce.register(add)
    selfcheck.register(add)
    return p


def main(argv: list[str] | None = None) -> int:
    code = _main(argv)
    if code == 130 and argv is None:  # the process ends here: a repeat of the stop request (a scheduler's and
        _ignore_stop_signals()  # reproduce's copies) must not kill it during shutdown with another exit code
    return code


def _ignore_stop_signals() -> None:
    import signal

    from ..interrupts import SIGNALS

    for s in SIGNALS:
        signal.signal(s, signal.SIG_IGN)


def _main(argv: list[str] | None) -> int:
    from ..errors import RunInterrupted

    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if not getattr(args, "func", None):
            parser.print_help()
            return 2
        return args.func(args)
    except TiedlmError as exc:
        print(f"tiedlm: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except RunInterrupted as exc:  # a stopped training run: how to resume it (rank 0 speaks under torchrun)
        if os.environ.get("RANK", "0") == "0":
            print(f"tiedlm: {exc}", file=sys.stderr)
        return 130
    except KeyboardInterrupt:
        print("tiedlm: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. `tiedlm presets | head`
        sys.stdout = open(os.devnull, "w")
        return 0


if __name__ == "__main__":
    sys.exit(main())
