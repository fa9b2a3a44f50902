"""Dynamic evaluation (Krause et al. 2018): scoring before updating, adaptation helps, the run is untouched."""

import copy
import hashlib
import json
import math

import torch
import torch.nn.functional as F

from tiedlm.cli import main
from tiedlm.evaluation import evaluate
from tiedlm.evaluation.dynamic import (
    DynamicEvalSettings,
    dynamic_evaluate,
    dynamic_step,
    effective_settings,
    gradient_rms,
)
from tiedlm.run import load_run

from conftest import tiny_overrides


def _train(corpus, out):
    args = ["train", "ptb-small-re", "--out", str(out), "--no-progress"]
    for o in tiny_overrides(corpus):
        args += ["--set", o]
    assert main(args) == 0
    return out


def test_dynamic_evaluation_scores_before_it_adapts_and_helps_on_repetitive_text(tiny_corpus, tmp_path):
    run = load_run(_train(tiny_corpus, tmp_path / "run"))
    before = [p.detach().clone() for p in run.model.parameters()]
    settings = DynamicEvalSettings(batch_size=2, bptt=5, stat_tokens=400)
    rms = gradient_rms(run.model, torch.randint(0, len(run.vocab), (2000,)), settings)
    assert all((r >= 0).all() for r in rms.rms) and any((r > 0).any() for r in rms.rms)
    ids = torch.randint(0, len(run.vocab), (201,))
    frozen = DynamicEvalSettings(lr=0.0, lamb=0.0, batch_size=2, bptt=5)
    static = evaluate(run.model, ids, batch_size=2, bptt=5)
    assert abs(dynamic_evaluate(run.model, ids, rms, frozen)["loss"] - static["loss"]) < 1e-5
    phrase = torch.randint(0, len(run.vocab), (12,))
    repeated = phrase.repeat(40)  # a text that repeats itself: adaptation must pay off
    adapted = dynamic_evaluate(run.model, repeated, rms, DynamicEvalSettings(lr=0.01, lamb=0.0, epsilon=1e-3, bptt=5))
    assert adapted["ppl"] < 0.5 * evaluate(run.model, repeated, batch_size=1, bptt=5)["ppl"]
    assert all(torch.equal(a, b) for a, b in zip(before, run.model.parameters()))  # the caller's model untouched


def test_evaluate_dynamic_cli_with_grid_leaves_the_run_unchanged(tiny_corpus, tmp_path, capsys):
    run = _train(tiny_corpus, tmp_path / "run")

    def digest():
        return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(run.rglob("*")) if p.is_file()}

    saved = digest()
    capsys.readouterr()
    assert (
        main(
            [
                "evaluate",
                str(run),
                "--dynamic",
                "--grid",
                "--grid-lrs",
                "0.001",
                "0.01",
                "--grid-lambdas",
                "0.02",
                "--stat-tokens",
                "300",
                "--grid-tokens",
                "200",
                "--json",
            ]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert len(out["grid"]) == 2 and out["settings"]["lr"] == min(out["grid"], key=lambda g: g["valid_ppl"])["lr"]
    assert out["dynamic_ppl"] > 1 and out["static_ppl"] > 1
    assert digest() == saved
    assert main(["evaluate", str(run), "--dynamic", "--dyn-bptt", "0"]) == 2


def _paper_statistics(model, ids, streams, bptt):
    """MS written out: sqrt of the mean over training segments of the squared gradient (dropout off)."""
    n = ids.numel() // streams
    data = ids[: n * streams].view(streams, n).t()
    model.eval()
    params = list(model.parameters())
    sq, segments, state = [torch.zeros_like(p) for p in params], 0, model.init_state(streams)
    for i in range(0, n - 1, bptt):
        x, y = data[i : i + bptt], data[i + 1 : i + 1 + bptt]
        x = x[: y.size(0)]
        logits, state = model(x, state)
        state = [tuple(t.detach() for t in s) for s in state]
        grads = torch.autograd.grad(F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1)), params)
        sq = [a + g * g for a, g in zip(sq, grads)]
        segments += 1
    return [torch.sqrt(a / segments) for a in sq], segments


