"""The harness: one run loop for every task trained by epochs (the language model, the POS tagger, the translator,
each point of the subspace experiment; :mod:`tiedlm.tasks`). It knows no task: a task is a :class:`Task`.

- the run (:class:`Run`, :func:`run`): committed results are refused, one process at a time (the folder's lock),
  a folder that holds a run is refused without ``--resume``, a finished run is refused with the fix; threads,
  device, precision and torchrun's ranks are resolved once, for any task;
- the loop (:func:`fit`): epochs from the resume position, batches from the one after the last done,
  a stop between two of them on SIGINT/SIGTERM (:class:`~tiedlm.interrupts.StopRequest`, or a batch budget)
  with a checkpoint, a second signal stops at once, non-finite steps skipped and a run that keeps producing
  them stopped (:class:`~tiedlm.train.step.NonFiniteSteps`, the task's ``max_nonfinite``), a non-finite
  validation score stops the run with the last good checkpoint kept, a stop during the final evaluation
  leaves it to the resumed run;
- the bookkeeping: the best epoch by the task's validation score and direction, one metrics line per epoch
  written together with the checkpoint that counts it (a signal cannot split them), the progress bar, the
  summary written atomically;
- the checkpoints, one schema for every task: ``checkpoints/last.safetensors`` with the model, the optimizer,
  the RNG states, :class:`Progress` as its metadata and the task's :meth:`Task.extra_state`
  (:func:`~tiedlm.train.checkpoint.save_train_state`), and ``checkpoints/best.safetensors``, the
  :meth:`Task.eval_weights` of the best validation (:func:`~tiedlm.train.checkpoint.save_best_weights`).

The structure follows torchtune's recipes (one object per task, the loop calling its hooks) and fairseq's
``FairseqTask.train_step``/``valid_step`` split.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import platform
import signal
import sys
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from .. import __version__
from ..checkpoint_file import clear_temporaries
from ..errors import TiedlmError, UsageError
from ..interrupts import RunInterrupted, StopRequest, StopRequested
from ..paths import ensure_writable_folder, refuse_committed
from ..registry import TaskInfo
from ..run_dir import RunDir, append_text, write_json_atomic, write_text_atomic
from ..runtime import host_record, resolve_device, resolve_precision, set_threads
from .checkpoint import best_weights, load_checkpoint, restore_train_state, save_best_weights, save_train_state
from .distributed import DistributedContext
from .step import NonFiniteSteps
from .wall_time import duration

SCHEMA = "tiedlm.train.loop/1"  # the metadata of a checkpoint written by this harness


@dataclasses.dataclass
class Progress:
    """Where a run is, saved as the checkpoint's metadata: a resumed run continues from exactly here."""

    epoch: int = 1  # the epoch in progress, from 1
    batch: int = 0  # its batches done (made or skipped)
    updates: int = 0  # optimizer updates made, all epochs
    # the epoch's running sums so far: "loss" (summed over its units), "count" (units: tokens), "skipped" (steps
    # not made), and any a task adds (the language model's "aug")
    sums: dict = dataclasses.field(default_factory=dict)
    epoch_seconds: float = 0.0  # training seconds of the epoch in progress
    seconds: float = 0.0  # wall seconds of the finished epochs (training and validation)
    best_score: float | None = None  # the best validation score so far (None: not validated yet)
    best_epoch: int = 0

    def meta(self) -> dict:
        return {"schema": SCHEMA, **dataclasses.asdict(self)}

    @classmethod
    def from_meta(cls, meta: dict) -> Progress:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in meta.items() if k in names})


