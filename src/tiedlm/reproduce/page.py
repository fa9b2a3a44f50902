"""A table's results page: paper vs ours per run, the curves, Figure 3's bands and the commands."""

from __future__ import annotations

import json
import re
from pathlib import Path

from ..registry import task_named
from ..run_dir import RunDir, write_text_atomic
from .estimate import ESTIMATE, estimate_line
from .notes import batch1_test_ppl, render_notes
from .plan import plan, planned_epochs, rerun_command
from .publish import BANDS
from .tables import SEEDED, Table


def _test_ppl(summary: dict) -> str:
    """The run's test perplexity by the papers' protocol (batch 1, :func:`batch1_test_ppl`); a run whose summary
    holds only the streamed figure shows that one, said so."""
    batch1 = batch1_test_ppl(summary)
    if batch1 is not None:
        return f"{batch1:.2f}"
    return f"{summary['test_ppl']:.2f} ({summary.get('eval_batch_size', 10)} streams)"


def seed_groups(finished: dict[str, dict]) -> dict[str, dict[int, dict]]:
    """Finished runs by table row: a row's seeds are the runs named ROW and ROW-seedN ({row: {seed: summary}})."""
    groups: dict[str, dict[int, dict]] = {}
    for name, summary in finished.items():
        m = SEEDED.match(name)
        groups.setdefault(m["row"] if m else name, {})[int(summary["seed"])] = summary
    return groups


def _mean_sd(values: list[float], signed: bool = False) -> str:
    import statistics

    return f"{statistics.mean(values):{'+' if signed else ''}.2f} ± {statistics.stdev(values):.2f}"


def seeds_section(tab: Table, finished: dict[str, dict], task: str) -> list[str]:
    """Mean ± sample standard deviation of each row over its finished seeds (where there are two or more), and
    for ``tab.pairs`` the difference at every seed both rows have, with whether its sign held at every one."""
    title, keys, fmt = task_named(task).metric
    scale = 100.0 if "%" in fmt else 1.0  # accuracies in points
    groups = {row: seeds for row, seeds in seed_groups(finished).items() if len(seeds) >= 2}
    if not groups:
        return []
    names = task_named(task).seed_columns
    lines = [
        "",
        "## Across seeds",
        "",
        f"Mean ± sample standard deviation over the finished seeds of each row ({title}).",
        "",
        f"| row | seeds | {names[0]} | {names[-1]} | {names[-1]} per seed |",
        "|---|---|---|---|---|",
    ]
    for row, seeds in groups.items():
        valid = [scale * s[keys[0]] for s in seeds.values()]
        test = [scale * s[keys[1]] for s in seeds.values()]
        per = ", ".join(f"{scale * s[keys[1]]:.2f} ({seed}{_streams(s)})" for seed, s in sorted(seeds.items()))
        lines.append(f"| {row} | {len(seeds)} | {_mean_sd(valid)} | {_mean_sd(test)} | {per} |")
    every = seed_groups(finished)
    pair_lines = []
    for base, other in tab.pairs:
        common = sorted(set(every.get(base, {})) & set(every.get(other, {})))
        if len(common) < 2:
            continue
        diffs = [scale * (every[other][s][keys[1]] - every[base][s][keys[1]]) for s in common]
        signs = {d > 0 for d in diffs if d != 0}
        held = "the same sign at every seed" if len(signs) <= 1 else "**the sign is not stable across seeds**"
        per = ", ".join(
            f"{d:+.2f} ({s}{_streams(every[base][s]) or _streams(every[other][s])})" for d, s in zip(diffs, common)
        )
        pair_lines.append(f"| {other} − {base} | {per} | {_mean_sd(diffs, signed=True)} | {held} |")
    if pair_lines:
        lines += [
            "",
            f"| difference in {names[-1]} | per seed | mean ± sd | sign |",
            "|---|---|---|---|",
            *pair_lines,
        ]
    return lines


def _streams(summary: dict) -> str:
    """A seed's mark where its test is the streamed figure (a run from before the batch-1 protocol, never
    evaluated by it since): the seeds section then mixes the two protocols, and says so."""
    return f", {summary.get('eval_batch_size', 10)} streams" if summary.get("streams_only") else ""


