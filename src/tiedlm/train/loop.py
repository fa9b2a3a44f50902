"""One run harness for the tasks trained by epochs and kept by their best validation score (the POS tagger,
the translator): :func:`run` owns everything a run does around the task's own steps.

- the run folder (:class:`~tiedlm.run_dir.RunDir`): committed results are refused, one process at a time (its
  lock), a folder that holds a run is refused without ``--resume``, a finished run is refused with the fix;
- the loop: epochs from the resume position, batches from the batch after the last one done, a stop between
  two batches on SIGINT/SIGTERM (:class:`~tiedlm.interrupts.StopRequest`) with a checkpoint, a second signal
  stops at once, non-finite steps skipped and a run that keeps producing them stopped
  (:class:`~tiedlm.train.step.NonFiniteSteps` with the task's ``max_nonfinite``), a non-finite validation score
  stops the run with the last good checkpoint kept;
- the bookkeeping: the best weights and epoch by the task's validation score and direction, one metrics line per
  epoch written together with the checkpoint that counts it (a signal cannot split them), lines of epochs the
  checkpoint has not completed dropped on resume, the progress bar, the summary written atomically;
- the checkpoint: ``checkpoints/last.safetensors`` with the model, the best weights, the optimizer, the RNG
  states (:func:`~tiedlm.train.checkpoint.save_training_state`) and :class:`Progress` as its metadata.

A task (:class:`Task`) gives its data, model and optimizer, one training step, its validation score, its epoch
record and log line, its divergence advice and its summary. The structure follows torchtune's recipes (one
object per task with ``setup``/``train``-style hooks) and fairseq's ``FairseqTask.train_step``/``valid_step``
split. The language model's :class:`~tiedlm.train.trainer.Trainer` (carried state, variable windows, NT-ASGD,
CUDA graphs, DDP) keeps its own loop for now.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import signal
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from ..errors import TiedlmError, UsageError
from ..interrupts import RunInterrupted, StopRequest, StopRequested
from ..paths import refuse_committed
from ..run_dir import RunDir, write_json_atomic, write_text_atomic
from .checkpoint import load_training_state, save_training_state
from .step import NonFiniteSteps

SCHEMA = "tiedlm.train.loop/1"  # the metadata of a checkpoint written by this harness


@dataclasses.dataclass
class Progress:
    """Where a run is, saved as the checkpoint's metadata: a resumed run continues from exactly here."""

    epoch: int = 1  # the epoch in progress, from 1
    batch: int = 0  # its batches done (made or skipped)
    updates: int = 0  # optimizer updates made, all epochs
    sums: list = dataclasses.field(default_factory=lambda: [0.0, 0])  # the epoch's (loss sum, count) so far
    epoch_seconds: float = 0.0  # training seconds of the epoch in progress
    seconds: float = 0.0  # training seconds of the finished epochs
    best_score: float | None = None  # the best validation score so far (None: not validated yet)
    best_epoch: int = 0

    def meta(self) -> dict:
        return {"schema": SCHEMA, **dataclasses.asdict(self)}

    @classmethod
    def from_meta(cls, meta: dict) -> Progress:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in meta.items() if k in names})


