"""``tiedlm selfcheck``: the CPU --quick run passes here (CI runs it), and each check can fail."""

import dataclasses
import json
import re
import subprocess
import sys

import pytest
import torch

from tiedlm.cli import main
from tiedlm.selfcheck import MODELS, Check, checks, format_report
from tiedlm.selfcheck.checks import resume_check, sizes_for, train_check
from tiedlm.tasks.lm.config import Config

from conftest import tiny_overrides


@pytest.mark.slow
def test_quick_cpu_selfcheck_passes_and_covers_every_encoder(tmp_path, shared_data):
    """The command as a user runs it: every encoder trains, the SIGTERM resume is exact, the baseline ran."""
    report = tmp_path / "selfcheck.json"
    proc = subprocess.run(
        [sys.executable, "-m", "tiedlm", "selfcheck", "--device", "cpu", "--quick", "--threads", "1"]
        + ["--json-file", str(report)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    record = json.loads(report.read_text())
    checks = {c["name"]: c for c in record["checks"]}
    assert all(c["status"] == "pass" for c in checks.values())
    assert {f"train {name}" for name, _ in MODELS} <= set(checks)
    assert "bit for bit" in checks["resume after SIGTERM"]["detail"]
    base = checks["AWD-LSTM step vs reference-style baseline"]
    assert base["ratio"] > 0 and base["extra"]["baseline_tokens_per_s"] > 0
    assert record["device"].startswith("cpu:") and record["corpus"].startswith("PTB")
    # the header names the checks' thread count (not the process's default) and the host's numerics hash
    assert ", 1 thread, " in record["device"] and re.search(r", numerics [0-9a-f]{16} \|", record["device"])
    assert "selfcheck result: 9 of 9 checks passed, 0 failed" in proc.stdout


def test_resume_check_fails_when_the_resume_is_not_exact(tiny_corpus, tmp_path, monkeypatch):
    """The check compares real weights: a resume that loses the RNG state (other dropout masks) is caught."""
    cfg = Config.load("ptb-awd-tied-budget").with_overrides(
        tiny_overrides(tiny_corpus, **{"model.encoder.hidden_size": "16", "train.epochs": "50"})
    )
    sizes = sizes_for("cpu", quick=True)
    good = resume_check(cfg, tmp_path / "good", sizes)
    assert good.ok and "bit for bit" in good.detail
    monkeypatch.setattr(torch, "set_rng_state", lambda state: None)  # the resumed run draws other masks
    bad = resume_check(cfg, tmp_path / "bad", sizes)
    assert bad.ok is False and "differ" in bad.detail


@pytest.mark.parametrize(
    "readings, ok",
    [((927.1, 813.2, 21_211.8), True), ((927.1, 21_211.8, 15_000.0), False), ((927.1, float("nan"), 700.0), False)],
)
def test_a_training_check_passes_over_one_spike_not_a_divergence(tiny_corpus, tmp_path, monkeypatch, readings, ok):
    """The slice is read three times through the timed windows and the median must beat the untrained model's:
    one transient spike (an H200's eager DRILL row, 2026-11-28: the first two readings) passes, a model whose
    perplexity stays up (two readings over the untrained 10,000) or a non-finite reading fails."""
    cfg = Config.load("ptb-awd-tied-budget").with_overrides(
        tiny_overrides(tiny_corpus, **{"model.encoder.hidden_size": "16", "train.epochs": "50"})
    )
    values = iter([10_000.0, *readings])  # the untrained model's reading, then the three in training
    monkeypatch.setattr(checks, "evaluate", lambda *a, **k: {"ppl": next(values)})
    row = train_check("train x", cfg, tmp_path, dataclasses.replace(sizes_for("cpu", quick=True), timed=3))
    assert row.ok is ok and next(values, None) is None
    assert "(median of 927.1 / " in row.detail


def test_the_fp16_training_row_that_a_gpu_runs_passes_on_the_cpu(tiny_corpus, tmp_path):
    """selfcheck --device cuda trains the AWD-LSTM in fp16 with loss scaling; the same row, here on the CPU, passes
    (learns, no skipped step) and says it trained eagerly."""
    cfg = Config.load("ptb-awd-tied-budget").with_overrides(
        tiny_overrides(tiny_corpus, **{"train.precision": "fp16", "train.epochs": "50"})
    )
    row = train_check("train x [fp16]", cfg, tmp_path, sizes_for("cpu", quick=True))
    assert row.ok, row.detail
    assert row.detail.startswith("eager") and Config.load(tmp_path / "config.toml").train.precision == "fp16"


def test_a_failed_check_fails_the_command(monkeypatch, capsys):
    rows = [Check("train x", True, "eager", 1000.0), Check("train y", False, "RuntimeError: boom")]
    monkeypatch.setattr("tiedlm.selfcheck.run_selfcheck", lambda *a, **k: (rows, {"device": "cpu: t", "corpus": "c"}))
    assert main(["selfcheck", "--quick"]) == 1
    out = capsys.readouterr().out
    assert "FAIL" in out and "RuntimeError: boom" in out and "1 of 2 checks passed" in out
    text = format_report(rows, {"device": "cpu: t", "corpus": "c"})
    assert text.splitlines()[5].split()[:3] == ["train", "x", "pass"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message of a machine without a GPU")
def test_selfcheck_on_a_missing_gpu_is_one_line(capsys):
    assert main(["selfcheck", "--device", "cuda"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no CUDA GPU" in err


def test_the_baseline_check_times_the_padded_step_it_times_on_a_gpu(tiny_corpus):
    """The padded variant that `selfcheck --device cuda` adds (tiedlm's step at shapes rounded up) runs and is
    reported, here on the CPU at 22 units padded to 24."""
    from tiedlm.selfcheck.checks import baseline_check

    cfg = Config.load("ptb-awd-tied-budget").with_overrides(
        tiny_overrides(tiny_corpus, **{"model.encoder.hidden_size": "22", "train.bptt": "6"})
    )
    check = baseline_check(cfg, torch.device("cpu"), sizes_for("cpu", quick=True), vocab=60, padding=(8, 8))
    assert check.ok and check.extra["padded_tokens_per_s"] > 0 and check.extra["baseline_tokens_per_s"] > 0
    assert "padded to multiples of 8 units and 8 rows" in check.detail
