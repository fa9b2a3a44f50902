"""Encoders (VD-LSTM, AWD-LSTM, sparse LSTM layers, Transformer), sparse embeddings and the output-layer family.

Names are imported on first use (PEP 562), so that ``tiedlm.models.config`` (the typed [model] config) and the
output layers' configs load without torch: reading and checking a config stays instant.
"""

from ..registry import lazy_attributes

_LAZY = {
    "AWDLSTM": "encoders.awd_lstm",
    "embedding_dropout": "encoders.awd_lstm",
    "locked_dropout": "encoders.awd_lstm",
    "ModelConfig": "config",
    "ENCODERS": "encoders",
    "build_encoder": "encoders",
    "LanguageModel": "language_model",
    "VDLSTMLayer": "encoders.lstm_layer",
    "variational_mask": "encoders.lstm_layer",
    "OUTPUTS": "outputs",
    "BilinearOutput": "outputs",
    "DrillOutput": "outputs",
    "DualOutput": "outputs",
    "FullSoftmaxOutput": "outputs",
    "LabelEncoder": "outputs",
    "OutputLayer": "outputs",
    "TiedOutput": "outputs",
    "build_output": "outputs",
    "closed_form_parameters": "outputs",
    "LSTMRecurrence": "encoders.recurrence",
    "lstm_recurrence": "encoders.recurrence",
    "lstm_recurrence_reference": "encoders.recurrence",
    "SparseEmbedding": "sparse_embedding",
    "dimension_counts": "sparse_embedding",
    "make_embedding": "sparse_embedding",
    "solve_alpha": "sparse_embedding",
    "SparseLSTMLayer": "encoders.sparse_lstm",
    "dense_lstm_parameters": "encoders.sparse_lstm",
    "equal_parameter_slice": "encoders.sparse_lstm",
    "solve_equal_parameters": "encoders.sparse_lstm",
    "sparse_lstm_parameters": "encoders.sparse_lstm",
    "CausalTransformer": "encoders.transformer",
    "VDLSTM": "encoders.vd_lstm",
}

__all__ = list(_LAZY)
__getattr__ = lazy_attributes(__name__, {name: f".{module}" for name, module in _LAZY.items()})
