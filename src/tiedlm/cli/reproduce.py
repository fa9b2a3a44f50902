"""``tiedlm reproduce``: list, plan, run (start / resume / skip) and render the papers' tables."""

from __future__ import annotations

import sys
from pathlib import Path

from ..errors import UsageError
from .common import emit, progress_log
from .types import POSITIVE


def cmd_reproduce(args) -> int:
    from .. import reproduce as rp

    if args.list or not args.table:
        return _list_tables(args, rp)
    tables = [rp.table(name) for name in dict.fromkeys(args.table)]
    runs_dir = Path(args.runs)
    extra = {t.name: _extra(rp, t, args) for t in tables}
    planned = {t.name: rp.plan(t, args.scale, runs_dir, extra[t.name]) for t in tables}
    rows = _selected(tables, planned, args.only, args.scale)
    if args.skip_published:
        rp.skip_published(rows, runs_dir, Path(args.skip_published))
    if args.dry_run:
        return _dry_run(args, rp, tables, rows)
    if args.publish:  # copy the finished runs' small files into the results folder, then render from there
        (records, lines), sep, code = _publish(args, rp, tables, rows, planned, extra), "\n", 0
    elif args.render_only:  # the page from the runs already there (e.g. the committed results); start nothing
        (records, lines), sep, code = _render_only(args, rp, tables, extra), "\n", 0
    else:
        records, lines, code = _run(args, rp, tables, rows, planned, extra)
        sep = "; "
    emit(args, records if len(tables) > 1 else records[0], sep.join(lines))
    return code


def _list_tables(args, rp) -> int:
    runs = {t.name: {s: [r.name for r in t.runs[s]] for s in t.runs} for t in rp.TABLES.values()}
    rows = [{"table": t.name, "title": t.title, "source": t.source, "runs": runs[t.name]} for t in rp.TABLES.values()]
    text = "\n".join(f"{r['table']:26s} {r['title']}\n{'':26s} runs: {', '.join(r['runs']['budget'])}" for r in rows)
    emit(args, rows, text)
    return 0


def _dry_run(args, rp, tables, rows) -> int:
    """The plan and its estimated time on this machine (``reproduce.estimate_rows``), starting nothing."""
    from ..runtime import OtherLoad

    others = OtherLoad()  # what other processes run while the steps are timed
    plan_rows, total = rp.estimate_rows(rows, args.threads, log=lambda line: print(line, file=sys.stderr, flush=True))
    load = rp.machine_load(others)
    width = max([22, *(len(p["run"]) for p in plan_rows)])
    text = [
        f"{p['run']:{width}s} {p['status']:11s} ~{p['estimated_s'] / 3600:6.2f} h  {p['command']}" for p in plan_rows
    ]
    paced = [p["run"] for p in plan_rows if p["pace"]]
    timed = [p for p in plan_rows if p["estimated_s"] and not p["pace"]]
    basis = "training steps timed on this CPU" if timed else ""
    if paced:  # an interrupted run's own epochs measure it better than the dry run's timed steps
        basis = f"{', '.join(paced)} at the pace of their last epochs" + (f", the others from {basis}" if timed else "")
    text.append(
        f"total ~{total / 3600:.2f} h at {args.threads} thread(s) per run, {args.jobs} at a time "
        f"(~{total / 3600 / args.jobs:.2f} h of wall time)" + (f"; estimated: {basis}" if basis else "")
    )
    bounded = [p["run"] for p in plan_rows if p["estimated_s"] and p["at_most"]]
    if bounded:
        text.append(f"note: {', '.join(bounded)}: upper bounds, as NT-ASGD's non-monotone stops can end them sooner")
    on_gpu = [p["run"] for p, r in zip(plan_rows, rows) if p in timed and _trains_on_gpu(r["config"])]
    if on_gpu:
        text.append(
            f"note: {', '.join(on_gpu)} would train on this machine's GPU (train.device = auto or cuda), which these "
            "CPU estimates do not measure: a GPU trains them many times faster (docs/results/paper-scale-plan.md "
            "has the H100's figures)"
        )
    if load["busy"] and timed:
        text.append(
            f"note: the machine was busy (other processes kept {load['other_cores']:.1f} of its {load['cpus']} cores "
            "busy while the steps were timed), so these estimates run long; run --dry-run on an idle machine for the "
            "time a run takes alone"
        )
    saved = [] if _committed(Path(args.runs)) else rp.save_estimates(plan_rows, Path(args.runs), args.threads, load)
    if saved:
        text.append(f"estimates kept for the results pages in {', '.join(map(str, saved))}")
    names = [t.name for t in tables] if len(tables) > 1 else tables[0].name
    record = {"table": names, "scale": args.scale, "runs": plan_rows, "estimated_s": total, "machine": load}
    emit(args, record, "\n".join(text))
    return 0


