"""Typed, validated run configuration.

One :class:`Config` per run, loaded from a TOML preset or file, overridden with
``--set section.key=value``, validated once, printed at the start of a run and
saved as ``config.toml`` in the run directory. ``[model]`` is the model's own config
(:mod:`tiedlm.models.config`), whose output layer is a registered component (``[model.output]``,
``--set model.output.depth=4``).
"""

from __future__ import annotations

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


class SectionedConfig:
    """The settings of a run of any task, in sections (``[data]``, ``[model]``, ``[train]``, ...): a dataclass of
    section dataclasses, a registered component (output layer, encoder, optimiser) a table inside its section.
    One loader for every task: :meth:`from_dict` (TOML as read, older layouts converted by :meth:`convert`),
    :meth:`with_overrides` (``--set section.key=value``, a component switched with ``section.component=NAME``),
    :meth:`to_toml`, :meth:`resumable_keys` (the fields marked ``resumable``), :meth:`for_run` (a new run or the
    saved settings of the one being resumed). The language model's :class:`Config`, the tagger's and the
    translator's settings are its subclasses; each adds ``validate()``."""

    label: ClassVar[str] = "config"  # for messages
    command: ClassVar[str] = "train"  # the CLI command that trains it (`tiedlm train`, `tiedlm tag train`)
    kind: ClassVar[str] = "lm"  # what its run folders are called (RunDir.task)
    # section -> {field: registry}: the fields that hold a registered component's table ([model.output])
    COMPONENTS: ClassVar[dict[str, dict[str, Any]]] = {}
    # a bare --set KEY=VALUE names the one section that has KEY (the tagger's and translator's older grammar)
    BARE_KEYS: ClassVar[bool] = False

    def validate(self) -> None:
        """Raise a one-line UsageError for the first setting that is not allowed."""

    # ----- hooks ----------------------------------------------------------------------------
    @classmethod
    def convert(cls, raw: dict[str, Any], origin: str) -> dict[str, Any]:
        """Older layouts of saved settings as today's sections (the base: flat keys into their sections)."""
        flat = {k: v for k, v in raw.items() if not isinstance(v, dict) or k not in cls.section_names()}
        if not flat:
            return raw
        out = {k: dict(v) for k, v in raw.items() if k not in flat}
        for key, value in flat.items():
            out.setdefault(cls.home_of(key, origin), {})[key] = value
        return out

    @classmethod
    def rewrite_override(cls, section: str, key: str) -> tuple[str, str]:
        """An older ``--set`` name as today's (section, key); the base: unchanged."""
        return section, key

    def component_defaults(self, section: str, field: str, name: str) -> dict[str, Any]:
        """The table a switch to component ``name`` starts from (the base: the component's own defaults)."""
        return {"name": name}

    def override_legacy(self, raw: dict, section: str, key: str, text: str, dotted: str) -> bool:
        """Apply an older flat key of ``--set`` to ``raw``; True where ``key`` was one (the base has none)."""
        return False

    # ----- sections ---------------------------------------------------------------------------
    @classmethod
    def section_names(cls) -> list[str]:
        return [f.name for f in fields(cls)]

    @classmethod
    def home_of(cls, key: str, origin: str) -> str:
        """The section holding ``key`` (a one-line error where none does)."""
        defaults = cls()
        homes = [s for s in cls.section_names() if key in field_names(getattr(defaults, s))]
        if not homes:
            raise UsageError(f"{origin}: {cls.label} has no key {key!r}; {cls.sections_hint()}")
        return homes[0]

    @classmethod
    def sections_hint(cls) -> str:
        defaults = cls()
        return "; ".join(f"[{s}] {', '.join(field_names(getattr(defaults, s)))}" for s in cls.section_names())

    def section(self, name: str, origin: str) -> Any:
        if name not in self.section_names():
            raise UsageError(
                f"{origin}: unknown section [{name}]; {self.label} sections are {', '.join(self.section_names())}"
            )
        return getattr(self, name)

    # ----- construction -------------------------------------------------------------------
    @classmethod
    def from_dict(cls, raw: dict[str, Any], origin: str = "config"):
        """Settings from their tables (as TOML reads them), validated."""
        raw = cls.convert(dict(raw), origin)
        cfg = cls()
        for name, values in raw.items():
            sub = cfg.section(name, origin)
            if not isinstance(values, dict):
                raise UsageError(f"{origin}: [{name}] must be a table of keys, got {values!r}")
            if hasattr(type(sub), "from_dict"):  # a section with its own loader (the language model's [model])
                setattr(cfg, name, type(sub).from_dict(values, origin))
                continue
            components = cls.COMPONENTS.get(name, {})
            for key, value in values.items():
                if key in components and isinstance(value, ComponentConfig):  # a built config (the Python API)
                    value.validate(f"{name}.{key}")
                    setattr(sub, key, value)
                elif key in components:
                    setattr(sub, key, components[key].config(value, origin))
                else:
                    assign_typed(sub, name, key, value, origin)
        cfg.validate()
        return cfg

    @classmethod
    def load(cls, source: str | Path):
        """Load a preset name or a TOML file path."""
        path = resolve_preset(source)
        try:
            raw = tomllib.loads(path.read_text())
        except tomllib.TOMLDecodeError as exc:
            raise UsageError(f"{path}: not valid TOML ({exc}); fix the file") from None
        return cls.from_dict(raw, origin=str(path))

    def _dotted(self, item: str) -> tuple[str, str, str]:
        """``--set`` item as (section, key, text): checks its form, resolves a bare key and older names."""
        dotted, sep, text = item.partition("=")
        if not sep or (not self.BARE_KEYS and "." not in dotted):
            raise UsageError(f"--set {item!r}: expected section.key=value, e.g. --set train.epochs=3")
        section, key = dotted.split(".", 1) if "." in dotted else ("", dotted)  # "": the bare key's own section
        section, key = self.rewrite_override(section, key)
        return section or self.home_of(key, f"--set {item!r}"), key, text

    def with_overrides(self, overrides: list[str]):
        """These settings with ``--set section.key=value`` items applied (typed by the field), validated."""
        raw = self.to_dict()
        items = [self._dotted(item) for item in overrides]
        # a switch of component (encoder, output layer, optimiser) first, so its keys may come in any order
        items.sort(key=lambda it: it[1].removesuffix(".name") not in self.COMPONENTS.get(it[0], {}))
        for section, key, text in items:
            dotted = f"{section}.{key}"
            sub = self.section(section, "--set")
            component, _, field = key.partition(".")
            if component in self.COMPONENTS.get(section, {}):
                registry = self.COMPONENTS[section][component]
                raw[section][component] = self._set_component(
                    raw[section][component], section, component, registry, field or "name", text, dotted
                )
                continue
            if self.override_legacy(raw, section, key, text, dotted):
                continue
            ftypes = {k: v for k, v in get_type_hints(type(sub)).items() if k in field_names(sub)}
            if key not in ftypes:
                homes = [s for s in self.section_names() if key in field_names(getattr(self, s))]
                if homes:
                    raise UsageError(
                        f"--set {dotted}: {self.label} key {key!r} is not in [{section}]; it is in [{homes[0]}]"
                    )
                raise UsageError(f"--set {dotted}: unknown key {key!r}; [{section}] has {', '.join(ftypes)}")
            raw[section][key] = parse_text(text, ftypes[key], dotted)
        return type(self).from_dict(raw, origin="--set")

    def _set_component(self, table: dict, section: str, component: str, registry, field: str, text: str, dotted: str):
        """``--set section.component=NAME`` (switch to another one, keeping the keys it shares with the old one,
        the others at :meth:`component_defaults`) or ``section.component.KEY=VALUE``: the new table."""
        if field == "name":
            if text == table["name"]:
                return table
            own = field_names(registry[text].config)
            kept = {k: v for k, v in table.items() if k in own and k != "name"}
            return {**self.component_defaults(section, component, text), **kept, "name": text}
        config = registry[table["name"]].config
        ftypes = {k: v for k, v in get_type_hints(config).items() if k in field_names(config)}
        if field not in ftypes:
            raise UsageError(
                f"--set {dotted}: {registry.kind} {table['name']!r} has no key {field!r}; its keys: "
                f"{', '.join(ftypes) or 'none'} (`tiedlm list` shows every {registry.kind}'s)"
            )
        return {**table, field: parse_text(text, ftypes[field], dotted)}

    # ----- output -------------------------------------------------------------------------
    def to_dict(self) -> dict[str, dict[str, Any]]:
        out = {}
        for name in self.section_names():
            sub = getattr(self, name)
            if hasattr(sub, "to_dict"):
                out[name] = sub.to_dict()
                continue
            out[name] = {
                f.name: (v.to_dict() if isinstance(v := getattr(sub, f.name), ComponentConfig) else v)
                for f in fields(sub)
            }
        return out

    def to_toml(self) -> str:
        return tomli_w.dumps(self.to_dict())

    # ----- a run's settings ---------------------------------------------------------------------
    @classmethod
    def resumable_keys(cls) -> tuple[str, ...]:
        """The settings a resumed run may change, as ``--set`` names them: the fields marked ``resumable`` (the
        others would make it another run), with the resumable keys of the section's components."""
        defaults, keys = cls(), []
        for name in cls.section_names():
            keys += [f"{name}.{k}" for k in resumable_fields(type(getattr(defaults, name)))]
            for component, registry in cls.COMPONENTS.get(name, {}).items():
                own = {k: None for e in registry for k in resumable_fields(e.config)}
                keys += [f"{name}.{component}.{k}" for k in own]
        return tuple(keys)

    @classmethod
    def for_run(cls, run_dir: Path, resume: bool, overrides: list[str]):
        """The settings of a new run (defaults + ``overrides``) or of the run being resumed in ``run_dir`` (its
        saved config, where only the :meth:`resumable_keys` may change; saved back)."""
        if not resume:
            return cls().with_overrides(overrides)
        cls.check_resume(run_dir)
        cfg = cls.load_run(run_dir)
        allowed = cls.resumable_keys()
        for item in overrides:
            section, key, _ = cfg._dotted(item)
            if f"{section}.{key}" not in allowed:
                raise UsageError(f"--set {item}: a resumed run only accepts {', '.join(allowed)}")
        cfg = cfg.with_overrides(overrides)
        cfg.save(run_dir)
        return cfg

    @classmethod
    def check_resume(cls, run_dir: Path) -> None:
        """One line unless ``run_dir`` holds a stopped run of this task: its checkpoint and its config."""
        files, train = RunDir(run_dir), f"`tiedlm {cls.command}`"
        if not files.path.exists():
            raise UsageError(f"{run_dir} does not exist; give the --out folder of a {train} run")
        if not files.training_state().is_file():
            raise UsageError(
                f"{run_dir} has no checkpoints/last.safetensors to resume from; give the --out folder of an "
                f"interrupted {train}"
            )
        if not cls.saved(run_dir):
            raise UsageError(f"{run_dir} has no config.toml; a run folder needs the config.toml that {train} wrote")
        if error := files.other_task_error(cls.kind, resuming=True):
            raise error

    def check_data_dir(self, run_dir: Path) -> None:
        """One line where ``--data-dir`` cannot move this resumed run's data: it trains on a folder of its own."""
        if getattr(self.data, "own_data", False):
            raise UsageError(
                f"--data-dir: {run_dir} trains on a folder of its own ({self.data.data_dir}); move that folder "
                "back, or give a new run"
            )

    @classmethod
    def saved(cls, run_dir: Path) -> bool:
        return RunDir(run_dir).config.is_file() or (Path(run_dir) / "config.json").is_file()

    @classmethod
    def load_run(cls, run_dir: Path):
        """The settings saved in a run folder: ``config.toml``, or an older run's ``config.json`` (flat keys)."""
        files = RunDir(run_dir)
        if files.config.is_file():
            return cls.load(files.config)
        legacy = Path(run_dir) / "config.json"
        if not legacy.is_file():
            raise UsageError(
                f"{run_dir} is not a {cls.label} run directory (no config.toml); train one with `tiedlm {cls.command}`"
            )
        return cls.from_dict(json.loads(legacy.read_text()), origin=str(legacy))

    def save(self, run_dir: Path) -> None:
        RunDir(run_dir).write_text(RunDir(run_dir).config, self.to_toml())


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


