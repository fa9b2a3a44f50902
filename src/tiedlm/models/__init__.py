"""Encoders (VD-LSTM, AWD-LSTM, sparse LSTM layers), sparse embeddings and the output-layer family."""

from .awd_lstm import AWDLSTM, embedding_dropout, locked_dropout
from .drill import DrillOutput, LabelEncoder
from .language_model import LanguageModel, build_output
from .lstm_layer import VDLSTMLayer, variational_mask
from .output import BilinearOutput, DualOutput, FullSoftmaxOutput, OutputLayer, TiedOutput, closed_form_parameters
from .recurrence import LSTMRecurrence, lstm_recurrence, lstm_recurrence_reference
from .sparse_embedding import SparseEmbedding, dimension_counts, make_embedding, solve_alpha
from .sparse_lstm import (
                     SparseLSTMLayer,
                     dense_lstm_parameters,
                     equal_parameter_slice,
                     solve_equal_parameters,
                     sparse_lstm_parameters,
)
from .vd_lstm import VDLSTM

__all__ = ["AWDLSTM", "BilinearOutput", "DrillOutput", "DualOutput", "FullSoftmaxOutput", "LabelEncoder",
           "LanguageModel", "OutputLayer", "TiedOutput", "VDLSTM", "VDLSTMLayer", "LSTMRecurrence",
           "build_output", "closed_form_parameters", "embedding_dropout", "locked_dropout", "lstm_recurrence",
           "lstm_recurrence_reference", "variational_mask", "SparseEmbedding", "SparseLSTMLayer", "dimension_counts",
           "make_embedding", "solve_alpha", "dense_lstm_parameters", "equal_parameter_slice", "solve_equal_parameters",
           "sparse_lstm_parameters"]
