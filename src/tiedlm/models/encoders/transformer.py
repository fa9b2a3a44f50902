"""Transformer building blocks (Vaswani et al. 2017) in the pre-norm arrangement (Xiong et al. 2020).

- :class:`Attention`: multi-head attention on ``F.scaled_dot_product_attention`` (fused kernels on
  CPU and GPU); self-attention (causal or with a key-padding mask) and cross-attention; an optional
  key/value cache for incremental decoding (beam search).
- :class:`TransformerBlock`: x + Attn(LN(x)) [+ CrossAttn(LN(x), memory)] + FFN(LN(x)).
- :func:`positional_encoding`: sinusoidal (fixed) or learned absolute positions.
- :class:`CausalTransformer`: the decoder-only LM encoder, a drop-in replacement for VD-LSTM/AWD-LSTM
  under every output layer of :mod:`tiedlm.models.outputs` and the augmented loss.

The LM encoder is fed BPTT windows like the LSTMs. Its carried "state" is the last ``memory``
input embeddings of the stream (detached between windows like an LSTM state), which it re-reads in
front of each window: a window's first token sees up to ``memory`` earlier tokens, and the stream
evaluation (:mod:`tiedlm.evaluation`) gives every token at least that much context.
"""

from __future__ import annotations

import contextlib
import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel

from .base import MemoryEncoder
from .configs import TransformerConfig

POSITIONS = ("sinusoidal", "learned")


def _cpu_math_kernel(q: torch.Tensor):
    """On CPU, SDPA's unfused (math) kernel: for our short sentences and d_k = 64 its training step was ~5x
    faster than the CPU flash kernel's backward (measured with torch.profiler, torch 2.13, bf16)."""
    if q.device.type != "cpu":
        return contextlib.nullcontext()
    return sdpa_kernel(SDPBackend.MATH)


