"""The encoders h_t = f(x_t, h_{t-1}): VD-LSTM, AWD-LSTM, the Transformer and a Hugging Face body, each config
registered in ``ENCODERS``.

:mod:`.configs` holds the typed configs (torch-free); the encoders are imported on first use, so that
``from tiedlm.models.encoders import ENCODERS`` (config reading, ``tiedlm presets``) does not import torch.
The building blocks live beside them: :mod:`.state` (the recurrent state helpers), :mod:`.lstm_layer`,
:mod:`.recurrence` (the LSTM kernels) and :mod:`.sparse_lstm` (predefined sparse layers). A new encoder: its
class (a subclass of :class:`.base.Encoder`) in a new module here, its config registered in :mod:`.configs`.
"""

from importlib import import_module

from .configs import ENCODERS, AWDLSTMConfig, EncoderConfig, HFConfig, StackConfig, TransformerConfig, VDLSTMConfig

_LAZY = {
    "VDLSTM": "vd_lstm",
    "AWDLSTM": "awd_lstm",
    "CausalTransformer": "transformer",
    "Encoder": "base",
    "build_encoder": "base",
}

__all__ = [
    "ENCODERS",
    "AWDLSTMConfig",
    "EncoderConfig",
    "HFConfig",
    "StackConfig",
    "TransformerConfig",
    "VDLSTMConfig",
    *_LAZY,
]


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
