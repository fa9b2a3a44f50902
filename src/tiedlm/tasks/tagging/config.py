"""Typed, validated settings of a POS-tagging run (``tiedlm tag train --set section.key=value``), in the sections
every task's config has (:class:`~tiedlm.config.SectionedConfig`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ...config import SectionedConfig, TrainSettings
from ...optimizers import AdamConfig
from ...registry import ComponentConfig, bounded, probability, register_task, require, resumable


@dataclass
class TaggerData:
    min_count: int = bounded(2, 1)  # training words seen fewer times share <unk>
    # train on the first N training sentences only (0: all); for smoke tests
    max_sentences: int = bounded(0, 0, note="0 = all")
    data_dir: str = ""  # folder with en_ewt-ud-{train,dev,test}.conllu (default: TIEDLM_DATA mirror or download)
    own_data: bool = False  # data_dir holds a treebank of your own (*train*/*dev*/*test*.conllu), unverified


@dataclass
class TaggerModel:
    embedding_size: int = bounded(64, 1)  # k
    embedding_density: float = 1.0  # δ_E of the frequency-based sparse embedding (Demeester et al. §4.1); 1 = dense
    hidden_size: int = bounded(100, 1)  # per direction
    layers: int = bounded(1, 1)  # BiLSTM layers
    dropout: float = probability(0.3)  # on the embeddings and on the BiLSTM outputs


@dataclass
class TaggerTrain(TrainSettings):
    epochs: int = resumable(8)  # passes over the training sentences
    lr: float = 2e-3  # Adam
    precision: str = "fp32"  # auto | fp32 | bf16 (the paper's runs: fp32)
    batch_size: int = bounded(32, 1)  # sentences per batch
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
    data: TaggerData = field(default_factory=TaggerData)
    model: TaggerModel = field(default_factory=TaggerModel)
    train: TaggerTrain = field(default_factory=TaggerTrain)

    def validate(self) -> None:
        m = self.model  # each key's own bounds: registry.check_settings
        require(
            1 / m.embedding_size <= m.embedding_density <= 1,
            "model.embedding_density",
            m.embedding_density,
            f"a fraction in [1/embedding_size, 1] = [{1 / m.embedding_size:.4f}, 1]",
        )
