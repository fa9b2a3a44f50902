"""The output-layer family of Pappas & Henderson (2019): formulas, parameter counts, DRILL options."""

import math

import pytest
import torch
from torch import nn

from tiedlm.losses import LanguageModelLoss, encoder_regularization
from tiedlm.models import (
    OUTPUTS,
    BilinearOutput,
    DrillOutput,
    DualOutput,
    LabelEncoder,
    LanguageModel,
    build_output,
    closed_form_parameters,
)
from tiedlm.models.config import ModelConfig
from tiedlm.tasks.lm.config import Config

KINDS = tuple(OUTPUTS.names())  # every registered output layer: a new one needs its PINNED losses below

VD8 = {"name": "vd-lstm", "hidden_size": 8}  # a tiny VD-LSTM encoder, [model.encoder] as a table


@pytest.mark.parametrize("vocab,d,d_h,joint,depth", [(50, 8, 8, 8, 1), (300, 16, 16, 24, 3), (1000, 32, 32, 7, 4)])
def test_dedicated_parameters_match_closed_forms(vocab, d, d_h, joint, depth):
    """Ineq. (6) and eq. (11): the counts of the layers as built equal the closed forms."""
    emb = nn.Embedding(vocab, d)
    for kind in KINDS:
        for bias in (False, True) if kind == "tied" else (True,):
            cfg = OUTPUTS.config_for(kind, joint_size=joint, depth=depth, bias=bias)
            layer = build_output(cfg, emb, d_h)
            assert layer.dedicated_parameters() == closed_form_parameters(cfg, vocab, d, d_h)
            assert all(p is not emb.weight for p in layer.parameters())  # E is shared, never re-registered


def test_parameter_ordering_of_ineq_6():
    """|θ_tied| < |θ_bilinear| < |θ_dual| < |θ_full| at PTB sizes, and DRILL depth k sits between by eq. (11)."""
    c = {
        k: closed_form_parameters(OUTPUTS.config_for(k, joint_size=400, depth=1, bias=True), 10_000, 400, 400)
        for k in KINDS
    }
    assert c["tied"] < c["bilinear"] < c["dual"] < c["full"]
    assert c["bilinear"] <= c["drill"] < c["dual"]


# Table 4 of Pappas & Henderson (2019): parameters (millions, as printed: truncated to 0.1M) on PTB (|V| = 10k)
TABLE_4 = {
    "ptb-awd-full": 43.8,
    "ptb-awd-tied": 24.2,
    "ptb-awd-bilinear": 24.3,
    "ptb-awd-dual": 24.5,
    ("ptb-awd-drill", 1): 24.3,
    ("ptb-awd-drill", 2): 24.5,
    ("ptb-awd-drill", 3): 24.6,
    ("ptb-awd-drill", 4): 24.8,
}


@pytest.mark.parametrize("key", list(TABLE_4), ids=str)
def test_awd_ptb_presets_reproduce_table_4_totals(key):
    preset, depth = key if isinstance(key, tuple) else (key, None)
    cfg = Config.load(preset)
    if depth:
        cfg = cfg.with_overrides([f"model.output.depth={depth}"])
    with torch.device("meta"):  # counts only: no memory, no init
        total = LanguageModel(cfg.model, 10_000).parameter_counts()["total"]
    assert math.floor(total / 1e5) / 10 == pytest.approx(TABLE_4[key])


def test_bilinear_and_dual_follow_their_formulas():
    torch.manual_seed(0)
    emb = nn.Embedding(40, 6)
    h = torch.randn(3, 5, 9)
    bil = BilinearOutput(emb, 9)
    nn.init.normal_(bil.bias)
    logits, labels = bil(h)
    assert labels is emb.weight
    assert torch.allclose(logits, h @ (emb.weight @ bil.weight).t() + bil.bias, atol=1e-5)  # E W h + b (eq. 3)
    dual = DualOutput(emb, 9, joint_size=7)
    logits, labels = dual(h)
    g_out = torch.sigmoid(emb.weight @ dual.label_proj.weight.t() + dual.label_proj.bias)
    g_in = torch.sigmoid(h @ dual.context_proj.weight.t() + dual.context_proj.bias)
    assert torch.allclose(labels, g_out) and torch.allclose(logits, g_in @ g_out.t() + dual.bias, atol=1e-6)


