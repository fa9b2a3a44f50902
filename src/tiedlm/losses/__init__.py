"""Losses: cross-entropy, the augmented loss (Inan et al. 2017) and AWD-LSTM's activation regularisers."""

from .augmented import AugmentedLoss, LanguageModelLoss
from .regularization import activation_regularization, encoder_regularization

__all__ = ["AugmentedLoss", "LanguageModelLoss", "activation_regularization", "encoder_regularization"]
