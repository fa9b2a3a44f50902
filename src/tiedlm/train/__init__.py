"""The harness: the run loop every task trains on, its checkpoints, steps, optimisers and torchrun's ranks."""

from .checkpoint import load_checkpoint, save_checkpoint
from .loop import Run, Task, run

__all__ = ["Run", "Task", "run", "load_checkpoint", "save_checkpoint"]
