"""`tiedlm --help`, `tiedlm presets` and argument errors answer without loading PyTorch or SciPy (they took ~4 s
when every command imported them); the C++ kernels are built before a run's clock starts."""

import subprocess
import sys

import pytest

CHECK = """
import sys
from tiedlm.cli import main
try:
    main({argv!r})
except SystemExit:
    pass
heavy = sorted(m for m in ("torch", "scipy", "numpy", "matplotlib") if m in sys.modules)
print("HEAVY", heavy, file=sys.stderr)
"""


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        ["presets"],
        ["train", "--help"],
        ["evaluate", "--help"],
        ["predict", "x", "--top", "0"],
        ["tag", "train", "--help"],
    ],
)
def test_light_commands_do_not_import_torch(argv):
    out = subprocess.run([sys.executable, "-c", CHECK.format(argv=argv)], capture_output=True, text=True, timeout=120)
    assert "HEAVY []" in out.stderr, out.stderr[-2000:]


def test_the_kernels_are_built_before_the_first_epoch(tiny_corpus, tmp_path, monkeypatch):
    """The language model's setup builds (or loads) the native kernels: epoch 1's clock never includes a compilation."""
    from tiedlm import native
    from tiedlm.tasks.lm.config import Config

    from conftest import LMRun, tiny_overrides

    calls = []
    monkeypatch.setattr(native, "available", lambda: calls.append(1) or False)
    cfg = Config.load("ptb-small-vd").with_overrides(tiny_overrides(tiny_corpus))
    LMRun(cfg, tmp_path / "run").run.__exit__(None, None, None)
    assert calls == [1]
