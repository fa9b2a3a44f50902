"""The settings of a run of any task: :class:`SectionedConfig`, the one loader (TOML presets and files,
``--set section.key=value``, validation, ``config.toml`` in the run folder, what a resumed run may change), and
what every task's sections share. Each task's settings are its subclass (the language model's:
:mod:`tiedlm.tasks.lm.config`)."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar, get_type_hints

import tomli_w

from .errors import UsageError
from .optimizers import OPTIMIZERS, SGDConfig
from .registry import (
    ComponentConfig,
    TaskInfo,
    assign_typed,
    bounded,
    check_settings,
    field_names,
    parse_text,
    require,
    resumable_fields,
    tasks,
)
from .run_dir import RunDir, write_text_atomic

PRESET_DIR = Path(__file__).parent / "presets"


class SectionedConfig:
    """The settings of a run of any task, in sections (``[data]``, ``[model]``, ``[train]``, ...): a dataclass of
    section dataclasses, a registered component (output layer, encoder, optimiser) a table inside its section.
    One loader for every task: :meth:`from_dict` (TOML as read),
    :meth:`with_overrides` (``--set section.key=value``, a component switched with ``section.component=NAME``),
    :meth:`to_toml`, :meth:`resumable_keys` (the fields marked ``resumable``), :meth:`for_run` (a new run or the
    saved settings of the one being resumed). The language model's :class:`Config`, the tagger's and the
    translator's settings are its subclasses, each declared a task by
    :func:`~tiedlm.registry.register_task` (:attr:`task_info`); each adds ``validate()``."""

    task_info: ClassVar[TaskInfo]  # the task these settings are of (set by register_task)
    # section -> {field: registry}: the fields that hold a registered component's table ([model.output])
    COMPONENTS: ClassVar[dict[str, dict[str, Any]]] = {"train": {"optimizer": OPTIMIZERS}}

    def validate(self) -> None:
        """Raise a one-line UsageError for the first setting that is not allowed."""

    @classmethod
    def label(cls) -> str:
        """What messages call these settings: the task's noun."""
        info = getattr(cls, "task_info", None)
        return info.noun if info else "config"

    def component_defaults(self, section: str, field: str, name: str) -> dict[str, Any]:
        """The table a switch to component ``name`` starts from (the base: the component's own defaults)."""
        return {"name": name}

    # ----- sections ---------------------------------------------------------------------------
    @classmethod
    def section_names(cls) -> list[str]:
        return [f.name for f in fields(cls)]

    def section(self, name: str, origin: str) -> Any:
        if name not in self.section_names():
            raise UsageError(
                f"{origin}: unknown section [{name}]; {self.label()} sections are {', '.join(self.section_names())}"
            )
        return getattr(self, name)

    # ----- construction -------------------------------------------------------------------
    @classmethod
    def from_dict(cls, raw: dict[str, Any], origin: str = "config"):
        """Settings from their tables (as TOML reads them; a run's ``config.toml`` also names its ``task``),
        validated."""
        raw = dict(raw)
        task, info = raw.pop("task", None), getattr(cls, "task_info", None)
        if task is not None and info is not None and task != info.name:
            other = tasks().get(task)
            fix = f"; start one with `{other.command} {origin}`" if other and origin.endswith(".toml") else ""
            raise UsageError(f"{origin}: these are the settings of a {task!r} run, not a {cls.label()}'s{fix}")
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
                    check_settings(value, f"{name}.{key}")
                    value.validate(f"{name}.{key}")
                    setattr(sub, key, value)
                elif key in components:
                    setattr(sub, key, components[key].config(value, origin))
                else:
                    assign_typed(sub, name, key, value, origin)
        for name in cls.section_names():
            check_settings(getattr(cfg, name), name)
        if isinstance(getattr(cfg, "train", None), TrainSettings):
            cfg.train.check()
        cfg.validate()
        return cfg

    @classmethod
    def load(cls, source: str | Path):
        """Load a preset name or a TOML file path."""
        path = resolve_preset(source)
        return cls.from_dict(read_toml(path), origin=str(path))

    def _dotted(self, item: str) -> tuple[str, str, str]:
        """``--set`` item as (section, key, text): checks its form, resolves a bare key and older names."""
        dotted, sep, text = item.partition("=")
        if not sep or "." not in dotted:
            raise UsageError(f"--set {item!r}: expected section.key=value, e.g. --set train.epochs=3")
        section, key = dotted.split(".", 1)
        return section, key, text

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
            ftypes = {k: v for k, v in get_type_hints(type(sub)).items() if k in field_names(sub)}
            if key not in ftypes:
                homes = [s for s in self.section_names() if key in field_names(getattr(self, s))]
                homes += [
                    f"{section}.{c}" for c in self.COMPONENTS.get(section, {}) if key in field_names(getattr(sub, c))
                ]
                if homes:
                    raise UsageError(
                        f"--set {dotted}: {self.label()} key {key!r} is not in [{section}]; it is in [{homes[0]}]"
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
        """The settings as a run folder's ``config.toml``: its task's name, then the sections."""
        return tomli_w.dumps({"task": self.task_info.name, **self.to_dict()})

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
    def for_run(cls, run_dir: Path, resume: bool, overrides: list[str], data_dir: str = ""):
        """The settings of a new run (defaults + ``overrides``) or of the run being resumed in ``run_dir`` (its
        saved config, where only the :meth:`resumable_keys` may change, and ``data_dir``, its verified data found in
        another folder (:meth:`check_data_dir`); saved back)."""
        if not resume:
            return cls().with_overrides(overrides)
        cls.check_resume(run_dir)
        cfg = cls.load_run(run_dir)
        allowed = cls.resumable_keys()
        for item in overrides:
            section, key, _ = cfg._dotted(item)
            if f"{section}.{key}" not in allowed:
                raise UsageError(f"--set {item}: a resumed run only accepts {', '.join(allowed)}")
        if data_dir:
            cfg.check_data_dir(run_dir)
            overrides = [*overrides, f"data.data_dir={Path(data_dir).expanduser().resolve()}"]
        cfg = cfg.with_overrides(overrides)
        cfg.save(run_dir)
        return cfg

    @classmethod
    def check_resume(cls, run_dir: Path) -> None:
        """One line unless ``run_dir`` holds a stopped run of this task: its checkpoint and its config."""
        files, train = RunDir(run_dir), f"`{cls.task_info.command}`"
        if not files.path.exists():
            raise UsageError(f"{run_dir} does not exist; give the --out folder of a {train} run")
        if not files.checkpoint("last").is_file():
            if files.is_training():  # its first epoch is not over
                raise files.busy_error()
            why = files.missing_checkpoint("last") if files.config.is_file() else ""  # killed before one
            raise UsageError(
                why
                or f"{run_dir} has no checkpoints/last.safetensors to resume from; give the --out folder of an "
                f"interrupted {train}"
            )
        if not files.config.is_file():
            raise UsageError(f"{run_dir} has no config.toml; a run folder needs the config.toml that {train} wrote")
        if error := files.other_task_error(cls.task_info.name, resuming=True):
            raise error

    def own_folder(self) -> str:
        """The folder of one's own this run trains on, read as it is ("": a built-in corpus, verified by its
        checksums wherever it is found)."""
        return self.data.data_dir if getattr(self.data, "own_data", False) else ""

    def check_data_dir(self, run_dir: Path) -> None:
        """One line where ``--data-dir`` cannot move this resumed run's data: it trains on a folder of its own."""
        if folder := self.own_folder():
            raise UsageError(
                f"--data-dir: {run_dir} trains on a folder of its own ({folder}), not a known corpus; move that "
                "folder back, or give a new run"
            )

    @classmethod
    def load_run(cls, run_dir: Path):
        """The settings saved in a run folder (``config.toml``)."""
        files = RunDir(run_dir)
        if not files.config.is_file():
            raise UsageError(
                f"{run_dir} is not a {cls.label()} run directory (no config.toml); train one with "
                f"`{cls.task_info.command}`"
            )
        if read_toml(files.config).get("task") is None:  # a damaged file is named as such first
            raise UsageError(
                f"{run_dir} was written by an older tiedlm (its config.toml names no task); rewrite it once with "
                f"`python tools/migrate_runs.py {run_dir}` (from a tiedlm checkout)"
            )
        if error := files.other_task_error(cls.task_info.name):  # named, with the commands that work on it
            raise error
        return cls.load(files.config)

    def save(self, run_dir: Path) -> None:
        write_text_atomic(RunDir(run_dir).config, self.to_toml())


@dataclass
class TrainSettings:
    """The ``[train]`` keys of every task, which the harness reads (threads, device, precision: resolved and
    written back; epochs; max_nonfinite) and the task's step uses (lr, clip, seed, the optimiser), checked here
    once (:meth:`check`). A task's ``[train]`` subclasses it, with its own defaults and keys."""

    epochs: int = bounded(10, 1, resumable=True)  # epochs of the main stage
    lr: float = bounded(1.0, 0, above=True)  # learning rate (the peak rate with a warm-up)
    clip: float = bounded(5.0, 0)  # maximum global gradient norm (0: no clipping)
    seed: int = 1  # seed of every random draw
    threads: int = bounded(0, 0, note="0 = the free cores", resumable=True)  # 0: the cores other processes leave free
    device: str = "auto"  # auto (a GPU if one is visible) | cpu | cuda | cuda:N
    # auto (bf16 where the device has it) | fp32 | bf16
    precision: str = bounded("auto", choices=("auto", "fp32", "bf16"))
    # consecutive non-finite steps tolerated (skipped) before the run stops
    max_nonfinite: int = bounded(10, 1, resumable=True)
    # the optimiser: a table [train.optimizer] with name = sgd | nt-asgd | adam and its own keys (`tiedlm list`)
    optimizer: ComponentConfig = field(default_factory=SGDConfig)

    def __post_init__(self) -> None:
        if isinstance(self.optimizer, (str, dict)):  # TrainConfig(optimizer="nt-asgd") or a table
            self.optimizer = OPTIMIZERS.config(self.optimizer, type(self).__name__)

    def check(self) -> None:
        """A one-line UsageError for the first of these keys that is not allowed beyond their declared bounds (which
        :meth:`SectionedConfig.from_dict` holds every section to), and for the optimiser's."""
        check_settings(self.optimizer, "train.optimizer")
        require(device_is_valid(self.device), "train.device", self.device, "one of: auto, cpu, cuda, cuda:N")
        self.optimizer.validate("train.optimizer")

    @property
    def finetune_epochs(self) -> int:
        """Epochs of NT-ASGD's finetune stage after ``epochs`` (0 for the other optimisers)."""
        return getattr(self.optimizer, "finetune_epochs", 0)

    @property
    def total_epochs(self) -> int:
        return self.epochs + self.finetune_epochs


def read_toml(path: Path) -> dict[str, Any]:
    """The table of a TOML file; a one-line UsageError naming the file where it cannot be read or parsed."""
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path}: not valid TOML ({exc}); fix the file") from None
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path}: not UTF-8 text (byte {exc.start}); save the config file as UTF-8") from None
    except OSError as exc:
        raise UsageError(f"{path}: cannot be read ({exc.strerror or exc}); give a readable TOML file") from None


def device_is_valid(name: str) -> bool:
    """``auto``, ``cpu``, ``cuda`` or ``cuda:N``."""
    return name in ("auto", "cpu", "cuda") or (name.startswith("cuda:") and name[5:].isdigit())


def list_presets() -> list[str]:
    return sorted(p.stem for p in PRESET_DIR.glob("*.toml"))


def resolve_preset(source: str | Path) -> Path:
    path = Path(source)
    if path.suffix == ".toml" or path.exists():
        if not path.is_file():
            what = "is not a regular file" if path.exists() else "does not exist"
            raise UsageError(f"config file {path} {what}; give a preset name (see `tiedlm presets`) or a TOML file")
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
