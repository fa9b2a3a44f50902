"""AWD-LSTM encoder and its training recipe (Merity et al. 2017): regularisers, windows, NT-ASGD, resume."""

import math

import pytest
import torch
from torch import nn

from tiedlm.data.batching import variable_window_lengths
from tiedlm.errors import RunInterrupted, UsageError
from tiedlm.losses import activation_regularization
from tiedlm.models import AWDLSTM, embedding_dropout, locked_dropout
from tiedlm.models.encoders.lstm_layer import VDLSTMLayer
from tiedlm.tasks.lm.config import Config
from tiedlm.train.checkpoint import load_checkpoint

from conftest import LMRun, migrate_runs, read_metrics, tiny_overrides


def test_weight_drop_masks_w_hh_per_pass_without_replacing_the_parameter():
    torch.manual_seed(0)
    layer = VDLSTMLayer(5, 32, weight_drop=0.5)
    param = layer.weight_hh
    x, s = torch.randn(6, 3, 5), (torch.zeros(3, 32), torch.zeros(3, 32))
    out, _ = layer(x, s)
    out.sum().backward()
    zero = (layer.weight_hh.grad == 0).float().mean().item()
    assert layer.weight_hh is param and 0.4 < zero < 0.6  # dropped weights get no gradient this pass
    assert not torch.equal(layer(x, s)[0], layer(x, s)[0])  # a new mask each pass
    layer.eval()
    assert torch.equal(layer(x, s)[0], layer(x, s)[0])


def test_locked_and_embedding_dropout_masks():
    torch.manual_seed(0)
    x = torch.ones(9, 4, 50)
    y = locked_dropout(x, 0.5, training=True)
    assert torch.equal(y, y[:1].expand_as(y)) and (y == 0).any()  # one mask per sequence, constant over time
    assert torch.equal(locked_dropout(x, 0.5, training=False), x)
    emb = nn.Embedding(20, 8)
    ids = torch.tensor([[3, 3, 3, 5], [5, 3, 5, 3]])
    out = embedding_dropout(emb, ids, 0.5, training=True)
    for w in (3, 5):  # a word type is dropped everywhere or nowhere, scaled by 1/(1-p) when kept
        rows = out[ids == w]
        assert torch.allclose(rows, torch.zeros_like(rows)) or torch.allclose(rows, 2 * emb.weight[w].expand_as(rows))


def test_activation_regularization_formulas():
    raw, dropped = torch.randn(7, 2, 5), torch.randn(7, 2, 5)
    got = activation_regularization(raw, dropped, ar=2.0, tar=1.0)
    want = 2.0 * dropped.pow(2).mean() + (raw[1:] - raw[:-1]).pow(2).mean()
    assert torch.allclose(got, want) and activation_regularization(raw, dropped, 0.0, 0.0).item() == 0


def test_awd_lstm_layer_sizes_and_training_outputs():
    enc = AWDLSTM(8, 24, 3, 8, dropout=0.1, dropout_input=0.1, dropout_hidden=0.1, weight_drop=0.1)
    assert [(layer.input_size, layer.hidden_size) for layer in enc.layers] == [(8, 24), (24, 24), (24, 8)]
    out, state = enc(torch.randn(5, 2, 8), enc.init_state(2, torch.zeros(1)))
    raw, dropped = enc.last_outputs
    assert out is dropped and raw.shape == (5, 2, 8) and [s[0].shape[1] for s in state] == [24, 24, 8]


def test_variable_window_lengths_cover_the_stream_and_are_seeded():
    a = variable_window_lengths(10_000, 70, seed=3)
    assert sum(a) == 10_000 and min(a[:-1]) >= 5 and max(a) <= 110
    assert a == variable_window_lengths(10_000, 70, seed=3) and a != variable_window_lengths(10_000, 70, seed=4)
    assert 60 < sum(a) / len(a) < 72  # mostly bptt, sometimes bptt/2


def _awd_cfg(corpus, **extra):
    over = {
        "model.embedding_size": "12",
        "model.encoder.hidden_size": "20",
        "model.encoder.layers": "3",
        "train.bptt": "10",
        "train.lr": "5",
        "train.epochs": "2",
        "train.optimizer.finetune_epochs": "2",
        "train.optimizer.nonmono": "1",
    }
    over.update(extra)
    return Config.load("ptb-awd-drill-budget").with_overrides(tiny_overrides(corpus, **over))


def test_nt_asgd_triggers_averaging_and_validates_the_average(tiny_corpus, tmp_path):
    tr = LMRun(_awd_cfg(tiny_corpus), tmp_path / "run")
    nt = tr.task.nt_asgd
    for epoch, loss in ((1, 5.0), (2, 5.5)):
        nt.check(loss, epoch, finetuning=False, model=tr.task.model)
    assert nt.averaged is None
    nt.check(
        6.0, 3, finetuning=False, model=tr.task.model
    )  # worse than the best from more than nonmono = 1 epochs back
    assert nt.averaged is not None and tr.task.eval_weights() is nt.averaged.module
    tr.fit()  # averaging through training, then the finetune stage
    best, _ = load_checkpoint(tmp_path / "run" / "checkpoints" / "best.safetensors")
    last, _ = load_checkpoint(tmp_path / "run" / "checkpoints" / "last.safetensors")
    k = "model.embedding.weight"
    assert torch.equal(last["avg.module.embedding.weight"], nt.averaged.module.embedding.weight.detach())
    assert not torch.equal(last[k], last["avg.module.embedding.weight"])  # the raw iterate is not the average


