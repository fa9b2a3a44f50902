"""Analyses of trained models (Inan et al. 2017 §6.2, §6.4; reports)."""

from .subspace import subspace_distance

__all__ = ["subspace_distance"]
