"""``tiedlm train``, ``presets`` and ``list``: start or resume a language-model run; list presets and components."""

from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path

from ..errors import UsageError
from .common import as_overrides, device_setting, emit, options_of, progress_log, refuse_empty, tensorboard_folder


def train_command(name: str):
    """The command that trains task ``name`` (``train``, ``tag train``, ``translate train``, any registered task's
    ``NAME train``): :func:`train_run`, then the summary (``--json``) or the task's line of it (``done``)."""

    def cmd(args) -> int:
        from ..registry import task_named

        run_dir, summary = train_run(args, name)
        done = task_named(name).done or "{noun} run {run_dir} finished"
        if os.environ.get("RANK", "0") == "0":  # under torchrun only rank 0 speaks
            line = done.format(run_dir=run_dir, noun=task_named(name).noun, **summary)
            emit(args, {"run_dir": str(run_dir), **summary}, line)
        return 0

    return cmd


cmd_train = train_command("lm")


def train_run(args, name: str) -> tuple[Path, dict]:
    """Every task's train command: one path over the registered tasks (:func:`~tiedlm.registry.tasks`): the run's
    settings and folder (:func:`run_settings`), then the harness's ``run()``; returns the run folder and the
    summary."""
    from ..paths import portable_command
    from ..registry import task_named
    from ..train import run

    cfg, run_dir, resume, log = run_settings(args, name)
    command = portable_command(sys.argv[1:])  # as typed, with no path of this machine
    task = task_named(name).task_class()(cfg, command)
    return run_dir, run(task, run_dir, resume, not args.no_progress, log, tensorboard_folder(args))


def run_settings(args, name: str):
    """The settings and folder of a run of task ``name`` from its command's arguments: a new run's (the preset or
    the defaults, the options generated from its settings, ``--set``, ``--data``/``--data-dir``), or a stopped
    run's (its saved config through its config class's ``for_run``, which checks the folder and keeps the thread
    count it recorded); returns ``(cfg, run_dir, resume, log)``."""
    from ..registry import task_named
    from ..runtime import resumed_threads_note

    info = task_named(name)
    refuse_empty(args, "out", "data", "data_dir", "resume")
    cls, resume = info.config, args.resume not in (None, False)
    defaults = cls()
    if resume and (given := options_of(args, defaults, flags=True)):
        raise UsageError(
            f"--resume continues with the settings in its config.toml; drop {', '.join(given.values())} (or start "
            "a new run in another --out)"
        )
    args.set = [*as_overrides(options_of(args, defaults)), *device_setting(args)]
    if args.threads is not None:  # --threads N is --set train.threads=N
        args.set = [*args.set, f"train.threads={args.threads}"]
    if resume:
        run_dir = _resumed_folder(args)
        cls.check_resume(run_dir)  # before the thread count it recorded is read
        recorded = cls.load_run(run_dir).train.threads
        cfg = cls.for_run(run_dir, True, args.set, args.data_dir or "")
    else:
        cfg, run_dir = _new_config(args, info, cls)
        recorded = 0
    log = progress_log(args)
    if os.environ.get("RANK", "0") == "0" and (note := resumed_threads_note(recorded, args.threads)):
        log(f"tiedlm: {note}")
    return cfg, run_dir, resume, log


def _new_config(args, info, cls):
    """A new run's config (the preset or file, or the task's defaults; ``--set``; ``--data``/``--data-dir``) and its
    folder."""
    if args.data and args.data_dir:
        raise UsageError(
            "give either --data (a corpus name, or a folder of your own) or --data-dir (a folder holding the "
            "built-in corpus, verified), not both"
        )
    data = [s.format(folder=_folder(args.data, info)) for s in info.own_data] if args.data else []
    data += [f"data.data_dir={Path(args.data_dir).expanduser().resolve()}"] if args.data_dir else []
    if not info.preset and not args.out:
        raise UsageError("give --out DIR for a new run, or --resume DIR to continue a stopped one")
    start = "a PRESET name or a CONFIG.toml file (see `tiedlm presets`)" if info.preset else "a CONFIG.toml file"
    if not args.config:
        if info.preset:
            raise UsageError("give a PRESET name or CONFIG.toml (see `tiedlm presets`), or --resume RUN_DIR")
        return cls().with_overrides([*args.set, *data]), Path(args.out)  # the task's defaults
    given = Path(args.config).expanduser()
    if given.is_dir():
        from ..run_dir import RunDir

        if error := RunDir(given).other_task_error(info.name, resuming=True):
            raise error  # another task's run: named, with the command that resumes it
        if RunDir(given).config.is_file():
            raise UsageError(
                f"{given} is a run folder: resume it with `{info.command} --resume {given}`, or start a new run "
                f"from its settings with `{info.command} {RunDir(given).config}`"
            )
        raise UsageError(f"{given} is a folder; give {start}")
    if not info.preset and not given.is_file():  # no presets to look the name up among
        raise UsageError(f"config file {given} does not exist; give {start} (a run's config.toml too), or none")
    cfg = cls.load(args.config if info.preset else given).with_overrides(args.set)
    if args.data and info.preset:  # the preset's model and recipe on another corpus: a known name, or your own folder
        data.insert(0, "data.data_dir=")
    return cfg.with_overrides(data), Path(args.out) if args.out else Path("runs") / Path(args.config).stem


