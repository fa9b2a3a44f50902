"""``tiedlm report``: one markdown page (and PNGs) collecting finished or running training runs.

For each run: validation perplexity per epoch (all runs on one plot, as the paper's Figure 2), a table
of valid/test perplexity and parameters beside the paper's Table 1/2 numbers for the matching preset,
and each run's command, seed, wall time and tokens/s.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import UsageError
from ..registry import task_named
from ..run_dir import RunDir, write_figure_atomic, write_text_atomic
from ..train.wall_time import duration
from .markdown import cell
from .paper import paper_results, paper_row, variant_name


def read_run(run_dir: Path) -> dict:
    """Config, per-epoch metrics and (if the run finished) summary of a run directory."""
    files = RunDir(run_dir)
    files.require_config()
    cfg = task_named("lm").config.load(files.config)
    metrics, summary = files.read_metrics(), files.read_summary()
    return {"dir": run_dir, "name": run_dir.name, "config": cfg, "metrics": metrics, "summary": summary}


def stage_start(metrics: list[dict], stage: str) -> int | None:
    """The first epoch whose record says ``stage`` (``averaged``: NT-ASGD validated its average from there on;
    ``finetune``: the finetune stage began), or None (never, or a run from before records had stages)."""
    return next((m["epoch"] for m in metrics if m.get("stage") == stage), None)


def plot_curves(runs: list[dict], path: Path, log_y: bool = True, title: str = "") -> None:
    """Validation perplexity per epoch for every run on one plot (Inan et al.'s Figure 2), each with its
    paper validation number (where the preset has one) as a dashed line of the same colour, and NT-ASGD's
    stages (the first epoch validated on the average, the first of the finetune stage) as vertical lines of
    that colour where its metrics record them (``stage``); ``title`` names the comparison (by default, that
    figure)."""
    import textwrap

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import LogLocator, NullFormatter, ScalarFormatter

    fig, ax = plt.subplots(figsize=(7, 4.2))
    drawn_papers: set[str] = set()
    for r in runs:
        if not r["metrics"]:
            continue
        (line,) = ax.plot(
            [m["epoch"] for m in r["metrics"]], [m["valid_ppl"] for m in r["metrics"]], marker=".", label=r["name"]
        )
        for stage, style, what in (("averaged", ":", "averaging"), ("finetune", "-.", "finetune")):
            first = stage_start(r["metrics"], stage)
            if first is not None:
                ax.axvline(
                    first,
                    color=line.get_color(),
                    linestyle=style,
                    linewidth=1,
                    label=f"{r['name']}: {what} from {first}",
                )
        paper_valid = (paper_row(r["config"]) or {}).get("valid")
        variant = variant_name(r["config"].loss.augmented, r["config"].model.output.name)
        paper_label = f"paper valid {paper_valid:g} ({variant})" if paper_valid else ""
        if paper_valid and paper_label not in drawn_papers:  # a second seed of a row: its paper line is drawn
            drawn_papers.add(paper_label)
            ax.axhline(paper_valid, color=line.get_color(), linestyle="--", linewidth=1, label=paper_label)
    ax.set_xlabel("epoch")
    ax.set_ylabel("validation perplexity")
    if log_y:
        ax.set_yscale("log")
        ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 1.2, 1.5, 2.0, 3.0, 5.0, 7.0)))
        ax.yaxis.set_major_formatter(ScalarFormatter())
        ax.yaxis.set_minor_formatter(NullFormatter())
    ax.grid(alpha=0.3, which="both")
    if ax.get_legend_handles_labels()[0]:  # no labelled artist: no legend (and no warning)
        ax.legend(fontsize=8)
    title = title or "Validation perplexity during training (cf. Inan et al. 2017, Figure 2)"
    ax.set_title(textwrap.fill(title, 80), fontsize=10)
    fig.tight_layout()
    write_figure_atomic(path, fig, dpi=120)
    plt.close(fig)


def _count_parameters(run_dir: Path, cfg) -> int | None:
    """Total parameters of an unfinished run (no summary.json yet), from its config and vocabulary."""
    from ..data import Vocabulary
    from ..models.language_model import count_parameters

    vocab = RunDir(run_dir).vocab
    return count_parameters(cfg.model, len(Vocabulary.load(vocab)))["total"] if vocab.is_file() else None


def make_report(run_dirs: list[str | Path], out: str | Path) -> Path:
    """Write ``out/report.md`` and ``out/valid_ppl.png``; return the markdown path."""
    if not run_dirs:
        raise UsageError("give at least one run directory, e.g. tiedlm report runs/ptb-small-vd runs/ptb-small-real")
    runs = [read_run(Path(d)) for d in run_dirs]
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    plot_curves(runs, out / "valid_ppl.png")
    lines = [
        "# tiedlm report",
        "",
        "![validation perplexity per epoch](valid_ppl.png)",
        "",
        "| run | data | model | params | epochs | best valid | test | paper valid | paper test | status |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in runs:
        cfg, s, m = r["config"], r["summary"], r["metrics"]
        paper = paper_row(cfg) or {}
        e = cfg.model.encoder
        shape = f"{e.layers}x{e.hidden_size}" if hasattr(e, "layers") else e.name  # an HF body: "hf"
        model = f"{shape} {variant_name(cfg.loss.augmented, cfg.model.output.name)}"
        total = s["parameters"]["total"] if s else _count_parameters(r["dir"], cfg)
        params = f"{total / 1e6:.2f}M" if total else "–"
        best = min((e["valid_ppl"] for e in m), default=None)
        status = (
            "finished"
            if s
            else (f"running/stopped at epoch {m[-1]['epoch']}/{cfg.train.epochs}" if m else "no epoch finished")
        )
        lines.append(
            f"| {r['name']} | {cfg.data.name} | {model} | {params} | {len(m)} | {cell(best)} | "
            f"{cell(s and s['test_ppl'])} | {cell(paper.get('valid'), 'g')} | {cell(paper.get('test'), 'g')} "
            f"| {status} |"
        )
    lines += ["", f"Paper numbers: {paper_results()['source']}", "", "## Runs", ""]
    for r in runs:
        cfg, s, m = r["config"], r["summary"], r["metrics"]
        lines.append(f"### {r['name']}")
        if s:
            lines += [
                f"- command: `{s['command']}`",
                f"- seed {s['seed']}, device {s['device']}, precision {s['precision']}, threads {s['threads']}",
                f"- wall time {duration(s['wall_time_s'])}, training {s['tokens_per_s']:,.0f} tokens/s, "
                f"best epoch {s['best_epoch']}: valid {s['valid_ppl']:.2f}, test {s['test_ppl']:.2f}",
            ]
        elif m:
            tps = sum(e["train_tokens"] for e in m) / max(sum(e["epoch_time_s"] for e in m), 1e-9)
            lines += [
                f"- not finished: {len(m)} of {cfg.train.epochs} epochs, {duration(m[-1]['wall_time_s'])} "
                f"so far, {tps:,.0f} tokens/s, seed {cfg.train.seed}"
            ]
        lines += ["", "```toml", cfg.to_toml().strip(), "```", ""]
    path = out / "report.md"
    write_text_atomic(path, "\n".join(lines) + "\n")
    return path
