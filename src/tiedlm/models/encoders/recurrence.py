"""The LSTM hidden-to-hidden recurrence with a variational (per-sequence) mask on the carried state.

``nn.LSTM`` cannot drop recurrent connections, so the VD-LSTM runs its own recurrence. The
input projections of all time steps are computed outside, in one matmul; this module loops
only over the hidden-to-hidden part. :class:`LSTMRecurrence` is an autograd Function with a
hand-written backward (gate math done in place, one large matmul for the recurrent weight
gradient over all time steps), several times faster than letting autograd record every
small op; :func:`lstm_recurrence_reference` is the plain-autograd version used as the oracle
in the tests. On the CPU both loops run in C++ (``lstm_recurrence.cpp`` in :mod:`tiedlm.native`, with
the batch rows split over the threads); the Python loops below are the fallback and the GPU path.

Gate layout of the 4H pre-activations: [input, forget, output, cell] so that the three
sigmoid gates are one contiguous slice.

Without a per-sequence mask (AWD-LSTM, whose weight drop is one dropped W_hh shared by every sequence; every
LSTM in evaluation; a VD-LSTM with dropout 0) the layer can instead run PyTorch's fused LSTM (cuDNN on a GPU,
its own CPU kernel): :func:`fused_lstm`, which takes tiedlm's weights and reorders the gates at the call, so
that parameters and checkpoints keep tiedlm's layout. :func:`use_fused` decides where that is faster.

Block-diagonal recurrent weights (the sparse LSTM of Demeester et al. 2018): ``w_hh`` (k, 4m, m)
holds the k diagonal blocks, and every per-step tensor carries the component as a leading axis,
(k, B, ·) instead of (B, ·); each step's k recurrent products are then one ``bmm`` on contiguous
tensors, and the gate math (written over the last axis) is the same code as the dense case.
"""

from __future__ import annotations

import os

import torch

from ... import native


def lstm_recurrence_reference(xproj, h0, c0, w_hh, mask=None):
    """Autograd reference. xproj (T,B,4H) = x W_ih^T + b; h0/c0 (B,H); w_hh (4H,H); mask (B,H) or None.

    The state fed back is ``h_{t-1} * mask`` (the same mask at every step). Returns the
    unmasked outputs (T,B,H) and the final (h, c).
    """
    H = h0.size(1)
    h, c, outs = h0, c0, []
    for t in range(xproj.size(0)):
        hm = h * mask if mask is not None else h
        gates = xproj[t] + hm @ w_hh.t()
        ifo = torch.sigmoid(gates[:, : 3 * H])
        g = torch.tanh(gates[:, 3 * H :])
        c = ifo[:, H : 2 * H] * c + ifo[:, :H] * g
        h = ifo[:, 2 * H :] * torch.tanh(c)
        outs.append(h)
    return torch.stack(outs), h, c


def _forward_python(xproj, h0, c0, w_hh, mask):
    """The forward loop in Python (fallback of the C++ ``lstm_forward``): returns acts, cs, tcs, hs, hms."""
    H = xproj.size(-1) // 4
    w_t = w_hh.transpose(-1, -2)
    acts = torch.empty_like(xproj)  # post-activation gates i, f, o, g per step
    T, state_shape = xproj.size(0), h0.shape
    cs = xproj.new_empty(T + 1, *state_shape)  # c_{-1} .. c_{T-1}
    tcs = xproj.new_empty(T, *state_shape)  # tanh(c_t)
    hs = xproj.new_empty(T, *state_shape)
    hms = xproj.new_empty(T, *state_shape)  # masked state fed back at step t (h_{t-1} * mask)
    cs[0] = c0
    h = h0
    add_recurrent = torch.addmm if w_hh.dim() == 2 else torch.baddbmm
    for t in range(T):
        hm = hms[t]
        torch.mul(h, mask, out=hm) if mask is not None else hm.copy_(h)
        a = acts[t]
        add_recurrent(xproj[t], hm, w_t, out=a)
        a[..., : 3 * H].sigmoid_()
        a[..., 3 * H :].tanh_()
        c = cs[t + 1]
        torch.mul(a[..., H : 2 * H], cs[t], out=c)
        c.addcmul_(a[..., :H], a[..., 3 * H :])
        torch.tanh(c, out=tcs[t])
        h = torch.mul(a[..., 2 * H : 3 * H], tcs[t], out=hs[t])
    return acts, cs, tcs, hs, hms


