"""The checks of ``tiedlm selfcheck``: each trains, resumes or times something for real and says how it went.

- :func:`train_check`: a preset (every encoder with the main output layers and the augmented loss) trains for a
  few windows through the :class:`~tiedlm.tasks.lm.task.LanguageModelTask`, eagerly or from a CUDA graph; it passes when
  every step was finite and the median of the readings of a validation slice's perplexity taken through the
  timed windows (three; two with ``--quick`` on a CPU) fell below the untrained model's (one reading can land on
  early SGD's spike). Tokens/s are timed over windows after the first ones (which hold the graph's capture and
  the kernels' warm-up).
- :func:`resume_check`: a run stopped by a real SIGTERM in the middle of a step, then resumed, ends with the
  weights of the same run trained straight through (bit for bit on the CPU).
- :func:`baseline_check`: the AWD-LSTM's training step against the reference code's way of writing it
  (:mod:`tiedlm.selfcheck.reference`), in one process, blocks interleaved: the ratio of their tokens/s.
- :func:`gpu_tests_check`: the test files that exercise the GPU paths, where a checkout's ``tests/`` is at hand.
"""

from __future__ import annotations

import math
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from ..errors import RunInterrupted, TiedlmError
from ..evaluation import evaluate
from ..tasks.lm.config import Config
from ..tasks.lm.task import LanguageModelTask
from ..train import Run, load_checkpoint


@dataclass
class Check:
    """One row of the report. ``ok``: True passed, False failed, None not run here (with the reason)."""

    name: str
    ok: bool | None
    detail: str = ""
    tokens_per_s: float | None = None
    ratio: float | None = None  # to the reference-style baseline
    peak_mib: float | None = None
    seconds: float = 0.0
    extra: dict = field(default_factory=dict)

    @property
    def status(self) -> str:
        return {True: "pass", False: "FAIL", None: "skip"}[self.ok]


@dataclass(frozen=True)
class Sizes:
    """How much each check does: windows to warm up and to time, the model sizes, the baseline's blocks."""

    warm: int
    timed: int
    eval_tokens: int
    shrink: dict  # overrides applied to every preset (empty: the presets' own sizes)
    resume_windows: int
    baseline_steps: int
    baseline_blocks: int


READINGS = 3  # readings of the validation slice through a training check's timed windows (their median counts)


def sizes_for(device: str, quick: bool) -> Sizes:
    if device == "cuda":
        # the AWD-LSTM's variable windows capture a graph per length: 60 warm-up windows meet most lengths, so
        # that the timed ones are mostly replays (on an H100, 3 + 20 windows timed its captures)
        if quick:
            return Sizes(3, 5, 20_000, {}, 6, 3, 3)
        return Sizes(60, 100, 20_000, {}, 6, 10, 9)
    small = {"model.embedding_size": "32", "train.batch_size": "8", "train.bptt": "16", "train.eval_batch_size": "4"}
    if quick:  # under a minute on a 2-core CPU: narrow models, a few windows
        return Sizes(1, 2, 2_000, {**small, "model.encoder.hidden_size": "32"}, 4, 1, 2)
    return Sizes(2, 8, 10_000, {"train.batch_size": "20", "train.bptt": "35"}, 6, 2, 3)


def _peak_reset(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)


