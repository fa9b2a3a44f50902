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