def test_dynamic_evaluation_follows_krause_et_al_written_out(tiny_corpus, tmp_path):
    """Krause et al. (2018) eq. 9 with the global decay, step by step from the weights *before* each step:
    θ ← θ − η g/(MS + ε) + λ (MS / mean_p mean(MS_p)) ⊙ (θ⁰ − θ), decay rate clipped at 1/λ."""
    run = load_run(_train(tiny_corpus, tmp_path / "run"))
    torch.manual_seed(3)
    train_ids = torch.randint(0, len(run.vocab), (301,))
    ids = torch.randint(0, len(run.vocab), (16,))
    settings = DynamicEvalSettings(lr=0.03, lamb=0.4, epsilon=1e-3, bptt=5, stat_batch_size=4)
    stats = gradient_rms(run.model, train_ids, settings)
    ms, segments = _paper_statistics(copy.deepcopy(run.model), train_ids, 4, 5)
    assert stats.segments == segments == math.ceil((301 // 4 - 1) / 5)
    assert all(torch.allclose(a, b, rtol=1e-4, atol=1e-9) for a, b in zip(stats.rms, ms))

    model = copy.deepcopy(run.model).eval()
    params = list(model.parameters())
    theta0 = [p.detach().clone() for p in params]
    mean_ms = sum(m.mean() for m in ms) / len(ms)  # averaged over the tensors, not summed
    decrate = [torch.clamp(m / mean_ms, max=1 / settings.lamb) for m in ms]
    total, count, state = 0.0, 0, model.init_state(1)
    for i in range(0, ids.numel() - 1, 5):
        x, y = ids[i : i + 5, None], ids[i + 1 : i + 6, None]
        x = x[: y.size(0)]
        logits, state = model(x, state)
        state = [tuple(t.detach() for t in s) for s in state]
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1))
        total, count = total + loss.item() * y.numel(), count + y.numel()
        grads = torch.autograd.grad(loss, params)
        with torch.no_grad():
            new = [
                p - settings.lr * g / (m + settings.epsilon) + settings.lamb * d * (p0 - p)
                for p, g, m, d, p0 in zip(params, grads, ms, decrate, theta0)
            ]
            for p, v in zip(params, new):
                p.copy_(v)
    res = dynamic_evaluate(run.model, ids, stats, settings, return_model=True)
    assert res["tokens"] == count == 15
    assert abs(res["loss"] - total / count) < 1e-5
    for a, b in zip(res["model"].parameters(), params):
        assert torch.allclose(a, b, rtol=1e-4, atol=1e-6)


def test_dynamic_step_decays_from_the_weights_before_the_step():
    """With λ·decrate = 1 (the clip) the decay returns θ to θ⁰ and the gradient step is kept: θ⁰ − η g/(MS + ε).
    Applying the decay to the already-updated weights would erase the step."""
    theta0 = torch.tensor([1.0, -2.0, 0.5])
    p = torch.tensor([1.5, -1.0, 0.0])
    p.grad = torch.tensor([0.2, -0.4, 1.0])
    ms = torch.tensor([0.1, 0.2, 0.5])
    dynamic_step([p], [theta0], [ms], [torch.ones(3)], lr=0.01, epsilon=0.1)
    assert torch.allclose(p, theta0 - 0.01 * torch.tensor([0.2, -0.4, 1.0]) / (ms + 0.1))
    q = torch.tensor([1.5, -1.0, 0.0])
    q.grad = p.grad
    k = torch.tensor([0.25, 0.5, 0.0])
    dynamic_step([q], [theta0], [ms], [k], lr=0.01, epsilon=0.1)
    before = torch.tensor([1.5, -1.0, 0.0])
    assert torch.allclose(q, before - 0.01 * q.grad / (ms + 0.1) + k * (theta0 - before))