class Task(ABC):
    """One task's part of a run. :class:`Run` resolves the machine (threads, device, precision, torchrun's ranks)
    from the task's :meth:`settings` and calls ``setup``; :func:`fit` then calls per epoch ``batches`` and
    ``train_step`` for each batch, ``validate``, ``epoch_record`` and ``epoch_line``, and at the end ``summary`` on
    the best weights. The other members are hooks with defaults. What the task is called, and the command that
    trains it, come from its settings class's declaration (:attr:`info`, :func:`~tiedlm.registry.register_task`)."""

    unit = "batch"  # what one step trains on, in messages
    higher_is_better = False  # the validation score's direction
    distributed = False  # whether it trains data-parallel under torchrun (one process otherwise)
    keeps_best = True  # whether the weights of the best validation are kept (and summarised)
    cfg: Any
    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    epochs: int
    max_nonfinite: int = 10
    # set by Run before setup: the machine, resolved once for every task
    threads: int = 1
    device: torch.device = torch.device("cpu")  # where it trains: each metrics line names it (runtime.host_record)
    precision: str = "fp32"
    dist: DistributedContext = DistributedContext()
    step_model: torch.nn.Module | None = None  # what a step calls: the model, or its DDP wrapper under torchrun
    tensorboard = ""  # a folder that also gets each epoch's figures as TensorBoard scalars ("": none)
    show_progress: bool = False  # whether progress bars are shown (the task's own too)
    stop: StopRequest | None = None  # set by the loop while it trains: a task's long work may call check_stop
    invocation: str = ""  # the command line that started the run (its summary's "command")

    def __init__(self, cfg, command: str = ""):
        """A registered task is built from its settings (checked again: they may come from Python) and the command
        line that started the run (its summary's ``command``); ``epochs`` and ``max_nonfinite`` are its
        ``[train]``'s."""
        cfg.validate()
        self.cfg, self.invocation = cfg, command
        self.epochs, self.max_nonfinite = cfg.train.epochs, cfg.train.max_nonfinite

    @property
    def info(self) -> TaskInfo:
        """The task's declaration (``register_task`` on the class of :attr:`cfg`)."""
        return type(self.cfg).task_info

    @property
    def title(self) -> str:
        return self.info.title

    @property
    def command(self) -> str:
        return self.info.command

    def settings(self):
        """The ``[train]`` settings, whose ``threads``, ``device`` and ``precision`` :class:`Run` resolves and
        writes back, so that a resumed run keeps them however busy the machine is."""
        return self.cfg.train

    @property
    def is_main(self) -> bool:
        """Whether this process writes the run's files (rank 0 under torchrun)."""
        return self.dist.is_main

    def preflight(self) -> None:
        """Checks of the settings that need a library's own view of them, before the banner (one line each)."""

    @abstractmethod
    def setup(self, run_dir: Path, resume: bool, log) -> None:
        """Load the data, build the model and the optimizer (seeded); a new run also writes its own files
        (config, vocabularies) into ``run_dir``. The harness restores the checkpoint afterwards."""

    @abstractmethod
    def batches(self, epoch: int) -> Sequence:
        """Epoch ``epoch``'s training batches, in order (the same order again on resume)."""

    @abstractmethod
    def train_step(self, batch, progress: Progress) -> tuple[bool, dict]:
        """One update on ``batch``: (made, what to add to the epoch's sums: ``loss`` summed over the batch's
        units, ``count`` of them, and the task's own); made False (and no sums) where the loss or gradient was
        not finite and no update was made. ``progress.updates`` counts the updates made before this one."""

    @abstractmethod
    def validate(self) -> float:
        """The validation score of the current weights (its direction: ``higher_is_better``)."""

    @abstractmethod
    def epoch_record(self, progress: Progress, seconds: float, wall: float, score: float) -> dict:
        """The metrics line (``metrics.jsonl``) of epoch ``progress.epoch``: its sums are ``progress.sums``, it
        trained ``seconds`` and took ``wall`` seconds with its validation, which scored ``score``."""

    @abstractmethod
    def epoch_line(self, record: dict, seconds: float) -> str:
        """The epoch's log line."""

    @abstractmethod
    def summary(self, progress: Progress, history: list[dict]) -> dict:
        """The run's results (``summary.json``), computed with the best weights loaded into ``self.model``; long
        work may call ``self.check_stop()`` (a stop there ends the run without a summary)."""

    # hooks with defaults
    def running(self, sums: dict) -> dict:
        """The progress bar's running figure of the epoch so far."""
        return {"loss": f"{sums.get('loss', 0.0) / max(sums.get('count', 0), 1):.3f}"}

    def start_epoch(self, progress: Progress) -> None:
        """Before epoch ``progress.epoch``'s first batch (also when it resumes in the middle)."""
        self.model.train()

    def check_stop(self, stop: StopRequest | None = None) -> None:
        """Raise :class:`StopRequested` once a signal asked to stop; under torchrun the ranks decide together, so
        that all of them stop after the same batch."""
        stop = stop or self.stop
        if not self.dist.all_true(not stop.requested):
            raise StopRequested

    def finished_early(self) -> bool:
        """Whether the run ends before ``epochs`` (NT-ASGD's non-monotone stop)."""
        return False

    def after_validation(self, score: float, progress: Progress) -> None:
        """After the epoch's validation and the best weights' update (NT-ASGD's trigger)."""

    def eval_weights(self) -> torch.nn.Module:
        """The weights that are validated and kept as the best (NT-ASGD's average once it averages)."""
        return self.model

    def extra_state(self, progress: Progress) -> tuple[dict[str, torch.Tensor], dict]:
        """What the task adds to the ``last`` checkpoint: tensors under prefixes of its own and JSON (its
        ``task`` metadata)."""
        return {}, {}

    def load_extra_state(self, tensors: dict[str, torch.Tensor], meta: dict, progress: Progress) -> None:
        """A resumed run's :meth:`extra_state` (``meta``: its ``task`` metadata), after the model, optimizer and
        RNG were restored."""

    def finished(self, run_dir: Path, done: int, asked: int) -> str:
        """Why a finished run (``done`` epochs; ``asked``: its train.epochs) has nothing to train, and how to
        train on."""
        more = f" (train.epochs = {asked} asks for no more)" if done > self.epochs else ""
        return f"it trained {done} epochs{more}; to train longer resume with --set train.epochs=N (N > {done})"

    def interrupted(self, run_dir: Path, progress: Progress, saved: bool, final: bool = False) -> RunInterrupted:
        """The error a stopped run ends with."""
        return TrainingInterrupted(self, run_dir, progress.epoch, progress.batch, saved, final)

    def diverged(self, what: str, run_dir: Path, checkpoint_written: bool) -> str:
        """The one-line message of a run that diverged: what happened, the checkpoint to go back to, and the fix."""
        s = self.settings()
        clip = f"a lower train.clip (now {s.clip:g})" if s.clip else "gradient clipping (train.clip > 0; now off)"
        lower = f"a lower train.lr (now {s.lr:g}) or {clip}"
        fix = (
            f"the last good checkpoint is {RunDir(run_dir).checkpoint('last')}; resume from it with {lower}: "
            f"{self.command} --resume {run_dir} --set train.lr=..."
            if checkpoint_written
            else f"no checkpoint was written yet; start a new run with {lower} (--set train.lr=...)"
        )
        return f"{self.title} diverged: {what}; {fix}"


