"""``tiedlm tag train|evaluate``: the POS tagger of Demeester et al. (2018) §4.2 on UD English-EWT."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

from .errors import UsageError


def cmd_tag_train(args) -> int:
    from .cli import _stop_on_sigterm
    from .tagging import TaggerConfig, train_tagger

    run_dir = Path(args.out)
    if args.resume:
        if not (run_dir / "checkpoint.safetensors").is_file():
            raise UsageError(f"{run_dir} has no checkpoint.safetensors to resume from")
        cfg = TaggerConfig.from_dict(json.loads((run_dir / "config.json").read_text()))
        extra = [s for s in args.set if not s.startswith(("epochs=", "threads="))]
        if extra:
            raise UsageError(f"--set {extra[0]}: a resumed tagger run only accepts epochs= and threads=")
        cfg = cfg.with_overrides(args.set)
        (run_dir / "config.json").write_text(json.dumps(dataclasses.asdict(cfg), indent=2) + "\n")
    else:
        cfg = TaggerConfig().with_overrides(args.set + ([f"data_dir={args.data_dir}"] if args.data_dir else []))
    log = (lambda *a, **k: print(*a, file=sys.stderr, **k)) if args.json else print
    _stop_on_sigterm()
    m = train_tagger(cfg, run_dir, resume=args.resume, progress=not args.no_progress, log=log)
    text = (f"tagger {run_dir}: dev {100 * m['dev_accuracy']:.2f}%, test {100 * m['test_accuracy']:.2f}% "
            f"(best epoch {m['best_epoch']}), embedding parameters {m['parameters']['embedding']:,}")
    print(json.dumps(m, indent=2) if args.json else text)
    return 0


def cmd_tag_evaluate(args) -> int:
    from .tagging import evaluate_tagger

    m = evaluate_tagger(Path(args.run), tuple(args.split), args.data_dir or "")
    text = ", ".join(f"{s} accuracy {100 * m[f'{s}_accuracy']:.2f}%" for s in args.split)
    print(json.dumps(m, indent=2) if args.json else f"{args.run}: {text}")
    return 0


def register(add, sub_parser_class) -> None:
    from .cli import add_command, add_group

    tsub = add_group(add, "tag", "part-of-speech tagging with dense or frequency-sparse embeddings (UD English-EWT)",
                     "tag_command", sub_parser_class, metavar="ACTION")
    tr = add_command(tsub, "train", cmd_tag_train, "train a BiLSTM UPOS tagger",
                     "Train a BiLSTM UPOS tagger on UD English-EWT r2.16; keys for --set: embedding_size, "
                     "embedding_density, hidden_size, layers, dropout, min_count, epochs, batch_size, lr, clip, "
                     "seed, threads, max_sentences, data_dir.")
    tr.add_argument("--out", required=True, help="run directory")
    tr.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="override a setting, e.g. --set embedding_density=0.25")
    tr.add_argument("--resume", action="store_true", help="continue the run in --out after its last epoch")
    tr.add_argument("--data-dir", help="folder holding en_ewt-ud-{train,dev,test}.conllu (overrides TIEDLM_DATA)")
    tr.add_argument("--no-progress", action="store_true")
    ev = add_command(tsub, "evaluate", cmd_tag_evaluate, "accuracy of a trained tagger")
    ev.add_argument("run", help="tagger run directory")
    ev.add_argument("--split", nargs="+", choices=["train", "dev", "test"], default=["dev", "test"])
    ev.add_argument("--data-dir")
