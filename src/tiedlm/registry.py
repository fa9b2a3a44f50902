"""Registries of components: a name, a small typed config, and the class that builds from it.

Each output layer registers its config, fairseq-style, naming the class that builds from it::

    @OUTPUTS.register("drill", builds="tiedlm.models.outputs.drill:DrillOutput")
    @dataclass
    class DrillConfig(ComponentConfig):
        depth: int = 1

so adding a component is its class in one module and one registered config: the TOML names it
(``[model.output] name = "drill"``, ``depth = 4``), ``--set model.output.depth=4`` sets its keys, validation
and error messages come from its config, and ``tiedlm list`` shows it. The class is imported only when it is
first used, so reading and checking a config never imports torch (``tiedlm presets`` and ``--help`` stay
instant). The typed-assignment helpers here are shared with the run config.
"""

from __future__ import annotations

import dataclasses
import importlib
import math
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, get_args, get_origin, get_type_hints

from .errors import UsageError


@dataclass
class ComponentConfig:
    """Base of a component's config: its registered ``name`` plus the component's own typed keys."""

    name: ClassVar[str] = ""

    def validate(self, key: str) -> None:
        """Raise a one-line UsageError naming ``key.field`` for a bad value (override per component)."""

    def preflight(self, key: str) -> None:
        """Checks that need the component's own library (too slow for every config read), made once before a run
        starts: a one-line UsageError naming ``key`` (override per component)."""

    def check(self, ok: bool, key: str, field: str, allowed: str) -> None:
        require(ok, f"{key}.{field}", getattr(self, field), allowed)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, **dataclasses.asdict(self)}


def require(ok: bool, key: str, value: Any, allowed: str) -> None:
    """The one-line refusal of a setting, unless ``ok``: ``KEY = VALUE is not allowed; expected ALLOWED``."""
    if not ok:
        raise UsageError(f"{key} = {value!r} is not allowed; expected {allowed}")


def import_named(path: str) -> Any:
    """The object named by "package.module:Name"."""
    module, _, attr = path.partition(":")
    return getattr(importlib.import_module(module), attr)


def lazy_exports(package: str, modules: dict[str, str]) -> tuple[list[str], Callable[[str], Any]]:
    """A package's ``__all__`` and ``__getattr__`` (PEP 562) for the public names of its modules (``modules``: module
    relative to ``package`` -> its names, space-separated), each imported on first use, so that importing the package
    (its settings, its configs) loads no torch. No name may be its module's (an import of the module, anywhere,
    would make the package's name the module)."""
    where = {name: module for module, names in modules.items() for name in names.split()}
    if clash := [name for name, module in where.items() if name == module.rsplit(".", 1)[-1]]:
        raise ValueError(f"{package}: {clash[0]!r} names a module and a name of it; rename one")

    def __getattr__(name: str) -> Any:
        if name not in where:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, home = importlib.import_module(where[name], package), importlib.import_module(package)
        for other in [n for n, m in where.items() if m == where[name]]:  # every name of that module, at once
            setattr(home, other, getattr(module, other))
        return getattr(module, name)

    return list(where), __getattr__


@dataclass(frozen=True)
class Entry:
    name: str
    config: type[ComponentConfig]
    builds: str | type  # "package.module:Class", imported on first use, or the class itself
    registry: "Registry | None" = None

    @property
    def cls(self) -> type:
        cls = self.builds if isinstance(self.builds, type) else import_named(self.builds)
        if self.registry is not None:
            self.registry.check_class(self.name, cls)
        return cls

    @property
    def summary(self) -> str:
        """The first paragraph of the config's docstring, as one line (a sentence is never cut at a line end)."""
        paragraph = (self.config.__doc__ or "").strip().split("\n\n")[0]
        return " ".join(line.strip() for line in paragraph.splitlines())


def resumable(default: Any) -> Any:
    """A config field that a resumed run may change (``--resume RUN --set KEY=VALUE``); its other fields would
    make it another run. The one place a setting is marked so: every task's list of such keys comes from here."""
    return dataclasses.field(default=default, metadata={"resumable": True})


