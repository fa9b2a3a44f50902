"""The C++ kernels (tiedlm.native) against the Python code they replace, which stays as the fallback."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tiedlm import native
from tiedlm.losses import fused
from tiedlm.models import lstm_recurrence

needs_native = pytest.mark.skipif(shutil.which("g++") is None, reason="no C++ compiler on this machine")


@needs_native
def test_kernels_build_and_register():
    assert native.available(), (
        "the C++ kernels did not build; run python -c 'from tiedlm import native; native.available()'"
    )
    assert hasattr(torch.ops.tiedlm, "lstm_forward") and hasattr(torch.ops.tiedlm, "lm_loss_backward")


def _both(fn, monkeypatch):
    """fn() with the C++ kernels, then with the Python fallback."""
    out = [fn()]
    with monkeypatch.context() as m:
        m.setattr(native, "available", lambda: False)
        out.append(fn())
    return out


@needs_native
@pytest.mark.parametrize("blocks", [0, 3])
@pytest.mark.parametrize("masked", [False, True])
def test_recurrence_matches_python_loop(blocks, masked, monkeypatch):
    g = torch.Generator().manual_seed(1)
    lead, w_shape = ((blocks, 4), (blocks, 20, 5)) if blocks else ((4,), (20, 5))
    x = torch.randn(7, *lead, 20, generator=g, requires_grad=True)
    h0, c0 = torch.randn(*lead, 5, generator=g), torch.randn(*lead, 5, generator=g)
    w = (torch.randn(*w_shape, generator=g) * 0.5).requires_grad_()
    mask = (torch.rand(*lead, 5, generator=g) > 0.3).float() / 0.7 if masked else None
    weights = torch.randn(7, *lead, 5, generator=g)

    def run():
        hs, hT, cT = lstm_recurrence(x, h0, c0, w, mask)
        loss = (hs * weights).sum() + hT.sum() + cT.pow(2).sum()
        return (hs, hT, cT, *torch.autograd.grad(loss, (x, w)))

    for a, b in zip(*_both(run, monkeypatch)):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)


@needs_native
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize(
    "with_ce,augmented,target_grad,shifted",
    [
        (True, False, False, False),
        (True, True, False, False),
        (False, True, False, False),
        (True, True, False, True),
        (True, True, True, True),
    ],
)  # shifted: loss.aug_bias = false, J_aug on z − b
def test_loss_matches_python_chunks(dtype, with_ce, augmented, target_grad, shifted, monkeypatch):
    """Values and gradients (z; with a shift b; with target_grad L) of the C++ kernel and the Python chunks."""
    g = torch.Generator().manual_seed(2)
    logits = (torch.randn(150, 301, generator=g) * 4).to(dtype)  # 301: not a multiple of the vector width
    targets = torch.randint(0, 301, (150,), generator=g)  # 150 rows: more than one block of rows
    emb, bias = torch.randn(301, 8, generator=g), torch.randn(301, generator=g)

    def run():
        z, b, e = logits.clone().requires_grad_(), bias.clone().requires_grad_(), emb.clone().requires_grad_()
        ce, aug = fused.fused_lm_loss(
            z, targets, e if augmented else None, 3.0, with_ce, target_grad=target_grad, shift=b if shifted else None
        )
        (0.8 * ce + 1.7 * aug).backward()
        return [ce, aug, z.grad.float()] + [b.grad] * shifted + [e.grad] * target_grad

    native_out, python_out = _both(run, monkeypatch)
    tol = {"atol": 1e-6, "rtol": 1e-5} if dtype == torch.float32 else {"atol": 1e-4, "rtol": 1e-2}
    for a, b in zip(native_out, python_out, strict=True):
        torch.testing.assert_close(a, b, **tol)
    assert all(grad.abs().sum() > 0 for grad in native_out[2:])


@needs_native
def test_shift_gradient_is_the_same_on_one_and_two_threads():
    """∂/∂shift is summed over fixed row blocks, so the thread count does not change a bit of it."""
    g = torch.Generator().manual_seed(6)
    logits, targets = torch.randn(333, 257, generator=g) * 3, torch.randint(0, 257, (333,), generator=g)
    emb, bias = torch.randn(257, 8, generator=g), torch.randn(257, generator=g)
    previous, grads = torch.get_num_threads(), []
    try:
        for threads in (1, 2):
            torch.set_num_threads(threads)
            b = bias.clone().requires_grad_()
            _, aug = fused.fused_lm_loss(logits, targets, emb, 3.0, with_ce=False, shift=b)
            grads.append(torch.autograd.grad(aug, b)[0])
    finally:
        torch.set_num_threads(previous)
    assert torch.equal(*grads) and grads[0].abs().sum() > 0


def test_unbuildable_kernels_fall_back_with_one_line(tmp_path):
    """A build folder that cannot be made: one line on stderr, and the model still trains (Python code)."""
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    code = (
        "import torch; from tiedlm import native; from tiedlm.models import lstm_recurrence\n"
        "x = torch.randn(3, 2, 8, requires_grad=True); z = torch.zeros(2, 2)\n"
        "hs, _, _ = lstm_recurrence(x, z, z, torch.randn(8, 2)); hs.sum().backward()\n"
        "print(native.available(), x.grad.abs().sum().item() > 0)"
    )
    env = {**os.environ, "TIEDLM_NATIVE_DIR": str(blocker)}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["False", "True"]
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "C++ kernels unavailable" in lines[0] and "TIEDLM_NATIVE=0" in lines[0]


def test_switched_off_kernels_are_silent():
    code = "from tiedlm import native; print(native.available())"
    r = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "TIEDLM_NATIVE": "0"},
    )
    assert (r.stdout.strip(), r.stderr) == ("False", "")


@needs_native
def test_threaded_recurrence_keeps_the_callers_modes(monkeypatch):
    """The rows are split over threads; workers must see the caller's grad / inference mode (thread-local)."""
    previous = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        g = torch.Generator().manual_seed(4)
        x, z, w = torch.randn(5, 6, 12, generator=g), torch.zeros(6, 3), torch.randn(12, 3, generator=g)
        with torch.inference_mode():
            fast, slow = _both(lambda: lstm_recurrence(x, z, z, w)[0], monkeypatch)
        torch.testing.assert_close(fast, slow)
        x.requires_grad_()
        grads = _both(lambda: torch.autograd.grad(lstm_recurrence(x, z, z, w)[0].sum(), x)[0], monkeypatch)
        torch.testing.assert_close(*grads)
    finally:
        torch.set_num_threads(previous)


