"""Training: the loop, checkpoints, run directories."""

from .checkpoint import load_checkpoint, save_checkpoint
from .trainer import Interrupted, Trainer, train

__all__ = ["Trainer", "train", "Interrupted", "load_checkpoint", "save_checkpoint"]
