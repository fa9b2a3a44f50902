"""Cross-entropy per training-frequency band of the target word (Pappas & Henderson 2019, Figure 3).

Every token of an evaluation split is put in the band of its target word's number of occurrences in the
training data (1–10, 10–100, 100–1k, 1k–10k, 10k+ by default). For each run the mean cross-entropy per
band is computed, and for each run against the baseline (the first run) the relative difference
(CE_run − CE_base) / CE_base: negative where the run predicts that band's words better.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
import torch.nn.functional as F

from ..evaluation import stream_logits
from ..run_dir import write_figure_atomic, write_text_atomic
from .markdown import cell

EDGES = (1, 10, 100, 1_000, 10_000)  # band i holds counts in [EDGES[i], EDGES[i+1]); the last is open


def band_labels(edges=EDGES) -> list[str]:
    def short(n: int) -> str:
        return f"{n // 1000}k" if n >= 1000 else str(n)

    return [f"{short(a)}-{short(b)}" for a, b in zip(edges, edges[1:])] + [f"{short(edges[-1])}+"]


def band_of_counts(counts: torch.Tensor, edges=EDGES) -> torch.Tensor:
    """Band index per word (−1 for words never seen in training)."""
    band = torch.bucketize(counts, torch.tensor(edges[1:]), right=True)
    return torch.where(counts < edges[0], torch.full_like(band, -1), band)


@torch.inference_mode()
def token_cross_entropy(
    model, ids: torch.Tensor, batch_size: int, bptt: int, precision: str, progress: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token cross-entropy (nats) and target ids over the stream, in the order the batches see them."""
    ces, targets = [], []
    for logits, y in stream_logits(model, ids, batch_size, bptt, precision, progress, desc="bands"):
        ces.append(F.cross_entropy(logits, y, reduction="none").cpu())
        targets.append(y.cpu())
    return torch.cat(ces), torch.cat(targets)


def band_table(train_counts: torch.Tensor, targets: torch.Tensor, ces: dict[str, torch.Tensor], edges=EDGES) -> dict:
    """Per band: word types (in the vocabulary), evaluation tokens, mean CE per run, relative CE vs the first run."""
    names = list(ces)
    base = names[0]
    word_band = band_of_counts(train_counts, edges)
    tok_band = word_band[targets]
    rows = []
    for b, label in enumerate(band_labels(edges)):
        sel = tok_band == b
        n = int(sel.sum())
        row = {"band": label, "word_types": int((word_band == b).sum()), "tokens": n, "ce": {}, "relative_ce": {}}
        for name in names:
            row["ce"][name] = float(ces[name][sel].mean()) if n else None
        for name in names[1:]:
            a, c = row["ce"][base], row["ce"][name]
            row["relative_ce"][name] = (c - a) / a if n and a else None
        rows.append(row)
    overall = {name: float(ces[name].mean()) for name in names}
    return {"baseline": base, "runs": names, "rows": rows, "overall_ce": overall}


def bands_of_runs(
    runs: list, names: list[str], split: str, batch_size: int | None = None, precision=None, progress: bool = False
) -> dict:
    """:func:`band_table` of loaded runs (``tiedlm.run.load_run``) on one split of their corpus, the first run
    the baseline; ``batch_size`` defaults to each run's ``eval_batch_size``, ``precision`` to its own."""
    from ..data import load_corpus
    from ..errors import UsageError
    from ..runtime import run_precision

    base = runs[0]
    for r in runs[1:]:
        if r.vocab.words != base.vocab.words:
            raise UsageError(
                f"{r.path} and {base.path} have different vocabularies; compare runs trained on the same corpus"
            )
    data = base.config.data
    corpus = load_corpus(data.name, data.data_dir, vocab=base.vocab)
    counts = torch.bincount(corpus.train, minlength=len(base.vocab))
    ces, targets = {}, None
    for name, r in zip(names, runs):
        t = r.config.train
        run = run_precision(t.precision, r.model.embedding.weight.device, precision)
        ces[name], targets = token_cross_entropy(
            r.model, corpus.splits[split], batch_size or t.eval_batch_size, t.bptt, run, progress=progress
        )
    table = band_table(counts, targets, ces)
    table.update(split=split, data=data.name)
    return table


