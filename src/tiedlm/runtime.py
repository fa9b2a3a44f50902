"""Device, precision and thread settings."""

from __future__ import annotations

import contextlib
import functools
import os
import platform
import time
from pathlib import Path

import torch

from .errors import UsageError


def resolve_device(name: str, option: str = "train.device") -> torch.device:
    """The device ``name`` (``auto``: a GPU where one is visible); ``option`` names the setting in the error for a
    GPU that is not here (``--device`` for the commands that take one)."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        fix = "--set train.device=cpu (or auto)" if option == "train.device" else f"{option} cpu"
        raise UsageError(f"{option} = {name!r} but no CUDA GPU is visible; use {fix}")
    return torch.device(name)


def run_device(saved: str) -> torch.device:
    """The device to evaluate a trained run on: the one it trained on where that is here, else the CPU (a run
    trained on a GPU still evaluates on a machine without one)."""
    if saved.startswith("cuda") and not torch.cuda.is_available():
        return torch.device("cpu")
    return resolve_device(saved)


def cpu_model(cpuinfo: str | Path = "/proc/cpuinfo") -> str:
    """The CPU as a run records it: the model name with its family and model numbers where Linux reports them
    (``/proc/cpuinfo``), e.g. ``AMD EPYC (family 23 model 1)``, else ``platform.processor()`` or the architecture.
    ``platform.processor()`` alone is ``x86_64`` on Linux, which cannot tell two hosts apart; the numbers can where
    a hypervisor shows only a generic name. Two CPU models may block the BLAS kernels' sums differently, so the same
    run (commit, seed, threads) is bit-identical on one CPU model, not necessarily across two."""
    fields: dict[str, str] = {}
    with contextlib.suppress(OSError, UnicodeDecodeError):
        for line in Path(cpuinfo).read_text().splitlines():
            if not line.strip():
                break  # the first processor's block is enough
            key, _, value = line.partition(":")
            fields.setdefault(key.strip(), value.strip())
    name = fields.get("model name") or platform.processor() or platform.machine() or "unknown CPU"
    numbers = [f"{key.split()[-1]} {fields[key]}" for key in ("cpu family", "model") if fields.get(key)]
    if numbers:
        name += f" ({' '.join(numbers)})"
    return name


def hardware(device: torch.device) -> str:
    """What trained a run, for its records: the GPU's name on CUDA, else :func:`cpu_model` and the vector unit
    PyTorch's CPU kernels use (``AVX2``, ``AVX512``)."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"{cpu_model()}, {torch.backends.cpu.get_cpu_capability()}"


def host_record(device: torch.device) -> dict:
    """What a run's records say of where it trained (each metrics line, each summary): ``machine``
    (:func:`hardware`), ``numerics`` (:func:`numerics_hash`) and, on a CPU, ``native_kernels``: whether
    the process had tiedlm's C++ kernels (:mod:`tiedlm.native`; without a compiler the Python code that stands in
    for them gives the same numbers to rounding, not to the bit)."""
    record = {"machine": hardware(device), "numerics": numerics_hash(device)}
    if device.type == "cpu":
        from . import native

        record["native_kernels"] = native.loaded()
    return record


def numerics_hash(device: torch.device | str = "cpu") -> str:
    """A hash of what this device's kernels compute for fixed inputs, in the shapes a word-level LM trains with
    (fp32): the output layer's matmul over a 10k vocabulary and its transposed (gradient) form, an LSTM's gate
    matmul, log-softmax, sigmoid and tanh, at the threads set now. Two hosts (CPU models, library builds, thread
    counts) with the same hash run these kernels to the same bits, so a run trained again there should
    repeat its numbers to the last digit; where the hashes differ, numbers that drift apart may be the
    kernels' rounding, not a bug. About 0.1-0.3 s on a CPU, once per process and thread count; 16 hex digits."""
    return _numerics_hash(str(torch.device(device)), torch.get_num_threads())


