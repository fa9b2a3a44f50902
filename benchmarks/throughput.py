"""Training throughput of tiedlm's LSTM language models against fused nn.LSTM baselines, measured side by side.

Suite ``vd`` (Inan et al.'s VD-LSTM):
One run on one machine measures: the matmul peak (fp32 and bf16 GFLOP/s), training tokens/s for the
small and medium VD-LSTM (fp32 / bf16, without / with the augmented loss), and for a plain fused
``nn.LSTM`` LM of the same size written below (no recurrent dropout, as PyTorch's word_language_model
example); then the ratios, the augmented-loss overhead, the fraction of the bf16 matmul peak and the
peak resident memory of each configuration (each one runs in its own subprocess). The bf16 VD-LSTM also
runs with ``TIEDLM_NATIVE=0`` ("tiedlm-py": the PyTorch-from-Python path instead of the C++ kernels of
``tiedlm.native``), which shows what those kernels contribute.

Suite ``awd`` (AWD-LSTM, Merity et al. 2017; the DRILL and sparse papers' encoder): training steps (forward with
embedding dropout, locked dropout and weight drop, the loss with AR/TAR, backward, clipping, SGD) of the presets
``ptb-awd-{tied,drill,sparse}`` and their ``-budget`` sizes, for three implementations in one process, their
blocks interleaved so that other work on the machine falls on each alike: ``tiedlm`` (PyTorch's fused LSTM with
the dropped W_hh, tiedlm's default), ``tiedlm-loop`` (tiedlm's own C++ recurrence, ``TIEDLM_FUSED_LSTM=0``)
and ``baseline``, written the way the reference code (salesforce/awd-lstm-lm) does it
(``tiedlm.selfcheck.reference``): one ``nn.LSTM`` per layer called with a weight-dropped ``weight_hh_l0``,
embedding and locked dropout, a tied softmax with ``F.cross_entropy``, AR/TAR, SGD. The DRILL baseline puts
tiedlm's DRILL output layer on that encoder, so its ratio is the encoder's; the sparse rows have no baseline (the
reference runs its own loop over components).

Suite ``vd-encoder``: where the VD-LSTM's time goes against the baseline. In one process, blocks interleaved: the
forward + backward of the two-layer encoder alone (tiedlm's VD-LSTM with its per-sequence masks against
``nn.LSTM(h, h, 2, dropout=0.3)``, the baseline's fused kernel), and of each whole training step, so that the
step's share outside the encoder (embedding, the 10k-word softmax layer and loss, clipping, SGD: the same code
in both) is measured too.

    python benchmarks/throughput.py                          # all cores, both suites
    python benchmarks/throughput.py --suite vd --sizes small --steps 10 --blocks 5 --threads 1
    python benchmarks/throughput.py --suite awd --awd ptb-awd-tied ptb-awd-tied-budget --threads 1
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

import torch
from torch import nn

VOCAB, BATCH, BPTT = 10_000, 20, 35
HIDDEN = {"small": 200, "medium": 650}


def flops_per_token(h: int, layers: int = 2, vocab: int = VOCAB) -> float:
    """Forward + backward (3x forward) FLOPs per token of the matmuls: LSTM gates and the softmax layer."""
    return 3 * 2 * (layers * 4 * h * (h + h) + h * vocab)


def matmul_peak(dtype: torch.dtype, n: int = 2048, reps: int = 10) -> float:
    a, b = torch.randn(n, n, dtype=dtype), torch.randn(n, n, dtype=dtype)
    for _ in range(2):
        a @ b
    t = time.perf_counter()
    for _ in range(reps):
        a @ b
    return 2 * n**3 * reps / (time.perf_counter() - t) / 1e9


AWD_PRESETS = ["ptb-awd-tied", "ptb-awd-tied-budget", "ptb-awd-drill", "ptb-awd-drill-budget", "ptb-awd-sparse-budget"]


def awd_suite(preset: str, steps: int, blocks: int, threads: int) -> dict[str, float]:
    """Tokens/s of the three implementations of ``preset``'s training step (interleaved blocks, median)."""
    from common import interleaved_medians

    from tiedlm.losses import LanguageModelLoss, encoder_regularization
    from tiedlm.models import LanguageModel
    from tiedlm.runtime import set_threads
    from tiedlm.selfcheck.reference import ReferenceAWDLSTM
    from tiedlm.tasks.lm.config import Config

    set_threads(threads)
    cfg = Config.load(preset)
    m, t = cfg.model, cfg.train
    torch.manual_seed(0)
    zipf = 1.0 / torch.arange(1, VOCAB + 1, dtype=torch.float64)
    data = torch.multinomial(zipf / zipf.sum(), (t.bptt + 1) * t.batch_size, replacement=True)
    data = data.view(t.bptt + 1, t.batch_size)
    ours = LanguageModel(m, VOCAB).train()
    loss_fn = LanguageModelLoss.from_config(cfg.loss)
    models = {"tiedlm": ours, "tiedlm-loop": ours}
    if m.encoder.sparse_fraction == 0 and m.encoder.sparse_layer == 0:
        out = None if m.output.name == "tied" else LanguageModel(m, VOCAB).output
        models["baseline"] = ReferenceAWDLSTM(m, VOCAB, out).train()

    def step_fn(name):
        model = models[name]
        opt = torch.optim.SGD(model.parameters(), lr=1.0)
        state = model.init_state(t.batch_size)

        def step():
            os.environ["TIEDLM_FUSED_LSTM"] = "0" if name == "tiedlm-loop" else "1"
            for _ in range(steps):
                if name == "baseline":
                    loss = model.loss(data[:-1], data[1:], state, cfg.loss.ar, cfg.loss.tar)
                else:
                    logits, _ = model(data[:-1], state)
                    loss, _, _ = loss_fn(logits, data[1:], model.input_embeddings, model.output_bias)
                    loss = loss + encoder_regularization(model, cfg.loss.ar, cfg.loss.tar)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), t.clip)
                opt.step()

        return step

    seconds = interleaved_medians({name: step_fn(name) for name in models}, blocks)
    return {name: steps * t.batch_size * t.bptt / s for name, s in seconds.items()}


