"""Typed, validated run configuration.

One :class:`Config` per run, loaded from a TOML preset or file, overridden with
``--set section.key=value``, validated once, printed at the start of a run and
saved as ``config.toml`` in the run directory. ``[model]`` is the model's own config
(:mod:`tiedlm.models.config`), whose output layer is a registered component (``[model.output]``,
``--set model.output.depth=4``).
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar, get_type_hints

import tomli_w
import tomllib

from .errors import UsageError
from .models.config import COMPONENTS, LEGACY_KEYS, ModelConfig  # noqa: F401  (ModelConfig re-exported)
from .optimizers import LEGACY_TRAIN_KEYS, OPTIMIZERS, SGDConfig, convert_legacy_train
from .registry import ComponentConfig, assign_typed, field_names, parse_text, resumable, resumable_fields
from .run_dir import RunDir

SECTION_COMPONENTS = {"model": COMPONENTS, "train": {"optimizer": OPTIMIZERS}}  # the component tables of a config
PRESET_DIR = Path(__file__).parent / "presets"


@dataclass
class DataConfig:
    name: str = "ptb"  # ptb | wikitext-2 | wikitext-2-half1 | wikitext-2-half2 | a folder of your own (unverified)
    data_dir: str = ""  # a folder holding the named corpus's verified files (overrides TIEDLM_DATA)

    def resolved(self) -> "DataConfig":
        """Folders as absolute paths (a run trained from one directory evaluates and resumes from any other)."""
        from .data.sources import CORPORA

        name = self.name if self.name in CORPORA else str(Path(self.name).expanduser().resolve())
        data_dir = str(Path(self.data_dir).expanduser().resolve()) if self.data_dir else ""
        return DataConfig(name=name, data_dir=data_dir)


@dataclass
class LossConfig:
    augmented: bool = False  # add the augmented loss J_aug (Inan et al. eq. 3.2) to the cross-entropy
    tau: float = 20.0  # temperature τ of ŷ and ỹ
    gamma: float = 0.5  # alpha = gamma * tau (Inan et al. eq. 3.3)
    form: str = "alpha"  # alpha: J + gamma*tau*J_aug (3.3) | beta: beta*J_aug*tau^2*|V| + (1-beta)*J (6.1)
    beta: float = 0.5  # β of form = beta (eq. 6.1)
    target_grad: bool = False  # let gradients flow through the target distribution y~ into L
    aug_bias: bool = True  # y^ = softmax((Wh + b)/tau) (the text's "logits / tau"); false: softmax(Wh/tau), eq. 3.1
    ar: float = 0.0  # activation regularisation alpha (awd-lstm, Merity et al. 2017 §4.6)
    tar: float = 0.0  # temporal activation regularisation beta (awd-lstm)


@dataclass
class TrainConfig:
    epochs: int = resumable(40)  # epochs of the main stage
    batch_size: int = 20  # parallel streams the training text is cut into
    bptt: int = 35  # time steps per truncated-BPTT window
    lr: float = resumable(1.0)  # SGD learning rate (peak rate with adam and warm-up)
    lr_decay: float = 0.9  # factor per epoch from decay_start on
    decay_start: int = 5  # first epoch (1-based) whose lr is decayed: lr_e = lr * decay^max(0, e - start + 1)
    clip: float = resumable(5.0)  # maximum global gradient norm (0: no clipping)
    # sum_over_time: the loss whose gradient SGD follows is summed over the BPTT steps and averaged over the
    # batch (Zaremba et al.'s TensorFlow code, which Inan et al. follow; lr = 1 assumes it). mean: per token.
    loss_reduction: str = "sum_over_time"
    seed: int = 1111  # seed of every random draw (weights, dropout masks, window lengths)
    warmup_steps: int = 0  # linear lr warm-up over the first N updates (Transformers with adam)
    weight_decay: float = 0.0  # L2 weight decay (sgd / nt-asgd) or decoupled decay (adam)
    variable_bptt: bool = False  # AWD-LSTM's random window lengths around bptt (lr scaled by length / bptt)
    precision: str = "auto"  # auto | fp32 | bf16
    device: str = "auto"  # auto | cpu | cuda
    # auto: on a GPU, capture the training step once per window length as a CUDA graph and replay it
    # (tiedlm.train.cuda_graph) where the encoder's capture has been checked on a GPU, else eager; on: also
    # capture an encoder declared capturable but not yet run on a GPU (none today); off: eager
    cuda_graph: str = resumable("auto")
    eval_batch_size: int = 10  # streams for validation (test: batch 1, the papers' protocol)
    threads: int = resumable(0)  # 0: the cores other processes leave free
    max_nonfinite: int = resumable(10)  # consecutive non-finite steps tolerated before the run stops
    # start from the final weights (last checkpoint) of this run directory, with a fresh lr schedule: Inan et
    # al. re-train their small PTB models this way (arXiv footnote 4, ICLR footnote 5). Same architecture and
    # vocabulary required.
    init_from: str = ""
    # the optimiser: a table [train.optimizer] with name = sgd | nt-asgd (non-monotonically triggered averaged SGD,
    # Merity et al. 2017) | adam and that optimiser's own keys (`tiedlm list` shows them)
    optimizer: ComponentConfig = field(default_factory=SGDConfig)

    def __post_init__(self) -> None:
        if isinstance(self.optimizer, (str, dict)):  # TrainConfig(optimizer="nt-asgd") or a table
            self.optimizer = OPTIMIZERS.config(self.optimizer, "TrainConfig")

    @property
    def finetune_epochs(self) -> int:
        """Epochs of NT-ASGD's finetune stage after ``epochs`` (0 for the other optimisers)."""
        return getattr(self.optimizer, "finetune_epochs", 0)

    @property
    def total_epochs(self) -> int:
        return self.epochs + self.finetune_epochs


