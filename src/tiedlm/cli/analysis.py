"""CLI commands for the papers' analyses: ``experiment subspace``, ``analyze bands``, ``analyze augmented``
and ``report``."""

from __future__ import annotations

import contextlib
from pathlib import Path

from .common import add_command, add_group, add_options, add_run_arguments, emit, show_progress
from .types import POSITIVE, THREADS, number


def _output_folder(folder: str):
    """An analysis's --out, as a context: never a folder of committed results, and writable, checked before any
    work; made for the command and left empty by its failure, it goes again (:func:`~tiedlm.paths.output_folder`)."""
    from ..paths import output_folder, refuse_committed

    refuse_committed(Path(folder))
    return output_folder(Path(folder))


def cmd_experiment_subspace(args) -> int:
    """The experiment on every task's path: its settings and folder as a train command reads them
    (:func:`~tiedlm.cli.train.run_settings`), each point a run of the harness."""
    from ..tasks.subspace.experiment import run_experiment
    from .train import run_settings

    if args.resume is None and not args.out:
        args.out = "runs/subspace"
    # --optimizer adam: PyTorch's betas and the loss per token; sgd: the loss summed over the BPTT steps
    adam = ["train.optimizer.name=adam", "train.optimizer.beta2=0.999", "train.loss_reduction=mean"]
    optimizer = {None: [], "adam": adam, "sgd": ["train.optimizer.name=sgd", "train.loss_reduction=sum_over_time"]}
    momentum = [f"train.optimizer.momentum={args.momentum}"] * (args.momentum is not None)
    args.set = optimizer[args.optimizer] + momentum + args.set
    cfg, out, resume, log = run_settings(args, "subspace")
    if not resume:
        _refuse_another_run(out, type(cfg).task_info)
    with _output_folder(str(out)) as folder:
        summary = run_experiment(cfg, folder, progress=not args.no_progress, log=log)
    emit(args, summary, (out / "summary.md").read_text() + f"\nwrote {out}/subspace.csv, subspace.png, summary.md")
    return 0


def _refuse_another_run(out: Path, info) -> None:
    """A new experiment goes into a folder that holds no run (committed results are never written into)."""
    from ..paths import refuse_committed
    from ..run_dir import RunDir

    refuse_committed(out)
    files = RunDir(out)
    if files.config.is_file() or files.summary.is_file():
        raise files.held_run_error(info)


def cmd_report(args) -> int:
    from ..analysis.report import make_report

    with _output_folder(args.out) as out:
        path = make_report(args.runs, out)
    emit(args, {"report": str(path)}, f"wrote {path} and {path.parent / 'valid_ppl.png'}")
    return 0


def cmd_analyze_bands(args) -> int:
    from ..analysis.bands import bands_of_runs, write_band_report
    from ..run import load_run
    from ..runtime import set_threads

    with _output_folder(args.out) as out:
        set_threads(args.threads)
        runs = [load_run(r, which=args.checkpoint) for r in args.runs]
        names = [r.path.name for r in runs]
        if len(set(names)) < len(names):
            names = [str(r.path) for r in runs]
        progress = show_progress(args)
        table = bands_of_runs(runs, names, args.split, args.batch_size, args.precision, progress=progress)
        table.update(checkpoint=args.checkpoint)
        path = write_band_report(table, out, title=f"{table['data']} {args.split}")
    emit(args, table, path.read_text() + f"\nwrote {path}, {path.parent / 'bands.png'}, {path.parent / 'bands.json'}")
    return 0


def cmd_analyze_augmented(args) -> int:
    from ..errors import UsageError
    from ..run import load_run
    from ..runtime import set_threads

    if args.tau and min(args.tau) <= 0:
        raise UsageError(f"--tau {min(args.tau):g}: temperatures must be > 0")
    with _output_folder(args.out) if args.out else contextlib.nullcontext() as out:
        set_threads(args.threads)
        runs = [load_run(run_dir, which=args.checkpoint) for run_dir in args.runs]  # every folder checked before work
        results, md = _strengths(args, runs)
        if out is not None:
            from ..run_dir import write_json_atomic, write_text_atomic

            write_text_atomic(out / "augmented.md", md)
            write_json_atomic(out / "augmented.json", results)
            md += f"\nwrote {out / 'augmented.md'} and {out / 'augmented.json'}"
    emit(args, results, md)
    return 0


