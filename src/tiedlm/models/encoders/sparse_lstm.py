"""Predefined sparse LSTM layers (Demeester et al. 2018, §3 "Sparse recurrent layers").

A sparse LSTM layer of hidden size h_s is k dense LSTM components side by side. Component c owns the
contiguous block of m = h_s/k hidden units [c·m, (c+1)·m) and reads a contiguous slice of w = δ·i input
units; the k slices are spread evenly over the input (the first starts at 0, the last ends at i, they
overlap when k·w > i and must cover it: k·w ≥ i). The recurrent weights are therefore block-diagonal.

Only the non-zero blocks are stored: ``weight_ih`` (k, 4m, w), ``weight_hh`` (k, 4m, m) and the bias (k, 4m),
so the layer has

    P_sparse = 4·h_s·(w + h_s/k) + 4·h_s        trainable parameters, against
    P_dense  = 4·h·(i + h) + 4·h                for a dense layer of input i and hidden h.

Identifying both (the paper's "same number of parameters") fixes w for a chosen (h_s, k):
:func:`equal_parameter_slice`. The authors' AWD-LSTM (Table 1; SparseSeqModels' ``--sparse_mode sparse_hidden
--sparse_fract 0.66666 --nhid 1725``) widens both hidden representations from 1150 to 1725 and makes *every*
layer sparse at the parameter count of the dense layer it replaces (:class:`SparseStackSpec`,
:func:`reduced_layer_shape`): 400→1725 with k = 3 reading the whole input, 1725→1725 with k = 3 each reading
w = 958 of the 1725 inputs (the paper's γ = 0.555 is this w relative to the layer's *input*), and 1725→400
with k = 2 (w = 1350): 19.80M encoder parameters against the dense 20.20M.

Where the slices differ from the reference's: SparseSeqModels' ``_calc_segments`` places each component's
slice at the float boundaries ``c·(i·δ − overlap)`` and ``… + i·δ`` and truncates both with ``int()`` (the last
end set to i), so its components can differ in width by one: 957, 958, 958 at 1725→1725 (i·δ = 957.6) and
1349, 1350 at 1725→400 (i·δ = 1349.9885, from the reference's 0.66666). tiedlm gives every component one
integer width w (958, 1350: the equal-parameter width rounded, stored as one (k, 4m, w) tensor) and starts the
slices at rounded, evenly spaced positions. The slices are therefore [0, 958), [384, 1342), [767, 1725)
against the reference's [0, 957), [383, 1341), [767, 1725) in the middle layer, and [0, 1350), [375, 1725)
against [0, 1349), [375, 1725) in the last: one input unit more for the first component of each
(4·575 + 4·200 = 3,100 weights in all), the second middle component shifted by one; the first layer (whole
input) is the same.
``tests/test_sparse.py`` writes the reference's construction out and pins exactly this difference.

Each recurrent time step runs all k components as one batched computation: one ``baddbmm`` (forward)
and one ``bmm`` (backward) over the k blocks in :func:`tiedlm.models.encoders.recurrence.lstm_recurrence` (given
(k, 4m, m) weights), never a Python loop over components per step. The once-per-window parts (the input
projections of all time steps and the recurrent weight gradient) are k large matmuls, which oneDNN runs
faster than one ``bmm`` here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from ...errors import UsageError
from .lstm_layer import VDLSTMLayer, drop_connect
from .recurrence import fused_lstm, lstm_recurrence, use_fused


def dense_lstm_parameters(input_size: int, hidden_size: int) -> int:
    """4h(i + h) + 4h: a dense LSTM layer with one bias vector."""
    return 4 * hidden_size * (input_size + hidden_size) + 4 * hidden_size


def sparse_lstm_parameters(input_size: int, hidden_size: int, components: int, slice_size: int) -> int:
    """4h_s(w + h_s/k) + 4h_s: the trainable parameters of a sparse layer (the stored blocks and the bias)."""
    _check_shape(input_size, hidden_size, components, slice_size)
    return 4 * hidden_size * (slice_size + hidden_size // components) + 4 * hidden_size


def _check_shape(input_size: int, hidden_size: int, components: int, slice_size: int) -> None:
    if components < 1 or hidden_size % components:
        raise UsageError(
            f"sparse LSTM: hidden size {hidden_size} is not divisible into {components} components; "
            f"choose a component count that divides it"
        )
    _check_slices(input_size, components, slice_size)


def _check_slices(input_size: int, components: int, slice_size: int) -> None:
    if not 1 <= slice_size <= input_size:
        raise UsageError(
            f"sparse LSTM: input slice of {slice_size} units does not fit an input of {input_size}; "
            f"the density must be in (0, 1]"
        )
    if components * slice_size < input_size:
        raise UsageError(
            f"sparse LSTM: {components} slices of {slice_size} units cannot cover an input of "
            f"{input_size} (need density >= 1/k = {1 / components:.3f}); raise the density or k"
        )


def equal_parameter_slice(input_size: int, dense_hidden: int, sparse_hidden: int, components: int) -> int:
    """Slice width w giving a sparse layer (h_s, k) the parameter count of a dense layer (i, h) (rounded)."""
    if sparse_hidden % components:
        raise UsageError(f"sparse LSTM: hidden size {sparse_hidden} is not divisible into {components} components")
    target = dense_lstm_parameters(input_size, dense_hidden)
    w = round((target - 4 * sparse_hidden) / (4 * sparse_hidden) - sparse_hidden / components)
    if not math.ceil(input_size / components) <= w <= input_size:
        raise UsageError(
            f"sparse LSTM: no input slice gives a {sparse_hidden}-unit layer with {components} components the "
            f"{target:,} parameters of a dense {input_size}->{dense_hidden} layer (it would need {w} of "
            f"{input_size} inputs per component, allowed {math.ceil(input_size / components)}..{input_size}); "
            f"change sparse_hidden_size or sparse_components"
        )
    return w


def solve_equal_parameters(
    input_size: int, dense_hidden: int, sparse_hidden: int, components: int = 0
) -> tuple[int, int]:
    """(k, w) for a sparse layer of ``sparse_hidden`` units with a dense layer's parameter count.

    With ``components`` = 0 the smallest k ≥ 2 that divides h_s and admits a slice is chosen (fewest, widest
    components); otherwise k is kept and only w is solved.
    """
    if components:
        return components, equal_parameter_slice(input_size, dense_hidden, sparse_hidden, components)
    for k in range(2, sparse_hidden + 1):
        if sparse_hidden % k:
            continue
        try:
            return k, equal_parameter_slice(input_size, dense_hidden, sparse_hidden, k)
        except UsageError:
            continue
    raise UsageError(
        f"sparse LSTM: no component count k gives a {sparse_hidden}-unit layer the parameter count of "
        f"a dense {input_size}->{dense_hidden} layer; choose a smaller sparse_hidden_size"
    )


def slice_starts(input_size: int, components: int, slice_size: int) -> list[int]:
    """The first input unit of each component's slice: spread evenly, the first at 0 and the last ending at i."""
    _check_slices(input_size, components, slice_size)
    span = input_size - slice_size
    return [round(c * span / (components - 1)) if components > 1 else span // 2 for c in range(components)]


def input_slices(input_size: int, components: int, slice_size: int) -> torch.Tensor:
    """(k, w) input indices: contiguous slices spread evenly, the first at 0 and the last ending at i."""
    return torch.tensor(slice_starts(input_size, components, slice_size)).unsqueeze(1) + torch.arange(slice_size)


@dataclass(frozen=True)
class SparseLayerSpec:
    """One LSTM layer of a stack made sparse (``ModelConfig.sparse_layer`` and ``sparse_*``)."""

    layer: int  # 1-based layer number
    hidden_size: int  # h_s
    components: int  # k; 0: solve with the slice for the dense layer's parameter count
    density: float  # δ = w / i; 0: solve for the dense layer's parameter count


@dataclass(frozen=True)
class SparseStackSpec:
    """Every LSTM layer sparse, the authors' configuration (``ModelConfig.sparse_fraction``; SparseSeqModels'
    ``--sparse_mode sparse_hidden --sparse_fract f``).

    The stack is built at its *wide* sizes (e.g. AWD-LSTM's hidden 1725), and each layer gets the parameter
    count of a dense layer whose hidden sizes are f times smaller (f = 2/3: 1725 -> 1150): the first layer's
    input and the last layer's output are not reduced, so the layers are (1, f), (f, f), …, (f, 1) in
    (input, output) reduction (:func:`reduced_layer_shape`).
    """

    fraction: float  # f


def sparse_spec(cfg) -> SparseLayerSpec | SparseStackSpec | None:
    """The sparse layout a :class:`~tiedlm.models.config.ModelConfig` asks for: every layer (``sparse_fraction``), one
    layer (``sparse_layer``), or None."""
    if cfg.sparse_fraction:
        return SparseStackSpec(cfg.sparse_fraction)
    if not cfg.sparse_layer:
        return None
    return SparseLayerSpec(cfg.sparse_layer, cfg.sparse_hidden_size, cfg.sparse_components, cfg.sparse_density)


def reduced_layer_shape(input_size: int, hidden_size: int, reduce_in: float, reduce_out: float) -> tuple[int, int]:
    """(k, w) of a sparse ``input_size -> hidden_size`` layer with the parameters of the dense layer
    ``round(reduce_in·i) -> round(reduce_out·h)``: the fewest components k (dividing h) whose slices can cover
    the input, and the slice width w for that count, at most the whole input (Demeester et al. 2018 §3; the
    reference's ``_calc_minimal_k`` / ``_calc_input_density``, with tiedlm's one bias vector per layer).

    Per hidden unit the budget is w + h/k (+1 for the bias), so covering the input (k·w ≥ i) needs
    k ≥ (i + h) / (budget − 1).
    """
    target = dense_lstm_parameters(round(reduce_in * input_size), round(reduce_out * hidden_size))
    per_unit = target / (4 * hidden_size) - 1  # = w + h/k
    if per_unit <= 0:
        raise UsageError(
            f"sparse LSTM: reductions ({reduce_in}, {reduce_out}) leave no parameters for a "
            f"{input_size}->{hidden_size} layer; raise model.sparse_fraction"
        )
    k = max(1, math.ceil((input_size + hidden_size) / per_unit - 1e-9))
    while hidden_size % k:
        k += 1
    w = min(input_size, round(per_unit - hidden_size / k))
    if k > hidden_size or w < 1 or k * w < input_size:
        raise UsageError(
            f"sparse LSTM: reductions ({reduce_in}, {reduce_out}) are too strong for a "
            f"{input_size}->{hidden_size} layer; raise model.sparse_fraction"
        )
    return k, w


class SparseLSTMLayer(nn.Module):
    """k dense LSTM components side by side (Demeester et al. 2018, §3); drop-in for ``VDLSTMLayer``.

    Hidden unit c·m + u is unit u of component c; each component's 4m pre-activations are ordered as a
    ``VDLSTMLayer``'s ([input, forget, output, cell]); :meth:`dense_weights` gives the equivalent dense layer.
    """

    def __init__(self, input_size: int, hidden_size: int, components: int, slice_size: int, weight_drop: float = 0.0):
        super().__init__()
        _check_shape(input_size, hidden_size, components, slice_size)
        self.input_size, self.hidden_size, self.weight_drop = input_size, hidden_size, weight_drop
        self.components, self.slice_size = components, slice_size
        m = hidden_size // components
        self.weight_ih = nn.Parameter(torch.empty(components, 4 * m, slice_size))
        self.weight_hh = nn.Parameter(torch.empty(components, 4 * m, m))
        self.bias = nn.Parameter(torch.empty(components, 4 * m))
        self.register_buffer("input_index", input_slices(input_size, components, slice_size), persistent=False)
        self.slice_starts = slice_starts(input_size, components, slice_size)  # ints: slicing never syncs a GPU
        self.reset_parameters()

    @property
    def density(self) -> float:
        return self.slice_size / self.input_size

    def reset_parameters(self, init_range: float | None = None) -> None:
        """Uniform in ±init_range (default ±1/sqrt(h_s), nn.LSTM's rule)."""
        r = init_range if init_range is not None else self.hidden_size**-0.5
        for p in self.parameters():
            nn.init.uniform_(p, -r, r)

    def input_projection(self, x: torch.Tensor) -> torch.Tensor:
        """x (T,B,I) -> W_ih x + b for all time steps, as (T, k, B, 4m).

        Once per window, so k large ``F.linear`` calls (oneDNN's bf16 kernels) beat one ``bmm`` here; the
        per-time-step recurrence is where the components run as one batched computation.
        """
        w_in = self.slice_size
        parts = [F.linear(x[..., a : a + w_in], w, b) for a, w, b in zip(self.slice_starts, self.weight_ih, self.bias)]
        return torch.stack(parts, 1)

    def forward(self, x, state, mask=None):
        """Same contract as :meth:`VDLSTMLayer.forward`: x (T,B,I), state and mask (B,h_s); outputs (T,B,h_s)."""
        k, m = self.components, self.hidden_size // self.components

        def blocks(t):  # (B, h_s) -> (k, B, m)
            return t.view(t.size(0), k, m).transpose(0, 1).contiguous()

        def unblocks(t):  # (..., k, B, m) -> (..., B, h_s)
            return t.transpose(-3, -2).reshape(*t.shape[:-3], t.size(-2), k * m)

        w_hh = drop_connect(self.weight_hh, self.weight_drop, self.training)
        h0, c0 = state
        if use_fused(mask) and (x.device.type != "cpu" or self.slice_size <= 4 * m):
            return self._fused_components(x, h0, c0, w_hh)
        hs, hT, cT = lstm_recurrence(
            self.input_projection(x), blocks(h0), blocks(c0), w_hh, blocks(mask) if mask is not None else None
        )
        hs, hT, cT = unblocks(hs), unblocks(hT), unblocks(cT)
        out = hs * mask if mask is not None else hs
        return out, (hT, cT)

    def _fused_components(self, x, h0, c0, w_hh):
        """Without a per-sequence mask: the k components as k fused LSTMs (:func:`fused_lstm`) over their input
        slices, concatenated. On the CPU only where the slice is at most 4× the component's width: measured on
        a 2-core AVX2 CPU (docs/performance.md, "Fused LSTM kernels"), k fused kernels beat the batched loop
        by 1.06–1.21× at the authors' 400→1725 (k=3) and 1725→1725 (k=3, w=958) layers, and lose (0.82–0.88×)
        at 1725→400 (k=2, w=1350 inputs for 200 units)."""
        m = self.hidden_size // self.components
        outs, hs, cs = [], [], []
        for c, a in enumerate(self.slice_starts):
            units = slice(c * m, (c + 1) * m)
            o, h, cc = fused_lstm(
                x[..., a : a + self.slice_size], h0[:, units], c0[:, units], self.weight_ih[c], w_hh[c], self.bias[c]
            )
            outs.append(o)
            hs.append(h)
            cs.append(cc)
        return torch.cat(outs, -1), (torch.cat(hs, -1), torch.cat(cs, -1))

    @torch.no_grad()
    def dense_weights(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The equivalent dense (4h_s, i), (4h_s, h_s) weights, zero outside the predefined blocks, and bias.

        Dense pre-activation row q·h_s + c·m + u is gate q of unit u of component c (``VDLSTMLayer``'s layout).
        """
        k, m, H = self.components, self.hidden_size // self.components, self.hidden_size
        w_ih = self.weight_ih.new_zeros(4, k, m, self.input_size)
        w_hh = self.weight_hh.new_zeros(4, k, m, k, m)
        for c in range(k):  # a test/analysis helper, not the hot path
            w_ih[:, c, :, self.input_index[c]] = self.weight_ih[c].view(4, m, self.slice_size)
            w_hh[:, c, :, c, :] = self.weight_hh[c].view(4, m, m)
        bias = self.bias.view(k, 4, m).transpose(0, 1).reshape(4 * H)
        return w_ih.view(4 * H, self.input_size), w_hh.view(4 * H, H), bias


def lstm_layers(
    sizes: list[int], weight_drop: float, sparse: SparseLayerSpec | SparseStackSpec | None
) -> nn.ModuleList:
    """LSTM layers sizes[0]→sizes[1]→…, dense or predefined-sparse (:class:`SparseLSTMLayer`).

    - :class:`SparseLayerSpec`: the layer ``sparse.layer`` is sparse; ``sizes`` are the dense sizes, the sparse
      layer replaces its size by ``sparse.hidden_size`` (the next layer then reads the wider state) and, where
      ``components``/``density`` are 0, is solved to the parameter count of the dense layer it replaces.
    - :class:`SparseStackSpec`: every layer is sparse at the given (wide) sizes, each shaped by
      :func:`reduced_layer_shape` with reductions (1, f), (f, f), …, (f, 1).
    """
    sizes = list(sizes)
    if isinstance(sparse, SparseStackSpec):
        n = len(sizes) - 1
        layers = []
        for j in range(1, n + 1):
            reduce_in = 1.0 if j == 1 else sparse.fraction
            reduce_out = 1.0 if j == n else sparse.fraction
            k, w = reduced_layer_shape(sizes[j - 1], sizes[j], reduce_in, reduce_out)
            layers.append(SparseLSTMLayer(sizes[j - 1], sizes[j], k, w, weight_drop))
        return nn.ModuleList(layers)
    layers = []
    for n in range(1, len(sizes)):
        if sparse is not None and n == sparse.layer:
            i, h, h_s = sizes[n - 1], sizes[n], sparse.hidden_size or sizes[n]
            if n == len(sizes) - 1 and h_s != h:
                raise UsageError(
                    f"sparse LSTM: widening the last layer ({h} -> {h_s}) changes the encoder's output "
                    f"size; make a middle layer sparse (model.sparse_layer) or keep its size"
                )
            if sparse.density:
                k = sparse.components or 3
                w = round(sparse.density * i)
            else:
                k, w = solve_equal_parameters(i, h, h_s, sparse.components)
            sizes[n] = h_s
            layers.append(SparseLSTMLayer(i, h_s, k, w, weight_drop))
        else:
            layers.append(VDLSTMLayer(sizes[n - 1], sizes[n], weight_drop))
    return nn.ModuleList(layers)
