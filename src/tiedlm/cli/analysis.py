"""CLI commands for the papers' analyses: ``experiment subspace``, ``analyze bands``, ``analyze augmented``
and ``report``."""

from __future__ import annotations

import json
from pathlib import Path

from .common import add_command, add_group, emit, progress_log, show_progress
from .types import POSITIVE, THREADS, number


def _output_folder(folder: str) -> Path:
    """An analysis's --out: never a folder of committed results, and writable, checked before any work."""
    from ..paths import ensure_writable_folder, refuse_committed

    out = Path(folder)
    refuse_committed(out)
    ensure_writable_folder(out)
    return out


def cmd_experiment_subspace(args) -> int:
    from ..tasks.subspace.experiment import run_experiment

    out = Path(args.resume if isinstance(args.resume, str) else args.out)
    cfg = _resumed_experiment(args, out) if args.resume else _new_experiment(args)  # before creating anything
    if not args.resume:
        from ..paths import refuse_committed

        refuse_committed(out)  # committed results first: they are never written into, whatever they hold
        _refuse_another_run(cfg, out)
    out = _output_folder(str(out))
    log = progress_log(args)
    summary = run_experiment(cfg, out, progress=not args.no_progress, log=log)
    emit(args, summary, (out / "summary.md").read_text() + f"\nwrote {out}/subspace.csv, subspace.png, summary.md")
    return 0


# the experiment's settings as options: --resume refuses them (config.toml holds them), --threads excepted
_SETTINGS = tuple(
    "runs seed epochs vocab slice_words hidden_size optimizer lr momentum precision init_range output_init_range "
    "data_dir data betas taus".split()
)


def _resumed_experiment(args, out: Path):
    """``--resume [OUT]``: the settings the experiment in OUT was started with; only --threads may change."""
    from ..errors import UsageError
    from ..tasks.subspace.config import SubspaceExperimentConfig

    new = SubspaceExperimentConfig().flat()
    given = [k for k in _SETTINGS if getattr(args, k) not in (None, new.get(k), "")] + (["set"] if args.set else [])
    if given:
        raise UsageError(
            f"--resume finishes the experiment with the settings in {out}/config.toml; drop "
            f"{', '.join('--' + k.replace('_', '-') for k in given)} (or start a new experiment in another --out)"
        )
    from ..runtime import resumed_threads_note

    if not (out / "config.toml").is_file():
        raise UsageError(
            f"{out} holds no subspace experiment to resume (no config.toml); start one with "
            f"tiedlm experiment subspace --out {out}"
        )
    cfg = SubspaceExperimentConfig.load_run(out)
    if note := resumed_threads_note(cfg.train.threads, args.threads or None):
        progress_log(args)(f"tiedlm: {note}")
    cfg.train.threads = args.threads or cfg.train.threads
    return cfg


def _refuse_another_run(cfg, out: Path) -> None:
    """A new experiment writes into ``out`` only where it is empty of runs, or holds this same experiment (the
    same command run again finishes it): never over another run's config and summary, nor appending rows of
    other settings to another experiment's subspace.csv."""
    from ..errors import UsageError
    from ..run_dir import RunDir
    from ..tasks.subspace.config import SubspaceExperimentConfig

    if not (out / "config.toml").is_file():
        if (out / "summary.json").is_file() or RunDir(out).checkpoint("last").is_file():
            raise UsageError(f"--out {out} holds another run; give another --out for the experiment")
        return
    try:
        saved = SubspaceExperimentConfig.load_run(out)
    except UsageError:
        raise UsageError(f"--out {out} holds another run (not a subspace experiment); give another --out") from None
    ours, theirs = ({k: v for k, v in c.flat().items() if k != "threads"} for c in (cfg, saved))
    if ours != theirs:
        changed = ", ".join(k for k in ours if ours[k] != theirs.get(k))
        raise UsageError(
            f"--out {out} holds a subspace experiment with other settings ({changed}); finish it with "
            f"`tiedlm experiment subspace --resume {out}`, or give another --out"
        )


def _new_experiment(args):
    from ..errors import UsageError
    from ..tasks.subspace.config import SubspaceExperimentConfig

    if args.data and args.data_dir:
        raise UsageError("give either --data (a corpus of your own) or --data-dir (PTB's files), not both")
    flat = {k: getattr(args, k) for k in _SETTINGS if k not in ("data", "betas", "taus", "optimizer", "momentum")}
    flat |= {"data_dir": args.data_dir or "", "threads": args.threads}
    flat |= {k: getattr(args, k) for k in ("betas", "taus") if getattr(args, k)}
    if args.data:
        flat["corpus"] = str(Path(args.data).expanduser().resolve())
    # --optimizer adam: PyTorch's betas and the loss per token; sgd: the loss summed over the BPTT steps
    flat["optimizer"], flat["loss_reduction"] = {
        "adam": ({"name": "adam", "beta2": 0.999}, "mean"),
        "sgd": ({"name": "sgd", "momentum": args.momentum}, "sum_over_time"),
    }[args.optimizer]
    defaults, raw = SubspaceExperimentConfig(), {}
    for key, value in flat.items():  # each option into the section that has it
        home = next(s for s in defaults.section_names() if hasattr(getattr(defaults, s), key))
        raw.setdefault(home, {})[key] = value
    return SubspaceExperimentConfig.from_dict(raw, origin="tiedlm experiment subspace").with_overrides(args.set)


