"""What a careful operator and a hostile input run into: nothing runs that the user did not ask for, nothing is
written outside the run or through a planted link, a damaged checkpoint is named, and every fault is one line
(docs/cli.md, "What you can rely on")."""

import gzip
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tiedlm.cli import main
from tiedlm.errors import DataError, TiedlmError

from conftest import tiny_overrides, write_tiny_parallel

ROOT = Path(__file__).resolve().parent.parent


def _sets(corpus, **extra) -> list[str]:
    out = []
    for item in tiny_overrides(corpus, **{"train.epochs": "1", **extra}):
        out += ["--set", item]
    return out


def _train(corpus, out, *more, **sets) -> int:
    return main(["train", "ptb-small-vd", "--out", str(out), "--no-progress", *_sets(corpus, **sets), *more])


def _one_line(capsys) -> str:
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.startswith("tiedlm: error") or "Traceback" in ln]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


# ------------------------------------------------------------------ security and integrity
def test_a_planted_git_fsmonitor_runs_nothing(tiny_corpus, tmp_path, capsys):
    """A repository above --out (a downloaded archive can carry one) whose config names a command: git would run it
    on `ls-files`; tiedlm's check for committed results runs nothing of it."""
    repo, marker = tmp_path / "archive", tmp_path / "ran"
    (repo / "out").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "config", "core.fsmonitor", f"touch {marker}; echo"], check=True)
    subprocess.run(["git", "ls-files"], cwd=repo / "out", capture_output=True)
    assert marker.exists()  # plain git runs it: the planted config is live
    marker.unlink()
    assert _train(tiny_corpus, repo / "out" / "run") == 0
    assert (
        main(
            ["analyze", "bands", str(repo / "out" / "run"), str(repo / "out" / "run"), "--out", str(repo / "out" / "b")]
        )
        == 0
    )
    assert not marker.exists()


def test_planted_links_in_a_run_folder_are_replaced_never_written_through(tiny_corpus, tmp_path):
    out, precious = tmp_path / "run", tmp_path / "precious.txt"
    out.mkdir()
    precious.write_text("keep me\n")
    for name in ("vocab.txt", "metrics.jsonl", "config.toml"):
        (out / name).symlink_to(precious)
    assert _train(tiny_corpus, out) == 0
    assert precious.read_text() == "keep me\n"
    assert not any((out / n).is_symlink() for n in ("vocab.txt", "metrics.jsonl", "config.toml"))


def test_appending_through_a_planted_link_or_to_an_unwritable_file_is_one_line(tmp_path, monkeypatch):
    from tiedlm.run_dir import append_text

    target, link = tmp_path / "target", tmp_path / "metrics.jsonl"
    target.write_text("")
    link.symlink_to(target)
    with pytest.raises(TiedlmError, match="symbolic link") as err:
        append_text(link, "x\n")
    assert target.read_text() == "" and "\n" not in str(err.value) and "resume" in str(err.value)

    def refused(*a, **k):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(os, "open", refused)  # a folder made read-only mid-run (root would not feel a chmod)
    with pytest.raises(TiedlmError, match="Permission denied.*last checkpoint is kept"):
        append_text(tmp_path / "m.jsonl", "x\n")


def test_a_flipped_byte_in_a_checkpoint_is_named_with_the_other_one(tiny_corpus, tmp_path, capsys):
    out = tmp_path / "run"
    assert _train(tiny_corpus, out) == 0
    best = out / "checkpoints" / "best.safetensors"
    data = bytearray(best.read_bytes())
    data[-100] ^= 0x01  # one bit of a weight: the file still parses
    best.write_bytes(bytes(data))
    capsys.readouterr()
    assert main(["evaluate", str(out)]) == 1
    line = _one_line(capsys)
    assert str(best) in line and "damaged" in line and "--checkpoint last" in line
    assert main(["evaluate", str(out), "--checkpoint", "last", "--json"]) == 0


def test_a_checkpoint_is_flushed_to_disk_with_its_folder_before_it_counts(tmp_path, monkeypatch):
    import torch

    from tiedlm.checkpoint_file import load_checkpoint, save_checkpoint

    synced = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(os.readlink(f"/proc/self/fd/{fd}")), real(fd))[1])
    path = tmp_path / "c" / "last.safetensors"
    save_checkpoint(path, {"w": torch.arange(6.0).view(2, 3)}, {"epoch": 1})
    assert any(s.endswith(".tmp") for s in synced) and str(path.parent) in synced
    tensors, meta = load_checkpoint(path)
    assert meta == {"epoch": 1} and tensors["w"].tolist() == [[0, 1, 2], [3, 4, 5]]


