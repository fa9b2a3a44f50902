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


def check_config(source: str, key: str = "model.encoder.config") -> None:
    """One line, before a run starts, where transformers does not know the model type, refuses the config (a
    hidden size its heads do not divide), or the model is not a decoder-only body (T5's encoder-decoder)."""
    body_config(source, key)


def body_config(source: str, key: str = "model.encoder.config"):
    """The HF config of ``source`` for a body fed embeddings: its own token table cut to one row (unused) and
    no special token ids in it (one line for a config that transformers refuses or that is not a causal body's)."""
    transformers = import_transformers()
    raw = read_config(source, key)
    kind = raw["model_type"]
    try:
        config = transformers.AutoConfig.for_model(**raw)
    except Exception as e:  # ValueError, KeyError, huggingface_hub's validation errors: transformers refuses it
        lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
        reason = lines[-1][:160] if lines else type(e).__name__  # the innermost cause, e.g. "The hidden size ..."
        if kind not in transformers.CONFIG_MAPPING:
            reason = f"transformers {transformers.__version__} knows no model type {kind!r}"
        raise UsageError(f"{key}: transformers refuses it ({reason}); give a causal LM's config.json") from None
    if getattr(config, "is_encoder_decoder", False):
        raise UsageError(f"{key}: {kind} is an encoder-decoder model; give a decoder-only (causal) LM's config.json")
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