def cmd_report(args) -> int:
    from ..analysis.report import make_report

    path = make_report(args.runs, _output_folder(args.out))
    emit(args, {"report": str(path)}, f"wrote {path} and {path.parent / 'valid_ppl.png'}")
    return 0


def cmd_analyze_bands(args) -> int:
    from ..analysis.bands import bands_of_runs, write_band_report
    from ..run import load_run
    from ..runtime import set_threads

    out = _output_folder(args.out)
    set_threads(args.threads)
    runs = [load_run(r, which=args.checkpoint) for r in args.runs]
    names = [r.path.name for r in runs]
    if len(set(names)) < len(names):
        names = [str(r.path) for r in runs]
    table = bands_of_runs(runs, names, args.split, args.batch_size, args.precision, progress=show_progress(args))
    table.update(checkpoint=args.checkpoint)
    path = write_band_report(table, out, title=f"{table['data']} {args.split}")
    emit(args, table, path.read_text() + f"\nwrote {path}, {path.parent / 'bands.png'}, {path.parent / 'bands.json'}")
    return 0


def cmd_analyze_augmented(args) -> int:
    from ..analysis.augmented_targets import augmented_loss_strength, strength_markdown
    from ..data import load_corpus
    from ..errors import UsageError
    from ..run import load_run
    from ..runtime import run_precision, set_threads

    if args.tau and min(args.tau) <= 0:
        raise UsageError(f"--tau {min(args.tau):g}: temperatures must be > 0")
    out = _output_folder(args.out) if args.out else None
    set_threads(args.threads)
    results, text = {}, []
    runs = [load_run(run_dir, which=args.checkpoint) for run_dir in args.runs]  # every folder checked before work
    for r in runs:
        loss = r.config.loss
        taus = args.tau or sorted({1.0, 2.0, 5.0, 10.0, float(loss.tau)})
        gamma = args.gamma if args.gamma is not None else loss.gamma
        corpus = load_corpus(r.config.data.name, r.config.data.data_dir, vocab=r.vocab)
        precision = run_precision(r.config.train.precision, r.model.embedding.weight.device, args.precision)
        res = augmented_loss_strength(
            r.model,
            corpus.splits[args.split],
            taus,
            gamma,
            loss.aug_bias,
            args.batch_size or r.config.train.eval_batch_size,
            r.config.train.bptt,
            precision,
            progress=show_progress(args),
        )
        res.update(split=args.split, checkpoint=r.checkpoint, augmented=loss.augmented)
        results[str(r.path)] = res
        text.append(strength_markdown(f"{r.path.name} ({args.split})", res))
    md = "\n".join(text)
    if out is not None:
        (out / "augmented.md").write_text(md)
        (out / "augmented.json").write_text(json.dumps(results, indent=2) + "\n")
        md += f"\nwrote {out / 'augmented.md'} and {out / 'augmented.json'}"
    emit(args, results, md)
    return 0


def _add_run_evaluation_arguments(parser, whose: str) -> None:
    """--checkpoint, --batch-size, --precision and --threads of the analyses that evaluate trained runs."""
    parser.add_argument("--checkpoint", choices=["best", "last"], default="best")
    parser.add_argument("--batch-size", type=POSITIVE, help=f"evaluation batch size (default: {whose} eval_batch_size)")
    parser.add_argument(
        "--precision",
        choices=["fp32", "bf16"],
        help=f"default: {whose} training precision (fp32 where this device has no bf16)",
    )
    parser.add_argument("--threads", type=THREADS, default=0)
    parser.add_argument("--no-progress", action="store_true", help="no progress bars (none are drawn off a terminal)")


def register(add, sub_parser_class) -> None:
    _register_experiment(add, sub_parser_class)
    _register_analyze(add, sub_parser_class)
    r = add("report", cmd_report, "markdown report with plots for finished (or running) runs")
    r.add_argument("runs", nargs="+", metavar="RUN_DIR")
    r.add_argument("--out", default="runs/report", help="output folder (report.md, valid_ppl.png; runs/report)")


