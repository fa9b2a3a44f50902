"""The ``tiedlm`` command line: train, evaluate, predict, generate, info, presets, experiment, report, tag.

Every command takes ``--json`` for machine-readable output. Problems a user can fix are one
line on stderr (``tiedlm: error: ...``) with exit code 2 for usage errors, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from pathlib import Path

from .errors import TiedlmError, UsageError


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit code 2
        raise UsageError(f"{message} (see `{self.prog} --help`)")


def _emit(args, obj, text: str) -> None:
    print(json.dumps(obj, indent=2) if args.json else text)


# ----------------------------------------------------------------------------- commands
def cmd_train(args) -> int:
    from .config import Config
    from .train import train

    if args.resume:
        if args.config:
            raise UsageError("give either a PRESET/CONFIG to start a run or --resume RUN_DIR, not both")
        run_dir = Path(args.resume)
        if not (run_dir / "checkpoints" / "last.safetensors").is_file():
            raise UsageError(f"{run_dir} has no checkpoints/last.safetensors to resume from; give the --out folder "
                             f"of an interrupted `tiedlm train`")
        if not (run_dir / "config.toml").is_file():
            raise UsageError(f"{run_dir} has no config.toml; a run folder needs the config.toml that `tiedlm train` "
                             f"wrote into it")
        cfg = Config.load(run_dir / "config.toml")
        allowed = ("train.epochs=", "train.finetune_epochs=", "train.threads=", "train.lr=", "train.clip=",
                   "train.cuda_graph=")
        for item in args.set:
            if not item.startswith(allowed):
                raise UsageError(f"--set {item}: a resumed run only accepts {', '.join(a[:-1] for a in allowed)}")
        cfg = cfg.with_overrides(args.set)
        if args.set:
            (run_dir / "config.toml").write_text(cfg.to_toml())
    else:
        if not args.config:
            raise UsageError("give a PRESET name or CONFIG.toml (see `tiedlm presets`), or --resume RUN_DIR")
        cfg = Config.load(args.config).with_overrides(args.set)
        if args.data and args.data_dir:
            raise UsageError("give either --data (a corpus name, or a folder of your own text) or --data-dir (a "
                             "folder holding the preset's corpus), not both")
        if args.data:  # the preset's model and recipe on another corpus: a known name, or your own folder
            cfg = cfg.with_overrides([f"data.name={args.data}", "data.data_dir="])
        if args.data_dir:
            cfg = cfg.with_overrides([f"data.data_dir={args.data_dir}"])
        run_dir = Path(args.out) if args.out else Path("runs") / Path(args.config).stem
    main_rank = os.environ.get("RANK", "0") == "0"  # under torchrun only rank 0 speaks
    log = (lambda *a, **k: print(*a, file=sys.stderr, **k)) if args.json else print
    if not args.resume and main_rank:
        log(cfg.to_toml())
    command = "tiedlm " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    summary = train(cfg, run_dir, resume=bool(args.resume), command=command, progress=not args.no_progress, log=log)
    if not main_rank:
        return 0
    _emit(args, {"run_dir": str(run_dir), **summary},
          f"run {run_dir}: valid ppl {summary['valid_ppl']:.2f}, test ppl {summary['test_ppl']:.2f}")
    return 0


def cmd_presets(args) -> int:
    from .config import Config, list_presets

    rows = []
    for name in list_presets():
        c = Config.load(name)
        rows.append({"name": name, "data": c.data.name, "hidden": c.model.hidden_size, "output": c.model.output,
                     "augmented": c.loss.augmented, "dropout": c.model.dropout, "epochs": c.train.epochs})
    text = "\n".join(f"{r['name']:24s} {r['data']:18s} h={r['hidden']:<5d} output={r['output']:5s} "
                     f"AL={'yes' if r['augmented'] else 'no ':3s} dropout={r['dropout']:<5} epochs={r['epochs']}"
                     for r in rows)
    _emit(args, rows, text)
    return 0


# ----------------------------------------------------------------------------- parser
def add_command(subparsers, name: str, func, help_: str, description: str | None = None):
    """A command (or a group's action) of ``subparsers`` with ``--json``, dispatching to ``func``."""
    sp = subparsers.add_parser(name, help=help_, description=description or help_)
    sp.add_argument("--json", action="store_true", help="machine-readable output on stdout")
    sp.set_defaults(func=func)
    return sp


def add_group(add, name: str, help_: str, dest: str, parser_class, metavar: str = "NAME"):
    """A command whose first argument picks one of its actions (``tiedlm tag train``); returns its subparsers."""
    return add(name, None, help_).add_subparsers(dest=dest, parser_class=parser_class, metavar=metavar,
                                                 required=True)


def add_run_arguments(parser, example: str, resume_help: str, data_help: str) -> None:
    """--out, --set, --resume, --data-dir and --no-progress of a `tag train` / `translate train` command."""
    parser.add_argument("--out", required=True, help="run directory")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help=f"override a setting, e.g. --set {example}")
    parser.add_argument("--resume", action="store_true", help=resume_help)
    parser.add_argument("--data", metavar="FOLDER", help="train on a corpus of your own in FOLDER (read as it is; "
                        "sets data_dir and own_data=true)")
    parser.add_argument("--data-dir", help=data_help)
    parser.add_argument("--no-progress", action="store_true")


def data_settings(args) -> list[str]:
    """``--data`` / ``--data-dir`` of `tag train` and `translate train` as key=value settings of a new run."""
    if args.data and args.data_dir:
        raise UsageError("give either --data (a corpus of your own) or --data-dir (a folder holding the built-in "
                         "corpus, verified), not both")
    if args.resume and (args.data or args.data_dir):
        raise UsageError("a resumed run reads the data it was trained on; drop --data/--data-dir")
    if args.data:
        return [f"data_dir={Path(args.data).expanduser().resolve()}", "own_data=true"]
    return [f"data_dir={Path(args.data_dir).expanduser().resolve()}"] if args.data_dir else []


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="tiedlm", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", parser_class=_Parser, metavar="COMMAND")

    def add(name, func, help_):
        return add_command(sub, name, func, help_)

    t = add("train", cmd_train, "train a language model from a preset or a TOML config")
    t.add_argument("config", nargs="?", help="preset name (see `tiedlm presets`) or CONFIG.toml")
    t.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE", help="override a config value")
    t.add_argument("--out", help="run directory (default: runs/PRESET)")
    t.add_argument("--resume", metavar="RUN_DIR", help="continue an interrupted run exactly where it stopped")
    t.add_argument("--data", metavar="NAME|FOLDER",
                   help="train on another corpus: ptb, wikitext-2, or a folder of your own text holding train.txt, "
                        "valid.txt and test.txt (read as it is)")
    t.add_argument("--data-dir", help="folder holding the preset's corpus files, verified by checksum "
                                      "(overrides TIEDLM_DATA)")
    t.add_argument("--no-progress", action="store_true", help="no progress bar")

    add("presets", cmd_presets, "list the built-in presets")
    _add_more_commands(add)
    return p


def _add_more_commands(add) -> None:
    from . import cli_analysis, cli_inference, cli_reproduce, cli_tagging, cli_translation

    cli_inference.register(add)
    cli_analysis.register(add, _Parser)
    cli_tagging.register(add, _Parser)
    cli_translation.register(add, _Parser)
    cli_reproduce.register(add)


def main(argv: list[str] | None = None) -> int:
    from .errors import RunInterrupted

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
