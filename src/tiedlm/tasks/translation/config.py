"""Typed, validated settings of a translation run (``tiedlm translate train --set section.key=value``), in the
sections every task's config has (:class:`~tiedlm.config.SectionedConfig`)."""

from __future__ import annotations

import typing
from dataclasses import dataclass, field

from ...config import SectionedConfig, TrainSettings
from ...errors import UsageError
from ...models.outputs import OUTPUTS
from ...optimizers import OPTIMIZERS, AdamConfig
from ...registry import ComponentConfig, bounded, probability, register_task, require, resumable

# the translator's defaults of the output layers' keys, for whichever layer has them (where they differ from the
# language model's): Pappas & Henderson's NMT setting for DRILL (2 layers, sigmoid, dropout 0.6 with one mask
# shared by the labels, ±0.1), which the dual layer's dropout, mask and initialisation share, and a learnable
# bias for the tied layer
OUTPUT_DEFAULTS = {
    "bias": True,
    "joint_size": 0,
    "depth": 2,
    "activation": "sigmoid",
    "dropout": 0.6,
    "variational": True,
    "init_range": 0.1,
}


def translator_output(name: str, origin: str = "translation", **keys: typing.Any) -> ComponentConfig:
    """The output layer ``name``'s config: the translator's defaults (:data:`OUTPUT_DEFAULTS`) and ``keys``, each
    where the layer has it (settings shared by several layers, e.g. a sweep's dropout, as the flat keys were)."""
    return OUTPUTS.config_for(name, origin, **{**OUTPUT_DEFAULTS, **keys})


@dataclass
class TranslationData:
    source_lang: str = "en"
    target_lang: str = "de"  # target language suffix of the data files
    # joint: one subword model and vocabulary for both languages | separate
    vocab: str = bounded("joint", choices=("joint", "separate"))
    vocab_size: int = bounded(8000, 16)  # subword vocabulary size (per language with vocab = separate)
    subword_model: str = bounded("bpe", choices=("bpe", "unigram"))  # bpe | unigram (sentencepiece model types)
    share_embeddings: bool = True  # joint vocab: one embedding matrix for source, target input and output
    max_pairs: int = bounded(0, 0, note="0 = all")  # train on the first N pairs only (0: all); for smoke tests
    max_length: int = bounded(128, 1)  # training pairs with a longer side (in subwords) are skipped
    data_dir: str = ""  # folder with {train,valid,test}.{en,de} (default: TIEDLM_DATA mirror or download)
    own_data: bool = False  # data_dir holds a parallel corpus of your own: {train,valid,test}.{src,tgt}, unverified


@dataclass
class TranslationModel:
    """The Transformer (Vaswani et al. 2017, pre-norm) and its output layer."""

    d_model: int = bounded(256, 1)
    ffn_size: int = bounded(1024, 1)  # feed-forward inner size
    heads: int = bounded(4, 1)  # attention heads
    encoder_layers: int = bounded(3, 1)  # encoder blocks
    decoder_layers: int = bounded(3, 1)  # decoder blocks
    dropout: float = probability(0.1)  # residual, FFN and embedding dropout
    attention_dropout: float = probability(0.0)  # on the attention weights
    positions: str = bounded("sinusoidal", choices=("sinusoidal", "learned"))  # sinusoidal | learned
    max_positions: int = 256  # learned positions only
    # [model.output]: the output layer (Pappas & Henderson 2019) and its keys, the language model's table (any
    # registered layer; `tiedlm list` shows them): --set model.output=drill --set model.output.depth=2
    output: ComponentConfig = field(default_factory=lambda: translator_output("tied"))


@dataclass
class TranslationLoss:
    """Label-smoothed cross-entropy, optionally + the augmented loss (Inan et al. eq. 3.3)."""

    label_smoothing: float = bounded(0.1, 0, 1, below=True)
    augmented: bool = False  # add γτ·J_aug over the target embeddings
    tau: float = bounded(20.0, 0, above=True)  # temperature τ of the augmented loss
    gamma: float = bounded(0.5, 0)  # α = γτ (eq. 3.3)


@dataclass
class TranslationTrain(TrainSettings):
    """Adam with linear warm-up, then inverse-square-root decay (Vaswani et al. §5.3)."""

    epochs: int = resumable(12)  # passes over the training pairs
    lr: float = 1e-3  # peak learning rate, reached after warmup_steps updates
    clip: float = 1.0  # maximum global gradient norm (0: no clipping)
    batch_tokens: int = bounded(4096, 1)  # subword tokens per batch (the longer side of each pair)
    warmup_steps: int = bounded(400, 1)  # linear warm-up updates
    # the optimiser ([train.optimizer], `tiedlm list`): Adam with Vaswani et al.'s betas and epsilon
    optimizer: ComponentConfig = field(default_factory=lambda: AdamConfig(beta2=0.98, eps=1e-9))


@dataclass
class TranslationDecode:
    beam: int = bounded(5, 1)
    length_penalty: float = bounded(1.0, 0)  # hypotheses ranked by log P / length^length_penalty
    # a hypothesis has at most ratio * source length + 10 subwords
    max_decode_ratio: float = bounded(1.5, 0, above=True)


@register_task(
    "translate",
    "translator",
    task="tiedlm.tasks.translation.task:TranslationTask",
    evaluate=("translate", "evaluate"),
    help="Transformer translation (Multi30k En-De) with tied/dual/DRILL output layers",
    metric=("valid perplexity / test BLEU", ("valid_ppl", "test_bleu"), "{:.2f}"),
    seed_columns=("valid ppl", "test BLEU"),
    done="translator {run_dir}: test BLEU {test_bleu:.2f} ({bleu_signature}), test ppl {test_ppl:.2f}, "
    "{parameters[total]:,} parameters, {train_seconds:.0f} s of training",
)
@dataclass
class TranslationConfig(SectionedConfig):
    COMPONENTS = {"model": {"output": OUTPUTS}, "train": {"optimizer": OPTIMIZERS}}
    data: TranslationData = field(default_factory=TranslationData)
    model: TranslationModel = field(default_factory=TranslationModel)
    loss: TranslationLoss = field(default_factory=TranslationLoss)
    train: TranslationTrain = field(default_factory=TranslationTrain)
    decode: TranslationDecode = field(default_factory=TranslationDecode)

    def own_folder(self) -> str:
        """Only Multi30k en<->de is built in (and verified): other languages are a folder of one's own too."""
        d = self.data
        return d.data_dir if d.own_data or {d.source_lang, d.target_lang} != {"en", "de"} else ""

    def validate(self) -> None:
        d, m = self.data, self.model  # each key's own bounds: registry.check_settings
        require(
            not d.share_embeddings or d.vocab == "joint",
            "data.share_embeddings",
            d.share_embeddings,
            "false with vocab = separate (two vocabularies cannot share one embedding)",
        )
        require(m.d_model % m.heads == 0, "model.heads", m.heads, f"a divisor of d_model = {m.d_model}")
        m.output.validate("model.output")  # the output layer's own checks (the LM's [model.output] rules)
        if m.positions == "learned" and d.max_length + 2 > m.max_positions:
            raise UsageError(
                f"model.max_positions = {m.max_positions} must be >= data.max_length + 2 = {d.max_length + 2} "
                "with learned positions"
            )

    def component_defaults(self, section: str, field: str, name: str) -> dict[str, typing.Any]:
        """A switch of output layer starts from the translator's defaults of the new layer (:data:`OUTPUT_DEFAULTS`)."""
        return translator_output(name).to_dict()
