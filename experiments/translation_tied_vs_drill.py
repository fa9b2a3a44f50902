"""Multi30k En→De: Transformer-tied vs Transformer-DRILL at the same encoder size and training budget.

Superseded by ``tiedlm reproduce pappas2019-mt``; kept because it produced the committed
``experiments/results/translation``.

Pappas & Henderson (2019) Table 5 saw +0.8 BLEU for DRILL on WMT14 En–De (Transformer base). This runs
the same comparison at CPU scale: the default `tiedlm translate train` model (d 256, 3+3 layers, joint
8k BPE, 12 epochs), once with a tied output layer and once with DRILL (the paper's NMT setting: depth 2,
sigmoid, dropout 0.6, residual to E). The two runs go side by side, one thread each.

    python experiments/translation_tied_vs_drill.py [--runs DIR] [--out runs/translation]
    # (the committed results are in experiments/results/translation)

Finished runs in --runs are reused (a stopped one is resumed); the script then writes summary.md,
valid_ppl.png and each run's metrics into --out.
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
import subprocess
import sys
from pathlib import Path

from tiedlm.run_dir import RunDir
from tiedlm.translation import TranslationConfig

OUTPUTS = ("tied", "drill")


def run_all(runs: Path, extra: list[str]) -> None:
    procs = []
    for output in OUTPUTS:
        run = RunDir(runs / output)
        if run.summary.is_file():
            continue
        cmd = [sys.executable, "-m", "tiedlm", "translate", "train", "--no-progress"]
        cmd += (
            ["--resume", str(run.path)]
            if run.training_state().is_file()
            else ["--out", str(run.path), "--set", f"model.output={output}", "--set", "train.threads=1", *extra]
        )
        runs.mkdir(parents=True, exist_ok=True)
        procs.append(subprocess.Popen(cmd, stdout=open(runs / f"{output}.log", "a"), stderr=subprocess.STDOUT))
    for p in procs:
        if p.wait() != 0:
            raise SystemExit(f"a run failed; see the logs in {runs}")


def summarise(runs: Path, out: Path) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    rows, fig = [], plt.figure(figsize=(6, 4))
    for output in OUTPUTS:
        run = RunDir(runs / output)
        m, history = run.read_summary(), run.read_metrics()
        cfg = dataclasses.asdict(TranslationConfig.load_run(run.path))
        shutil.copy(run.summary, out / f"{output}.summary.json")
        shutil.copy(run.metrics, out / f"{output}.epochs.jsonl")
        shutil.copy(run.config, out / f"{output}.config.toml")
        shutil.copy(runs / output / "test.hyp.txt", out / f"{output}.test.hyp.txt")
        plt.plot([h["epoch"] for h in history], [h["valid_ppl"] for h in history], marker="o", label=output)
        rows.append((output, m, cfg, history))
    plt.xlabel("epoch")
    plt.ylabel("valid perplexity (subwords)")
    plt.yscale("log")
    plt.title("Multi30k En→De Transformer: tied vs DRILL output layer")
    plt.legend()
    plt.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out / "valid_ppl.png", dpi=120)
    lines = [
        "| output layer | test BLEU | test ppl | best valid ppl (epoch) | parameters | output-layer params | "
        "train time | decode time |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for output, m, cfg, history in rows:
        lines.append(
            f"| {output} | {m['test_bleu']:.2f} | {m['test_ppl']:.2f} | {m['valid_ppl']:.2f} ({m['best_epoch']}) | "
            f"{m['parameters']['total']:,} | {m['parameters']['output']:,} | {m['train_seconds'] / 60:.1f} min | "
            f"{m['decode_seconds']:.0f} s |"
        )
    (tied, mt, *_), (drill, md, *_) = rows
    text = "\n".join(
        [
            "# Multi30k En→De: Transformer-tied vs Transformer-DRILL",
            "",
            f"BLEU: sacrebleu `{mt['bleu_signature']}` on detokenized output, test = test_2016_flickr (1,000 "
            f"sentences), beam {mt['beam']}, length penalty {mt['length_penalty']}.",
            "",
            *lines,
            "",
            f"DRILL − tied: {md['test_bleu'] - mt['test_bleu']:+.2f} BLEU (Pappas & Henderson 2019, Table 5, "
            "WMT14 Transformer base: +0.8).",
            "",
            f"Both runs: seed {mt['seed']}, {mt['epochs']} epochs, {mt['threads']} thread each, side by side on one "
            f"2-core CPU, precision {mt['precision']}. Config: `tied.config.toml`, `drill.config.toml`.",
            "",
        ]
    )
    (out / "summary.md").write_text(text)
    return text


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", default=str(Path.home() / "tiedlm-runs" / "translation"))
    ap.add_argument("--out", default="runs/translation")
    ap.add_argument("--set", action="append", default=[], help="extra settings for both runs (key=value)")
    args = ap.parse_args()
    extra = [x for s in args.set for x in ("--set", s)]
    run_all(Path(args.runs), extra)
    print(summarise(Path(args.runs), Path(args.out)))


if __name__ == "__main__":
    main()
