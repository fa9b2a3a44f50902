"""Typed, validated settings of a POS-tagging run (``tiedlm tag train --set key=value``)."""

from __future__ import annotations

from dataclasses import dataclass

from ..config import KeyValueConfig, device_is_valid
from ..registry import resumable


@dataclass
class TaggerConfig(KeyValueConfig):
    label, command = "tagger", "tag"
    SECTIONS = {
        "data": ("min_count", "max_sentences", "data_dir", "own_data"),
        "model": ("embedding_size", "embedding_density", "hidden_size", "layers", "dropout"),
        "train": ("epochs", "batch_size", "lr", "clip", "seed", "threads", "device", "max_nonfinite"),
    }

    embedding_size: int = 64  # k
    embedding_density: float = 1.0  # δ_E of the frequency-based sparse embedding (Demeester et al. §4.1); 1 = dense
    hidden_size: int = 100  # per direction
    layers: int = 1  # BiLSTM layers
    dropout: float = 0.3  # on the embeddings and on the BiLSTM outputs
    min_count: int = 2  # training words seen fewer times share <unk>
    epochs: int = resumable(8)  # passes over the training sentences
    batch_size: int = 32  # sentences per batch
    lr: float = 2e-3  # Adam
    clip: float = 5.0  # maximum global gradient norm (0: no clipping)
    seed: int = 1  # seed of every random draw
    threads: int = resumable(0)  # 0: the cores other processes leave free
    device: str = "auto"  # auto (a GPU if one is visible) | cpu | cuda | cuda:N
    max_nonfinite: int = resumable(10)  # consecutive non-finite steps tolerated (skipped) before the run stops
    max_sentences: int = 0  # train on the first N training sentences only (0: all); for smoke tests
    data_dir: str = ""  # folder with en_ewt-ud-{train,dev,test}.conllu (default: TIEDLM_DATA mirror or download)
    own_data: bool = False  # data_dir holds a treebank of your own (*train*/*dev*/*test*.conllu), unverified

    def validate(self) -> "TaggerConfig":
        checks = [
            (self.embedding_size >= 1, "embedding_size", "an integer >= 1"),
            (
                1 / self.embedding_size <= self.embedding_density <= 1,
                "embedding_density",
                f"a fraction in [1/embedding_size, 1] = [{1 / self.embedding_size:.4f}, 1]",
            ),
            (self.hidden_size >= 1, "hidden_size", "an integer >= 1"),
            (self.layers >= 1, "layers", "an integer >= 1"),
            (0 <= self.dropout < 1, "dropout", "a drop probability in [0, 1)"),
            (self.min_count >= 1, "min_count", "an integer >= 1"),
            (self.epochs >= 1, "epochs", "an integer >= 1"),
            (self.batch_size >= 1, "batch_size", "an integer >= 1"),
            (self.lr > 0, "lr", "a number > 0"),
            (self.clip >= 0, "clip", "a number >= 0 (0 disables)"),
            (self.threads >= 0, "threads", "an integer >= 0"),
            (device_is_valid(self.device), "device", "auto, cpu, cuda or cuda:N"),
            (self.max_nonfinite >= 1, "max_nonfinite", "an integer >= 1"),
            (self.max_sentences >= 0, "max_sentences", "an integer >= 0 (0 = all)"),
        ]
        self.require(checks)
        return self
