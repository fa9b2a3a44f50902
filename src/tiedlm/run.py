"""Load a run directory into a ready model."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import torch

from .data import Vocabulary
from .errors import DataError
from .models import LanguageModel
from .run_dir import RunDir
from .runtime import resolve_device
from .tasks.lm.config import Config


@dataclass
class TrainedRun:
    """A trained run: its config, vocabulary and model (in eval mode)."""

    path: Path
    config: Config
    vocab: Vocabulary
    model: LanguageModel
    checkpoint: str


def _vocab_sized(got: torch.Tensor, want: torch.Tensor, vocab_size: int) -> bool:
    """Whether ``got`` differs from ``want`` only in a leading vocabulary dimension."""
    return got.dim() == want.dim() >= 1 and want.size(0) == vocab_size and got.shape[1:] == want.shape[1:]


def load_run(run_dir: str | Path, which: str = "best", device: str = "cpu") -> TrainedRun:
    """Load ``RUN_DIR/checkpoints/{which}.safetensors`` with the run's config and vocabulary."""
    from .train.checkpoint import load_checkpoint, model_state, require_fit

    path = Path(run_dir)
    files = RunDir(path)
    files.require_config()
    cfg = Config.load(files.config)
    vocab = Vocabulary.load(files.vocab)
    ckpt = files.checkpoint(which)
    if which == "best" and not ckpt.exists() and files.checkpoint("last").exists():
        # a run stopped before its first validation has no best yet: say so, never silently
        finished = files.summary.is_file()
        why = "removed after the run finished" if finished else "stopped before its first epoch ended"
        print(f"tiedlm: {path} has no best checkpoint ({why}); using last", file=sys.stderr)
        ckpt, which = files.checkpoint("last"), "last"
    tensors, _ = load_checkpoint(ckpt)
    model = LanguageModel(cfg.model, len(vocab))
    state, want = model_state(tensors), model.state_dict()
    differ = [k for k in want if k in state and state[k].shape != want[k].shape]
    # a vocabulary of another size (every difference is the vocabulary's dimension): say so, not "size mismatch"
    if differ and set(state) == set(want) and all(_vocab_sized(state[k], want[k], len(vocab)) for k in differ):
        raise DataError(
            f"{files.vocab} has {len(vocab):,} words but {ckpt.name} was trained with {state[differ[0]].size(0):,}: "
            "the vocabulary file is damaged or from another run; restore the run's own vocab.txt"
        )
    require_fit(model, state, ckpt)  # another model size or output layer: a checkpoint of another run
    model.load_state_dict(state)
    model.to(resolve_device(device, "--device")).eval()
    return TrainedRun(path=path, config=cfg, vocab=vocab, model=model, checkpoint=which)
