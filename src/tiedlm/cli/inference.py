"""CLI commands that read a run or a preset: evaluate, predict, generate, info."""

from __future__ import annotations

from ..errors import UsageError
from ..paths import missing
from ..run_dir import RunDir
from .common import add_options, emit, options_of, progress_log, show_progress
from .types import POSITIVE, THREADS, number


def cmd_evaluate(args) -> int:
    from ..data import load_corpus
    from ..data.corpus import check_split
    from ..evaluation import evaluate
    from ..run import load_run
    from ..runtime import run_precision, set_threads

    args.threads_recorded = _recorded_work_threads(args)  # a dynamic evaluation resumed in --work keeps its own
    args.threads_used = set_threads(args.threads if args.threads is not None else args.threads_recorded)
    if args.text:
        return _score_text(args)
    if args.per_sentence:
        raise UsageError("--per-sentence scores the lines of one file: give it with --text FILE")
    args.split = args.split or "test"
    run = load_run(args.run_dir, which=args.checkpoint, device=args.device)
    data = run.config.data
    name, data_dir = (args.data, "") if args.data else (data.name, data.data_dir)
    corpus = load_corpus(name, data_dir, vocab=run.vocab)
    device = run.model.embedding.weight.device
    precision = run_precision(run.config.train.precision, device, args.precision)
    # test as the papers measure it: one stream (batch 1); train and valid as during training
    bs = args.batch_size or (1 if args.split == "test" else run.config.train.eval_batch_size)
    check_split(corpus, args.split, bs, "--batch-size")  # a blank file or too many streams: one line, no score
    settings = _dynamic_settings(args) if args.dynamic else None  # bad options fail before any evaluation
    split = corpus.splits[args.split]
    res = evaluate(
        run.model, split, bs, run.config.train.bptt, precision, progress=show_progress(args), desc=args.split
    )
    if settings is not None:
        return _dynamic(args, settings, run, corpus, precision, res)
    unknown = corpus.unknown[args.split]
    out = {
        "run_dir": str(run.path),
        "checkpoint": run.checkpoint,
        "data": name,
        "split": args.split,
        "ppl": res["ppl"],
        "loss": res["loss"],
        "tokens": res["tokens"],
        "unknown_mapped": unknown,
        "batch_size": bs,
        "precision": precision,
    }
    note = f" ({unknown:,} tokens mapped to <unk>)" if unknown else ""
    text = f"{run.path} [{run.checkpoint}] {name} {args.split}: ppl {res['ppl']:.2f} over {res['tokens']:,} tokens"
    emit(args, out, f"{text}, batch {bs}{note}")
    return 0


def _score_text(args) -> int:
    """``evaluate RUN --text FILE``: one held-out file (no train/valid beside it) read with the run's vocabulary
    as one stream; ``--per-sentence`` adds each line's perplexity."""
    from pathlib import Path

    import torch

    from ..data.corpus import read_tokens
    from ..data.vocab import EOS
    from ..evaluation import perplexity, sentence_scores, token_losses
    from ..run import load_run
    from ..runtime import run_precision

    if args.data or args.dynamic or args.split:
        raise UsageError("--text scores one file on its own; leave out --data, --split and --dynamic")
    path = Path(args.text).expanduser()
    if not path.is_file():
        raise UsageError(f"--text {args.text} {missing(path)}; give a text file, one sentence per line")
    run = load_run(args.run_dir, which=args.checkpoint, device=args.device)
    tokens = read_tokens(path)
    if sum(t != EOS for t in tokens) == 0:
        raise UsageError(f"--text {path} holds no words to score; put text in it, one sentence per line")
    if len(tokens) < 3:  # a word and its end of line: the stream's first word is never scored (it has no context)
        raise UsageError(
            f"--text {path} holds one word, and the first word of a text is never scored (nothing precedes it); "
            "give at least two words"
        )
    encoded, unknown = run.vocab.encode(tokens)
    ids = torch.tensor(encoded, dtype=torch.long)
    precision = run_precision(run.config.train.precision, run.model.embedding.weight.device, args.precision)
    losses = token_losses(run.model, ids, run.config.train.bptt, precision)
    ppl = perplexity(float(losses.mean()))
    out = {"run_dir": str(run.path), "checkpoint": run.checkpoint, "text": str(path), "ppl": ppl}
    out |= {"loss": float(losses.mean()), "tokens": int(losses.numel()), "unknown_mapped": unknown}
    lines = [f"{run.path} [{run.checkpoint}] {path}: ppl {ppl:.2f} over {losses.numel():,} tokens, batch 1"]
    if args.per_sentence:
        out["sentences"] = sentence_scores(losses, ids[1:], run.vocab.index[EOS])
        lines += [f"line {s['line']}: ppl {s['ppl']:.2f} ({s['tokens']} tokens)" for s in out["sentences"]]
    emit(args, out, "\n".join(lines))
    return 0


