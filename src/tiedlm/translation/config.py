"""Typed, validated settings of a translation run (``tiedlm translate train --set key=value``)."""

from __future__ import annotations

import typing
from dataclasses import dataclass, field, replace

from ..config import KeyValueConfig, device_is_valid
from ..errors import UsageError
from ..models.outputs import OUTPUTS
from ..registry import ComponentConfig, field_names, parse_text, resumable

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
# the flat keys of the output layer in translation configs before [model.output] (the config.toml and
# config.json of older runs, and --set): each means the key of the [model.output] table it is mapped to
LEGACY_OUTPUT_KEYS = {
    "tied_bias": "bias",
    "joint_size": "joint_size",
    "drill_depth": "depth",
    "drill_activation": "activation",
    "drill_dropout": "dropout",
    "drill_variational": "variational",
    "drill_init_range": "init_range",
}


def translator_output(name: str, origin: str = "translation", **keys: typing.Any) -> ComponentConfig:
    """The output layer ``name``'s config: the translator's defaults (:data:`OUTPUT_DEFAULTS`) and ``keys``, each
    where the layer has it (settings shared by several layers, e.g. a sweep's dropout, as the flat keys were)."""
    return OUTPUTS.config_for(name, origin, **{**OUTPUT_DEFAULTS, **keys})