def test_dual_with_residuals_and_dropout_is_drill_table_4s_dual_row():
    """Footnote 6 of DRILL's Table 4 (the authors' code with a dual encoder of depth 1), written out:
    logits = (σ(δ(E) U + b_u) + E)(σ(V h + b_v) + h)ᵀ + b, δ on E only, one variational mask for all labels;
    the weights uniform in ±init_range; d_j = d = d_h is required, in one line."""
    from tiedlm.errors import UsageError

    torch.manual_seed(0)
    emb = nn.Embedding(40, 6)
    dual = DualOutput(emb, 6, joint_size=6, residual=True, dropout=0.5, variational=True, init_range=0.1)
    assert dual.label_proj.weight.abs().max() <= 0.1 and dual.context_proj.weight.abs().max() <= 0.1
    assert dual.label_proj.weight.abs().max() > 0.09  # uniform in ±0.1, not nn.Linear's ±1/sqrt(6) = ±0.41
    nn.init.normal_(dual.bias)
    e, h = emb.weight, torch.randn(3, 5, 6)
    (u, b_u), (v, b_v) = (
        (dual.label_proj.weight, dual.label_proj.bias),
        (dual.context_proj.weight, dual.context_proj.bias),
    )
    dual.eval()
    logits, labels = dual(h)
    g_out = torch.sigmoid(e @ u.t() + b_u) + e
    g_in = torch.sigmoid(h @ v.t() + b_v) + h
    assert torch.allclose(labels, g_out, atol=1e-6) and torch.allclose(logits, g_in @ g_out.t() + dual.bias, atol=1e-5)
    dual.train()
    torch.manual_seed(1)
    _, labels = dual(h)
    torch.manual_seed(1)
    keep = torch.empty(1, 6).bernoulli_(0.5) * 2  # the one mask over d, drawn as the layer draws it
    assert keep.min() == 0 and torch.allclose(labels, torch.sigmoid((e * keep) @ u.t() + b_u) + e, atol=1e-6)
    assert torch.allclose(dual.encode_context(h), g_in)  # no dropout on the context side
    with pytest.raises(UsageError, match="joint_size, embedding_size and the encoder's output size must be equal"):
        DualOutput(emb, 6, joint_size=8, residual=True)
    with pytest.raises(UsageError, match="embedding"):
        ModelConfig(embedding_size=6, encoder=dict(VD8), output={"name": "dual", "residual": True}).validate()


@pytest.mark.parametrize("depth", [1, 3])
@pytest.mark.parametrize("res_e,res_prev", [(True, False), (False, False), (True, True), (False, True)])
def test_drill_label_encoder_follows_eqs_8_to_10(depth, res_e, res_prev):
    torch.manual_seed(0)
    emb = nn.Embedding(30, 6)
    drill = DrillOutput(
        emb, depth=depth, activation="tanh", residual_embedding=res_e, residual_previous=res_prev
    ).eval()
    e = emb.weight
    u = [(lin.weight, lin.bias) for lin in drill.label_encoder.layers]
    # eq. (10) written out layer by layer: E1 = f(E) [+ E]; Ei = f(E(i-1)) [+ E] [+ E(i-1)] for i >= 2
    x = torch.tanh(e @ u[0][0].t() + u[0][1]) + (e if res_e else 0)
    for w, b in u[1:]:
        x = torch.tanh(x @ w.t() + b) + (e if res_e else 0) + (x if res_prev else 0)
    h = torch.randn(4, 6)
    logits, labels = drill(h)
    assert torch.allclose(labels, x, atol=1e-6) and torch.allclose(logits, h @ x.t() + drill.bias, atol=1e-5)
    assert drill.dedicated_parameters() == depth * (36 + 6) + 30
    if depth == 1:  # one layer: the residual to the previous layer adds nothing (its input is E)
        plain = DrillOutput(emb, depth=1, activation="tanh", residual_embedding=res_e, residual_previous=False).eval()
        plain.load_state_dict(drill.state_dict())
        assert torch.equal(plain(h)[1], labels)


