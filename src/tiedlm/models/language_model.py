"""The language model: embedding -> encoder -> output layer (Inan et al. eqs. 2.1–2.3)."""

from __future__ import annotations

import torch
from torch import nn

from ..config import ModelConfig
from ..errors import UsageError
from .output import FullSoftmaxOutput, TiedOutput
from .vd_lstm import VDLSTM


class LanguageModel(nn.Module):
    """x_t = L y*_{t-1} (2.1); h_t = f(x_t, h_{t-1}) (2.2); logits_t = W h_t + b (2.3)."""

    def __init__(self, cfg: ModelConfig, vocab_size: int):
        super().__init__()
        if cfg.output == "tied" and cfg.embedding_size != cfg.hidden_size:
            raise UsageError(
                f"reused embeddings need embedding_size == hidden_size (got {cfg.embedding_size} and "
                f"{cfg.hidden_size}); set both equal or use model.output = 'full'"
            )
        self.cfg, self.vocab_size = cfg, vocab_size
        self.embedding = nn.Embedding(vocab_size, cfg.embedding_size)
        self.encoder = VDLSTM(cfg.embedding_size, cfg.hidden_size, cfg.layers, cfg.dropout)
        if cfg.output == "tied":
            self.output = TiedOutput(self.embedding, bias=cfg.tied_bias)
        else:
            self.output = FullSoftmaxOutput(cfg.hidden_size, vocab_size)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Uniform initialisation in ±init_range for every parameter (as Zaremba et al. 2014)."""
        r = self.cfg.init_range
        for p in self.parameters():
            nn.init.uniform_(p, -r, r)

    @property
    def input_embeddings(self) -> torch.Tensor:
        """L^T as a (|V|, d) matrix: row i is the input vector of word i."""
        return self.embedding.weight

    def init_state(self, batch: int):
        return self.encoder.init_state(batch, self.embedding.weight)

    def forward(self, inputs: torch.Tensor, state):
        """inputs (T,B) ids -> logits (T,B,|V|) and the new encoder state."""
        h, state = self.encoder(self.embedding(inputs), state)
        return self.output(h), state

    def parameter_counts(self) -> dict[str, int]:
        """Trainable parameters per component; shared tensors are counted once (under embedding)."""
        counts = {
            "embedding": self.embedding.weight.numel(),
            "encoder": sum(p.numel() for p in self.encoder.parameters()),
            "output": sum(p.numel() for p in self.output.parameters()),
        }
        counts["total"] = sum(counts.values())
        return counts
