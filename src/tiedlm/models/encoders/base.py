"""Build the encoder a config names."""

from __future__ import annotations

from torch import nn

from .configs import ENCODERS, EncoderConfig


def build_encoder(cfg: EncoderConfig, input_size: int, output_size: int) -> nn.Module:
    """The encoder registered as ``cfg.name`` over inputs of ``input_size`` (the embedding size).

    ``output_size`` is the size of h_t the output layer needs (AWD-LSTM sizes its last layer by it; the
    VD-LSTM and the Transformer have theirs from ``hidden_size`` and ``input_size``).
    """
    return ENCODERS[cfg.name].cls.from_config(cfg, input_size, output_size)