def _bands_section(tab: Table, runs_dir: Path, out: Path) -> list[str]:
    """The page's Figure 3: the plot and the table of ``RUNS/TABLE/bands.json``, where there is one."""
    path = runs_dir / tab.name / BANDS
    if not path.is_file():
        return []
    from ..analysis.bands import band_report_lines, plot_bands

    table = json.loads(path.read_text())
    plot_bands(table, out / f"{tab.name}-bands.png")
    return [
        "",
        "## Cross-entropy by training-frequency band (Figure 3)",
        "",
        f"The test targets binned by how often the word occurs in the training data; mean cross-entropy per band of "
        f"each finished run's best checkpoint, over {table['data']} {table['split']} (streams of each run's "
        f"evaluation batch), and its difference from `{table['baseline']}`: Δ% = (CE_run − CE_{table['baseline']}) "
        f"/ CE_{table['baseline']} × 100, negative where the run predicts that band's words better. Computed by "
        f"`tiedlm reproduce {tab.name} --publish` from the runs' checkpoints, kept in {BANDS} beside the runs.",
        "",
        f"![relative cross-entropy by frequency band]({tab.name}-bands.png)",
        "",
        *band_report_lines(table),
    ]


def render(
    tab: Table,
    scale: str,
    runs_dir: Path,
    extra: list[str],
    out: Path,
    command: str = "",
    links_from: Path | None = None,
    train_runs: str = "runs/reproduce",
    notes: Path | None = None,
) -> Path:
    """Write ``out/<table>.md`` (and ``<table>-valid.png``): paper vs ours per run, what we ran, and how.

    Links to the run folders are relative to ``links_from`` (default ``out``, where the page is read). The notes
    under the table are the Markdown template ``notes`` (default ``out/notes/<table>.md``, where there is one),
    its figures filled from the runs (:func:`~tiedlm.reproduce.notes.render_notes`)."""
    out.mkdir(parents=True, exist_ok=True)
    rows = plan(tab, scale, runs_dir, extra)
    task = tab.runs[scale][0].task
    lines = _page_head(tab, scale, rows, task, out, command or f"tiedlm reproduce {tab.name} --scale {scale}")
    commands, waiting, finished = [], [], {}
    estimate_file = runs_dir / tab.name / ESTIMATE
    estimates = json.loads(estimate_file.read_text()) if estimate_file.is_file() else {}

    for r in rows:
        line, command_line, summary = _table_row(r, task, rerun_command(r["spec"], extra), links_from or out)
        lines.append(line)
        if summary is not None:
            finished[r["spec"].name] = summary
            commands.append(command_line)  # (run, seed, command, config link)
        else:
            cost = estimate_line(estimates.get(r["spec"].name), r["spec"].gpu_epoch_s, planned_epochs(r))
            waiting.append(f"{command_line} {cost or '–'} |")
    lines += seeds_section(tab, finished, task)
    notes = notes if notes is not None else out / "notes" / f"{tab.name}.md"
    if notes.is_file():
        bands_file = runs_dir / tab.name / BANDS
        bands = json.loads(bands_file.read_text()) if bands_file.is_file() else None
        folders = {r["spec"].name: Path(r["dir"]) for r in rows}
        text = render_notes(notes.read_text(encoding="utf-8").strip(), folders, task, bands)
        lines += ["", "## Notes", "", text] if text else []
    if task_named(task).curves:
        lines += _bands_section(tab, runs_dir, out)
    lines += _commands_section(
        f"`tiedlm reproduce {tab.name} --scale {scale} --runs {train_runs} --only RUN`", commands, waiting
    )
    path = out / f"{tab.name}.md"
    write_text_atomic(path, "\n".join(lines) + "\n")
    return path


def _commands_section(again: str, commands: list[tuple], waiting: list[str]) -> list[str]:
    """The page's Commands: the finished rows' commands (one line a row, with its seeds) and the rows not finished
    yet, each with its estimated cost."""
    lines = [
        "",
        "## Commands",
        "",
        f"To train a run again, or finish one: {again} (RUN: a row's name for its first seed, ROW-seedN for "
        "seed N), which runs the command below.",
        "",
    ]
    if commands:
        lines += ["| run | seeds | command | config |", "|---|---|---|---|", *_seed_rows(commands), ""]
    if waiting:
        lines += [
            "Not finished yet (`--dry-run` estimates what is left of each on the machine it runs on and keeps the "
            "figure for this page; a stopped run resumes where it stopped):",
            "",
            "| run | status | command | estimated cost |",
            "|---|---|---|---|",
            *waiting,
            "",
        ]
    return lines


