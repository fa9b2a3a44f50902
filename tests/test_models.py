import pytest
import torch

from tiedlm.errors import UsageError
from tiedlm.models import VDLSTM, LanguageModel, lstm_recurrence, lstm_recurrence_reference
from tiedlm.models.config import ModelConfig
from tiedlm.models.language_model import count_parameters
from tiedlm.tasks.lm.config import Config

VD8 = {"name": "vd-lstm", "hidden_size": 8}  # a tiny VD-LSTM encoder, [model.encoder] as a table


def _rec_inputs(T=6, B=3, H=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    mk = lambda *s: torch.randn(*s, generator=g, dtype=torch.double, requires_grad=True)  # noqa: E731
    mask = (torch.rand(B, H, generator=g) > 0.4).double() / 0.6
    return mk(T, B, 4 * H), mk(B, H), mk(B, H), mk(4 * H, H), mask


@pytest.mark.parametrize("masked", [False, True])
def test_fused_recurrence_matches_autograd_reference(masked):
    x, h0, c0, w, mask = _rec_inputs()
    mask = mask if masked else None
    results = []
    for fn in (lstm_recurrence_reference, lstm_recurrence):
        hs, hT, cT = fn(x, h0, c0, w, mask)
        loss = (
            (hs * torch.linspace(-1, 1, hs.numel(), dtype=torch.double).view_as(hs)).sum() + hT.pow(2).sum() + cT.sum()
        )
        results.append((hs, hT, cT, *torch.autograd.grad(loss, (x, h0, c0, w))))
    for a, b in zip(*results):
        torch.testing.assert_close(a, b)


def test_fused_recurrence_gradcheck():
    x, h0, c0, w, mask = _rec_inputs(T=4, B=2, H=3)
    assert torch.autograd.gradcheck(lambda *a: lstm_recurrence(*a, mask), (x, h0, c0, w))


def test_tied_output_is_one_tensor():
    m = LanguageModel(ModelConfig(embedding_size=8, encoder=VD8, output="tied"), 30)
    assert m.output.weight is m.embedding.weight
    assert sum(p.numel() for p in m.output.parameters()) == 0  # no bias either (b = 0)
    names = [n for n, _ in m.named_parameters()]
    assert "embedding.weight" in names and not any(n.startswith("output") for n in names)
    logits, _ = m(torch.zeros(3, 2, dtype=torch.long), m.init_state(2))
    h = logits.sum()
    h.backward()
    assert m.embedding.weight.grad is not None


def test_tied_and_drill_need_equal_sizes():
    for output in ("tied", "drill"):
        with pytest.raises(UsageError, match="needs an encoder output of size embedding_size = 8"):
            LanguageModel(ModelConfig(embedding_size=8, encoder=VD8 | {"hidden_size": 9}, output=output), 30)
        with pytest.raises(UsageError, match="needs model.encoder.hidden_size == model.embedding_size"):
            Config.from_dict({"model": {"embedding_size": 8, "encoder": {"hidden_size": 9}, "output": output}})
    with pytest.raises(UsageError, match="needs model.encoder.last_hidden_size == model.embedding_size"):
        Config.from_dict(
            {"model": {"encoder": {"name": "awd-lstm", "last_hidden_size": 9}, "embedding_size": 8, "output": "drill"}}
        )


def test_variational_masks_constant_over_time_and_shared():
    """One mask per sequence for all time steps; layer l's mask is used for its recurrence AND its output."""
    torch.manual_seed(0)
    enc = VDLSTM(5, 6, layers=2, dropout=0.5).double().train()
    x = torch.randn(7, 3, 5, dtype=torch.double)
    state = [(torch.zeros(3, 6, dtype=torch.double),) * 2 for _ in range(2)]
    masks = enc.sample_masks(3, state[0][0])
    out, _ = enc(x, state, masks)
    # output zeros = mask zeros, at every time step (mask constant over time)
    zero = masks[1] == 0
    assert zero.any() and (out[:, zero] == 0).all()
    assert (out[:, ~zero] != 0).all()
    # rebuild both layers by hand with the same mask for recurrence and next-layer input
    y = x
    for layer, m in zip(enc.layers, masks):
        xproj = torch.nn.functional.linear(y, layer.weight_ih, layer.bias)
        hs, _, _ = lstm_recurrence_reference(
            xproj, torch.zeros(3, 6, dtype=torch.double), torch.zeros(3, 6, dtype=torch.double), layer.weight_hh, m
        )
        y = hs * m
    torch.testing.assert_close(out, y)


def test_no_dropout_on_input_embedding_and_eval():
    enc = VDLSTM(5, 6, layers=2, dropout=0.5)
    masks = enc.sample_masks(3, torch.zeros(1))
    assert len(masks) == 2 and all(m.shape == (3, 6) for m in masks)  # hidden-sized only: none on inputs
    vals = torch.cat([m.flatten() for m in masks]).unique()
    assert set(vals.tolist()) <= {0.0, 2.0}
    enc.eval()
    assert enc.sample_masks(3, torch.zeros(1)) == [None, None]


def test_input_dropout_is_one_mask_per_sequence_over_time():
    """model.dropout_input (Gal's p_x): the first layer sees x_t * m with one m per sequence, for every t."""
    torch.manual_seed(0)
    enc = VDLSTM(5, 6, layers=1, dropout=0.0, dropout_input=0.5).train()
    seen = []
    enc.layers[0].register_forward_pre_hook(lambda mod, args: seen.append(args[0]))
    x = torch.ones(7, 3, 5)
    enc(x, enc.init_state(3, x))
    dropped = seen[0] == 0
    assert dropped.any() and (~dropped).any()
    assert (dropped == dropped[0]).all()  # the same units of the same sequence at every time step
    assert set(seen[0].unique().tolist()) <= {0.0, 2.0}
    enc.eval()
    enc(x, enc.init_state(3, x))
    assert torch.equal(seen[1], x)


def test_init_range():
    m = LanguageModel(ModelConfig(embedding_size=8, encoder=VD8, init_range=0.07), 50)
    for p in m.parameters():
        assert p.abs().max() <= 0.07


@pytest.mark.parametrize(
    "preset,paper",
    [("ptb-medium-vd", 20e6), ("ptb-medium-real", 14e6), ("ptb-large-vd", 66e6), ("ptb-large-real", 51e6)],
)
def test_parameter_counts_match_paper(preset, paper):
    """Inan et al. Table 2: medium untied 20M, REAL 14M; large untied 66M, REAL 51M.

    Ours: 19.78M, 13.27M, 66.02M, 51.01M. The paper's medium REAL "14M" is 5% above the
    exact count of its architecture; we allow 6%.
    """
    total = count_parameters(Config.load(preset).model, 10000)["total"]
    assert abs(total - paper) / paper < 0.06


def test_tied_with_learnable_bias_option():
    cfg = ModelConfig(embedding_size=8, encoder=VD8, output={"name": "tied", "bias": True})
    m = LanguageModel(cfg, 50)
    assert m.output.weight is m.embedding.weight and m.parameter_counts()["output"] == 50
    h = torch.randn(3, 8)
    assert torch.allclose(m.output(h)[0], h @ m.embedding.weight.t() + m.output.bias)
    m.output(h)[0].sum().backward()
    assert m.output.bias.grad is not None
    assert LanguageModel(ModelConfig(embedding_size=8, encoder=VD8, output="tied"), 50).output.bias is None
    with pytest.raises(UsageError, match="output layer 'full' has no key 'bias'"):
        Config.load("ptb-small-vd").with_overrides(["model.output.bias=true"])
