"""The typed configs of the encoders, one registered dataclass each (``[model.encoder]`` in a run's TOML).

Torch-free, so that reading and validating a config stays instant; each names the class that builds from it
(imported on first use). A new encoder: its class in a new module of this package (with ``from_config``) and
its config here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ...errors import UsageError
from ...registry import ComponentConfig, Registry, bounded, probability

ENCODERS = Registry(
    "encoder",
    "model.encoder",
    base="tiedlm.models.encoders.base:Encoder",
    guide="Adding an output layer or an encoder",
)
POSITIONS = ("sinusoidal", "learned")


@dataclass
class EncoderConfig(ComponentConfig):
    """Base of the encoders' configs: what an encoder declares about itself (no keys of its own)."""

    output_size_key: ClassVar[str] = "encoder.hidden_size"  # the [model] key that sets h_t's size (for messages)
    # whether its training step is captured in a CUDA graph (tiedlm.tasks.lm.cuda_graph): "verified" (a GPU has
    # replayed it; train.cuda_graph = "auto" captures it), "unverified" (only with "on"), or "" (never: why)
    cuda_graph: ClassVar[str] = ""
    cuda_graph_reason: ClassVar[str] = "its step is not declared capturable"
    # whether the encoder keeps its last layer's outputs for AR/TAR (loss.ar, loss.tar; Merity et al. §4.6)
    activation_regularization: ClassVar[bool] = False

    def check_run(self, train) -> None:
        """Refuse settings of the run (``train``: its ``[train]`` table) this encoder cannot work with."""

    def output_size(self, embedding_size: int, output) -> int:
        """Size of h_t that reaches the output layer (``output``: the output layer's config)."""
        raise NotImplementedError

    def summary(self) -> str:
        """A few words naming the encoder and its shape, for `tiedlm info`."""
        return self.name.upper()

    def embedding_size(self, asked: int) -> int:
        """The embedding size d the encoder takes: ``asked`` (``model.embedding_size``), unless the encoder's
        own definition fixes it (a Hugging Face config's hidden size)."""
        return asked

    def check_model(self, embedding_size: int, dropout_embedding: float) -> None:
        """Checks against the rest of [model] (one-line UsageError); none by default."""


@dataclass
class StackConfig(EncoderConfig):
    """Keys of the encoders tiedlm builds as a stack of layers (the LSTMs, the Transformer)."""

    hidden_size: int = bounded(200, 1)  # LSTM units per layer; transformer: the feed-forward inner size
    layers: int = bounded(2, 1)  # LSTM layers; transformer: blocks
    # probability of *dropping* a unit (variational, Gal 2015); awd-lstm: on the output
    dropout: float = probability(0.3)

    def output_size(self, embedding_size: int, output) -> int:
        return self.hidden_size

    def summary(self) -> str:
        return f"{self.layers}x{self.hidden_size} {self.name.upper()}"


@dataclass
class LSTMConfig(StackConfig):
    """Keys of both LSTM encoders: input dropout and predefined sparseness (Demeester et al. 2018)."""

    # one mask per sequence on the embeddings fed to the first layer (AWD dropouti; VD: Gal's p_x)
    dropout_input: float = probability(0.0)
    sparse_layer: int = 0  # 1-based LSTM layer made sparse (§3); 0 = none
    sparse_hidden_size: int = bounded(0, 0)  # its hidden size h_s; 0 = the dense size
    # k; 0 = solved (smallest k >= 2 admitting equal parameters; 3 with a density)
    sparse_components: int = bounded(0, 0)
    # fraction of the input each component reads; 0 = the dense layer's param count
    sparse_density: float = bounded(0.0, 0, 1, note="0 = solve")
    # every LSTM layer sparse, the authors' configuration: hidden_size is the wide size (1725) and each layer has
    # the parameters of the dense one f times narrower (f = 2/3: 1150); 0 = off (Demeester et al. §3, Table 1)
    sparse_fraction: float = bounded(0.0, 0, 1, note="0 = off; the authors' AWD-LSTM: 2/3")

    def validate(self, key: str) -> None:
        self.check(
            0 <= self.sparse_layer <= self.layers,
            key,
            "sparse_layer",
            f"a layer number in 1..{self.layers}, or 0 for none",
        )
        self.check(
            not (self.sparse_fraction and self.sparse_layer),
            key,
            "sparse_fraction",
            "0 when sparse_layer is set (one sparse layer, or every layer with sparse_fraction, not both)",
        )


@ENCODERS.register("vd-lstm", builds="tiedlm.models.encoders.vd_lstm:VDLSTM")
@dataclass
class VDLSTMConfig(LSTMConfig):
    """VD-LSTM: LSTM layers with variational dropout, one mask per sequence on every connection (Inan et al. §6)."""

    cuda_graph: ClassVar[str] = "verified"

    def check_model(self, embedding_size: int, dropout_embedding: float) -> None:
        if dropout_embedding:
            raise UsageError(
                f"model.dropout_embedding = {dropout_embedding!r} is not allowed; expected 0 with the "
                f"vd-lstm encoder (it is an awd-lstm setting)"
            )


