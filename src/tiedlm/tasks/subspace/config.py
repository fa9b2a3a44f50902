"""Settings of the subspace experiment (Inan et al. 2017, §6.2 / Figure 1), importable without torch: a
:class:`~tiedlm.config.SectionedConfig` like every task's, its optimiser a ``[train.optimizer]`` table of the
optimiser registry."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...config import SectionedConfig, TrainSettings
from ...errors import UsageError
from ...optimizers import SGDConfig
from ...registry import ComponentConfig, bounded, option, register_task, require
from ...run_dir import RunDir

# the settings that make one experiment: a row of subspace.csv is kept for the experiment whose key it carries
SETTINGS = (
    "corpus slice_words vocab hidden_size layers epochs batch_size bptt optimizer lr momentum clip init_range "
    "output_init_range"
).split()


@dataclass
class SweepSection:
    runs: int = option(
        3, "--runs", "seeds per point: run r uses train.seed + r for its slice and weights (the paper: 10)", 1
    )
    betas: list[float] = option(
        [round(0.1 * i, 1) for i in range(11)], "--betas", "sweep (a): the share β of the augmented loss", 0, False, 1
    )
    beta_sweep_tau: float = bounded(10.0, 0, above=True)  # τ of sweep (a)
    taus: list[float] = option([1.0, 2.0, 5.0, 10.0, 20.0, 40.0], "--taus", "sweep (b): the temperatures τ", 0, True)
    tau_sweep_beta: float = bounded(1.0, 0, 1)  # β of sweep (b)


@dataclass
class SubspaceData:
    corpus: str = "ptb"  # a corpus name or folder (the paper: PTB); --data FOLDER: a folder of one's own
    data_dir: str = ""
    slice_words: int = option(20_000, "--slice-words", "each run trains on a random contiguous slice this long", 1)
    vocab: str = option(
        "slice",
        "--vocab",
        "softmax over the corpus's words (full) or over the words of each slice (slice: ~3x faster)",
        choices=("full", "slice"),
    )


@dataclass
class SubspaceModel:
    hidden_size: int = option(300, "--hidden-size", "LSTM width d (at most the vocabulary's size)", minimum=1)
    layers: int = 2
    init_range: float = option(0.1, "--init-range", "uniform init range of the embedding and the LSTM", 0, True)
    output_init_range: float = option(
        0.0,
        "--output-init-range",
        "uniform init range of the output W (b starts at 0); a negative value means --init-range. Directions of W "
        "that the hidden states never excite keep their initial values, so a random W hides the effect of the loss",
    )


@dataclass
class SubspaceTrain(TrainSettings):
    epochs: int = option(15, "--epochs", "epochs of each run", minimum=1)
    lr: float = option(1.0, "--lr", "learning rate", minimum=0, above=True)
    seed: int = option(1, "--seed", "run r uses seed SEED + r for its slice and its weights")
    precision: str = option(
        "fp32",
        "--precision",
        "bf16 rounding of the logits is a sizeable fraction of ỹ's deviation from uniform",
        choices=("auto", "fp32", "bf16"),
    )
    device: str = "cpu"
    batch_size: int = bounded(20, 1)
    bptt: int = bounded(35, 1)
    # the loss summed over the BPTT steps (SGD, as the LM presets) | mean
    loss_reduction: str = bounded("sum_over_time", choices=("sum_over_time", "mean"))
    # sgd (the loss summed over the BPTT steps, as the LM presets; its momentum keeps the updates in the span of the
    # gradients) | adam (per-coordinate scaling, which does not)
    optimizer: ComponentConfig = field(default_factory=SGDConfig)


@register_task(
    "subspace",
    "subspace experiment",
    task="tiedlm.tasks.subspace.experiment:SubspacePoint",
    train=("experiment", "subspace"),
    own_data=("data.corpus={folder}",),
    results="summary.md, subspace.csv",
)
@dataclass
class SubspaceExperimentConfig(SectionedConfig):
    sweep: SweepSection = field(default_factory=SweepSection)
    data: SubspaceData = field(default_factory=SubspaceData)
    model: SubspaceModel = field(default_factory=SubspaceModel)
    train: SubspaceTrain = field(default_factory=SubspaceTrain)

    @classmethod
    def check_resume(cls, run_dir: Path) -> None:
        """One line unless ``run_dir`` holds a subspace experiment (its config.toml): its rows and a stopped point's
        checkpoint are what :func:`~tiedlm.tasks.subspace.experiment.run_experiment` goes on from."""
        files = RunDir(run_dir)
        if not files.config.is_file():
            raise UsageError(
                f"{run_dir} holds no subspace experiment to resume (no config.toml); start one with "
                f"`tiedlm experiment subspace --out {run_dir}`"
            )
        if error := files.other_task_error(cls.task_info.name, resuming=True):
            raise error

    def validate(self) -> None:
        d, t = self.data, self.train  # each key's own bounds: registry.check_settings
        words = t.batch_size * (t.bptt + 1)
        require(
            d.slice_words >= words,
            "data.slice_words",
            d.slice_words,
            f">= train.batch_size x (train.bptt + 1) = {words} (--slice-words)",
        )

    def points(self) -> list[tuple[float, float]]:
        """Unique (beta, tau) points of both sweeps, in sweep order."""
        s = self.sweep
        pts = [(b, s.beta_sweep_tau) for b in s.betas] + [(s.tau_sweep_beta, t) for t in s.taus]
        return list(dict.fromkeys(pts))

    def flat(self) -> dict[str, Any]:
        """Every setting under its own name (the summary's ``config``): the optimiser by its name, with SGD's
        momentum."""
        out = {k: v for name in self.section_names() for k, v in vars(getattr(self, name)).items()}
        opt = out.pop("optimizer")
        return out | {"optimizer": opt.name, "momentum": getattr(opt, "momentum", 0.0)}

    def settings(self) -> str:
        """The key that names this experiment in each row of subspace.csv (lr=1 and lr=1.0 are one setting)."""
        floats, flat = ("lr", "momentum", "clip", "init_range", "output_init_range"), self.flat()
        return json.dumps({k: float(flat[k]) if k in floats else flat[k] for k in SETTINGS}, sort_keys=True)
