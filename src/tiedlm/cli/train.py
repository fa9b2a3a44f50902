"""``tiedlm train``, ``presets`` and ``list``: start or resume a language-model run; list presets and components."""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

from ..errors import UsageError
from .common import device_setting, emit, progress_log, refuse_empty, tensorboard_folder
from .types import THREADS


def cmd_train(args) -> int:
    from ..tasks.lm.task import LanguageModelTask
    from ..train import run

    refuse_empty(args, "out", "data", "data_dir", "resume")
    args.set = device_setting(args)
    if args.threads is not None:  # --threads N is --set train.threads=N
        args.set = [*args.set, f"train.threads={args.threads}"]
    cfg, run_dir = _resumed_config(args) if args.resume else _new_config(args)
    main_rank = os.environ.get("RANK", "0") == "0"  # under torchrun only rank 0 speaks
    log = progress_log(args)
    if args.resume and main_rank and (note := getattr(args, "threads_note", "")):
        log(f"tiedlm: {note}")
    command = "tiedlm " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    summary = run(
        LanguageModelTask(cfg, command),
        run_dir,
        resume=bool(args.resume),
        progress=not args.no_progress,
        log=log,
        tensorboard=tensorboard_folder(args),
    )
    if not main_rank:
        return 0
    emit(
        args,
        {"run_dir": str(run_dir), **summary},
        f"run {run_dir}: valid ppl {summary['valid_ppl']:.2f}, test ppl {summary['test_ppl']:.2f}",
    )
    return 0


def _new_config(args):
    """A new run's config (the preset or file, ``--set``, ``--data``/``--data-dir``) and its folder."""
    from ..config import Config

    if not args.config:
        raise UsageError("give a PRESET name or CONFIG.toml (see `tiedlm presets`), or --resume RUN_DIR")
    given = Path(args.config).expanduser()
    if given.is_dir():
        from ..run_dir import RunDir

        if RunDir(given).config.is_file():
            raise UsageError(
                f"{given} is a run folder: resume it with `tiedlm train --resume {given}`, or give a PRESET or "
                "CONFIG.toml to start a new run"
            )
        raise UsageError(f"{given} is a folder; give a PRESET name or a CONFIG.toml file (see `tiedlm presets`)")
    cfg = Config.load(args.config).with_overrides(args.set)
    if args.data and args.data_dir:
        raise UsageError(
            "give either --data (a corpus name, or a folder of your own text) or --data-dir (a "
            "folder holding the preset's corpus), not both"
        )
    if args.data:  # the preset's model and recipe on another corpus: a known name, or your own folder
        cfg = cfg.with_overrides([f"data.name={args.data}", "data.data_dir="])
    if args.data_dir:
        cfg = cfg.with_overrides([f"data.data_dir={args.data_dir}"])
    return cfg, Path(args.out) if args.out else Path("runs") / Path(args.config).stem


def _refuse_new_run_arguments(args) -> None:
    """One-line errors for the arguments of a new run given with --resume."""
    if args.config:
        raise UsageError("give either a PRESET/CONFIG to start a run or --resume RUN_DIR, not both")
    if args.out and Path(args.out) != Path(args.resume):
        raise UsageError(
            f"--resume {args.resume} and --out {args.out} name two folders: a run resumes in its own folder; "
            "give --resume alone (or start a new run with --out NEW --set train.init_from=RUN)"
        )


