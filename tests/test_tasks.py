"""The task registry (tiedlm.registry.tasks): every task is declared once, on its settings class, naming its Task
class; no code outside the registries branches on a task's or a component's name; and a run folder of each task
written in an older layout (tests/fixtures/folders), rewritten once by tools/migrate_runs.py, evaluates and
resumes."""

import json
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tiedlm.cli import main
from tiedlm.config import SectionedConfig
from tiedlm.registry import tasks
from tiedlm.train.loop import Task

from conftest import write_tiny_corpus, write_tiny_parallel, write_tiny_treebank

SRC = Path(__file__).resolve().parent.parent / "src" / "tiedlm"
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "folders"
TASKS = tasks()
NAMES = "|".join(sorted({*TASKS, "tagger", "translator"}))


def test_each_task_is_declared_once_on_its_settings_class():
    """The declaration is the only place a task's identity is written: the settings class carries it, the Task
    class reads it through its settings, and neither base class has a task's defaults."""
    assert set(TASKS) == {"lm", "tag", "translate", "subspace"}
    for name, info in TASKS.items():
        config, task = info.config, info.task_class()
        assert issubclass(config, SectionedConfig) and issubclass(task, Task), name
        assert config.task_info is info and info.name == name, name
        assert not any(hasattr(task, a) for a in ("kind", "label")) and "title" not in vars(task), name
        assert info.command == "tiedlm " + " ".join(info.train), name
    assert not hasattr(SectionedConfig, "task_info") and not hasattr(SectionedConfig, "kind")


def test_no_code_outside_the_registries_branches_on_a_task_or_component_name():
    """`task == "lm"`, `kind != "tagger"`, `output.name == "tied"`: a task or component answers for itself through
    its registry entry (tiedlm.tasks.TASKS, the component registries), so a new one is one module and one entry."""
    task_names = re.compile(rf"""[!=]=\s*["']({NAMES})["']|["']({NAMES})["']\s*[!=]=""")
    component = re.compile(r"""(\.name|\boutput|\bencoder|\boptimizer)\s*[!=]=\s*["']""")
    found = []
    for path in SRC.rglob("*.py"):
        if path.name == "registry.py" or path == SRC / "tasks" / "__init__.py":
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if task_names.search(line) or component.search(line):
                found.append(f"{path.relative_to(SRC)}:{n}: {line.strip()}")
    assert not found, "\n".join(found)


@pytest.fixture
def fixture_runs(tmp_path):
    """The fixture run folders, copied, with their data written again where their configs point."""
    data = tmp_path / "data"
    write_tiny_corpus(data / "corpus")
    write_tiny_treebank(data / "tb", 40)
    write_tiny_parallel(data)
    runs = tmp_path / "runs"
    shutil.copytree(FIXTURES, runs)
    for config in runs.rglob("config.toml"):
        config.write_text(config.read_text().replace("/tmp/fx-data", str(data)))
    migrate = subprocess.run(
        [sys.executable, str(SRC.parents[1] / "tools" / "migrate_runs.py"), str(runs)], capture_output=True, text=True
    )
    assert migrate.returncode == 0 and "4 run folder(s) rewritten" in migrate.stderr, migrate.stderr[-2000:]
    for task, folder in (("lm", "lm"), ("tag", "tagger"), ("translate", "translator"), ("subspace", "subspace")):
        assert tomllib.loads((runs / folder / "config.toml").read_text())["task"] == task
    return runs


def test_a_run_folder_in_an_older_layout_is_refused_with_the_migration(fixture_runs, tmp_path, capsys):
    old = tmp_path / "old"
    shutil.copytree(FIXTURES / "lm", old)
    assert main(["train", "--resume", str(old), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "older tiedlm" in err and f"tools/migrate_runs.py {old}" in err and len(err.splitlines()) == 1, err


@pytest.mark.parametrize("words", [["train"], ["tag", "train"], ["translate", "train"]])
def test_a_damaged_config_is_named_as_damaged_not_as_older(words, tmp_path, capsys):
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    (run / "checkpoints" / "last.safetensors").write_bytes(b"")
    (run / "config.toml").write_text("[[[\n")
    assert main([*words, "--resume", str(run), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "config.toml: not valid TOML" in err and "older" not in err and len(err.splitlines()) == 1, err


@pytest.mark.parametrize("name", ["lm", "tag", "translate"])
def test_a_migrated_run_folder_evaluates_and_resumes(name, fixture_runs, capsys):
    info = TASKS[name]
    run = fixture_runs / {"lm": "lm", "tag": "tagger", "translate": "translator"}[name]
    quiet = ["--no-progress", "--json"]
    assert main([*info.evaluate, str(run), "--json"]) == 0  # its best weights (epoch 1)
    capsys.readouterr()
    assert main([*info.train, "--resume", str(run), *quiet]) == 0
    summary = json.loads(capsys.readouterr().out)
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [m["epoch"] for m in metrics] == [1, 2] and summary["best_epoch"] in (1, 2)
    # at the thread count the run trained with (the same sums as its summary's; the tagger and translator's
    # evaluate keep the count the resumed run set in this process)
    threads = ["--threads", "1"] if name == "lm" else []
    assert main([*info.evaluate, str(run), "--json", *threads]) == 0
    evaluated = json.loads(capsys.readouterr().out)
    figure = info.metric[1][1]  # the summary's test figure, as evaluate names it
    key = {"test_ppl": "ppl", "test_accuracy": "test_accuracy", "test_bleu": "bleu"}[figure]
    assert evaluated[key] == pytest.approx(summary[figure], rel=1e-9)


def test_a_migrated_subspace_experiment_finishes(fixture_runs, capsys):
    out = fixture_runs / "subspace"
    assert main(["experiment", "subspace", "--resume", str(out), "--no-progress", "--json"]) == 0
    rows = (out / "subspace.csv").read_text().splitlines()
    assert len(rows) == 1 + 2 and not (out / "points").exists()  # both points, one run each
    summary = json.loads(capsys.readouterr().out)
    assert [p["beta"] for p in summary["beta_sweep"]] == [0.0, 1.0] and summary["runs_in_csv"] == 2


@pytest.mark.parametrize("name", ["lm", "tag", "translate"])
def test_a_resume_moves_only_verified_data_and_never_to_another_corpus(name, fixture_runs, tmp_path, capsys):
    """`--resume RUN --data-dir D` (the same verified corpus found elsewhere) is refused with one line for a run on
    a folder of its own, as every fixture is, and `--resume RUN --data D` for every run; config.toml stays."""
    info = TASKS[name]
    run = fixture_runs / {"lm": "lm", "tag": "tagger", "translate": "translator"}[name]
    before = (run / "config.toml").read_text()
    for option, message in (("--data-dir", "trains on a folder of its own"), ("--data", "trains on its own corpus")):
        capsys.readouterr()
        assert main([*info.train, "--resume", str(run), option, str(tmp_path), "--no-progress"]) == 2
        err = capsys.readouterr().err.strip()
        assert message in err and len(err.splitlines()) == 1, err
    assert (run / "config.toml").read_text() == before
