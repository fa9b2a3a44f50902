"""Dynamic evaluation (Krause et al. 2018): scoring before updating, adaptation helps, the run is untouched."""

import hashlib
import json

import torch

from tiedlm.cli import main
from tiedlm.dynamic_evaluation import DynamicEvalSettings, dynamic_evaluate, gradient_rms
from tiedlm.evaluation import evaluate
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
    assert all((r >= 0).all() for r in rms) and any((r > 0).any() for r in rms)
    ids = torch.randint(0, len(run.vocab), (201,))
    frozen = DynamicEvalSettings(lr=0.0, lamb=0.0, batch_size=2, bptt=5)
    static = evaluate(run.model, ids, batch_size=2, bptt=5)
    assert abs(dynamic_evaluate(run.model, ids, rms, frozen)["loss"] - static["loss"]) < 1e-5
    phrase = torch.randint(0, len(run.vocab), (12,))
    repeated = phrase.repeat(40)  # a text that repeats itself: adaptation must pay off
    adapted = dynamic_evaluate(run.model, repeated, rms, DynamicEvalSettings(lr=0.01, lamb=0.0, bptt=5))
    assert adapted["ppl"] < 0.5 * evaluate(run.model, repeated, batch_size=1, bptt=5)["ppl"]
    assert all(torch.equal(a, b) for a, b in zip(before, run.model.parameters()))  # the caller's model untouched


def test_evaluate_dynamic_cli_with_grid_leaves_the_run_unchanged(tiny_corpus, tmp_path, capsys):
    run = _train(tiny_corpus, tmp_path / "run")
    digest = lambda: {p.name: hashlib.sha256(p.read_bytes()).hexdigest()  # noqa: E731
                      for p in sorted(run.rglob("*")) if p.is_file()}
    saved = digest()
    capsys.readouterr()
    assert main(["evaluate", str(run), "--dynamic", "--grid", "--grid-lrs", "0.001", "0.01", "--grid-lambdas", "0.02",
                 "--stat-tokens", "300", "--grid-tokens", "200", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert len(out["grid"]) == 2 and out["settings"]["lr"] == min(out["grid"], key=lambda g: g["valid_ppl"])["lr"]
    assert out["dynamic_ppl"] > 1 and out["static_ppl"] > 1
    assert digest() == saved
    assert main(["evaluate", str(run), "--dynamic", "--dyn-bptt", "0"]) == 2
