"""Encoders and output layers."""

from .language_model import LanguageModel
from .output import FullSoftmaxOutput, TiedOutput
from .recurrence import LSTMRecurrence, lstm_recurrence, lstm_recurrence_reference
from .vd_lstm import VDLSTM, VDLSTMLayer, variational_mask

__all__ = ["LanguageModel", "FullSoftmaxOutput", "TiedOutput", "VDLSTM", "VDLSTMLayer", "LSTMRecurrence",
           "lstm_recurrence", "lstm_recurrence_reference", "variational_mask"]
