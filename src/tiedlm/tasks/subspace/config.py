"""Settings of the subspace experiment (Inan et al. 2017, §6.2 / Figure 1), importable without torch."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import tomli_w
import tomllib

from ...errors import UsageError
from ...run_dir import write_text_atomic


@dataclass
class SubspaceExperimentConfig:
    runs: int = 3
    seed: int = 1
    betas: list[float] = field(default_factory=lambda: [round(0.1 * i, 1) for i in range(11)])
    beta_sweep_tau: float = 10.0
    taus: list[float] = field(default_factory=lambda: [1.0, 2.0, 5.0, 10.0, 20.0, 40.0])
    tau_sweep_beta: float = 1.0
    slice_words: int = 20_000
    vocab: str = "slice"  # slice: only the words of each slice (~3x faster) | full: PTB's 10k words
    hidden_size: int = 300
    layers: int = 2
    epochs: int = 15
    batch_size: int = 20
    bptt: int = 35
    optimizer: str = "sgd"  # sgd (loss summed over BPTT steps, as the LM presets) | adam
    lr: float = 1.0
    momentum: float = 0.0  # SGD momentum: its updates stay in the span of the gradients, unlike Adam's
    clip: float = 5.0
    init_range: float = 0.1
    output_init_range: float = 0.0  # init range of the output W (b = 0); < 0: the same as init_range
    precision: str = "fp32"
    threads: int = 0
    max_nonfinite: int = 10  # consecutive non-finite steps tolerated (skipped) before a run stops
    corpus: str = "ptb"  # a corpus name or folder (the paper: PTB)
    data_dir: str = ""

    def validate(self) -> None:
        if self.runs < 1 or self.epochs < 1:
            raise UsageError("--runs and --epochs must be >= 1")
        if self.optimizer not in ("sgd", "adam"):
            raise UsageError(f"--optimizer {self.optimizer!r}: use sgd or adam")
        if self.vocab not in ("full", "slice"):
            raise UsageError(f"--vocab {self.vocab!r}: use full or slice")
        if not all(0.0 <= b <= 1.0 for b in self.betas) or not (0.0 <= self.tau_sweep_beta <= 1.0):
            raise UsageError("beta values must lie in [0, 1]")
        if not all(t > 0 for t in [*self.taus, self.beta_sweep_tau]):
            raise UsageError("temperatures must be > 0")
        if self.slice_words < self.batch_size * (self.bptt + 1):
            raise UsageError(
                f"--slice-words {self.slice_words} is too small for batch {self.batch_size} x bptt {self.bptt}"
            )

    def save(self, folder) -> None:
        """``folder/config.toml``: every setting, so that ``experiment subspace --resume FOLDER`` finishes the same
        experiment (as a training run's config.toml does for ``train --resume``)."""
        write_text_atomic(Path(folder) / "config.toml", tomli_w.dumps(asdict(self)))

    @classmethod
    def load(cls, folder) -> "SubspaceExperimentConfig":
        """The settings an experiment in ``folder`` was started with (:meth:`save`); a one-line error where there
        are none."""
        path = Path(folder) / "config.toml"
        if not path.is_file():
            raise UsageError(
                f"{folder} holds no subspace experiment to resume (no config.toml); start one with "
                f"tiedlm experiment subspace --out {folder}"
            )
        try:
            return cls(**tomllib.loads(path.read_text()))
        except (tomllib.TOMLDecodeError, TypeError) as exc:
            raise UsageError(f"{path} is not a subspace experiment's config ({exc})") from None

    def points(self) -> list[tuple[float, float]]:
        """Unique (beta, tau) points of both sweeps, in sweep order."""
        pts = [(b, self.beta_sweep_tau) for b in self.betas] + [(self.tau_sweep_beta, t) for t in self.taus]
        return list(dict.fromkeys(pts))

    def settings(self) -> str:
        keep = (
            "corpus",
            "slice_words",
            "vocab",
            "hidden_size",
            "layers",
            "epochs",
            "batch_size",
            "bptt",
            "optimizer",
            "lr",
            "momentum",
            "clip",
            "init_range",
            "output_init_range",
        )
        floats = {f.name for f in fields(self) if f.type == "float"}  # lr=1 and lr=1.0 are the same setting
        return json.dumps(
            {k: float(getattr(self, k)) if k in floats else getattr(self, k) for k in keep}, sort_keys=True
        )