def bounded(
    default: Any,
    minimum: float | None = None,
    maximum: float | None = None,
    *,
    above: bool = False,
    below: bool = False,
    choices: tuple | None = None,
    noun: str = "",
    note: str = "",
    resumable: bool = False,
    meta: dict | None = None,
) -> Any:
    """A setting with the values it allows declared beside it: ``minimum``/``maximum`` bound a number (``above``/
    ``below``: strictly), ``choices`` a string; ``noun`` names it in a refusal (``a drop probability``; default
    an integer or a number), ``note`` ends it (``(0 = auto)``); ``resumable`` as
    :func:`resumable`. :func:`check_settings` holds every setting to it however it was set (TOML, ``--set``, the
    Python API), and a setting's command-line option (:func:`option`) to the same."""
    meta = {**(meta or {}), "bounds": (minimum, above, maximum, below), "choices": choices, "noun": noun, "note": note}
    meta |= {"resumable": True} if resumable else {}
    if isinstance(default, list):
        return dataclasses.field(default_factory=lambda: list(default), metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def probability(default: float, resumable: bool = False) -> Any:
    """A drop probability: in [0, 1)."""
    return bounded(default, 0, 1, below=True, noun="a drop probability", resumable=resumable)


def option(
    default: Any,
    flag: str,
    help: str,
    minimum: float | None = None,
    above: bool = False,
    maximum: float | None = None,
    choices: tuple | None = None,
    resumable: bool = False,
) -> Any:
    """A setting that is also the command-line option ``flag``: the option's type, bounds and default come from
    the field (:func:`tiedlm.cli.common.add_options`), so that no default is written twice; the bounds as
    :func:`bounded`."""
    return bounded(
        default,
        minimum,
        maximum,
        above=above,
        choices=choices,
        resumable=resumable,
        meta={"option": {"flag": flag, "help": help}},
    )


def allowed_values(f: dataclasses.Field) -> str:
    """What a field declared with :func:`bounded` allows, in words (``an integer >= 1``, ``a number in [0, 1)``)."""
    (low, above, high, below), choices = f.metadata["bounds"], f.metadata["choices"]
    if choices:
        return "one of: " + ", ".join(choices)
    kind = f.metadata["noun"] or ("an integer" if f.type in (int, "int", "list[int]") else "a number")
    if low is not None and high is not None:
        return f"{kind} in {'(' if above else '['}{low:g}, {high:g}{')' if below else ']'}"
    if low is not None:
        return f"{kind} {'>' if above else '>='} {low:g}"
    return f"{kind} {'<' if below else '<='} {high:g}" if high is not None else kind


def declared(cls: type, name: str) -> dataclasses.Field | None:
    """The field ``name`` as declared with bounds by ``cls`` or the nearest base (a subclass that only sets
    another default keeps the base's bounds)."""
    for klass in cls.__mro__:
        f = getattr(klass, "__dataclass_fields__", {}).get(name)
        if f is not None and "bounds" in f.metadata:
            return f
    return None


def check_settings(settings: Any, prefix: str) -> None:
    """A one-line UsageError for the first field of the dataclass ``settings`` that is not allowed: a number that is
    not finite, or a value outside what its field declares (:func:`bounded`, :func:`option`)."""
    for f in dataclasses.fields(settings):
        value = getattr(settings, f.name)
        values = value if isinstance(value, list) else [value]
        if any(isinstance(v, float) and not math.isfinite(v) for v in values):
            raise UsageError(f"{prefix}.{f.name} = {value!r} is not allowed; expected a finite number")
        f = declared(type(settings), f.name) or f
        if "bounds" not in f.metadata:
            continue
        (low, above, high, below), choices = f.metadata["bounds"], f.metadata["choices"]
        ok = all(
            (choices is None or v in choices)
            and (low is None or (v > low if above else v >= low))
            and (high is None or (v < high if below else v <= high))
            for v in values
        )
        if not ok:
            each = "each value " if isinstance(value, list) else ""
            extra = [f.metadata["note"]] if f.metadata["note"] else []
            extra += [f.metadata["option"]["flag"]] if "option" in f.metadata else []
            hint = f" ({'; '.join(extra)})" if extra else ""
            raise UsageError(f"{prefix}.{f.name} = {value!r} is not allowed; expected {each}{allowed_values(f)}{hint}")


def resumable_fields(cls) -> list[str]:
    """The fields of the dataclass ``cls`` marked :func:`resumable`, in order."""
    return [f.name for f in dataclasses.fields(cls) if f.metadata.get("resumable")]


class Registry:
    """Named components of one kind (e.g. output layers), each with its config dataclass."""

    def __init__(self, kind: str, key: str, base: str = "", guide: str = ""):
        self.kind, self.key = kind, key  # e.g. "output layer", "model.output" (the config key it is chosen by)
        # "module:Class" every registered class must subclass (imported when a class is checked), and where
        # CONTRIBUTING.md says how to write one
        self.base, self.guide = base, guide
        self._entries: dict[str, Entry] = {}

    def check_class(self, name: str, cls: Any) -> None:
        """A one-line UsageError unless ``cls`` subclasses the registry's base class."""
        if not self.base:
            return
        base = import_named(self.base)
        if not (isinstance(cls, type) and issubclass(cls, base)):
            raise UsageError(
                f"{self.kind} {name!r} is registered to build {getattr(cls, '__qualname__', cls)!r}, which is not a "
                f"{base.__module__.rsplit('.', 1)[0]}.{base.__name__}: subclass {base.__name__}"
                + (f" (CONTRIBUTING.md, {self.guide!r})" if self.guide else "")
            )

    def register(self, name: str, builds: str | type) -> Callable[[type[ComponentConfig]], type[ComponentConfig]]:
        """Decorator of a component's config dataclass; ``builds`` is "module:Class" of the component (imported
        when first used, so that configs load without torch, and checked then) or the class itself (a component
        of your own, checked now: a class that does not subclass the registry's base is refused here)."""

        def add(config: type[ComponentConfig]) -> type[ComponentConfig]:
            if name in self._entries:
                raise ValueError(f"{self.kind} {name!r} is registered twice")
            if not isinstance(builds, str):
                self.check_class(name, builds)
            config.name = name
            self._entries[name] = Entry(name, config, builds, self)
            return config

        return add

    def names(self) -> list[str]:
        return list(self._entries)

    def __iter__(self):
        return iter(self._entries.values())

    def __getitem__(self, name: str) -> Entry:
        if name not in self._entries:
            raise UsageError(f"{self.key} = {name!r} is not allowed; expected one of: {', '.join(self._entries)}")
        return self._entries[name]

    def config(self, values: dict[str, Any] | str, origin: str = "config", default: str = "") -> ComponentConfig:
        """A validated config from a table ``{"name": ..., key: value}`` (or just a name, for the defaults); a
        table without a name is the ``default`` component's, where the caller has one."""
        if isinstance(values, str):
            values = {"name": values}
        if isinstance(values, dict) and "name" not in values and default:
            values = {"name": default, **values}
        if not isinstance(values, dict) or "name" not in values:
            raise UsageError(
                f"{origin}: {self.key} needs a name, one of: {', '.join(self._entries)} "
                f"(e.g. [{self.key}] name = {next(iter(self._entries))!r})"
            )
        entry = self[values["name"]]
        cfg = entry.config()
        for key, value in values.items():
            if key != "name":
                assign_typed(
                    cfg,
                    f"{self.key}",
                    key,
                    value,
                    origin,
                    hint=f" ({self.kind} {entry.name!r} has {', '.join(field_names(cfg)) or 'no keys'})",
                )
        check_settings(cfg, self.key)
        cfg.validate(self.key)
        return cfg

    def config_for(self, name: str, origin: str = "config", **keys: Any) -> ComponentConfig:
        """The validated config of ``name`` from those of ``keys`` it has; the others are ignored (settings shared
        by a sweep over several components, e.g. depth=2 for whichever layer has a depth)."""
        own = set(field_names(self[name].config))
        return self.config({"name": name, **{k: v for k, v in keys.items() if k in own}}, origin)


def field_names(obj: Any) -> list[str]:
    return [f.name for f in dataclasses.fields(obj)]


SEED_MAX = 2**32 - 1


def assign_typed(target: Any, section: str, key: str, value: Any, origin: str, hint: str = "") -> None:
    """``target.key = value`` after checking the key exists and the value has the field's type (int -> float ok)."""
    ftypes = {k: v for k, v in get_type_hints(type(target)).items() if k in field_names(target)}
    if key not in ftypes:
        hint = hint or f"; [{section}] has {', '.join(ftypes)}"
        raise UsageError(f"{origin}: unknown key {section}.{key}{hint}")
    want = ftypes[key]
    if get_origin(want) is list:  # a list of numbers (the subspace experiment's sweeps)
        item = get_args(want)[0]
        items = value if isinstance(value, list) else [None]  # not a list: refused below, as a wrong item is
        items = [float(v) if item is float and type(v) is int else v for v in items]
        if not all(isinstance(v, item) and type(v) is not bool for v in items):
            raise UsageError(f"{origin}: {section}.{key} must be a list of {item.__name__} values")
        setattr(target, key, items)
        return
    if not isinstance(want, type):
        raise UsageError(f"{origin}: {section}.{key} is a table; set its keys as {section}.{key}.KEY")
    if want is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, want) or (want is int and isinstance(value, bool)):
        raise UsageError(f"{origin}: {section}.{key} = {value!r} must be of type {want.__name__}")
    if key == "seed" and not 0 <= value <= SEED_MAX:  # what every generator seeded from it takes (NumPy's too)
        raise UsageError(f"{origin}: {section}.seed = {value} must be between 0 and {SEED_MAX}")
    setattr(target, key, value)