class Epochs:
    """What every task's ``[train]`` section answers of its epochs (``reproduce`` plans by them)."""

    epochs: int
    optimizer = None

    @property
    def finetune_epochs(self) -> int:
        """Epochs of NT-ASGD's finetune stage after ``epochs`` (0 for the other optimisers)."""
        return getattr(self.optimizer, "finetune_epochs", 0)

    @property
    def total_epochs(self) -> int:
        return self.epochs + self.finetune_epochs


@dataclass
class TrainConfig(Epochs):
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
    # (tiedlm.tasks.lm.cuda_graph) where the encoder's capture has been checked on a GPU, else eager; on: also
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


def resumable_keys() -> tuple[str, ...]:
    """The settings ``tiedlm train --resume RUN --set ...`` may change (the fields marked ``resumable``; the
    others would make it another run), as ``--set`` names them, with the old flat names of the optimiser's keys
    (``Config.resumable_keys``)."""
    optimizer = {k: None for e in OPTIMIZERS for k in resumable_fields(e.config)}
    legacy = [f"train.{old}" for old, (_, new) in LEGACY_TRAIN_KEYS.items() if new in optimizer]
    train = [f"train.{k}" for k in resumable_fields(TrainConfig)]
    return (*train, *legacy, *(f"train.optimizer.{k}" for k in optimizer))