def _committed(folder: Path) -> bool:
    """Whether ``folder`` holds committed results (git-tracked files): the dry run keeps no estimates there, where
    no run trains (``--publish`` brings the estimates of the folder the runs train in)."""
    from ..paths import refuse_committed

    try:
        refuse_committed(folder, "--runs")
    except UsageError:
        return True
    return False


def _trains_on_gpu(cfg) -> bool:
    """Whether a run's config trains on a CUDA GPU of this machine (its ``train.device``)."""
    import torch

    device = getattr(cfg.train, "device", "cpu")
    return device in ("auto", "cuda") and torch.cuda.is_available()


def _publish(args, rp, tables, rows, planned, extra) -> tuple[list[dict], list[str]]:
    """``--publish DIR``: each table's finished runs (and their bands) copied into DIR, its page drawn from DIR."""
    log, published, runs_dir = progress_log(args), Path(args.publish), Path(args.runs)
    records, lines = [], []
    for tab in tables:
        copied = rp.publish([r for r in rows if r["table"] == tab.name], published, log=log)
        rp.publish_estimates(tab, runs_dir, published, log=log)
        earlier = published / tab.name / rp.BANDS  # its figures count, whether or not their checkpoints do
        if rp.band_analysis(tab, planned[tab.name], runs_dir, args.threads, log=log, earlier=earlier):
            rp.publish_bands(tab, runs_dir, published, log=log)
        # the page its own command (``--render-only`` from the published folder) draws again, byte for byte
        page = _render_from(args, rp, tab, args.publish, extra[tab.name])
        records.append({"table": tab.name, "published": copied, "page": str(page)})
        lines.append(f"published {len(copied)} run(s); wrote {page}")
    return records, lines


def _render_only(args, rp, tables, extra) -> tuple[list[dict], list[str]]:
    """``--render-only``: each table's page from the finished runs in ``--runs``."""
    runs_dir = Path(args.runs)
    if not runs_dir.is_dir():  # a page of all-missing rows under notes that claim results would mislead
        raise UsageError(
            f"--runs {args.runs} does not exist: --render-only draws the page from finished runs there; give "
            "the folder the runs trained in, or results/reproduce for the committed ones"
        )
    records, lines = [], []
    for tab in tables:
        page = _render_from(args, rp, tab, args.runs, extra[tab.name])
        records.append({"table": tab.name, "started": [], "page": str(page)})
        lines.append(f"wrote {page}")
    return records, lines


def _render_from(args, rp, tab, runs: str, extra: list[str]) -> Path:
    """``tab``'s page drawn from the finished runs in ``runs``, naming the ``--render-only`` command that draws it."""
    how = f"tiedlm reproduce {tab.name} --scale {args.scale} --runs {_portable(runs)} --render-only"
    command = f"{how} --out {_portable(args.out)}"
    return rp.render(tab, args.scale, Path(runs), extra, Path(args.out), command=command, train_runs=_train_runs(runs))


def _run(args, rp, tables, rows, planned, extra) -> tuple[list[dict], list[str], int]:
    """Start or resume the selected runs (``--jobs`` at a time), then draw each table's page; exit code 1 where a
    run stopped early."""
    from ..paths import ensure_writable_folder
    from ..run_dir import folder_lock

    log, runs_dir = progress_log(args), Path(args.runs)
    ensure_writable_folder(runs_dir, "--runs")
    busy = (
        f"another `tiedlm reproduce` is training runs in --runs {runs_dir}; wait for it to end (its runs are "
        "shared: the next call skips the finished ones), or give another --runs"
    )
    with folder_lock(runs_dir, busy):  # one queue a runs folder: two would start each other's runs and logs
        done = rp.execute(rows, args.jobs, args.threads, log=log)
    records, lines = [], []
    for tab in tables:
        page = None
        if not args.no_page:
            rp.band_analysis(tab, rp.plan(tab, args.scale, runs_dir, extra[tab.name]), runs_dir, args.threads, log=log)
            page = rp.render(
                tab, args.scale, runs_dir, extra[tab.name], Path(args.out), train_runs=_portable(args.runs)
            )
            lines.append(f"wrote {page}")
        labels = {r["label"] for r in planned[tab.name]}
        started = [d for d in done if d["run"] in labels]
        records.append({"table": tab.name, "started": started, "page": str(page) if page else None})
    failed = [d for d in done if d["returncode"] not in (0,)]
    if failed:
        lines.append(f"{len(failed)} run(s) stopped early: see {', '.join(d['log'] for d in failed)}")
    return records, lines, 1 if failed else 0


