"""Typed, validated settings of a translation run (``tiedlm translate train --set key=value``)."""

from __future__ import annotations

import typing
from dataclasses import dataclass, field, replace

from ..config import KeyValueConfig, device_is_valid
from ..errors import UsageError
from ..models.outputs import OUTPUTS
from ..registry import ComponentConfig, resumable

# the translator's flat keys of the output layer -> the key of the LM's [model.output] table
OUTPUT_KEYS = {
    "tied_bias": "bias",
    "joint_size": "joint_size",
    "drill_depth": "depth",
    "drill_activation": "activation",
    "drill_dropout": "dropout",
    "drill_variational": "variational",
    "drill_init_range": "init_range",
}


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
            "tied_bias",
            "joint_size",
            "drill_depth",
            "drill_activation",
            "drill_dropout",
            "drill_variational",
            "drill_init_range",
            "output_options",
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
    # the LM's names of the output layer's keys work here too: --set model.output=drill --set model.output.depth=2
    ALIASES = {"model.output.name": "output", **{f"model.output.{new}": old for old, new in OUTPUT_KEYS.items()}}

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
    # output layer (Pappas & Henderson 2019): tied | drill | dual | bilinear | full
    output: str = "tied"
    tied_bias: bool = True  # tied only: a learnable output bias
    joint_size: int = 0  # dual only: d_j; 0 = d_model
    drill_depth: int = 2  # the paper's NMT setting: 2 layers, sigmoid, dropout 0.6, residual to E
    drill_activation: str = "sigmoid"  # sigmoid | relu | tanh | identity
    drill_dropout: float = 0.6  # dropout on each label-encoder layer's input
    drill_variational: bool = True  # one dropout mask over the d dimensions per pass, shared by all labels
    drill_init_range: float = 0.1  # uniform initialisation of the label encoder
    # any other key of the chosen output layer, as the LM's [model.output] table has it (--set
    # model.output.KEY=VALUE; `tiedlm list` shows every layer's keys), e.g. {residual = true} for dual
    output_options: dict = field(default_factory=dict)
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
            (self.output in OUTPUTS.names(), "output", "one of " + ", ".join(OUTPUTS.names())),
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
        self.output_config()  # the output layer's own checks (the LM's [model.output] rules)
        if self.positions == "learned" and self.max_length + 2 > self.max_positions:
            raise UsageError(
                f"translation max_positions = {self.max_positions} must be >= max_length + 2 = "
                f"{self.max_length + 2} with learned positions"
            )
        return self

    def with_overrides(self, items: list[str]):
        """As every task's ``--set``, and ``model.output.KEY=VALUE`` for any key of the chosen output layer that
        has no translator name of its own (kept in ``output_options``, typed by that layer's config)."""
        from ..registry import field_names, parse_text

        plain, options = [], dict(self.output_options)
        names = [i.partition("=")[2] for i in items if i.partition("=")[0] in ("model.output", "output")]
        layer = names[-1] if names else self.output
        for item in items:
            key, sep, text = item.partition("=")
            name = key[len("model.output.") :] if key.startswith("model.output.") else ""
            if sep and name and key not in self.ALIASES:
                if layer not in OUTPUTS.names():
                    raise UsageError(f"--set {item}: model.output = {layer!r} is not an output layer")
                layer_cfg = OUTPUTS[layer].config
                hints = typing.get_type_hints(layer_cfg)  # the fields' types (ClassVars like name left out below)
                own = {k: hints[k] for k in field_names(layer_cfg)}
                if name not in own:
                    raise UsageError(
                        f"--set {item}: output layer {layer!r} has no key {name!r} (its keys: "
                        f"{', '.join(field_names(OUTPUTS[layer].config)) or 'none'})"
                    )
                options[name] = parse_text(text, own[name], key)
            else:
                plain.append(item)
        return super(TranslationConfig, replace(self, output_options=options)).with_overrides(plain)

    def output_config(self) -> ComponentConfig:
        """The output layer's config, the registered one the LM uses (``[model.output]``): its keys from ours,
        and ``output_options`` for the rest."""
        try:
            own = {new: getattr(self, old) for old, new in OUTPUT_KEYS.items()}
            shared = OUTPUTS.config_for(self.output, "translation", **own)
            if not self.output_options:
                return shared
            return OUTPUTS.config(
                {
                    "name": self.output,
                    **{k: v for k, v in shared.to_dict().items() if k != "name"},
                    **self.output_options,
                },
                "translation",
            )
        except UsageError as exc:  # name the translator's own key, not the LM's
            message = str(exc).replace("translation: ", "")
            for old, new in OUTPUT_KEYS.items():
                message = message.replace(f"model.output.{new} ", f"translation {old} ")
            raise UsageError(message) from None