def _register_experiment(add, sub_parser_class) -> None:
    from ..tasks.subspace.config import SubspaceExperimentConfig

    d = SubspaceExperimentConfig().flat()
    esub = add_group(add, "experiment", "run a paper's experiment end to end", "experiment", sub_parser_class)
    s = add_command(
        esub,
        "subspace",
        cmd_experiment_subspace,
        "Inan et al. §6.2 / Figure 1: subspace distance between L^T and W",
        "Inan et al. (2017) §6.2: train LSTM LMs with loss (6.1) over a beta sweep (tau = 10) and a tau "
        "sweep (beta = 1); report subspace_distance(L^T, W).",
    )
    _subspace_io_arguments(s)
    s.add_argument("--runs", type=POSITIVE, default=d["runs"], help="seeds per point (the paper: 10)")
    s.add_argument("--seed", type=int, default=d["seed"], help="run r uses seed SEED + r for its slice and its weights")
    s.add_argument("--epochs", type=POSITIVE, default=d["epochs"])
    s.add_argument(
        "--optimizer",
        choices=["sgd", "adam"],
        default=d["optimizer"],
        help="sgd: updates stay in the span of the gradients, which the theory of §4 relies on",
    )
    s.add_argument("--lr", type=number(0, above=True), default=d["lr"])
    s.add_argument("--momentum", type=number(0, maximum=1), default=d["momentum"], help="SGD momentum")
    s.add_argument(
        "--vocab",
        choices=["full", "slice"],
        default=d["vocab"],
        help="softmax over PTB's 10k words (full) or over the words of each slice (slice: ~3x faster)",
    )
    s.add_argument("--slice-words", type=POSITIVE, default=d["slice_words"])
    s.add_argument(
        "--hidden-size", type=POSITIVE, default=d["hidden_size"], help="LSTM width d (at most the vocabulary's size)"
    )
    s.add_argument("--betas", type=number(0, maximum=1), nargs="+", help="beta sweep (default 0, 0.1, ..., 1)")
    s.add_argument("--taus", type=number(0, above=True), nargs="+", help="tau sweep (default 1 2 5 10 20 40)")
    s.add_argument(
        "--init-range",
        type=number(0, above=True),
        default=d["init_range"],
        help="uniform init range of the embedding and the LSTM",
    )
    s.add_argument(
        "--output-init-range",
        type=number(0, above=True),
        default=d["output_init_range"],
        help="uniform init range of the output W (b starts at 0); a negative value means --init-range. "
        "Directions of W that the hidden states never excite keep their initial values, so a "
        "random W hides the effect of the loss (see the README)",
    )
    s.add_argument(
        "--precision",
        choices=["auto", "fp32", "bf16"],
        default=d["precision"],
        help="fp32 by default: bf16 rounding of the logits is a sizeable fraction of ỹ's deviation from uniform",
    )


def _subspace_io_arguments(s) -> None:
    """Where the subspace experiment reads and writes, and how it runs: --out, --resume, --threads, the corpus."""
    s.add_argument("--out", default="runs/subspace", help="folder for the CSV, PNG and summary (runs/subspace)")
    s.add_argument(
        "--resume",
        nargs="?",
        const=True,
        default=None,
        metavar="OUT",
        help="finish a stopped experiment with the settings it started with (OUT/config.toml), as `tiedlm train "
        "--resume RUN_DIR`; `--out OUT --resume` works too; only --threads may change",
    )
    s.add_argument("--threads", type=THREADS, default=0)
    s.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="SECTION.KEY=VALUE",
        help="any other setting, e.g. --set train.bptt=20 or --set train.optimizer.momentum=0.9; a list value is "
        "comma-separated, e.g. --set sweep.betas=0,0.5,1",
    )
    s.add_argument(
        "--data",
        metavar="FOLDER",
        help="train on a corpus of your own in FOLDER (train.txt, valid.txt, test.txt; read as it is)",
    )
    s.add_argument("--data-dir", help="folder holding PTB's train.txt/valid.txt/test.txt")
    s.add_argument("--no-progress", action="store_true")


def _register_analyze(add, sub_parser_class) -> None:
    asub = add_group(add, "analyze", "analyses of trained runs", "analysis", sub_parser_class)
    b = add_command(
        asub,
        "bands",
        cmd_analyze_bands,
        "Pappas & Henderson Figure 3: cross-entropy per training-frequency band",
        "Per-token cross-entropy of RUN_A (the baseline) and the other runs, binned by how often the "
        "target word occurs in the training data; writes bands.md, bands.json and bands.png.",
    )
    b.add_argument("runs", nargs="+", metavar="RUN_DIR", help="the baseline run first, then one or more others")
    b.add_argument("--split", choices=["train", "valid", "test"], default="test")
    b.add_argument("--out", default="runs/bands", help="output folder (runs/bands)")
    _add_run_evaluation_arguments(b, "each run's")

    g = add_command(
        asub,
        "augmented",
        cmd_analyze_augmented,
        "Inan et al. eqs. 3.1-3.7: how informative the target y~ is and how hard the augmented loss pulls",
        "For each run and temperature: the entropy of the augmented loss's target y~ = softmax(L^T L y*/tau) "
        "against uniform, its mass on the target word, and the mean L2 norms of the cross-entropy's and "
        "the augmented loss's gradients on the logits (p - e_y and gamma (y^_tau - y~)), over a split.",
    )
    g.add_argument("runs", nargs="+", metavar="RUN_DIR")
    g.add_argument("--split", choices=["train", "valid", "test"], default="valid")
    g.add_argument(
        "--tau", type=number(0, above=True), nargs="+", help="temperatures (default: 1 2 5 10 and the run's loss.tau)"
    )
    g.add_argument(
        "--gamma", type=number(0), help="the weight gamma in alpha = gamma tau (default: the run's loss.gamma)"
    )
    g.add_argument("--out", help="also write augmented.md and augmented.json to this folder")
    _add_run_evaluation_arguments(g, "the run's")
