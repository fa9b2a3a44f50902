"""Encoder–decoder Transformer (Vaswani et al. 2017, pre-norm) whose output layer is one of DRILL's family.

The target embedding E is the output layer's label embedding: ``tied`` scores decoder states against E
(Press & Wolf 2017; Inan et al.'s RE), ``drill`` against the deep residual label encoding of E
(Pappas & Henderson 2019 eqs. 8–12, their §4.3 NMT set-up), ``dual``/``bilinear``/``full`` as in the LM.
With a joint subword vocabulary and ``share_embeddings`` the source embedding is E too.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from ...models.encoders.transformer import TransformerBlock, positional_encoding
from ...models.outputs import build_output
from .config import TranslationConfig
from .data import PAD


class TransformerTranslator(nn.Module):
    def __init__(self, cfg: TranslationConfig, source_vocab: int, target_vocab: int):
        super().__init__()
        d = cfg.model.d_model
        self.cfg = cfg
        self.target_embedding = nn.Embedding(target_vocab, d, padding_idx=PAD)
        # shared: held in a list so that the one tensor is registered (and saved) once, as target_embedding
        self._source = (
            [self.target_embedding]
            if cfg.data.share_embeddings
            else nn.ModuleList([nn.Embedding(source_vocab, d, padding_idx=PAD)])
        )
        self.positions = positional_encoding(cfg.model.positions, d, cfg.model.max_positions)
        self.encoder = nn.ModuleList(
            TransformerBlock(
                d, cfg.model.heads, cfg.model.ffn_size, cfg.model.dropout, attention_dropout=cfg.model.attention_dropout
            )
            for _ in range(cfg.model.encoder_layers)
        )
        self.decoder = nn.ModuleList(
            TransformerBlock(
                d,
                cfg.model.heads,
                cfg.model.ffn_size,
                cfg.model.dropout,
                cross=True,
                attention_dropout=cfg.model.attention_dropout,
            )
            for _ in range(cfg.model.decoder_layers)
        )
        self.encoder_norm, self.decoder_norm = nn.LayerNorm(d), nn.LayerNorm(d)
        self.drop = nn.Dropout(cfg.model.dropout)
        self.output = build_output(cfg.model.output, self.target_embedding, d)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Embeddings N(0, d^-1/2) (scaled by √d on input, so unit variance; Vaswani et al. §3.4), blocks
        Xavier-uniform, the output layer its own rule (bias 0; DRILL's label encoder ±drill_init_range)."""
        d = self.cfg.model.d_model
        for emb in {
            id(self.source_embedding): self.source_embedding,
            id(self.target_embedding): self.target_embedding,
        }.values():
            nn.init.normal_(emb.weight, std=d**-0.5)
            with torch.no_grad():
                emb.weight[PAD].zero_()
        for block in [*self.encoder, *self.decoder]:
            block.reset_parameters()
        self.output.reset_parameters()

    @property
    def source_embedding(self) -> nn.Embedding:
        return self._source[0]

    @property
    def input_embeddings(self) -> torch.Tensor:
        """The target-side E (|V|, d): what the augmented loss builds its targets from."""
        return self.target_embedding.weight

    def _embed(self, embedding: nn.Embedding, ids: torch.Tensor, offset: int = 0) -> torch.Tensor:
        x = embedding(ids) * math.sqrt(self.cfg.model.d_model)
        return self.drop(x + self.positions(ids.size(1), offset, x))

    def encode(self, source: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """source (B,S) ids -> memory (B,S,d) and its key mask (B,1,1,S), True at real tokens."""
        mask = (source != PAD)[:, None, None, :]
        h = self._embed(self.source_embedding, source)
        for block in self.encoder:
            h = block(h, mask=mask)
        return self.encoder_norm(h), mask

    def decode(
        self,
        target_in: torch.Tensor,
        memory: torch.Tensor,
        memory_mask: torch.Tensor,
        cache: dict | None = None,
        offset: int = 0,
    ) -> torch.Tensor:
        """target_in (B,T) ids -> decoder states (B,T,d). With ``cache`` (incremental decoding) only the new
        positions ``offset..offset+T-1`` are fed; earlier keys/values come from the cache."""
        h = self._embed(self.target_embedding, target_in, offset)
        for i, block in enumerate(self.decoder):
            h = block(h, causal=True, memory=memory, memory_mask=memory_mask, cache=cache, index=i)
        return self.decoder_norm(h)

    def forward(self, source: torch.Tensor, target_in: torch.Tensor) -> torch.Tensor:
        """Teacher forcing: decoder states (B,T,d); score them with :attr:`output` (only where needed)."""
        memory, mask = self.encode(source)
        return self.decode(target_in, memory, mask)

    def parameter_counts(self) -> dict[str, int]:
        """Trainable parameters per component; shared tensors counted once (under embeddings)."""
        embeddings = {id(p): p.numel() for m in (self.source_embedding, self.target_embedding) for p in m.parameters()}
        counts = {
            "embeddings": sum(embeddings.values()),
            "encoder": sum(p.numel() for p in self.encoder.parameters())
            + sum(p.numel() for p in self.encoder_norm.parameters()),
            "decoder": sum(p.numel() for p in self.decoder.parameters())
            + sum(p.numel() for p in self.decoder_norm.parameters()),
            "positions": sum(p.numel() for p in self.positions.parameters()),
            "output": self.output.dedicated_parameters(),
        }
        counts["total"] = sum(counts.values())
        return counts
