import json

import numpy as np
import pytest
import scipy.linalg
import torch

from tiedlm.analysis import subspace_distance
from tiedlm.errors import UsageError

from conftest import flat_config


def _rand(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape)


def test_zero_for_equal_spans_and_basis_invariant():
    x = _rand((50, 6), 0)
    mix = _rand((6, 6), 1)  # an invertible change of basis
    assert subspace_distance(x, x) < 1e-12
    assert subspace_distance(x, x @ mix) < 1e-10
    assert subspace_distance(x @ mix, x) < 1e-10


def test_one_for_orthogonal_spans():
    q, _ = np.linalg.qr(_rand((40, 10), 2))
    assert subspace_distance(q[:, :5], q[:, 5:]) == pytest.approx(1.0, abs=1e-12)


def test_symmetric_and_between_zero_and_one():
    for seed in range(5):
        x, y = _rand((30, 4), seed), _rand((30, 4), seed + 100)
        d = subspace_distance(x, y)
        assert 0.0 < d < 1.0
        assert d == pytest.approx(subspace_distance(y, x), abs=1e-12)


def test_matches_principal_angles_from_scipy():
    # Appendix B: d^2 = mean of sin^2 of the principal angles
    for seed in range(5):
        x, y = _rand((60, 7), seed), _rand((60, 7), seed + 50) + 0.5 * _rand((60, 7), seed)
        angles = scipy.linalg.subspace_angles(x, y)
        assert subspace_distance(x, y) == pytest.approx(np.sqrt(np.mean(np.sin(angles) ** 2)), abs=1e-10)


def test_accepts_torch_tensors_like_model_weights():
    e = torch.randn(100, 8)
    w = e @ torch.randn(8, 8) + 1e-3 * torch.randn(100, 8)
    d = subspace_distance(e, w)
    assert 0.0 < d < 0.05


def test_bad_input_is_a_usage_error():
    with pytest.raises(UsageError, match="same number of rows"):
        subspace_distance(_rand((10, 2), 0), _rand((11, 2), 1))
    with pytest.raises(UsageError, match="linearly dependent"):
        x = _rand((10, 2), 0)
        subspace_distance(np.hstack([x, x[:, :1]]), _rand((10, 3), 1))
    with pytest.raises(UsageError, match="2-D"):
        subspace_distance(np.ones(5), np.ones(5))


def test_subspace_model_output_init_range():
    from tiedlm.tasks.subspace.experiment import SubspaceExperimentConfig, build_model

    zero = build_model(
        50, 0, flat_config(SubspaceExperimentConfig, dict(hidden_size=8, layers=1, output_init_range=0.0))
    )
    assert not zero.output.weight.any() and not zero.output.bias.any()
    assert torch.allclose(zero.embedding.weight.norm(dim=1), torch.ones(50))  # unit-norm input rows (§6.2)
    small = build_model(
        50, 0, flat_config(SubspaceExperimentConfig, dict(hidden_size=8, layers=1, output_init_range=0.01))
    )
    assert 0 < small.output.weight.abs().max() <= 0.01
    same = build_model(
        50,
        0,
        flat_config(SubspaceExperimentConfig, dict(hidden_size=8, layers=1, init_range=0.3, output_init_range=-1)),
    )
    assert same.output.weight.abs().max() > 0.2  # negative: W follows --init-range


@pytest.mark.slow
def test_subspace_experiment_writes_csv_figure_and_resumes(tiny_corpus, tmp_path):
    import csv

    from tiedlm.tasks.subspace.experiment import SubspaceExperimentConfig, run_experiment

    cfg = flat_config(
        SubspaceExperimentConfig,
        dict(
            runs=2,
            betas=[0.0, 1.0],
            taus=[2.0, 10.0],
            slice_words=600,
            hidden_size=12,
            epochs=20,
            batch_size=4,
            bptt=10,
            optimizer="adam",
            lr=1e-2,
            precision="fp32",
            threads=1,
            corpus=str(tiny_corpus),
            vocab="full",
        ),
    )
    out = tmp_path / "exp"
    summary = run_experiment(cfg, out, progress=False, log=lambda *a: None)
    rows = list(csv.DictReader((out / "subspace.csv").open()))
    assert len(rows) == 3 * 2  # points (0,10), (1,10), (1,2); two runs each
    assert not (out / "points").exists()  # the runs' folders go once their rows are written
    assert (out / "subspace.png").stat().st_size > 1000 and "Figure 1" in (out / "summary.md").read_text()
    by = {(p["beta"], p["tau"]): p["mean"] for p in summary["beta_sweep"] + summary["tau_sweep"]}
    # the paper's mechanism, even at this size: training on J_aug alone pulls W towards span(L^T)
    assert by[(1.0, 10.0)] < by[(0.0, 10.0)] - 0.1
    # same seed, same slice: a resumed experiment trains nothing new and keeps the rows
    again = run_experiment(cfg, out, progress=False, log=lambda *a: None)
    assert len(list(csv.DictReader((out / "subspace.csv").open()))) == 6
    assert again["beta_sweep"] == summary["beta_sweep"]


