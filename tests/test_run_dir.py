"""The run folder's layout lives in one class; its text files are replaced atomically."""

import json
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tiedlm.errors import UsageError
from tiedlm.run_dir import RunDir, write_bytes_atomic, write_json_atomic, write_text_atomic


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
    with pytest.raises(UsageError, match="does not exist"):
        run.require_config()
    run.path.mkdir()
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
        write_bytes_atomic(path, 12345)
    assert path.read_text() == "a = 1\n" and sorted(p.name for p in tmp_path.iterdir()) == ["config.toml"]


def _hold(folder: Path) -> subprocess.Popen:
    """Another process that holds ``folder``'s training lock until killed (it prints one line once it does)."""
    code = (
        "import sys, time\n"
        "from tiedlm.run_dir import RunDir\n"
        "with RunDir(sys.argv[1]).training_lock():\n"
        "    print('held', flush=True)\n"
        "    time.sleep(600)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code, str(folder)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_a_second_process_cannot_train_in_a_held_run_folder(tiny_corpus, tmp_path, capsys):
    """Two processes resuming one run would interleave checkpoints and metrics: while one trains in a folder,
    `tiedlm train` (new or resumed), `tag train` and `translate train` there stop with a one-line error and
    change nothing; once the holder dies (even by SIGKILL, which runs no clean-up) the run resumes."""
    from tiedlm.cli import main
    from tiedlm.registry import tasks

    TASKS = tasks()
    from tiedlm.train import run as train

    from conftest import tiny_overrides

    run = tmp_path / "run"
    sets = [a for o in tiny_overrides(tiny_corpus, **{"train.epochs": "1"}) for a in ("--set", o)]
    assert main(["train", "ptb-small-re", "--out", str(run), "--no-progress", *sets]) == 0
    (run / "summary.json").unlink()  # as if stopped during its final evaluation: resumable
    before = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    assert RunDir(run).status() == "interrupted"
    holder = _hold(run)
    try:
        assert RunDir(run).status() == "running"  # what `tiedlm reproduce` shows, and skips
        capsys.readouterr()
        for argv in (["train", "--resume", str(run), "--no-progress"], ["train", "ptb-small-re", "--out", str(run)]):
            assert main(argv) == 2, argv
            err = capsys.readouterr().err.strip()
            assert len(err.splitlines()) == 1, err
        assert "another process is training in" in err  # a new run there is refused too, before anything else
        for info in (TASKS["tag"], TASKS["translate"]):
            with pytest.raises(UsageError, match="another process is training in"):
                train(info.task_class()(info.config()), run, resume=True, progress=False)
        assert {p: p.read_bytes() for p in run.rglob("*") if p.is_file()} == before
        fresh = tmp_path / "fresh"
        with RunDir(fresh).training_lock():  # a new folder is held as well, and left out if nothing is written
            assert fresh.is_dir()
        assert not fresh.exists()
    finally:
        holder.kill()
        holder.wait()
    assert RunDir(run).status() == "interrupted"  # the killed holder's lock went with it
    assert main(["train", "--resume", str(run), "--no-progress"]) == 0
    assert (run / "summary.json").is_file()


def test_a_run_in_its_first_epoch_or_killed_there_is_named_as_such(tiny_corpus, tmp_path, capsys):
    """A folder with the run's config but no checkpoint yet: while its process trains, resume and evaluate say so
    (not "no checkpoint to resume from", "is this a tiedlm run directory?"); once that process was killed, they
    say it stopped before writing one and how to start it again, which works."""
    from tiedlm.cli import main

    from conftest import tiny_overrides

    run = tmp_path / "run"
    sets = [a for o in tiny_overrides(tiny_corpus, **{"train.epochs": "1"}) for a in ("--set", o)]
    assert main(["train", "ptb-small-re", "--out", str(run), "--no-progress", *sets]) == 0
    shutil.rmtree(run / "checkpoints")  # as the run stood in its first epoch
    (run / "summary.json").unlink()
    capsys.readouterr()

    def error(*argv: str) -> str:
        assert main([*argv, "--no-progress"]) in (1, 2), argv
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1, err
        return err

    holder = _hold(run)
    try:
        assert "another process is training in" in error("train", "--resume", str(run))
        assert f"{run} is training now and has no best checkpoint yet" in error("evaluate", str(run))
    finally:
        holder.kill()
        holder.wait()
    gone = f"{run} has no checkpoint: it stopped before writing one; train it again (--out {run})"
    assert gone in error("train", "--resume", str(run)) and gone in error("evaluate", str(run))
    assert main(["train", "ptb-small-re", "--out", str(run), "--no-progress", *sets]) == 0


def test_a_full_disk_while_writing_a_checkpoint_is_one_line_and_keeps_the_last_good_one(tmp_path):
    """A real file-size limit (what a full disk looks like to the writer): no SafetensorError traceback, the
    checkpoint already there is untouched and named, no temporary file is left behind."""
    import resource
    import signal

    import torch

    from tiedlm.checkpoint_file import load_checkpoint, save_checkpoint
    from tiedlm.errors import TiedlmError

    path = tmp_path / "last.safetensors"
    save_checkpoint(path, {"w": torch.ones(4)}, {"epoch": 1})
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    old = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write then fails with EFBIG instead of a signal
    resource.setrlimit(resource.RLIMIT_FSIZE, (100_000, hard))
    try:
        with pytest.raises(TiedlmError) as err:
            save_checkpoint(path, {"w": torch.ones(1_000_000)}, {"epoch": 2})
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, old)
    message = str(err.value)
    assert "\n" not in message and f"the last good one, {path}, is kept" in message and "resume" in message
    tensors, meta = load_checkpoint(path)
    assert meta == {"epoch": 1} and tensors["w"].numel() == 4
    assert [p.name for p in tmp_path.iterdir()] == ["last.safetensors"]
