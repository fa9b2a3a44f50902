"""Every Python block of the README and of docs/*.md runs as written (CONTRIBUTING's have their own test).

The blocks of one page run in order in one namespace, in a fresh process, from a folder that holds what they
name: ``runs/ptb-small-real``, a run of that preset trained for a few windows on PTB. A block that fails
fails the test with the page's name (docs/api.md's second block once used an ``h`` it never defined)."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def _blocks(page: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", page.read_text(), re.S)


def test_the_pages_have_python_examples():
    assert len(_blocks(ROOT / "README.md")) >= 1 and len(_blocks(ROOT / "docs" / "api.md")) >= 3


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    from tiedlm.errors import RunInterrupted
    from tiedlm.tasks.lm.config import Config
    from tiedlm.tasks.lm.task import LanguageModelTask
    from tiedlm.train import run as run_task

    folder = tmp_path_factory.mktemp("docs")
    run = folder / "runs" / "ptb-small-real"
    sets = ["train.epochs=1", "train.threads=1", "train.device=cpu", "train.precision=fp32"]
    task = LanguageModelTask(Config.load("ptb-small-real").with_overrides(sets))
    with pytest.raises(RunInterrupted):
        run_task(
            task, run, progress=False, log=lambda *a: None, budget=2
        )  # two windows: a run folder with its config, vocabulary and a last checkpoint
    return folder


@pytest.mark.slow
@pytest.mark.parametrize("page", [p for p in PAGES if _blocks(p)], ids=lambda p: str(p.relative_to(ROOT)))
def test_python_blocks_run_as_written(page, workdir, shared_data):
    code = "\n\n".join(_blocks(page))
    out = subprocess.run([sys.executable, "-c", code], cwd=workdir, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, f"{page.name}: {out.stderr[-2000:]}"
