"""``tiedlm selfcheck``: does tiedlm work on this machine, and how fast?

One command for a user (and for a developer with a GPU at hand) that trains every encoder (VD-LSTM, AWD-LSTM,
predefined-sparse AWD-LSTM, Transformer) with the main output layers (tied, DRILL) and the augmented loss for
a few windows, eagerly and, on a GPU, from a CUDA graph (``train.cuda_graph = "on"``); stops one run with a
real SIGTERM and checks that its resume is exact; times the AWD-LSTM step against the reference code's way
of writing it; on a GPU runs the GPU-path tests of a checkout; and prints one table (what ran, pass or fail,
tokens/s, ratio to the baseline, peak memory) under a line that describes the device.

The text is PTB's (from ``--data-dir``, the ``TIEDLM_DATA`` mirror or the download cache: never downloaded
here), or, where PTB is not on this machine, a Zipfian text generated on the spot (said in the report).
``--quick`` on the CPU shrinks the models (embedding and hidden size 32, batch 8 × 16) to run in under a minute.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import torch

from .. import __version__
from ..errors import DataError, TiedlmError, UsageError
from ..runtime import cpu_model, numerics_hash, set_threads, usable_cpus
from ..tasks.lm.config import Config
from .checks import Check, baseline_check, gpu_tests_check, resume_check, sizes_for, train_check

__all__ = ["Check", "MODELS", "describe_device", "format_report", "run_selfcheck"]

# (row name, preset): every encoder, the main output layers, the augmented loss with gradients through ỹ
MODELS = [
    ("vd-lstm + tied (RE)", "ptb-small-re"),
    ("vd-lstm + REAL (AL, target_grad)", "ptb-small-real"),
    ("awd-lstm + tied", "ptb-awd-tied"),
    ("awd-lstm + DRILL", "ptb-awd-drill"),
    ("sparse awd-lstm + tied", "ptb-awd-sparse"),
    ("transformer + tied", "ptb-transformer-tied"),
    ("transformer + DRILL", "ptb-transformer-drill"),
]
# on the CPU the AWD-LSTM rows use the presets' CPU-budget sizes
CPU_PRESETS = {p: f"{p}-budget" for p in ("ptb-awd-tied", "ptb-awd-drill", "ptb-awd-sparse")}


def describe_device(device: torch.device) -> str:
    if device.type == "cuda":
        p = torch.cuda.get_device_properties(device)
        what = f"{p.name}, {p.total_memory / 2**30:.0f} GiB, CUDA {torch.version.cuda}"
        if torch.backends.cudnn.is_available():
            what += f", cuDNN {torch.backends.cudnn.version()}"
    else:
        cores = len(usable_cpus())
        n = torch.get_num_threads()
        what = f"{cpu_model()}, {cores} cores, {n} thread{'s' * (n != 1)}, "
        what += f"vector unit {torch.backends.cpu.get_cpu_capability()}"
    what += f", numerics {numerics_hash(device)}"  # hosts with one hash should repeat a run to the bit
    return f"{device.type}: {what} | torch {torch.__version__} | tiedlm {__version__}"


def _corpus(data_dir: str, folder: Path) -> tuple[str, str]:
    """(data.name for the runs, what the report says): PTB where it is on this machine, else a generated text."""
    from ..data.corpus import resolve_corpus_dir

    try:
        return "ptb", f"PTB ({resolve_corpus_dir('ptb', data_dir, download=False)})"
    except (DataError, UsageError):
        pass
    gen = torch.Generator().manual_seed(0)
    words = [f"w{i}" for i in range(2000)]
    zipf = 1.0 / torch.arange(1, len(words) + 1, dtype=torch.float64)
    folder.mkdir(parents=True, exist_ok=True)
    for split, n in (("train", 120_000), ("valid", 20_000), ("test", 10_000)):
        ids = torch.multinomial(zipf, n, replacement=True, generator=gen).tolist()
        lines = [" ".join(words[i] for i in ids[a : a + 20]) for a in range(0, n, 20)]
        (folder / f"{split}.txt").write_text("\n".join(lines) + "\n")
    return str(folder), "a generated Zipfian text (2,000 words; PTB is not on this machine)"


def _config(preset: str, data: str, device: str, sizes, threads: int, **extra: str) -> Config:
    overrides = {
        "data.name": data,
        "train.device": device,
        "train.threads": str(threads),
        "train.epochs": "50",
        "train.warmup_steps": "0",  # a few windows of a warm-up would barely move the Transformer's weights
        **sizes.shrink,
        **extra,
    }
    return Config.load(preset).with_overrides([f"{k}={v}" for k, v in overrides.items()])


def run_selfcheck(
    device: str = "cpu",
    quick: bool = False,
    data_dir: str = "",
    threads: int = 0,
    tests: Path | None = None,
    log=print,
) -> tuple[list[Check], dict]:
    """Run every check; returns the rows and the report's header facts (device, corpus, settings)."""
    if device == "cuda" and not torch.cuda.is_available():
        raise UsageError("--device cuda but no CUDA GPU is visible here; run --device cpu")
    dev = torch.device(device)
    sizes = sizes_for(dev.type, quick)
    checks: list[Check] = []
    with tempfile.TemporaryDirectory(prefix="tiedlm-selfcheck-") as tmp:
        root = Path(tmp)
        data, corpus = _corpus(data_dir, root / "corpus")
        if dev.type == "cpu":  # the checks' thread count, so that the header names it (and its numerics hash)
            set_threads(threads)
        header = {"device": describe_device(dev), "corpus": corpus, "quick": quick, "tiedlm": __version__}
        log(header["device"])
        log(f"text: {corpus}")
        modes = ["off", "on"] if dev.type == "cuda" else ["off"]

        def add(row: str, check) -> None:
            checks.append(_guarded(row, check))
            log(_line(checks[-1]))

        def config(preset: str, **extra: str) -> Config:
            return _config(preset, data, device, sizes, threads, **extra)

        for name, preset in MODELS:
            preset = CPU_PRESETS.get(preset, preset) if dev.type == "cpu" else preset
            for mode in modes:
                row, out = f"train {name}" + (" [graph]" if mode == "on" else ""), root / f"{preset}-{mode}"
                add(row, lambda: train_check(row, config(preset, **{"train.cuda_graph": mode}), out, sizes))
        awd = CPU_PRESETS["ptb-awd-tied"] if dev.type == "cpu" else "ptb-awd-tied"
        if dev.type == "cuda":  # the opt-in fp16 path with loss scaling (train.precision = "fp16"; eager)
            row = "train awd-lstm + tied [fp16]"
            add(row, lambda: train_check(row, config(awd, **{"train.precision": "fp16"}), root / "fp16", sizes))
        add("resume after SIGTERM", lambda: resume_check(config(awd), root / "resume", sizes))
        add("AWD-LSTM step vs reference-style baseline", lambda: baseline_check(config(awd), dev, sizes))
    if dev.type == "cuda":
        add("GPU tests", lambda: gpu_tests_check(tests))
    return checks, header