def resumable_keys() -> tuple[str, ...]:
    """The settings ``tiedlm train --resume RUN --set ...`` may change (the fields marked ``resumable``; the
    others would make it another run), as ``--set`` names them; `tag train` and `translate train` have theirs
    (``KeyValueConfig.resumable_keys``)."""
    optimizer = {k: None for e in OPTIMIZERS for k in resumable_fields(e.config)}
    legacy = [f"train.{old}" for old, (_, new) in LEGACY_TRAIN_KEYS.items() if new in optimizer]
    train = [f"train.{k}" for k in resumable_fields(TrainConfig)]
    return (*train, *legacy, *(f"train.optimizer.{k}" for k in optimizer))


@dataclass
class Config:
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    loss: LossConfig = field(default_factory=LossConfig)
    train: TrainConfig = field(default_factory=TrainConfig)

    # ----- construction -------------------------------------------------------------------
    @classmethod
    def from_dict(cls, raw: dict[str, Any], origin: str = "config") -> "Config":
        cfg = cls()
        for section, values in raw.items():
            sub = _section(cfg, section, origin)
            if not isinstance(values, dict):
                raise UsageError(f"{origin}: [{section}] must be a table of keys, got {values!r}")
            if section == "model":
                cfg.model = ModelConfig.from_dict(values, origin)
                continue
            if section == "train":
                values = convert_legacy_train(values, strict=origin == "--set", origin=origin)
            for key, value in values.items():
                if section == "train" and key == "optimizer":
                    cfg.train.optimizer = OPTIMIZERS.config(value, origin)
                    continue
                assign_typed(sub, section, key, value, origin)
        cfg.validate()
        return cfg

    @classmethod
    def load(cls, source: str | Path) -> "Config":
        """Load a preset name or a TOML file path."""
        path = resolve_preset(source)
        try:
            raw = tomllib.loads(path.read_text())
        except tomllib.TOMLDecodeError as exc:
            raise UsageError(f"{path}: not valid TOML ({exc}); fix the file") from None
        return cls.from_dict(raw, origin=str(path))

    def with_overrides(self, overrides: list[str]) -> "Config":
        raw = self.to_dict()
        for item in overrides:
            if "=" not in item or "." not in item.split("=", 1)[0]:
                raise UsageError(f"--set {item!r}: expected section.key=value, e.g. --set train.epochs=3")
        # a switch of component (encoder, output layer, optimiser) first, so its keys may come in any order
        switches = tuple(
            f"{sec}.{c}{s}=" for sec, comps in SECTION_COMPONENTS.items() for c in comps for s in ("", ".name")
        )
        for item in sorted(overrides, key=lambda item: not item.startswith(switches)):
            dotted, text = item.split("=", 1)
            section, key = dotted.split(".", 1)
            sub = _section(self, section, "--set")
            component = key.partition(".")[0]
            if component in SECTION_COMPONENTS.get(section, {}):
                registry = SECTION_COMPONENTS[section][component]
                _set_component(raw[section], registry, component, key.partition(".")[2] or "name", text, dotted)
                continue
            if section == "train" and key in LEGACY_TRAIN_KEYS:  # an old flat key; from_dict moves it
                name, new_key = LEGACY_TRAIN_KEYS[key]
                raw["train"][key] = parse_text(text, get_type_hints(OPTIMIZERS[name].config)[new_key], dotted)
                continue
            if section == "model" and key in LEGACY_KEYS:  # an old flat key; ModelConfig.from_dict moves it
                table, layer, new_key = LEGACY_KEYS[key]
                registry = COMPONENTS[table]
                owner = registry[layer] if layer else next(e for e in registry if new_key in field_names(e.config))
                raw["model"][key] = parse_text(text, get_type_hints(owner.config)[new_key], dotted)
                continue
            ftypes = get_type_hints(type(sub))
            if key not in ftypes:
                raise UsageError(f"--set {dotted}: unknown key; [{section}] has {', '.join(ftypes)}")
            raw[section][key] = parse_text(text, ftypes[key], dotted)
        return Config.from_dict(raw, origin="--set")

    def to_dict(self) -> dict[str, dict[str, Any]]:
        out = {
            f.name: (self.model.to_dict() if f.name == "model" else dataclasses.asdict(getattr(self, f.name)))
            for f in fields(self)
        }
        out["train"]["optimizer"] = self.train.optimizer.to_dict()
        return out

    def to_toml(self) -> str:
        return tomli_w.dumps(self.to_dict())

    # ----- validation ---------------------------------------------------------------------
    def validate(self) -> None:
        m, ls, t = self.model, self.loss, self.train
        for name, section in (("loss", ls), ("train", t), ("train.optimizer", t.optimizer)):
            for f in fields(section):
                value = getattr(section, f.name)
                if isinstance(value, float) and not math.isfinite(value):
                    raise UsageError(f"{name}.{f.name} = {value!r} is not allowed; expected a finite number")
        m.validate()
        e = m.encoder
        e.check_run(t)  # what the encoder needs of the run (the Transformer's positions against bptt)
        _check(ls.tau > 0, "loss.tau", ls.tau, "a temperature > 0")
        _check(ls.gamma >= 0, "loss.gamma", ls.gamma, "a number >= 0")
        _check(ls.form in ("alpha", "beta"), "loss.form", ls.form, "one of: alpha (eq. 3.3), beta (eq. 6.1)")
        _check(0.0 <= ls.beta <= 1.0, "loss.beta", ls.beta, "a number in [0, 1]")
        _check(ls.ar >= 0 and ls.tar >= 0, "loss.ar/tar", (ls.ar, ls.tar), "numbers >= 0")
        if not type(e).activation_regularization and (ls.ar or ls.tar):
            raise UsageError(
                f"loss.ar / loss.tar regularise the activations an encoder keeps for them (the AWD-LSTM's); "
                f"model.encoder = {e.name!r} keeps none: set model.encoder = 'awd-lstm' or leave them at 0"
            )
        _check(t.epochs >= 1, "train.epochs", t.epochs, "an integer >= 1")
        _check(t.batch_size >= 1, "train.batch_size", t.batch_size, "an integer >= 1")
        _check(t.eval_batch_size >= 1, "train.eval_batch_size", t.eval_batch_size, "an integer >= 1")
        _check(t.bptt >= 1, "train.bptt", t.bptt, "an integer >= 1")
        _check(t.lr > 0, "train.lr", t.lr, "a number > 0")
        _check(0 < t.lr_decay <= 1, "train.lr_decay", t.lr_decay, "a factor in (0, 1]")
        _check(t.decay_start >= 1, "train.decay_start", t.decay_start, "an epoch number >= 1")
        _check(t.clip >= 0, "train.clip", t.clip, "a max global gradient norm >= 0 (0 disables)")
        _check(
            t.loss_reduction in ("sum_over_time", "mean"),
            "train.loss_reduction",
            t.loss_reduction,
            "one of: sum_over_time, mean",
        )
        _check(t.precision in ("auto", "fp32", "bf16"), "train.precision", t.precision, "one of: auto, fp32, bf16")
        _check(
            device_is_valid(t.device),
            "train.device",
            t.device,
            "one of: auto, cpu, cuda, cuda:N",
        )
        _check(t.threads >= 0, "train.threads", t.threads, "an integer >= 0 (0 = the free cores)")
        _check(t.cuda_graph in ("auto", "on", "off"), "train.cuda_graph", t.cuda_graph, "one of: auto, on, off")
        t.optimizer.validate("train.optimizer")
        _check(t.warmup_steps >= 0, "train.warmup_steps", t.warmup_steps, "an integer >= 0")
        _check(t.weight_decay >= 0, "train.weight_decay", t.weight_decay, "a number >= 0")
        _check(t.max_nonfinite >= 1, "train.max_nonfinite", t.max_nonfinite, "an integer >= 1")

    def lr_at(self, epoch: int) -> float:
        """Learning rate of 1-based ``epoch``: constant, then decayed by a constant factor per epoch."""
        t = self.train
        return t.lr * t.lr_decay ** max(0, epoch - t.decay_start + 1)