def test_temporary_files_a_kill_left_are_gone_after_the_next_start(tiny_corpus, tmp_path, capsys):
    out = tmp_path / "run"
    assert _train(tiny_corpus, out) == 0
    left = [out / "checkpoints" / ".last.safetensors.abc123.tmp", out / ".vocab.txt.xyz.tmp"]
    for f in left:
        f.write_bytes(b"\0" * 4096)
    assert main(["train", "--resume", str(out), "--no-progress", "--set", "train.epochs=2"]) == 0
    assert not any(f.exists() for f in left)


def test_the_advice_after_a_failed_first_checkpoint_works_when_followed(tiny_corpus, tmp_path, capsys, monkeypatch):
    import errno

    from tiedlm import checkpoint_file

    out, real = tmp_path / "run", checkpoint_file.save_file

    def full_disk(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(checkpoint_file, "save_file", full_disk)
    assert _train(tiny_corpus, out) == 1
    line = _one_line(capsys)
    assert "No space left on device" in line and "start it again with the same command" in line
    monkeypatch.setattr(checkpoint_file, "save_file", real)
    assert _train(tiny_corpus, out) == 0  # the same command, as the line says


def test_a_gz_download_is_decompressed_in_chunks_and_refused_past_its_cap(tmp_path):
    from tiedlm.data.corpus import _gunzip
    from tiedlm.data.sources import SOURCES

    spec = next(iter(SOURCES.values())).files[0]
    bomb = tmp_path / "x.part"
    with gzip.open(bomb, "wb") as f:
        f.write(b"\0" * (3 << 20))
    with pytest.raises(DataError, match="decompresses to more than 1,048,576 bytes") as err:
        _gunzip(bomb, spec, cap=1 << 20)
    assert "\n" not in str(err.value) and not list(tmp_path.glob("*.gunzip"))
    _gunzip(bomb, spec, cap=4 << 20)
    assert bomb.read_bytes() == b"\0" * (3 << 20)


# ------------------------------------------------------------------ TensorBoard
def test_tensorboard_is_checked_before_training_kept_per_run_and_remembered(tiny_corpus, tmp_path, capsys):
    pytest.importorskip("tensorboard")
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    assert _train(tiny_corpus, tmp_path / "r0", "--tensorboard", str(blocked)) == 2
    assert "--tensorboard" in _one_line(capsys)
    assert not (tmp_path / "r0" / "metrics.jsonl").exists()  # refused before any training

    board = tmp_path / "board"
    for run in ("a", "b"):  # two runs given one folder: each its own curves
        assert _train(tiny_corpus, tmp_path / run, "--tensorboard", str(board)) == 0
    assert sorted(p.name for p in board.iterdir()) == ["a", "b"]
    first = sorted((board / "a").iterdir())
    assert main(["train", "--resume", str(tmp_path / "a"), "--no-progress", "--set", "train.epochs=2"]) == 0
    assert len(sorted((board / "a").iterdir())) == len(first) + 1  # the resumed run logs on, unasked


# ------------------------------------------------------------------ values, files and messages
@pytest.mark.parametrize("seed", ["-1", str(2**40)])
def test_a_seed_out_of_range_is_one_line(seed, tiny_corpus, tmp_path, capsys):
    assert _train(tiny_corpus, tmp_path / "run", **{"train.seed": seed}) == 2
    assert "train.seed" in _one_line(capsys)


def test_a_config_file_that_is_not_utf8_or_not_a_file_is_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.toml"
    bad.write_bytes("[train]\nepochs = 2 # caf\xe9\n".encode("latin-1"))
    assert main(["train", str(bad), "--out", str(tmp_path / "r")]) == 2
    assert "not UTF-8" in _one_line(capsys)
    pipe = tmp_path / "pipe.toml"
    os.mkfifo(pipe)  # there, but not a file: never read (it would block), never called missing
    assert main(["train", str(pipe), "--out", str(tmp_path / "r")]) == 2
    assert "is not a regular file" in _one_line(capsys)


def test_a_path_that_is_there_but_not_a_file_is_not_called_missing(tiny_corpus, tmp_path, capsys):
    own = tmp_path / "own"
    own.mkdir()
    for split in ("valid", "test"):
        (own / f"{split}.txt").write_text((tiny_corpus / f"{split}.txt").read_text())
    (own / "train.txt").mkdir()
    assert main(["train", "ptb-small-vd", "--data", str(own), "--out", str(tmp_path / "r")]) == 1
    line = _one_line(capsys)
    assert "train.txt is not a regular file" in line and "missing" not in line


def test_text_files_that_say_the_wrong_thing(tiny_corpus, tmp_path, capsys):
    out = tmp_path / "run"
    assert _train(tiny_corpus, out) == 0
    one = tmp_path / "one.txt"
    one.write_text("company\n")
    capsys.readouterr()
    assert main(["evaluate", str(out), "--text", str(one)]) == 2
    assert "first word of a text is never scored" in _one_line(capsys)
    assert main(["evaluate", str(out), "--text", str(tmp_path)]) == 2
    assert "is not a regular file" in _one_line(capsys)
    assert main(["evaluate", str(out), "--text", str(one), "--split", "valid"]) == 2  # one would lose silently
    assert "--split" in _one_line(capsys)


def test_a_finished_run_without_its_best_checkpoint_says_so(tiny_corpus, tmp_path, capsys):
    out = tmp_path / "run"
    assert _train(tiny_corpus, out) == 0
    (out / "checkpoints" / "best.safetensors").unlink()
    capsys.readouterr()
    assert main(["evaluate", str(out), "--json"]) == 0
    err = capsys.readouterr().err
    assert "removed after the run finished" in err and "before its first epoch" not in err


def test_an_empty_source_file_is_named_as_empty(tmp_path, capsys):
    from tiedlm.tasks.translation.data import read_lines

    empty, blank = tmp_path / "e.en", tmp_path / "b.en"
    empty.write_text("")
    blank.write_text("\n  \n")
    assert read_lines(empty) == [] and read_lines(blank) == []


def test_set_help_says_how_to_write_a_list(capsys):
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    assert "comma-separated" in capsys.readouterr().out


def test_a_translator_subword_model_that_cannot_be_written_is_one_line(tmp_path):
    """sentencepiece trains in memory and tiedlm writes the model: under a file-size limit that is one line, not
    sentencepiece's "could not parse ModelProto"."""
    parallel = write_tiny_parallel(tmp_path)
    code = f"""
import resource, signal, sys
from pathlib import Path
from tiedlm.errors import TiedlmError
from tiedlm.tasks.translation.data import SubwordVocab, read_lines
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
lines = read_lines(Path({str(parallel / "train.xx")!r})) * 20
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
try:
    SubwordVocab.train(lines, Path({str(tmp_path / "spm.xx")!r}), 30, "unigram")
except TiedlmError as e:
    print("ONE LINE:", e)
"""
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "ONE LINE: could not write" in res.stdout and "Traceback" not in res.stderr, res.stdout + res.stderr


# ------------------------------------------------------------------ queues, progress, the busy machine
def test_a_second_reproduce_on_one_runs_folder_is_refused_at_once(tiny_corpus, tmp_path, capsys):
    from tiedlm.run_dir import folder_lock

    runs = tmp_path / "runs"
    runs.mkdir()
    with folder_lock(runs, "held"):  # as the first `tiedlm reproduce` holds it while its runs train
        args = ["reproduce", "transformer-lm", "--runs", str(runs), "--data", str(tiny_corpus), "--no-page"]
        assert main([*args, "--set", "train.epochs=1", "--set", "model.encoder.hidden_size=16"]) == 2
    assert "another `tiedlm reproduce` is training runs" in _one_line(capsys)
    assert not any(runs.iterdir())  # nothing started


def test_a_dry_run_says_at_once_what_it_times(tiny_corpus, tmp_path, capsys):
    dry = ["reproduce", "transformer-lm", "--dry-run", "--data", str(tiny_corpus), "--runs", str(tmp_path / "r")]
    tiny = ["--set", "model.encoder.hidden_size=16", "--set", "model.embedding_size=16", "--set", "train.bptt=8"]
    assert main([*dry, *tiny]) == 0
    err = capsys.readouterr().err
    assert "--dry-run: timing training steps of tied (1 of at most" in err


def test_info_of_a_preset_reads_no_corpus(monkeypatch, capsys):
    from tiedlm.tasks.lm.config import Config

    def no_reading(*a, **k):
        raise AssertionError("info read a corpus for |V|")

    monkeypatch.setattr("tiedlm.data.load_corpus", no_reading)
    from tiedlm.config import list_presets

    for preset in list_presets():
        if Config.load(preset).model.encoder.name != "hf":
            assert main(["info", preset]) == 0, preset


def test_evaluate_draws_no_progress_bars_into_a_log(tiny_corpus, tmp_path, capsys):
    out = tmp_path / "run"
    assert _train(tiny_corpus, out) == 0
    capsys.readouterr()
    assert main(["evaluate", str(out)]) == 0  # stderr is not a terminal here, as in a log file
    assert "\r" not in capsys.readouterr().err
    assert main(["evaluate", str(out), "--no-progress"]) == 0


def test_a_busy_machine_says_the_thread_count_holds_for_the_whole_run_and_how_to_change_it(monkeypatch):
    from tiedlm import runtime

    monkeypatch.delenv("TIEDLM_THREADS", raising=False)
    monkeypatch.setattr(runtime, "busy_cores", lambda: 1.0)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    said = []
    assert runtime.default_threads(said.append) == 1
    assert "for the whole run" in said[0] and "--threads 2" in said[0]


# ------------------------------------------------------------------ fault injection
SLOW_WRITES = """
import os, time
import tiedlm.checkpoint_file as c
_real = c.save_file
def _slow(*a, **k):  # the test's fault injector: a checkpoint write held open, to be killed inside it
    _real(*a, **k)
    time.sleep(float(os.environ["TIEDLM_TEST_WRITE_PAUSE"]))
c.save_file = _slow
"""


@pytest.mark.slow
def test_sigkills_at_random_moments_and_inside_checkpoint_writes_resume_bit_for_bit(tiny_corpus, tmp_path):
    """A tiny training is SIGKILLed again and again, at random moments and inside checkpoint writes (a
    ``sitecustomize`` of the test's own holds each write open for a moment, and the kill lands once the write's
    temporary file is there), and resumed each time; it ends with the straight run's weights and metrics, bit
    for bit, and no temporary file is left."""
    import json
    import random
    import time

    from safetensors.torch import load_file

    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(SLOW_WRITES)
    sets = _sets(tiny_corpus, **{"train.epochs": "3"})
    env = {**os.environ, "TIEDLM_THREADS": "1", "PYTHONPATH": os.pathsep.join([str(hook), str(ROOT / "src")])}
    env["TIEDLM_TEST_WRITE_PAUSE"] = "0.3"

    def command(out, resume):
        base = [sys.executable, "-m", "tiedlm.cli", "train"]
        if resume:
            return [*base, "--resume", str(out), "--no-progress"]
        return [*base, "ptb-small-vd", "--out", str(out), "--no-progress", *sets]

    straight = tmp_path / "straight"
    begun = time.monotonic()
    subprocess.run(command(straight, False), env=env, check=True, capture_output=True, timeout=600)
    whole = time.monotonic() - begun
    rng = random.Random(7)
    kills = {"random": 0, "inside a write": 0}
    clocks = ("second", "time", "per_s", "machine", "numerics", "native")

    def strip(record):
        return {k: v for k, v in record.items() if not any(c in k for c in clocks)}

    def metrics(run):
        return [strip(json.loads(x)) for x in (run / "metrics.jsonl").read_text().splitlines()]

    for trial in range(6):  # each trial: one run folder killed until it finishes, then checked
        out, attempt = tmp_path / f"killed-{trial}", 0
        while not (out / "summary.json").is_file():  # a kill after the summary leaves a finished run
            resume = (out / "checkpoints" / "last.safetensors").is_file()
            proc = subprocess.Popen(command(out, resume), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            how = "inside a write" if (trial + attempt) % 2 else "random"
            deadline, begun = rng.uniform(0.3, 0.9) * whole, time.monotonic()
            while proc.poll() is None and time.monotonic() - begun < (whole if how == "inside a write" else deadline):
                if how == "inside a write" and list((out / "checkpoints").glob(".*.tmp")):
                    break
                time.sleep(0.005)
            if proc.poll() is None:
                proc.kill()
                kills[how] += 1
            proc.wait()
            assert proc.returncode in (0, -signal.SIGKILL), proc.stderr.read().decode()
            attempt += 1
        for name in ("best", "last"):
            a, b = (load_file(str(p / "checkpoints" / f"{name}.safetensors")) for p in (straight, out))
            assert a.keys() == b.keys() and all(a[k].equal(b[k]) for k in a), (trial, name)
        assert metrics(out) == metrics(straight), trial
        assert not list(out.rglob(".*.tmp"))
        if min(kills.values()) >= 3:
            break
    assert min(kills.values()) >= 3, kills
