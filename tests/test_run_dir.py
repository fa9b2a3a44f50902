"""The run folder's layout lives in one class; its text files are replaced atomically."""

import json
import stat

import pytest

from tiedlm.errors import UsageError
from tiedlm.run_dir import RunDir, write_json_atomic, write_text_atomic


def test_layout_and_status(tmp_path):
    run = RunDir(tmp_path / "r")
    assert (run.config.name, run.vocab.name, run.metrics.name, run.summary.name) == (
        "config.toml",
        "vocab.txt",
        "metrics.jsonl",
        "summary.json",
    )
    assert run.checkpoint("last") == tmp_path / "r" / "checkpoints" / "last.safetensors"
    assert run.status() == "missing" and run.read_metrics() == [] and run.read_summary() is None
    with pytest.raises(UsageError, match="not a tiedlm run directory"):
        run.require_config()
    run.checkpoints.mkdir(parents=True)
    run.checkpoint("last").write_bytes(b"x")
    assert run.status() == "interrupted"
    write_json_atomic(run.summary, {"test_ppl": 80.0})
    assert run.status() == "finished" and run.read_summary() == {"test_ppl": 80.0}
    run.metrics.write_text(json.dumps({"epoch": 1}) + "\n\n" + json.dumps({"epoch": 2}) + "\n")
    assert [r["epoch"] for r in run.read_metrics()] == [1, 2]


def test_atomic_write_replaces_whole_file_and_leaves_nothing_on_failure(tmp_path):
    path = tmp_path / "config.toml"
    write_text_atomic(path, "a = 1\n")
    assert path.read_text() == "a = 1\n" and stat.S_IMODE(path.stat().st_mode) == 0o644

    with pytest.raises(TypeError):  # a failure mid-write: the old file stays whole, no temporary is left
        write_text_atomic(path, 12345)
    assert path.read_text() == "a = 1\n" and sorted(p.name for p in tmp_path.iterdir()) == ["config.toml"]