def peak_mib(device: torch.device) -> float:
    """The GPU's peak allocated memory since the last reset; on the CPU the process's peak resident size."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    import resource
    import sys

    unit = 1 if sys.platform == "darwin" else 1024  # ru_maxrss: bytes on macOS, KiB on Linux (getrusage(2))
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * unit / 2**20


def _budgeted_fit(r: Run, windows: int) -> None:
    """Train ``windows`` more windows (the run stops with a checkpoint, as a window budget does)."""
    try:
        r.fit(windows)
    except RunInterrupted:
        return
    raise TiedlmError("the run finished before its window budget: give the check a larger corpus")


def train_check(name: str, cfg: Config, out: Path, sizes: Sizes) -> Check:
    """Train ``cfg`` for a few windows; pass when every step is finite and the model has learnt something."""
    start = time.perf_counter()
    with Run(LanguageModelTask(cfg), out, progress=False, log=lambda *a, **k: None) as r:
        return _train_check(name, cfg, r, sizes, start)


def _train_check(name: str, cfg: Config, r: Run, sizes: Sizes, start: float) -> Check:
    tr, p = r.task, r.progress
    _peak_reset(tr.device)
    t = cfg.train
    valid = tr.corpus.valid[: sizes.eval_tokens]
    before = evaluate(tr.model, valid, t.eval_batch_size, t.bptt, tr.precision)["ppl"]
    _budgeted_fit(r, sizes.warm)
    tokens0, time0 = p.sums.get("count", 0), p.epoch_seconds
    # the slice is read READINGS times through the timed windows (evaluation is outside the timed sums): early
    # SGD at lr 30 can spike for a window or so (on a GPU, 21,212 at one window between 966 and 708 at the
    # readings around it), so one reading can fail a model that trains; the
    # median passes over one spike and still fails a model that diverges or never learns
    n = min(READINGS, sizes.timed)
    readings = []
    for k in range(n):
        _budgeted_fit(r, sizes.timed * (k + 1) // n - sizes.timed * k // n)
        readings.append(evaluate(tr.eval_weights(), valid, t.eval_batch_size, t.bptt, tr.precision)["ppl"])
    if tr.device.type == "cuda":
        torch.cuda.synchronize(tr.device)
    speed = (p.sums.get("count", 0) - tokens0) / max(p.epoch_seconds - time0, 1e-9)
    after = statistics.median(readings)
    graphed = f"graphed ({len(tr.graphs.by_length)} graphs)" if tr.graphs and tr.graphs.by_length else "eager"
    if tr.device.type == "cuda" and tr.graph_reason is not None and t.cuda_graph != "off":
        graphed += f" (not captured: {tr.graph_reason})"
    skipped = int(p.sums.get("skipped", 0))
    ok = all(math.isfinite(r) for r in readings) and after < before and skipped == 0
    detail = f"{graphed}; valid ppl of {valid.numel():,} tokens {before:,.0f} -> {after:,.1f}"
    if len(readings) > 1:
        detail += f" (median of {' / '.join(f'{r:,.1f}' for r in readings)})"
    if skipped:
        detail += f"; {skipped} non-finite steps"
    return Check(name, ok, detail, speed, None, peak_mib(tr.device), time.perf_counter() - start)


def resume_check(cfg: Config, out: Path, sizes: Sizes) -> Check:
    """A real SIGTERM in the middle of a step, a resume, and the weights of the straight run."""
    start = time.perf_counter()
    n, k = sizes.resume_windows, sizes.resume_windows // 2
    quiet = {"progress": False, "log": lambda *a, **kw: None}
    with Run(LanguageModelTask(cfg), out / "straight", **quiet) as straight:
        _budgeted_fit(straight, n)
    stopped = LanguageModelTask(cfg)
    calls, step = {"n": 0}, stopped.train_step

    def sigterm_in_step(batch, position):
        # counted per window, not per forward call: a CUDA graph's capture calls the model's forward several
        # times in window 1 and its replays not at all (a forward hook stopped a graphed run after window 1)
        calls["n"] += 1
        if calls["n"] == k:
            os.kill(os.getpid(), signal.SIGTERM)  # delivered now, as window k's step starts; the step goes on
        return step(batch, position)

    stopped.train_step = sigterm_in_step
    with Run(stopped, out / "stopped", **quiet) as part:
        try:
            part.fit()
            return Check("resume after SIGTERM", False, "the SIGTERM did not stop the run")
        except RunInterrupted:
            pass
    if part.progress.batch != k:
        return Check("resume after SIGTERM", False, f"stopped after window {part.progress.batch}, not {k}")
    with Run(LanguageModelTask(cfg), out / "stopped", resume=True, **quiet) as resumed:
        _budgeted_fit(resumed, n - k)
    a, _ = load_checkpoint(straight.files.checkpoint("last"))
    b, _ = load_checkpoint(resumed.files.checkpoint("last"))
    names = [x for x in a if x.startswith("model.")]
    diff = max(float((a[x].double() - b[x].double()).abs().max()) for x in names)
    ok = diff == 0.0 and set(names) == {x for x in b if x.startswith("model.")}
    detail = f"{cfg.model.encoder.name}, stopped in window {k} of {n}: " + (
        "same weights bit for bit" if ok else f"weights differ by up to {diff:.3g}"
    )
    return Check("resume after SIGTERM", ok, detail, seconds=time.perf_counter() - start)


def baseline_steps(cfg: Config, device: torch.device, steps: int, vocab: int = 10_000, padding=None) -> dict:
    """``{"tiedlm": fn, "baseline": fn}``: each call trains ``steps`` SGD steps of one window (cross-entropy,
    AR/TAR, clipping) on the same Zipfian ids, tiedlm's AWD-LSTM and the reference-style one
    (:class:`~tiedlm.selfcheck.reference.ReferenceAWDLSTM`), same sizes; on a GPU each call synchronises. With
    ``padding`` (units, rows) also ``"padded"``: tiedlm's at padded shapes."""
    from ..losses import LanguageModelLoss, encoder_regularization
    from ..models import LanguageModel
    from ..models.encoders.lstm_layer import pad_fused_lstms
    from .reference import ReferenceAWDLSTM

    m, t = cfg.model, cfg.train
    torch.manual_seed(0)
    zipf = 1.0 / torch.arange(1, vocab + 1, dtype=torch.float64)
    data = torch.multinomial(zipf / zipf.sum(), (t.bptt + 1) * t.batch_size, replacement=True)
    data = data.view(t.bptt + 1, t.batch_size).to(device)
    x, y = data[:-1], data[1:]
    ours = LanguageModel(m, vocab).to(device).train()
    base = ReferenceAWDLSTM(m, vocab).to(device).train()
    loss_fn = LanguageModelLoss.from_config(cfg.loss)

    def step_of(model, loss_of):
        opt = torch.optim.SGD(model.parameters(), lr=1.0)
        state = model.init_state(t.batch_size)

        def step():
            for _ in range(steps):
                loss = loss_of(state)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), t.clip)
                opt.step()
            if device.type == "cuda":
                torch.cuda.synchronize(device)

        return step

    def loss_of(model):
        def loss(state):
            logits, _ = model(x, state)
            total, _, _ = loss_fn(logits, y, model.input_embeddings, model.output_bias)
            return total + encoder_regularization(model, cfg.loss.ar, cfg.loss.tar)

        return loss

    variants = {
        "tiedlm": step_of(ours, loss_of(ours)),
        "baseline": step_of(base, lambda state: base.loss(x, y, state, cfg.loss.ar, cfg.loss.tar)),
    }
    if padding:  # train.lstm_pad_units / lstm_pad_batch: cuDNN at padded shapes, the same model
        padded = LanguageModel(m, vocab).to(device).train()
        pad_fused_lstms(padded, *padding)
        variants["padded"] = step_of(padded, loss_of(padded))
    return variants


