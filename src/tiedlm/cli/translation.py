"""``tiedlm translate train|evaluate|translate``: Transformer translation with the output-layer family."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ..errors import UsageError
from .common import emit, show_progress
from .types import POSITIVE


def cmd_translate_evaluate(args) -> int:
    from ..tasks.translation import evaluate_translator

    if args.source or args.reference:  # another test set: a source file and its reference translation
        from ..tasks.translation.task import evaluate_translator_files

        if not (args.source and args.reference):
            raise UsageError("give both --source FILE and --reference FILE (aligned line by line)")
        run, source, reference = Path(args.run), Path(args.source), Path(args.reference)
        m = evaluate_translator_files(run, source, reference, args.beam, progress=show_progress(args))
        emit(args, m, f"{args.run}: {args.source} BLEU {m['bleu']:.2f} ({m['signature']}), beam {m['beam']}")
        return 0
    m = evaluate_translator(Path(args.run), args.split, args.beam, args.data_dir or "", progress=show_progress(args))
    bleu = f"BLEU {m['bleu']:.2f} ({m['signature']})"
    emit(args, m, f"{args.run}: {args.split} {bleu}, ppl {m['ppl']:.2f}, beam {m['beam']}")
    return 0


def cmd_translate_translate(args) -> int:
    from ..tasks.translation import load_translator, translate_lines

    blank = [i + 1 for i, s in enumerate(args.sentence) if not s.strip()]
    if blank:
        raise UsageError(
            f"sentence {blank[0]} is empty; give the words to translate, e.g. "
            f'tiedlm translate translate {args.run} "a man rides a bike"'
        )
    lines = args.sentence or [line.rstrip("\n") for line in sys.stdin]
    if not any(line.strip() for line in lines):
        raise UsageError("nothing to translate: give sentences as arguments or on stdin (one per line)")
    model, cfg, src_vocab, tgt_vocab = load_translator(Path(args.run))
    out = translate_lines(model, cfg, src_vocab, tgt_vocab, lines, beam=args.beam)
    if args.json:
        print(json.dumps([{"source": s, "translation": t} for s, t in zip(lines, out)], ensure_ascii=False, indent=2))
    else:
        print("\n".join(out))
    return 0


def register(add, sub_parser_class) -> dict:
    """``tiedlm translate evaluate|translate`` (``translate train`` is generated for every task:
    :func:`.train.register_tasks`)."""
    from ..tasks.translation.config import TranslationConfig
    from .common import add_command, add_group

    info = TranslationConfig.task_info
    tsub = add_group(add, "translate", info.help, "translate_command", sub_parser_class, metavar="ACTION")
    ev = add_command(tsub, "evaluate", cmd_translate_evaluate, "BLEU and perplexity of a trained translator")
    ev.add_argument("run", help="translation run directory")
    ev.add_argument("--split", choices=["valid", "test"], default="test")
    ev.add_argument("--beam", type=POSITIVE, help="beam size (default: the run's; 1 = greedy)")
    ev.add_argument("--data-dir")
    ev.add_argument("--source", help="another test set: its source file (with --reference), one sentence a line")
    ev.add_argument("--reference", help="the reference translation of --source, aligned line by line")
    ev.add_argument("--no-progress", action="store_true", help="no progress bars (none are drawn off a terminal)")
    tl = add_command(tsub, "translate", cmd_translate_translate, "translate sentences (arguments or stdin)")
    tl.add_argument("run", help="translation run directory")
    tl.add_argument("sentence", nargs="*", help="source sentences; none: read one per line from stdin")
    tl.add_argument("--beam", type=POSITIVE, help="beam size (default: the run's; 1 = greedy)")
    return {"translate": tsub}
