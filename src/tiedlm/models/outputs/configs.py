"""The typed configs of the output layers, one registered dataclass each (``[model.output]`` in a run's TOML).

Torch-free, so that reading and validating a config stays instant; each names the class that builds from it
(imported on first use). A new output layer: its class in a new module of this package and its config here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ...registry import ComponentConfig, Registry, bounded, probability

OUTPUTS = Registry(
    "output layer",
    "model.output",
    base="tiedlm.models.outputs.base:OutputLayer",
    guide="Adding an output layer or an encoder",
)
ACTIVATIONS = ("sigmoid", "relu", "tanh", "identity")

MAX_DEPTH = 64  # label-encoder layers: the paper's deepest is 4; a typo's 10**6 would build for minutes


@dataclass
class OutputConfig(ComponentConfig):
    """Base of the output layers' configs."""

    # True where the logits score h_t against E itself (E h), so the encoder's output size must equal d
    needs_embedding_size: ClassVar[bool] = False
    # the size of h_t an encoder that sizes its last layer for the output layer (the AWD-LSTM's, unless
    # last_hidden_size says) gives it: "embedding" (d), or "hidden" (the encoder's hidden size: the full
    # softmax, as DRILL's Table 4 counts its parameters)
    default_input: ClassVar[str] = "embedding"

    def summary(self) -> str:
        """How ``tiedlm info`` names the layer."""
        return self.name


@OUTPUTS.register("full", builds="tiedlm.models.outputs.full:FullSoftmaxOutput")
@dataclass
class FullConfig(OutputConfig):
    """Untied softmax: logits = W h + b, W of |V| × d_h (DRILL eq. 1; Inan et al. eq. 2.3)."""

    default_input: ClassVar[str] = "hidden"


@OUTPUTS.register("tied", builds="tiedlm.models.outputs.tied:TiedOutput")
@dataclass
class TiedConfig(OutputConfig):
    """Reused embeddings: logits = E h (+ b) (DRILL eq. 2; Inan et al.'s RE: b = 0)."""

    needs_embedding_size = True

    bias: bool = False  # a learnable output bias b (Press & Wolf 2017, DRILL's "tied"); false: Inan et al.'s RE, b = 0

    def summary(self) -> str:
        return f"{self.name} ({'W = L^T, learnable b' if self.bias else 'RE: W = L^T, b = 0'})"


@OUTPUTS.register("bilinear", builds="tiedlm.models.outputs.bilinear:BilinearOutput")
@dataclass
class BilinearConfig(OutputConfig):
    """Bilinear: logits = E W h + b, W of d × d_h, so h may have any size (DRILL eq. 3)."""


@OUTPUTS.register("dual", builds="tiedlm.models.outputs.dual:DualOutput")
@dataclass
class DualConfig(OutputConfig):
    """Dual nonlinear mapping: logits = σ(E U + b_u) σ(V h + b_v) + b (DRILL eqs. 4–5); with ``residual``,
    (σ(δ(E) U + b_u) + E)(σ(V h + b_v) + h) + b, the setting of DRILL's Table 4 row (its footnote 6)."""

    joint_size: int = bounded(0, 0, note="0 = embedding_size")  # the joint dimension d_j; 0 = the embedding size d
    # + E on the label side and + h on the context side: DRILL Table 4's dual row ("dropout and residual
    # connections to E and h", footnote 6; the authors' code with --joint_emb_dual at depth 1); needs d_j = d = d_h
    residual: bool = False
    dropout: float = probability(0.0)  # dropout δ on E before U (footnote 6; as DRILL's, eq. 12)
    variational: bool = True  # one dropout mask over the d dimensions per pass, shared by all labels
    # > 0: U and V uniform in ±init_range (the authors' code: 0.1); 0: nn.Linear's default
    init_range: float = bounded(0.0, 0, note="0 = nn.Linear's default")

    @property
    def needs_embedding_size(self) -> bool:  # the residual adds h to g_in(h): d_h must be d
        return self.residual


@OUTPUTS.register("drill", builds="tiedlm.models.outputs.drill:DrillOutput")
@dataclass
class DrillConfig(OutputConfig):
    """DRILL: logits = E⁽ᵏ⁾ h + b, E⁽ᵏ⁾ a deep residual label encoder of depth k (DRILL eqs. 8–12)."""

    needs_embedding_size = True

    depth: int = bounded(1, 1, MAX_DEPTH)  # label-encoder depth k
    activation: str = bounded("sigmoid", choices=ACTIVATIONS)  # sigmoid | relu | tanh | identity
    dropout: float = probability(0.0)  # dropout on each label-encoder layer's input (E included)
    variational: bool = True  # one dropout mask over the d dimensions per pass, shared by all labels
    residual_embedding: bool = True  # + E after every layer (eq. 10)
    residual_previous: bool = False  # + the layer's input as well
    init_range: float = bounded(0.1, 0, above=True)  # uniform initialisation of the label encoder in ±init_range