def test_subspace_settings_key_does_not_depend_on_int_or_float_spelling():
    from tiedlm.tasks.subspace.experiment import SubspaceExperimentConfig

    assert (
        flat_config(SubspaceExperimentConfig, dict(lr=1, output_init_range=-1)).settings()
        == flat_config(SubspaceExperimentConfig, dict(lr=1.0, output_init_range=-1.0)).settings()
    )
    assert (
        flat_config(SubspaceExperimentConfig, dict(lr=1)).settings()
        != flat_config(SubspaceExperimentConfig, dict(lr=2)).settings()
    )


def test_random_subspace_distance_matches_sampled_subspaces():
    from tiedlm.tasks.subspace.experiment import random_subspace_distance

    rng = np.random.default_rng(0)
    sampled = [subspace_distance(rng.standard_normal((400, 30)), rng.standard_normal((400, 30))) for _ in range(20)]
    assert abs(np.mean(sampled) - random_subspace_distance(30, 400)) < 0.005
    assert random_subspace_distance(30, 400) < random_subspace_distance(30, 4000) < 1


def test_a_subspace_run_is_a_task_of_the_one_loop_and_a_sigterm_in_it_resumes_exactly(tmp_path, monkeypatch):
    """Each run of the §6.2 experiment trains on the training loop of every task (SubspacePoint): a real SIGTERM
    in the middle of epoch 2 stops it with a checkpoint (the carried LSTM state in it), and the rerun reaches the
    straight run's distance and fit to the last bit. The numbers are pinned: the experiment's own loop, before
    it moved onto the shared one, gave them to the last digit."""
    import os
    import signal

    import tiedlm.tasks.subspace.experiment as se
    from tiedlm.errors import RunInterrupted

    cfg = flat_config(
        se.SubspaceExperimentConfig, dict(hidden_size=12, layers=2, epochs=3, batch_size=4, bptt=10, slice_words=600)
    )
    tokens = torch.randint(0, 50, (600,), generator=torch.Generator().manual_seed(0))
    straight = se.train_point(tokens, 50, 1.0, 10.0, 3, cfg)
    assert straight["distance"] == pytest.approx(0.4947153099876849, abs=3e-5)
    assert straight["train_ppl"] == pytest.approx(69.78641296816583, abs=3e-4)

    real, calls = se.update, {"n": 0}

    def sigterm_in_the_20th_step(*a, **k):  # 15 windows an epoch: window 5 of epoch 2
        calls["n"] += 1
        if calls["n"] == 20:
            os.kill(os.getpid(), signal.SIGTERM)
        return real(*a, **k)

    monkeypatch.setattr(se, "update", sigterm_in_the_20th_step)
    folder = tmp_path / "point"
    with pytest.raises(RunInterrupted, match=r"epoch 2 \(its checkpoint kept\); resume with: tiedlm experiment"):
        se.train_point(tokens, 50, 1.0, 10.0, 3, cfg, folder=folder)
    monkeypatch.setattr(se, "update", real)
    resumed = se.train_point(tokens, 50, 1.0, 10.0, 3, cfg, folder=folder)
    assert (resumed["distance"], resumed["train_ppl"], resumed["train_aug"]) == (
        straight["distance"],
        straight["train_ppl"],
        straight["train_aug"],
    )


