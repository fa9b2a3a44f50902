"""The language model's run settings: ``[data]``, ``[model]`` (:class:`~tiedlm.models.config.ModelConfig`, its
encoder and output layer registered components), ``[loss]`` and ``[train]`` (its optimiser a component). One
:class:`Config` per run, loaded from a TOML preset or file, overridden with ``--set section.key=value``,
validated once and saved as ``config.toml`` in the run folder."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ...config import SectionedConfig, TrainSettings
from ...errors import UsageError
from ...models.config import COMPONENTS, ModelConfig
from ...optimizers import OPTIMIZERS
from ...registry import bounded, register_task, resumable

SECTION_COMPONENTS = {"model": COMPONENTS, "train": {"optimizer": OPTIMIZERS}}  # the component tables of a config


@dataclass
class DataConfig:
    name: str = "ptb"  # ptb | wikitext-2 | wikitext-2-half1 | wikitext-2-half2 | a folder of your own (unverified)
    data_dir: str = ""  # a folder holding the named corpus's verified files (overrides TIEDLM_DATA)

    def resolved(self) -> "DataConfig":
        """Folders as absolute paths (a run trained from one directory evaluates and resumes from any other)."""
        from ...data.sources import CORPORA

        name = self.name if self.name in CORPORA else str(Path(self.name).expanduser().resolve())
        data_dir = str(Path(self.data_dir).expanduser().resolve()) if self.data_dir else ""
        return DataConfig(name=name, data_dir=data_dir)


@dataclass
class LossConfig:
    augmented: bool = False  # add the augmented loss J_aug (Inan et al. eq. 3.2) to the cross-entropy
    tau: float = bounded(20.0, 0, above=True)  # temperature τ of ŷ and ỹ
    gamma: float = bounded(0.5, 0)  # alpha = gamma * tau (Inan et al. eq. 3.3)
    # alpha: J + gamma*tau*J_aug (3.3) | beta: beta*J_aug*tau^2*|V| + (1-beta)*J (6.1)
    form: str = bounded("alpha", choices=("alpha", "beta"))
    beta: float = bounded(0.5, 0, 1)  # β of form = beta (eq. 6.1)
    target_grad: bool = False  # let gradients flow through the target distribution y~ into L
    aug_bias: bool = True  # y^ = softmax((Wh + b)/tau) (the text's "logits / tau"); false: softmax(Wh/tau), eq. 3.1
    ar: float = bounded(0.0, 0)  # activation regularisation alpha (awd-lstm, Merity et al. 2017 §4.6)
    tar: float = bounded(0.0, 0)  # temporal activation regularisation beta (awd-lstm)


@dataclass
class TrainConfig(TrainSettings):
    """``[train]``: the keys of every task (:class:`~tiedlm.config.TrainSettings`) and the language model's."""

    epochs: int = resumable(40)  # epochs of the main stage
    seed: int = 1111  # seed of every random draw (weights, dropout masks, window lengths)
    lr: float = resumable(1.0)  # SGD learning rate (peak rate with adam and warm-up)
    clip: float = resumable(5.0)  # maximum global gradient norm (0: no clipping)
    batch_size: int = bounded(20, 1)  # parallel streams the training text is cut into
    bptt: int = bounded(35, 1)  # time steps per truncated-BPTT window
    lr_decay: float = bounded(0.9, 0, 1, above=True)  # factor per epoch from decay_start on
    # first epoch (1-based) whose lr is decayed: lr_e = lr * decay^max(0, e - start + 1)
    decay_start: int = bounded(5, 1)
    # sum_over_time: the loss whose gradient SGD follows is summed over the BPTT steps and averaged over the
    # batch (Zaremba et al.'s TensorFlow code, which Inan et al. follow; lr = 1 assumes it). mean: per token.
    loss_reduction: str = bounded("sum_over_time", choices=("sum_over_time", "mean"))
    warmup_steps: int = bounded(0, 0)  # linear lr warm-up over the first N updates (Transformers with adam)
    weight_decay: float = bounded(0.0, 0)  # L2 weight decay (sgd / nt-asgd) or decoupled decay (adam)
    variable_bptt: bool = False  # AWD-LSTM's random window lengths around bptt (lr scaled by length / bptt)
    # auto (bf16 where the device has it) | fp32 | bf16 | fp16: autocast in fp16 with dynamic loss scaling and fp32
    # weights (tiedlm.train.step.scaled_update): cuDNN's persistent LSTM kernel takes fp16 only (docs/performance.md)
    precision: str = bounded("auto", choices=("auto", "fp32", "bf16", "fp16"))
    # auto: on a GPU, capture the training step once per window length as a CUDA graph and replay it
    # (tiedlm.tasks.lm.cuda_graph) where the encoder's capture has been checked on a GPU, else eager; on: also
    # capture an encoder declared capturable but not yet run on a GPU (none today); off: eager
    cuda_graph: str = bounded("auto", choices=("auto", "on", "off"), resumable=True)
    # the LSTM layers that take PyTorch's fused kernel (cuDNN on a GPU) run at the hidden size and batch rounded up
    # to multiples of these (0: as they are), zero units and rows that change no number of the model's
    # (recurrence.padded_lstm), for the shapes cuDNN's faster algorithms want (e.g. 1150 -> 1152, 20 -> 24)
    lstm_pad_units: int = bounded(0, 0, note="0: no padding", resumable=True)
    lstm_pad_batch: int = bounded(0, 0, note="0: no padding", resumable=True)
    eval_batch_size: int = bounded(10, 1)  # streams for validation (test: batch 1, the papers' protocol)
    # start from the final weights (last checkpoint) of this run directory, with a fresh lr schedule: Inan et
    # al. re-train their small PTB models this way (arXiv footnote 4, ICLR footnote 5). Same architecture and
    # vocabulary required.
    init_from: str = ""