def _recorded_work_threads(args) -> int:
    """The thread count a dynamic evaluation's ``--work`` folder records (0: none, or not a dynamic evaluation)."""
    if not (args.dynamic and args.work):
        return 0
    from pathlib import Path

    from ..evaluation.dynamic_run import recorded_threads

    return recorded_threads(Path(args.work))


def _dynamic_settings(args):
    from ..evaluation.dynamic_settings import DynamicEvalSettings

    return DynamicEvalSettings(**options_of(args, DynamicEvalSettings()))


def _dynamic(args, settings, run, corpus, precision: str, static: dict) -> int:
    """``evaluate --dynamic``: tiedlm.evaluation.dynamic_run with the command's settings, then the report."""
    import dataclasses
    from pathlib import Path

    from ..evaluation.dynamic_run import claim_work_folder, run_dynamic_evaluation
    from ..evaluation.dynamic_settings import Grid
    from ..paths import ensure_writable_folder

    work = Path(args.work) if args.work else None
    if work is not None:
        ensure_writable_folder(work, "--work")
        identity = {
            "run_dir": str(run.path.resolve()),
            "checkpoint": run.checkpoint,
            "split": args.split,
            "precision": precision,
            "settings": dataclasses.asdict(settings),
            "grid": [args.grid, args.grid_lrs, args.grid_lambdas, args.grid_tokens or 0],
        }
        claim_work_folder(work, identity)
        from ..evaluation.dynamic_run import record_threads
        from ..runtime import resumed_threads_note

        if note := resumed_threads_note(args.threads_recorded, args.threads):
            progress_log(args)(f"tiedlm: {note}")
        record_threads(work, args.threads_used)
    grid = Grid(**options_of(args, Grid())) if args.grid else None
    about = {"run_dir": str(run.path), "checkpoint": run.checkpoint, "static_ppl": static["ppl"]}
    out = run_dynamic_evaluation(
        run.model,
        corpus,
        args.split,
        settings,
        precision,
        grid=grid,
        work=work,
        progress=show_progress(args),
        log=progress_log(args),
        about=about,
    )
    if out.pop("finished_before", False):
        emit(args, out, f"{work}: finished before: dynamic ppl {out['dynamic_ppl']:.2f} (result.json)")
        return 0
    used, eff = out["settings"], out["effective"]
    old = (
        f" = paper scaling lr {eff['lr']:.3g}, λ {eff['lamb']:.3g}, ε {eff['epsilon']:.3g}" if used["old_hyper"] else ""
    )
    emit(
        args,
        out,
        f"{run.path} [{run.checkpoint}] {args.split}: static ppl {static['ppl']:.2f} -> dynamic ppl "
        f"{out['dynamic_ppl']:.2f} (lr {used['lr']:g}, λ {used['lamb']:g}, ε {used['epsilon']:g}{old}, "
        f"bptt {used['bptt']}, batch {used['batch_size']})",
    )
    return 0


def _split_runs_and_phrases(items: list[str]) -> tuple[list[str], list[str]]:
    """Leading arguments that are run directories (hold a config.toml) are runs, at most two; the rest are
    phrases. A third run directory is an error, not a phrase of its path's words."""
    runs = []
    for item in items:
        if not RunDir(item).config.is_file():
            break
        if len(runs) == 2:
            raise UsageError(f"{item} is a third run directory; predict compares one or two runs: give at most two")
        runs.append(item)
    return runs, items[len(runs) :]


def cmd_predict(args) -> int:
    from ..analysis.word_stats import PAPER_PHRASES
    from ..inference import next_word_table
    from ..run import load_run
    from ..runtime import set_threads

    set_threads(args.threads)
    run_dirs, phrases = _split_runs_and_phrases(args.items)
    if not run_dirs:
        raise UsageError(
            f"{args.items[0] if args.items else 'RUN_DIR'} is not a run directory (no config.toml); "
            'usage: tiedlm predict RUN_DIR [RUN_DIR_B] "the company said"'
        )
    targets = {}
    if args.paper_phrases:
        phrases = phrases + [p for p, _ in PAPER_PHRASES]
        targets = dict(PAPER_PHRASES)
    if not phrases and not args.word_stats:
        raise UsageError('give at least one phrase (e.g. "the company said"), --paper-phrases or --word-stats')
    runs = [load_run(d, which=args.checkpoint, device=args.device) for d in run_dirs]
    result = {"runs": [str(r.path) for r in runs], "tables": []}
    lines = []
    for phrase in phrases:
        tables = [next_word_table(r.model, r.vocab, phrase, args.top) for r in runs]
        result["tables"].append({"phrase": phrase, "next": targets.get(phrase), "models": tables})
        lines += _prediction_lines(phrase, targets.get(phrase), tables, runs)
    if args.word_stats:
        result["word_stats"] = {}
        lines.append(f"mean probability given to each word over {args.split} (and how often it is the next word):")
        for r in runs:
            stats = _word_stats(r, args.split, progress=show_progress(args))
            result["word_stats"][str(r.path)] = stats
            cells = [f"{w} {v['mean_prob']:.4f} (freq {v['frequency']:.4f})" for w, v in stats.items() if w[0] != "_"]
            lines.append(f"  {r.path.name}: {', '.join(cells)}")
    emit(args, result, "\n".join(lines).rstrip())
    return 0


