"""Encoders (VD-LSTM, AWD-LSTM) and the output-layer family (full, tied, bilinear, dual, DRILL)."""

from .awd_lstm import AWDLSTM, embedding_dropout, locked_dropout
from .drill import DrillOutput, LabelEncoder
from .language_model import LanguageModel, build_output
from .output import (BilinearOutput, DualOutput, FullSoftmaxOutput, OutputLayer, TiedOutput,
                     closed_form_parameters)
from .recurrence import LSTMRecurrence, lstm_recurrence, lstm_recurrence_reference
from .vd_lstm import VDLSTM, VDLSTMLayer, variational_mask

__all__ = ["AWDLSTM", "BilinearOutput", "DrillOutput", "DualOutput", "FullSoftmaxOutput", "LabelEncoder",
           "LanguageModel", "OutputLayer", "TiedOutput", "VDLSTM", "VDLSTMLayer", "LSTMRecurrence",
           "build_output", "closed_form_parameters", "embedding_dropout", "locked_dropout", "lstm_recurrence",
           "lstm_recurrence_reference", "variational_mask"]
