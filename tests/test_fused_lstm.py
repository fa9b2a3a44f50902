"""PyTorch's fused LSTM (``torch.lstm``) in place of tiedlm's loop wherever no per-sequence mask is applied.

The loop is checked against the autograd reference in ``test_models.py``; here the fused path must give the same
outputs, final state and gradients as the loop (same weights, same dropped W_hh), and ``torch_gate_order``
must turn tiedlm's weights into an ``nn.LSTM`` that computes the written-out equations.
"""

import pytest
import torch
from torch import nn

from tiedlm.models import lstm_recurrence_reference
from tiedlm.models.encoders.lstm_layer import VDLSTMLayer
from tiedlm.models.encoders.recurrence import flat_lstm_weights, fused_lstm, torch_gate_order, use_fused
from tiedlm.models.encoders.sparse_lstm import SparseLSTMLayer


def _run(layer, x, state, monkeypatch, fused: bool, seed: int = 3):
    """Outputs, final state and every gradient of one forward + backward, with the fused path on or off."""
    monkeypatch.setenv("TIEDLM_FUSED_LSTM", "1" if fused else "0")
    layer.zero_grad(set_to_none=True)
    x = x.detach().clone().requires_grad_()
    h0, c0 = (s.detach().clone().requires_grad_() for s in state)
    torch.manual_seed(seed)  # the same dropped W_hh on both paths
    out, (hT, cT) = layer(x, (h0, c0))
    g = torch.Generator().manual_seed(7)
    (out * torch.randn(out.shape, generator=g)).sum().add(hT.pow(2).sum() + cT.sum()).backward()
    grads = {n: p.grad.clone() for n, p in layer.named_parameters()}
    return out.detach(), hT.detach(), cT.detach(), x.grad, h0.grad, c0.grad, grads


def _assert_same(a, b):
    for u, v in zip(a[:6], b[:6]):
        assert torch.allclose(u, v, atol=2e-6, rtol=1e-5), (u - v).abs().max()
    assert a[6].keys() == b[6].keys()
    for name in a[6]:
        assert torch.allclose(a[6][name], b[6][name], atol=2e-6, rtol=1e-5), name


def test_torch_gate_order_gives_an_nn_lstm_that_computes_the_equations():
    """nn.LSTM loaded with reordered weights (b_hh = 0) = the LSTM equations written out in tiedlm's order."""
    torch.manual_seed(0)
    n_in, H, B, T = 5, 7, 3, 6
    w_ih, w_hh, b = torch.randn(4 * H, n_in), torch.randn(4 * H, H), torch.randn(4 * H)
    x, h0, c0 = torch.randn(T, B, n_in), torch.randn(B, H), torch.randn(B, H)
    lstm = nn.LSTM(n_in, H)
    with torch.no_grad():
        lstm.weight_ih_l0.copy_(torch_gate_order(w_ih))
        lstm.weight_hh_l0.copy_(torch_gate_order(w_hh))
        lstm.bias_ih_l0.copy_(torch_gate_order(b))
        lstm.bias_hh_l0.zero_()
        want, (h, c) = lstm(x, (h0[None], c0[None]))
    ref, hT, cT = lstm_recurrence_reference(x @ w_ih.t() + b, h0, c0, w_hh)  # i, f, o, g = rows 0..4H
    got = fused_lstm(x, h0, c0, w_ih, w_hh, b)
    for u, v in ((want, ref), (h[0], hT), (c[0], cT), (got[0], ref), (got[1], hT), (got[2], cT)):
        assert torch.allclose(u, v, atol=1e-5)


@pytest.mark.parametrize("training,weight_drop", [(True, 0.5), (False, 0.5), (True, 0.0)])
def test_fused_layer_matches_the_loop_outputs_and_gradients(monkeypatch, training, weight_drop):
    torch.manual_seed(0)
    layer = VDLSTMLayer(6, 9, weight_drop=weight_drop).train(training)
    x, state = torch.randn(8, 4, 6), (torch.randn(4, 9), torch.randn(4, 9))
    loop = _run(layer, x, state, monkeypatch, fused=False)
    fused = _run(layer, x, state, monkeypatch, fused=True)
    _assert_same(loop, fused)
    if training and weight_drop:  # the check can fail: another dropped W_hh gives other numbers
        other = _run(layer, x, state, monkeypatch, fused=True, seed=4)
        assert not torch.allclose(other[0], fused[0], atol=1e-3)


def test_a_per_sequence_mask_keeps_the_loop(monkeypatch):
    monkeypatch.delenv("TIEDLM_FUSED_LSTM", raising=False)
    assert use_fused(None) and not use_fused(torch.ones(3, 4))
    monkeypatch.setenv("TIEDLM_FUSED_LSTM", "0")
    assert not use_fused(None)