def _prediction_lines(phrase: str, target: str | None, tables: list[dict], runs) -> list[str]:
    """One phrase's next-word tables of the runs, side by side (Inan et al. Tables 3 and 4)."""
    lines = [f"{phrase} ..." + (f"  [+ {target}]" if target else "")]
    for t, r in zip(tables, runs):
        if t["unknown"]:
            lines.append(f"  ({r.path.name}: not in the vocabulary, read as <unk>: {', '.join(t['unknown'])})")
    lines.append("      " + "".join(f"{r.path.name[:24]:<26s}" for r in runs))
    for i in range(max(len(t["predictions"]) for t in tables)):  # at most |V| rows
        cells = [
            f"{t['predictions'][i]['word'][:15]:15s} {t['predictions'][i]['prob']:.3f}    "
            if i < len(t["predictions"])
            else " " * 26
            for t in tables
        ]
        lines.append(f"  {i + 1:2d}. " + "".join(cells))
    return lines + [""]


def _word_stats(r, split: str, progress: bool) -> dict:
    """The mean probability a run gives to <unk>, a, an, the over ``split`` (Inan et al. §6.4)."""
    from ..analysis.word_stats import mean_word_probabilities
    from ..data import load_corpus
    from ..runtime import run_precision

    corpus, t = load_corpus(r.config.data.name, r.config.data.data_dir, vocab=r.vocab), r.config.train
    precision = run_precision(t.precision, r.model.embedding.weight.device)
    return mean_word_probabilities(
        r.model,
        r.vocab,
        corpus.splits[split],
        batch_size=t.eval_batch_size,
        bptt=t.bptt,
        precision=precision,
        progress=progress,
    )


def cmd_generate(args) -> int:
    from ..inference import generate
    from ..run import load_run

    run = load_run(args.run_dir, which=args.checkpoint, device=args.device)
    out = generate(run.model, run.vocab, args.words, args.temperature, args.seed, args.prompt or "")
    unknown = f"(prompt words not in the vocabulary, read as <unk>: {', '.join(out['unknown'])})\n"
    emit(args, {"run_dir": str(run.path), **out}, (unknown if out["unknown"] else "") + out["text"])
    return 0


def cmd_info(args) -> int:
    from ..data import Vocabulary, load_corpus
    from ..data.sources import VOCAB_SIZES
    from ..models.language_model import count_parameters
    from ..tasks.lm.config import Config

    target = RunDir(args.target)
    if target.path.is_dir() and not target.config.is_file():
        raise UsageError(
            f"{args.target} is a folder but not a tiedlm run directory (no config.toml); give a run folder, "
            "a preset name (see `tiedlm presets`) or a CONFIG.toml"
        )
    if target.config.is_file():
        target.require_config()
        cfg = Config.load(target.config)
        vocab_size = len(Vocabulary.load(target.vocab))
        kind = "run"
    else:
        cfg = Config.load(args.target)
        kind = "preset"
    if args.set:  # what the model would be with these settings (train takes the same --set)
        cfg = cfg.with_overrides(args.set)
    if kind == "preset":
        vocab_size = VOCAB_SIZES.get(cfg.data.name) or len(load_corpus(cfg.data.name, cfg.data.data_dir).vocab)
    counts = count_parameters(cfg.model, vocab_size)
    m, e = cfg.model, cfg.model.encoder
    sparse = (
        f", layer {e.sparse_layer} predefined-sparse with {e.sparse_hidden_size or e.hidden_size} units"
        if getattr(e, "sparse_layer", 0)
        else ""
    )
    if getattr(e, "sparse_fraction", 0):
        sparse = f", every layer predefined-sparse at the parameters of a {e.sparse_fraction:.3g}x narrower dense stack"
    density = f" (sparse, density {m.embedding_density:g})" if m.embedding_density < 1 else ""
    desc = (
        f"{e.summary()}{sparse}, embedding {m.embedding_size}{density}, "
        f"output {m.output.summary()}, augmented loss "
        f"{'on (tau %g, gamma %g)' % (cfg.loss.tau, cfg.loss.gamma) if cfg.loss.augmented else 'off'}"
    )
    text = [f"{args.target} ({kind}): {desc}", f"data {cfg.data.name}, |V| = {vocab_size}"]
    text += [f"  {k:10s} {v:>12,d}" for k, v in counts.items()]
    out = {"target": args.target, "kind": kind, "vocab_size": vocab_size, "parameters": counts, "config": cfg.to_dict()}
    emit(args, out, "\n".join(text))
    return 0


