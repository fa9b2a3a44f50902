"""The encoder contract (:class:`Encoder`) and the build of the encoder a config names."""

from __future__ import annotations

import torch
from torch import nn

from .configs import ENCODERS, EncoderConfig


class Encoder(nn.Module):
    """What every encoder is: embeddings x (T, B, input_size) and a state in, h (T, B, output size) and the next
    state out. A new encoder subclasses it, implements the three methods below, and registers its config in
    ``ENCODERS`` (``models/encoders/configs.py``); :func:`build_encoder` refuses a registered class that is not
    an ``Encoder``.

    What an encoder can do is declared on its config's class (:class:`~tiedlm.models.encoders.configs.
    EncoderConfig`), where the run's config is checked and the task reads it without building the model:
    ``cuda_graph`` (its training step is captured in a CUDA graph), ``activation_regularization`` (it keeps
    :attr:`last_outputs` for AR/TAR), and :meth:`~tiedlm.models.encoders.configs.EncoderConfig.check_run`
    (settings of the run it needs, e.g. the Transformer's positions against ``train.bptt``).
    """

    # (raw, dropped) outputs of the last layer in the last training forward pass, for AR/TAR (Merity et al.
    # §4.6); kept only by encoders whose config declares activation_regularization, released after one use
    last_outputs: tuple[torch.Tensor, torch.Tensor] | None = None
    init_everything_uniform = True  # the LM initialises every encoder weight uniformly in ±init_range

    @classmethod
    def from_config(cls, cfg: EncoderConfig, input_size: int, output_size: int) -> Encoder:
        """The encoder of ``cfg`` over inputs of ``input_size``, whose h_t the output layer needs of
        ``output_size`` (an encoder that sets its own output size ignores it)."""
        raise NotImplementedError

    def init_state(self, batch: int, like: torch.Tensor):
        """The state before the first token of ``batch`` streams (on ``like``'s device)."""
        raise NotImplementedError

    def forward(self, x: torch.Tensor, state):
        """x (T, B, input_size) -> (h (T, B, output size), the state after x)."""
        raise NotImplementedError


class MemoryEncoder(Encoder):
    """An encoder whose carried state is the last ``memory`` input embeddings of the stream (detached between
    windows like an LSTM state), re-read in front of each window (the Transformer, a Hugging Face body)."""

    memory: int = 0
    d_model: int = 0

    def init_state(self, batch: int, like: torch.Tensor):
        """No earlier tokens: an empty (B, 0, d) memory."""
        return [(like.new_zeros(batch, 0, self.d_model, dtype=torch.float32),)]

    def with_memory(self, x: torch.Tensor, state) -> tuple[torch.Tensor, int, list]:
        """x (T,B,d) -> the sequence to read (B, M+T, d) (the memory, then the window), M, and the next state."""
        past = state[0][0].to(x.dtype)
        seq = torch.cat([past, x.transpose(0, 1)], dim=1)
        keep = seq[:, seq.size(1) - min(self.memory, seq.size(1)) :] if self.memory else seq[:, :0]
        return seq, past.size(1), [(keep.float(),)]


def build_encoder(cfg: EncoderConfig, input_size: int, output_size: int) -> Encoder:
    """The encoder registered as ``cfg.name`` over inputs of ``input_size`` (the embedding size).

    ``output_size`` is the size of h_t the output layer needs (AWD-LSTM sizes its last layer by it; the
    VD-LSTM and the Transformer have theirs from ``hidden_size`` and ``input_size``).
    """
    return ENCODERS[cfg.name].cls.from_config(cfg, input_size, output_size)  # .cls: checked to be an Encoder
