"""The benchmark scripts and tools keep up with the library: every name they import from tiedlm exists (they import
most of it inside functions, where a refactor breaks them only when they run), and the CPU benchmarks built on the
language model's own training step run."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _tiedlm_imports(path: Path):
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "tiedlm":
            yield node.module, [a.name for a in node.names]


@pytest.mark.parametrize(
    "path", sorted([*ROOT.glob("benchmarks/*.py"), *ROOT.glob("tools/*.py")]), ids=lambda p: p.name
)
def test_every_name_a_script_imports_from_tiedlm_exists(path):
    for module, names in _tiedlm_imports(path):
        loaded = importlib.import_module(module)
        for name in names:
            found = hasattr(loaded, name) or importlib.util.find_spec(f"{module}.{name}") is not None
            assert found, f"{path.name} imports {name} from {module}, which has no such name"


@pytest.mark.slow
def test_step_hash_trains_the_task_step_to_the_same_bits_twice(shared_data):
    """``benchmarks/step_hash.py``: two fresh processes of one setting take the language model's own steps to one
    hash (a second thread count is the hash's own business: one host may differ there)."""
    proc = subprocess.run(
        [sys.executable, "benchmarks/step_hash.py", "ptb-awd-tied-budget", "--threads", "1", "1", "--steps", "2"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    hashes = {line.split("| weights ")[1].split(" |")[0] for line in lines}
    assert len(lines) == 2 and len(hashes) == 1, proc.stdout