def merge_band_tables(tables: list[dict], baseline: str, order: list[str]) -> dict:
    """One :func:`band_table` result from several analyses of the same split, so that a run analysed earlier
    (whose checkpoint may be gone since) and a run analysed now stand in one table: a run's figures are taken
    from the first table that has it, and every run's relative CE is recomputed against ``baseline``'s
    (CE_run − CE_base) / CE_base per band. The runs come baseline first, then in ``order``. Tables of another
    corpus, split or banding are a one-line error."""
    from ..errors import UsageError

    first = tables[0]
    shape = lambda t: (t["data"], t["split"], [(r["band"], r["word_types"], r["tokens"]) for r in t["rows"]])  # noqa: E731
    for t in tables[1:]:
        if shape(t) != shape(first):
            raise UsageError(
                f"band analyses of runs {first['runs']} and {t['runs']} are not of the same corpus, split and "
                f"bands (each run's evaluation batch must be the same); analyse them again together"
            )
    names = []
    for t in tables:
        names += [n for n in t["runs"] if n not in names]
    if baseline not in names:
        raise UsageError(f"no band analysis holds the baseline {baseline!r}; analyse it first")
    rank: dict[str, int] = {}
    for n in order:
        rank.setdefault(n, len(rank))
    names.sort(key=lambda n: (n != baseline, rank.get(n, len(rank))))
    owner = {n: next(t for t in tables if n in t["runs"]) for n in names}
    rows = []
    for i, r in enumerate(first["rows"]):
        ce = {n: owner[n]["rows"][i]["ce"][n] for n in names}
        a = ce[baseline]
        rel = {n: (ce[n] - a) / a if r["tokens"] and a else None for n in names if n != baseline}
        rows.append({k: r[k] for k in ("band", "word_types", "tokens")} | {"ce": ce, "relative_ce": rel})
    overall = {n: owner[n]["overall_ce"][n] for n in names}
    extra = {k: v for k, v in first.items() if k not in ("baseline", "runs", "rows", "overall_ce")}
    return {"baseline": baseline, "runs": names, "rows": rows, "overall_ce": overall, **extra}


def band_report_lines(table: dict) -> list[str]:
    """The markdown table of :func:`band_table`'s result: CE per band and run, Δ% against the baseline."""
    base, runs, others = table["baseline"], table["runs"], table["runs"][1:]

    def line(first: str, ce: dict, delta: dict) -> str:  # a row: its CE per run, then each other run's Δ%
        cells = [cell(ce[n], ".3f") for n in runs] + [cell(delta[n], "+.2f") for n in others]
        return f"| {first} | " + " | ".join(cells) + " |"

    head = "| band | word types | tokens | " + " | ".join([*(f"CE {n}" for n in runs), *(f"Δ% {n}" for n in others)])
    lines = [head + " |", "|" + "---|" * (3 + len(runs) + len(others))]
    for r in table["rows"]:
        delta = {n: r["relative_ce"][n] * 100 if r["relative_ce"][n] is not None else None for n in others}
        lines.append(line(f"{r['band']} | {r['word_types']:,} | {r['tokens']:,}", r["ce"], delta))
    overall = table["overall_ce"]
    return lines + [line("all | |", overall, {n: (overall[n] / overall[base] - 1) * 100 for n in others})]


def plot_bands(table: dict, path: Path, title: str = "") -> None:
    """Relative CE difference per band against the baseline, one bar per run (Figure 3's plot)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    base, others = table["baseline"], table["runs"][1:]
    rows = [r for r in table["rows"] if r["tokens"]]
    fig, ax = plt.subplots(figsize=(1.6 + 1.3 * len(rows), 3.8))
    width = 0.8 / max(len(others), 1)
    for i, name in enumerate(others):
        xs = [j + (i - (len(others) - 1) / 2) * width for j in range(len(rows))]
        ax.bar(xs, [r["relative_ce"][name] * 100 for r in rows], width, label=name)
    ax.axhline(0, color="black", lw=0.8)
    ax.set_xticks(range(len(rows)), [f"{r['band']}\n({r['word_types']:,} types)" for r in rows], fontsize=8)
    ax.set_xlabel("occurrences of the target word in the training data")
    ax.set_ylabel(f"relative CE vs {base} (%)")
    ax.set_title(
        title or "Cross-entropy difference by frequency band (Figure 3 of Pappas & Henderson 2019)", fontsize=9
    )
    if ax.get_legend_handles_labels()[0]:  # no labelled artist: no legend (and no warning)
        ax.legend(fontsize=7)
    fig.tight_layout()
    write_figure_atomic(path, fig, dpi=130)
    plt.close(fig)


def write_band_report(table: dict, out: Path, title: str = "") -> Path:
    """bands.json, bands.md (table) and bands.png (relative CE difference per band, one bar per run)."""
    out.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out / "bands.json", json.dumps(table, indent=1))
    lines = [
        f"# Cross-entropy by training-frequency band{': ' + title if title else ''}",
        "",
        f"Baseline: `{table['baseline']}`. Δ% = (CE_run − CE_baseline) / CE_baseline × 100, negative = better "
        "than the baseline.",
        "",
        *band_report_lines(table),
    ]
    write_text_atomic(out / "bands.md", "\n".join(lines) + "\n")
    plot_bands(table, out / "bands.png", title)
    return out / "bands.md"