def _guarded(name: str, run) -> Check:
    """A check that raised is a failed row with the error's first line, and the other checks still run."""
    try:
        return run()
    except (TiedlmError, RuntimeError, ValueError) as e:
        first = (str(e).strip().splitlines() or [type(e).__name__])[0][:300]
        return Check(name, False, f"{type(e).__name__}: {first}")


def _line(c: Check) -> str:
    return f"  {c.status:4}  {c.name}: {c.detail}"


def format_report(checks: list[Check], header: dict) -> str:
    """One table: what ran, pass/fail, tokens/s, ratio to the baseline, peak memory, seconds; then details."""
    mem = "peak GPU MiB" if header["device"].startswith("cuda") else "peak RSS MiB"
    rows = [("check", "result", "tokens/s", "vs baseline", mem, "s")]
    for c in checks:
        cells = ((c.tokens_per_s, "{:,.0f}"), (c.ratio, "{:.2f}x"), (c.peak_mib, "{:,.0f}"), (c.seconds, "{:.1f}"))
        rows.append((c.name, c.status, *(form.format(value) if value else "" for value, form in cells)))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    table = [
        "  ".join(cell.ljust(w) if i < 2 else cell.rjust(w) for i, (cell, w) in enumerate(zip(r, widths))) for r in rows
    ]
    table.insert(1, "  ".join("-" * w for w in widths))
    failed = sum(c.ok is False for c in checks)
    passed = sum(c.ok is True for c in checks)
    skipped = sum(c.ok is None for c in checks)
    lines = [f"tiedlm selfcheck | {header['device']}", f"text: {header['corpus']}", "", *table, ""]
    lines += [f"{c.name}: {c.detail}" for c in checks if c.detail]
    skip = f" ({skipped} not run here)" if skipped else ""
    lines += ["", f"selfcheck result: {passed} of {len(checks)} checks passed{skip}, {failed} failed"]
    return "\n".join(lines)