class Attention(nn.Module):
    """Multi-head scaled dot-product attention, softmax(QKᵀ/√d_k)V (Vaswani et al. eq. 1)."""

    def __init__(self, d_model: int, heads: int, dropout: float = 0.0):
        super().__init__()
        if d_model % heads:
            raise ValueError(f"d_model {d_model} is not divisible by heads {heads}")
        self.heads, self.dropout = heads, dropout
        self.query = nn.Linear(d_model, d_model)
        self.key_value = nn.Linear(d_model, 2 * d_model)
        self.out = nn.Linear(d_model, d_model)

    def _split(self, x: torch.Tensor) -> torch.Tensor:  # (B,T,d) -> (B,heads,T,d_k)
        b, t, d = x.shape
        return x.view(b, t, self.heads, d // self.heads).transpose(1, 2)

    def forward(
        self,
        x: torch.Tensor,
        source: torch.Tensor | None = None,
        *,
        mask: torch.Tensor | None = None,
        causal: bool = False,
        cache: dict | None = None,
        name: str = "",
    ) -> torch.Tensor:
        """x (B,T,d) attends to ``source`` (B,S,d) (default: x itself).

        mask: boolean (B,1,1|T,S), True where attention is allowed (key padding). causal: position t
        attends to positions ≤ t only. cache: a dict kept across decoding steps; self-attention appends
        this step's keys/values under ``name``, cross-attention computes the source's once.
        """
        q = self._split(self.query(x))
        if cache is not None and source is not None and name in cache:
            k, v = cache[name]  # cross-attention: the encoder output does not change while decoding
        else:
            k, v = (self._split(t) for t in self.key_value(x if source is None else source).chunk(2, dim=-1))
            if cache is not None:
                if source is None and name in cache:
                    k, v = torch.cat([cache[name][0], k], 2), torch.cat([cache[name][1], v], 2)
                cache[name] = (k, v)
        # with a cache, the new queries are the last positions: causality holds without a mask
        is_causal = causal and cache is None and q.size(2) > 1
        with _cpu_math_kernel(q):
            y = F.scaled_dot_product_attention(
                q, k, v, attn_mask=mask, is_causal=is_causal, dropout_p=self.dropout if self.training else 0.0
            )
        b, h, t, dk = y.shape
        return self.out(y.transpose(1, 2).reshape(b, t, h * dk))


class TransformerBlock(nn.Module):
    """Pre-norm block: self-attention, optional cross-attention, position-wise FFN, each residual.

    ``dropout`` applies to each sub-layer's output (Vaswani et al. §5.4); ``attention_dropout`` to the attention
    weights (0 by default, as fairseq's). No dropout inside the FFN: on CPU, drawing a mask for its
    (tokens × ffn_size) activations took ~20% of a training step.
    """

    def __init__(
        self,
        d_model: int,
        heads: int,
        ffn_size: int,
        dropout: float,
        cross: bool = False,
        attention_dropout: float = 0.0,
    ):
        super().__init__()
        self.norm_self = nn.LayerNorm(d_model)
        self.self_attn = Attention(d_model, heads, attention_dropout)
        self.norm_cross = nn.LayerNorm(d_model) if cross else None
        self.cross_attn = Attention(d_model, heads, attention_dropout) if cross else None
        self.norm_ffn = nn.LayerNorm(d_model)
        self.ffn = nn.Sequential(nn.Linear(d_model, ffn_size), nn.ReLU(), nn.Linear(ffn_size, d_model))
        self.drop = nn.Dropout(dropout)

    def forward(
        self,
        x: torch.Tensor,
        *,
        causal: bool = False,
        mask: torch.Tensor | None = None,
        memory: torch.Tensor | None = None,
        memory_mask: torch.Tensor | None = None,
        cache: dict | None = None,
        index: int = 0,
    ) -> torch.Tensor:
        x = x + self.drop(self.self_attn(self.norm_self(x), mask=mask, causal=causal, cache=cache, name=f"self{index}"))
        if self.cross_attn is not None:
            x = x + self.drop(
                self.cross_attn(self.norm_cross(x), memory, mask=memory_mask, cache=cache, name=f"cross{index}")
            )
        return x + self.drop(self.ffn(self.norm_ffn(x)))

    def reset_parameters(self) -> None:
        """Xavier-uniform weights and zero biases for every linear map (Vaswani et al.'s reference code)."""
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.xavier_uniform_(m.weight)
                nn.init.zeros_(m.bias)
            elif isinstance(m, nn.LayerNorm):
                m.reset_parameters()


class SinusoidalPositions(nn.Module):
    """PE(p, 2i) = sin(p / 10000^(2i/d)), PE(p, 2i+1) = cos(·) (Vaswani et al. §3.5); any length."""

    def __init__(self, d_model: int):
        super().__init__()
        self.d_model = d_model

    def forward(self, length: int, offset: int, like: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(offset, offset + length, device=like.device, dtype=torch.float32).unsqueeze(1)
        freq = torch.exp(
            torch.arange(0, self.d_model, 2, device=like.device, dtype=torch.float32)
            * (-math.log(10000.0) / self.d_model)
        )
        pe = torch.zeros(length, self.d_model, device=like.device)
        pe[:, 0::2] = torch.sin(pos * freq)
        pe[:, 1::2] = torch.cos(pos * freq)[:, : self.d_model // 2]
        return pe.to(like.dtype)


class LearnedPositions(nn.Module):
    """A trained vector per absolute position 0..max_positions−1."""

    def __init__(self, d_model: int, max_positions: int):
        super().__init__()
        self.table = nn.Embedding(max_positions, d_model)
        nn.init.normal_(self.table.weight, std=0.02)

    def forward(self, length: int, offset: int, like: torch.Tensor) -> torch.Tensor:
        if offset + length > self.table.num_embeddings:
            raise ValueError(
                f"a sequence of {offset + length} positions exceeds the {self.table.num_embeddings} "
                "learned positions; raise max_positions or use sinusoidal positions"
            )
        return self.table.weight[offset : offset + length].to(like.dtype)


def positional_encoding(kind: str, d_model: int, max_positions: int) -> nn.Module:
    if kind == "sinusoidal":
        return SinusoidalPositions(d_model)
    if kind == "learned":
        return LearnedPositions(d_model, max_positions)
    raise ValueError(f"unknown positions {kind!r}; expected one of {', '.join(POSITIONS)}")


class CausalTransformer(MemoryEncoder):
    """Decoder-only LM encoder: x_t → h_t with causal self-attention over the window and the memory.

    Attention weights are not dropped (see :class:`TransformerBlock`). Input embeddings are scaled by √d
    (Vaswani et al. §3.4: the input and output embeddings are shared there too), positions added, then
    ``layers`` pre-norm blocks and a final LayerNorm; h_t has the embedding size, so tied and DRILL output
    layers apply directly.
    """

    def __init__(
        self,
        d_model: int,
        ffn_size: int,
        layers: int,
        heads: int,
        dropout: float = 0.1,
        positions: str = "sinusoidal",
        max_positions: int = 512,
        memory: int = 0,
    ):
        super().__init__()
        self.d_model, self.memory, self.output_size = d_model, memory, d_model
        self.positions = positional_encoding(positions, d_model, max_positions)
        self.blocks = nn.ModuleList(TransformerBlock(d_model, heads, ffn_size, dropout) for _ in range(layers))
        self.norm = nn.LayerNorm(d_model)
        self.drop = nn.Dropout(dropout)

    init_everything_uniform = False  # the blocks Xavier-uniform (reset_parameters), the embedding ±init_range

    @classmethod
    def from_config(cls, cfg: TransformerConfig, input_size: int, output_size: int) -> "CausalTransformer":
        return cls(
            input_size,
            cfg.hidden_size,
            cfg.layers,
            cfg.heads,
            dropout=cfg.dropout,
            positions=cfg.positions,
            max_positions=cfg.max_positions,
            memory=cfg.memory,
        )

    def reset_parameters(self) -> None:
        for block in self.blocks:
            block.reset_parameters()
        self.norm.reset_parameters()

    def forward(self, x: torch.Tensor, state):
        """x (T,B,d) embeddings -> h (T,B,d) and the new state (the last ``memory`` inputs, (B,M,d))."""
        seq, past, state = self.with_memory(x, state)
        h = self.drop(seq * math.sqrt(self.d_model) + self.positions(seq.size(1), 0, seq))
        for block in self.blocks:
            h = block(h, causal=True)
        return self.norm(h[:, past:]).transpose(0, 1), state