def device_is_valid(name: str) -> bool:
    """``auto``, ``cpu``, ``cuda`` or ``cuda:N``."""
    return name in ("auto", "cpu", "cuda") or (name.startswith("cuda:") and name[5:].isdigit())


def _check(ok: bool, key: str, value: Any, allowed: str) -> None:
    if not ok:
        raise UsageError(f"{key} = {value!r} is not allowed; expected {allowed}")


def _set_component(section: dict[str, Any], registry, component: str, field: str, text: str, dotted: str) -> None:
    """``--set model.output=NAME`` / ``model.output.name=NAME`` (switch to another layer, keeping the keys it
    shares with the old one, the others at its defaults) or ``model.output.KEY=VALUE``; the same for the encoder
    and ``train.optimizer``."""
    table = section[component]
    if field == "name":
        if text != table["name"]:
            own = field_names(registry[text].config)
            section[component] = {"name": text, **{k: v for k, v in table.items() if k in own}}
        return
    config = registry[table["name"]].config
    ftypes = {k: v for k, v in get_type_hints(config).items() if k in field_names(config)}
    if field not in ftypes:
        raise UsageError(
            f"--set {dotted}: {registry.kind} {table['name']!r} has no key {field!r}; its keys: "
            f"{', '.join(ftypes) or 'none'} (`tiedlm list` shows every {registry.kind}'s)"
        )
    table[field] = parse_text(text, ftypes[field], dotted)