def _backward_python(d_hs, d_hT, d_cT, acts, cs, tcs, w_hh, mask):
    """The backward loop in Python (fallback of the C++ ``lstm_backward``): returns d_gates, ∂/∂h0, ∂/∂c0."""
    T, H = acts.size(0), acts.size(-1) // 4
    dh, dc = d_hT.clone(), d_cT.clone()
    d_gates = torch.empty_like(acts)
    for t in range(T - 1, -1, -1):
        a = acts[t]
        i, f, o, g = a[..., :H], a[..., H : 2 * H], a[..., 2 * H : 3 * H], a[..., 3 * H :]
        dh += d_hs[t]
        tc = tcs[t]
        dg = d_gates[t]
        # output gate: d(o) * o(1-o)
        torch.mul(dh, tc, out=dg[..., 2 * H : 3 * H])
        dg[..., 2 * H : 3 * H].mul_(o * (1 - o))
        # cell: dc += dh * o * (1 - tanh(c)^2)
        dc.addcmul_(dh * o, 1 - tc * tc)
        torch.mul(dc, g, out=dg[..., :H])
        dg[..., :H].mul_(i * (1 - i))
        torch.mul(dc, cs[t], out=dg[..., H : 2 * H])
        dg[..., H : 2 * H].mul_(f * (1 - f))
        torch.mul(dc, i, out=dg[..., 3 * H :])
        dg[..., 3 * H :].mul_(1 - g * g)
        dc = dc * f
        dh = torch.matmul(dg, w_hh)
        if mask is not None:
            dh.mul_(mask)
    return d_gates, dh, dc


def uses_native(x: torch.Tensor) -> bool:
    """Whether the recurrence of a CPU tensor runs the C++ loop (:mod:`tiedlm.native`)."""
    return x.device.type == "cpu" and native.available()


class LSTMRecurrence(torch.autograd.Function):
    """Fused-backward LSTM recurrence; same contract as :func:`lstm_recurrence_reference`.

    On the CPU both loops run in C++ (:mod:`tiedlm.native`) when it could be built, else in Python.
    """

    @staticmethod
    def forward(ctx, xproj, h0, c0, w_hh, mask):
        """xproj (T, *lead, 4H); h0/c0/mask (*lead, H); lead = (B,) with w_hh (4H, H), or (k, B) with (k, 4H, H)."""
        if uses_native(xproj):
            acts, cs, tcs, hs, hms = torch.ops.tiedlm.lstm_forward(
                xproj.contiguous(), h0.contiguous(), c0.contiguous(), w_hh, mask
            )
        else:
            acts, cs, tcs, hs, hms = _forward_python(xproj, h0, c0, w_hh, mask)
        ctx.save_for_backward(acts, cs, tcs, hms, w_hh, mask if mask is not None else torch.empty(0))
        ctx.has_mask = mask is not None
        return hs, hs[-1].clone(), cs[-1].clone()

    @staticmethod
    def backward(ctx, d_hs, d_hT, d_cT):
        acts, cs, tcs, hms, w_hh, mask = ctx.saved_tensors
        H = acts.size(-1) // 4
        mask = mask if ctx.has_mask else None
        d_hs = d_hs.contiguous() if d_hs is not None else torch.zeros_like(tcs)
        d_hT = d_hT if d_hT is not None else torch.zeros_like(tcs[0])
        d_cT = d_cT if d_cT is not None else torch.zeros_like(tcs[0])
        loop = torch.ops.tiedlm.lstm_backward if uses_native(acts) else _backward_python
        d_gates, dh, dc = loop(d_hs, d_hT, d_cT, acts, cs, tcs, w_hh, mask)
        if w_hh.dim() == 2:
            d_w = d_gates.view(-1, 4 * H).t() @ hms.view(-1, H)
        else:  # per block, once per window: k large matmuls summing over time steps and batch rows
            d_w = torch.stack(
                [d_gates[:, c].reshape(-1, 4 * H).t() @ hms[:, c].reshape(-1, H) for c in range(w_hh.size(0))]
            )
        return d_gates, dh, dc, d_w, None


