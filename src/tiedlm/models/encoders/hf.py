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
from .hf_config import body_config, check_config, import_transformers  # noqa: F401 (used here and by callers)


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
        weights = next(self.body.parameters())
        if not weights.is_meta and not reads_only_the_past(self.body, self.d_model):  # meta: only counted
            raise UsageError(
                f"model.encoder.config: this {config.model_type} body lets position t see positions after t (it is "
                "not causal), so every perplexity would be invalid; give a decoder-only LM's config.json"
            )

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


def reads_only_the_past(body: nn.Module, width: int, length: int = 5) -> bool:
    """Whether the built body is causal: changing the last input of a sequence leaves every earlier position's
    output as it was (a property of the model, not of its name). Uses its own random numbers, not the run's."""
    draw = torch.Generator().manual_seed(0)
    x = torch.randn(1, length, width, generator=draw)
    changed = x.clone()
    changed[:, -1] = torch.randn(width, generator=draw)  # not a shift a LayerNorm would take back out
    mode = body.training
    body.eval()
    try:
        with torch.no_grad():
            a, b = (body(inputs_embeds=v.to(next(body.parameters()).dtype)).last_hidden_state for v in (x, changed))
    except (ValueError, TypeError) as e:  # a body that needs other inputs (an encoder-decoder's decoder ids)
        raise UsageError(f"model.encoder.config: the body cannot read embeddings alone ({str(e)[:120]})") from None
    finally:
        body.train(mode)
    return torch.allclose(a[:, :-1], b[:, :-1], rtol=0, atol=1e-6)
