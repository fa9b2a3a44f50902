"""Load a run directory into a ready model."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from .config import Config
from .data import Vocabulary
from .models import LanguageModel
from .run_dir import RunDir
from .runtime import resolve_device


@dataclass
class Run:
    """A trained run: its config, vocabulary and model (in eval mode)."""

    path: Path
    config: Config
    vocab: Vocabulary
    model: LanguageModel
    checkpoint: str


def load_run(run_dir: str | Path, which: str = "best", device: str = "cpu") -> Run:
    """Load ``RUN_DIR/checkpoints/{which}.safetensors`` with the run's config and vocabulary."""
    from .train.checkpoint import load_checkpoint, model_state

    path = Path(run_dir)
    files = RunDir(path)
    files.require_config()
    cfg = Config.load(files.config)
    vocab = Vocabulary.load(files.vocab)
    ckpt = files.checkpoint(which)
    if which == "best" and not ckpt.exists():
        ckpt, which = files.checkpoint("last"), "last"
    tensors, _ = load_checkpoint(ckpt)
    model = LanguageModel(cfg.model, len(vocab))
    model.load_state_dict(model_state(tensors))
    model.to(resolve_device(device)).eval()
    return Run(path=path, config=cfg, vocab=vocab, model=model, checkpoint=which)


def count_parameters(cfg: Config, vocab_size: int) -> dict[str, int]:
    """Parameter counts per component of the model a config describes (built on the meta device)."""
    with torch.device("meta"):
        return LanguageModel(cfg.model, vocab_size).parameter_counts()
