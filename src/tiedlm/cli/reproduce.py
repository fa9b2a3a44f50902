"""``tiedlm reproduce``: list, plan, run (start / resume / skip) and render the papers' tables."""

from __future__ import annotations

import functools
from pathlib import Path

from .common import emit, progress_log
from .types import POSITIVE


def cmd_reproduce(args) -> int:
    from .. import reproduce as rp

    if args.list or not args.table:
        rows = [
            {
                "table": t.name,
                "title": t.title,
                "source": t.source,
                "runs": {s: [r.name for r in t.runs[s]] for s in t.runs},
            }
            for t in rp.TABLES.values()
        ]
        text = "\n".join(
            f"{r['table']:26s} {r['title']}\n{'':26s} runs: {', '.join(r['runs']['budget'])}" for r in rows
        )
        emit(args, rows, text)
        return 0
    tab = rp.table(args.table)
    runs_dir = Path(args.runs)
    extra = list(args.set)
    if args.data:
        extra += rp.data_settings(tab.runs[args.scale][0].task, str(Path(args.data).expanduser().resolve()))
    rows = planned = rp.plan(tab, args.scale, runs_dir, extra)
    if args.only:
        names = [r["spec"].name for r in rows]
        unknown = [n for n in args.only if n not in names]
        if unknown:
            from ..errors import UsageError

            raise UsageError(
                f"--only {' '.join(unknown)}: not a run of {tab.name} at --scale {args.scale}; "
                f"its runs are {', '.join(names)}"
            )
        rows = [r for r in rows if r["spec"].name in args.only]
    log = progress_log(args)
    if args.dry_run:
        plan_rows, total = [], 0.0
        for r in rows:
            cfg, task = r["config"], r["spec"].task
            if r["status"] == "finished":
                seconds = 0.0
            elif task == "lm":
                vocab, tokens = _corpus_size(cfg.data.name)
                seconds = rp.estimate_seconds(cfg, vocab, tokens, args.threads)
            else:
                seconds = rp.estimate_task_seconds(task, cfg, args.threads)
            seconds *= rp.fraction_left(r)  # an interrupted run: its epochs still to train
            total += seconds
            args_ = rp.train_command(r["spec"], r["dir"], extra, args.threads)
            plan_rows.append(
                {
                    "run": r["spec"].name,
                    "status": r["status"],
                    "dir": str(r["dir"]),
                    "estimated_s": round(seconds, 3),
                    "command": "tiedlm " + " ".join(args_),
                }
            )
        text = [
            f"{p['run']:22s} {p['status']:11s} ~{p['estimated_s'] / 3600:6.2f} h  {p['command']}" for p in plan_rows
        ]
        text.append(
            f"total ~{total / 3600:.2f} h at {args.threads} thread(s) per run, {args.jobs} at a time "
            f"(~{total / 3600 / args.jobs:.2f} h of wall time); estimated from timed training steps here"
        )
        emit(args, {"table": tab.name, "scale": args.scale, "runs": plan_rows, "estimated_s": total}, "\n".join(text))
        return 0
    from ..paths import ensure_writable_folder

    if args.publish:  # copy the finished runs' small files into the results folder, then render from there
        published = Path(args.publish)
        copied = rp.publish(rows, published, log=log)
        earlier = published / tab.name / rp.BANDS  # the published figures count, whether or not their checkpoints do
        if rp.band_analysis(tab, planned, runs_dir, args.threads, log=log, earlier=earlier):
            rp.publish_bands(tab, runs_dir, published, log=log)
        how = f"tiedlm reproduce {tab.name} --scale {args.scale} --runs {args.publish} --render-only --out {args.out}"
        page = rp.render(tab, args.scale, published, extra, Path(args.out), command=how)
        emit(
            args,
            {"table": tab.name, "published": copied, "page": str(page)},
            f"published {len(copied)} run(s); wrote {page}",
        )
        return 0
    if args.render_only:  # the page from the runs already there (e.g. the committed results); start nothing
        how = f"tiedlm reproduce {tab.name} --scale {args.scale} --runs {args.runs} --render-only --out {args.out}"
        page = rp.render(tab, args.scale, runs_dir, extra, Path(args.out), command=how)
        emit(args, {"table": tab.name, "started": [], "page": str(page)}, f"wrote {page}")
        return 0
    ensure_writable_folder(runs_dir, "--runs")
    done = rp.execute(rows, {r["spec"].name: extra for r in rows}, args.jobs, args.threads, log=log)
    if not args.no_page:
        rp.band_analysis(tab, rp.plan(tab, args.scale, runs_dir, extra), runs_dir, args.threads, log=log)
    out = Path(args.out)
    page = rp.render(tab, args.scale, runs_dir, extra, out) if not args.no_page else None
    failed = [d for d in done if d["returncode"] not in (0,)]
    emit(
        args,
        {"table": tab.name, "started": done, "page": str(page) if page else None},
        (f"wrote {page}" if page else "")
        + (f"; {len(failed)} run(s) stopped early: see {runs_dir / tab.name}/*.log" if failed else ""),
    )
    return 1 if failed else 0


@functools.cache
def _corpus_size(name: str) -> tuple[int, int]:
    """(|V|, training tokens) of a corpus, read once per name."""
    from ..data import load_corpus

    corpus = load_corpus(name)
    return len(corpus.vocab), corpus.train.numel()


def register(add) -> None:
    r = add(
        "reproduce",
        cmd_reproduce,
        "run a paper's table: start missing runs, resume interrupted ones, skip finished ones, render the results page",
    )
    r.add_argument("table", nargs="?", help="a table name (see --list)")
    r.add_argument("--list", action="store_true", help="list the tables and their runs")
    r.add_argument(
        "--scale",
        choices=["budget", "paper"],
        default="budget",
        help="budget: what a CPU can train; paper: the papers' settings (a GPU)",
    )
    r.add_argument("--runs", default="runs/reproduce", help="where the runs live (runs/reproduce/TABLE/RUN)")
    r.add_argument("--out", default="runs/reproduce/pages", help="folder for the results page TABLE.md")
    r.add_argument("--jobs", type=POSITIVE, default=1, help="runs at a time")
    r.add_argument("--threads", type=POSITIVE, default=1, help="threads per run")
    r.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="SECTION.KEY=VALUE",
        help="override applied to every run of the table (e.g. train.epochs=2)",
    )
    r.add_argument("--data", metavar="NAME|FOLDER", help="train every run on this corpus instead")
    r.add_argument(
        "--publish",
        metavar="DIR",
        help="start nothing: copy every finished run's config, metrics, summary and log from --runs into "
        "DIR/TABLE/RUN (never overwriting other results), then write the page from DIR",
    )
    r.add_argument("--only", nargs="+", metavar="RUN", help="only these runs of the table (the page still shows all)")
    r.add_argument("--dry-run", action="store_true", help="print the plan and an estimated time on this machine")
    r.add_argument("--no-page", action="store_true", help="run, but do not render the page")
    r.add_argument(
        "--render-only",
        action="store_true",
        help="start nothing: write the page from the runs already in --runs (e.g. the committed "
        "experiments/results/reproduce)",
    )