def _page_head(tab: Table, scale: str, rows: list[dict], task: str, out: Path, command: str) -> list[str]:
    """The page's title, source, the command that drew it, the validation curves (a language-model table) and
    the head of the results table."""
    from ..analysis.report import plot_curves, read_run

    lines = [f"# {tab.title}", "", f"Source: {tab.source}. Scale: `{scale}`. Rendered by `{command}`.", ""]
    present = [  # named as the table's rows are (a run shared with another table has that table's folder name)
        {**read_run(r["dir"]), "name": r["spec"].name}
        for r in rows
        if task_named(task).curves and RunDir(r["dir"]).config.is_file()
    ]
    if present:
        plot_curves(present, out / f"{tab.name}-valid.png", title=tab.title)
        lines += [f"![validation perplexity per epoch]({tab.name}-valid.png)", ""]
    return lines + [
        f"| run | paper | ours: {task_named(task).metric[0]} | params | epochs | wall time | device | tok/s | status |",
        "|---|---|---|---|---|---|---|---|---|",
    ]


_STATUS = {"missing": "not run"}  # a page's word for a run status where it differs from the planner's


def _seed_rows(commands: list[tuple]) -> list[str]:
    """The finished runs' commands, one line per table row with its seeds (runs ROW and ROW-seedN): a row's
    command names its seed ``SEED`` where its seeds differ only in ``train.seed``, and links each seed's
    config."""
    groups: dict[str, list[tuple]] = {}
    for name, seed, command, config in commands:
        m = SEEDED.match(name)
        groups.setdefault(m["row"] if m else name, []).append((seed, command, config))
    lines = []
    for row, runs in groups.items():
        shared = {re.sub(r"train\.seed=\d+", "train.seed=SEED", c) for _, c, _ in runs}
        if len(runs) > 1 and len(shared) == 1:
            links = ", ".join(f"[{seed}]({config})" for seed, _, config in runs)
            seeds = ", ".join(str(seed) for seed, _, _ in runs)
            lines.append(f"| `{row}` | {seeds} | `{shared.pop()}` | {links} |")
        else:
            lines += [f"| `{row}` | {seed} | `{command}` | [{seed}]({config}) |" for seed, command, config in runs]
    return lines


def _table_row(r: dict, task: str, command: str, links_from: Path) -> tuple[str, str | tuple, dict | None]:
    """One run's line of the results table, its line under "Commands" (a finished run: how to run it again and
    the config it trained with) or "Not finished yet", and its summary (None until it has finished)."""
    import os

    spec, status = r["spec"], r["status"]
    info = task_named(task)
    _, keys, fmt = info.metric
    files = RunDir(r["dir"])
    summary = files.read_summary() if status == "finished" else None
    metrics = files.read_metrics()
    paper = " / ".join("–" if v is None else f"{v:g}" for v in spec.paper)
    if summary:
        test = _test_ppl(summary) if info.batch1 else fmt.format(summary[keys[1]])
        ours = f"{fmt.format(summary[keys[0]])} / {test}"
        params = f"{summary['parameters']['total'] / 1e6:.2f}M" if "parameters" in summary else "–"
        seconds = summary.get("wall_time_s", summary.get("train_seconds"))
        wall = f"{seconds / 60:.1f} min" if seconds is not None else "–"
        device = summary.get("device") or "–"
        device += f", {summary['precision']}" if "precision" in summary else ""
        tps = f"{summary['tokens_per_s']:,.0f}" if "tokens_per_s" in summary else "–"
        folder = Path(os.path.relpath(r["dir"], links_from)).as_posix()
        command_line = (spec.name, summary["seed"], command, f"{folder}/config.toml")
    else:
        best = min((m["valid_ppl"] for m in metrics if "valid_ppl" in m), default=None)
        ours = f"{best:.2f} / –" if best is not None else "–"
        params = wall = device = tps = "–"
        command_line = f"| `{spec.name}` | {_STATUS.get(status, status)} | `{command}` |"
    if summary and info.batch1 and batch1_test_ppl(summary) is None:
        summary = {**summary, "streams_only": True}  # its test is over streams: the seeds section says so
    total = planned_epochs(r)
    note = f" ({spec.note})" if spec.note else ""
    line = (
        f"| {spec.name}{note} | {paper} | {ours} | {params} | {len(metrics)}/{total} | {wall} | {device} | {tps} | "
        f"{_STATUS.get(status, status)} |"
    )
    return line, command_line, summary
