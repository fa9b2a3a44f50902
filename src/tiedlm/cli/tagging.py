"""``tiedlm tag train|evaluate``: the POS tagger of Demeester et al. (2018) §4.2 on UD English-EWT."""

from __future__ import annotations

from pathlib import Path

from .common import emit


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


def register(add, sub_parser_class) -> dict:
    """``tiedlm tag evaluate`` (``tag train`` is generated for every task: :func:`.train.register_tasks`)."""
    from ..tasks.tagging.config import TaggerConfig
    from .common import add_command, add_group

    info = TaggerConfig.task_info
    tsub = add_group(add, "tag", info.help, "tag_command", sub_parser_class, metavar="ACTION")
    ev = add_command(tsub, "evaluate", cmd_tag_evaluate, "accuracy of a trained tagger")
    ev.add_argument("run", help="tagger run directory")
    ev.add_argument("--split", nargs="+", choices=["train", "dev", "test"], default=["dev", "test"])
    ev.add_argument("--data-dir")
    ev.add_argument("--file", help="one CoNLL-U file of your own to tag and score (another test set)")
    return {"tag": tsub}
