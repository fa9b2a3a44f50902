"""The model's typed config: embedding, encoder settings, and the output layer as a registered component.

``[model]`` holds the embedding and encoder keys; ``[model.output]`` names an output layer of
:data:`~tiedlm.models.outputs.OUTPUTS` and holds that layer's own keys::

    [model.output]
    name = "drill"
    depth = 4

Run folders written before the output layer had its own table (``output = "drill"``, ``drill_depth = 4``,
``tied_bias``, ``joint_size`` in ``[model]``) still load: :func:`convert_legacy_output` moves those keys into
the table (keys of another output layer than the one named had no effect then and are dropped).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

from ..errors import UsageError
from ..registry import ComponentConfig, assign_typed
from .outputs import OUTPUTS, FullConfig

ENCODERS = ("vd-lstm", "awd-lstm", "transformer")
POSITIONS = ("sinusoidal", "learned")

# the flat keys of the old [model] table -> (output layer, key in its table)
LEGACY_OUTPUT_KEYS = {
    "tied_bias": ("tied", "bias"),
    "joint_size": ("dual", "joint_size"),
    **{f"drill_{k}": ("drill", k) for k in ("depth", "activation", "dropout", "variational", "residual_embedding",
                                             "residual_previous", "init_range")},
}


@dataclass
class ModelConfig:
    encoder: str = "vd-lstm"  # vd-lstm (Inan et al. 2017) | awd-lstm (Merity et al. 2017) | transformer
    embedding_size: int = 200  # transformer: d_model
    hidden_size: int = 200  # transformer: the feed-forward inner size
    layers: int = 2  # transformer: blocks
    dropout: float = 0.3  # probability of *dropping* a unit (variational, Gal 2015); awd-lstm: on the output
    init_range: float = 0.1  # uniform initialisation in ±init_range
    # vd-lstm and awd-lstm: one mask per sequence on the embeddings fed to the first layer (AWD dropouti)
    dropout_input: float = 0.0
    # awd-lstm only
    last_hidden_size: int = 0  # size of the last LSTM layer; 0: embedding_size, or hidden_size for output = full
    dropout_hidden: float = 0.0  # locked dropout between LSTM layers (AWD dropouth)
    dropout_embedding: float = 0.0  # word types dropped from the embedding (AWD dropoute)
    weight_drop: float = 0.0  # DropConnect on the hidden-to-hidden weights (AWD wdrop)
    # transformer only (pre-norm, causal; dropout = residual, attention and embedding dropout)
    heads: int = 4
    positions: str = "sinusoidal"  # sinusoidal | learned
    max_positions: int = 512  # learned positions only: memory + window length must fit
    memory: int = 0  # earlier tokens of the stream re-read in front of each window (0: windows independent)
    # predefined sparseness (Demeester et al. 2018)
    embedding_density: float = 1.0  # fraction of trainable embedding entries (frequency-based, §4.1); 1 = dense
    sparse_layer: int = 0  # 1-based LSTM layer made sparse (§3); 0 = none
    sparse_hidden_size: int = 0  # its hidden size h_s; 0 = the dense size
    sparse_components: int = 0  # k; 0 = solved (smallest k >= 2 admitting equal parameters; 3 with a density)
    sparse_density: float = 0.0  # fraction of the input each component reads; 0 = the dense layer's param count
    # every LSTM layer sparse, the authors' configuration: hidden_size is the wide size (1725) and each layer has
    # the parameters of the dense one f times narrower (f = 2/3: 1150); 0 = off (Demeester et al. §3, Table 1)
    sparse_fraction: float = 0.0
    # the output layer (Pappas & Henderson 2019): a table [model.output] with name = full | tied | bilinear | dual
    # | drill and that layer's own keys (`tiedlm list` shows them)
    output: ComponentConfig = field(default_factory=FullConfig)

    def __post_init__(self) -> None:
        if isinstance(self.output, (str, dict)):  # ModelConfig(output="tied") or output={"name": "drill", "depth": 2}
            self.output = OUTPUTS.config(self.output, "ModelConfig")

    # ----- (de)serialisation ----------------------------------------------------------------
    @classmethod
    def from_dict(cls, raw: dict[str, Any], origin: str = "config") -> "ModelConfig":
        raw = convert_legacy_output(raw, strict=origin == "--set", origin=origin)
        cfg = cls()
        for key, value in raw.items():
            if key == "output":
                cfg.output = OUTPUTS.config(value, origin)
            else:
                assign_typed(cfg, "model", key, value, origin)
        return cfg

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "output"}
        out["output"] = self.output.to_dict()
        return out

    # ----- derived sizes and checks ---------------------------------------------------------
    def encoder_output_size(self) -> int:
        """Size of h_t that reaches the output layer."""
        if self.encoder == "vd-lstm":
            return self.hidden_size
        if self.encoder == "transformer":
            return self.embedding_size
        if self.last_hidden_size:
            return self.last_hidden_size
        return self.hidden_size if self.output.name == "full" else self.embedding_size

    def validate(self) -> None:
        """One-line UsageError for the first model setting that is out of range or contradicts another."""
        m = self
        for f in dataclasses.fields(m):
            value = getattr(m, f.name)
            if isinstance(value, float) and not math.isfinite(value):
                raise UsageError(f"model.{f.name} = {value!r} is not allowed; expected a finite number")
        _check(m.embedding_size >= 1, "model.embedding_size", m.embedding_size, "an integer >= 1")
        _check(m.hidden_size >= 1, "model.hidden_size", m.hidden_size, "an integer >= 1")
        _check(m.layers >= 1, "model.layers", m.layers, "an integer >= 1")
        _check(0.0 <= m.dropout < 1.0, "model.dropout", m.dropout, "a drop probability in [0, 1)")
        _check(m.init_range > 0, "model.init_range", m.init_range, "a number > 0")
        _check(m.encoder in ENCODERS, "model.encoder", m.encoder, "one of: " + ", ".join(ENCODERS))
        m.output.validate("model.output")
        for key in ("dropout_input", "dropout_hidden", "dropout_embedding", "weight_drop"):
            _check(0.0 <= getattr(m, key) < 1.0, f"model.{key}", getattr(m, key), "a drop probability in [0, 1)")
        if m.encoder == "vd-lstm":
            for key in ("dropout_hidden", "dropout_embedding", "weight_drop", "last_hidden_size"):
                _check(not getattr(m, key), f"model.{key}", getattr(m, key),
                       "0 with model.encoder = 'vd-lstm' (it is an awd-lstm setting)")
        if m.encoder == "transformer":
            for key in ("dropout_input", "dropout_hidden", "weight_drop", "last_hidden_size", "sparse_layer",
                        "sparse_fraction"):
                _check(not getattr(m, key), f"model.{key}", getattr(m, key),
                       "0 with model.encoder = 'transformer' (it is an LSTM setting)")
            _check(m.heads >= 1 and m.embedding_size % m.heads == 0, "model.heads", m.heads,
                   f"a divisor of model.embedding_size = {m.embedding_size}")
            _check(m.positions in POSITIONS, "model.positions", m.positions, "one of: " + ", ".join(POSITIONS))
            _check(m.memory >= 0, "model.memory", m.memory, "an integer >= 0")
        _check(m.last_hidden_size >= 0, "model.last_hidden_size", m.last_hidden_size, "an integer >= 0 (0 = auto)")
        _check(
            1 / m.embedding_size <= m.embedding_density <= 1,
            "model.embedding_density",
            m.embedding_density,
            f"a fraction in [1/embedding_size, 1] = [{1 / m.embedding_size:.4f}, 1] (every word keeps a dimension)",
        )
        _check(0 <= m.sparse_layer <= m.layers, "model.sparse_layer", m.sparse_layer,
               f"a layer number in 1..{m.layers}, or 0 for none")
        _check(m.sparse_hidden_size >= 0, "model.sparse_hidden_size", m.sparse_hidden_size, "an integer >= 0")
        _check(m.sparse_components >= 0, "model.sparse_components", m.sparse_components, "an integer >= 0")
        _check(0 <= m.sparse_density <= 1, "model.sparse_density", m.sparse_density, "a fraction in [0, 1] (0 = solve)")
        _check(0 <= m.sparse_fraction <= 1, "model.sparse_fraction", m.sparse_fraction,
               "a fraction in [0, 1] (0 = off; the authors' AWD-LSTM: 2/3)")
        _check(not (m.sparse_fraction and m.sparse_layer), "model.sparse_fraction", m.sparse_fraction,
               "0 when model.sparse_layer is set (one sparse layer, or every layer with sparse_fraction, not both)")
        size_key = {"vd-lstm": "hidden_size", "awd-lstm": "last_hidden_size"}.get(m.encoder, "embedding_size")
        if m.output.needs_embedding_size and m.embedding_size != m.encoder_output_size():
            raise UsageError(
                f"model.output = {m.output.name!r} scores h_t against the embeddings, so it needs model.{size_key} "
                f"== model.embedding_size, got {m.encoder_output_size()} != {m.embedding_size}; set them equal or "
                f"use output = 'bilinear' or 'dual' (any sizes)"
            )


def convert_legacy_output(raw: dict[str, Any], strict: bool = False, origin: str = "config") -> dict[str, Any]:
    """A ``[model]`` table with the old flat output keys rewritten into the ``output`` table.

    ``output = "NAME"`` becomes ``{"name": NAME}``; ``drill_depth``, ``tied_bias``, ``joint_size`` ... move in
    when they belong to the named layer. Keys of another layer had no effect in the old format: dropped from a
    file (old run folders list every key), an error from ``--set`` (``strict``), where the user just typed them.
    """
    raw = dict(raw)
    output = raw.get("output", "full")
    table = {"name": output} if isinstance(output, str) else dict(output)
    for old, (layer, key) in LEGACY_OUTPUT_KEYS.items():
        if old not in raw:
            continue
        value = raw.pop(old)
        if table.get("name") == layer:
            table[key] = value
        elif strict:
            raise UsageError(f"{origin}: model.{old} belongs to output layer {layer!r}, but model.output is "
                             f"{table.get('name')!r}; set model.output.name={layer} first, then model.output.{key}")
    raw["output"] = table
    return raw


def _check(ok: bool, key: str, value: Any, allowed: str) -> None:
    if not ok:
        raise UsageError(f"{key} = {value!r} is not allowed; expected {allowed}")