def parse_text(text: str, want: type, dotted: str) -> Any:
    """The value of ``--set dotted=text`` as the field's type."""
    if get_origin(want) is list:  # comma-separated
        return [parse_text(t, get_args(want)[0], dotted) for t in text.split(",") if t.strip()]
    try:
        if want is bool:
            low = text.strip().lower()
            if low in ("true", "1", "yes", "on"):
                return True
            if low in ("false", "0", "no", "off"):
                return False
            raise ValueError
        if want is int:
            return int(text)
        if want is float:
            return float(text)
        return text
    except ValueError:
        what = {int: "an integer", float: "a number", bool: "true or false"}.get(want, f"a {want.__name__}")
        raise UsageError(f"--set {dotted}={text}: expected {what}") from None


# ----- tasks ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TaskInfo:
    """A task, declared once by :func:`register_task` on its settings class: what the CLI, the run folders, the
    harness's messages and ``reproduce`` know of it."""

    name: str  # `tiedlm NAME train`, a results table's `task`, and what each of its run folders records
    noun: str  # in messages: "tagger"
    task: str  # its tiedlm.train.Task, "module:Class" (imported on first use: the CLI and configs stay torch-free)
    config: type = object  # its settings (a tiedlm.config.SectionedConfig subclass): the decorated class
    train: tuple[str, ...] = ()  # the words of the command that trains it; default: (name, "train")
    evaluate: tuple[str, ...] = ()  # the words of the command that evaluates a finished run (() where none)
    help: str = ""  # one line for `tiedlm --help` and the train command's
    # a results page: (column title, summary keys of the valid and test figure, their format), seed columns
    metric: tuple = ("", (), "")
    seed_columns: tuple[str, str] = ("", "")
    preset: bool = False  # a run starts from a preset (`tiedlm train PRESET`)
    own_data: tuple[str, ...] = ("data.data_dir={folder}", "data.own_data=true")  # --data FOLDER as --set items
    batch1: bool = False  # its test figure is the papers' batch-1 perplexity (a language model)
    curves: bool = False  # its page draws validation curves and frequency bands
    results: str = ""  # what a finished run holds, where it has no evaluate command
    done: str = ""  # the line its train command ends with: str.format over the summary and run_dir

    @property
    def command(self) -> str:
        """The command that trains (and, with ``--resume``, resumes) it."""
        return "tiedlm " + " ".join(self.train)

    @property
    def title(self) -> str:
        """What log lines call one of its runs."""
        return f"{self.noun} training"

    def task_class(self):
        return import_named(self.task)

    def new_config(self, preset: str = "", overrides=()):
        """The config of a new run: the preset's (or the defaults) with ``overrides``."""
        return (self.config.load(preset) if preset else self.config()).with_overrides(list(overrides))