def _resumed_config(args):
    """A stopped run's config, with the ``--set`` keys a resumed run accepts and ``--data-dir`` (written back to
    its config.toml), and its folder; one-line errors for what a resumed run cannot take."""
    from ..config import Config, resumable_keys
    from ..run_dir import RunDir, write_text_atomic
    from ..runtime import resumed_threads_note

    _refuse_new_run_arguments(args)
    run_dir = Path(args.resume)
    files = RunDir(run_dir)
    if args.data:
        raise UsageError(
            f"--data {args.data}: a resumed run trains on its own corpus (data.name in {run_dir}/config.toml); "
            "to train on another corpus, start a new run (--out NEW --set train.init_from=RUN keeps the weights)"
        )
    if not files.checkpoint("last").is_file():
        raise UsageError(
            f"{run_dir} has no checkpoints/last.safetensors to resume from; give the --out folder "
            f"of an interrupted `tiedlm train`"
        )
    if not files.config.is_file():
        raise UsageError(
            f"{run_dir} has no config.toml; a run folder needs the config.toml that `tiedlm train` wrote into it"
        )
    files.require_config(resuming=True)
    allowed = tuple(f"{k}=" for k in resumable_keys())
    for item in args.set:
        if not item.startswith(allowed):
            raise UsageError(f"--set {item}: a resumed run only accepts {', '.join(a[:-1] for a in allowed)}")
    recorded = Config.load(files.config).train.threads
    cfg = Config.load(files.config).with_overrides(args.set)
    args.threads_note = resumed_threads_note(recorded, args.threads)
    if args.data_dir:  # the same verified corpus, found in another folder (its checksums are checked again)
        from ..data.sources import CORPORA

        if cfg.data.name not in CORPORA:
            raise UsageError(
                f"--data-dir: {run_dir} trains on a folder of its own ({cfg.data.name}), not a known corpus; "
                "move that folder back, or give a new run"
            )
        cfg = cfg.with_overrides([f"data.data_dir={Path(args.data_dir).expanduser().resolve()}"])
    if args.set or args.data_dir:
        write_text_atomic(files.config, cfg.to_toml())
    return cfg, run_dir


def cmd_presets(args) -> int:
    from ..config import Config, list_presets

    rows = []
    for name in list_presets():
        c = Config.load(name)
        e = c.model.encoder
        rows.append(
            {
                "name": name,
                "data": c.data.name,
                "hidden": getattr(e, "hidden_size", c.model.embedding_size),  # an HF body: its width
                "output": c.model.output.name,
                "augmented": c.loss.augmented,
                "dropout": e.dropout,
                "epochs": c.train.epochs,
            }
        )
    text = "\n".join(
        f"{r['name']:24s} {r['data']:18s} h={r['hidden']:<5d} output={r['output']:5s} "
        f"AL={'yes' if r['augmented'] else 'no ':3s} dropout={r['dropout']:<5} epochs={r['epochs']}"
        for r in rows
    )
    emit(args, rows, text)
    return 0


def cmd_list(args) -> int:
    """The registered components, each with its summary and its own keys (and their defaults)."""
    import dataclasses

    from ..config import SECTION_COMPONENTS

    rows, lines = [], []
    for registry in [r for components in SECTION_COMPONENTS.values() for r in components.values()]:
        lines.append(f"{registry.kind}s ([{registry.key}] name = ..., --set {registry.key}.KEY=VALUE):")
        for e in registry:
            keys = {f.name: getattr(e.config(), f.name) for f in dataclasses.fields(e.config)}
            rows.append(
                {"kind": registry.kind, "key": registry.key, "name": e.name, "summary": e.summary, "keys": keys}
            )
            shown = ", ".join(f"{k}={v!r}" for k, v in keys.items()) or "no keys"
            lines += [f"  {e.name:11s} {e.summary}", f"  {'':11s} keys: {shown}"]
    emit(args, rows, "\n".join(lines))
    return 0


def register(add) -> None:
    t = add("train", cmd_train, "train a language model from a preset or a TOML config")
    t.add_argument("config", nargs="?", help="preset name (see `tiedlm presets`) or CONFIG.toml")
    t.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="SECTION.KEY=VALUE",
        help="override a config value, e.g. --set train.epochs=5 or --set model.output.depth=4 (docs/config-keys.md "
        "lists every key; `tiedlm list` each component's)",
    )
    t.add_argument("--out", help="run directory (default: runs/PRESET)")
    t.add_argument("--resume", metavar="RUN_DIR", help="continue an interrupted run exactly where it stopped")
    t.add_argument(
        "--data",
        metavar="NAME|FOLDER",
        help="train on another corpus: ptb, wikitext-2, or a folder of your own text holding train.txt, "
        "valid.txt and test.txt (read as it is)",
    )
    t.add_argument(
        "--data-dir", help="folder holding the preset's corpus files, verified by checksum (overrides TIEDLM_DATA)"
    )
    t.add_argument("--threads", type=THREADS, help="CPU threads (0: the free cores; sets train.threads, on resume too)")
    t.add_argument("--device", help="cpu, cuda or cuda:N (sets train.device; a new run only)")
    t.add_argument("--tensorboard", metavar="DIR", help="also write each epoch's figures there for TensorBoard")
    t.add_argument("--no-progress", action="store_true", help="no progress bar")

    add("presets", cmd_presets, "list the built-in presets")
    add(
        "list",
        cmd_list,
        "list the registered components (encoders, output layers, optimisers) with their keys and defaults",
    )
