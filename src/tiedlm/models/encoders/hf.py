"""A Hugging Face ``transformers`` model body as a tiedlm encoder (``[model.encoder] name = "hf"``).

The body (``AutoModel.from_config``: GPT-2's or Llama's blocks and final norm, Hugging Face's own
initialisation) reads the LM's embeddings x_t = L y*_{t-1} through ``inputs_embeds`` and returns h_t; the
output layer and the losses are tiedlm's. Like :class:`~tiedlm.models.encoders.transformer.CausalTransformer`,
its state is the last ``memory`` input embeddings of the stream, re-read in front of each window (positions
restart at 0 every window). Needs ``pip install 'tiedlm[hf]'``.
"""

from __future__ import annotations

import torch
from torch import nn

from ...errors import UsageError
from .base import MemoryEncoder
from .configs import HFConfig
from .hf_config import read_config


def import_transformers():
    """The ``transformers`` module, or a one-line error saying how to install it."""
    try:
        import transformers
    except ImportError:
        raise UsageError(
            "the Hugging Face encoder needs transformers: pip install 'tiedlm[hf]' (or pip install transformers)"
        ) from None
    return transformers


def body_config(source: str):
    """The HF config of ``source`` for a body fed embeddings: its own token table cut to one row (unused) and
    no special token ids in it."""
    transformers = import_transformers()
    raw = read_config(source)
    config = transformers.AutoConfig.for_model(**raw)
    text = config.get_text_config()
    text.vocab_size = 1
    for key in ("pad_token_id", "bos_token_id", "eos_token_id"):
        if hasattr(text, key):
            setattr(text, key, None)
    text.use_cache = False
    return config


class HFEncoder(MemoryEncoder):
    """h = HF body(x) over the memory and the window; dropout ``dropout`` on x_t and on h_t."""

    init_everything_uniform = False  # the body keeps Hugging Face's initialisation; the embedding ±init_range

    def __init__(self, config, dropout: float = 0.0, memory: int = 0):
        super().__init__()
        transformers = import_transformers()
        self.body = transformers.AutoModel.from_config(config)
        self.output_size = self.d_model = config.get_text_config().hidden_size
        self.memory = memory
        self.drop = nn.Dropout(dropout)

    @classmethod
    def from_config(cls, cfg: HFConfig, input_size: int, output_size: int) -> "HFEncoder":
        return cls(body_config(cfg.config), cfg.dropout, cfg.memory)

    def reset_parameters(self) -> None:
        """Nothing to do: the body was initialised by Hugging Face's rule when built (from the run's seed)."""

    def forward(self, x: torch.Tensor, state):
        """x (T,B,d) embeddings -> h (T,B,d) and the new state (the last ``memory`` inputs, (B,M,d))."""
        seq, past, state = self.with_memory(x, state)
        h = self.body(inputs_embeds=self.drop(seq)).last_hidden_state[:, past:]
        return self.drop(h).transpose(0, 1), state