def test_old_hyper_converts_like_the_reference_oldhyper(tiny_corpus, tmp_path):
    """Krause et al.'s --oldhyper: λ / n_tensors, η / √n_segments, ε / √n_segments."""
    run = load_run(_train(tiny_corpus, tmp_path / "run"))
    settings = DynamicEvalSettings(lr=0.002, lamb=0.02, epsilon=0.001, old_hyper=True, stat_batch_size=4)
    stats = gradient_rms(run.model, torch.randint(0, len(run.vocab), (301,)), settings)
    eff = effective_settings(settings, stats)
    n = len(list(run.model.parameters()))
    assert eff.lamb == 0.02 / n and eff.lr == 0.002 / math.sqrt(stats.segments)
    assert eff.epsilon == 0.001 / math.sqrt(stats.segments) and not eff.old_hyper
    ids = torch.randint(0, len(run.vocab), (41,))
    a = dynamic_evaluate(run.model, ids, stats, settings)
    b = dynamic_evaluate(run.model, ids, stats, eff)
    assert a["loss"] == b["loss"] and a["effective"] == b["effective"]


def test_an_interrupted_dynamic_evaluation_resumes_to_the_same_numbers(tiny_corpus, tmp_path, capsys, monkeypatch):
    """--work DIR keeps the statistics, each grid point and the adapted model: stopped in the middle of the test
    pass (a real SIGTERM inside a segment's update: the pass stops after that segment, saving it), the same
    command finishes with the numbers of an uninterrupted evaluation, to the last bit, without computing the
    statistics or the grid again. It keeps the thread count it started with (``--work``'s threads.json): resumed
    while another process holds a core (the free-core probe now says one), it still runs at two."""
    import os
    import signal

    import tiedlm.evaluation.dynamic as dyn
    from tiedlm import runtime

    run = _train(tiny_corpus, tmp_path / "run")
    monkeypatch.delenv("TIEDLM_THREADS", raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    busy = {"cores": 0.0}
    monkeypatch.setattr(runtime, "busy_cores", lambda interval=0.2: busy["cores"])
    cmd = ["evaluate", str(run), "--dynamic", "--grid", "--grid-lrs", "0.001", "0.01", "--grid-lambdas", "0.02"]
    cmd += ["--stat-tokens", "300", "--grid-tokens", "200", "--split", "test", "--json"]
    capsys.readouterr()
    assert main(cmd) == 0
    whole = json.loads(capsys.readouterr().out)

    real_step, real_stats, calls = dyn.dynamic_step, dyn.gradient_rms, {"steps": 0, "stats": 0}
    segments = sum(g["tokens"] for g in whole["grid"]) // 5  # the grid's updates: the test pass's come after them

    used = set()

    def stopping_step(*a, **k):
        calls["steps"] += 1
        used.add(torch.get_num_threads())
        if calls["steps"] == segments + 40:  # the 40th segment of the test pass
            os.kill(os.getpid(), signal.SIGTERM)  # delivered here, in the middle of the segment
        return real_step(*a, **k)

    monkeypatch.setattr(dyn, "dynamic_step", stopping_step)
    monkeypatch.setattr(dyn, "DEFAULT_SAVE_SECONDS", 1e9)  # no periodic save: the stop itself must save
    work = tmp_path / "work"
    assert main([*cmd, "--work", str(work)]) == 130  # a stopped run's exit code
    assert "run the same command to resume" in capsys.readouterr().err
    assert len((work / "grid.jsonl").read_text().splitlines()) == 2 and (work / "test.safetensors").is_file()
    assert used == {2} and json.loads((work / "threads.json").read_text()) == {"threads": 2}

    def counted_stats(*a, **k):
        calls["stats"] += 1
        return real_stats(*a, **k)

    def counting_step(*a, **k):
        used.add(torch.get_num_threads())
        return real_step(*a, **k)

    monkeypatch.setattr(dyn, "dynamic_step", counting_step)
    monkeypatch.setattr("tiedlm.evaluation.dynamic.gradient_rms", counted_stats)
    calls["steps"], busy["cores"] = 0, 1.0  # another process holds a core now: threads = 0 would take 1
    used.clear()
    assert main([*cmd, "--work", str(work)]) == 0
    out = capsys.readouterr()
    resumed = json.loads(out.out)
    assert used == {2} and "resuming at the 2 threads it started with" in out.err
    assert calls["stats"] == 0  # the statistics and the grid came from --work
    assert resumed["dynamic_ppl"] == whole["dynamic_ppl"] and resumed["grid"] == whole["grid"]
    assert main([*cmd, "--work", str(work)]) == 0  # finished: the result is read back
    assert json.loads(capsys.readouterr().out)["dynamic_ppl"] == whole["dynamic_ppl"]
    assert main([*cmd[:-1], "--dyn-bptt", "7", "--json", "--work", str(work)]) == 2  # other settings: refused
    assert "holds the progress of another dynamic evaluation" in capsys.readouterr().err


def test_grid_with_old_hyper_converts_only_epsilon_as_the_reference_does(tiny_corpus, tmp_path, capsys, monkeypatch):
    """benkrause/dynamic-evaluation with --grid --oldhyper: λ /= n_tensors, η and ε /= √segments, but the grid
    loop then sets lr and lamb to the grid's values, so only ε stays converted. Every grid point and the final
    evaluation must run at the grid's own η and λ."""
    import math

    from tiedlm.evaluation import dynamic

    run = _train(tiny_corpus, tmp_path / "run")
    seen, real = [], dynamic.dynamic_evaluate

    def spy(model, ids, stats, settings, *a, **kw):
        seen.append((dynamic.effective_settings(settings, stats), stats.segments))
        return real(model, ids, stats, settings, *a, **kw)

    monkeypatch.setattr(dynamic, "dynamic_evaluate", spy)
    cmd = ["evaluate", str(run), "--dynamic", "--grid", "--dyn-old-hyper", "--grid-lrs", "3e-5", "--grid-lambdas"]
    cmd += ["0.001", "--dyn-epsilon", "0.001", "--stat-tokens", "300", "--grid-tokens", "200", "--json"]
    capsys.readouterr()
    assert main(cmd) == 0
    out = json.loads(capsys.readouterr().out)
    assert len(seen) == 2  # the grid point, then the test split with the chosen point
    for eff, segments in seen:
        assert eff.lr == 3e-5 and eff.lamb == 0.001
        assert math.isclose(eff.epsilon, 0.001 / math.sqrt(segments), rel_tol=1e-12)
    # the report says the conversion applied: settings as given (original scale), effective ε converted
    assert out["settings"]["old_hyper"] is True and out["settings"]["epsilon"] == 0.001
    assert math.isclose(out["effective"]["epsilon"], 0.001 / math.sqrt(seen[-1][1]), rel_tol=1e-12)
    assert main(cmd[:-1]) == 0  # the text line names the paper scaling too
    assert "= paper scaling lr 3e-05, λ 0.001, ε " in capsys.readouterr().out


def test_dynamic_settings_built_in_python_keep_their_options_bounds():
    """DynamicEvalSettings and Grid refuse in Python what their generated options refuse on the command line."""
    import pytest

    from tiedlm.errors import UsageError
    from tiedlm.evaluation.dynamic_settings import DynamicEvalSettings, Grid

    with pytest.raises(
        UsageError, match=r"DynamicEvalSettings.bptt = 0 is not allowed; expected an integer >= 1 \(--dyn-bptt\)"
    ):
        DynamicEvalSettings(bptt=0)
    with pytest.raises(
        UsageError, match=r"Grid.lrs = \[0.001, -1.0\] is not allowed; expected each value a number >= 0"
    ):
        Grid(lrs=[0.001, -1.0])
    assert DynamicEvalSettings(lr=0.0, stat_tokens=0).lr == 0.0