class FusedLSTMLM(nn.Module):
    """The baseline: embedding -> fused nn.LSTM -> linear, dropout only between layers' outputs."""

    def __init__(self, h: int, vocab: int = VOCAB, dropout: float = 0.3):
        super().__init__()
        self.emb, self.drop = nn.Embedding(vocab, h), nn.Dropout(dropout)
        self.lstm = nn.LSTM(h, h, 2, dropout=dropout)
        self.out = nn.Linear(h, vocab)

    def forward(self, x, state):
        y, state = self.lstm(self.emb(x), state)
        return self.out(self.drop(y)), state


def vd_lstm_lm(h: int):
    """tiedlm's two-layer VD-LSTM LM of width h (dropout 0.3, untied softmax layer), as both VD suites time it."""
    from tiedlm.models import LanguageModel
    from tiedlm.models.config import ModelConfig

    cfg = ModelConfig(
        embedding_size=h,
        init_range=0.1,
        output="full",
        encoder={"name": "vd-lstm", "hidden_size": h, "layers": 2, "dropout": 0.3},
    )
    return LanguageModel(cfg, VOCAB)


def encoder_suite(size: str, steps: int, blocks: int, threads: int) -> dict[str, float]:
    """Milliseconds per call (median of interleaved blocks) of both encoders' forward + backward and both steps."""
    from common import interleaved_medians

    from tiedlm.losses import LanguageModelLoss
    from tiedlm.runtime import set_threads

    set_threads(threads)
    torch.manual_seed(0)
    h = HIDDEN[size]
    ours = vd_lstm_lm(h)
    base = FusedLSTMLM(h)
    loss_fn = LanguageModelLoss(augmented=False)
    x = torch.randn(BPTT, BATCH, h, requires_grad=True)
    data = torch.randint(0, VOCAB, (BPTT + 1, BATCH))
    z = torch.zeros(2, BATCH, h)
    states = {"tiedlm": ours.init_state(BATCH), "baseline": (z, z)}

    def encoder(name):
        run = (lambda: ours.encoder(x, states["tiedlm"])[0]) if name == "tiedlm" else (lambda: base.lstm(x, (z, z))[0])
        return lambda: [run().sum().backward() for _ in range(steps)]

    def step(name):
        model, emb = (ours, lambda: ours.input_embeddings) if name == "tiedlm" else (base, lambda: base.emb.weight)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)

        def one():
            logits, _ = model(data[:-1], states[name])
            loss, _, _ = loss_fn(logits, data[1:], emb())
            opt.zero_grad(set_to_none=True)
            (loss * BPTT).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
            opt.step()

        return lambda: [one() for _ in range(steps)]

    variants = {
        f"{part} {name}": make(name)
        for part, make in (("encoder", encoder), ("step", step))
        for name in ("tiedlm", "baseline")
    }
    seconds = interleaved_medians(variants, blocks)
    return {name: 1e3 * s / steps for name, s in seconds.items()}