def test_drill_dropout_variational_shares_one_mask_over_labels():
    torch.manual_seed(0)
    enc = LabelEncoder(64, depth=1, activation="identity", dropout=0.5, variational=True, residual_embedding=False)
    with torch.no_grad():
        enc.layers[0].weight.copy_(torch.eye(64))
        enc.layers[0].bias.zero_()
    e = torch.rand(200, 64) + 0.5  # no zeros of its own
    out = enc(e)
    dropped = out == 0
    assert dropped.any() and (dropped.all(0) | ~dropped.any(0)).all()  # each dimension dropped for all labels or none
    enc.variational = False
    dropped = enc(e) == 0
    assert (dropped.any(0) & ~dropped.all(0)).any()  # standard dropout: per label and dimension
    enc.eval()
    assert torch.equal(enc(e), e)  # no dropout at evaluation


def test_label_encoder_runs_once_per_forward_pass():
    cfg = ModelConfig(embedding_size=8, encoder=VD8, output={"name": "drill", "depth": 2})
    model = LanguageModel(cfg, 50)
    calls = []
    model.output.label_encoder.register_forward_hook(lambda *a: calls.append(1))
    logits, _, labels = model(torch.randint(0, 50, (7, 3)), model.init_state(3), return_labels=True)
    assert len(calls) == 1 and logits.shape == (7, 3, 50) and labels.shape == (50, 8)


@pytest.mark.parametrize("output", KINDS)
def test_evaluation_computes_the_label_embeddings_once_and_changes_no_logit(output):
    """stream_logits reuses g_out(E) over a stream's windows (OutputLayer.labels_reused): one encode_labels call
    for the whole stream, and every window's logits equal, to the bit, those of a plain forward pass that computes
    the table again. A layer in training mode refuses the reuse."""
    from tiedlm.data.batching import batchify, bptt_windows
    from tiedlm.evaluation import stream_logits

    torch.manual_seed(0)
    extra = {"dropout": 0.3} if output == "drill" else {}
    cfg = ModelConfig(embedding_size=8, encoder=VD8, output=OUTPUTS.config_for(output, joint_size=6, depth=2, **extra))
    model = LanguageModel(cfg, 50)
    calls, encode = [], model.output.encode_labels
    model.output.encode_labels = lambda: calls.append(1) or encode()
    ids = torch.randint(0, 50, (200,))
    with torch.inference_mode():
        streamed = list(stream_logits(model, ids, batch_size=2, bptt=7))
    assert len(calls) == 1 and len(streamed) == 15 and model.training  # its mode restored
    model.eval()
    state = model.init_state(2)
    with torch.inference_mode():
        for (logits, y), (_, x, target) in zip(streamed, bptt_windows(batchify(ids, 2), 7), strict=True):
            plain, state = model(x, state)
            assert torch.equal(plain.reshape(-1, 50), logits) and torch.equal(target.reshape(-1), y)
    assert len(calls) == 1 + len(streamed)  # outside the block: once a forward pass again
    model.train()
    with pytest.raises(RuntimeError, match="call model.eval"), model.output.labels_reused():
        pass


