"""The encoders h_t = f(x_t, h_{t-1}): VD-LSTM, AWD-LSTM, the Transformer and a Hugging Face body, each config
registered in ``ENCODERS``.

:mod:`.configs` holds the typed configs (torch-free); the encoders are imported on first use, so that
``from tiedlm.models.encoders import ENCODERS`` (config reading, ``tiedlm presets``) does not import torch.
The building blocks live beside them: :mod:`.state` (the recurrent state helpers), :mod:`.lstm_layer`,
:mod:`.recurrence` (the LSTM kernels) and :mod:`.sparse_lstm` (predefined sparse layers). A new encoder: its
class (a subclass of :class:`.base.Encoder`) in a new module here, its config registered in :mod:`.configs`.
"""

from ...registry import lazy_exports
from .configs import ENCODERS, AWDLSTMConfig, EncoderConfig, HFConfig, StackConfig, TransformerConfig, VDLSTMConfig

_encoders, __getattr__ = lazy_exports(
    __name__,
    {".vd_lstm": "VDLSTM", ".awd_lstm": "AWDLSTM", ".transformer": "CausalTransformer"}
    | {".base": "Encoder build_encoder"},
)
__all__ = ["ENCODERS", "AWDLSTMConfig", "EncoderConfig", "HFConfig", "StackConfig", "TransformerConfig", "VDLSTMConfig"]
__all__ += _encoders
