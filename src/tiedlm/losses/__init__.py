"""Losses: cross-entropy and the augmented loss (Inan et al. 2017)."""

from .augmented import AugmentedLoss, LanguageModelLoss

__all__ = ["AugmentedLoss", "LanguageModelLoss"]