@pytest.mark.parametrize(
    "pads", [{}, {"train.lstm_pad_units": "8", "train.lstm_pad_batch": "3"}], ids=["unpadded", "padded"]
)
def test_awd_resume_mid_finetune_reproduces_uninterrupted_run(tiny_corpus, tmp_path, pads):
    """Weight drop, the variational dropouts and NT-ASGD's average resume exactly, also at padded LSTM shapes
    (20 and 12 units run as 24 and 16, the batch rounded up to a multiple of 3)."""
    cfg = _awd_cfg(tiny_corpus, **pads)
    full = LMRun(cfg, tmp_path / "full")
    s_full = full.fit()
    part = LMRun(cfg, tmp_path / "part")
    n1, n2 = _windows_per_epoch(part, 2)
    with pytest.raises(RunInterrupted):
        part.fit(n1 + n2 + 3)
    assert part.progress.epoch == 3 and part.task.nt_asgd.averaging  # inside the finetune stage
    resumed = LMRun(cfg, tmp_path / "part", resume=True)
    s_res = resumed.fit()
    ma, mb = read_metrics(tmp_path / "full"), read_metrics(tmp_path / "part")
    assert [(m["train_ppl"], m["valid_ppl"]) for m in ma] == [(m["train_ppl"], m["valid_ppl"]) for m in mb]
    assert s_full["test_ppl"] == s_res["test_ppl"]


def test_metrics_record_nt_asgd_stages_as_algorithm_1_triggers_them(tiny_corpus, tmp_path, monkeypatch):
    """Each epoch's record says what its validation measured: the iterate (``sgd``) up to the epoch whose valid
    loss is worse than the best from more than ``nonmono`` epochs back (Merity et al. 2017, Alg. 1, written out
    here on the recorded valid perplexities), NT-ASGD's average from the next epoch on, then the finetune
    stage's; the results plot marks where each stage starts."""
    import matplotlib.axes

    from tiedlm.analysis.report import plot_curves, stage_start

    cfg = _awd_cfg(tiny_corpus, **{"train.epochs": "6", "train.optimizer.finetune_epochs": "3"})
    tr = LMRun(cfg, tmp_path / "run")
    tr.fit()
    metrics = read_metrics(tmp_path / "run")
    losses, n = [math.log(m["valid_ppl"]) for m in metrics], 1
    trigger = next(t for t in range(1, 7) if t - 1 > n and losses[t - 1] > min(losses[: t - 1 - n]))
    assert trigger < 6  # this run switches to averaging inside its 6 epochs (at epoch 3 with these settings)
    expected = ["sgd"] * trigger + ["averaged"] * (6 - trigger) + ["finetune"] * (len(metrics) - 6)
    assert [m["stage"] for m in metrics] == expected and len(metrics) > 6
    assert stage_start(metrics, "averaged") == trigger + 1 and stage_start(metrics, "finetune") == 7

    drawn = []
    monkeypatch.setattr(matplotlib.axes.Axes, "axvline", lambda self, x, **kw: drawn.append((x, kw["label"])))
    plot_curves([{"name": "drill", "metrics": metrics, "config": cfg}], tmp_path / "curves.png")
    assert drawn == [(trigger + 1, f"drill: averaging from {trigger + 1}"), (7, "drill: finetune from 7")]


def _stall_cfg(corpus):
    """The tiny AWD-LSTM with ``stop_on_stall``, 14 epochs and a finetune stage of 3 (it stalls at epoch 6)."""
    cfg = _awd_cfg(corpus, **{"train.epochs": "14", "train.optimizer.finetune_epochs": "3"})
    return cfg.with_overrides(["train.optimizer.stop_on_stall=true"])


def _windows_per_epoch(trainer, epochs: int) -> list[int]:
    """How many BPTT windows each of the first ``epochs`` epochs trains (its seeded variable lengths)."""
    return [len(trainer.task.batches(e)) for e in range(1, epochs + 1)]