def _steps(encoder: str, output: str, augmented: bool, n: int = 4) -> list[float]:
    """Losses of n SGD steps of a tiny fixed-seed model on fixed random tokens."""
    torch.manual_seed(1234)
    awd = encoder == "awd-lstm"
    extra = dict(dropout_input=0.1, dropout_hidden=0.1, weight_drop=0.2) if awd else {}
    cfg = ModelConfig(
        embedding_size=12,
        dropout_embedding=0.1 if awd else 0.0,
        encoder={"name": encoder, "hidden_size": 20 if awd else 12, "layers": 2, "dropout": 0.2, **extra},
        # DRILL's label dropout (the dual layer's, off by default, is tested on its own above)
        output=OUTPUTS.config_for(output, joint_size=10, depth=2, **({"dropout": 0.3} if output == "drill" else {})),
    )
    model = LanguageModel(cfg, 60)
    loss_fn = LanguageModelLoss(augmented=augmented, tau=5.0, gamma=0.5)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    data = torch.randint(0, 60, (6 * n + 1, 4))
    state, losses = model.init_state(4), []
    for k in range(n):
        x, y = data[6 * k : 6 * k + 6], data[6 * k + 1 : 6 * k + 7]
        logits, state = model(x, [(h.detach(), c.detach()) for h, c in state])
        loss, _, _ = loss_fn(logits, y, model.input_embeddings)
        reg = encoder_regularization(model, 2.0, 1.0)
        total = loss + reg if reg is not None else loss
        opt.zero_grad()
        total.backward()
        opt.step()
        losses.append(round(total.item(), 5))
    return losses


# losses of 4 steps per (encoder, output layer) with the augmented loss on; regenerate with
# python -c "from tests.test_output_layers import _steps; print(_steps('vd-lstm', 'drill', True))"
PINNED = {
    ("vd-lstm", "full"): [4.11334, 4.11374, 4.09459, 4.09847],
    ("vd-lstm", "tied"): [4.09394, 4.09415, 4.09312, 4.09613],
    ("vd-lstm", "bilinear"): [4.11593, 4.09664, 4.0882, 4.08231],
    ("vd-lstm", "dual"): [4.09939, 4.11216, 4.09415, 4.09312],
    ("vd-lstm", "drill"): [4.096, 4.09412, 4.08347, 4.08373],
    ("awd-lstm", "full"): [4.13213, 4.11264, 4.12853, 4.0916],
    ("awd-lstm", "tied"): [4.11148, 4.12391, 4.1194, 4.10953],
    ("awd-lstm", "bilinear"): [4.11163, 4.11691, 4.11308, 4.11749],
    ("awd-lstm", "dual"): [4.10874, 4.11635, 4.12569, 4.10769],
    ("awd-lstm", "drill"): [4.12205, 4.13647, 4.12647, 4.12415],
}


@pytest.mark.parametrize("encoder", ["vd-lstm", "awd-lstm"])
@pytest.mark.parametrize("output", KINDS)
def test_every_output_layer_trains_with_both_encoders_and_the_augmented_loss(encoder, output):
    losses = _steps(encoder, output, augmented=True)
    assert all(math.isfinite(v) for v in losses)
    assert losses == pytest.approx(PINNED[(encoder, output)], abs=3e-5), losses


def test_build_output_takes_a_dict_and_refuses_a_weight_tensor_in_api_terms():
    """A plain dict or a weight tensor used to fail with an AttributeError from deep inside."""
    from torch import nn

    from tiedlm.models import OUTPUTS, build_output

    embedding = nn.Embedding(50, 8)
    from_dict = build_output({"name": "drill", "depth": 2}, embedding, hidden_size=8)
    assert type(from_dict) is type(build_output(OUTPUTS.config({"name": "drill", "depth": 2}), embedding, 8))
    with pytest.raises(
        TypeError, match="the nn.Embedding whose weight the layer shares, not Parameter .pass the module"
    ):
        build_output({"name": "tied"}, embedding.weight, hidden_size=8)
    with pytest.raises(TypeError, match="cfg must be an output layer's config"):
        build_output("drill", embedding, hidden_size=8)