@dataclass
class Config(SectionedConfig):
    """A language model's run: ``[data]``, ``[model]`` (:class:`ModelConfig`, its encoder and output layer
    registered components), ``[loss]`` and ``[train]`` (its optimiser a component)."""

    label, command = "language-model", "train"
    COMPONENTS = SECTION_COMPONENTS
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    loss: LossConfig = field(default_factory=LossConfig)
    train: TrainConfig = field(default_factory=TrainConfig)

    @classmethod
    def convert(cls, raw: dict[str, Any], origin: str) -> dict[str, Any]:
        """The optimiser's keys of runs from before ``[train.optimizer]`` (flat ``[train]`` keys) moved into it."""
        if isinstance(raw.get("train"), dict):
            raw["train"] = convert_legacy_train(raw["train"], strict=origin == "--set", origin=origin)
        return raw

    def override_legacy(self, raw: dict, section: str, key: str, text: str, dotted: str) -> bool:
        """``--set train.nonmono=5`` / ``model.drill_depth=4``: an old flat key, typed by the component that has
        it now (``from_dict`` moves it there)."""
        if section == "train" and key in LEGACY_TRAIN_KEYS:
            name, new_key = LEGACY_TRAIN_KEYS[key]
            raw["train"][key] = parse_text(text, get_type_hints(OPTIMIZERS[name].config)[new_key], dotted)
            return True
        if section == "model" and key in LEGACY_KEYS:
            table, layer, new_key = LEGACY_KEYS[key]
            registry = COMPONENTS[table]
            owner = registry[layer] if layer else next(e for e in registry if new_key in field_names(e.config))
            raw["model"][key] = parse_text(text, get_type_hints(owner.config)[new_key], dotted)
            return True
        return False

    @classmethod
    def resumable_keys(cls) -> tuple[str, ...]:
        return resumable_keys()

    def check_data_dir(self, run_dir: Path) -> None:
        from .data.sources import CORPORA

        if self.data.name not in CORPORA:
            raise UsageError(
                f"--data-dir: {run_dir} trains on a folder of its own ({self.data.name}), not a known corpus; "
                "move that folder back, or give a new run"
            )

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