def test_stop_on_stall_ends_the_averaged_stage_when_the_average_stalls():
    """``train.optimizer.stop_on_stall``: Alg. 1's non-monotone test applied again to the average's own validations
    (those from the first averaged epoch on) ends the averaged stage; without it the stage runs on (the reference's
    main.py), and the epoch survives a checkpoint."""
    from tiedlm.tasks.lm.nt_asgd import NTASGD

    model = nn.Linear(2, 2)
    losses = [5.0, 5.5, 6.0, 4.0, 3.9, 3.95, 4.1, 3.0]  # trigger at 3 (6.0 > 5.0); the average: 4.0, 3.9, 3.95, 4.1
    # written out: the average's entries before epoch e are losses[3 : e - 1]; it stalls where the loss is worse
    # than their best from more than nonmono = 1 epochs back: epoch 7 (4.1 > min(4.0, 3.9)), not 6 (3.95 < 4.0)
    stall = next(e for e in range(5, 9) if len(losses[3 : e - 1]) > 1 and losses[e - 1] > min(losses[3 : e - 2]))
    assert stall == 7
    on, off = NTASGD(True, 1, log=lambda *a: None, stop_on_stall=True), NTASGD(True, 1, log=lambda *a: None)
    for epoch, loss in enumerate(losses, 1):
        for nt in (on, off):
            nt.check(loss, epoch, finetuning=False, model=model)
        assert on.main_end == (stall if epoch >= stall else None) and off.main_end is None
    again = NTASGD(True, 1, log=lambda *a: None, stop_on_stall=True)
    again.restore(on.tensors(), on.meta(), model)
    assert (again.main_end, again.averaged_from, again.history) == (7, 3, losses)


def test_stop_on_stall_starts_the_finetune_after_the_stall_and_resumes_exactly(tiny_corpus, tmp_path, capsys):
    """A run with ``stop_on_stall``: its records say ``averaged`` from Alg. 1's trigger to the epoch at which the
    average stalls (the rule written out on the recorded valid perplexities), ``finetune`` after it, for at most
    ``finetune_epochs``; a run stopped inside the finetune and resumed gives the same records and test."""
    cfg = _stall_cfg(tiny_corpus)
    full = LMRun(cfg, tmp_path / "full")
    s_full = full.fit()
    metrics = read_metrics(tmp_path / "full")
    losses, n = [math.log(m["valid_ppl"]) for m in metrics], 1
    trigger = next(t for t in range(1, 15) if t - 1 > n and losses[t - 1] > min(losses[: t - 1 - n]))

    def stalls(e: int) -> bool:  # the average's validations before epoch e, and Alg. 1's test on them
        averaged = losses[trigger : e - 1]
        return len(averaged) > n and losses[e - 1] > min(averaged[:-n])

    stall = next(e for e in range(trigger + 2, 15) if stalls(e))
    assert stall < 14  # the average stalls well inside train.epochs here (at epoch 6 with these settings)
    stages = [m["stage"] for m in metrics]
    assert stages == ["sgd"] * trigger + ["averaged"] * (stall - trigger) + ["finetune"] * (len(metrics) - stall)
    assert stall < len(metrics) <= stall + 3 and full.task.main_epochs == stall
    # finished by its stops: a resume says so in one line, and how to train on
    from tiedlm.cli import main

    assert main(["train", "--resume", str(tmp_path / "full")]) == 2
    assert "NT-ASGD's non-monotone stop ended it after" in capsys.readouterr().err

    part = LMRun(cfg, tmp_path / "part")
    windows = _windows_per_epoch(part, 14)
    with pytest.raises(RunInterrupted):
        part.fit(sum(windows[:stall]) + 2)  # inside the first finetune epoch
    resumed = LMRun(cfg, tmp_path / "part", resume=True)
    assert resumed.task.main_epochs == stall
    s_res = resumed.fit()
    same = ("train_ppl", "valid_ppl", "stage", "lr")
    assert [[m[k] for k in same] for m in read_metrics(tmp_path / "part")] == [[m[k] for k in same] for m in metrics]
    assert s_full["test_ppl"] == s_res["test_ppl"]


def test_stop_on_stall_applies_to_a_run_checkpointed_before_it_was_kept(tiny_corpus, tmp_path, monkeypatch):
    """A run whose checkpoint predates ``averaged_from`` (stopped while averaging) is refused with the migration;
    tools/migrate_runs.py finds where its average began from its records' stages, and the run resumed under
    ``stop_on_stall`` stalls where an uninterrupted run does."""
    from tiedlm.tasks.lm.nt_asgd import NTASGD

    cfg = _stall_cfg(tiny_corpus)
    full = LMRun(cfg, tmp_path / "full")
    full.fit()
    stages = [m["stage"] for m in read_metrics(tmp_path / "full")]
    averaging_from = stages.index("averaged") + 1

    part = LMRun(cfg, tmp_path / "part")
    windows = _windows_per_epoch(part, 14)
    current = NTASGD.meta
    with monkeypatch.context() as m:  # the checkpoint as the code before averaged_from wrote it
        m.setattr(NTASGD, "meta", lambda self: {k: current(self)[k] for k in ("valid_history", "stopped")})
        with pytest.raises(RunInterrupted):
            part.fit(sum(windows[:averaging_from]) + 2)  # inside the second averaged epoch
    with pytest.raises(UsageError, match="checkpoint of an older tiedlm; rewrite the run folder with `python tools/"):
        LMRun(cfg, tmp_path / "part", resume=True)
    migrate_runs(tmp_path / "part")
    resumed = LMRun(cfg, tmp_path / "part", resume=True)
    assert resumed.task.nt_asgd.averaging and resumed.task.nt_asgd.averaged_from == averaging_from - 1
    resumed.fit()
    assert [m["stage"] for m in read_metrics(tmp_path / "part")] == stages