class TrainingInterrupted(RunInterrupted):
    """A run stopped by a signal; it resumes exactly with ``--resume``."""

    def __init__(self, task: Task, run_dir: Path, epoch: int, batch: int, saved: bool = True, final: bool = False):
        if final:
            where = "during the final evaluation (resuming runs it again)"
        elif saved:
            where = f"at epoch {epoch}, {task.unit} {batch} (checkpoint written)"
        else:
            where = (
                "at once by a second signal (nothing written; resuming repeats the batches since the last checkpoint)"
            )
        super().__init__(f"{task.title} interrupted {where}; resume with: {task.command} --resume {run_dir}")
        self.run_dir, self.epoch, self.batch, self.saved = run_dir, epoch, batch, saved


def run(
    task: Task,
    run_dir: str | Path,
    resume: bool = False,
    progress: bool = True,
    log=print,
    tensorboard: str = "",
    budget: int | None = None,
) -> dict:
    """Train (or continue) ``task`` in ``run_dir``; returns the summary written to ``summary.json``.
    ``tensorboard``: a folder that also gets each epoch's figures as TensorBoard scalars; ``budget``: stop (with a
    checkpoint, as a signal does) after that many batches.

    Raises :class:`TrainingInterrupted` on SIGINT/SIGTERM (after writing the checkpoint), :class:`UsageError`
    for a folder that cannot take this run, :class:`TiedlmError` for a run that diverged."""
    with Run(task, run_dir, resume, progress, log, tensorboard) as r:
        return r.fit(budget)