def test_experiment_subspace_resume_finishes_with_the_settings_it_started_with(tiny_corpus, tmp_path, capsys):
    """`experiment subspace --resume OUT` takes OUT/config.toml (as `train --resume RUN` does): a row lost to a
    stop is trained again with the first invocation's settings, to the same distance; other settings are refused."""
    import csv

    from tiedlm.cli import main

    out = tmp_path / "exp"
    first = ["experiment", "subspace", "--out", str(out), "--data", str(tiny_corpus), "--slice-words", "800"]
    first += ["--epochs", "2", "--betas", "0", "1", "--taus", "10", "--runs", "1", "--lr", "0.5", "--vocab", "full"]
    first += ["--hidden-size", "12"]
    assert main([*first, "--threads", "1", "--no-progress"]) == 0
    rows = list(csv.DictReader((out / "subspace.csv").open()))
    assert [(r["beta"], r["tau"]) for r in rows] == [("0.0", "10.0"), ("1.0", "10.0")]
    # one run a point: no spread is claimed (not an sd of 0)
    assert [p["std"] for p in json.loads((out / "summary.json").read_text())["beta_sweep"]] == [None, None]
    assert "| a | 0 | 10 | 1 | " in (out / "summary.md").read_text() and " | – | " in (out / "summary.md").read_text()
    lines = (out / "subspace.csv").read_text().splitlines(keepends=True)
    (out / "subspace.csv").write_text("".join(lines[:-1]))  # the last point's row never written: a stop
    capsys.readouterr()
    assert main(["experiment", "subspace", "--resume", str(out), "--no-progress", "--threads", "1"]) == 0
    again = list(csv.DictReader((out / "subspace.csv").open()))
    assert again == rows[:1] + [{**rows[1], "seconds": again[1]["seconds"]}]  # the same distance, to the digit
    assert main(["experiment", "subspace", "--out", str(out), "--resume", "--no-progress"]) == 0  # nothing left
    assert len(list(csv.DictReader((out / "subspace.csv").open()))) == 2
    capsys.readouterr()
    assert main(["experiment", "subspace", "--resume", str(out), "--epochs", "3", "--lr", "1.0"]) == 2
    err = capsys.readouterr().err
    assert "drop --epochs, --lr" in err  # given options are settings, whatever their value
    assert main(["experiment", "subspace", "--resume", str(tmp_path / "none")]) == 2
    assert "holds no subspace experiment to resume" in capsys.readouterr().err
    assert not (tmp_path / "none").exists()
    # a new experiment never writes over another one's settings and rows, nor over another kind of run
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    assert main([*first[:-2], "--hidden-size", "12", "--taus", "5", "--threads", "1", "--no-progress"]) == 2
    assert f"{out} already holds a subspace experiment run; resume it with --resume {out}" in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before
    lm = tmp_path / "lm"
    lm.mkdir()
    (lm / "config.toml").write_text('task = "lm"\n[data]\nname = "ptb"\n')
    (lm / "summary.json").write_text("{}")
    assert main(["experiment", "subspace", "--out", str(lm), "--data", str(tiny_corpus), "--no-progress"]) == 2
    assert "already holds a language model run; pick another --out" in capsys.readouterr().err
    assert (lm / "config.toml").read_text() == 'task = "lm"\n[data]\nname = "ptb"\n'
    assert (lm / "summary.json").read_text() == "{}"


def test_experiment_subspace_trains_at_its_precision_and_a_resumed_sweep_keeps_its_threads(
    tiny_corpus, tmp_path, monkeypatch, capsys
):
    """`--set train.precision=bf16` trains every point's steps in bf16; `--threads 0` takes the free cores (two)
    and the experiment records that count before its first step, so a sweep stopped by SIGTERM in its first point
    and resumed while another process holds a core trains on at two threads (the count asked of PyTorch, each
    run computing on one real thread)."""
    import os
    import signal

    import torch

    from tiedlm import runtime
    from tiedlm.cli import main
    from tiedlm.tasks.subspace import experiment
    from tiedlm.tasks.subspace.config import SubspaceExperimentConfig

    monkeypatch.delenv("TIEDLM_THREADS", raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    busy = {"cores": 0.0}
    monkeypatch.setattr(runtime, "busy_cores", lambda interval=0.2: busy["cores"])
    asked, one_thread, seen = {"n": 1}, torch.set_num_threads, []

    def ask(n):
        asked["n"] = n
        one_thread(1)

    monkeypatch.setattr(torch, "set_num_threads", ask)
    real_autocast, real_update, steps = experiment.autocast, experiment.update, {"n": 0}

    def autocast(device, precision):  # every training step's precision and thread count
        seen.append((precision, asked["n"]))
        return real_autocast(device, precision)

    def update(*a, **k):  # a SIGTERM in the 3rd step of the first point
        steps["n"] += 1
        if steps["n"] == 3:
            os.kill(os.getpid(), signal.SIGTERM)
        return real_update(*a, **k)

    monkeypatch.setattr(experiment, "autocast", autocast)
    monkeypatch.setattr(experiment, "update", update)
    out = tmp_path / "exp"
    args = ["experiment", "subspace", "--out", str(out), "--data", str(tiny_corpus), "--slice-words", "800"]
    args += ["--epochs", "1", "--betas", "0", "1", "--taus", "10", "--runs", "1", "--hidden-size", "12"]
    assert main([*args, "--set", "train.precision=bf16", "--threads", "0", "--no-progress"]) == 130
    assert "resume with: tiedlm experiment subspace --resume" in capsys.readouterr().err
    saved = SubspaceExperimentConfig.load_run(out)
    assert (saved.train.threads, saved.train.precision) == (2, "bf16")
    busy["cores"] = 1.0  # threads = 0 would take one core now
    assert main(["experiment", "subspace", "--resume", str(out), "--no-progress"]) == 0
    assert steps["n"] > 3 and set(seen) == {("bf16", 2)}
    assert "resuming at the 2 threads it started with" in capsys.readouterr().out
    rows = (out / "subspace.csv").read_text().splitlines()
    assert len(rows) == 1 + 2
