"""Typed, validated run configuration.

One :class:`Config` per run, loaded from a TOML preset or file, overridden with
``--set section.key=value``, validated once, printed at the start of a run and
saved as ``config.toml`` in the run directory.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, get_type_hints

import tomli_w
import tomllib

from .errors import UsageError

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


ENCODERS = ("vd-lstm", "awd-lstm", "transformer")
POSITIONS = ("sinusoidal", "learned")
OUTPUTS = ("full", "tied", "bilinear", "dual", "drill")
ACTIVATIONS = ("sigmoid", "relu", "tanh", "identity")


@dataclass
class ModelConfig:
    encoder: str = "vd-lstm"  # vd-lstm (Inan et al. 2017) | awd-lstm (Merity et al. 2017) | transformer
    embedding_size: int = 200  # transformer: d_model
    hidden_size: int = 200  # transformer: the feed-forward inner size
    layers: int = 2  # transformer: blocks
    dropout: float = 0.3  # probability of *dropping* a unit (variational, Gal 2015); awd-lstm: on the output
    init_range: float = 0.1  # uniform initialisation in ±init_range
    # vd-lstm and awd-lstm: one mask per sequence on the embeddings fed to the first layer (AWD dropouti)
    dropout_input: float = 0.0
    # awd-lstm only
    last_hidden_size: int = 0  # size of the last LSTM layer; 0: embedding_size, or hidden_size for output = full
    dropout_hidden: float = 0.0  # locked dropout between LSTM layers (AWD dropouth)
    dropout_embedding: float = 0.0  # word types dropped from the embedding (AWD dropoute)
    weight_drop: float = 0.0  # DropConnect on the hidden-to-hidden weights (AWD wdrop)
    # transformer only (pre-norm, causal; dropout = residual, attention and embedding dropout)
    heads: int = 4
    positions: str = "sinusoidal"  # sinusoidal | learned
    max_positions: int = 512  # learned positions only: memory + window length must fit
    memory: int = 0  # earlier tokens of the stream re-read in front of each window (0: windows independent)
    # output layer (Pappas & Henderson 2019): full | tied | bilinear | dual | drill
    output: str = "full"
    tied_bias: bool = False  # tied only: a learnable output bias b (Inan et al.'s RE fixes b = 0)
    joint_size: int = 0  # dual only: d_j; 0 = embedding_size
    drill_depth: int = 1  # drill: label-encoder depth k
    drill_activation: str = "sigmoid"  # sigmoid | relu | tanh | identity
    drill_dropout: float = 0.0  # dropout on each label-encoder layer's input
    drill_variational: bool = True  # one dropout mask over the d dimensions per pass, shared by all labels
    drill_residual_embedding: bool = True  # + E after every layer (eq. 10)
    drill_residual_previous: bool = False  # + the layer's input as well
    drill_init_range: float = 0.1  # uniform initialisation of the label encoder in ±drill_init_range
    # predefined sparseness (Demeester et al. 2018)
    embedding_density: float = 1.0  # fraction of trainable embedding entries (frequency-based, §4.1); 1 = dense
    sparse_layer: int = 0  # 1-based LSTM layer made sparse (§3); 0 = none
    sparse_hidden_size: int = 0  # its hidden size h_s; 0 = the dense size
    sparse_components: int = 0  # k; 0 = solved (smallest k >= 2 admitting equal parameters; 3 with a density)
    sparse_density: float = 0.0  # fraction of the input each component reads; 0 = the dense layer's param count
    # every LSTM layer sparse, the authors' configuration: hidden_size is the wide size (1725) and each layer has
    # the parameters of the dense one f times narrower (f = 2/3: 1150); 0 = off (Demeester et al. §3, Table 1)
    sparse_fraction: float = 0.0

    def encoder_output_size(self) -> int:
        """Size of h_t that reaches the output layer."""
        if self.encoder == "vd-lstm":
            return self.hidden_size
        if self.encoder == "transformer":
            return self.embedding_size
        if self.last_hidden_size:
            return self.last_hidden_size
        return self.hidden_size if self.output == "full" else self.embedding_size


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
    epochs: int = 40  # epochs of the main stage
    batch_size: int = 20  # parallel streams the training text is cut into
    bptt: int = 35  # time steps per truncated-BPTT window
    lr: float = 1.0  # SGD learning rate (peak rate with adam and warm-up)
    lr_decay: float = 0.9  # factor per epoch from decay_start on
    decay_start: int = 5  # first epoch (1-based) whose lr is decayed: lr_e = lr * decay^max(0, e - start + 1)
    clip: float = 5.0  # maximum global gradient norm (0: no clipping)
    # sum_over_time: the loss whose gradient SGD follows is summed over the BPTT steps and averaged over the
    # batch (Zaremba et al.'s TensorFlow code, which Inan et al. follow; lr = 1 assumes it). mean: per token.
    loss_reduction: str = "sum_over_time"
    seed: int = 1111  # seed of every random draw (weights, dropout masks, window lengths)
    optimizer: str = "sgd"  # sgd | nt-asgd (non-monotonically triggered averaged SGD, Merity et al. 2017) | adam
    warmup_steps: int = 0  # linear lr warm-up over the first N updates (Transformers with adam)
    nonmono: int = 5  # nt-asgd: average once valid has not improved on the value `nonmono` epochs back
    weight_decay: float = 0.0  # L2 weight decay (sgd / nt-asgd) or decoupled decay (adam)
    variable_bptt: bool = False  # AWD-LSTM's random window lengths around bptt (lr scaled by length / bptt)
    finetune_epochs: int = 0  # nt-asgd: after `epochs`, restart averaging from the best weights for N epochs
    precision: str = "auto"  # auto | fp32 | bf16
    device: str = "auto"  # auto | cpu | cuda
    # auto: on a GPU, capture the training step of full-length windows once as a CUDA graph and replay it
    # (tiedlm.train.cuda_graph; where the run allows it, else eager); off: always eager
    cuda_graph: str = "auto"
    eval_batch_size: int = 10  # streams for validation (test: batch 1, the papers' protocol)
    threads: int = 0  # 0: all cores
    max_nonfinite: int = 10  # consecutive non-finite steps tolerated before the run stops
    # start from the final weights (last checkpoint) of this run directory, with a fresh lr schedule: Inan et
    # al. re-train their small PTB models this way (arXiv footnote 4, ICLR footnote 5). Same architecture and
    # vocabulary required.
    init_from: str = ""


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
            for key, value in values.items():
                _assign(sub, section, key, value, origin)
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
            dotted, text = item.split("=", 1)
            section, key = dotted.split(".", 1)
            sub = _section(self, section, "--set")
            ftypes = get_type_hints(type(sub))
            if key not in ftypes:
                raise UsageError(f"--set {dotted}: unknown key; [{section}] has {', '.join(ftypes)}")
            raw[section][key] = _parse_text(text, ftypes[key], dotted)
        return Config.from_dict(raw, origin="--set")

    def to_dict(self) -> dict[str, dict[str, Any]]:
        return dataclasses.asdict(self)

    def to_toml(self) -> str:
        return tomli_w.dumps(self.to_dict())

    # ----- validation ---------------------------------------------------------------------
    def validate(self) -> None:
        m, ls, t = self.model, self.loss, self.train
        for section in (m, ls, t):
            for f in fields(section):
                value = getattr(section, f.name)
                if isinstance(value, float) and not math.isfinite(value):
                    name = next(n for n in ("model", "loss", "train") if getattr(self, n) is section)
                    raise UsageError(f"{name}.{f.name} = {value!r} is not allowed; expected a finite number")
        _check(m.embedding_size >= 1, "model.embedding_size", m.embedding_size, "an integer >= 1")
        _check(m.hidden_size >= 1, "model.hidden_size", m.hidden_size, "an integer >= 1")
        _check(m.layers >= 1, "model.layers", m.layers, "an integer >= 1")
        _check(0.0 <= m.dropout < 1.0, "model.dropout", m.dropout, "a drop probability in [0, 1)")
        _check(m.init_range > 0, "model.init_range", m.init_range, "a number > 0")
        _check(m.encoder in ENCODERS, "model.encoder", m.encoder, "one of: " + ", ".join(ENCODERS))
        _check(m.output in OUTPUTS, "model.output", m.output, "one of: " + ", ".join(OUTPUTS))
        _check(not m.tied_bias or m.output == "tied", "model.tied_bias", m.tied_bias,
               "true only with model.output = 'tied' (the other output layers always have a bias)")
        for key in ("dropout_input", "dropout_hidden", "dropout_embedding", "weight_drop", "drill_dropout"):
            _check(0.0 <= getattr(m, key) < 1.0, f"model.{key}", getattr(m, key), "a drop probability in [0, 1)")
        if m.encoder == "vd-lstm":
            for key in ("dropout_hidden", "dropout_embedding", "weight_drop", "last_hidden_size"):
                _check(not getattr(m, key), f"model.{key}", getattr(m, key),
                       "0 with model.encoder = 'vd-lstm' (it is an awd-lstm setting)")
        if m.encoder == "transformer":
            for key in ("dropout_input", "dropout_hidden", "weight_drop", "last_hidden_size", "sparse_layer",
                        "sparse_fraction"):
                _check(not getattr(m, key), f"model.{key}", getattr(m, key),
                       "0 with model.encoder = 'transformer' (it is an LSTM setting)")
            _check(m.heads >= 1 and m.embedding_size % m.heads == 0, "model.heads", m.heads,
                   f"a divisor of model.embedding_size = {m.embedding_size}")
            _check(m.positions in POSITIONS, "model.positions", m.positions, "one of: " + ", ".join(POSITIONS))
            _check(m.memory >= 0, "model.memory", m.memory, "an integer >= 0")
            _check(m.positions != "learned" or m.memory + 2 * t.bptt <= m.max_positions, "model.max_positions",
                   m.max_positions,
                   f">= model.memory + 2 * train.bptt = {m.memory + 2 * t.bptt} with learned positions")
        _check(m.last_hidden_size >= 0, "model.last_hidden_size", m.last_hidden_size, "an integer >= 0 (0 = auto)")
        _check(m.joint_size >= 0, "model.joint_size", m.joint_size, "an integer >= 0 (0 = embedding_size)")
        _check(m.drill_depth >= 1, "model.drill_depth", m.drill_depth, "an integer >= 1")
        _check(
            m.drill_activation in ACTIVATIONS,
            "model.drill_activation",
            m.drill_activation,
            "one of: " + ", ".join(ACTIVATIONS),
        )
        _check(m.drill_init_range > 0, "model.drill_init_range", m.drill_init_range, "a number > 0")
        _check(
            1 / m.embedding_size <= m.embedding_density <= 1,
            "model.embedding_density",
            m.embedding_density,
            f"a fraction in [1/embedding_size, 1] = [{1 / m.embedding_size:.4f}, 1] (every word keeps a dimension)",
        )
        _check(
            0 <= m.sparse_layer <= m.layers,
            "model.sparse_layer",
            m.sparse_layer,
            f"a layer number in 1..{m.layers}, or 0 for none",
        )
        _check(m.sparse_hidden_size >= 0, "model.sparse_hidden_size", m.sparse_hidden_size, "an integer >= 0")
        _check(m.sparse_components >= 0, "model.sparse_components", m.sparse_components, "an integer >= 0")
        _check(0 <= m.sparse_density <= 1, "model.sparse_density", m.sparse_density, "a fraction in [0, 1] (0 = solve)")
        _check(
            0 <= m.sparse_fraction <= 1,
            "model.sparse_fraction",
            m.sparse_fraction,
            "a fraction in [0, 1] (0 = off; the authors' AWD-LSTM: 2/3)",
        )
        _check(
            not (m.sparse_fraction and m.sparse_layer),
            "model.sparse_fraction",
            m.sparse_fraction,
            "0 when model.sparse_layer is set (one sparse layer, or every layer with sparse_fraction, not both)",
        )
        size_key = {"vd-lstm": "hidden_size", "awd-lstm": "last_hidden_size"}.get(m.encoder, "embedding_size")
        if m.output in ("tied", "drill") and m.embedding_size != m.encoder_output_size():
            raise UsageError(
                f"model.output = {m.output!r} scores h_t against the embeddings, so it needs model.{size_key} == "
                f"model.embedding_size, got {m.encoder_output_size()} != {m.embedding_size}; set them equal or use "
                f"output = 'bilinear' or 'dual' (any sizes)"
            )
        _check(ls.tau > 0, "loss.tau", ls.tau, "a temperature > 0")
        _check(ls.gamma >= 0, "loss.gamma", ls.gamma, "a number >= 0")
        _check(ls.form in ("alpha", "beta"), "loss.form", ls.form, "one of: alpha (eq. 3.3), beta (eq. 6.1)")
        _check(0.0 <= ls.beta <= 1.0, "loss.beta", ls.beta, "a number in [0, 1]")
        _check(ls.ar >= 0 and ls.tar >= 0, "loss.ar/tar", (ls.ar, ls.tar), "numbers >= 0")
        if m.encoder != "awd-lstm" and (ls.ar or ls.tar):
            raise UsageError(
                "loss.ar / loss.tar regularise AWD-LSTM activations; set model.encoder = 'awd-lstm' or leave them at 0"
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
            t.device in ("auto", "cpu", "cuda") or t.device.startswith("cuda:"),
            "train.device",
            t.device,
            "one of: auto, cpu, cuda, cuda:N",
        )
        _check(t.threads >= 0, "train.threads", t.threads, "an integer >= 0 (0 = all cores)")
        _check(t.cuda_graph in ("auto", "off"), "train.cuda_graph", t.cuda_graph, "one of: auto, off")
        _check(t.optimizer in ("sgd", "nt-asgd", "adam"), "train.optimizer", t.optimizer, "one of: sgd, nt-asgd, adam")
        _check(t.warmup_steps >= 0, "train.warmup_steps", t.warmup_steps, "an integer >= 0")
        _check(t.nonmono >= 1, "train.nonmono", t.nonmono, "an integer >= 1")
        _check(t.weight_decay >= 0, "train.weight_decay", t.weight_decay, "a number >= 0")
        _check(t.finetune_epochs >= 0, "train.finetune_epochs", t.finetune_epochs, "an integer >= 0")
        _check(
            not t.finetune_epochs or t.optimizer == "nt-asgd",
            "train.finetune_epochs",
            t.finetune_epochs,
            "0 unless train.optimizer = 'nt-asgd' (the finetune stage restarts averaged SGD)",
        )
        _check(t.max_nonfinite >= 1, "train.max_nonfinite", t.max_nonfinite, "an integer >= 1")

    def lr_at(self, epoch: int) -> float:
        """Learning rate of 1-based ``epoch``: constant, then decayed by a constant factor per epoch."""
        t = self.train
        return t.lr * t.lr_decay ** max(0, epoch - t.decay_start + 1)


def _check(ok: bool, key: str, value: Any, allowed: str) -> None:
    if not ok:
        raise UsageError(f"{key} = {value!r} is not allowed; expected {allowed}")


def _section(cfg: Config, section: str, origin: str) -> Any:
    names = [f.name for f in fields(cfg)]
    if section not in names:
        raise UsageError(f"{origin}: unknown section [{section}]; sections are {', '.join(names)}")
    return getattr(cfg, section)


def _assign(sub: Any, section: str, key: str, value: Any, origin: str) -> None:
    ftypes = get_type_hints(type(sub))
    if key not in ftypes:
        raise UsageError(f"{origin}: unknown key {section}.{key}; [{section}] has {', '.join(ftypes)}")
    want = ftypes[key]
    if want is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, want) or (want is int and isinstance(value, bool)):
        raise UsageError(f"{origin}: {section}.{key} = {value!r} must be of type {want.__name__}")
    setattr(sub, key, value)


def _parse_text(text: str, want: type, dotted: str) -> Any:
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
        raise UsageError(f"--set {dotted}={text}: expected a {want.__name__}") from None


class KeyValueConfig:
    """A flat dataclass of settings (tagger, translation) set with ``--set key=value`` and saved as JSON.

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

    def with_overrides(self, items: list[str]):
        """Apply ``key=value`` strings (typed by the field), then validate."""
        hints = get_type_hints(type(self))
        values: dict[str, Any] = {}
        for item in items:
            key, sep, text = item.partition("=")
            if not sep or key not in hints or key == "label":
                names = ", ".join(f.name for f in fields(self))
                raise UsageError(f"--set {item!r}: expected key=value with key one of {names}")
            values[key] = _parse_text(text, hints[key], key)
        return dataclasses.replace(self, **values).validate()

    @classmethod
    def for_run(cls, run_dir: Path, resume: bool, overrides: list[str]):
        """The settings of a new run (defaults + ``overrides``) or of the run being resumed in ``run_dir``
        (its saved config.json, where only ``epochs`` and ``threads`` may change; saved back)."""
        if not resume:
            return cls().with_overrides(overrides)
        if not (run_dir / "checkpoint.safetensors").is_file() or not (run_dir / "config.json").is_file():
            raise UsageError(f"{run_dir} has no checkpoint.safetensors and config.json to resume from")
        extra = [s for s in overrides if not s.startswith(("epochs=", "threads="))]
        if extra:
            raise UsageError(f"--set {extra[0]}: a resumed {cls.label} run only accepts epochs= and threads=")
        cfg = cls.from_dict(json.loads((run_dir / "config.json").read_text())).with_overrides(overrides)
        (run_dir / "config.json").write_text(json.dumps(dataclasses.asdict(cfg), indent=2) + "\n")
        return cfg

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