class Run:
    """A run of ``task`` in ``run_dir``, entered as a context (:func:`run` is the whole of it)::

        with Run(task, "runs/x") as r:   # guards, lock, machine, set-up, and on resume the checkpoint
            r.fit()                      # the loop, then the summary

    Entering refuses, with one line each, a folder of committed results (without ``resume``), one that cannot be
    written, one that already holds a run (without ``resume``) and a finished run (a resumed folder of another
    task is refused before, by its config's ``for_run``); holds the
    folder's lock (one process trains in a folder at a time; under torchrun rank 0 holds it for all);
    resolves threads, device, precision and torchrun's ranks from :meth:`Task.settings` (written back, so the saved
    config holds them); sets the task up and restores a resumed run's checkpoint (:attr:`progress`)."""

    def __init__(self, task: Task, run_dir: str | Path, resume=False, progress=True, log=print, tensorboard=""):
        self.task, self.path, self.resume, self.show, self.log = task, Path(run_dir), resume, progress, log
        self.files, self.tensorboard = RunDir(self.path), tensorboard

    def __enter__(self) -> Run:
        path, resume = self.path, self.resume
        if not resume:
            refuse_committed(path)  # committed results are never overwritten
        option = "--resume" if resume else "--out"
        with contextlib.ExitStack() as stack:
            if task_main_rank():  # the lock makes and checks the folder, and removes it again if left empty
                stack.enter_context(self.files.training_lock(option))
            else:
                ensure_writable_folder(path, option)  # one line, not an OSError mid-setup
            stack.callback(self._release)
            self.progress = self._start()
            self._stack = stack.pop_all()
        return self

    def __exit__(self, *exc) -> None:
        self._stack.__exit__(*exc)

    def _release(self) -> None:
        self.task.step_model = None  # DDP's reducer holds the process group: it goes first
        self.task.dist.shutdown()

    def _start(self) -> Progress:
        task, files, path = self.task, self.files, self.path
        if task_main_rank():  # under the lock: a write killed before its rename left these
            clear_temporaries(path)
        if not self.resume and files.checkpoint("last").exists():
            raise files.held_run_error(task.info)
        task.preflight()  # a setting that the component's own library refuses: one line, before the banner
        task.tensorboard = self._tensorboard_folder() if task_main_rank() else ""
        resolve_machine(task, self.log)
        if not task.is_main:  # one voice: rank 0 logs and shows progress
            self.show, self.log = False, (lambda *a, **k: None)
        task.show_progress = self.show
        self.log(
            f"tiedlm {__version__} | {task.title} | run {path} | device {task.device} | precision {task.precision} | "
            f"threads {task.threads}"
        )
        task.setup(path, self.resume, self.log)
        task.step_model = task.model
        if task.dist.enabled:
            from torch.nn.parallel import DistributedDataParallel

            task.step_model = DistributedDataParallel(task.model)  # broadcasts rank 0's weights
        p = self._restore() if self.resume else Progress()
        if not self.resume and task.is_main:
            write_text_atomic(files.metrics, "")
        task.dist.barrier()
        return p

    def _tensorboard_folder(self) -> str:
        """The run's own TensorBoard folder: ``--tensorboard DIR``'s subfolder named after the run folder, checked
        before any training and kept in the run (``tensorboard.txt``), so that a resumed run goes on logging there;
        "" for none."""
        record = self.path / "tensorboard.txt"
        if self.tensorboard:
            folder = Path(self.tensorboard).expanduser().resolve() / self.path.resolve().name
            ensure_writable_folder(folder, "--tensorboard")  # an existing file, a read-only folder: one line now
            write_text_atomic(record, f"{folder}\n")
            return str(folder)
        if self.resume and record.is_file():
            folder = Path(record.read_text(encoding="utf-8").strip())
            ensure_writable_folder(folder, "the run's TensorBoard folder (tensorboard.txt)")
            return str(folder)
        return ""

    def _restore(self) -> Progress:
        task, files, path = self.task, self.files, self.path
        tensors, meta = load_checkpoint(files.checkpoint("last"))
        if meta.get("schema") != SCHEMA:  # checked first: an older checkpoint's tensors are laid out otherwise
            raise older_checkpoint(path)
        restore_train_state(files.checkpoint("last"), tensors, meta, task.model, task.optimizer, task.dist.rank)
        p = Progress.from_meta(meta)
        task.load_extra_state(tensors, meta["task"], p)
        done, asked = p.epoch - 1, getattr(task.settings(), "epochs", task.epochs)
        if (p.epoch > task.epochs or task.finished_early()) and files.summary.exists():
            raise UsageError(f"{path} is finished: {task.finished(path, done, asked)}")
        if done > task.epochs:
            raise UsageError(
                f"{path} has trained {done} epochs already; train.epochs = {asked} cannot undo them: resume with "
                f"--set train.epochs=N (N >= {done})"
            )
        if task.is_main:  # metrics lines of epochs that the checkpoint has not completed go (they are trained again)
            kept = [r for r in files.read_metrics() if r["epoch"] < p.epoch]
            write_text_atomic(files.metrics, "".join(json.dumps(r) + "\n" for r in kept))
        self.log(f"resuming at epoch {p.epoch}, {task.unit} {p.batch}")
        return p

    def fit(self, budget: int | None = None) -> dict:
        """Train to the end (:func:`fit`); ``budget``: stop with a checkpoint after that many batches."""
        return fit(self.task, self.files, self.progress, self.show, self.log, budget)


