"""Published runs and benchmark results are portable and hold the programs' output only."""

import json
import re
from pathlib import Path

import pytest

from tiedlm.paths import machine_paths, portable, portable_command, portable_path

ROOT = Path(__file__).resolve().parent.parent
PUBLISHED = [ROOT / "results", ROOT / "benchmarks" / "results"]
TEXT = {".json", ".jsonl", ".log", ".toml", ".txt", ".md", ".csv"}
# words of a lab notebook, not of a program's output: how a figure was made, on whose machine
NARRATIVE = re.compile(
    r"session|lent (?:machine|GPU|H100|H200)|by hand|uncommitted|SIGSTOP|came back|\bhost: |"
    r"numerics [0-9a-f]{16} \(|working tree of|run before it was committed",
    re.I,
)


def _files():
    return [p for root in PUBLISHED for p in sorted(root.rglob("*")) if p.is_file() and p.suffix in TEXT]


def test_published_files_hold_no_path_of_the_machine_that_made_them():
    found = [f"{p.relative_to(ROOT)}: {m}" for p in _files() for m in machine_paths(p.read_text(encoding="utf-8"))]
    assert not found, found[:10]


def test_published_files_hold_no_narrative_of_how_they_were_made():
    found = [
        f"{p.relative_to(ROOT)}:{i}: {line[:80]}"
        for p in _files()
        for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if NARRATIVE.search(line)
    ]
    assert not found, found[:10]


def _summaries():
    return [(p, json.loads(p.read_text())) for p in sorted((ROOT / "results").rglob("summary.json"))]


def test_each_published_command_runs_elsewhere_and_each_lm_summary_states_its_test_protocol():
    lm = 0
    for path, summary in _summaries():
        name = path.parent.relative_to(ROOT)
        if "command" in summary:
            assert summary["command"].startswith("tiedlm "), name
        if "valid_ppl" in summary and "test_bleu" not in summary:  # a language model's run
            lm += 1
            assert summary["test_protocol"].startswith(("batch 1: ", "10 streams: ")), name
    assert lm >= 40
    assert not list((ROOT / "results").rglob("test_batch1.json"))  # batch-1 figures live in the summary


@pytest.mark.parametrize(
    "path, typed",
    [
        ("/work/shared/data/ptb", "$TIEDLM_DATA/ptb"),
        ("/home/ann/proj/.data/wikitext-2", "$TIEDLM_DATA/wikitext-2"),
        ("/root/tiedlm-runs/reproduce/inan2017-table1-small/real", "runs/inan2017-table1-small/real"),
        ("/root/tiedlm-runs/real-tgrad:", "runs/real-tgrad:"),
        ("/work/main/.gpu/runs/ptb-small-real-bias", "runs/ptb-small-real-bias"),
        ("/tmp/wt2-small-vd", "runs/wt2-small-vd"),
        ("/usr/lib/x", "/usr/lib/x"),  # not a folder of the user's: left as it is
    ],
)
def test_a_machine_path_is_written_as_a_user_types_it(path, typed):
    assert portable_path(path) == typed


def test_portable_text_leaves_urls_and_relative_paths_alone():
    text = "see https://example.org/work/x and runs/a; data (/work/shared/data/ptb)"
    assert portable(text) == "see https://example.org/work/x and runs/a; data ($TIEDLM_DATA/ptb)"


def test_a_recorded_command_holds_no_path_of_this_machine(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path.parent))
    argv = ["train", "ptb-small-real", "--out", str(tmp_path / "runs" / "a b"), f"--data-dir={tmp_path.parent}/c"]
    assert portable_command(argv) == "tiedlm train ptb-small-real --out 'runs/a b' --data-dir=~/c"
    # a corpus of one's own stays where it is (not a run folder runs/corp); one under a data folder is the mirror's
    argv = ["train", "ptb-small-vd", "--data", "/tmp/corp", "--data=/srv/data/ptb", "--out", "/tmp/run"]
    assert portable_command(argv) == "tiedlm train ptb-small-vd --data /tmp/corp --data=$TIEDLM_DATA/ptb --out runs/run"
    argv = ["tag", "train", "--data-dir", "/tmp/ud", "--data-dir=/tmp/ud2"]  # the taggers' and translators' option
    assert portable_command(argv) == "tiedlm tag train --data-dir /tmp/ud --data-dir=/tmp/ud2"


def test_every_published_run_summary_names_its_device_and_the_migration_reads_it_off_the_log(tmp_path):
    """The results pages read a run's device from its summary alone: every published run summary has one, and
    tools/migrate_runs.py gives an older summary the device its log's first line names."""
    import shutil
    import subprocess
    import sys

    runs = [p for p in (ROOT / "results" / "reproduce").rglob("summary.json") if (p.parent / "config.toml").is_file()]
    assert runs and all(json.loads(p.read_text()).get("device") for p in runs), "a published run names no device"
    run = tmp_path / "tied"
    shutil.copytree(ROOT / "results" / "reproduce" / "pappas2019-mt" / "tied", run)
    summary = json.loads((run / "summary.json").read_text())
    summary.pop("device")
    (run / "summary.json").write_text(json.dumps(summary))
    tool = ROOT / "tools" / "migrate_runs.py"
    out = subprocess.run([sys.executable, str(tool), str(run)], capture_output=True, text=True)
    assert "translate run, summary rewritten" in out.stdout, out.stdout + out.stderr[-2000:]
    assert json.loads((run / "summary.json").read_text()) == {**summary, "device": "cpu"}