TASKS: dict[str, TaskInfo] = {}  # filled by register_task as the task modules are imported (see tasks())
TASK_GROUP = "tiedlm.tasks"  # the entry points that name task modules: tiedlm's own and any package's
TASK_MODULES = "TIEDLM_TASKS"  # comma-separated modules of tasks of one's own, not packaged (fairseq's --user-dir)


def register_task(name: str, noun: str, task: str, **keys: Any) -> Callable[[type], type]:
    """Decorator of a task's settings class (a :class:`~tiedlm.config.SectionedConfig`): the task's one
    declaration (:class:`TaskInfo`), kept as the class's ``task_info`` and in :data:`TASKS`::

        @register_task("char", "character LM", task="mypkg.task:CharTask", help="a character-level LM")
        @dataclass
        class CharConfig(SectionedConfig): ...

    The module is found through the ``tiedlm.tasks`` entry points of an installed package or the
    ``TIEDLM_TASKS`` environment variable (:func:`tasks`)."""

    def add(config: type) -> type:
        info = TaskInfo(name, noun, task, config, **{"train": (name, "train"), **keys})
        old = TASKS.get(name)
        if old is not None and old.config.__qualname__ != config.__qualname__:
            raise ValueError(f"task {name!r} is registered twice ({old.config.__qualname__}, {config.__qualname__})")
        config.task_info = TASKS[name] = info
        return config

    return add


def tasks() -> dict[str, TaskInfo]:
    """Every registered task, by name: the modules named by the ``tiedlm.tasks`` entry points (tiedlm's own four
    and any installed package's) and by ``TIEDLM_TASKS`` are imported once, on the first call."""
    import os
    from importlib.metadata import entry_points

    global _DISCOVERED
    if not _DISCOVERED:
        _DISCOVERED = True
        modules = [e.value for e in entry_points(group=TASK_GROUP)]
        modules += [m.strip() for m in os.environ.get(TASK_MODULES, "").split(",") if m.strip()]
        for module in modules:
            try:
                importlib.import_module(module)
            except ImportError as exc:
                raise UsageError(
                    f"task module {module!r} cannot be imported ({exc}); install its package or fix {TASK_MODULES}"
                ) from None
    return TASKS


_DISCOVERED = False


def task_named(name: str) -> TaskInfo:
    """The registered task ``name``; a one-line error naming the others."""
    found = tasks()
    if name not in found:
        raise UsageError(f"no task {name!r}; the tasks are {', '.join(found)}")
    return found[name]