def older_checkpoint(run_dir: Path) -> UsageError:
    """The refusal of a run folder whose checkpoint an older tiedlm wrote, with the migration that rewrites it."""
    return UsageError(
        f"{RunDir(run_dir).checkpoint('last')} is a checkpoint of an older tiedlm; rewrite the run folder with "
        f"`python tools/migrate_runs.py {run_dir}`, then resume"
    )


def task_main_rank() -> bool:
    """Whether this process is rank 0 (or the only one): the one that writes a run's files."""
    return int(os.environ.get("RANK", "0")) == 0


def resolve_machine(task: Task, log) -> None:
    """Threads, device, precision and torchrun's ranks of ``task``, from its :meth:`~Task.settings`, which get the
    resolved values (a resumed run keeps them)."""
    s = task.settings()
    task.threads = set_threads(getattr(s, "threads", 0), log)
    device = resolve_device(getattr(s, "device", "cpu"))
    task.dist = DistributedContext.from_environment(device.type)
    if task.dist.enabled and not task.distributed:
        raise UsageError(f"{task.title} trains in one process: run `{task.command}` without torchrun")
    task.device = task.dist.device(device)
    task.precision = resolve_precision(getattr(s, "precision", "fp32"), task.device)
    for name, value in (("threads", task.threads), ("device", task.device.type), ("precision", task.precision)):
        if hasattr(s, name):
            setattr(s, name, value)


def fit(task: Task, files: RunDir, p: Progress, progress: bool, log, budget: int | None = None) -> dict:
    """The loop: epochs from ``p`` on until the task's ``epochs`` (or its early end), then the summary with the
    best weights, written to ``summary.json``. ``budget``: stop (with a checkpoint, as a signal does) after that
    many batches. Raises the task's :meth:`Task.interrupted` error when stopped."""
    with StopRequest(budget) as stop:
        task.stop = stop
        while p.epoch <= task.epochs and not task.finished_early():
            try:
                _epoch(task, files, p, stop, progress, log)
            except StopRequested:  # between two batches: model, optimizer and position agree
                save(task, files, p)
                raise task.interrupted(files.path, p, saved=True) from None
            except KeyboardInterrupt:  # a second signal: stop now, write nothing
                raise task.interrupted(files.path, p, saved=False) from None
        try:
            if task.keeps_best:
                task.model.load_state_dict(best_weights(files))
            summary = {**task.summary(p, files.read_metrics()), **run_facts(task, p)}
        except (StopRequested, KeyboardInterrupt):  # the final evaluation is done again on resume
            raise task.interrupted(files.path, p, saved=False, final=True) from None
    if task.is_main:
        write_json_atomic(files.summary, summary)
    return summary


def _epoch(task: Task, files: RunDir, p: Progress, stop: StopRequest, progress: bool, log) -> None:
    """Epoch ``p.epoch`` from batch ``p.batch`` on, validation, the best weights, the metrics line and the
    checkpoint. Raises :class:`StopRequested` between two batches once a signal asked to stop."""
    epoch, checkpoint = p.epoch, files.checkpoint("last")
    task.start_epoch(p)
    batches = task.batches(epoch)
    start = time.perf_counter() - p.epoch_seconds
    with _bar(task, epoch, len(batches), p.batch, progress) as bar:
        warn = bar.write if progress else log
        skipped = NonFiniteSteps(
            task.max_nonfinite, lambda what: task.diverged(what, files.path, checkpoint.is_file()), warn
        )
        for b in range(p.batch, len(batches)):
            task.check_stop(stop)
            made, sums = task.train_step(batches[b], p)
            p.batch = b + 1
            if skipped(made, f"at epoch {epoch}, {task.unit} {b}"):  # raises after max_nonfinite in a row
                p.updates += 1
                for key, value in sums.items():
                    p.sums[key] = p.sums.get(key, 0) + value
            else:  # no update was made: the last good weights (and a carried state) stay
                p.sums["skipped"] = p.sums.get("skipped", 0) + 1
            p.epoch_seconds = time.perf_counter() - start
            bar.update(1)
            bar.set_postfix(task.running(p.sums), refresh=False)
            stop.step_done(stop_allowed=p.batch < len(batches))
    seconds = p.epoch_seconds
    score = task.validate()
    wall = time.perf_counter() - start
    if not math.isfinite(score):  # this epoch's weights are worth nothing: the last checkpoint stays
        what = f"validation score {score} after epoch {epoch}"
        raise TiedlmError(task.diverged(what, files.path, checkpoint.is_file()))
    if p.best_score is None or (score > p.best_score if task.higher_is_better else score < p.best_score):
        p.best_score, p.best_epoch = score, epoch
        if task.keeps_best and task.is_main:
            meta = {"epoch": p.best_epoch, "score": p.best_score}
            save_best_weights(files.checkpoint("best"), task.eval_weights().state_dict(), meta)
    task.after_validation(score, p)
    # where and how the epoch trained (a run may resume on another host: see runtime.host_record)
    record = {**task.epoch_record(p, seconds, wall, score), **machine_facts(task)}
    with signals_deferred():  # the metrics line and the checkpoint that counts it go together
        p.seconds += wall
        p.epoch, p.batch, p.sums, p.epoch_seconds = epoch + 1, 0, {}, 0.0
        if task.is_main:
            append_text(files.metrics, json.dumps(record) + "\n")
        save(task, files, p)
    log(task.epoch_line(record, seconds) + time_left(task.epochs - epoch, wall))
    if task.is_main and task.tensorboard:
        try:
            write_scalars(task.tensorboard, record)
        except OSError as exc:  # the folder went away or filled up: the run is worth more than its curves
            log(
                f"tiedlm: could not write TensorBoard scalars to {task.tensorboard} ({exc.strerror or exc}); "
                "training goes on"
            )


