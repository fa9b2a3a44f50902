"""Evaluation time with the label embeddings g_out(E) computed once a stream against once a window, side by side.

``tiedlm.evaluation.stream_logits`` reuses the output layer's (|V|, d_j) label table over a stream's windows
(``OutputLayer.labels_reused``): with fixed weights every window would compute the same table. This script times
``evaluate`` of the ``ptb-awd-*-budget`` models (random weights: the time does not depend on them) on random
Zipf-distributed tokens at the papers' test protocol (batch 1, bptt 35) and at validation's (10 streams), in
alternating blocks (reuse on, off, on, ...), checks that both give the same perplexity to the bit, and prints the
median seconds and the speed-up for each output layer.

    python benchmarks/eval_labels.py --tokens 3500 --blocks 3 --threads 1
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time

import torch

from tiedlm.evaluation import evaluate
from tiedlm.models import LanguageModel
from tiedlm.models.outputs.base import OutputLayer
from tiedlm.runtime import set_threads
from tiedlm.tasks.lm.config import Config

LAYERS = {"tied": ("tied", ()), "bilinear": ("bilinear", ()), "dual": ("dual", ())}
LAYERS |= {f"drill-{k}": ("drill", (f"model.output.depth={k}",)) for k in (1, 4)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layers", nargs="+", default=list(LAYERS), choices=list(LAYERS))
    ap.add_argument("--tokens", type=int, default=3500, help="tokens evaluated per timed block")
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 10], help="evaluation batch sizes (streams)")
    ap.add_argument("--blocks", type=int, default=3, help="timed blocks per variant (the median is reported)")
    ap.add_argument("--threads", type=int, default=1, help="0: all cores")
    args = ap.parse_args()
    threads = set_threads(args.threads)
    torch.manual_seed(0)
    vocab = 10_000
    ids = torch.multinomial(1.0 / torch.arange(1, vocab + 1, dtype=torch.float), args.tokens, replacement=True)
    reuse = OutputLayer.labels_reused

    def once_a_window(self):  # what stream_logits did before: g_out(E) at every forward pass
        return contextlib.nullcontext()

    print(f"threads={threads} tokens={args.tokens} blocks={args.blocks} vocab={vocab} torch={torch.__version__}")
    print(f"{'layer':9s} {'batch':>5s} {'once/stream s':>13s} {'once/window s':>13s} {'speed-up':>8s}")
    for name in args.layers:
        output, sets = LAYERS[name]
        cfg = Config.load(f"ptb-awd-{output}-budget").with_overrides(list(sets))
        model = LanguageModel(cfg.model, vocab)
        for batch in args.batch:
            times: dict[str, list[float]] = {"stream": [], "window": []}
            ppl: dict[str, float] = {}
            for _ in range(args.blocks):
                for variant in times:
                    OutputLayer.labels_reused = reuse if variant == "stream" else once_a_window
                    try:
                        t = time.perf_counter()
                        ppl[variant] = evaluate(model, ids, batch, 35)["ppl"]
                        times[variant].append(time.perf_counter() - t)
                    finally:
                        OutputLayer.labels_reused = reuse
            if ppl["stream"] != ppl["window"]:
                raise SystemExit(f"{name}: perplexity differs: {ppl['stream']!r} against {ppl['window']!r}")
            s, w = (statistics.median(times[v]) for v in ("stream", "window"))
            print(f"{name:9s} {batch:5d} {s:13.2f} {w:13.2f} {w / s:8.2f}")


if __name__ == "__main__":
    main()