@needs_native
def test_a_stale_build_lock_left_by_a_killed_process_does_not_hang_the_next_run(tmp_path):
    """pytorch/pytorch#189245: ``cpp_extension.load`` waits forever on a ``lock`` file that a killed process left.

    The built folder is copied (no rebuild), a 0-byte ``lock`` is put in it as a killed process leaves it, and a new
    process must load the kernels, remove the file and say so in one line, well within its time limit.
    """
    assert native.available()
    built = native.current_build_dir()
    root = tmp_path / "native"
    copy = root / built.relative_to(built.parents[1])
    shutil.copytree(built, copy, ignore=shutil.ignore_patterns("lock", "*.flock"))
    (copy / "lock").touch()
    code = "from tiedlm import native; print(native.available())"
    env = {**os.environ, "TIEDLM_NATIVE_DIR": str(root)}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=240)
    assert r.stdout.strip() == "True", r.stderr
    assert not (copy / "lock").exists()
    assert [ln for ln in r.stderr.splitlines() if "stale build lock" in ln] == [
        f"tiedlm: removed a stale build lock left by an interrupted process ({copy / 'lock'})"
    ]


_HOLD = (
    "import sys, time; from pathlib import Path; from tiedlm import native\n"
    "with native.build_lock(Path(sys.argv[1])):\n"
    "    print('held', flush=True); time.sleep(60)\n"
)


def _holder(folder):
    p = subprocess.Popen([sys.executable, "-c", _HOLD, str(folder)], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "held"
    return p


def test_the_build_lock_excludes_a_live_builder_and_frees_itself_when_its_holder_is_killed(tmp_path):
    holder = _holder(tmp_path)
    try:
        (tmp_path / "lock").touch()  # the live holder's own torch lock file: left alone while it lives
        with pytest.raises(TimeoutError, match="building the C\\+\\+ kernels"):
            with native.build_lock(tmp_path, wait_s=0.5):
                pass
        assert (tmp_path / "lock").exists()
    finally:
        holder.kill()
        holder.wait()
    with native.build_lock(tmp_path, wait_s=5):  # SIGKILL released the flock; its lock file is now stale
        assert not (tmp_path / "lock").exists()


def test_each_checkout_and_each_source_version_builds_in_a_folder_of_its_own(tmp_path):
    """Two checkouts (same sources at other paths) must not share a build folder, whose ninja file names its
    sources by path (they relinked each other's build at every start); an edited source gets a new folder;
    the same checkout keeps its folder."""
    flags = native.compiler_flags("AVX2")
    here = native.sources_key(native.SOURCES, flags)
    assert here == native.sources_key(list(native.SOURCES), flags)
    other = []
    for s in native.SOURCES:
        (tmp_path / s.name).write_bytes(s.read_bytes())
        other.append(tmp_path / s.name)
    assert native.sources_key(other, flags) != here
    edited = native.sources_key(other, flags)
    other[0].write_bytes(other[0].read_bytes() + b"\n// edited\n")
    assert native.sources_key(other, flags) != edited
    assert native.sources_key(native.SOURCES, native.compiler_flags("DEFAULT")) != here
    # two virtual environments over one checkout: each links its own torch, so each has its own folder
    assert native.sources_key(native.SOURCES, flags, torch_dir=str(Path(torch.__file__).resolve().parent)) == here
    assert native.sources_key(native.SOURCES, flags, torch_dir="/other/venv/site-packages/torch") != here
    assert native.current_build_dir().parent.name.endswith(
        "-" + native.sources_key(native.SOURCES, native.compiler_flags(torch.backends.cpu.get_cpu_capability()))
    )