def _section(cfg: Config, section: str, origin: str) -> Any:
    names = [f.name for f in fields(cfg)]
    if section not in names:
        raise UsageError(f"{origin}: unknown section [{section}]; sections are {', '.join(names)}")
    return getattr(cfg, section)


class KeyValueConfig:
    """The settings of a tagger or translator run: one dataclass, its keys grouped in ``SECTIONS`` for
    ``config.toml`` and ``--set section.key=value`` (the bare ``key=value`` too).

    Subclasses define ``label`` (for messages) and ``validate()`` (returns self or raises UsageError).
    """

    label = "config"

    def validate(self):
        return self

    def require(self, checks: list[tuple[bool, str, str]]) -> None:
        """Raise a one-line UsageError for the first (ok, key, allowed) check that fails."""
        for ok, key, allowed in checks:
            if not ok:
                raise UsageError(f"{self.label} {key} = {getattr(self, key)!r} is not allowed; expected {allowed}")

    @classmethod
    def resumable_keys(cls) -> tuple[str, ...]:
        """The settings a resumed run may change: the fields marked ``resumable`` (the others would make it
        another run)."""
        return tuple(resumable_fields(cls))

    # section -> its keys, so that ``--set section.key=value`` works as for language models (``--set
    # train.epochs=3``); the bare ``key=value`` is accepted too
    SECTIONS: ClassVar[dict[str, tuple[str, ...]]] = {}

    @classmethod
    def normalize(cls, items: list[str]) -> list[str]:
        """``section.key=value`` as the flat ``key=value``; one-line error for a wrong section."""
        out = []
        for item in items:
            key, sep, text = item.partition("=")
            if sep and "." in key:
                section, _, name = key.partition(".")
                if section not in cls.SECTIONS:
                    raise UsageError(
                        f"--set {item!r}: unknown section [{section}]; {cls.label} sections are "
                        f"{', '.join(cls.SECTIONS)} (or give the bare key=value)"
                    )
                if name not in cls.SECTIONS[section]:
                    home = next((s for s, keys in cls.SECTIONS.items() if name in keys), None)
                    where = f"it is in [{home}]" if home else f"[{section}] has {', '.join(cls.SECTIONS[section])}"
                    raise UsageError(f"--set {item!r}: {cls.label} key {name!r} is not in [{section}]; {where}")
                key = name
            out.append(f"{key}{sep}{text}")
        return out

    def with_overrides(self, items: list[str]):
        """Apply ``key=value`` / ``section.key=value`` strings (typed by the field), then validate."""
        hints = get_type_hints(type(self))
        values: dict[str, Any] = {}
        for item in self.normalize(items):
            key, sep, text = item.partition("=")
            if not sep or key not in hints or key in ("label", "SECTIONS"):
                names = ", ".join(f.name for f in fields(self))
                raise UsageError(f"--set {item!r}: expected key=value with key one of {names}")
            values[key] = parse_text(text, hints[key], key)
        return dataclasses.replace(self, **values).validate()

    @classmethod
    def for_run(cls, run_dir: Path, resume: bool, overrides: list[str]):
        """The settings of a new run (defaults + ``overrides``) or of the run being resumed in ``run_dir``
        (its saved config, where only the :meth:`resumable_keys` may change; saved back)."""
        if not resume:
            return cls().with_overrides(overrides)
        files = RunDir(run_dir)
        if not files.training_state().is_file() or not cls.saved(run_dir):
            raise UsageError(
                f"{run_dir} has no {cls.label} run to resume (no checkpoints/last.safetensors and "
                f"config.toml); give the folder of a stopped `tiedlm {cls.command} train`"
            )
        overrides = cls.normalize(overrides)
        extra = [s for s in overrides if s.partition("=")[0] not in cls.resumable_keys()]
        if extra:
            allowed = ", ".join(f"{k}=" for k in cls.resumable_keys())
            raise UsageError(f"--set {extra[0]}: a resumed {cls.label} run only accepts {allowed}")
        cfg = cls.load_run(run_dir).with_overrides(overrides)
        cfg.save(run_dir)
        return cfg

    command: ClassVar[str] = ""  # the CLI group that trains it (tag, translate)

    @classmethod
    def saved(cls, run_dir: Path) -> bool:
        return RunDir(run_dir).config.is_file() or (Path(run_dir) / "config.json").is_file()

    @classmethod
    def load_run(cls, run_dir: Path):
        """The settings saved in a run folder: ``config.toml`` in sections, or an older run's ``config.json``."""
        files = RunDir(run_dir)
        if files.config.is_file():
            try:
                raw = tomllib.loads(files.config.read_text())
            except tomllib.TOMLDecodeError as exc:
                raise UsageError(f"{files.config}: not valid TOML ({exc}); fix the file") from None
            flat: dict[str, Any] = {}
            for section, values in raw.items():
                if section not in cls.SECTIONS or not isinstance(values, dict):
                    raise UsageError(
                        f"{files.config}: unknown section [{section}]; {cls.label} sections are "
                        f"{', '.join(cls.SECTIONS)}"
                    )
                flat.update(values)
            return cls.from_dict(flat)
        legacy = Path(run_dir) / "config.json"
        if not legacy.is_file():
            raise UsageError(
                f"{run_dir} is not a {cls.label} run directory (no config.toml); train one with "
                f"`tiedlm {cls.command} train`"
            )
        return cls.from_dict(json.loads(legacy.read_text()))

    def to_toml(self) -> str:
        """The settings in their sections, as ``config.toml`` holds them (a component's config as its table)."""
        values = {
            f.name: (v.to_dict() if isinstance(v := getattr(self, f.name), ComponentConfig) else v)
            for f in fields(self)
        }
        return tomli_w.dumps({section: {k: values[k] for k in keys} for section, keys in self.SECTIONS.items()})

    def save(self, run_dir: Path) -> None:
        RunDir(run_dir).write_text(RunDir(run_dir).config, self.to_toml())

    @classmethod
    def from_dict(cls, raw: dict[str, Any]):
        unknown = set(raw) - {f.name for f in fields(cls)}
        if unknown:
            raise UsageError(f"{cls.label} config: unknown keys {', '.join(sorted(unknown))}")
        return cls(**raw).validate()


def list_presets() -> list[str]:
    return sorted(p.stem for p in PRESET_DIR.glob("*.toml"))


def resolve_preset(source: str | Path) -> Path:
    path = Path(source)
    if path.suffix == ".toml" or path.exists():
        if not path.is_file():
            raise UsageError(
                f"config file {path} does not exist; give a preset name (see `tiedlm presets`) or a TOML file"
            )
        return path
    preset = PRESET_DIR / f"{source}.toml"
    if not preset.is_file():
        import difflib

        names = list_presets()
        close = difflib.get_close_matches(str(source), names, n=4, cutoff=0.75)
        hint = f" (similar: {', '.join(close)})" if close else ""
        raise UsageError(
            f"unknown preset {source!r}{hint}; `tiedlm presets` lists all {len(names)}, or give a CONFIG.toml file"
        )
    return preset
