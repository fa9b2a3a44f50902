"""predict with two runs side by side, the §6.4 word statistics, and ``tiedlm report``."""

import json
import re

import pytest
import torch

from tiedlm.analysis.paper import paper_row, variant_name
from tiedlm.analysis.word_stats import mean_word_probabilities
from tiedlm.cli import main
from tiedlm.run import load_run
from tiedlm.tasks.lm.config import Config

from conftest import tiny_overrides


@pytest.fixture
def two_runs(tiny_corpus, tmp_path):
    runs = []
    for preset in ("ptb-small-vd", "ptb-small-real"):
        out = tmp_path / preset
        args = ["train", preset, "--out", str(out), "--no-progress"]
        for o in tiny_overrides(tiny_corpus):
            args += ["--set", o]
        assert main(args) == 0
        runs.append(out)
    return runs


def test_predict_two_runs_side_by_side_with_word_stats(two_runs, capsys):
    capsys.readouterr()
    a, b = map(str, two_runs)
    assert main(["predict", a, b, "w1 w2", "--top", "3", "--word-stats", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    (table,) = out["tables"]
    assert [len(m["predictions"]) for m in table["models"]] == [3, 3]
    stats = out["word_stats"][b]
    assert set(stats) == {"<unk>", "_tokens"}  # the tiny corpus has <unk> but no "a"/"an"/"the"
    assert 0 < stats["<unk>"]["mean_prob"] < 1 and 0 <= stats["<unk>"]["frequency"] < 1
    assert main(["predict", a, b, "w1 w2", "--top", "3"]) == 0
    text = capsys.readouterr().out
    assert "ptb-small-vd" in text and "ptb-small-real" in text and " 3. " in text


def test_mean_word_probabilities_equal_a_direct_softmax_average(two_runs):
    run = load_run(two_runs[0])
    ids = torch.randint(0, len(run.vocab), (4 * 9 + 1,))
    stats = mean_word_probabilities(run.model, run.vocab, ids, words=("w0", "w1"), batch_size=4, bptt=5)
    # direct: the same streams, one long window each
    data = ids[: (ids.numel() // 4) * 4].view(4, -1).t()
    with torch.no_grad():
        logits, _ = run.model(data[:-1], run.model.init_state(4))
    p = torch.softmax(logits.float(), -1)[..., [run.vocab.index["w0"], run.vocab.index["w1"]]].reshape(-1, 2)
    assert stats["_tokens"] == p.size(0)
    assert stats["w0"]["mean_prob"] == pytest.approx(p[:, 0].mean().item(), rel=1e-4)
    assert stats["w1"]["mean_prob"] == pytest.approx(p[:, 1].mean().item(), rel=1e-4)


def test_predict_errors_are_one_line(tmp_path, capsys):
    assert main(["predict", str(tmp_path), "the company"]) == 2
    assert "not a run directory" in capsys.readouterr().err


def test_report_collects_runs_with_paper_numbers(two_runs, tmp_path):
    out = tmp_path / "report"
    assert main(["report", *map(str, two_runs), "--out", str(out)]) == 0
    md = (out / "report.md").read_text()
    assert (out / "valid_ppl.png").stat().st_size > 1000
    assert "| ptb-small-vd |" in md and "| ptb-small-real |" in md and "finished" in md
    assert re.search(r"- wall time \d+ s, training", md), md  # a run of seconds is not "0.00 h" or "0.0 min"
    # the tiny runs read as data = the corpus folder, so no paper row matches them
    cfg = Config.load("ptb-small-real")
    assert paper_row(cfg)["test"] == pytest.approx(82.7) and variant_name(True, "tied") == "REAL"
    assert paper_row(Config.load("ptb-medium-vd"))["valid"] == pytest.approx(82.0)
    # an unfinished run (no summary.json yet) still gets its parameter count, from config and vocabulary
    finished_row = next(line for line in md.splitlines() if line.startswith("| ptb-small-real |"))
    (two_runs[1] / "summary.json").unlink()
    assert main(["report", *map(str, two_runs), "--out", str(out)]) == 0
    row = next(line for line in (out / "report.md").read_text().splitlines() if line.startswith("| ptb-small-real |"))
    assert row.split("|")[4] == finished_row.split("|")[4] and "M" in row.split("|")[4] and "stopped" in row


def test_analyze_bands_bins_tokens_by_training_frequency(two_runs, tmp_path, capsys):
    from tiedlm.analysis.bands import band_of_counts, band_table

    counts = torch.tensor([0, 1, 9, 10, 99, 100, 5000, 20000])
    assert band_of_counts(counts).tolist() == [-1, 0, 0, 1, 1, 2, 3, 4]
    targets = torch.tensor([1, 3, 3, 6])
    t = band_table(counts, targets, {"a": torch.tensor([1.0, 2.0, 4.0, 3.0]), "b": torch.tensor([2.0, 1.0, 2.0, 3.0])})
    r = {row["band"]: row for row in t["rows"]}
    assert r["1-10"]["word_types"] == 2 and r["1-10"]["tokens"] == 1 and r["1-10"]["relative_ce"]["b"] == 1.0
    assert r["10-100"]["ce"]["a"] == 3.0 and r["10-100"]["relative_ce"]["b"] == pytest.approx(-0.5)
    assert r["100-1k"]["tokens"] == 0 and r["100-1k"]["relative_ce"]["b"] is None

    capsys.readouterr()
    out = tmp_path / "bands"
    assert main(["analyze", "bands", *map(str, two_runs), "--split", "valid", "--out", str(out), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert (out / "bands.png").stat().st_size > 0 and "| band |" in (out / "bands.md").read_text()
    assert main(["evaluate", str(two_runs[1]), "--split", "valid", "--json"]) == 0
    ev = json.loads(capsys.readouterr().out)
    assert got["overall_ce"]["ptb-small-real"] == pytest.approx(ev["loss"], rel=1e-5)  # same tokens, same model
    assert sum(r["tokens"] for r in got["rows"]) == ev["tokens"]  # every token in exactly one band


def test_band_analyses_merge_against_the_baseline_and_refuse_other_bands():
    """Runs analysed at different times stand in one table: a run's CE per band is its own, its relative CE is
    recomputed against the baseline's, (CE_run - CE_base) / CE_base; other bands are refused in one line."""
    from tiedlm.analysis.bands import band_table, merge_band_tables
    from tiedlm.errors import UsageError

    counts, targets = torch.tensor([0, 1, 9, 10, 99, 100]), torch.tensor([1, 3, 3, 2])
    ce = {"tied": torch.tensor([1.0, 2.0, 4.0, 3.0]), "dual": torch.tensor([2.0, 1.0, 2.0, 6.0])}
    ce["drill"] = torch.tensor([0.5, 4.0, 4.0, 1.5])

    def table(names):
        return {**band_table(counts, targets, {n: ce[n] for n in names}), "split": "test", "data": "ptb"}

    merged = merge_band_tables([table(["tied", "dual"]), table(["drill"])], "tied", ["dual", "tied", "drill"])
    assert merged["runs"] == ["tied", "dual", "drill"] and merged["split"] == "test"
    r = {row["band"]: row for row in merged["rows"]}
    # band 1-10 holds tokens 0 and 3 (words 1 and 2): tied (1+3)/2 = 2, drill (0.5+1.5)/2 = 1 -> -50%
    assert r["1-10"]["ce"] == {"tied": 2.0, "dual": 4.0, "drill": 1.0}
    assert r["1-10"]["relative_ce"] == {"dual": 1.0, "drill": -0.5}
    assert r["10-100"]["relative_ce"] == {"dual": -0.5, "drill": pytest.approx(1 / 3)}
    assert merged["overall_ce"]["drill"] == pytest.approx(2.5)
    assert r["100-1k"]["relative_ce"] == {"dual": None, "drill": None}  # no tokens in that band
    other = table(["drill"])
    other["rows"][0]["tokens"] += 1  # another evaluation batch: other tokens in the bands
    with pytest.raises(UsageError, match="not of the same corpus, split and bands"):
        merge_band_tables([table(["tied"]), other], "tied", [])
    with pytest.raises(UsageError, match="no band analysis holds the baseline 'tied'"):
        merge_band_tables([table(["drill"])], "tied", [])


def test_augmented_gradient_ratio_is_a_median_that_skips_certain_tokens(monkeypatch):
    """One token the model is certain of (p = 1 in fp32, CE gradient exactly 0) made the old mean of
    per-token ratios infinite; the median leaves it out and counts it. Reference: SciPy's softmax and
    NumPy's median over the gradients written out from Inan et al. eqs. (3.1), (3.4), (3.7)."""
    import numpy as np
    from scipy.special import softmax

    from tiedlm.analysis import augmented_targets
    from tiedlm.analysis.augmented_targets import augmented_loss_strength, strength_markdown

    gen = torch.Generator().manual_seed(0)
    vocab, dim, gamma, tau = 7, 3, 0.6, 2.0
    emb = torch.randn(vocab, dim, generator=gen)
    windows = [(torch.randn(4, vocab, generator=gen), torch.tensor([0, 3, 5, 6])) for _ in range(2)]
    windows[1][0][2, 5] = 200.0  # p(target = 5) rounds to 1 in fp32
    monkeypatch.setattr(augmented_targets, "stream_logits", lambda *a, **k: iter(windows))
    model = type("M", (), {"input_embeddings": emb, "output_bias": None})()
    res = augmented_loss_strength(model, torch.zeros(0), [tau], gamma)
    (row,) = res["rows"]

    logits = np.concatenate([w[0].double().numpy() for w in windows])
    y = np.concatenate([w[1].numpy() for w in windows])
    e = emb.double().numpy()
    ce = np.linalg.norm(softmax(logits.astype(np.float32), -1) - np.eye(vocab)[y], axis=-1)
    aug = gamma * np.linalg.norm(softmax(logits / tau, -1) - softmax(e[y] @ e.T / tau, -1), axis=-1)
    assert (ce == 0).sum() == 1 and res["zero_ce_grad_tokens"] == 1
    with np.errstate(divide="ignore"):
        assert np.isinf((aug / ce).mean())  # the statistic this replaces
    assert row["ratio_median"] == pytest.approx(np.median(aug[ce > 0] / ce[ce > 0]), rel=1e-5)
    assert row["ratio_of_means"] == pytest.approx(aug.mean() / ce.mean(), rel=1e-5)
    md = strength_markdown("toy", res)
    assert f"{row['ratio_median']:.5f}" in md and "gradient of exactly 0 (p = 1), left out of the median: 1." in md


def test_analyze_augmented_matches_the_augmented_loss_and_tends_to_uniform(two_runs, tmp_path, capsys, monkeypatch):
    from tiedlm.analysis.augmented_targets import augmented_loss_strength, target_distribution
    from tiedlm.evaluation import stream_logits
    from tiedlm.losses import AugmentedLoss

    run = load_run(two_runs[1])  # REAL: W = L^T, b = 0
    ids = torch.randint(0, len(run.vocab), (4 * 12 + 1,))
    taus = [1.0, 2.0, 20.0, 1e6]
    res = augmented_loss_strength(run.model, ids, taus, gamma=0.5, batch_size=4, bptt=5)
    rows = {r["tau"]: r for r in res["rows"]}
    # independent references: the fused AugmentedLoss for J_aug, and p - e_y / eq. (3.7) by hand
    aug, ce_grad, mass, n = 0.0, 0.0, 0.0, 0
    emb = run.model.input_embeddings.detach()
    with torch.inference_mode():
        for logits, y in stream_logits(run.model, ids, 4, 5):
            aug += AugmentedLoss(tau=2.0)(logits, y, emb).item() * y.numel()
            ce_grad += (torch.softmax(logits, -1) - torch.nn.functional.one_hot(y, logits.size(-1))).norm(dim=-1).sum()
            yt = target_distribution(emb, y, 2.0)
            assert torch.allclose(yt.sum(-1), torch.ones(y.numel()))
            mass += yt.gather(1, y[:, None]).sum().item() * len(run.vocab)
            n += y.numel()
    assert res["tokens"] == n
    assert rows[2.0]["aug"] == pytest.approx(aug / n, rel=1e-4)
    assert rows[2.0]["ce_grad"] == pytest.approx(ce_grad.item() / n, rel=1e-4)
    assert rows[2.0]["target_mass"] == pytest.approx(mass / n, rel=1e-4)
    # the entropy of y~ grows with tau and reaches log|V| (eq. 4.2); the pull vanishes with it
    entropies = [rows[t]["entropy"] for t in taus]
    assert entropies == sorted(entropies) and rows[1e6]["kl_to_uniform"] < 1e-6
    assert rows[1e6]["aug_grad"] < 1e-4 * rows[1.0]["aug_grad"]

    capsys.readouterr()
    out = tmp_path / "aug"
    assert (
        main(
            [
                "analyze",
                "augmented",
                str(two_runs[1]),
                "--split",
                "valid",
                "--tau",
                "2",
                "20",
                "--json",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    got = json.loads(capsys.readouterr().out)
    (only,) = got.values()
    assert [r["tau"] for r in only["rows"]] == [2.0, 20.0] and only["augmented"] is True
    assert json.loads((out / "augmented.json").read_text()) == got and "| τ |" in (out / "augmented.md").read_text()
    assert main(["analyze", "augmented", str(two_runs[1]), "--tau", "0"]) == 2
    assert "expected a finite number > 0" in capsys.readouterr().err
    # a folder that is not a run, after one that is: refused before any run is analysed
    analysed = []
    monkeypatch.setattr("tiedlm.analysis.augmented_targets.augmented_loss_strength", lambda *a, **k: analysed.append(a))
    assert main(["analyze", "augmented", str(two_runs[1]), str(tmp_path), "--tau", "2"]) == 2
    assert "not a tiedlm run directory" in capsys.readouterr().err and analysed == []


def test_plots_with_nothing_labelled_draw_no_legend_and_warn_nothing(tmp_path):
    """matplotlib's "No artists with labels found to put in legend" leaked from `report` and `analyze bands`
    (a bands table of one run, a report of runs without epochs)."""
    import warnings

    from tiedlm.analysis.bands import plot_bands
    from tiedlm.analysis.report import plot_curves

    table = {
        "baseline": "a",
        "runs": ["a"],
        "rows": [{"band": "1-10", "word_types": 5, "tokens": 9, "relative_ce": {}}],
    }
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        plot_bands(table, tmp_path / "bands.png")
        plot_curves([], tmp_path / "curves.png")
    assert (tmp_path / "bands.png").stat().st_size > 0 and (tmp_path / "curves.png").stat().st_size > 0


def test_the_curves_draw_a_rows_paper_line_once_whatever_its_seeds(tmp_path, monkeypatch):
    """Two seeds of one row share its paper figure: one dashed line, labelled once; another row's is its own."""
    import matplotlib.axes

    from tiedlm.analysis.report import plot_curves

    drawn = []
    monkeypatch.setattr(matplotlib.axes.Axes, "axhline", lambda self, y, **kw: drawn.append((y, kw["label"])))
    metrics = [{"epoch": 1, "valid_ppl": 120.0}, {"epoch": 2, "valid_ppl": 100.0}]
    re, vd = Config.load("ptb-small-re"), Config.load("ptb-small-vd")
    runs = [{"name": n, "metrics": metrics, "config": c} for n, c in (("re", re), ("re-seed2", re), ("vd", vd))]
    plot_curves(runs, tmp_path / "curves.png")
    assert drawn == [
        (paper_row(re)["valid"], "paper valid 89.9 (RE)"),
        (paper_row(vd)["valid"], "paper valid 92.6 (VD)"),
    ]