def run_facts(task: Task, p: Progress) -> dict:
    """What the harness adds to every task's summary: how the run was started, and where and how it trained."""
    s = task.settings()
    return {
        **({"best_epoch": p.best_epoch} if task.keeps_best else {}),
        "seed": s.seed,
        "command": task.invocation,
        "versions": {"tiedlm": __version__, "torch": torch.__version__, "python": platform.python_version()},
        **machine_facts(task),  # where the final evaluation ran; metrics.jsonl: each epoch's
    }


def machine_facts(task: Task) -> dict:
    """Where and how a task computes, in every metrics line and summary: device, precision, threads, and the
    host's record (:func:`~tiedlm.runtime.host_record`)."""
    device = {"device": str(task.device), "precision": task.precision, "threads": task.threads}
    return device | host_record(task.device)


def save(task: Task, files: RunDir, p: Progress) -> None:
    """The resumable checkpoint ``last`` (:func:`~tiedlm.train.checkpoint.save_train_state`: model, optimizer,
    RNG, ``p``, and the task's :meth:`~Task.extra_state`); under torchrun every rank's RNG state, written by rank 0."""
    rng = task.dist.gather_rng() if task.dist.enabled else None  # a collective: every rank calls it
    if task.is_main:
        tensors, meta = task.extra_state(p)
        save_train_state(files.checkpoint("last"), task.model, task.optimizer, p.meta(), tensors, meta, rng)


def write_scalars(folder: str, record: dict) -> None:
    """An epoch's numeric figures (its metrics line) as TensorBoard scalars at step ``epoch``, through PyTorch's
    ``SummaryWriter`` (the ``tensorboard`` package, ``pip install 'tiedlm[tensorboard]'``): one event file an
    epoch, so a stopped run leaves no writer open."""
    from torch.utils.tensorboard import SummaryWriter

    epoch = record["epoch"]
    with SummaryWriter(folder, filename_suffix=f".epoch{epoch}") as writer:
        for key, value in record.items():
            if key not in ("epoch", "threads") and isinstance(value, (int, float)) and not isinstance(value, bool):
                writer.add_scalar(key, value, epoch)


def time_left(epochs: int, epoch_seconds: float) -> str:
    """The epoch line's estimate of the rest of the run: the epochs left at this epoch's pace ("" at the end)."""
    return f" | ~{duration(epochs * epoch_seconds)} left" if epochs > 0 else ""


def _bar(task: Task, epoch: int, total: int, done: int, progress: bool):
    """The epoch's progress bar over its batches (a slow refresh where stderr is a log file, not a terminal)."""
    from tqdm import tqdm

    return tqdm(
        total=total,
        initial=done,
        desc=f"{task.title.split()[0]} epoch {epoch}/{task.epochs}",
        unit=task.unit,
        disable=not progress,
        leave=False,
        dynamic_ncols=True,
        mininterval=0.5 if sys.stderr.isatty() else 30,
    )


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