@dataclass
class TranslationConfig(KeyValueConfig):
    label, command = "translation", "translate"
    SECTIONS = {
        "data": (
            "source_lang",
            "target_lang",
            "vocab",
            "vocab_size",
            "subword_model",
            "share_embeddings",
            "max_pairs",
            "max_length",
            "data_dir",
            "own_data",
        ),
        "model": (
            "d_model",
            "ffn_size",
            "heads",
            "encoder_layers",
            "decoder_layers",
            "dropout",
            "attention_dropout",
            "positions",
            "max_positions",
            "output",
        ),
        "loss": ("label_smoothing", "augmented", "tau", "gamma"),
        "train": (
            "epochs",
            "batch_tokens",
            "lr",
            "warmup_steps",
            "clip",
            "seed",
            "threads",
            "precision",
            "device",
            "max_nonfinite",
        ),
        "decode": ("beam", "length_penalty", "max_decode_ratio"),
    }

    # data and subword units (sentencepiece)
    source_lang: str = "en"
    target_lang: str = "de"  # target language suffix of the data files
    vocab: str = "joint"  # joint: one subword model and vocabulary for both languages | separate
    vocab_size: int = 8000  # subword vocabulary size (per language with vocab = separate)
    subword_model: str = "bpe"  # bpe | unigram (sentencepiece model types)
    share_embeddings: bool = True  # joint vocab: one embedding matrix for source, target input and output
    max_pairs: int = 0  # train on the first N pairs only (0: all); for smoke tests
    max_length: int = 128  # training pairs with a longer side (in subwords) are skipped
    data_dir: str = ""  # folder with {train,valid,test}.{en,de} (default: TIEDLM_DATA mirror or download)
    own_data: bool = False  # data_dir holds a parallel corpus of your own: {train,valid,test}.{src,tgt}, unverified
    # model (Vaswani et al. 2017, pre-norm)
    d_model: int = 256
    ffn_size: int = 1024  # feed-forward inner size
    heads: int = 4  # attention heads
    encoder_layers: int = 3  # encoder blocks
    decoder_layers: int = 3  # decoder blocks
    dropout: float = 0.1  # residual, FFN and embedding dropout
    attention_dropout: float = 0.0  # on the attention weights
    positions: str = "sinusoidal"  # sinusoidal | learned
    max_positions: int = 256  # learned positions only
    # [model.output]: the output layer (Pappas & Henderson 2019) and its keys, the language model's table (any
    # registered layer; `tiedlm list` shows them): --set model.output=drill --set model.output.depth=2
    output: ComponentConfig = field(default_factory=lambda: translator_output("tied"))
    # loss: label-smoothed cross-entropy, optionally + the augmented loss (Inan et al. eq. 3.3)
    label_smoothing: float = 0.1
    augmented: bool = False  # add γτ·J_aug over the target embeddings
    tau: float = 20.0  # temperature τ of the augmented loss
    gamma: float = 0.5  # α = γτ (eq. 3.3)
    # training (Adam with linear warm-up, then inverse-square-root decay: Vaswani et al. §5.3)
    epochs: int = resumable(12)  # passes over the training pairs
    batch_tokens: int = 4096  # subword tokens per batch (the longer side of each pair)
    lr: float = 1e-3  # peak learning rate, reached after warmup_steps updates
    warmup_steps: int = 400  # linear warm-up updates
    clip: float = 1.0  # maximum global gradient norm (0: no clipping)
    seed: int = 1  # seed of every random draw
    threads: int = resumable(0)  # 0: the cores other processes leave free
    precision: str = "auto"  # auto | fp32 | bf16
    device: str = "auto"  # auto (a GPU if one is visible) | cpu | cuda | cuda:N
    max_nonfinite: int = resumable(10)  # consecutive non-finite steps tolerated (skipped) before the run stops
    # decoding
    beam: int = 5
    length_penalty: float = 1.0  # hypotheses ranked by log P / length^length_penalty
    max_decode_ratio: float = 1.5  # a hypothesis has at most ratio * source length + 10 subwords

    def validate(self) -> "TranslationConfig":
        checks = [
            (self.vocab in ("joint", "separate"), "vocab", "joint or separate"),
            (self.vocab_size >= 16, "vocab_size", "an integer >= 16"),
            (self.subword_model in ("bpe", "unigram"), "subword_model", "bpe or unigram"),
            (
                not self.share_embeddings or self.vocab == "joint",
                "share_embeddings",
                "false with vocab = separate (two vocabularies cannot share one embedding)",
            ),
            (self.max_pairs >= 0, "max_pairs", "an integer >= 0 (0 = all)"),
            (self.max_length >= 1, "max_length", "an integer >= 1"),
            (
                self.d_model >= 1 and self.heads >= 1 and self.d_model % self.heads == 0,
                "heads",
                f"a divisor of d_model = {self.d_model}",
            ),
            (self.ffn_size >= 1, "ffn_size", "an integer >= 1"),
            (self.encoder_layers >= 1, "encoder_layers", "an integer >= 1"),
            (self.decoder_layers >= 1, "decoder_layers", "an integer >= 1"),
            (0 <= self.dropout < 1, "dropout", "a drop probability in [0, 1)"),
            (0 <= self.attention_dropout < 1, "attention_dropout", "a drop probability in [0, 1)"),
            (self.positions in ("sinusoidal", "learned"), "positions", "sinusoidal or learned"),
            (0 <= self.label_smoothing < 1, "label_smoothing", "a number in [0, 1)"),
            (self.tau > 0, "tau", "a temperature > 0"),
            (self.gamma >= 0, "gamma", "a number >= 0"),
            (self.epochs >= 1, "epochs", "an integer >= 1"),
            (self.batch_tokens >= 1, "batch_tokens", "an integer >= 1"),
            (self.lr > 0, "lr", "a number > 0"),
            (self.warmup_steps >= 1, "warmup_steps", "an integer >= 1"),
            (self.clip >= 0, "clip", "a number >= 0 (0 disables)"),
            (self.threads >= 0, "threads", "an integer >= 0"),
            (self.precision in ("auto", "fp32", "bf16"), "precision", "auto, fp32 or bf16"),
            (device_is_valid(self.device), "device", "auto, cpu, cuda or cuda:N"),
            (self.max_nonfinite >= 1, "max_nonfinite", "an integer >= 1"),
            (self.beam >= 1, "beam", "an integer >= 1"),
            (self.length_penalty >= 0, "length_penalty", "a number >= 0"),
            (self.max_decode_ratio > 0, "max_decode_ratio", "a number > 0"),
        ]
        self.require(checks)
        self.output.validate("model.output")  # the output layer's own checks (the LM's [model.output] rules)
        if self.positions == "learned" and self.max_length + 2 > self.max_positions:
            raise UsageError(
                f"translation max_positions = {self.max_positions} must be >= max_length + 2 = "
                f"{self.max_length + 2} with learned positions"
            )
        return self

    def with_overrides(self, items: list[str]):
        """As every task's ``--set``, and the output layer's table as the language model's: ``model.output=NAME``
        (another layer: the keys it shares with the current one kept, the rest at the translator's defaults) and
        ``model.output.KEY=VALUE`` (typed by that layer's config); the old flat keys (``drill_depth=3``) too."""
        table, plain = self.output.to_dict(), []
        for item in items:
            key, sep, text = item.partition("=")
            key = key.removeprefix("model.")
            if sep and key in LEGACY_OUTPUT_KEYS:
                key = f"output.{LEGACY_OUTPUT_KEYS[key]}"
            if sep and (key == "output" or key.startswith("output.")):
                table = _set_output(table, key.removeprefix("output").removeprefix(".") or "name", text, item)
            else:
                plain.append(item)
        output = OUTPUTS.config(table, "translation")
        return super(TranslationConfig, replace(self, output=output)).with_overrides(plain)

    @classmethod
    def from_dict(cls, raw: dict[str, typing.Any]):
        """Settings as saved: ``output`` a ``[model.output]`` table, or (runs from before it) the layer's name with
        its keys in the old flat names and ``output_options``."""
        raw = dict(raw)
        legacy = {new: raw.pop(old) for old, new in LEGACY_OUTPUT_KEYS.items() if old in raw}
        options = raw.pop("output_options", {})
        output = raw.get("output", "tied")
        if isinstance(output, str):  # before [model.output]: the named layer, with those keys it has
            raw["output"] = translator_output(output, **legacy, **options)
        elif isinstance(output, dict):
            raw["output"] = OUTPUTS.config(output, "translation")
        return super().from_dict(raw)


def _set_output(table: dict, key: str, text: str, item: str) -> dict:
    """``table`` (an output layer's ``{"name": ..., KEY: value}``) with one ``--set`` applied."""
    if key == "name":
        if text == table["name"]:
            return table
        own = field_names(OUTPUTS[text].config)  # a one-line error for a name that is not an output layer
        return {**translator_output(text).to_dict(), **{k: v for k, v in table.items() if k in own and k != "name"}}
    layer = OUTPUTS[table["name"]].config
    hints = typing.get_type_hints(layer)  # the fields' types (ClassVars left out below)
    own = {k: hints[k] for k in field_names(layer)}
    if key not in own:
        raise UsageError(
            f"--set {item}: output layer {table['name']!r} has no key {key!r} (its keys: {', '.join(own) or 'none'})"
        )
    return {**table, key: parse_text(text, own[key], item.partition("=")[0])}