def lstm_recurrence(xproj, h0, c0, w_hh, mask=None):
    """Run the recurrence with the fused-backward Function (fp32 state, no autocast inside).

    Dense: xproj (T,B,4H), state (B,H), w_hh (4H,H). Block-diagonal: xproj (T,k,B,4m), state (k,B,m),
    w_hh (k,4m,m) (see :class:`~tiedlm.models.encoders.sparse_lstm.SparseLSTMLayer`).
    """
    dtype = h0.dtype
    with torch.autocast(device_type=xproj.device.type, enabled=False):
        return LSTMRecurrence.apply(xproj.to(dtype), h0, c0, w_hh.to(dtype), mask)


def torch_gate_order(w: torch.Tensor) -> torch.Tensor:
    """tiedlm's [input, forget, output, cell] rows (dim 0 of (4H, ...)) in PyTorch's [input, forget, cell, output],
    and back (the swap is its own inverse): one copy."""
    i, f, o, g = w.chunk(4, 0)
    return torch.cat([i, f, g, o])


TORCH_GATES = (0, 1, 3, 2)  # tiedlm's [i, f, o, g] -> PyTorch's [i, f, g, o]


class _FlatLSTMWeights(torch.autograd.Function):
    """Forward: one ``torch.cat`` into the buffer. Backward: each gradient gate-reordered back, one copy each.

    Written as autograd ops (views of a ``cat`` of views), the backward of the four views and of the ``cat``
    zero-filled a buffer of the layer's full size for each view, added them, and cut the sum up again: about
    ten passes over the weights and ~70 more small ops a layer (docs/performance.md, "Training on a GPU")."""

    @staticmethod
    def forward(ctx, w_ih, w_hh, bias):
        H = w_hh.size(-1)
        pieces = [*w_ih.chunk(4, 0), *w_hh.chunk(4, 0), *bias.chunk(4, 0)]
        flat = torch.cat(
            [pieces[4 * m + q].reshape(-1) for m in range(3) for q in TORCH_GATES] + [bias.new_zeros(4 * H)]
        )
        n_ih, n_hh = w_ih.numel(), w_hh.numel()
        ctx.set_materialize_grads(False)
        return (
            flat[:n_ih].view(w_ih.shape),
            flat[n_ih : n_ih + n_hh].view(w_hh.shape),
            flat[n_ih + n_hh : n_ih + n_hh + 4 * H],
            flat[n_ih + n_hh + 4 * H :],
        )

    @staticmethod
    def backward(ctx, g_ih, g_hh, g_bih, g_bhh):
        # b_hh is the kernel's second bias, held at 0 (tiedlm has one): its gradient goes nowhere
        return tuple(None if g is None else torch_gate_order(g) for g in (g_ih, g_hh, g_bih))


def flat_lstm_weights(w_ih, w_hh, bias) -> list[torch.Tensor]:
    """tiedlm's layer weights as ``torch.lstm``'s four parameters, all views of **one** new contiguous buffer.

    The buffer is laid out as cuDNN keeps a one-layer LSTM's weights (what ``nn.LSTM.flatten_parameters`` builds):
    W_ih (4H, I), W_hh (4H, H), b_ih (4H), b_hh (4H), each in PyTorch's gate order [input, forget, cell, output]
    (:func:`torch_gate_order`), b_hh = 0. cuDNN then uses the buffer as it is; handed separate tensors, it warns
    that the "weights are not part of single contiguous chunk of memory" and copies them into one at every call.
    One ``torch.cat`` makes the buffer, the reordering included: the one copy a step needs anyway, since the
    weight-dropped W_hh is a new tensor every window. Its backward (:class:`_FlatLSTMWeights`) reorders each
    gradient back with one copy.
    """
    return list(_FlatLSTMWeights.apply(w_ih, w_hh, bias))


