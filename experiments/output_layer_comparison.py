"""Output-layer comparison on PTB (Pappas & Henderson 2019, Table 4 / Figure 3) at an equal training budget.

Superseded by ``tiedlm reproduce pappas2019-table4-small`` (40 epochs; ``--set train.epochs=1`` gives this
script's budget); kept because it produced the committed one-epoch ``experiments/results/output_layers``.

One fixed encoder (the VD-LSTM of ``ptb-small-re``: 2x200, embeddings 200, dropout 0.3, SGD lr 1) and the
same number of epochs for every output layer: full, tied (learnable bias, as DRILL's "tied"), bilinear,
dual (d_j = 200) and DRILL with 1-4 layers (DRILL's PTB settings: sigmoid, dropout 0.6 variational,
residual to E). Each run is an ordinary ``tiedlm train`` run in OUT/<layer> (resumable: rerun this script
after an interruption and it resumes unfinished runs and skips finished ones). Then it writes
``tiedlm report`` (table + validation curves) and ``tiedlm analyze bands`` of every layer against tied.

    python experiments/output_layer_comparison.py --epochs 2 --out runs/output_layers
    # (the committed results are in experiments/results/output_layers)
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

LAYERS = {
    "full": ["model.output=full"],
    "tied": ["model.output=tied", "model.output.bias=true"],
    "bilinear": ["model.output=bilinear"],
    "dual": ["model.output=dual", "model.output.joint_size=200"],
    **{
        f"drill-{k}": [
            "model.output=drill",
            f"model.output.depth={k}",
            "model.output.dropout=0.6",
            "model.output.variational=true",
            "model.output.activation=sigmoid",
        ]
        for k in (1, 2, 3, 4)
    },
}


def tiedlm(*args: str) -> None:
    cmd = [sys.executable, "-m", "tiedlm.cli", *args]
    print("+ tiedlm " + " ".join(args), flush=True)
    subprocess.run(cmd, check=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=Path("runs/output_layers"))
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--layers", nargs="+", default=list(LAYERS), choices=list(LAYERS))
    ap.add_argument("--base", default="ptb-small-re", help="preset that fixes the encoder and the training recipe")
    args = ap.parse_args()
    for name in args.layers:
        run = args.out / name
        if (run / "summary.json").exists():
            print(f"{name}: finished, skipped")
            continue
        if (run / "checkpoints" / "last.safetensors").exists():
            tiedlm("train", "--resume", str(run), "--no-progress", "--set", f"train.epochs={args.epochs}")
            continue
        sets = LAYERS[name] + [f"train.epochs={args.epochs}", f"train.threads={args.threads}"]
        tiedlm("train", args.base, "--out", str(run), "--no-progress", *[a for s in sets for a in ("--set", s)])
    runs = [str(args.out / n) for n in args.layers]
    tiedlm("report", *runs, "--out", str(args.out))
    others = [r for r in runs if not r.endswith("/tied")]
    tiedlm("analyze", "bands", str(args.out / "tied"), *others, "--out", str(args.out / "bands"))


if __name__ == "__main__":
    main()
