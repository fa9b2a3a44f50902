"""BiLSTM tagger: (dense or frequency-sparse) embeddings -> bidirectional LSTM -> per-token tag scores."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from ...models.sparse_embedding import make_embedding
from .config import TaggerConfig


class BiLSTMTagger(nn.Module):
    """Word embeddings (Demeester et al. 2018 §4.2 compare dense and sparse ones) feeding a BiLSTM."""

    def __init__(self, cfg: TaggerConfig, vocab_size: int, num_tags: int):
        super().__init__()
        self.embedding = make_embedding(vocab_size, cfg.model.embedding_size, cfg.model.embedding_density)
        self.lstm = nn.LSTM(
            cfg.model.embedding_size,
            cfg.model.hidden_size,
            num_layers=cfg.model.layers,
            batch_first=True,
            bidirectional=True,
            dropout=cfg.model.dropout if cfg.model.layers > 1 else 0.0,
        )
        self.dropout = nn.Dropout(cfg.model.dropout)
        self.scores = nn.Linear(2 * cfg.model.hidden_size, num_tags)

    def forward(self, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """ids (B,T) padded, lengths (B,) -> tag logits (B,T,num_tags)."""
        x = self.dropout(self.embedding(ids))
        packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
        h, _ = pad_packed_sequence(self.lstm(packed)[0], batch_first=True, total_length=ids.size(1))
        return self.scores(self.dropout(h))

    def parameter_counts(self) -> dict[str, int]:
        counts = {
            "embedding": sum(p.numel() for p in self.embedding.parameters()),
            "other": sum(p.numel() for n, p in self.named_parameters() if not n.startswith("embedding.")),
        }
        counts["total"] = counts["embedding"] + counts["other"]
        return counts
