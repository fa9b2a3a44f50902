"""The CUDA-graph training step (tiedlm.tasks.lm.cuda_graph): it trains as the eager loop does, a resumed run
replays the same steps, a non-finite step is undone, and runs it cannot capture say why. Needs a CUDA GPU
for all but the last test (CI has none; run them where one is: `python -m pytest tests/test_cuda_graph.py`)."""

import math

import pytest
import torch

from tiedlm import runtime
from tiedlm.errors import RunInterrupted, TiedlmError
from tiedlm.tasks.lm.config import Config
from tiedlm.tasks.lm.cuda_graph import GraphedStep, unsupported_reason
from tiedlm.train import load_checkpoint

from conftest import LMRun, read_metrics, tiny_overrides

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def _cfg(corpus, preset="ptb-small-real", **extra):
    """The preset on the tiny corpus, with ỹ fixed: gradients through ỹ (the REAL presets' setting) run eagerly."""
    return Config.load(preset).with_overrides(
        tiny_overrides(
            corpus, **{"train.device": "cuda", "model.encoder.dropout": "0.3", "loss.target_grad": "false", **extra}
        )
    )


def _fit(cfg, out, budget=None):
    tr = LMRun(cfg, out)
    return tr, tr.fit(budget)


def _weights(run):
    tensors, _ = load_checkpoint(run / "checkpoints" / "last.safetensors")
    return {k: v for k, v in tensors.items() if k.startswith("model.")}


@cuda
@pytest.mark.parametrize(
    "preset, precision", [("ptb-small-real", "fp32"), ("ptb-small-vd", "fp32"), ("ptb-small-real", "bf16")]
)
def test_graphed_training_matches_eager(tiny_corpus, tmp_path, preset, precision):
    """Same seed, same masks (the CUDA generator advances alike), same updates: same run, up to rounding."""
    runs = {}
    for mode in ("off", "auto"):
        tr, summary = _fit(
            _cfg(tiny_corpus, preset, **{"train.cuda_graph": mode, "train.precision": precision}), tmp_path / mode
        )
        runs[mode] = (tr, summary)
    assert runs["off"][0].task.graphs is None and runs["auto"][0].task.graphs is not None
    tol = 1e-4 if precision == "fp32" else 2e-2
    for a, b in zip(read_metrics(tmp_path / "off"), read_metrics(tmp_path / "auto")):
        assert b["train_ppl"] == pytest.approx(a["train_ppl"], rel=tol)
        assert b["valid_ppl"] == pytest.approx(a["valid_ppl"], rel=tol)
    wa, wb = _weights(tmp_path / "off"), _weights(tmp_path / "auto")
    for k in wa:
        assert torch.allclose(wa[k], wb[k], rtol=tol, atol=tol * 1e-1), k


@cuda
def test_graphed_run_resumes_exactly(tiny_corpus, tmp_path):
    cfg = _cfg(tiny_corpus, **{"train.epochs": "3"})
    _, s_full = _fit(cfg, tmp_path / "full")
    part = LMRun(cfg, tmp_path / "part")
    windows_per_epoch = (part.task.train_data.size(0) - 1 + 7) // 8
    with pytest.raises(RunInterrupted):
        part.fit(windows_per_epoch + 3)  # stops inside epoch 2, after graphed steps
    resumed = LMRun(cfg, tmp_path / "part", resume=True)
    s_res = resumed.fit()
    assert [m["valid_ppl"] for m in read_metrics(tmp_path / "full")] == [
        m["valid_ppl"] for m in read_metrics(tmp_path / "part")
    ]
    assert s_full["test_ppl"] == s_res["test_ppl"]
    wa, wb = _weights(tmp_path / "full"), _weights(tmp_path / "part")
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
    # every epoch and the summary say the run trained on this GPU (runtime.host_record)
    where = {"machine": torch.cuda.get_device_name(), "numerics": runtime.numerics_hash("cuda")}
    for record in [*read_metrics(tmp_path / "part"), s_res]:
        recorded = {k: record.get(k) for k in ("machine", "numerics", "native_kernels")}
        assert recorded == {**where, "native_kernels": None}