def baseline_check(cfg: Config, device: torch.device, sizes: Sizes, vocab: int = 10_000, padding=None) -> Check:
    """tiedlm's AWD-LSTM training step against the reference-style one (same sizes, same data, one process); with
    ``padding`` (units, rows; default :data:`PADDING` on a GPU) also tiedlm's at padded shapes."""
    from .reference import interleaved_medians

    start = time.perf_counter()
    padding = padding or (PADDING if device.type == "cuda" else None)
    m, t = cfg.model, cfg.train
    steps = baseline_steps(cfg, device, sizes.baseline_steps, vocab, padding)
    seconds = interleaved_medians(steps, sizes.baseline_blocks)
    tokens = sizes.baseline_steps * t.batch_size * t.bptt
    speed = {k: tokens / s for k, s in seconds.items()}
    ratio = speed["tiedlm"] / speed["baseline"]
    e = m.encoder
    detail = (
        f"AWD-LSTM {m.embedding_size}/{e.hidden_size}, batch {t.batch_size} x bptt {t.bptt}: baseline "
        f"{speed['baseline']:,.0f} tok/s"
    )
    extra = {"baseline_tokens_per_s": speed["baseline"]}
    if "padded" in speed:  # the fused kernel at padded shapes (train.lstm_pad_units, lstm_pad_batch)
        units, rows = padding
        detail += f"; padded to multiples of {units} units and {rows} rows {speed['padded']:,.0f} tok/s"
        extra["padded_tokens_per_s"] = speed["padded"]
    name, seconds = "AWD-LSTM step vs reference-style baseline", time.perf_counter() - start
    return Check(name, True, detail, speed["tiedlm"], ratio, peak_mib(device), seconds, extra)


PADDING = (8, 8)  # the padded variant of the baseline check on a GPU: 1150 -> 1152 units, batch 20 -> 24

GPU_TEST_FILES = ["test_fused_lstm.py", "test_cuda_graph.py", "test_transformer.py", "test_step.py", "test_hardware.py"]


def gpu_tests_check(tests: Path | None) -> Check:
    """The GPU-path test files of a checkout, run with pytest in a subprocess (on the GPU where one is)."""
    if tests is None:
        return Check("GPU tests", None, "no tests/ folder here (run selfcheck from a tiedlm checkout)")
    try:
        import pytest  # noqa: F401
    except ImportError:
        return Check("GPU tests", None, "pytest is not installed")
    start = time.perf_counter()
    files = [str(tests / f) for f in GPU_TEST_FILES if (tests / f).is_file()]
    with tempfile.TemporaryDirectory() as tmp:
        # addopts emptied: the project's own -q would hide the summary line ("N passed, M skipped")
        pytest = ["-m", "pytest", "-o", "addopts=", "-q", "-p", "no:cacheprovider", "--basetemp", tmp, *files]
        proc = subprocess.run([sys.executable, *pytest], capture_output=True, text=True, cwd=tests.parent)
    lines = [ln for ln in proc.stdout.strip().splitlines() if ln.strip()]
    last = lines[-1].strip("= ") if lines else proc.stderr.strip()[-200:]
    failed = [ln.split(" - ")[0] for ln in lines if ln.startswith("FAILED")]
    detail = f"{', '.join(GPU_TEST_FILES)}: {last}" + (f" ({'; '.join(failed[:3])})" if failed else "")
    return Check("GPU tests", proc.returncode == 0, detail, seconds=time.perf_counter() - start)
