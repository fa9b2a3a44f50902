"""Typed, validated settings of a POS-tagging run (``tiedlm tag train --set section.key=value``), in the sections
every task's config has (:class:`~tiedlm.config.SectionedConfig`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ...config import SectionedConfig, TrainSettings, _check
from ...optimizers import OPTIMIZERS, AdamConfig
from ...registry import ComponentConfig, register_task, resumable


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
class TaggerTrain(TrainSettings):
    epochs: int = resumable(8)  # passes over the training sentences
    lr: float = 2e-3  # Adam
    precision: str = "fp32"  # auto | fp32 | bf16 (the paper's runs: fp32)
    batch_size: int = 32  # sentences per batch
    # the optimiser ([train.optimizer], `tiedlm list`): Adam with PyTorch's default betas (no weight decay)
    optimizer: ComponentConfig = field(default_factory=lambda: AdamConfig(beta2=0.999))


@register_task(
    "tag",
    "tagger",
    task="tiedlm.tasks.tagging.task:TaggerTask",
    evaluate=("tag", "evaluate"),
    help="part-of-speech tagging with dense or frequency-sparse embeddings (UD English-EWT)",
    metric=("dev / test accuracy (%)", ("dev_accuracy", "test_accuracy"), "{:.2%}"),
    seed_columns=("dev accuracy (%)", "test accuracy (%)"),
    done="tagger {run_dir}: dev {dev_accuracy:.2%}, test {test_accuracy:.2%} (best epoch {best_epoch}), "
    "embedding parameters {parameters[embedding]:,}",
)
@dataclass
class TaggerConfig(SectionedConfig):
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
        _check(t.batch_size >= 1, "train.batch_size", t.batch_size, "an integer >= 1")