def round_up(n: int, multiple: int) -> int:
    """``n`` rounded up to a multiple of ``multiple`` (0: ``n`` itself)."""
    return -(-n // multiple) * multiple if multiple > 0 else n


def padded_lstm(x, h0, c0, w_ih, w_hh, bias, units: int, rows: int):
    """One LSTM layer's tensors padded to ``units`` hidden units and ``rows`` sequences, for a kernel that is
    faster at those shapes (tensor-core GEMMs are tiled for widths and batches that are multiples of 8).

    The padding changes nothing that is computed for the real units and rows: every gate of a padded unit gets
    zero weights and bias, so its pre-activations are 0, i = f = o = σ(0) = ½ and g = tanh(0) = 0, its cell
    c' = ½c + ½·0 stays at its initial 0 and its output h = ½·tanh(0) = 0 at every step; and W_hh's padded
    columns, zero too, carry nothing from the padded units to the real ones. Padded rows (zero inputs and state)
    are sequences of their own. The caller slices the real units and rows out of the outputs, so the gradients
    of the padding are dropped and those of the real weights are the unpadded layer's (to the order of the sums).
    """
    H, extra, more = h0.size(-1), units - h0.size(-1), rows - h0.size(0)
    pad = torch.nn.functional.pad

    def gates(w):  # each of the four gates' rows padded with zero rows: (4H, ...) -> (4 units, ...)
        return pad(w.reshape(4, H, -1), (0, 0, 0, extra)).reshape(4 * units, -1)

    state = [pad(s, (0, extra, 0, more)) for s in (h0, c0)]
    w_hh = pad(gates(w_hh), (0, extra))  # and zero columns: the padded units feed nothing back
    return pad(x, (0, 0, 0, more)), *state, gates(w_ih), w_hh, gates(bias[:, None]).view(-1)


def fused_lstm(x, h0, c0, w_ih, w_hh, bias, pad: tuple[int, int] = (0, 0)):
    """One LSTM layer through PyTorch's fused kernel (``torch.lstm``: cuDNN on a GPU), tiedlm's weights and gates.

    x (T,B,I); h0/c0 (B,H); w_ih (4H,I), w_hh (4H,H) (already weight-dropped where wanted) and bias (4H), gate
    order [input, forget, output, cell]. Returns outputs (T,B,H) and the final (h, c), the contract of
    :func:`lstm_recurrence` with its input projection folded in. fp32 state, no autocast inside, as the loop; under
    fp16 autocast (``train.precision = "fp16"``, whose loss scaling keeps the gradients) the kernel runs in fp16,
    its outputs fp16 and the final state fp32.

    The kernel gets contiguous tensors only (cuDNN refuses a non-contiguous state: "rnn: hx is not contiguous",
    as the sparse layer's column slices are) and its weights as one buffer (:func:`flat_lstm_weights`). It runs
    in training mode whenever gradients are being recorded (cuDNN's backward exists only after a training-mode
    forward: "cudnn RNN backward can only be called in training mode"; oneDNN on the CPU accepts either), and
    in inference mode under ``torch.no_grad()``. The kernel's own dropout is 0 either way, so both modes compute
    the same numbers.

    ``pad`` = (units, rows): the kernel runs at the hidden size and batch rounded up to these multiples
    (:func:`padded_lstm`; 0: as they are), the outputs cut back: the same layer, at a shape the kernel may run
    faster (``train.lstm_pad``).
    """
    dtype, (B, H) = h0.dtype, h0.shape
    device = x.device.type
    fp16 = torch.is_autocast_enabled(device) and torch.get_autocast_dtype(device) == torch.float16
    kernel = torch.float16 if fp16 else dtype
    units, rows = round_up(H, pad[0]), round_up(B, pad[1])
    if (units, rows) != (H, B):
        x, h0, c0, w_ih, w_hh, bias = padded_lstm(x, h0, c0, w_ih, w_hh, bias, units, rows)
    with torch.autocast(device_type=device, enabled=False):
        params = flat_lstm_weights(w_ih.to(kernel), w_hh.to(kernel), bias.to(kernel))
        hx = (h0.to(kernel).unsqueeze(0).contiguous(), c0.to(kernel).unsqueeze(0).contiguous())
        hs, hT, cT = torch.lstm(
            x.to(kernel).contiguous(), hx, params, True, 1, 0.0, torch.is_grad_enabled(), False, False
        )
    return hs[:, :B, :H], hT.squeeze(0)[:B, :H].to(dtype), cT.squeeze(0)[:B, :H].to(dtype)


def use_fused(mask) -> bool:
    """Whether a layer runs :func:`fused_lstm` rather than tiedlm's loop: where it has no per-sequence mask.

    Always then, unless ``TIEDLM_FUSED_LSTM=0`` (tiedlm's loop everywhere, for comparisons). Measured on a
    2-core AVX2 CPU (docs/performance.md, "Fused LSTM kernels"), the fused kernel beat the C++ loop at every
    size tried, in training with a dropped W_hh (the whole PTB-size AWD-LSTM step: 1.21× at 2 threads, 1.05×
    at 1) and in evaluation (1.05–1.77× per layer); on a GPU it is cuDNN against a Python loop of small kernels.
    """
    return mask is None and os.environ.get("TIEDLM_FUSED_LSTM", "1") != "0"
