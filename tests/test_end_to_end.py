"""Tiny end-to-end runs: train / evaluate / predict / generate / info / resume, and error paths."""

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from tiedlm import interrupts, runtime
from tiedlm.cli import main
from tiedlm.errors import RunInterrupted, TiedlmError
from tiedlm.run import load_run
from tiedlm.tasks.lm.config import Config
from tiedlm.train import load_checkpoint
from tiedlm.train.checkpoint import save_checkpoint

from conftest import LMRun, migrate_runs, read_metrics, tiny_overrides


def _train(corpus, out, *extra, preset="ptb-small-real"):
    args = ["train", preset, "--out", str(out), "--no-progress"]
    for o in tiny_overrides(corpus) + list(extra):
        args += ["--set", o]
    return main(args)


def _cfg(corpus, preset="ptb-small-real", **extra):
    return Config.load(preset).with_overrides(tiny_overrides(corpus, **extra))


def test_train_evaluate_predict_generate_info(tiny_corpus, tmp_path, capsys):
    run = tmp_path / "run"
    assert _train(tiny_corpus, run) == 0
    files = {p.name for p in run.iterdir()}
    assert {"config.toml", "vocab.txt", "metrics.jsonl", "summary.json", "checkpoints"} <= files
    summary = json.loads((run / "summary.json").read_text())
    metrics = read_metrics(run)
    assert len(metrics) == 2 and all(
        k in metrics[0] for k in ("train_ppl", "valid_ppl", "lr", "tokens_per_s", "wall_time_s")
    )
    assert summary["valid_ppl"] == pytest.approx(min(m["valid_ppl"] for m in metrics), rel=1e-6)
    saved = Config.load(run / "config.toml")
    assert (saved.train.precision, saved.train.device) == ("fp32", "cpu")  # resolved, not "auto"
    assert summary["seed"] == 1111 and summary["parameters"]["output"] == 0 and "torch" in summary["versions"]
    host = runtime.host_record(torch.device("cpu"))  # where it trained: in the summary and each epoch's line
    assert {k: summary[k] for k in host} == {k: metrics[0][k] for k in host} == {k: metrics[1][k] for k in host} == host
    assert summary["valid_ppl"] < 121  # better than uniform over the tiny vocabulary
    capsys.readouterr()

    assert main(["evaluate", str(run), "--split", "test", "--json"]) == 0
    ev = json.loads(capsys.readouterr().out)
    assert ev["ppl"] == pytest.approx(summary["test_ppl"], rel=1e-6)

    assert main(["predict", str(run), "w1 w2", "zzz w3", "--top", "4", "--json"]) == 0
    pr = json.loads(capsys.readouterr().out)
    tables = [t["models"][0] for t in pr["tables"]]
    assert [len(t["predictions"]) for t in tables] == [4, 4] and tables[1]["unknown"] == ["zzz"]
    probs = [r["prob"] for r in tables[0]["predictions"]]
    assert probs == sorted(probs, reverse=True) and 0 < sum(probs) <= 1

    assert main(["generate", str(run), "--words", "12", "--seed", "5", "--json"]) == 0
    g1 = json.loads(capsys.readouterr().out)
    assert main(["generate", str(run), "--words", "12", "--seed", "5", "--json"]) == 0
    assert len(g1["tokens"]) == 12 and json.loads(capsys.readouterr().out)["tokens"] == g1["tokens"]
    assert main(["generate", str(run), "--words", "3", "--prompt", "w1 zzz"]) == 0  # as predict, says what is <unk>
    assert capsys.readouterr().out.startswith("(prompt words not in the vocabulary, read as <unk>: zzz)\n")

    assert main(["info", str(run), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["parameters"]["total"] == summary["parameters"]["total"]

    r = load_run(run)
    assert r.model.output.weight is r.model.embedding.weight and not r.model.training


def _weights(run):
    tensors, meta = load_checkpoint(run / "checkpoints" / "last.safetensors")
    return {k: v for k, v in tensors.items() if k.startswith("model.")}, meta


TRANSFORMER_TINY = {
    "model.encoder.layers": "1",
    "model.encoder.heads": "2",
    "model.encoder.memory": "4",
    "train.lr": "0.01",
    "train.warmup_steps": "3",
}


def _as_written_before_the_one_schema(path) -> None:
    """Rewrite a language model's ``last`` checkpoint as it was written before the one checkpoint schema: its own
    names of the position (window, sums ce/tokens/aug/skipped/time, best_valid, elapsed), NT-ASGD's metadata at
    the top, no optimiser groups with SGD."""
    tensors, meta = load_checkpoint(path)
    sums, sgd = meta["sums"], not any(k.startswith("opt.") for k in tensors)
    old = {
        "updates": meta["updates"],
        "param_groups": None if sgd else meta["param_groups"],
        "which": "last",
        "epoch": meta["epoch"],
        "window": meta["batch"],
        "best_valid": math.inf if meta["best_score"] is None else meta["best_score"],
        "best_epoch": meta["best_epoch"],
        "elapsed": meta["seconds"],
        "sums": {
            "ce": sums["loss"],
            "tokens": sums["count"],
            "aug": sums["aug"],
            "skipped": sums.get("skipped", 0),
            "time": meta["epoch_seconds"],
        },
        **meta["task"],
    }
    save_checkpoint(path, tensors, old)


@pytest.mark.parametrize(
    "preset, extra, old",
    [
        ("ptb-small-real", {}, False),
        ("ptb-transformer-drill", TRANSFORMER_TINY, False),
        ("ptb-small-real", {}, True),
        ("ptb-small-real", {"train.precision": "fp16"}, False),
    ],
    ids=["vd-lstm-sgd", "transformer-adam", "vd-lstm-checkpoint-before-the-one-schema", "vd-lstm-fp16-loss-scaled"],
)
def test_resume_mid_epoch_reproduces_uninterrupted_run(tiny_corpus, tmp_path, preset, extra, old):
    """The carried state (LSTM h/c or the Transformer's memory) and Adam's moments survive a resume; so does a
    checkpoint written before the one checkpoint schema (every earlier run folder resumes)."""
    cfg = _cfg(tiny_corpus, preset, **{"train.epochs": "3", "model.encoder.dropout": "0.3", **extra})
    full = _overflowing(LMRun(cfg, tmp_path / "full"))
    s_full = full.fit()

    part = _overflowing(LMRun(cfg, tmp_path / "part"))
    windows_per_epoch = (part.task.train_data.size(0) - 1 + 7) // 8
    with pytest.raises(RunInterrupted):
        part.fit(windows_per_epoch + 3)  # stops inside epoch 2
    _, meta = _weights(tmp_path / "part")
    assert meta["epoch"] == 2 and meta["batch"] == 3  # the one schema's position (Progress)
    if part.task.scaler is not None:  # the scale the overflows brought it down to is what the resumed run starts at
        scale = part.task.scaler.get_scale()
        assert scale < 2.0**40 and meta["task"]["loss_scale"]["scale"] == scale
    if old:  # rewritten by tools/migrate_runs.py, as a user's older folder is
        _as_written_before_the_one_schema(tmp_path / "part" / "checkpoints" / "last.safetensors")
        migrate_runs(tmp_path / "part")
    resumed = LMRun(cfg, tmp_path / "part", resume=True)
    if resumed.task.scaler is not None:
        assert resumed.task.scaler.get_scale() == scale
    s_res = resumed.fit()

    for a, b in zip(read_metrics(tmp_path / "full"), read_metrics(tmp_path / "part")):
        assert (a["epoch"], a["train_ppl"], a["valid_ppl"]) == (b["epoch"], b["train_ppl"], b["valid_ppl"])
    assert s_full["test_ppl"] == s_res["test_ppl"]
    wa, wb = _weights(tmp_path / "full")[0], _weights(tmp_path / "part")[0]
    assert all(torch.equal(wa[k], wb[k]) for k in wa)


def _overflowing(run: LMRun) -> LMRun:
    """An fp16 run's loss scale set far too large, so that its first windows overflow and are computed again."""
    if run.task.scaler is not None:
        run.task.scaler = torch.amp.GradScaler("cpu", init_scale=2.0**40)
    return run


def _signal_at(trainer, k: int, sig=signal.SIGTERM, backward: bool = False) -> None:
    """Send ``sig`` to this process from inside the model's k-th forward call (training steps, validation and
    the final evaluation all call it) or, with ``backward``, from inside the k-th backward pass (after the
    step's dropout masks were drawn, before the update), so the signal arrives in the middle of that work."""
    calls = {"n": 0}

    def hit():
        calls["n"] += 1
        if calls["n"] == k:
            os.kill(os.getpid(), sig)

    if backward:
        trainer.model.embedding.weight.register_hook(lambda g: (hit(), g)[1])
        return
    real = trainer.model.forward
    trainer.model.forward = lambda *a, **kw: (hit(), real(*a, **kw))[1]


def _outcome(run: Path):
    summary = json.loads((run / "summary.json").read_text())
    metrics = [(m["epoch"], m["train_ppl"], m["valid_ppl"]) for m in read_metrics(run)]
    weights = _weights(run)[0]
    return (
        {k: summary[k] for k in ("valid_ppl", "test_ppl", "test_ppl_streams", "best_epoch", "epochs")},
        metrics,
        weights,
    )


@pytest.mark.slow
def test_a_real_signal_anywhere_then_resume_is_bit_identical(tiny_corpus, tmp_path):
    """SIGTERM or SIGINT delivered inside a training step, inside the epoch-end validation or inside the final
    evaluation: the run stops with a consistent checkpoint and the resumed run ends bit-identical."""
    cfg = _cfg(tiny_corpus, "ptb-small-vd", **{"train.epochs": "3", "model.encoder.dropout": "0.3"})
    whole = LMRun(cfg, tmp_path / "whole")
    counter = {"n": 0}
    real = whole.task.model.forward
    whole.task.model.forward = lambda *a, **kw: (counter.__setitem__("n", counter["n"] + 1), real(*a, **kw))[1]
    whole.fit()
    expected = _outcome(tmp_path / "whole")
    total = counter["n"]
    windows = (whole.task.train_data.size(0) - 1 + 7) // 8
    valid_windows = total // 3 - windows  # forward calls per epoch's validation (approximately; final eval is more)
    points = sorted(
        {
            1,
            2,
            windows // 2,
            windows,
            windows + 1,
            windows + max(valid_windows // 2, 1),
            2 * windows + valid_windows + 3,
            total - 3,
            total - 1,
        }
    )
    cases = [(k, False) for k in points] + [(k, True) for k in (1, 2, windows - 1, windows + 2, 3 * windows - 1)]
    for k, backward in cases:
        sig = signal.SIGINT if k % 2 else signal.SIGTERM
        run = tmp_path / f"split{k}{'b' if backward else 'f'}"
        part = LMRun(cfg, run)
        _signal_at(part.task, k, sig, backward)
        try:
            part.fit()
        except RunInterrupted:
            pass
        else:
            pytest.fail(f"a signal in {'backward' if backward else 'forward'} call {k} of {total} did not stop the run")
        assert not (run / "summary.json").exists()
        resumed = LMRun(cfg, run, resume=True)
        resumed.fit()
        got = _outcome(run)
        assert got[0] == expected[0] and got[1] == expected[1], (k, backward)
        assert all(torch.equal(got[2][n], expected[2][n]) for n in expected[2]), (k, backward)
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # handlers restored after each run


@pytest.mark.parametrize("apart", [False, True])
def test_a_second_signal_stops_at_once_and_writes_nothing_but_a_repeat_of_the_first_does_not(
    tiny_corpus, tmp_path, monkeypatch, apart
):
    """Two signals further apart than ``SAME_REQUEST_S``: the second stops at once. Two at the same moment (a
    scheduler signalling every process while ``tiedlm reproduce`` passes its own on) are one request."""
    monkeypatch.setattr(interrupts, "SAME_REQUEST_S", 0.2)
    cfg = _cfg(tiny_corpus, "ptb-small-vd", **{"train.epochs": "2"})
    tr = LMRun(cfg, tmp_path / "run")
    real, calls = tr.task.model.forward, {"n": 0}

    def forward(*a, **kw):
        calls["n"] += 1
        if calls["n"] == 3:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.3 if apart else 0.0)
            os.kill(os.getpid(), signal.SIGTERM)  # apart, the second one raises here
        return real(*a, **kw)

    tr.task.model.forward = forward
    with pytest.raises(RunInterrupted, match="second signal" if apart else r"\(checkpoint written\)"):
        tr.fit()
    assert (tmp_path / "run" / "checkpoints" / "last.safetensors").exists() is not apart


def test_a_repeat_of_the_stop_signal_while_the_process_ends_keeps_exit_code_130():
    """A stopped run's process exits 130. A repeat of the stop request arriving while it shuts down (a scheduler's
    copy, or a second Ctrl-C within a second) used to meet the restored default handler and end it with 143."""
    import subprocess
    import sys

    code = (
        "import os, signal, sys\n"
        "import importlib\n"
        'm = importlib.import_module("tiedlm.cli.main")\n'
        "m._main = lambda argv: 130  # a run stopped by the first signal\n"
        "rc = m.main()\n"
        "os.kill(os.getpid(), signal.SIGTERM)  # the repeat, during shutdown\n"
        "sys.exit(rc)\n"
    )
    assert subprocess.run([sys.executable, "-c", code], timeout=120).returncode == 130


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_to_a_real_process_then_resume_matches_an_uninterrupted_run(tiny_corpus, tmp_path, sig):
    """A separate `tiedlm train` process gets a real signal at some moment of its training; the run resumed
    from the command line ends with the numbers of an uninterrupted run."""
    overrides = tiny_overrides(tiny_corpus, **{"train.epochs": "10", "model.encoder.dropout": "0.3"})
    sets = [a for o in overrides for a in ("--set", o)]
    assert main(["train", "ptb-small-vd", "--out", str(tmp_path / "whole"), "--no-progress", *sets]) == 0
    run = tmp_path / "run"
    cmd = [sys.executable, "-m", "tiedlm.cli", "train", "ptb-small-vd", "--out", str(run), "--no-progress", *sets]
    # the child gets SIGINT's default disposition, as under a terminal: a test run started in the background
    # (`cmd &` in a script) inherits SIGINT ignored
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.time() + 600  # generous: on a loaded machine the child's imports alone can take a minute
    while not (run / "checkpoints" / "last.safetensors").exists() and time.time() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"training exited early: {proc.communicate()[1]}")
        time.sleep(0.05)
    time.sleep(0.37)  # somewhere inside a later epoch
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "resume with: tiedlm train --resume" in err and "Traceback" not in err
    _, meta = _weights(run)
    assert 1 <= meta["epoch"] <= 10
    assert len(read_metrics(run)) == meta["epoch"] - 1
    assert main(["train", "--resume", str(run), "--no-progress"]) == 0
    assert _outcome(run)[:2] == _outcome(tmp_path / "whole")[:2]


def test_non_finite_loss_is_skipped_and_never_saved(tiny_corpus, tmp_path):
    cfg = _cfg(tiny_corpus, **{"train.epochs": "1"})
    tr = LMRun(cfg, tmp_path / "run")
    real, calls = tr.task.loss_fn, {"n": 0}

    def flaky(logits, y, emb, bias):
        calls["n"] += 1
        total, ce, aug = real(logits, y, emb, bias)
        return (total * float("nan"), ce, aug) if calls["n"] == 3 else (total, ce, aug)

    tr.task.loss_fn = flaky
    tr.fit()
    m = read_metrics(tmp_path / "run")[0]
    assert m["skipped_steps"] == 1 and math.isfinite(m["train_ppl"])
    assert all(torch.isfinite(v).all() for v in _weights(tmp_path / "run")[0].values())

    tr2 = LMRun(cfg, tmp_path / "run2")
    tr2.task.loss_fn = lambda logits, y, emb, bias: (logits.sum() * float("inf"), logits.sum().detach(), None)
    with pytest.raises(TiedlmError, match="diverged"):
        tr2.fit()
    assert not (tmp_path / "run2" / "checkpoints").exists()


def _train_ppls(cfg, out):
    tr = LMRun(cfg, out)
    tr.fit()
    return [m["train_ppl"] for m in read_metrics(out)]


@pytest.mark.parametrize(
    "preset,extra,expected",
    [
        ("ptb-small-vd", {}, [47.787742, 44.737652]),
        ("ptb-small-real", {"loss.target_grad": "false"}, [53.668219, 45.181016]),  # ỹ fixed
        ("ptb-small-real", {}, [55.485091, 47.909137]),  # the preset: gradients through ỹ
    ],
)
def test_regression_pinned_train_ppl(tiny_corpus, tmp_path, preset, extra, expected):
    """Pins the numbers of a fixed-seed tiny run, so that a refactor that changes the maths fails loudly."""
    got = _train_ppls(_cfg(tiny_corpus, preset, **extra), tmp_path / "run")
    assert got == pytest.approx(expected, rel=1e-4), got


def test_aug_bias_false_trains_and_changes_the_run(tiny_corpus, tmp_path):
    """loss.aug_bias = false (ŷ without b, eq. 3.1 as printed) trains end to end and is not the default's run."""
    default = _train_ppls(_cfg(tiny_corpus, "ptb-small-al"), tmp_path / "default")
    printed = _train_ppls(_cfg(tiny_corpus, "ptb-small-al", **{"loss.aug_bias": "false"}), tmp_path / "printed")
    assert all(math.isfinite(v) for v in printed) and printed != pytest.approx(default, rel=1e-4)


def _cli(args, capsys):
    code = main(args)
    err = capsys.readouterr().err.strip()
    return code, err


def test_error_paths_are_one_line(tiny_corpus, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("TIEDLM_DATA", str(tmp_path / "empty-mirror"))
    cases = [
        (["train", "ptb-small-vd", "--out", str(tmp_path / "a")], 1, "ptb/train.txt is missing"),
        (["train", "ptb-small-vd", "--set", "train.epochs=zero"], 2, "expected an integer"),
        (
            ["train", "ptb-small-re", "--set", "model.encoder.hidden_size=100"],
            2,
            "needs model.encoder.hidden_size == model.embedding_size",
        ),
        (["train", "nope-preset"], 2, "unknown preset"),
        (["train"], 2, "give a PRESET"),
        (["train", "--resume", str(tmp_path)], 2, "no checkpoints/last.safetensors"),
        (["evaluate", str(tmp_path)], 2, "not a tiedlm run directory"),
        (["frobnicate"], 2, "invalid choice"),
    ]
    for args, code, msg in cases:
        got, err = _cli(args, capsys)
        assert got == code and msg in err and len(err.splitlines()) == 1, (args, err)
    # corrupt mirror file
    bad = tmp_path / "bad-mirror" / "ptb"
    bad.mkdir(parents=True)
    for s in ("train", "valid", "test"):
        (bad / f"{s}.txt").write_text("x\n")
    monkeypatch.setenv("TIEDLM_DATA", str(bad.parent))
    got, err = _cli(["train", "ptb-small-vd", "--out", str(tmp_path / "b")], capsys)
    assert got == 1 and "is not the verified train file" in err and len(err.splitlines()) == 1
    # empty prompt and an existing run
    run = tmp_path / "run"
    assert _train(tiny_corpus, run, "train.epochs=1") == 0
    capsys.readouterr()
    got, err = _cli(["predict", str(run), ""], capsys)
    assert got == 2 and "phrase is empty" in err
    got, err = _cli(["generate", str(run), "--temperature", "0"], capsys)
    assert got == 2 and "expected a finite number > 0" in err
    got, err = _cli(["train", "ptb-small-real", "--out", str(run)], capsys)
    assert got == 2 and "already holds a language model run" in err
    got, err = _cli(["train", "--resume", str(run)], capsys)
    assert got == 2 and "is finished: it trained 1 epochs" in err


def _corpus(folder: Path, train: bytes, valid: bytes = b"a b c d e\n" * 30, test: bytes = b"a b c d e\n" * 30):
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in (("train", train), ("valid", valid), ("test", test)):
        (folder / f"{name}.txt").write_bytes(data)
    return folder


def test_bad_input_gets_one_line_that_names_the_fix(tiny_corpus, tmp_path, capsys, monkeypatch):
    """The issue's catalogue of bad inputs: each a one-line error naming the problem and the fix, no traceback,
    exit 2 for usage errors; nothing trains before the data is known to be usable."""
    monkeypatch.chdir(tmp_path)
    small = [
        "--set",
        "model.embedding_size=8",
        "--set",
        "model.encoder.hidden_size=8",
        "--set",
        "train.threads=1",
        "--no-progress",
    ]
    words = b"the cat sat on a mat\n" * 200
    cases = [
        # your own text with the preset's corpus checksum: the error says how to train on it
        (["train", "ptb-small-vd", "--data-dir", str(tiny_corpus), *small], 1, f"use --data {tiny_corpus}"),
        (["train", "ptb-small-vd", "--data-dir", "nowhere", *small], 2, "nowhere' is not a folder"),
        (["train", "ptb-small-vd", "--data", "nowhere", *small], 2, "neither a known corpus nor an existing folder"),
        # corpus problems, found before any training
        (["train", "ptb-small-vd", "--data", str(_corpus(tmp_path / "empty", b"")), *small], 1, "holds no words"),
        (
            ["train", "ptb-small-vd", "--data", str(_corpus(tmp_path / "blank", b"\n  \n\n")), *small],
            1,
            "holds no words",
        ),
        (
            ["train", "ptb-small-vd", "--data", str(_corpus(tmp_path / "oneline", b"a b c\n")), *small],
            1,
            "lower train.batch_size",
        ),
        (
            ["train", "ptb-small-vd", "--data", str(_corpus(tmp_path / "latin1", words + b"caf\xe9\n")), *small],
            1,
            "train.txt, line 201, column 4: byte 0xe9 is not UTF-8",
        ),
        (
            ["train", "ptb-small-vd", "--data", str(_corpus(tmp_path / "novalid", words, valid=b"")), *small],
            1,
            "valid.txt holds no words",
        ),
        # numbers
        (["train", "ptb-small-vd", "--set", "train.lr=inf"], 2, "expected a finite number"),
        (["train", "ptb-small-vd", "--set", "train.lr=nan"], 2, "expected a finite number"),
        (["predict", str(tmp_path), "a", "--top", "-1"], 2, "--top: expected an integer >= 1"),
        (["predict", str(tmp_path), "a", "--top", "0"], 2, "--top: expected an integer >= 1"),
        (["evaluate", str(tmp_path), "--threads", "-1"], 2, "--threads: expected an integer >= 0"),
        (["evaluate", str(tmp_path), "--batch-size", "0"], 2, "--batch-size: expected an integer >= 1"),
        (["translate", "evaluate", str(tmp_path), "--beam", "0"], 2, "--beam: expected an integer >= 1"),
        (["translate", "translate", str(tmp_path), "--beam", "-3"], 2, "--beam: expected an integer >= 1"),
        (["translate", "translate", str(tmp_path), ""], 2, "sentence 1 is empty"),
        # paths and messages
        (["train", "ptb-smal-vd"], 2, "(similar: ptb-small-vd"),
        (
            [
                "experiment",
                "subspace",
                "--out",
                str(Path(__file__).parents[1] / "results" / "subspace"),
            ],
            2,
            "holds committed results",
        ),
    ]
    (tmp_path / "afile").write_text("x")
    cases += [
        (["train", "ptb-small-vd", "--data", str(tiny_corpus), "--out", "afile", *small], 2, "is a file, not a folder"),
        (["train", "ptb-small-vd", "--data", str(tiny_corpus), "--out", "afile/run", *small], 2, "cannot write there"),
        (["tag", "train", "--out", "afile/run"], 2, "cannot write there"),  # an OSError traceback before
        (["translate", "train", "--out", "afile/run"], 2, "cannot write there"),
    ]
    for args, code, msg in cases:
        got, err = _cli(args, capsys)
        assert got == code and msg in err and len(err.splitlines()) == 1 and "Traceback" not in err, (args, err)
    assert "ptb-awd" not in _cli(["train", "ptb-smal-vd"], capsys)[1]
    assert not (tmp_path / "runs" / "ptb-small-vd").exists()  # none of them left a run folder behind

    # divergence: a clear message, no OverflowError, and no "last good checkpoint" that does not exist
    got, err = _cli(
        ["train", "ptb-small-vd", "--data", str(tiny_corpus), "--out", "div", "--set", "train.lr=1e6", *small], capsys
    )
    assert got == 1 and "training diverged" in err and "no checkpoint was written yet" in err, err
    assert "a lower train.lr (now 1e+06) or a lower train.clip (now 5)" in err, err  # the settings it ran with
    got, err = _cli(
        ["train", "ptb-small-vd", "--data", str(tiny_corpus), "--out", "div", "--set", "train.lr=1e6", *small]
        + ["--set", "train.clip=0"],
        capsys,
    )
    assert got == 1 and "or gradient clipping (train.clip > 0; now off)" in err, err  # not "a lower" clip of 0
    # a run trained with a relative corpus folder evaluates and resumes from elsewhere
    rel = _corpus(tmp_path / "mine", words, valid=words[:400], test=words[:400])
    got, _ = _cli(
        ["train", "ptb-small-vd", "--data", "mine", "--out", "rel", "--set", "train.epochs=1", *small], capsys
    )
    assert got == 0 and Config.load(tmp_path / "rel" / "config.toml").data.name == str(rel)
    monkeypatch.chdir(tiny_corpus)
    assert main(["evaluate", str(tmp_path / "rel")]) == 0
    # run folders: a missing vocab.txt, a damaged checkpoint
    (tmp_path / "rel" / "vocab.txt").rename(tmp_path / "vocab.bak")
    got, err = _cli(["evaluate", str(tmp_path / "rel")], capsys)
    assert got == 1 and "vocab.txt is missing" in err
    (tmp_path / "vocab.bak").rename(tmp_path / "rel" / "vocab.txt")
    (tmp_path / "rel" / "checkpoints" / "best.safetensors").write_bytes(b"garbage")
    got, err = _cli(["evaluate", str(tmp_path / "rel")], capsys)
    assert got == 1 and "--checkpoint last" in err and len(err.splitlines()) == 1


def test_init_from_starts_from_another_runs_final_weights(tiny_corpus, tmp_path, capsys):
    """Inan et al.'s footnote 4 (arXiv): re-train a model from its own final weights, with a fresh schedule."""
    assert _train(tiny_corpus, tmp_path / "first") == 0
    first, _ = _weights(tmp_path / "first")
    cfg = _cfg(tiny_corpus, **{"train.init_from": str(tmp_path / "first")})
    tr = LMRun(cfg, tmp_path / "second")
    start = {f"model.{k}": v for k, v in tr.task.model.state_dict().items()}
    assert start.keys() == first.keys() and all(torch.equal(start[k], first[k]) for k in first)
    assert (tmp_path / "second" / "vocab.txt").read_text() == (tmp_path / "first" / "vocab.txt").read_text()
    s = tr.fit()
    assert s["valid_ppl"] < json.loads((tmp_path / "first" / "summary.json").read_text())["valid_ppl"] * 1.5

    capsys.readouterr()
    code = _train(
        tiny_corpus,
        tmp_path / "third",
        "train.init_from=" + str(tmp_path / "first"),
        "model.encoder.hidden_size=24",
        "model.embedding_size=24",
    )
    err = capsys.readouterr().err.strip()
    assert code == 2 and "train.init_from" in err and "architecture" in err and len(err.splitlines()) == 1
    assert _train(tiny_corpus, tmp_path / "fourth", "train.init_from=" + str(tmp_path)) == 2
    assert "no vocab.txt" in capsys.readouterr().err