class Task(ABC):
    """One task's part of a run: :func:`run` calls ``setup``, then per epoch ``batches`` and ``train_step`` for
    each batch, ``validate``, ``epoch_record`` and ``epoch_line``; at the end ``summary`` on the best weights."""

    title = "training"  # names the run in messages: "tagger training"
    command = "tiedlm train"  # the command that resumes it, without --resume
    higher_is_better = False  # the validation score's direction
    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    epochs: int
    max_nonfinite: int = 10
    show_progress: bool = False  # set by run(): whether progress bars are shown (the task's own too)

    @abstractmethod
    def setup(self, run_dir: Path, resume: bool, log) -> None:
        """Load the data, build the model and the optimizer (seeded); a new run also writes its own files
        (config, vocabularies) into ``run_dir``. The harness restores the checkpoint afterwards."""

    @abstractmethod
    def batches(self, epoch: int) -> Sequence:
        """Epoch ``epoch``'s training batches, in order (the same order again on resume)."""

    @abstractmethod
    def train_step(self, batch, progress: Progress) -> tuple[bool, float, int]:
        """One update on ``batch``: (made, loss sum, count); made False where the loss or gradient was not
        finite and no update was made. ``progress.updates`` counts the updates made before this one."""

    @abstractmethod
    def validate(self) -> float:
        """The validation score of the current weights (its direction: ``higher_is_better``)."""

    @abstractmethod
    def epoch_record(self, epoch: int, sums: list, seconds: float, score: float, progress: Progress) -> dict:
        """The epoch's metrics line (``metrics.jsonl``)."""

    @abstractmethod
    def epoch_line(self, record: dict, seconds: float) -> str:
        """The epoch's log line."""

    @abstractmethod
    def summary(self, progress: Progress, history: list[dict]) -> dict:
        """The run's results (``summary.json``), computed with the best weights loaded into ``self.model``."""

    def running(self, sums: list) -> dict:
        """The progress bar's running figure of the epoch so far."""
        return {"loss": f"{sums[0] / max(sums[1], 1):.3f}"}

    def diverged(self, what: str, run_dir: Path, checkpoint_written: bool) -> str:
        """The one-line message of a run that diverged: what happened and the fix."""
        fix = (
            f"resume from the last epoch's checkpoint with a lower learning rate: {self.command} --resume {run_dir} "
            "--set train.lr=..."
            if checkpoint_written
            else "start a new run with a lower --set train.lr"
        )
        return f"{self.title} diverged: {what}; {fix}"

    def convert(self, meta: dict) -> dict:
        """The metadata of a checkpoint written before this harness, as :class:`Progress` fields."""
        return meta


class TrainingInterrupted(RunInterrupted):
    """A run stopped by a signal; it resumes exactly with ``--resume``."""

    def __init__(self, task: Task, run_dir: Path, epoch: int, batch: int, saved: bool = True):
        where = (
            f"at epoch {epoch}, batch {batch} (checkpoint written)"
            if saved
            else "at once by a second signal (nothing written; resuming repeats the batches since the last checkpoint)"
        )
        super().__init__(f"{task.title} interrupted {where}; resume with: {task.command} --resume {run_dir}")
        self.run_dir, self.epoch, self.batch, self.saved = run_dir, epoch, batch, saved


def run(task: Task, run_dir: str | Path, resume: bool = False, progress: bool = True, log=print) -> dict:
    """Train (or continue) ``task`` in ``run_dir``; returns the summary written to ``summary.json``.

    Raises :class:`TrainingInterrupted` on SIGINT/SIGTERM (after writing the checkpoint), :class:`UsageError`
    for a folder that cannot take this run, :class:`TiedlmError` for a run that diverged."""
    run_dir = Path(run_dir)
    if not resume:
        refuse_committed(run_dir)  # committed results are never overwritten
    with RunDir(run_dir).training_lock():  # one process trains in a folder at a time
        return _run(task, run_dir, resume, progress, log)