def _strengths(args, runs) -> tuple[dict, str]:
    """``analyze augmented``'s figures of each run, and their Markdown."""
    from ..analysis.augmented_targets import augmented_loss_strength, strength_markdown
    from ..data import load_corpus
    from ..runtime import run_precision

    results, text = {}, []
    for r in runs:
        loss = r.config.loss
        taus = args.tau or sorted({1.0, 2.0, 5.0, 10.0, float(loss.tau)})
        gamma = args.gamma if args.gamma is not None else loss.gamma
        corpus = load_corpus(r.config.data.name, r.config.data.data_dir, vocab=r.vocab)
        precision = run_precision(r.config.train.precision, r.model.embedding.weight.device, args.precision)
        batch, bptt = args.batch_size or r.config.train.eval_batch_size, r.config.train.bptt
        ids, progress = corpus.splits[args.split], show_progress(args)
        res = augmented_loss_strength(
            r.model, ids, taus, gamma, loss.aug_bias, batch, bptt, precision, progress=progress
        )
        res.update(split=args.split, checkpoint=r.checkpoint, augmented=loss.augmented)
        results[str(r.path)] = res
        text.append(strength_markdown(f"{r.path.name} ({args.split})", res))
    return results, "\n".join(text)


def _add_run_evaluation_arguments(parser, whose: str) -> None:
    """--checkpoint, --batch-size, --precision and --threads of the analyses that evaluate trained runs."""
    parser.add_argument("--checkpoint", choices=["best", "last"], default="best")
    parser.add_argument("--batch-size", type=POSITIVE, help=f"evaluation batch size (default: {whose} eval_batch_size)")
    precision = f"default: {whose} training precision (fp32 where this device has no bf16, or fp16 off a GPU)"
    parser.add_argument("--precision", choices=["fp32", "bf16", "fp16"], help=precision)
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

    esub = add_group(add, "experiment", "run a paper's experiment end to end", "experiment", sub_parser_class)
    about = (
        "Inan et al. (2017) §6.2: train LSTM LMs with loss (6.1) over a beta sweep (tau = 10) and a tau sweep "
        "(beta = 1); report subspace_distance(L^T, W)."
    )
    what = "Inan et al. §6.2 / Figure 1: subspace distance between L^T and W"
    s = add_command(esub, "subspace", cmd_experiment_subspace, what, about)
    add_run_arguments(
        s,
        "train.bptt=20 or --set train.optimizer.momentum=0.9",
        "finish a stopped experiment with the settings it started with (OUT/config.toml); only --threads may change",
        "folder holding PTB's train.txt/valid.txt/test.txt",
        data="train on a corpus of your own in FOLDER (train.txt, valid.txt, test.txt; read as it is)",
        out="folder for the CSV, PNG and summary (runs/subspace)",
        tensorboard=False,
    )
    add_options(s, SubspaceExperimentConfig())
    span = "sgd (the default): updates stay in the span of the gradients, which the theory of §4 relies on"
    s.add_argument("--optimizer", choices=["sgd", "adam"], help=span)
    s.add_argument("--momentum", type=number(0, maximum=1), help="SGD momentum (default: 0)")


def _register_analyze(add, sub_parser_class) -> None:
    asub = add_group(add, "analyze", "analyses of trained runs", "analysis", sub_parser_class)
    about = (
        "Per-token cross-entropy of RUN_A (the baseline) and the other runs, binned by how often the target word "
        "occurs in the training data; writes bands.md, bands.json and bands.png."
    )
    what = "Pappas & Henderson Figure 3: cross-entropy per training-frequency band"
    b = add_command(asub, "bands", cmd_analyze_bands, what, about)
    b.add_argument("runs", nargs="+", metavar="RUN_DIR", help="the baseline run first, then one or more others")
    b.add_argument("--split", choices=["train", "valid", "test"], default="test")
    b.add_argument("--out", default="runs/bands", help="output folder (runs/bands)")
    _add_run_evaluation_arguments(b, "each run's")

    what = "Inan et al. eqs. 3.1-3.7: how informative the target y~ is and how hard the augmented loss pulls"
    about = (
        "For each run and temperature: the entropy of the augmented loss's target y~ = softmax(L^T L y*/tau) "
        "against uniform, its mass on the target word, and the mean L2 norms of the cross-entropy's and "
        "the augmented loss's gradients on the logits (p - e_y and gamma (y^_tau - y~)), over a split."
    )
    g = add_command(asub, "augmented", cmd_analyze_augmented, what, about)
    g.add_argument("runs", nargs="+", metavar="RUN_DIR")
    g.add_argument("--split", choices=["train", "valid", "test"], default="valid")
    taus, gamma = "temperatures (default: 1 2 5 10 and the run's loss.tau)", "the weight gamma in alpha = gamma tau"
    g.add_argument("--tau", type=number(0, above=True), nargs="+", help=taus)
    g.add_argument("--gamma", type=number(0), help=f"{gamma} (default: the run's loss.gamma)")
    g.add_argument("--out", help="also write augmented.md and augmented.json to this folder")
    _add_run_evaluation_arguments(g, "the run's")