def _folder(data: str, info) -> str:
    """``--data``: a folder of one's own, as an absolute path (a language model's as given: it may name a known
    corpus, and its config resolves a folder)."""
    return data if info.preset else str(Path(data).expanduser().resolve())


def _resumed_folder(args) -> Path:
    """The folder of ``--resume RUN_DIR`` (or ``--out DIR --resume``); one line for the arguments of a new run."""
    if getattr(args, "config", None):
        raise UsageError("give either a PRESET/CONFIG to start a run or --resume RUN_DIR, not both")
    folder = args.resume if isinstance(args.resume, str) else args.out
    if args.data:
        raise UsageError(
            f"--data {args.data}: a resumed run trains on its own corpus (the data of {folder}/config.toml); "
            "to train on another, start a new run"
        )
    if not folder:
        raise UsageError("give --resume RUN_DIR (or --out DIR --resume) to continue a stopped run")
    if args.out and Path(args.out) != Path(folder):
        raise UsageError(
            f"--resume {folder} and --out {args.out} name two folders: a run resumes in its own folder; "
            "give --resume alone (or start a new run with --out NEW)"
        )
    return Path(folder)


def cmd_presets(args) -> int:
    from ..config import list_presets
    from ..tasks.lm.config import Config

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
    from ..tasks.lm.config import SECTION_COMPONENTS

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


def register_tasks(add, parser_class, groups: dict) -> None:
    """``tiedlm NAME train`` of every registered task trained so (the language model's ``tiedlm train`` is
    :func:`register`'s), generated from its declaration and settings: one grammar (:func:`add_run_arguments`);
    ``groups``: the command groups that the task's own CLI module made (``tag``, with ``tag evaluate``)."""
    from ..registry import tasks
    from .common import add_command, add_group, add_options, add_run_arguments

    for info in tasks().values():
        if info.train != (info.name, "train"):
            continue
        what = f"train a {info.noun}"
        group = groups.get(info.name) or add_group(
            add, info.name, info.help or what, f"{info.name}_command", parser_class, "ACTION"
        )
        defaults = info.config()
        sections = ((s, dataclasses.fields(getattr(defaults, s))) for s in info.config.section_names())
        keys = "; ".join(f"[{s}] {', '.join(f.name for f in own)}" for s, own in sections)
        tr = add_command(
            group, "train", train_command(info.name), what, f"Train a {info.noun}. Keys for --set: {keys}."
        )
        verified = "folder holding the corpus's verified files (overrides TIEDLM_DATA)"
        add_run_arguments(tr, "train.epochs=3", "continue a stopped run where it stopped", verified)
        add_options(tr, defaults)  # its settings declared with registry.option()


def register(add) -> None:
    from .common import add_run_arguments

    t = add("train", cmd_train, "train a language model from a preset or a TOML config")
    add_run_arguments(
        t,
        "train.epochs=5 or --set model.output.depth=4 (docs/config-keys.md lists every key; `tiedlm list` each "
        "component's)",
        "continue an interrupted run exactly where it stopped",
        "folder holding the preset's corpus files, verified by checksum (overrides TIEDLM_DATA)",
        data="train on another corpus: ptb, wikitext-2, or a folder of your own text holding train.txt, valid.txt "
        "and test.txt (read as it is)",
        out="run directory (default: runs/PRESET)",
        config="preset name (see `tiedlm presets`) or CONFIG.toml",
        config_metavar=None,
    )

    add("presets", cmd_presets, "list the built-in presets")
    add(
        "list",
        cmd_list,
        "list the registered components (encoders, output layers, optimisers) with their keys and defaults",
    )