@functools.cache
def _numerics_hash(device: str, threads: int) -> str:
    import hashlib

    g = torch.Generator().manual_seed(0)

    def draw(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=g).to(device)

    h, words, gates, table = draw(350, 200), draw(200, 10000), draw(400, 1600), draw(350, 400)
    logits = h @ words / 14.0
    outputs = [
        logits,
        logits.log_softmax(-1),
        words @ logits.T,
        table @ gates,
        torch.sigmoid(logits),
        torch.tanh(logits),
    ]
    digest = hashlib.sha256()
    for out in outputs:
        digest.update(out.detach().float().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()[:16]


def cpu_supports_bf16() -> bool:
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


def resolve_precision(name: str, device: torch.device) -> str:
    if name != "auto":
        return name
    if device.type == "cuda":
        return "bf16" if torch.cuda.is_bf16_supported() else "fp32"
    return "bf16" if cpu_supports_bf16() else "fp32"


def run_precision(saved: str, device: torch.device, requested: str | None = None) -> str:
    """The precision to run a trained model in: ``requested`` if given, else the run's own, except that a run
    trained in bf16 (on a GPU or an AVX512-BF16 CPU) runs in fp32 on a device without bf16, where bf16 matmuls
    are emulated and slow, and one trained in fp16 (on a GPU) runs in fp32 off a GPU."""
    if requested:
        return resolve_precision(requested, device)
    precision = resolve_precision(saved, device)
    if precision == "fp16" and device.type != "cuda":
        return "fp32"
    return "fp32" if precision == "bf16" and resolve_precision("auto", device) != "bf16" else precision


HALF = {"bf16": torch.bfloat16, "fp16": torch.float16}  # the autocast precisions and their dtypes


def autocast(device: torch.device, precision: str, cache_enabled: bool = True):
    """bf16 (or the language model's fp16) autocast for matmuls (weights stay fp32; softmax and losses are computed
    in fp32; fp16 needs loss scaling: :func:`tiedlm.train.step.scaled_update`).

    ``cache_enabled=False`` for code captured in a CUDA graph (the cast weights must be recomputed at every replay).
    """
    if precision in HALF:
        return torch.autocast(device_type=device.type, dtype=HALF[precision], cache_enabled=cache_enabled)
    return contextlib.nullcontext()


def keep_freed_memory(limit: int = 32 << 20) -> bool:
    """Let glibc's malloc serve allocations up to ``limit`` bytes from its heap and keep what is freed there.

    By default glibc maps every large block (the (N, |V|) logits and their gradient, 14–28 MB for a small
    model) fresh from the kernel and unmaps it when freed, so each training step touches thousands of new
    pages: ~3,000 page faults a step for the small PTB model, 5–10% of its time on this CPU. With a fixed mmap
    threshold (32 MiB is glibc's maximum) and no trimming, the same memory is reused step after step. The
    process keeps its peak heap, which a training run reaches in its first step anyway. Returns False where
    the C library is not glibc.
    """
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6")
        M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
        return bool(libc.mallopt(M_MMAP_THRESHOLD, limit)) and bool(libc.mallopt(M_TRIM_THRESHOLD, 1 << 30))
    except (OSError, AttributeError):
        return False


def usable_cpus() -> set[int]:
    """The cores this process may run on: its affinity where the OS has one (Linux), else every core (macOS,
    Windows)."""
    if hasattr(os, "sched_getaffinity"):
        return os.sched_getaffinity(0)
    return set(range(os.cpu_count() or 1))


def _cpu_times(cpus: set[int]) -> tuple[float, float]:
    """(busy, total) jiffies of ``cpus`` from /proc/stat (Linux); (0, 0) where it cannot be read."""
    busy = total = 0.0
    try:
        with open("/proc/stat") as f:
            for line in f:
                name, *fields = line.split()
                if not (name.startswith("cpu") and name[3:].isdigit() and int(name[3:]) in cpus):
                    continue
                values = [float(v) for v in fields[:8]]  # user nice system idle iowait irq softirq steal
                total += sum(values)
                busy += sum(values) - values[3] - values[4]
    except OSError:
        return 0.0, 0.0
    return busy, total


class OtherLoad:
    """How many of the cores this process may run on other processes keep busy, from now to :meth:`cores`: the
    busy share of those cores (/proc/stat) less this process's own CPU time over the same wall time, so that it
    measures the others however hard this process works meanwhile (a load average lags by minutes and counts this
    process and whatever ran before it)."""

    def __init__(self):
        self.cpus = usable_cpus()
        self.start = (*_cpu_times(self.cpus), _own_cpu_seconds(), time.perf_counter())

    def cores(self) -> float | None:
        """Other processes' busy cores since this was made; None where /proc/stat cannot be read (not Linux)."""
        b0, t0, own0, wall0 = self.start
        b1, t1 = _cpu_times(self.cpus)
        if t1 <= t0:
            return None
        own = (_own_cpu_seconds() - own0) / max(time.perf_counter() - wall0, 1e-9)
        return max(0.0, len(self.cpus) * (b1 - b0) / (t1 - t0) - own)


def _own_cpu_seconds() -> float:
    t = os.times()
    return t.user + t.system


def busy_cores(interval: float = 0.2) -> float:
    """How many of the cores this process may run on other processes kept busy over ``interval`` seconds
    (:class:`OtherLoad`). 0.0 where /proc/stat cannot be read."""
    load = OtherLoad()
    time.sleep(interval)
    return load.cores() or 0.0


def default_threads(log=None) -> int:
    """The thread count for ``threads = 0``: the cores this process may run on that other processes leave free.

    On a busy machine an OpenMP thread that shares a core with another busy process is descheduled, and its
    partner threads wait for it at every parallel region: on the 2-core machine, 2 threads beside one spinning
    process trained the small VD-LSTM at 2,893 tok/s against 4,638 with 1 thread (docs/performance.md, "A busy
    machine"). Taking only the free cores avoids that;
    ``log`` (if given) says so when other processes hold cores. ``TIEDLM_THREADS=N`` in the environment fixes it
    at N instead, whatever the load (a test suite or a benchmark whose numbers must not depend on it).
    """
    fixed = os.environ.get("TIEDLM_THREADS", "")
    if fixed.isdigit() and int(fixed) > 0:
        return int(fixed)
    cores = len(usable_cpus())
    busy = min(cores, round(busy_cores()))
    n = max(1, cores - busy)
    if busy and log is not None:
        log(
            f"tiedlm: {busy} of the {cores} cores are busy with other processes: using {n} thread"
            f"{'s' if n > 1 else ''} for the whole run (a resumed run keeps its count, so that it repeats the "
            f"same numbers); --threads {cores} (or train.threads) sets another, also when resuming"
        )
    return n


def resumed_threads_note(recorded: int, asked: int | None) -> str:
    """What a resumed run (or dynamic evaluation) says of its thread count. ``recorded``: the count it started
    with, which it keeps (0: none recorded, a run from before they were); ``asked``: ``--threads`` (None: not
    given). The thread count moves the last bits of a sum, and a computation that feeds its results back (SGD,
    dynamic evaluation) carries them on: only the count it started with repeats an uninterrupted run's numbers,
    whatever else runs on the machine at either moment."""
    if recorded <= 0:
        return ""
    if asked is None or asked == recorded:
        return f"resuming at the {recorded} thread{'s' * (recorded != 1)} it started with, as an uninterrupted run"
    return (
        f"--threads {asked}: it started at {recorded}, so its numbers will differ from an uninterrupted run's "
        "(leave --threads out to keep them)"
    )


def set_threads(threads: int, log=None) -> int:
    """Use ``threads`` intra-op threads (0: the free cores, :func:`default_threads`), flush denormals, keep freed
    memory.

    Flushing subnormal floats to zero matters for speed: late in training, and whenever the augmented
    loss is on, gradients such as (ŷ − ỹ)/τ produce subnormal values whose arithmetic is ~100x slower on
    x86 CPUs (unflushed, they made a step with the augmented loss ~1.7x slower). Values below
    1e-38 carry no information for SGD.
    """
    n = threads or default_threads(log)
    cores = len(usable_cpus())
    if n > cores and log is not None:
        log(f"tiedlm: {n} threads on {cores} cores: more threads than cores train slower, not faster")
    torch.set_num_threads(n)
    torch.set_flush_denormal(True)
    keep_freed_memory()
    return n