@cuda
def test_non_finite_graphed_step_is_undone(tiny_corpus, tmp_path):
    tr = LMRun(_cfg(tiny_corpus), tmp_path / "run")
    x, y = tr.task.train_data[:8], tr.task.train_data[1:9]
    state = tr.task.model.init_state(x.size(1))
    step = GraphedStep(tr.task.model, tr.task.loss_fn, tr.task.cfg, x, y, state, tr.task.precision)
    ce, _, finite, state = step.step(x, y, state, 1.0)
    assert finite and math.isfinite(ce.item())
    bad_word = int(x[0, 0])
    with torch.no_grad():
        tr.task.model.embedding.weight[bad_word] = float("inf")
    before = [p.detach().clone() for p in tr.task.model.parameters()]
    state_before = [tuple(t.clone() for t in s) for s in state]
    _, _, finite, state = step.step(x, y, state, 1.0)
    assert not finite
    assert all(
        torch.equal(a, b) or torch.equal(a.isinf(), b.isinf()) and torch.equal(a[a.isfinite()], b[b.isfinite()])
        for a, b in zip(before, tr.task.model.parameters())
    )
    assert all(torch.equal(a, b) for s0, s1 in zip(state_before, state) for a, b in zip(s0, s1))


@cuda
def test_graphed_divergence_stops_without_checkpoint(tiny_corpus, tmp_path):
    tr = LMRun(_cfg(tiny_corpus, **{"train.epochs": "1"}), tmp_path / "run")
    tr.task.loss_fn = lambda logits, y, emb, bias: (
        logits.float().sum() * float("inf"),
        logits.float().sum().detach(),
        None,
    )
    with pytest.raises(TiedlmError, match="diverged"):
        tr.fit()
    assert tr.task.graphs is not None and not (tmp_path / "run" / "checkpoints").exists()


def _awd(corpus, **extra):
    """A tiny AWD-LSTM (weight drop, embedding and locked dropout, AR/TAR, variable windows) on the GPU, graphed."""
    over = {"model.encoder.hidden_size": "24", "train.bptt": "10", "train.lr": "5", "train.device": "cuda"}
    return Config.load("ptb-awd-tied-budget").with_overrides(
        tiny_overrides(corpus, **{**over, "train.cuda_graph": "on", **extra})
    )


@cuda
def test_graphed_awd_step_draws_the_eager_masks_and_fresh_ones_each_replay(tiny_corpus, tmp_path):
    """The AWD-LSTM's masks (embedding, locked, weight drop) in a replay come from the CUDA generator as eagerly:
    from one generator state, the replay's loss is the eager forward's; the next replay draws new masks."""
    from tiedlm.train.step import window_loss

    tr = LMRun(_awd(tiny_corpus), tmp_path / "run")
    tr.task.model.train()
    x, y = tr.task.train_data[:10], tr.task.train_data[1:11]
    state = tr.task.model.init_state(x.size(1))
    step = GraphedStep(tr.task.model, tr.task.loss_fn, tr.task.cfg, x, y, state, tr.task.precision)
    s = torch.cuda.get_rng_state()
    ce1 = step.step(x, y, state, 0.0)[0].item()  # lr 0: the weights stay
    ce2 = step.step(x, y, state, 0.0)[0].item()
    torch.cuda.set_rng_state(s)
    ce3 = step.step(x, y, state, 0.0)[0].item()
    torch.cuda.set_rng_state(s)
    _, ce_eager, _, _ = window_loss(tr.task.model, tr.task.loss_fn, x, y, state, tr.task.precision, ar=2.0, tar=1.0)
    assert ce1 != ce2 and ce3 == ce1
    assert ce_eager.item() == pytest.approx(ce1, rel=1e-5)


