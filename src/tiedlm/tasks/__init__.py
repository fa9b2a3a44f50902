"""The tasks, peers above the harness (:mod:`tiedlm.train`), and :data:`TASKS`, what every other part knows of
them: the language model (``lm``), the POS tagger (``tag``), the translator (``translate``) and the subspace
experiment (``subspace``). Each entry names its config and :class:`~tiedlm.train.loop.Task` classes and its
estimator as ``"module:name"`` strings, imported on first use, so that reading the registry imports no torch and
no task's code; a new task is one package and one entry."""

from __future__ import annotations

from dataclasses import dataclass

from ..registry import import_named


@dataclass(frozen=True)
class TaskInfo:
    """What the CLI, the run folders and ``reproduce`` know of a task."""

    name: str  # a results table's ``task`` and the CLI's group: lm | tag | translate | subspace
    kind: str  # what its run folders are called (RunDir.task)
    noun: str  # in messages: "tagger"
    train: tuple[str, ...]  # the words of the command that trains it
    evaluate: tuple[str, ...]  # the words of the command that evaluates a finished run (() where none)
    config: str  # its SectionedConfig class
    task: str  # its Task class
    estimate: str = ""  # (cfg, threads) -> an estimate of a whole run's seconds on this machine (reproduce --dry-run)
    # a results page: (column title, summary keys of the valid and test figure, their format), seed columns
    metric: tuple = ("", (), "")
    seed_columns: tuple[str, str] = ("", "")
    preset: bool = False  # a run starts from a preset (`tiedlm train PRESET`)
    precision: bool = True  # it has train.precision (a budget-scale table sets it to fp32)
    own_data: tuple[str, ...] = ("data.data_dir={folder}", "data.own_data=true")  # reproduce --data FOLDER
    batch1: bool = False  # its test figure is the papers' batch-1 perplexity (a language model)
    curves: bool = False  # its page draws validation curves and frequency bands
    old_device: str = "–"  # the device of a finished run whose summary names none (older runs)
    results: str = ""  # what a finished run holds, where it has no evaluate command
    done: str = ""  # the line its train command ends with: str.format over the summary and run_dir

    def config_class(self):
        return import_named(self.config)

    def task_class(self):
        return import_named(self.task)

    def estimate_seconds(self, cfg, threads: int) -> float:
        return import_named(self.estimate)(cfg, threads)

    def new_config(self, preset: str = "", overrides=()):
        """The config of a new run: the preset's (or the defaults) with ``overrides``."""
        cls = self.config_class()
        return (cls.load(preset) if preset else cls()).with_overrides(list(overrides))


TASKS: dict[str, TaskInfo] = {
    t.name: t
    for t in (
        TaskInfo(
            "lm",
            "lm",
            "language model",
            ("train",),
            ("evaluate",),
            "tiedlm.tasks.lm.config:Config",
            "tiedlm.tasks.lm.task:LanguageModelTask",
            "tiedlm.tasks.lm.estimate:estimate_seconds",
            ("valid / test perplexity (test: batch 1)", ("valid_ppl", "test_ppl"), "{:.2f}"),
            ("valid ppl", "test ppl (batch 1)"),
            preset=True,
            done="run {run_dir}: valid ppl {valid_ppl:.2f}, test ppl {test_ppl:.2f}",
            own_data=("data.name={folder}",),
            batch1=True,
            curves=True,
        ),
        TaskInfo(
            "tag",
            "tagger",
            "tagger",
            ("tag", "train"),
            ("tag", "evaluate"),
            "tiedlm.tasks.tagging.config:TaggerConfig",
            "tiedlm.tasks.tagging.task:TaggerTask",
            "tiedlm.tasks.tagging.task:estimate_seconds",
            ("dev / test accuracy (%)", ("dev_accuracy", "test_accuracy"), "{:.2%}"),
            ("dev accuracy (%)", "test accuracy (%)"),
            precision=False,
            old_device="cpu",
            done="tagger {run_dir}: dev {dev_accuracy:.2%}, test {test_accuracy:.2%} (best epoch {best_epoch}), "
            "embedding parameters {parameters[embedding]:,}",
        ),
        TaskInfo(
            "translate",
            "translator",
            "translator",
            ("translate", "train"),
            ("translate", "evaluate"),
            "tiedlm.tasks.translation.config:TranslationConfig",
            "tiedlm.tasks.translation.task:TranslationTask",
            "tiedlm.tasks.translation.task:estimate_seconds",
            ("valid perplexity / test BLEU", ("valid_ppl", "test_bleu"), "{:.2f}"),
            ("valid ppl", "test BLEU"),
            done="translator {run_dir}: test BLEU {test_bleu:.2f} ({bleu_signature}), test ppl {test_ppl:.2f}, "
            "{parameters[total]:,} parameters, {train_seconds:.0f} s of training",
        ),
        TaskInfo(
            "subspace",
            "subspace",
            "subspace experiment",
            ("experiment", "subspace"),
            (),
            "tiedlm.tasks.subspace.config:SubspaceExperimentConfig",
            "tiedlm.tasks.subspace.experiment:SubspacePoint",
            results="summary.md, subspace.csv",
        ),
    )
}
KINDS = {t.kind: t for t in TASKS.values()}  # by what a run folder holds (RunDir.task)