def _run(task: Task, run_dir: Path, resume: bool, progress: bool, log) -> dict:
    files = RunDir(run_dir)
    noun = task.title.split()[0]
    if not resume and files.training_state().exists():
        raise UsageError(
            f"{run_dir} already holds a {noun} run; resume it with --resume {run_dir} or pick another --out"
        )
    task.show_progress = progress
    task.setup(run_dir, resume, log)
    best = cloned_state(task.model)
    p = Progress()
    if resume:
        best, meta = load_training_state(files.training_state(), task.model, task.optimizer)
        p = Progress.from_meta(meta if meta.get("schema") == SCHEMA else task.convert(meta))
        if p.epoch > task.epochs and files.summary.exists():
            done = p.epoch - 1
            raise UsageError(
                f"{run_dir} is finished: it trained {done} epochs; to train longer resume with "
                f"--set train.epochs=N (N > {done})"
            )
        # metrics lines of epochs that the checkpoint has not completed go (they are trained again)
        kept = [r for r in files.read_metrics() if r["epoch"] < p.epoch]
        write_text_atomic(files.metrics, "".join(json.dumps(r) + "\n" for r in kept))
        log(f"resuming {run_dir} at epoch {p.epoch}, batch {p.batch}")
    else:
        write_text_atomic(files.metrics, "")
    with StopRequest() as stop:
        while p.epoch <= task.epochs:
            try:
                best = _epoch(task, files, p, best, stop, progress, log)
            except StopRequested:  # between two batches: model, optimizer and position agree
                save_training_state(files.checkpoint("last"), task.model, best, task.optimizer, p.meta())
                raise TrainingInterrupted(task, run_dir, p.epoch, p.batch) from None
            except KeyboardInterrupt:  # a second signal: stop now, write nothing
                raise TrainingInterrupted(task, run_dir, p.epoch, p.batch, saved=False) from None
    task.model.load_state_dict(best)
    summary = task.summary(p, files.read_metrics())
    write_json_atomic(files.summary, summary)
    return summary


def _epoch(task: Task, files: RunDir, p: Progress, best: dict, stop: StopRequest, progress: bool, log) -> dict:
    """Epoch ``p.epoch`` from batch ``p.batch`` on, validation, the metrics line and the checkpoint; returns the
    best weights. Raises :class:`StopRequested` between two batches once a signal asked to stop."""
    from tqdm import tqdm

    epoch = p.epoch
    checkpoint = files.checkpoint("last")
    skipped = NonFiniteSteps(
        task.max_nonfinite, lambda what: task.diverged(what, files.path, checkpoint.is_file()), log
    )
    batches = task.batches(epoch)
    task.model.train()
    start = time.perf_counter() - p.epoch_seconds
    with tqdm(
        total=len(batches),
        initial=p.batch,
        desc=f"{task.title.split()[0]} epoch {epoch}/{task.epochs}",
        unit="batch",
        disable=not progress,
        leave=False,
        dynamic_ncols=True,
    ) as bar:
        for b in range(p.batch, len(batches)):
            p.epoch_seconds = time.perf_counter() - start
            stop.check()
            made, loss_sum, count = task.train_step(batches[b], p)
            p.batch = b + 1
            if skipped(made, f"at epoch {epoch}, batch {b}"):
                p.updates += 1
                p.sums = [p.sums[0] + loss_sum, p.sums[1] + count]
            bar.update(1)
            bar.set_postfix(task.running(p.sums))
    seconds = time.perf_counter() - start
    score = task.validate()
    if not math.isfinite(score):  # this epoch's weights are worth nothing: the last checkpoint stays
        raise TiedlmError(
            task.diverged(f"validation score {score} after epoch {epoch}", files.path, checkpoint.is_file())
        )
    better = p.best_score is None or (score > p.best_score if task.higher_is_better else score < p.best_score)
    if better:
        p.best_score, p.best_epoch = score, epoch
        best = cloned_state(task.model)
    record = task.epoch_record(epoch, p.sums, seconds, score, p)
    with signals_deferred():  # the metrics line and the checkpoint that counts it go together
        p.seconds += seconds
        p.epoch, p.batch, p.sums, p.epoch_seconds = epoch + 1, 0, [0.0, 0], 0.0
        with open(files.metrics, "a") as f:
            f.write(json.dumps(record) + "\n")
        save_training_state(checkpoint, task.model, best, task.optimizer, p.meta())
    log(task.epoch_line(record, seconds))
    return best


@contextlib.contextmanager
def signals_deferred():
    """Hold SIGINT/SIGTERM until the block is done, so that an interruption cannot split it."""
    held = {signal.SIGINT, signal.SIGTERM}
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def cloned_state(model: torch.nn.Module) -> dict[str, Any]:
    """A copy of ``model``'s weights (what the harness keeps as the best)."""
    return {k: v.detach().clone() for k, v in model.state_dict().items()}
