"""The task registry (tiedlm.tasks.TASKS): every task is one entry that names its config and Task classes; no code
outside the registries branches on a task's or a component's name; and a run folder of each task written before
the tasks moved onto one harness (tests/fixtures/folders) still evaluates and resumes."""

import json
import re
import shutil
from pathlib import Path

import pytest

from tiedlm.cli import main
from tiedlm.config import SectionedConfig
from tiedlm.tasks import KINDS, TASKS
from tiedlm.train.loop import Task

from conftest import write_tiny_corpus, write_tiny_parallel, write_tiny_treebank

SRC = Path(__file__).resolve().parent.parent / "src" / "tiedlm"
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "folders"
NAMES = "|".join(sorted({*TASKS, *KINDS}))


def test_each_task_names_its_config_and_task_classes_and_they_agree():
    for name, info in TASKS.items():
        config, task = info.config_class(), info.task_class()
        assert issubclass(config, SectionedConfig) and issubclass(task, Task), name
        assert config.kind == task.kind == info.kind and KINDS[info.kind] is info, name
        assert config.command == " ".join(info.train), name
        if info.estimate:
            module, _, function = info.estimate.partition(":")
            assert callable(getattr(__import__(module, fromlist=[function]), function)), name


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
    return runs


@pytest.mark.parametrize("name", ["lm", "tag", "translate"])
def test_a_run_folder_written_before_the_harness_evaluates_and_resumes(name, fixture_runs, capsys):
    info = TASKS[name]
    run = fixture_runs / info.kind
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


def test_a_subspace_experiment_stopped_before_the_harness_finishes(fixture_runs, capsys):
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
    run = fixture_runs / info.kind
    before = (run / "config.toml").read_text()
    for option, message in (("--data-dir", "trains on a folder of its own"), ("--data", "trains on its own corpus")):
        capsys.readouterr()
        assert main([*info.train, "--resume", str(run), option, str(tmp_path), "--no-progress"]) == 2
        err = capsys.readouterr().err.strip()
        assert message in err and len(err.splitlines()) == 1, err
    assert (run / "config.toml").read_text() == before
