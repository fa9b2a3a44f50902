"""POS tagging with dense vs frequency-sparse embeddings (Demeester et al. 2018, §4.2) on UD English-EWT.

Superseded by ``tiedlm reproduce demeester2018-pos`` (the same runs as a table of that command, with its
resume, publish and page); kept because it produced the committed ``experiments/results/pos_tagging``.

Dense embeddings of size k ∈ {8, 16, 32, 64, 128} against sparse embeddings of size 128 at densities
δ_E ∈ {1/2, 1/4, 1/8, 1/16} (the same trainable-parameter counts as dense 64, 32, 16 and 8), every other
setting equal (BiLSTM 100 per direction, Adam, dropout 0.3, the same epochs and seed). Each point is one
``tiedlm tag train`` run in RUNS/<name> (rerun the script to resume unfinished runs and skip finished
ones); then the table (``results.md``, ``results.json``) and the plot of accuracy against trainable
embedding parameters (``accuracy_vs_parameters.png``) are written to OUT.

    python experiments/pos_sparse_embeddings.py --epochs 10 --out runs/pos_tagging
    # (the committed results are in experiments/results/pos_tagging)
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from tiedlm.run_dir import RunDir

DENSE = [8, 16, 32, 64, 128]
SPARSE = [(128, 0.5), (128, 0.25), (128, 0.125), (128, 0.0625)]


def points() -> dict[str, list[str]]:
    runs = {f"dense-{k}": [f"embedding_size={k}"] for k in DENSE}
    runs |= {f"sparse-{k}-{d:g}": [f"embedding_size={k}", f"embedding_density={d}"] for k, d in SPARSE}
    return runs


def run(name: str, settings: list[str], args) -> dict:
    out = RunDir(args.runs / name)
    if out.summary.is_file():
        return out.read_summary()
    cmd = [sys.executable, "-m", "tiedlm.cli", "tag", "train", "--no-progress"]
    if out.training_state().is_file():
        cmd += ["--resume", str(out.path)]
    else:
        cmd += ["--out", str(out.path)]
        for s in settings + [f"epochs={args.epochs}", f"seed={args.seed}", f"threads={args.threads}"]:
            cmd += ["--set", s]
    print("+ " + " ".join(cmd[2:]), flush=True)
    subprocess.run(cmd, check=True)
    return out.read_summary()


def write(results: dict[str, dict], out: Path, args) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    rows = [
        "| run | k | δ_E | trainable embedding params | total params | dev acc | test acc | best epoch | train time |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, m in results.items():
        p = m["parameters"]
        rows.append(
            f"| {name} | {m['embedding_size']} | {m['embedding_density']:g} | {p['embedding']:,} | "
            f"{p['total']:,} | {100 * m['dev_accuracy']:.2f}% | {100 * m['test_accuracy']:.2f}% | "
            f"{m['best_epoch']}/{m['epochs']} | {m['train_seconds'] / 60:.1f} min |"
        )
    first = next(iter(results.values()))
    header = (
        f"# POS tagging (UPOS, UD English-EWT r2.16): dense vs frequency-sparse embeddings\n\n"
        f"Command: `python experiments/pos_sparse_embeddings.py --epochs {args.epochs} --seed {args.seed} "
        f"--threads {args.threads}`; one run per row, seed {args.seed}, vocabulary {first['vocab_size']:,} "
        f"(training words seen at least twice + `<unk>`), BiLSTM 100 per direction, Adam 2e-3, dropout 0.3, "
        f"best epoch by dev accuracy.\n\n"
    )
    (out / "results.md").write_text(header + "\n".join(rows) + "\n")
    (out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for kind, marker in (("dense", "o"), ("sparse", "s")):
        pts = sorted(
            (m["parameters"]["embedding"], 100 * m["test_accuracy"], n)
            for n, m in results.items()
            if n.startswith(kind)
        )
        ax.plot(
            [p[0] for p in pts],
            [p[1] for p in pts],
            marker=marker,
            label="dense, k = 8…128" if kind == "dense" else "sparse, k = 128, δ_E = 1/16…1/2",
        )
        for x, y, n in pts:
            ax.annotate(n.split("-", 1)[1], (x, y), textcoords="offset points", xytext=(4, -10), fontsize=7)
    ax.set_xscale("log")
    ax.set_xlabel("trainable embedding parameters")
    ax.set_ylabel("test accuracy (%)")
    ax.set_title("UPOS tagging, UD English-EWT: accuracy vs embedding parameters")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "accuracy_vs_parameters.png", dpi=130)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=Path("runs/pos_tagging"))
    ap.add_argument(
        "--runs",
        type=Path,
        default=Path.home() / "tiedlm-runs" / "pos_tagging",
        help="folder for the tagger run directories",
    )
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    results = {name: run(name, settings, args) for name, settings in points().items()}
    write(results, args.out, args)
    print((args.out / "results.md").read_text())


if __name__ == "__main__":
    main()