@ENCODERS.register("awd-lstm", builds="tiedlm.models.encoders.awd_lstm:AWDLSTM")
@dataclass
class AWDLSTMConfig(LSTMConfig):
    """AWD-LSTM: weight-dropped LSTM layers with locked dropout between them (Merity et al. 2017 §4)."""

    # variable windows: one graph per length (GraphedSteps); replayed on an H100 (benchmarks/results/selfcheck-cuda-*)
    cuda_graph: ClassVar[str] = "verified"
    activation_regularization: ClassVar[bool] = True

    # size of the last LSTM layer; 0: embedding_size, or hidden_size for output = full
    last_hidden_size: int = bounded(0, 0, note="0 = auto")
    dropout_hidden: float = probability(0.0)  # locked dropout between LSTM layers (AWD dropouth)
    weight_drop: float = probability(0.0)  # DropConnect on the hidden-to-hidden weights (AWD wdrop)

    output_size_key: ClassVar[str] = "encoder.last_hidden_size"

    def output_size(self, embedding_size: int, output) -> int:
        """The last layer's size: ``last_hidden_size``, or what the output layer's config asks for by default
        (``default_input``: the embedding size; hidden_size for the full softmax, as DRILL's Table 4 parameter
        count implies)."""
        if self.last_hidden_size:
            return self.last_hidden_size
        return self.hidden_size if type(output).default_input == "hidden" else embedding_size


@ENCODERS.register("transformer", builds="tiedlm.models.encoders.transformer:CausalTransformer")
@dataclass
class TransformerConfig(StackConfig):
    """Transformer: pre-norm causal self-attention blocks; d_model is model.embedding_size (Vaswani et al. 2017)."""

    cuda_graph_reason: ClassVar[str] = (
        "its Adam step runs eagerly (the Transformer gained 1.00-1.07x from a graph on an H100)"
    )

    # attention heads (a divisor of model.embedding_size); dropout: residual, attention, embedding
    heads: int = bounded(4, 1)
    positions: str = bounded("sinusoidal", choices=POSITIONS)  # sinusoidal | learned
    max_positions: int = 512  # learned positions only: memory + window length must fit
    memory: int = bounded(0, 0)  # earlier tokens of the stream re-read in front of each window (0: windows independent)

    output_size_key: ClassVar[str] = "embedding_size"

    def output_size(self, embedding_size: int, output) -> int:
        return embedding_size  # d_model

    def check_run(self, train) -> None:
        if self.positions == "learned" and self.memory + 2 * train.bptt > self.max_positions:
            raise UsageError(
                f"model.encoder.max_positions = {self.max_positions!r} is not allowed; expected >= "
                f"model.encoder.memory + 2 * train.bptt = {self.memory + 2 * train.bptt} with learned positions"
            )

    def check_model(self, embedding_size: int, dropout_embedding: float) -> None:
        if embedding_size % self.heads:
            raise UsageError(
                f"model.encoder.heads = {self.heads!r} is not allowed; expected a divisor of "
                f"model.embedding_size = {embedding_size}"
            )


@ENCODERS.register("hf", builds="tiedlm.models.encoders.hf:HFEncoder")
@dataclass
class HFConfig(EncoderConfig):
    """A Hugging Face transformers architecture (Llama, GPT-2, Qwen, Mistral, …) built from its config.json.

    The HF model body (``AutoModel.from_config``: its blocks and final norm, random weights) maps the LM's own
    embeddings x_t to h_t; its token table is not used. The embedding size d is the HF config's hidden size, so a
    preset's ``model.embedding_size`` gives way to it; the vocabulary is the corpus's. Needs ``tiedlm[hf]``.
    """

    output_size_key: ClassVar[str] = "encoder.config's hidden size"
    cuda_graph_reason: ClassVar[str] = "a Hugging Face model's step is not declared capturable"

    # a config.json, a model folder holding one, or a config shipped with tiedlm (src/tiedlm/presets/hf: llama-ptb)
    config: str = ""
    dropout: float = probability(0.0)  # dropout on the HF model's input x_t and output h_t (its own: its config's)
    memory: int = bounded(0, 0)  # earlier tokens of the stream re-read in front of each window (0: windows independent)

    def validate(self, key: str) -> None:
        self.check(bool(self.config), key, "config", "a config.json, a model folder or a shipped config's name")
        self.hf_sizes(key)

    def hf_sizes(self, key: str = "model.encoder") -> dict[str, int]:
        """``hidden`` (d) and ``positions`` (the longest sequence, 0: no limit) read from the HF config.json
        without importing transformers (reading a run's config stays instant)."""
        from .hf_config import read_sizes

        return read_sizes(self.config, f"{key}.config")

    def embedding_size(self, asked: int) -> int:
        return self.hf_sizes()["hidden"]

    def summary(self) -> str:
        from .hf_config import read_config, where

        raw = read_config(self.config)
        return f"Hugging Face {raw['model_type']} body ({where(self.config)})"

    def to_dict(self) -> dict:
        """As saved with a run: the HF config itself (JSON), not the path it was read from, so that the run folder
        holds everything it needs (moved, or the file edited, it evaluates as it trained)."""
        from .hf_config import inline

        return {**super().to_dict(), "config": inline(self.config) if self.config else ""}

    def preflight(self, key: str) -> None:
        from .hf_config import check_config

        check_config(self.config, f"{key}.config")

    def output_size(self, embedding_size: int, output) -> int:
        return self.hf_sizes()["hidden"]

    def check_run(self, train) -> None:
        limit = self.hf_sizes()["positions"]
        if limit and self.memory + 2 * train.bptt > limit:
            raise UsageError(
                f"model.encoder.memory + 2 * train.bptt = {self.memory + 2 * train.bptt} is not allowed; expected "
                f"<= the {limit} positions of model.encoder.config (lower train.bptt or model.encoder.memory)"
            )
