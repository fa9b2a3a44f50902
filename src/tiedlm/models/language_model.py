"""The language model: embedding -> encoder -> output layer (Inan et al. eqs. 2.1–2.3; DRILL eq. 7)."""

from __future__ import annotations

import torch
from torch import nn

from .config import ModelConfig
from .encoders.awd_lstm import embedding_dropout
from .encoders.base import build_encoder
from .outputs import build_output
from .sparse_embedding import make_embedding


class LanguageModel(nn.Module):
    """x_t = L y*_{t-1} (2.1); h_t = f(x_t, h_{t-1}) (2.2); logits_t = g_out(E) g_in(h_t) + b (DRILL eq. 7)."""

    def __init__(self, cfg: ModelConfig, vocab_size: int):
        super().__init__()
        self.cfg, self.vocab_size = cfg, vocab_size
        self.embedding = make_embedding(vocab_size, cfg.embedding_size, cfg.embedding_density)
        self.encoder = build_encoder(cfg.encoder, cfg.embedding_size, cfg.encoder_output_size())
        self.output = build_output(cfg.output, self.embedding, self.encoder.output_size)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """VD-LSTM: every parameter uniform in ±init_range (Zaremba et al. 2014, Inan et al.).

        AWD-LSTM: the embedding uniform in ±init_range, the LSTM layers ±1/sqrt(H) (nn.LSTM's rule, as the
        reference code), the output layer its own rule (bias 0; DRILL's label encoder ±drill_init_range).
        Transformer: the embedding uniform in ±init_range, the blocks Xavier-uniform, the output layer its own rule.
        """
        r = self.cfg.init_range
        if self.encoder.init_everything_uniform:
            for p in self.parameters():
                nn.init.uniform_(p, -r, r)
            return
        for p in self.embedding.parameters():
            nn.init.uniform_(p, -r, r)
        self.encoder.reset_parameters()
        self.output.reset_parameters()

    @property
    def input_embeddings(self) -> torch.Tensor:
        """L^T as a (|V|, d) matrix: row i is the input vector of word i."""
        return self.embedding.weight

    @property
    def output_bias(self) -> torch.Tensor | None:
        """b of the output layer (|V|,), or None where it has none (RE: b = 0)."""
        return self.output.bias

    def init_state(self, batch: int):
        return self.encoder.init_state(batch, next(self.embedding.parameters()))

    def embed(self, inputs: torch.Tensor) -> torch.Tensor:
        return embedding_dropout(self.embedding, inputs, self.cfg.dropout_embedding, self.training)

    def forward(self, inputs: torch.Tensor, state, return_labels: bool = False):
        """inputs (T,B) ids -> logits (T,B,|V|) and the new encoder state (and the label embeddings used)."""
        h, state = self.encoder(self.embed(inputs), state)
        logits, labels = self.output(h)
        return (logits, state, labels) if return_labels else (logits, state)

    def parameter_counts(self) -> dict[str, int]:
        """Trainable parameters per component; shared tensors are counted once (under embedding)."""
        counts = {
            "embedding": sum(p.numel() for p in self.embedding.parameters()),
            "encoder": sum(p.numel() for p in self.encoder.parameters()),
            "output": self.output.dedicated_parameters(),
        }
        counts["total"] = sum(counts.values())
        return counts


def count_parameters(cfg: ModelConfig, vocab_size: int) -> dict[str, int]:
    """Parameter counts per component of the model a ``[model]`` config describes (built on the meta device)."""
    with torch.device("meta"):
        return LanguageModel(cfg, vocab_size).parameter_counts()