def register(add) -> None:
    e = add("evaluate", cmd_evaluate, "perplexity of a trained run on a split")
    e.add_argument("run_dir")
    e.add_argument("--split", choices=["train", "valid", "test"], help="the split to score (default: test)")
    e.add_argument("--data", help="another corpus name or folder (read with the run's vocabulary)")
    e.add_argument("--text", help="one file to score on its own (no train/valid beside it), as one stream")
    e.add_argument("--per-sentence", action="store_true", help="with --text: each line's perplexity too")
    e.add_argument("--no-progress", action="store_true", help="no progress bars (none are drawn off a terminal)")
    e.add_argument("--checkpoint", choices=["best", "last"], default="best")
    streams = "parallel streams (default: 1 for test, the papers' protocol; the run's for train/valid)"
    e.add_argument("--batch-size", type=POSITIVE, default=0, help=streams)
    e.add_argument(
        "--precision",
        choices=["fp32", "bf16", "fp16"],
        help="default: the run's (fp32 where this device has no bf16, or fp16 off a GPU)",
    )
    e.add_argument("--device", default="cpu")
    threads = "CPU threads (default: the free cores; a resumed --work evaluation: its own)"
    e.add_argument("--threads", type=THREADS, help=threads)
    _add_dynamic_arguments(e)
    _register_predict_generate_info(add)


def _add_dynamic_arguments(e) -> None:
    """``tiedlm evaluate --dynamic``'s options, generated from the settings (Krause et al. 2018's names and
    defaults: :mod:`tiedlm.evaluation.dynamic_settings`)."""
    from ..evaluation.dynamic_settings import DynamicEvalSettings, Grid

    d = e.add_argument_group("dynamic evaluation (Krause et al. 2018); the saved model is never changed")
    d.add_argument("--dynamic", action="store_true", help="adapt the model on the split as it reads it")
    add_options(d, DynamicEvalSettings())
    d.add_argument("--grid", action="store_true", help="choose lr and lambda on the valid split first")
    add_options(d, Grid())
    d.add_argument(
        "--work",
        metavar="DIR",
        help="keep the progress here (gradient statistics, each grid point, the adapted model every minute): "
        "the same command again resumes an interrupted evaluation and reaches the same numbers",
    )


def _register_predict_generate_info(add) -> None:
    p = add("predict", cmd_predict, "top next-word predictions of one or two runs side by side (Inan et al. Table 3/4)")
    runs_phrases = "one or two run directories, then phrases"
    p.add_argument("items", nargs="+", metavar="RUN_DIR [RUN_DIR_B] PHRASE", help=runs_phrases)
    p.add_argument("--top", type=POSITIVE, default=10)
    p.add_argument("--no-progress", action="store_true", help="no progress bars (none are drawn off a terminal)")
    p.add_argument("--checkpoint", choices=["best", "last"], default="best", help="which weights (default best)")
    p.add_argument("--paper-phrases", action="store_true", help="add the four PTB test phrases of the paper's table")
    stats = "mean probability each model gives to <unk>, a, an, the over a split (paper §6.4)"
    p.add_argument("--word-stats", action="store_true", help=stats)
    p.add_argument("--split", choices=["train", "valid", "test"], default="test", help="split for --word-stats")
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=THREADS, default=0)

    g = add("generate", cmd_generate, "sample text from a trained run")
    g.add_argument("run_dir")
    g.add_argument("--words", type=POSITIVE, default=50)
    g.add_argument("--temperature", type=number(0, above=True), default=1.0)
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--prompt", default="", help="words to continue (default: a sentence start)")
    g.add_argument("--checkpoint", choices=["best", "last"], default="best", help="which weights (default best)")
    g.add_argument("--device", default="cpu")

    i = add("info", cmd_info, "model description and parameter counts per component")
    i.add_argument("target", metavar="PRESET|CONFIG.toml|RUN_DIR")
    changed = "describe the model with these settings changed, as `tiedlm train --set` would"
    i.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE", help=changed)