def run_config(size: str, impl: str, precision: str, augmented: bool, steps: int, threads: int, blocks: int) -> dict:
    """Tokens/s of one configuration: the median over ``blocks`` blocks of ``steps`` SGD steps (after 3 warm-up
    steps)."""
    from tiedlm.losses import LanguageModelLoss
    from tiedlm.runtime import autocast, set_threads

    set_threads(threads)
    torch.manual_seed(0)
    h = HIDDEN[size]
    dev = torch.device("cpu")
    loss_fn = LanguageModelLoss(augmented=augmented, tau=20.0, gamma=0.65)
    if impl in ("tiedlm", "tiedlm-py"):
        model = vd_lstm_lm(h)  # same output layer with and without AL
        state0 = model.init_state(BATCH)
        emb = lambda: model.input_embeddings  # noqa: E731
    else:
        model = FusedLSTMLM(h)
        z = torch.zeros(2, BATCH, h)
        state0 = (z, z)
        emb = lambda: model.emb.weight  # noqa: E731
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    # Zipf-distributed word ids (p ∝ 1/rank, like PTB's frequency-sorted vocabulary): a window then holds a
    # realistic number of distinct targets (~300 of 700), which the augmented loss's cost depends on
    zipf = 1.0 / torch.arange(1, VOCAB + 1, dtype=torch.float64)
    data = torch.multinomial(zipf / zipf.sum(), (BPTT + 1) * BATCH, replacement=True).view(BPTT + 1, BATCH)

    def step():
        with autocast(dev, precision):
            logits, _ = model(data[:-1], state0)
            loss, _, _ = loss_fn(logits, data[1:], emb())
        opt.zero_grad(set_to_none=True)
        (loss * BPTT).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        opt.step()

    for _ in range(3):
        step()
    rates = []  # the median of several timed blocks, so that a burst of other work on the machine does not decide
    for _ in range(blocks):
        t = time.perf_counter()
        for _ in range(steps):
            step()
        rates.append(steps * BATCH * BPTT / (time.perf_counter() - t))
    return {
        "tokens_per_s": statistics.median(rates),
        "block_tokens_per_s": rates,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--suite", nargs="+", default=["vd", "awd"], choices=["vd", "vd-encoder", "awd"])
    p.add_argument("--sizes", nargs="+", default=["small", "medium"], choices=list(HIDDEN), help="VD-LSTM sizes")
    p.add_argument("--awd", nargs="+", default=AWD_PRESETS, choices=AWD_PRESETS, help="AWD-LSTM presets")
    p.add_argument("--steps", type=int, default=10, help="training steps per timed block (AWD: a tenth, at least 1)")
    p.add_argument("--blocks", type=int, default=5, help="timed blocks per configuration (the median is reported)")
    p.add_argument("--threads", type=int, default=0, help="0: all cores")
    p.add_argument("--json", help="also write the results to this file")
    p.add_argument("--_one", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args._one:  # child process: one configuration
        if args._one.startswith("awd:"):
            print(json.dumps(awd_suite(args._one[4:], max(1, args.steps // 10), args.blocks, args.threads)))
            return
        if args._one.startswith("encoder:"):
            print(json.dumps(encoder_suite(args._one[8:], args.steps, args.blocks, args.threads)))
            return
        size, impl, precision, aug = args._one.split(",")
        print(json.dumps(run_config(size, impl, precision, aug == "al", args.steps, args.threads, args.blocks)))
        return

    from tiedlm import native
    from tiedlm.runtime import cpu_supports_bf16, set_threads

    threads = set_threads(args.threads)
    kernels = native.available()  # builds them before any timing
    peak32, peak16 = matmul_peak(torch.float32), matmul_peak(torch.bfloat16) if cpu_supports_bf16() else None
    print(
        f"machine: {os.cpu_count()} CPUs visible, {threads} threads, torch {torch.__version__}, "
        f"C++ kernels: {'yes' if kernels else 'no (Python fallback)'}"
    )
    print(f"matmul peak (2048^3): fp32 {peak32:.0f} GFLOP/s, bf16 {peak16 or 0:.0f} GFLOP/s")
    report = {"matmul_peak_gflops": {"fp32": peak32, "bf16": peak16}, "threads": threads, "native_kernels": kernels}
    if "vd" in args.suite:
        report["results"] = vd_suite(args, threads, peak16)
    if "vd-encoder" in args.suite:
        report["vd_encoder"] = encoder_report(args, threads)
    if "awd" in args.suite:
        report["awd"] = awd_report(args, threads)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2)


def _child(one: str, args, threads: int, env: dict | None = None) -> dict:
    cmd = [
        sys.executable,
        __file__,
        "--_one",
        one,
        "--steps",
        str(args.steps),
        "--blocks",
        str(args.blocks),
        "--threads",
        str(threads),
    ]
    return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout)


def awd_report(args, threads: int) -> dict:
    print("\nAWD-LSTM training steps (tokens/s, median of interleaved blocks; one process per preset):")
    results = {}
    for preset in args.awd:
        r = results[preset] = _child(f"awd:{preset}", args, threads)
        line = "  ".join(f"{name} {rate:7,.0f}" for name, rate in r.items())
        ratios = f"fused / loop {r['tiedlm'] / r['tiedlm-loop']:.2f}x"
        if "baseline" in r:
            ratios += f", tiedlm / baseline {r['tiedlm'] / r['baseline']:.2f}x"
        print(f"  {preset:22s} {line}   {ratios}", flush=True)
    return results


def encoder_report(args, threads: int) -> dict:
    print("\nVD-LSTM encoder alone and whole step (ms per call, median of interleaved blocks; one process per size):")
    results = {}
    for size in args.sizes:
        r = results[size] = _child(f"encoder:{size}", args, threads)
        enc, step = r["encoder baseline"] / r["encoder tiedlm"], r["step baseline"] / r["step tiedlm"]
        rest = r["step baseline"] - r["encoder baseline"]
        print(
            f"  {size:6s} encoder fwd+bwd: tiedlm {r['encoder tiedlm']:6.1f}  nn.LSTM {r['encoder baseline']:6.1f}"
            f"  ({enc:.2f}x)   step: tiedlm {r['step tiedlm']:6.1f}  baseline {r['step baseline']:6.1f} ({step:.2f}x);"
            f"  the baseline's step outside its encoder: {rest:.1f} ms ({rest / r['step baseline']:.0%})",
            flush=True,
        )
    return results


def vd_suite(args, threads: int, peak16) -> list[dict]:
    precisions = ["fp32", "bf16"] if peak16 else ["fp32"]
    results = []
    for size in args.sizes:
        for impl, augs in (("baseline", ["ce"]), ("tiedlm", ["ce", "al"]), ("tiedlm-py", ["ce", "al"])):
            for precision in precisions if impl != "tiedlm-py" else precisions[-1:]:
                for aug in augs:
                    env = {**os.environ, "TIEDLM_NATIVE": "0" if impl == "tiedlm-py" else "1"}
                    r = _child(f"{size},{impl},{precision},{aug}", args, threads, env)
                    r.update(size=size, impl=impl, precision=precision, loss=aug)
                    r["gflops"] = r["tokens_per_s"] * flops_per_token(HIDDEN[size]) / 1e9
                    results.append(r)
                    name = f"{size:6s} {impl:9s} {precision} {'CE+AL' if aug == 'al' else 'CE':5s}"
                    frac = f"{r['gflops'] / peak16:5.1%} of bf16 peak" if peak16 else ""
                    print(
                        f"{name}  {r['tokens_per_s']:8,.0f} tok/s  {r['gflops']:6.1f} GFLOP/s  {frac}  "
                        f"peak RSS {r['peak_rss_mb']:,.0f} MB",
                        flush=True,
                    )
    get = {(r["size"], r["impl"], r["precision"], r["loss"]): r["tokens_per_s"] for r in results}
    print("\nratios:")
    for size in args.sizes:
        base = get[(size, "baseline", "fp32", "ce")]
        for precision in precisions:
            ours = get[(size, "tiedlm", precision, "ce")]
            al = get[(size, "tiedlm", precision, "al")]
            print(
                f"  {size:6s} tiedlm {precision} / fused nn.LSTM fp32: {ours / base:.2f}x   "
                f"augmented-loss step time overhead ({precision}): {ours / al - 1:+.0%}"
            )
        last = precisions[-1]
        for aug in ("ce", "al"):
            print(
                f"  {size:6s} tiedlm {last} {aug.upper()}: C++ kernels / Python path: "
                f"{get[(size, 'tiedlm', last, aug)] / get[(size, 'tiedlm-py', last, aug)]:.2f}x"
            )
    return results


if __name__ == "__main__":
    main()