@pytest.mark.parametrize("shape", [(12, 12, 3, 6), (10, 8, 2, 9)])  # (i, h_s, k, w): w ≤ 4m, and w > 4m
@pytest.mark.parametrize("training", [True, False])
def test_sparse_layer_fused_components_match_the_batched_loop(monkeypatch, shape, training):
    i, h, k, w = shape
    torch.manual_seed(0)
    layer = SparseLSTMLayer(i, h, k, w, weight_drop=0.5).train(training)
    x, state = torch.randn(7, 3, i), (torch.randn(3, h), torch.randn(3, h))
    calls, original = [], SparseLSTMLayer._fused_components
    monkeypatch.setattr(SparseLSTMLayer, "_fused_components", lambda self, *a: calls.append(1) or original(self, *a))
    loop = _run(layer, x, state, monkeypatch, fused=False)
    fused = _run(layer, x, state, monkeypatch, fused=True)
    _assert_same(loop, fused)
    assert len(calls) == (1 if w <= 4 * (h // k) else 0)  # on the CPU, wide slices keep the batched loop


def test_fused_components_are_the_dense_equivalent_layer(monkeypatch):
    """k fused LSTMs over input slices = the dense layer with block weights (``dense_weights``), eval mode."""
    torch.manual_seed(1)
    layer = SparseLSTMLayer(12, 12, 3, 6).eval()
    x, h0, c0 = torch.randn(5, 2, 12), torch.randn(2, 12), torch.randn(2, 12)
    monkeypatch.setenv("TIEDLM_FUSED_LSTM", "1")
    with torch.no_grad():
        got, (hT, cT) = layer._fused_components(x, h0, c0, layer.weight_hh)
        w_ih, w_hh, b = layer.dense_weights()
        want, h, c = lstm_recurrence_reference(x @ w_ih.t() + b, h0, c0, w_hh)
    for u, v in ((got, want), (hT, h), (cT, c)):
        assert torch.allclose(u, v, atol=1e-5)


def _spy_on_torch_lstm(monkeypatch):
    """Record what every ``torch.lstm`` call is handed (the kernel cuDNN runs on a GPU), then run it."""
    calls, original = [], torch.lstm

    def spy(x, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first):
        calls.append({"x": x, "hx": hx, "params": params, "train": train})
        return original(x, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first)

    monkeypatch.setattr(torch, "lstm", spy)
    monkeypatch.setenv("TIEDLM_FUSED_LSTM", "1")
    return calls


@pytest.mark.parametrize("sparse", [False, True])
def test_the_kernel_runs_in_training_mode_exactly_when_gradients_are_recorded(monkeypatch, sparse):
    """cuDNN has a backward only after a training-mode forward ("cudnn RNN backward can only be called in
    training mode"): training, and an eval-mode model that still records gradients (dynamic evaluation), must
    ask for it; evaluation under no_grad must not."""
    torch.manual_seed(0)
    layer = SparseLSTMLayer(12, 12, 3, 6, weight_drop=0.5) if sparse else VDLSTMLayer(6, 9, weight_drop=0.5)
    n_in, H = (12, 12) if sparse else (6, 9)
    x, state = torch.randn(5, 2, n_in), (torch.randn(2, H), torch.randn(2, H))
    calls = _spy_on_torch_lstm(monkeypatch)
    layer.train()(x, state)[0].sum().backward()
    assert calls and all(c["train"] is True for c in calls)
    calls.clear()
    layer.eval()(x, state)[0].sum().backward()  # dynamic evaluation: eval mode, gradients on
    assert calls and all(c["train"] is True for c in calls)
    calls.clear()
    with torch.no_grad():
        layer.eval()(x, state)
    assert calls and all(c["train"] is False for c in calls)


def test_the_kernel_gets_contiguous_tensors_and_one_weight_buffer_in_cudnn_order(monkeypatch):
    """The sparse layer's components read column slices of the state (``h0[:, units]``) and of the input: cuDNN
    refuses a non-contiguous state ("rnn: hx is not contiguous"). Its weights must be views, in nn.LSTM's
    order (W_ih, W_hh, b_ih, b_hh), of one buffer they fill exactly, so that cuDNN does not copy them."""
    torch.manual_seed(0)
    layer = SparseLSTMLayer(12, 12, 3, 6, weight_drop=0.5).train()
    calls = _spy_on_torch_lstm(monkeypatch)
    layer(torch.randn(5, 2, 12), (torch.randn(2, 12), torch.randn(2, 12)))[0].sum().backward()
    assert len(calls) == 3
    names = nn.LSTM(6, 4)._flat_weights_names
    assert names == ["weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"]
    for c in calls:
        assert c["x"].is_contiguous() and all(t.is_contiguous() for t in c["hx"])
        ps = c["params"]
        assert [tuple(p.shape) for p in ps] == [(16, 6), (16, 4), (16,), (16,)]
        assert all(p.is_contiguous() for p in ps)
        base, size = ps[0].data_ptr(), ps[0].element_size()
        offsets = [(p.data_ptr() - base) // size for p in ps]
        assert offsets == [0, 96, 160, 176]  # back to back, in nn.LSTM's order
        assert all(p.untyped_storage().data_ptr() == ps[0].untyped_storage().data_ptr() for p in ps)
        assert ps[0].untyped_storage().nbytes() == 192 * size  # the buffer holds these four and nothing else
        assert torch.count_nonzero(ps[3]) == 0  # b_hh = 0: tiedlm has one bias


def test_flat_weights_are_the_gate_reordered_weights():
    torch.manual_seed(2)
    w_ih, w_hh, b = torch.randn(8, 3), torch.randn(8, 2), torch.randn(8)
    got = flat_lstm_weights(w_ih, w_hh, b)
    for g, w in zip(got, (w_ih, w_hh, b)):
        i, f, o, c = w.split(2)
        assert torch.equal(g, torch.cat([i, f, c, o]))  # PyTorch's [input, forget, cell, output]


def test_flat_weights_backward_is_the_numerical_gradient():
    """The buffer's hand-written backward (each gradient gate-reordered back) against finite differences."""
    torch.manual_seed(3)
    w = [torch.randn(8, 3, dtype=torch.float64), torch.randn(8, 2, dtype=torch.float64), torch.randn(8).double()]
    assert torch.autograd.gradcheck(
        lambda a, b, c: tuple(flat_lstm_weights(a, b, c)[:3]), [t.requires_grad_() for t in w]
    )


DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no GPU"))]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("pad", [(8, 0), (0, 8), (128, 8)])
def test_the_padded_kernel_computes_the_layer_written_out(device, pad):
    """train.lstm_pad_*: the fused kernel run at the hidden size and batch rounded up (10 -> 16 or 128 units, 5 ->
    8 rows) gives the outputs, final state and every gradient of the LSTM equations written out (the autograd
    reference, in fp64); its padded units stay exactly zero at every step."""
    from tiedlm.models.encoders.recurrence import padded_lstm

    dtype = torch.float64 if device == "cpu" else torch.float32  # cuDNN: fp32, checked to fp32's precision
    g = torch.Generator().manual_seed(0)
    T, B, n_in, H = 7, 5, 6, 10
    shapes = [(T, B, n_in), (B, H), (B, H), (4 * H, n_in), (4 * H, H), (4 * H,)]
    x, h0, c0, w_ih, w_hh, b = (torch.randn(s, generator=g, dtype=torch.float64) * 0.5 for s in shapes)
    ins = [t.to(device, dtype).requires_grad_() for t in (x, h0, c0, w_ih, w_hh, b)]
    ref = [t.detach().clone().requires_grad_() for t in (x, h0, c0, w_ih, w_hh, b)]  # fp64, on the CPU
    weights = torch.randn(T, B, H, generator=g, dtype=torch.float64)

    def loss(hs, hT, cT):
        return (hs * weights.to(hs)).sum() + hT.square().sum() + cT.sin().sum()

    got = fused_lstm(*ins, pad=pad)
    xr, h0r, c0r, w_ihr, w_hhr, br = ref
    hs, hT, cT = lstm_recurrence_reference(torch.nn.functional.linear(xr, w_ihr, br), h0r, c0r, w_hhr)
    # the reference's state at the end is c_T with h_T = o * tanh(c_T): rebuild c_T from its last step
    want = (hs, hT, _last_cell(xr, h0r, c0r, w_ihr, w_hhr, br))
    tol = {"atol": 1e-12, "rtol": 1e-12} if dtype == torch.float64 else {"atol": 2e-5, "rtol": 1e-4}
    for a, w in zip(got, want):
        assert a.shape == w.shape and torch.allclose(a.detach().cpu().double(), w.detach(), **tol)
    grads = torch.autograd.grad(loss(*got), ins)
    wanted = torch.autograd.grad(loss(*want), ref)
    for a, w in zip(grads, wanted):
        assert torch.allclose(a.cpu().double(), w, **tol)
    with torch.no_grad():  # the padded units, run by the kernel itself: zero at every step
        units = -(-H // pad[0]) * pad[0] if pad[0] else H
        rows = -(-B // pad[1]) * pad[1] if pad[1] else B
        px, ph, pc, pw_ih, pw_hh, pb = padded_lstm(*[t.detach() for t in ins], units, rows)
        params = flat_lstm_weights(pw_ih, pw_hh, pb)
        out, hN, cN = torch.lstm(px, (ph[None], pc[None]), params, True, 1, 0.0, False, False, False)
        assert out.shape == (T, rows, units)
        assert (out[..., H:] == 0).all() and (hN[..., H:] == 0).all() and (cN[..., H:] == 0).all()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("autocast, kernel", [(torch.float16, torch.float16), (torch.bfloat16, torch.float32)])
def test_under_fp16_autocast_the_kernel_runs_in_fp16_and_computes_the_layer_written_out(device, autocast, kernel):
    """train.precision = "fp16": the fused kernel runs in fp16 (cuDNN's fp16 kernels), its outputs fp16 and the
    carried state fp32, within fp16's rounding of the LSTM equations written out (fp64); bf16 keeps the fp32
    recurrence it has always had."""
    g = torch.Generator().manual_seed(0)
    T, B, n_in, H = 7, 5, 6, 10
    shapes = [(T, B, n_in), (B, H), (B, H), (4 * H, n_in), (4 * H, H), (4 * H,)]
    ref = [torch.randn(s, generator=g, dtype=torch.float64) * 0.5 for s in shapes]
    ins = [t.to(device, torch.float32).requires_grad_() for t in ref]
    with torch.autocast(device_type=device, dtype=autocast):
        hs, hT, cT = fused_lstm(*ins)
    assert (hs.dtype, hT.dtype, cT.dtype) == (kernel, torch.float32, torch.float32)
    want_hs, want_hT, _ = lstm_recurrence_reference(
        torch.nn.functional.linear(ref[0], ref[3], ref[5]), *ref[1:3], ref[4]
    )
    for a, w in ((hs, want_hs), (hT, want_hT), (cT, _last_cell(*ref))):
        assert torch.allclose(a.detach().cpu().double(), w, atol=5e-3, rtol=5e-3), (a.cpu().double() - w).abs().max()
    grads = torch.autograd.grad(hs.float().sum() + hT.square().sum(), ins)
    assert all(gr.dtype == torch.float32 and torch.isfinite(gr).all() for gr in grads)  # into the fp32 weights


def _last_cell(x, h0, c0, w_ih, w_hh, b):
    """c_T of the written-out LSTM equations (gate order [input, forget, output, cell])."""
    H, h, c = h0.size(1), h0, c0
    for t in range(x.size(0)):
        gates = torch.nn.functional.linear(x[t], w_ih, b) + h @ w_hh.t()
        i, f, o = (torch.sigmoid(gates[:, k * H : (k + 1) * H]) for k in range(3))
        c = f * c + i * torch.tanh(gates[:, 3 * H :])
        h = o * torch.tanh(c)
    return c


def test_a_padded_awd_lstm_trains_the_same_model(tiny_corpus, tmp_path):
    """An AWD-LSTM language model with train.lstm_pad_units / lstm_pad_batch set: the same losses and gradients
    as without (fp64, every parameter, a training step with weight drop and every dropout on), and a negative
    padding is refused with one line."""
    from tiedlm.config import UsageError
    from tiedlm.models import LanguageModel
    from tiedlm.models.encoders.lstm_layer import pad_fused_lstms
    from tiedlm.tasks.lm.config import Config

    cfg = Config.load("ptb-awd-tied").with_overrides(
        ["model.embedding_size=12", "model.encoder.hidden_size=20", "train.batch_size=5"]
    )
    ids = torch.randint(0, 50, (9, 5), generator=torch.Generator().manual_seed(1))

    def step(units, rows):
        torch.manual_seed(0)
        model = LanguageModel(cfg.model, 50).double().train()
        pad_fused_lstms(model, units, rows)
        torch.manual_seed(1)  # the same dropout masks and dropped W_hh
        state = [tuple(s.double() for s in layer) for layer in model.init_state(5)]  # the state kept in fp64 too
        logits, _ = model(ids[:-1], state)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 50), ids[1:].reshape(-1))
        loss.backward()
        return loss.item(), {n: p.grad for n, p in model.named_parameters()}

    plain, padded = step(0, 0), step(128, 8)
    assert plain[0] == pytest.approx(padded[0], rel=1e-13)
    assert all(torch.allclose(plain[1][n], padded[1][n], atol=1e-13, rtol=1e-11) for n in plain[1])
    with pytest.raises(UsageError, match=r"train.lstm_pad_units = -8 .*>= 0"):
        cfg.with_overrides(["train.lstm_pad_units=-8"])
