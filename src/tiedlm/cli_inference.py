"""CLI commands that read a run or a preset: evaluate, predict, generate, info."""

from __future__ import annotations

from pathlib import Path

from .cli import _emit
from .errors import UsageError


def cmd_evaluate(args) -> int:
    from .data import load_corpus
    from .evaluation import evaluate
    from .run import load_run
    from .runtime import resolve_precision, set_threads

    set_threads(args.threads)
    run = load_run(args.run_dir, which=args.checkpoint, device=args.device)
    data = run.config.data
    name, data_dir = (args.data, "") if args.data else (data.name, data.data_dir)
    corpus = load_corpus(name, data_dir, vocab=run.vocab)
    device = run.model.embedding.weight.device
    precision = resolve_precision(args.precision or run.config.train.precision, device)
    bs = args.batch_size or run.config.train.eval_batch_size
    res = evaluate(run.model, corpus.splits[args.split], bs, run.config.train.bptt, precision, progress=not args.json,
                   desc=f"{args.split}")
    out = {"run_dir": str(run.path), "checkpoint": run.checkpoint, "data": name, "split": args.split,
           "ppl": res["ppl"], "loss": res["loss"], "tokens": res["tokens"], "unknown_mapped": corpus.unknown[args.split],
           "batch_size": bs, "precision": precision}
    note = f" ({corpus.unknown[args.split]} tokens mapped to <unk>)" if corpus.unknown[args.split] else ""
    _emit(args, out, f"{run.path} [{run.checkpoint}] {name} {args.split}: ppl {res['ppl']:.2f} "
                     f"over {res['tokens']:,} tokens{note}")
    return 0


def cmd_predict(args) -> int:
    from .inference import next_word_table
    from .run import load_run

    run = load_run(args.run_dir, device=args.device)
    if not args.phrases:
        raise UsageError("give at least one phrase, e.g. tiedlm predict RUN_DIR \"the company said\"")
    tables = [next_word_table(run.model, run.vocab, p, args.top) for p in args.phrases]
    lines = []
    for t in tables:
        lines.append(f"{t['phrase']} ...")
        if t["unknown"]:
            lines.append(f"  (not in the vocabulary, read as <unk>: {', '.join(t['unknown'])})")
        lines += [f"  {i + 1:2d}. {r['word']:15s} {r['prob']:.3f}" for i, r in enumerate(t["predictions"])]
    _emit(args, {"run_dir": str(run.path), "tables": tables}, "\n".join(lines))
    return 0


def cmd_generate(args) -> int:
    from .inference import generate
    from .run import load_run

    run = load_run(args.run_dir, device=args.device)
    out = generate(run.model, run.vocab, args.words, args.temperature, args.seed, args.prompt or "")
    _emit(args, {"run_dir": str(run.path), **out}, out["text"])
    return 0


def cmd_info(args) -> int:
    from .config import Config
    from .data import Vocabulary, load_corpus
    from .data.sources import VOCAB_SIZES
    from .run import count_parameters

    target = Path(args.target)
    if (target / "config.toml").is_file():
        cfg = Config.load(target / "config.toml")
        vocab_size = len(Vocabulary.load(target / "vocab.txt"))
        kind = "run"
    else:
        cfg = Config.load(args.target)
        vocab_size = VOCAB_SIZES.get(cfg.data.name) or len(load_corpus(cfg.data.name, cfg.data.data_dir).vocab)
        kind = "preset"
    counts = count_parameters(cfg, vocab_size)
    m = cfg.model
    desc = (f"{m.layers}x{m.hidden_size} VD-LSTM, embedding {m.embedding_size}, output {m.output}"
            f"{' (RE: W = L^T, b = 0)' if m.output == 'tied' else ''}, augmented loss "
            f"{'on (tau %g, gamma %g)' % (cfg.loss.tau, cfg.loss.gamma) if cfg.loss.augmented else 'off'}")
    text = [f"{args.target} ({kind}): {desc}", f"data {cfg.data.name}, |V| = {vocab_size}"]
    text += [f"  {k:10s} {v:>12,d}" for k, v in counts.items()]
    _emit(args, {"target": args.target, "kind": kind, "vocab_size": vocab_size, "parameters": counts,
                 "config": cfg.to_dict()}, "\n".join(text))
    return 0


def register(add) -> None:
    e = add("evaluate", cmd_evaluate, "perplexity of a trained run on a split")
    e.add_argument("run_dir")
    e.add_argument("--split", choices=["train", "valid", "test"], default="test")
    e.add_argument("--data", help="another corpus name or folder (read with the run's vocabulary)")
    e.add_argument("--checkpoint", choices=["best", "last"], default="best")
    e.add_argument("--batch-size", type=int, default=0, help="evaluation batch size (default: the run's)")
    e.add_argument("--precision", choices=["fp32", "bf16"], help="default: the run's")
    e.add_argument("--device", default="cpu")
    e.add_argument("--threads", type=int, default=0)

    p = add("predict", cmd_predict, "top next-word predictions with probabilities (Inan et al. Table 3)")
    p.add_argument("run_dir")
    p.add_argument("phrases", nargs="*", metavar="PHRASE")
    p.add_argument("--top", type=int, default=10)
    p.add_argument("--device", default="cpu")

    g = add("generate", cmd_generate, "sample text from a trained run")
    g.add_argument("run_dir")
    g.add_argument("--words", type=int, default=50)
    g.add_argument("--temperature", type=float, default=1.0)
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--prompt", default="", help="words to continue (default: a sentence start)")
    g.add_argument("--device", default="cpu")

    i = add("info", cmd_info, "model description and parameter counts per component")
    i.add_argument("target", metavar="PRESET|CONFIG.toml|RUN_DIR")
