"""Encoders (VD-LSTM, AWD-LSTM, sparse LSTM layers, Transformer), sparse embeddings and the output-layer family.

Names are imported on first use (PEP 562), so that ``tiedlm.models.config`` (the typed [model] config) and the
output layers' configs load without torch: reading and checking a config stays instant.
"""

from ..registry import lazy_exports

__all__, __getattr__ = lazy_exports(
    __name__,
    {
        ".config": "ModelConfig",
        ".language_model": "LanguageModel",
        ".sparse_embedding": "SparseEmbedding dimension_counts make_embedding solve_alpha",
        ".encoders": "ENCODERS build_encoder",
        ".encoders.vd_lstm": "VDLSTM",
        ".encoders.awd_lstm": "AWDLSTM embedding_dropout locked_dropout",
        ".encoders.transformer": "CausalTransformer",
        ".encoders.lstm_layer": "VDLSTMLayer variational_mask",
        ".encoders.recurrence": "LSTMRecurrence lstm_recurrence lstm_recurrence_reference",
        ".encoders.sparse_lstm": "SparseLSTMLayer dense_lstm_parameters equal_parameter_slice solve_equal_parameters "
        "sparse_lstm_parameters",
        ".outputs": "OUTPUTS BilinearOutput DrillOutput DualOutput FullSoftmaxOutput LabelEncoder OutputLayer "
        "TiedOutput build_output closed_form_parameters",
    },
)
