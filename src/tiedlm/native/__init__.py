"""tiedlm's two CPU kernels in C++, compiled on first use with PyTorch's own extension builder.

- ``lstm_recurrence.cpp``: the VD-LSTM's hidden-to-hidden loop, forward and backward
  (``torch.ops.tiedlm.lstm_forward`` / ``lstm_backward``, used by :mod:`tiedlm.models.encoders.recurrence`);
- ``lm_loss.cpp``: cross-entropy and the augmented loss over the logits, a row at a time
  (``torch.ops.tiedlm.lm_loss_forward`` / ``lm_loss_backward``, used by :mod:`tiedlm.losses.fused`).

:func:`available` builds the library once per machine and checkout into ``$TIEDLM_NATIVE_DIR`` (default
``~/.cache/tiedlm/native``; a folder per Python, torch and :func:`sources_key`) with
``torch.utils.cpp_extension.load`` (g++ and ninja; ~30 s), loads it and registers the ops. Later processes
load the cached build in well under a second. Where no compiler is found, the build fails, or
``TIEDLM_NATIVE=0`` is set, it returns False, says why once on stderr (not for ``TIEDLM_NATIVE=0``), and both
callers run their Python code, which computes the same numbers more slowly.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import sys
from pathlib import Path

import torch

SOURCES = [Path(__file__).with_name(f) for f in ("lstm_recurrence.cpp", "lm_loss.cpp")]

# Vector instructions, by the capability PyTorch detected on this CPU: compiler flags, and the macros that
# select ATen's matching Vectorized<float> (as ATen's own kernels are built). The build folder is named
# after the capability, so one home folder shared by different machines never mixes builds.
_AVX512 = ["-mavx512f", "-mavx512vl", "-mavx512bw", "-mavx512dq", "-mavx2", "-mfma"]
ISA_FLAGS = {"AVX512": _AVX512, "AVX512_BF16": _AVX512, "AVX2": ["-mavx2", "-mfma"]}
VEC_CAPABILITY = {"AVX512": "AVX512", "AVX512_BF16": "AVX512", "AVX2": "AVX2"}


def compiler_flags(capability: str) -> list[str]:
    vec = VEC_CAPABILITY.get(capability, "DEFAULT")
    defines = [f"-DCPU_CAPABILITY={vec}"] + ([f"-DCPU_CAPABILITY_{vec}"] if vec != "DEFAULT" else [])
    # -fopenmp makes ATen's parallel_for (header-only) split work over threads; its GOMP calls resolve to the
    # OpenMP runtime that libtorch_cpu already loaded (nothing extra is linked)
    return ["-O3", "-fopenmp", *ISA_FLAGS.get(capability, []), *defines]


def sources_key(sources: list[Path] = SOURCES, flags: list[str] | None = None, torch_dir: str = "") -> str:
    """A short hash of the kernels' source files (where they are and what they hold), the compiler flags and the
    torch installation they link against (``torch_dir``; default: this process's).

    Two checkouts on one machine (two clones of the repository) each get a build folder of their own: the
    build (ninja's) names its sources by absolute path, so two checkouts sharing one folder would relink each
    other's build at every start. So do two virtual environments over one checkout (each links its own torch).
    An edited source gets a new folder too, instead of rebuilding over the old one."""
    import hashlib

    h = hashlib.sha256()
    h.update((torch_dir or str(Path(torch.__file__).resolve().parent)).encode() + b"\0")
    for s in sources:
        h.update(str(s.resolve()).encode() + b"\0" + s.read_bytes() + b"\0")
    h.update(" ".join(flags or []).encode())
    return h.hexdigest()[:12]


def build_dir(name: str, key: str = "") -> Path:
    root = os.environ.get("TIEDLM_NATIVE_DIR") or Path.home() / ".cache" / "tiedlm" / "native"
    version = f"py{sys.version_info.major}{sys.version_info.minor}-torch{torch.__version__}"
    return Path(root) / (f"{version}-{key}" if key else version) / name


def current_build_dir() -> Path:
    """The folder this checkout's kernels are built in, for this CPU."""
    capability = torch.backends.cpu.get_cpu_capability()
    name = f"tiedlm_native_{capability.lower()}"
    return build_dir(name, sources_key(SOURCES, compiler_flags(capability)))


def _put_ninja_on_path() -> None:
    """The ``ninja`` package's binary, for processes started as ``.venv/bin/tiedlm`` without activating the venv."""
    if shutil.which("ninja") is None:
        with contextlib.suppress(ImportError):
            import ninja

            os.environ["PATH"] = ninja.BIN_DIR + os.pathsep + os.environ.get("PATH", "")


LOCK_WAIT_S = 600.0  # a build takes 30-70 s; a holder alive for 10 minutes is stuck, and the Python code takes over


@contextlib.contextmanager
def build_lock(folder: Path, wait_s: float = LOCK_WAIT_S):
    """Hold the build folder for this process: an OS lock (``flock``) that the kernel drops when its holder dies.

    ``cpp_extension.load`` guards its build with a lock *file* (``FileBaton``) that is removed only by the process
    that made it: a process killed while holding it (Ctrl-C at the wrong moment, the OOM killer, a machine
    restarted) leaves the file behind, and every later ``load`` of that folder then waits forever, silently
    (pytorch/pytorch#189245; fixed upstream by an flock, not in the torch we pin). Every tiedlm process loads
    the kernels under this flock, so a ``lock`` file found while holding it belongs to no live tiedlm process:
    it is removed, with one line on stderr. Waits at most ``wait_s`` for another process's build, then raises
    (the caller falls back to the Python code).
    """
    import fcntl
    import time

    with open(folder / "tiedlm-build.flock", "a") as f:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise TimeoutError(
                        f"another process has been building the C++ kernels in {folder} for over {wait_s:.0f} s"
                    ) from None
                time.sleep(0.2)
        try:
            stale = folder / "lock"
            if stale.exists():
                stale.unlink(missing_ok=True)
                print(
                    f"tiedlm: removed a stale build lock left by an interrupted process ({stale})",
                    file=sys.stderr,
                    flush=True,
                )
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def loaded() -> bool:
    """Whether this process has the kernels registered (what :func:`available` does), without building them: a
    run's records say whether it trained with them (the Python code they replace rounds differently)."""
    return hasattr(torch.ops.tiedlm, "lstm_forward") and hasattr(torch.ops.tiedlm, "lm_loss_forward")


@functools.cache
def available() -> bool:
    """True once the ``torch.ops.tiedlm`` kernels are registered (building them if needed)."""
    if os.environ.get("TIEDLM_NATIVE", "1") == "0":
        return False
    try:
        from torch.utils import cpp_extension

        _put_ninja_on_path()
        capability = torch.backends.cpu.get_cpu_capability()
        name = f"tiedlm_native_{capability.lower()}"
        folder = current_build_dir()
        folder.mkdir(parents=True, exist_ok=True)
        with build_lock(folder):
            if not (folder / f"{name}.so").exists():
                print(
                    "tiedlm: compiling the C++ kernels (once per machine, about 30 s)...", file=sys.stderr, flush=True
                )
            cpp_extension.load(
                name=name,
                sources=[str(s) for s in SOURCES],
                build_directory=str(folder),
                is_python_module=False,
                extra_cflags=compiler_flags(capability),
                verbose=False,
            )
        return loaded()
    except Exception as e:  # no compiler / ninja, a failed build: the Python loop computes the same thing
        lines = str(e).strip().splitlines() or [type(e).__name__]
        first = next((ln for ln in lines if "error" in ln.lower() and ln is not lines[0]), lines[0]).strip()[:200]
        print(
            f"tiedlm: C++ kernels unavailable ({first}); using the slower Python code. "
            "Install g++ and ninja to build it, or set TIEDLM_NATIVE=0 to silence this.",
            file=sys.stderr,
        )
        return False
