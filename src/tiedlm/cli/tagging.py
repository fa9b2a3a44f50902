"""``tiedlm tag train|evaluate``: the POS tagger of Demeester et al. (2018) §4.2 on UD English-EWT."""

from __future__ import annotations

from pathlib import Path

from .common import emit
from .train import train_command


def cmd_tag_evaluate(args) -> int:
    from ..tasks.tagging import evaluate_tagger

    if args.file:  # another test set: one CoNLL-U file
        from ..tasks.tagging.task import evaluate_tagger_file

        m = evaluate_tagger_file(Path(args.run), Path(args.file))
        emit(args, m, f"{args.run}: {args.file} accuracy {100 * m['file_accuracy']:.2f}% ({m['tokens']:,} tokens)")
        return 0
    m = evaluate_tagger(Path(args.run), tuple(args.split), args.data_dir or "")
    text = ", ".join(f"{s} accuracy {100 * m[f'{s}_accuracy']:.2f}%" for s in args.split)
    emit(args, m, f"{args.run}: {text}")
    return 0


def register(add, sub_parser_class) -> None:
    from .common import add_command, add_group, add_run_arguments

    tsub = add_group(
        add,
        "tag",
        "part-of-speech tagging with dense or frequency-sparse embeddings (UD English-EWT)",
        "tag_command",
        sub_parser_class,
        metavar="ACTION",
    )
    tr = add_command(
        tsub,
        "train",
        train_command("tag"),
        "train a BiLSTM UPOS tagger",
        "Train a BiLSTM UPOS tagger on UD English-EWT r2.16; keys for --set: [model] embedding_size, "
        "embedding_density, hidden_size, layers, dropout; [data] min_count, max_sentences, data_dir; "
        "[train] epochs, batch_size, lr, clip, seed, threads.",
    )
    add_run_arguments(
        tr,
        "model.embedding_density=0.25",
        "continue a stopped run where it stopped",
        "folder holding en_ewt-ud-{train,dev,test}.conllu (overrides TIEDLM_DATA)",
    )
    ev = add_command(tsub, "evaluate", cmd_tag_evaluate, "accuracy of a trained tagger")
    ev.add_argument("run", help="tagger run directory")
    ev.add_argument("--split", nargs="+", choices=["train", "dev", "test"], default=["dev", "test"])
    ev.add_argument("--data-dir")
    ev.add_argument("--file", help="one CoNLL-U file of your own to tag and score (another test set)")
