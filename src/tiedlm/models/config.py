"""The model's typed config: the embedding, and the encoder and output layer as registered components.

``[model]`` holds the embedding's keys; ``[model.encoder]`` names an encoder of
:data:`~tiedlm.models.encoders.ENCODERS` and ``[model.output]`` an output layer of
:data:`~tiedlm.models.outputs.OUTPUTS`, each table holding that component's own keys::

    [model]
    embedding_size = 400

    [model.encoder]
    name = "awd-lstm"
    hidden_size = 1150

    [model.output]
    name = "drill"
    depth = 4

"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from ..errors import UsageError
from ..registry import ComponentConfig, Registry, assign_typed, bounded, check_settings, probability, require
from .encoders import ENCODERS, VDLSTMConfig
from .outputs import OUTPUTS, FullConfig

# the component tables of [model]: key -> its registry
COMPONENTS: dict[str, Registry] = {"encoder": ENCODERS, "output": OUTPUTS}


@dataclass
class ModelConfig:
    embedding_size: int = bounded(200, 1)  # d, the word-embedding size (transformer: d_model)
    init_range: float = bounded(0.1, 0, above=True)  # uniform initialisation in ±init_range
    # word types dropped from the embedding (AWD dropoute); not with vd-lstm
    dropout_embedding: float = probability(0.0)
    embedding_density: float = 1.0  # fraction of trainable embedding entries (frequency-based, §4.1); 1 = dense
    # the encoder: a table [model.encoder] with name = vd-lstm | awd-lstm | transformer | hf and that encoder's own
    # keys (`tiedlm list` shows them)
    encoder: ComponentConfig = field(default_factory=VDLSTMConfig)
    # the output layer (Pappas & Henderson 2019): a table [model.output] with name = full | tied | bilinear | dual
    # | drill and that layer's own keys (`tiedlm list` shows them)
    output: ComponentConfig = field(default_factory=FullConfig)

    def __post_init__(self) -> None:
        # ModelConfig(encoder="awd-lstm"), output={"name": "drill", "depth": 2}: names or tables, as in the TOML
        for key, registry in COMPONENTS.items():
            if isinstance(getattr(self, key), (str, dict)):
                setattr(self, key, registry.config(getattr(self, key), "ModelConfig"))
        self.embedding_size = self.encoder.embedding_size(self.embedding_size)

    # ----- (de)serialisation ----------------------------------------------------------------
    @classmethod
    def from_dict(cls, raw: dict[str, Any], origin: str = "config") -> "ModelConfig":
        cfg = cls()
        for key, value in raw.items():
            if key in COMPONENTS:  # a table without a name is the default component's (vd-lstm, full)
                setattr(cfg, key, COMPONENTS[key].config(value, origin, default=getattr(cfg, key).name))
            else:
                assign_typed(cfg, "model", key, value, origin)
        cfg.embedding_size = cfg.encoder.embedding_size(cfg.embedding_size)  # an HF config fixes d
        return cfg

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in COMPONENTS}
        out.update({key: getattr(self, key).to_dict() for key in COMPONENTS})
        return out

    # ----- derived sizes and checks ---------------------------------------------------------
    def encoder_output_size(self) -> int:
        """Size of h_t that reaches the output layer."""
        return self.encoder.output_size(self.embedding_size, self.output)

    def validate(self) -> None:
        """One-line UsageError for the first model setting that is out of range or contradicts another."""
        m, e = self, self.encoder
        for part, prefix in ((m, "model"), (m.encoder, "model.encoder"), (m.output, "model.output")):
            check_settings(part, prefix)
        require(
            1 / m.embedding_size <= m.embedding_density <= 1,
            "model.embedding_density",
            m.embedding_density,
            f"a fraction in [1/embedding_size, 1] = [{1 / m.embedding_size:.4f}, 1] (every word keeps a dimension)",
        )
        e.validate("model.encoder")
        e.check_model(m.embedding_size, m.dropout_embedding)
        m.output.validate("model.output")
        if m.output.needs_embedding_size and m.embedding_size != m.encoder_output_size():
            raise UsageError(
                f"model.output = {m.output.name!r} scores h_t against the embeddings, so it needs "
                f"model.{e.output_size_key} "
                f"== model.embedding_size, got {m.encoder_output_size()} != {m.embedding_size}; set them equal or "
                f"use output = 'bilinear' or 'dual' (any sizes)"
            )