def _train_runs(folder: str) -> str:
    """Where a page drawn from ``folder`` says its "run it again" commands train: that folder, unless it holds
    committed results (which no run may write into), then the default runs/reproduce."""
    return "runs/reproduce" if _committed(Path(folder)) else _portable(folder)


def _portable(folder: str) -> str:
    """``folder`` as a page prints it in a command: relative to the working folder where it lies under it, so
    that a page names no machine's absolute paths."""
    import os

    path = Path(folder).expanduser().resolve()
    here = Path.cwd().resolve()
    return os.path.relpath(path, here) if path.is_relative_to(here) else folder


def _extra(rp, tab, args) -> list[str]:
    """The caller's overrides for ``tab``'s runs: ``--set`` and, with ``--data``, the settings of that corpus."""
    extra = list(args.set)
    if args.data:
        extra += rp.data_settings(tab.runs[args.scale][0].task, str(Path(args.data).expanduser().resolve()))
    return extra


def _selected(tables, planned: dict[str, list[dict]], only: list[str] | None, scale: str) -> list[dict]:
    """The rows to run, in order: every table's (in the order the tables are given), or ``--only``'s in its own
    order, each ``RUN`` (where one table has it) or ``TABLE/RUN``. A run folder two tables share (``same_as``)
    comes once. With several tables each row is labelled ``TABLE/RUN``."""
    from ..errors import UsageError

    several = len(tables) > 1
    for t in tables if several else ():
        for r in planned[t.name]:
            r["label"] = f"{t.name}/{r['spec'].name}"
    everything = [r for t in tables for r in planned[t.name]]
    if only:
        chosen = []
        for item in only:
            table_name, _, name = item.rpartition("/")
            hits = [r for r in everything if r["spec"].name == name and table_name in ("", r["table"])]
            if len(hits) != 1:
                names = ", ".join(r["label"] for r in everything)
                scope = " or ".join(t.name for t in tables)
                why = (
                    "a run of several tables: name it TABLE/RUN" if hits else f"not a run of {scope} at --scale {scale}"
                )
                raise UsageError(f"--only {item}: {why}; {'their' if several else 'its'} runs are {names}")
            chosen += hits
        everything = chosen
    rows, seen = [], set()
    for r in everything:
        if r["dir"] not in seen:
            seen.add(r["dir"])
            rows.append(r)
    return rows


def register(add) -> None:
    what = (
        "run a paper's table: start missing runs, resume interrupted ones, skip finished ones, render the results page"
    )
    r = add("reproduce", cmd_reproduce, what)
    names = "one or more table names (see --list); several run as one queue, --jobs at a time"
    r.add_argument("table", nargs="*", help=names)
    r.add_argument("--list", action="store_true", help="list the tables and their runs")
    scales = "budget: what a CPU can train; paper: the papers' settings (a GPU)"
    r.add_argument("--scale", choices=["budget", "paper"], default="budget", help=scales)
    r.add_argument("--runs", default="runs/reproduce", help="where the runs live (runs/reproduce/TABLE/RUN)")
    r.add_argument("--out", default="runs/reproduce/pages", help="folder for the results page TABLE.md")
    r.add_argument("--jobs", type=POSITIVE, default=1, help="runs at a time")
    r.add_argument("--threads", type=POSITIVE, default=1, help="threads per run")
    every = "override applied to every run of the table (e.g. train.epochs=2)"
    r.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE", help=every)
    r.add_argument("--data", metavar="NAME|FOLDER", help="train every run on this corpus instead")
    r.add_argument(
        "--publish",
        metavar="DIR",
        help="start nothing: copy every finished run's config, metrics, summary and log from --runs into "
        "DIR/TABLE/RUN (never overwriting other results), then write the page from DIR",
    )
    r.add_argument(
        "--only",
        nargs="+",
        metavar="RUN",
        help="only these runs, in this order: RUN, or TABLE/RUN where several tables are named "
        "(the pages still show all)",
    )
    r.add_argument(
        "--skip-published",
        metavar="DIR",
        help="start no run that is finished in this results folder (DIR/TABLE/RUN, as --publish writes it, e.g. "
        "the committed results/reproduce): train only what the published results lack",
    )
    r.add_argument("--dry-run", action="store_true", help="print the plan and an estimated time on this machine")
    r.add_argument("--no-page", action="store_true", help="run, but do not render the page")
    r.add_argument(
        "--render-only",
        action="store_true",
        help="start nothing: write the page from the runs already in --runs (e.g. the committed results/reproduce)",
    )