@cuda
def test_graphed_awd_run_with_nt_asgd_averaging_resumes_exactly(tiny_corpus, tmp_path):
    """Variable windows (a graph per length), the NT-ASGD average updated after each replay: a run stopped
    in its second epoch and resumed ends with the straight run's weights and average, bit for bit."""
    cfg = _awd(tiny_corpus, **{"train.epochs": "2"})

    def trainer(out, resume=False):
        tr = LMRun(cfg, out, resume)
        if not resume:
            tr.task.nt_asgd.start_averaging(tr.task.model)  # averaging from the first step
        return tr

    straight = trainer(tmp_path / "full")
    straight.fit()
    assert straight.task.graphs is not None and len(straight.task.graphs.by_length) > 1
    part = trainer(tmp_path / "part")
    with pytest.raises(RunInterrupted):
        part.fit(len(part.task.batches(1)) + 3)  # stops inside epoch 2
    resumed = trainer(tmp_path / "part", resume=True)
    assert resumed.task.nt_asgd.averaging
    resumed.fit()
    a, _ = load_checkpoint(tmp_path / "full" / "checkpoints" / "last.safetensors")
    b, _ = load_checkpoint(tmp_path / "part" / "checkpoints" / "last.safetensors")
    assert any(k.startswith("avg.") for k in a) and set(a) == set(b)
    assert all(torch.equal(a[k], b[k]) for k in a if k.startswith(("model.", "avg.")))


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=cuda)])
def test_padded_awd_trains_as_the_unpadded_eager_one(tiny_corpus, tmp_path, device):
    """train.lstm_pad_units / lstm_pad_batch change only the shapes the fused kernel runs at: the AWD-LSTM with
    22 units padded to 24 and its batch to 8 trains as the unpadded eager step does (same seed, same masks), up to
    rounding; on a GPU the padded run is the graphed one."""
    same = {"train.device": device, "train.precision": "fp32", "model.encoder.hidden_size": "22"}
    pads = {"train.lstm_pad_units": "8", "train.lstm_pad_batch": "8"}
    eager, _ = _fit(_awd(tiny_corpus, **same, **{"train.cuda_graph": "off"}), tmp_path / "eager")
    padded, _ = _fit(_awd(tiny_corpus, **same, **pads), tmp_path / "padded")
    assert eager.task.graphs is None and (padded.task.graphs is not None) == (device == "cuda")
    a, b = read_metrics(tmp_path / "eager"), read_metrics(tmp_path / "padded")
    assert len(a) == len(b) > 0
    for x, y in zip(a, b):
        assert y["train_ppl"] == pytest.approx(x["train_ppl"], rel=1e-4)
        assert y["valid_ppl"] == pytest.approx(x["valid_ppl"], rel=1e-4)
    wa, wb = _weights(tmp_path / "eager"), _weights(tmp_path / "padded")
    assert set(wa) == set(wb) and all(torch.allclose(wa[k], wb[k], rtol=1e-4, atol=1e-5) for k in wa)


def test_unsupported_runs_say_why(tiny_corpus, monkeypatch):
    """Runs the graph cannot take train eagerly, with the reason shown at the start of training."""
    preset = Config.load("ptb-small-real")
    cuda_dev, cpu = torch.device("cuda"), torch.device("cpu")
    # 'auto' captures every step a GPU has replayed (selfcheck --device cuda, H100, 2026-11-26): the augmented
    # loss with gradients through ỹ (the REAL presets) and without its bias, and the AWD-LSTM family
    assert unsupported_reason(preset, cuda_dev, False) is None
    no_bias = Config.load("ptb-small-al").with_overrides(["loss.aug_bias=false"])
    assert unsupported_reason(no_bias, cuda_dev, False) is None
    for name in ("ptb-awd-tied", "ptb-awd-drill", "ptb-awd-sparse", "ptb-awd-tied-budget"):
        assert unsupported_reason(Config.load(name), cuda_dev, False) is None
    assert "'off'" in unsupported_reason(preset.with_overrides(["train.cuda_graph=off"]), cuda_dev, False)
    assert "CUDA device" in unsupported_reason(preset, cpu, False)
    assert "DDP" in unsupported_reason(preset, cuda_dev, True)
    fp16 = Config.load("ptb-awd-tied").with_overrides(["train.precision=fp16"])
    assert "'fp16' (its loss scaling runs eagerly)" in unsupported_reason(fp16, cuda_dev, False)
    transformer = Config.load("ptb-transformer-tied").with_overrides(["train.cuda_graph=on"])
    assert "Adam" in unsupported_reason(transformer, cuda_dev, False)
    adam = Config.load("ptb-small-vd").with_overrides(["train.optimizer.name=adam"])
    assert "only SGD" in unsupported_reason(adam, cuda_dev, False)
    # an encoder declared capturable whose capture no GPU has run yet: eager under 'auto', captured under 'on'
    from tiedlm.models.encoders.configs import AWDLSTMConfig

    monkeypatch.setattr(AWDLSTMConfig, "cuda_graph", "unverified")
    awd = Config.load("ptb-awd-tied")
    assert "captured with train.cuda_graph = 'on'" in unsupported_reason(awd, cuda_dev, False)
    assert unsupported_reason(awd.with_overrides(["train.cuda_graph=on"]), cuda_dev, False) is None
    with pytest.raises(Exception, match="train.cuda_graph"):
        preset.with_overrides(["train.cuda_graph=sometimes"])