@register_task(
    "lm",
    "language model",
    task="tiedlm.tasks.lm.task:LanguageModelTask",
    train=("train",),
    evaluate=("evaluate",),
    help="train a language model from a preset or a TOML config",
    metric=("valid / test perplexity (test: batch 1)", ("valid_ppl", "test_ppl"), "{:.2f}"),
    seed_columns=("valid ppl", "test ppl (batch 1)"),
    preset=True,
    own_data=("data.name={folder}",),
    batch1=True,
    curves=True,
    done="run {run_dir}: valid ppl {valid_ppl:.2f}, test ppl {test_ppl:.2f}",
)
@dataclass
class Config(SectionedConfig):
    """A language model's run: ``[data]``, ``[model]`` (:class:`ModelConfig`, its encoder and output layer
    registered components), ``[loss]`` and ``[train]`` (its optimiser a component)."""

    COMPONENTS = SECTION_COMPONENTS
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    loss: LossConfig = field(default_factory=LossConfig)
    train: TrainConfig = field(default_factory=TrainConfig)

    def own_folder(self) -> str:
        from ...data.sources import CORPORA

        return "" if self.data.name in CORPORA else self.data.name

    # ----- validation ---------------------------------------------------------------------
    def validate(self) -> None:
        m, ls, t = self.model, self.loss, self.train  # each key's own bounds: registry.check_settings
        m.validate()
        e = m.encoder
        e.check_run(t)  # what the encoder needs of the run (the Transformer's positions against bptt)
        if not type(e).activation_regularization and (ls.ar or ls.tar):
            raise UsageError(
                f"loss.ar / loss.tar regularise the activations an encoder keeps for them (the AWD-LSTM's); "
                f"model.encoder = {e.name!r} keeps none: set model.encoder = 'awd-lstm' or leave them at 0"
            )

    def lr_at(self, epoch: int) -> float:
        """Learning rate of 1-based ``epoch``: constant, then decayed by a constant factor per epoch."""
        t = self.train
        return t.lr * t.lr_decay ** max(0, epoch - t.decay_start + 1)
