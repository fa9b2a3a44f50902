"""Typed, validated settings of a POS-tagging run (``tiedlm tag train --set section.key=value``), in the sections
every task's config has (:class:`~tiedlm.config.SectionedConfig`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ...config import Epochs, SectionedConfig, _check, device_is_valid
from ...optimizers import OPTIMIZERS, AdamConfig
from ...registry import ComponentConfig, resumable


@dataclass
class TaggerData:
    min_count: int = 2  # training words seen fewer times share <unk>
    max_sentences: int = 0  # train on the first N training sentences only (0: all); for smoke tests
    data_dir: str = ""  # folder with en_ewt-ud-{train,dev,test}.conllu (default: TIEDLM_DATA mirror or download)
    own_data: bool = False  # data_dir holds a treebank of your own (*train*/*dev*/*test*.conllu), unverified


@dataclass
class TaggerModel:
    embedding_size: int = 64  # k
    embedding_density: float = 1.0  # δ_E of the frequency-based sparse embedding (Demeester et al. §4.1); 1 = dense
    hidden_size: int = 100  # per direction
    layers: int = 1  # BiLSTM layers
    dropout: float = 0.3  # on the embeddings and on the BiLSTM outputs


@dataclass
class TaggerTrain(Epochs):
    epochs: int = resumable(8)  # passes over the training sentences
    batch_size: int = 32  # sentences per batch
    lr: float = 2e-3  # Adam
    clip: float = 5.0  # maximum global gradient norm (0: no clipping)
    seed: int = 1  # seed of every random draw
    threads: int = resumable(0)  # 0: the cores other processes leave free
    device: str = "auto"  # auto (a GPU if one is visible) | cpu | cuda | cuda:N
    max_nonfinite: int = resumable(10)  # consecutive non-finite steps tolerated (skipped) before the run stops
    # the optimiser ([train.optimizer], `tiedlm list`): Adam with PyTorch's default betas (no weight decay)
    optimizer: ComponentConfig = field(default_factory=lambda: AdamConfig(beta2=0.999))


@dataclass
class TaggerConfig(SectionedConfig):
    label, command = "tagger", "tag train"
    kind = "tagger"
    BARE_KEYS = True
    COMPONENTS = {"train": {"optimizer": OPTIMIZERS}}
    data: TaggerData = field(default_factory=TaggerData)
    model: TaggerModel = field(default_factory=TaggerModel)
    train: TaggerTrain = field(default_factory=TaggerTrain)

    def validate(self) -> None:
        d, m, t = self.data, self.model, self.train
        _check(m.embedding_size >= 1, "model.embedding_size", m.embedding_size, "an integer >= 1")
        _check(
            1 / m.embedding_size <= m.embedding_density <= 1,
            "model.embedding_density",
            m.embedding_density,
            f"a fraction in [1/embedding_size, 1] = [{1 / m.embedding_size:.4f}, 1]",
        )
        _check(m.hidden_size >= 1, "model.hidden_size", m.hidden_size, "an integer >= 1")
        _check(m.layers >= 1, "model.layers", m.layers, "an integer >= 1")
        _check(0 <= m.dropout < 1, "model.dropout", m.dropout, "a drop probability in [0, 1)")
        _check(d.min_count >= 1, "data.min_count", d.min_count, "an integer >= 1")
        _check(d.max_sentences >= 0, "data.max_sentences", d.max_sentences, "an integer >= 0 (0 = all)")
        _check(t.epochs >= 1, "train.epochs", t.epochs, "an integer >= 1")
        _check(t.batch_size >= 1, "train.batch_size", t.batch_size, "an integer >= 1")
        _check(t.lr > 0, "train.lr", t.lr, "a number > 0")
        _check(t.clip >= 0, "train.clip", t.clip, "a number >= 0 (0 disables)")
        _check(t.threads >= 0, "train.threads", t.threads, "an integer >= 0")
        _check(device_is_valid(t.device), "train.device", t.device, "auto, cpu, cuda or cuda:N")
        _check(t.max_nonfinite >= 1, "train.max_nonfinite", t.max_nonfinite, "an integer >= 1")