@pytest.mark.parametrize(
    "preset, extra",
    [
        ("ptb-small-vd", {"model.encoder.dropout": "0"}),
        ("ptb-small-vd", {}),  # dropout masks: the same draws on both paths
        ("ptb-small-real", {}),  # the augmented loss with gradients through ỹ (loss.target_grad = true)
        ("ptb-small-al", {"loss.aug_bias": "false"}),
        # the AWD-LSTM family: weight drop, embedding and locked dropout, AR/TAR, mean loss
        ("ptb-awd-tied-budget", {"model.encoder.hidden_size": "24"}),
        ("ptb-awd-drill-budget", {"model.encoder.hidden_size": "24"}),
        ("ptb-awd-sparse-budget", {"model.encoder.hidden_size": "24"}),
    ],
)
def test_the_captured_computation_is_the_eager_step_on_the_cpu(tiny_corpus, tmp_path, preset, extra):
    """GraphedStep._step (what the graph captures: the shared window_loss and backward_and_clip, then its own
    foreach SGD with weight decay and the device-side finite flag), run uncaptured on the CPU, gives the weights
    the eager step gives with torch.optim.SGD: the hand-written update is SGD. Also for the augmented loss with
    target_grad and without aug_bias."""
    cfg = Config.load(preset).with_overrides(
        tiny_overrides(tiny_corpus, **{"train.weight_decay": "0.01", "train.clip": "0.5", **extra})
    )
    tr = LMRun(cfg, tmp_path / "run")
    x, y = tr.task.train_data[:8], tr.task.train_data[1:9]
    tr.task.state = tr.task.model.init_state(x.size(1))
    start = {k: v.clone() for k, v in tr.task.model.state_dict().items()}
    torch.manual_seed(5)
    ce_eager, aug_eager, finite, _ = tr.task._eager_step(
        x, y, 0.7, [p for p in tr.task.model.parameters() if p.requires_grad]
    )
    eager = {k: v.clone() for k, v in tr.task.model.state_dict().items()}
    assert finite and any(not torch.equal(start[k], eager[k]) for k in start)

    tr.task.model.load_state_dict(start)
    graph = GraphedStep.__new__(GraphedStep)  # the captured computation without a graph (no CUDA here)
    graph.model, graph.loss_fn, graph.precision = tr.task.model, tr.task.loss_fn, "fp32"
    graph.ar, graph.tar = cfg.loss.ar, cfg.loss.tar
    summed = cfg.train.loss_reduction == "sum_over_time"
    graph.clip, graph.weight_decay, graph.time_scale = 0.5, 0.01, float(y.size(0)) if summed else 1.0
    graph.params = [p for p in tr.task.model.parameters() if p.requires_grad]
    graph.x, graph.y, graph.state, graph.lr = x, y, tr.task.model.init_state(x.size(1)), torch.tensor(0.7)
    graph.backup = [p.detach().clone() for p in graph.params]
    torch.manual_seed(5)
    ce_graph, aug_graph, finite_graph, _ = graph._step()
    assert bool(finite_graph) and torch.equal(ce_graph, ce_eager)
    assert (aug_graph is None) == (aug_eager is None) == (not cfg.loss.augmented)
    if cfg.loss.augmented:
        assert torch.equal(aug_graph, aug_eager)
    for k, v in tr.task.model.state_dict().items():
        assert torch.allclose(v, eager[k], rtol=1e-6, atol=1e-7), k
    assert all(torch.equal(b, start[k]) for b, k in zip(graph.backup, [n for n, _ in tr.task.model.named_parameters()]))


def test_variable_windows_get_one_graph_per_length_sharing_a_pool_and_the_weight_backup(monkeypatch):
    """GraphedSteps (the AWD-LSTM's variable windows): a graph is captured the first time a length comes and
    replayed after; every graph gets the same memory pool and the same backup of the weights."""
    from tiedlm.tasks.lm import cuda_graph

    made = []

    class FakeStep:
        def __init__(self, model, loss_fn, cfg, x, y, state, precision, pool=None, backup=None):
            self.length, self.pool = y.size(0), pool
            self.backup = backup if backup is not None else ["weights"]
            self.replays = 0
            made.append(self)

        def step(self, x, y, state, lr):
            self.replays += 1
            return self.length

    monkeypatch.setattr(cuda_graph, "GraphedStep", FakeStep)
    monkeypatch.setattr(torch.cuda, "graph_pool_handle", lambda: ("pool",))
    steps = cuda_graph.GraphedSteps(None, None, None, "fp32")
    for n in (70, 65, 70, 33, 65):
        assert steps.step(torch.zeros(n, 2), torch.zeros(n, 2), None, 1.0) == n
    assert [s.length for s in made] == [70, 65, 33] and [s.replays for s in made] == [2, 2, 1]
    assert all(s.pool == ("pool",) for s in made) and all(s.backup is made[0].backup for s in made)
