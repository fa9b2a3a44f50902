"""The language model's run: SGD, lr decay per epoch, global-norm clipping (Inan et al. 2017, §6.1 / App. A),
and for the AWD-LSTM (Merity et al. 2017): weight decay, AR/TAR, variable-length BPTT windows and
NT-ASGD — plain SGD until validation stops improving for ``nonmono`` epochs, then averaged SGD (the
average of the iterates, kept by ``torch.optim.swa_utils.AveragedModel``, is what gets validated and
saved) to ``train.epochs`` or, with ``stop_on_stall``, until the average stalls by the same test, followed by an
optional finetune stage that restarts the averaging from the best weights.

A run directory (its layout: :class:`tiedlm.run_dir.RunDir`) holds ``config.toml``, ``vocab.txt``, ``metrics.jsonl``,
``checkpoints/{last,best}.safetensors`` and, when training ends, ``summary.json``.
``last`` is written at every epoch end and on interruption (Ctrl-C), with the position inside
the epoch, the hidden state, the RNG state and the running sums, so that a resumed run
reproduces an uninterrupted one exactly.

The loop itself is every task's (:func:`tiedlm.train.loop.fit`: epochs, windows, stop and resume, non-finite
steps, validation, best, metrics, summary); :class:`Trainer` is the language model's task in it. Under
``torchrun`` the same loop trains data-parallel (see :mod:`tiedlm.train.distributed`). On a GPU the step of every
window is replayed from a CUDA graph where the run allows it (:mod:`tiedlm.train.cuda_graph`);
:meth:`Trainer._eager_step` is the same step op by op.
"""

from __future__ import annotations

import contextlib
import copy
import json
import math
import os
import platform
import time
from pathlib import Path

import torch

from .. import __version__, native
from ..config import Config
from ..data import Vocabulary, batchify, load_corpus
from ..data.batching import fixed_window_lengths, scheduled_windows, variable_window_lengths
from ..data.corpus import check_split_sizes
from ..errors import UsageError
from ..evaluation import evaluate, perplexity
from ..losses import LanguageModelLoss
from ..models import LanguageModel
from ..models.encoders.state import detach_state
from ..paths import ensure_writable_folder, refuse_committed
from ..run_dir import RunDir, write_text_atomic
from ..runtime import host_record, resolve_device, resolve_precision, set_threads
from .checkpoint import (
    best_weights,
    carried_state,
    load_checkpoint,
    load_train_state,
    model_state,
    save_best_weights,
    save_train_state,
    state_tensors,
)
from .cuda_graph import GraphedSteps, unsupported_reason
from .distributed import DistributedContext
from .interrupts import RunInterrupted, StopRequested
from .loop import SCHEMA, Progress, Task, fit
from .nt_asgd import NTASGD, make_optimizer
from .step import update, window_loss


class Interrupted(RunInterrupted):
    """Training stopped early (SIGINT/SIGTERM or a window budget); the run can be resumed exactly."""

    def __init__(self, run_dir: Path, epoch: int, window: int, saved: bool = True, final: bool = False):
        if final:
            where = "during the final evaluation"
        elif saved:
            where = f"at epoch {epoch}, window {window} (checkpoint written)"
        else:
            where = "at once by a second signal (nothing written; resuming repeats the steps since the last checkpoint)"
        super().__init__(f"interrupted {where}; resume with: tiedlm train --resume {run_dir}")
        self.run_dir, self.epoch, self.window, self.saved = run_dir, epoch, window, saved


class Trainer(Task):
    """The language model's run: :func:`tiedlm.train.loop.fit` trains it epoch by epoch (one loop for every
    task); this class gives the loop its windows, its step (eager or from a CUDA graph), its validation, NT-ASGD's
    trigger and average, its checkpoints (``last`` and ``best``, in the format every earlier run has) and its
    summary. :func:`train` holds the run folder and sets it up."""

    title, unit, higher_is_better = "training", "window", False

    def __init__(self, cfg: Config, run_dir: Path, *, command: str = "", progress: bool = True, log=print):
        cfg = copy.deepcopy(cfg)  # resolved below; the caller's config is left as it was
        cfg.data = cfg.data.resolved()  # a folder is saved as an absolute path: the run works from anywhere
        self.cfg, self.run_dir, self.command, self.progress, self.log = cfg, Path(run_dir), command, progress, log
        t = cfg.train
        self.threads = set_threads(t.threads, log)
        device = resolve_device(t.device)
        self.dist = DistributedContext.from_environment(device.type)
        self.device = self.dist.device(device)
        if not self.dist.is_main:  # one voice: rank 0 logs and shows progress
            self.progress, self.log = False, (lambda *a, **k: None)
        self.precision = resolve_precision(t.precision, self.device)
        self.files = RunDir(self.run_dir)  # the run folder's layout
        # the saved config is the resolved one: a resumed or repeated run uses the same device, precision and thread
        # count (runtime.resumed_threads_note), however busy the machine is when it resumes
        cfg.train.precision, cfg.train.device, cfg.train.threads = self.precision, self.device.type, self.threads

    # ------------------------------------------------------------------ set-up
    def setup(self, resume: bool) -> None:
        cfg = self.cfg
        init = Path(cfg.train.init_from).expanduser() if cfg.train.init_from and not resume else None
        if resume:
            vocab = Vocabulary.load(self.files.vocab)
        elif init is not None:  # the source run's vocabulary, so that its weights line up word for word
            if not RunDir(init).vocab.is_file():
                raise UsageError(f"train.init_from = {str(init)!r}: no vocab.txt there; give a tiedlm run directory")
            vocab = Vocabulary.load(RunDir(init).vocab)
        else:
            vocab = None
        self.corpus = load_corpus(cfg.data.name, cfg.data.data_dir, vocab=vocab)
        # every split is checked before the first step: a bad valid.txt must not cost a training epoch
        check_split_sizes(
            self.corpus,
            {"train": cfg.train.batch_size, "valid": cfg.train.eval_batch_size, "test": cfg.train.eval_batch_size},
        )
        self.vocab = self.corpus.vocab
        _require_windows(cfg, self.corpus.train.numel(), self.corpus.folder)
        _require_memory(cfg, len(self.vocab), self.device)  # one line before allocating, not an out-of-memory kill
        if self.device.type == "cpu":  # build the C++ kernels (once per machine) before any clock starts
            native.available()
        torch.manual_seed(cfg.train.seed)
        self.model = LanguageModel(cfg.model, len(self.vocab)).to(self.device)
        if init is not None:
            self._init_from(init)
        self.step_model = self.model  # what the training step calls: the DDP wrapper under torchrun
        if self.dist.enabled:
            from torch.nn.parallel import DistributedDataParallel

            self.step_model = DistributedDataParallel(self.model)  # broadcasts rank 0's weights
        self.loss_fn = LanguageModelLoss.from_config(cfg.loss)
        t = cfg.train
        self.optimizer = make_optimizer(t.optimizer, self.model.parameters(), t.lr, t.weight_decay)
        # the iterate average of NT-ASGD, once triggered (inert for the other optimisers)
        self.nt_asgd = NTASGD(
            type(t.optimizer).averages_iterates,
            getattr(t.optimizer, "nonmono", 1),
            self.log,
            stop_on_stall=getattr(t.optimizer, "stop_on_stall", False),
        )
        self.validated_average = False  # whether the last validation measured NT-ASGD's average
        self.train_data = self.dist.shard(batchify(self.corpus.train, cfg.train.batch_size)).to(self.device)
        self.graphs = None  # the CUDA-graph steps (tiedlm.train.cuda_graph), one per window length, captured on use
        self.graph_reason = unsupported_reason(cfg, self.device, self.dist.enabled)
        # position (epoch, window, updates, running sums, best) and carried state; overwritten by a resumed run's
        self.position, self.state = Progress(), None
        if resume:
            self._restore(self.files.checkpoint("last"))
        elif self.dist.is_main:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            write_text_atomic(self.files.config, cfg.to_toml())
            self.vocab.save(self.files.vocab)
            write_text_atomic(self.files.metrics, "")
        self.dist.barrier()

    # ------------------------------------------------------------------ the loop
    def fit(self, budget_windows: int | None = None) -> dict:
        """Train until ``train.epochs`` (the loop of every task, :func:`tiedlm.train.loop.fit`; ``budget_windows``:
        stop with a checkpoint after that many windows); then evaluate the best checkpoint on valid and test."""
        cfg = self.cfg
        self.log(
            f"tiedlm {__version__} | run {self.run_dir} | device {self.device} | precision {self.precision} | "
            f"threads {self.threads} | config {self.files.config.name} in the run folder"
        )
        if self.position.epoch > 1 or self.position.batch > 0:
            self.log(f"resuming at epoch {self.position.epoch}, window {self.position.batch}")
        self.log(
            f"corpus {cfg.data.name}: |V| = {len(self.vocab)}, train {self.corpus.train.numel():,} tokens "
            f"({self.corpus.folder}) | parameters {self.model.parameter_counts()['total']:,}"
        )
        if self.device.type == "cuda":
            self.log(
                "CUDA graph: "
                + (
                    "the training step of full windows is captured once and replayed"
                    if self.graph_reason is None
                    else f"off ({self.graph_reason})"
                )
            )
        return fit(self, self.files, self.position, self.progress, self.log, budget_windows)

    # ------------------------------------------------------------------ NT-ASGD
    @property
    def eval_model(self) -> torch.nn.Module:
        """The weights that are validated and saved: the iterate average once NT-ASGD averages."""
        return self.nt_asgd.weights(self.model)

    def _start_finetune(self) -> None:
        """The finetune stage: restart from the best (averaged) weights with a fresh average and history."""
        tensors, _ = load_checkpoint(self.files.checkpoint("best"))
        self.model.load_state_dict(model_state(tensors))
        self.nt_asgd.start_finetune(self.model)
        self.log(
            f"finetune: epochs {self.epoch}-{self.epochs} from the "
            f"best weights (epoch {self.best_epoch}), averaging every step"
        )

    @property
    def main_epochs(self) -> int:
        """The epochs before the finetune stage: ``train.epochs``, or fewer where the average stalled
        (``train.optimizer.stop_on_stall``)."""
        return self.nt_asgd.main_end or self.cfg.train.epochs

    def window_lengths(self) -> list[int]:
        """This epoch's BPTT window lengths: fixed, or AWD-LSTM's random ones (seeded by seed and epoch)."""
        t, steps = self.cfg.train, self.train_data.size(0) - 1
        if t.variable_bptt:
            return variable_window_lengths(steps, t.bptt, seed=t.seed * 100_003 + self.epoch)
        return fixed_window_lengths(steps, t.bptt)

    # ------------------------------------------------------------------ the loop's hooks (tiedlm.train.loop)
    @property
    def epochs(self) -> int:
        return self.main_epochs + self.cfg.train.finetune_epochs  # the finetune stage's included

    @property
    def max_nonfinite(self) -> int:
        return self.cfg.train.max_nonfinite

    @property
    def is_main(self) -> bool:
        return self.dist.is_main

    def start_epoch(self, position: Progress) -> None:
        if position.epoch == self.main_epochs + 1 and position.batch == 0:
            self._start_finetune()
        self.lr = self.cfg.lr_at(position.epoch)
        self.model.train()
        if self.state is None:
            self.state = self.model.init_state(self.train_data.size(1))  # this rank's streams
        self.params = list(self.model.parameters())

    def batches(self, epoch: int) -> list:
        """This epoch's BPTT windows ``(k, x, y)`` over this rank's streams (:meth:`window_lengths`)."""
        return list(scheduled_windows(self.train_data, self.window_lengths()))

    def train_step(self, batch, position: Progress) -> tuple[bool, dict]:
        """One window: the graphed step where the run allows it, else the eager one; a made step carries the
        state on and updates NT-ASGD's average."""
        t = self.cfg.train
        _, x, y = batch
        lr = self.lr * min(1.0, (position.updates + 1) / t.warmup_steps) if t.warmup_steps else self.lr
        if t.variable_bptt:  # variable windows: lr scaled by length / bptt
            lr *= y.size(0) / t.bptt
        if self.graph_reason is None and (t.variable_bptt or y.size(0) == t.bptt):
            ce, aug, finite, new_state = self._graphed_step(x, y, lr)
        else:
            ce, aug, finite, new_state = self._eager_step(x, y, lr, self.params)
        if not finite:  # no update was made: the last good weights and state stay
            return False, {}
        self.nt_asgd.after_step(self.model)
        self.state, n = new_state, y.numel()
        return True, {"loss": ce.item() * n, "count": n, "aug": (aug.item() if aug is not None else 0.0) * n}

    def running(self, sums: dict) -> dict:
        ppl = perplexity(sums.get("loss", 0.0) / max(sums.get("count", 0), 1))
        return {"ppl": f"{ppl:.1f}", "lr": f"{self.lr:.3g}"}

    def check_stop(self, stop=None) -> None:
        """Raise :class:`StopRequested` once a signal (or the window budget) asked to stop; under torchrun the
        ranks decide together, so that all of them stop after the same window."""
        stop = stop or self.stop
        if self.dist.enabled:
            if not self.dist.all_true(not stop.requested):
                raise StopRequested
        else:
            stop.check()

    def validate(self) -> float:
        t = self.cfg.train
        self.validated_average = self.nt_asgd.averaging  # before after_validation can start the average
        self.valid = evaluate(
            self.eval_model, self.corpus.valid, t.eval_batch_size, t.bptt, self.precision, check=self.check_stop
        )
        return self.valid["ppl"]

    def finished_early(self) -> bool:
        return self.nt_asgd.stopped

    def keep_best(self, files: RunDir, position: Progress) -> None:
        self._save("best")  # the (averaged) weights

    def after_validation(self, score: float, position: Progress) -> None:
        finetuning = position.epoch > self.main_epochs
        self.nt_asgd.check(self.valid["loss"], position.epoch, finetuning=finetuning, model=self.model)

    def save(self, files: RunDir, position: Progress) -> None:
        if position.batch == 0:
            self.state = None  # an epoch starts its streams afresh
        self._save("last")

    def load_best(self, files: RunDir) -> None:
        self.finish_start = time.perf_counter()
        self.model.load_state_dict(best_weights(files))

    def interrupted(self, run_dir: Path, position: Progress, saved: bool, final: bool = False) -> RunInterrupted:
        return Interrupted(run_dir, position.epoch, 0 if final else position.batch, saved, final)

    def epoch_line(self, record: dict, seconds: float) -> str:
        stage = "" if record["stage"] == "sgd" else f" | {record['stage']}"
        return (
            f"epoch {record['epoch']:3d}{stage} | lr {record['lr']:.4f} | train ppl {record['train_ppl']:8.2f} | "
            f"valid ppl {record['valid_ppl']:8.2f} | {record['tokens_per_s']:,.0f} tok/s | "
            f"{record['epoch_time_s']:.0f} s"
        )

    # the position, as the attributes (and the checkpoint's keys) of every earlier version
    @property
    def epoch(self) -> int:
        return self.position.epoch

    @property
    def window(self) -> int:
        return self.position.batch

    @property
    def updates(self) -> int:
        return self.position.updates

    @property
    def best_valid(self) -> float:
        return math.inf if self.position.best_score is None else self.position.best_score

    @property
    def best_epoch(self) -> int:
        return self.position.best_epoch

    @property
    def elapsed(self) -> float:
        return self.position.seconds

    @property
    def sums(self) -> dict:
        """The epoch's running sums: cross-entropy and augmented loss summed over its tokens, tokens, training
        seconds and skipped steps."""
        s, n = self.position.sums, self.position.sums.get("count", 0)
        return {
            "ce": s.get("loss", 0.0),
            "aug": s.get("aug", 0.0),
            "tokens": n,
            "all_tokens": n,
            "time": self.position.epoch_seconds,
            "skipped": s.get("skipped", 0),
        }

    def diverged(self, what: str, run_dir: Path | None = None, checkpoint_written: bool | None = None) -> str:
        """The message of a run that diverged: what happened, the checkpoint to go back to, and the fix."""
        last = self.files.checkpoint("last")
        if last.is_file():
            where = (
                f"the last good checkpoint is {last}; lower train.lr or train.clip and resume from it with "
                f"--resume {self.run_dir} --set train.lr=..."
            )
        else:
            where = (
                f"no checkpoint was written yet; start a new run with a lower train.lr (now "
                f"{self.cfg.train.lr:g}) or train.clip (--set train.lr=...)"
            )
        return f"training diverged: {what}; {where}"

    def _eager_step(self, x, y, lr: float, params):
        """Forward, loss, backward, clipping and the optimizer's update, op by op; returns
        ``(ce, aug, finite, new_state)``, with no update made when the loss or gradient is not finite."""
        t, ls = self.cfg.train, self.cfg.loss
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        loss, ce, aug, new_state = window_loss(
            self.model,
            self.loss_fn,
            x,
            y,
            detach_state(self.state),
            self.precision,
            ar=ls.ar,
            tar=ls.tar,
            time_scale=y.size(0) if t.loss_reduction == "sum_over_time" else 1.0,
            forward=self.step_model,
        )
        finite = update(loss, params, self.optimizer, t.clip, self.dist.all_true)
        return ce, aug, finite, new_state

    @property
    def graphed(self):
        """The first captured CUDA-graph step, or None while every step has run eagerly."""
        return next(iter(self.graphs.by_length.values()), None) if self.graphs is not None else None

    def _graphed_step(self, x, y, lr: float):
        """The same step replayed from a CUDA graph (:mod:`tiedlm.train.cuda_graph`): one graph per window length
        (fixed windows: one; the AWD-LSTM's variable windows: one per length met), each captured on first use."""
        if self.graphs is None:
            self.graphs = GraphedSteps(self.model, self.loss_fn, self.cfg, self.precision)
        return self.graphs.step(x, y, self.state, lr)

    # ------------------------------------------------------------------ end of training
    def summary(self, position: Progress, history: list[dict]) -> dict:
        """Valid and test perplexity of the best weights (loaded by :meth:`load_best`), and the run's facts."""
        t = self.cfg.train
        check = self.check_stop
        valid = evaluate(self.model, self.corpus.valid, t.eval_batch_size, t.bptt, self.precision, check=check)
        # test as the papers measure it (Zaremba et al.'s and Merity et al.'s code): one stream, state carried,
        # every token scored; and as validation is measured (eval_batch_size streams, each started cold)
        test = evaluate(self.model, self.corpus.test, 1, t.bptt, self.precision, check=check)
        test_streams = evaluate(self.model, self.corpus.test, t.eval_batch_size, t.bptt, self.precision, check=check)
        records = history
        train_time = sum(r["epoch_time_s"] for r in records)
        train_tokens = sum(r["train_tokens"] for r in records)
        summary = {
            "valid_ppl": valid["ppl"],
            "test_ppl": test["ppl"],
            "best_epoch": self.best_epoch,
            "test_protocol": "batch 1: the test split read as one stream (the papers' protocol)",
            "test_ppl_streams": test_streams["ppl"],
            "valid_tokens": valid["tokens"],
            "test_tokens": test["tokens"],
            "epochs": len(records),
            "parameters": self.model.parameter_counts(),
            "wall_time_s": round(self.elapsed + time.perf_counter() - self.finish_start, 1),
            "train_time_s": round(train_time, 1),
            "tokens_per_s": round(train_tokens / train_time, 1) if train_time else None,
            "command": self.command,
            "seed": t.seed,
            "preset_data": self.cfg.data.name,
            "device": str(self.device),
            "precision": self.precision,
            "threads": self.threads,
            "eval_batch_size": t.eval_batch_size,
            "versions": {"tiedlm": __version__, "torch": torch.__version__, "python": platform.python_version()},
            **host_record(self.device),  # where the final evaluation ran; metrics.jsonl: each epoch's
        }
        if self.dist.enabled:
            summary["distributed"] = {
                "world_size": self.dist.world_size,
                "global_batch_size": t.batch_size,
                "max_parameter_spread": self.dist.max_parameter_spread(self.model),
            }
        self.log(
            f"best epoch {self.best_epoch}: valid ppl {valid['ppl']:.2f} | test ppl {test['ppl']:.2f} | "
            f"wall time {summary['wall_time_s'] / 60:.1f} min"
        )
        return summary

    # ------------------------------------------------------------------ checkpoints
    def epoch_record(self, position: Progress, seconds: float, wall: float, score: float) -> dict:
        s = self.sums
        return {
            "epoch": position.epoch,
            "lr": self.lr,
            "train_ppl": perplexity(s["ce"] / max(s["tokens"], 1)),
            "train_aug": s["aug"] / max(s["tokens"], 1) if self.cfg.loss.augmented else None,
            "valid_ppl": score,
            "train_tokens": int(s["tokens"]),
            "skipped_steps": int(s["skipped"]),
            "tokens_per_s": s["tokens"] / seconds if seconds else 0.0,
            "epoch_time_s": seconds,
            "wall_time_s": position.seconds + wall,
            "stage": self.stage(position.epoch),
        }

    def stage(self, epoch: int) -> str:
        """What epoch ``epoch``'s validation measured: ``sgd`` (the iterate itself), ``averaged`` (NT-ASGD's
        average of the iterates since its trigger, Merity et al. 2017 Alg. 1) or ``finetune`` (the finetune
        stage's fresh average, restarted from the best weights)."""
        if epoch > self.main_epochs:
            return "finetune"
        return "averaged" if self.validated_average else "sgd"

    def _save(self, which: str) -> None:
        """The ``last`` checkpoint (the one schema of :func:`~tiedlm.train.checkpoint.save_train_state`, with
        NT-ASGD's average, the carried state and the config) or the ``best`` weights (the averaged ones once
        NT-ASGD averages)."""
        rng_states = self.dist.gather_rng() if which == "last" else None  # a collective: every rank calls it
        if not self.dist.is_main:
            return
        facts = {"vocab_size": len(self.vocab), "config": self.cfg.to_dict()}
        if which == "best":
            meta = {"epoch": self.best_epoch, "best_valid": self.best_valid, **facts}
            save_best_weights(self.files.checkpoint("best"), self.eval_model.state_dict(), meta)
            return
        extra = {**self.nt_asgd.tensors(), **state_tensors(self.state)}  # cloned: initial states share memory
        save_train_state(
            self.files.checkpoint("last"),
            self.model,
            self.optimizer,
            self.position.meta(),
            extra,
            {**self.nt_asgd.meta(), **facts},  # valid_history, stopped
            rng_states if self.dist.enabled else None,
        )

    def _init_from(self, run_dir: Path) -> None:
        """Load another run's final weights (its last checkpoint) into the fresh model.

        Inan et al. (2017) re-train their small PTB models from their final weights (arXiv footnote 4, ICLR 5).
        """
        tensors, meta = load_checkpoint(RunDir(run_dir).checkpoint("last"))
        try:
            self.model.load_state_dict(model_state(tensors))
        except RuntimeError as exc:
            first = str(exc).strip().splitlines()[1].strip() if "\n" in str(exc) else str(exc)
            raise UsageError(
                f"train.init_from = {str(run_dir)!r}: its weights do not fit this model's architecture "
                f"({first}); use the same model.* settings as that run"
            ) from None
        at = _position(meta)
        done = f"{at.epoch - 1} epochs" + (f" and {at.batch} windows" if at.batch else "")
        self.log(f"initialised from the weights of {run_dir} after {done}; lr schedule starts afresh")

    def _restore(self, path: Path) -> None:
        tensors, meta = load_train_state(path, self.model, self.optimizer, self.dist.rank)
        self.position = _position(meta)
        self.nt_asgd.restore(tensors, meta["task"] if meta.get("schema") == SCHEMA else meta, self.model)
        self.state = carried_state(tensors, self.device)
        # drop metric lines of epochs that the checkpoint has not completed
        records = [r for r in read_metrics(self.run_dir) if r["epoch"] < self.epoch]
        if self.nt_asgd.averaging and self.nt_asgd.averaged_from is None and all("stage" in r for r in records):
            # a checkpoint from before averaged_from was kept: the average's first entry follows the SGD epochs
            self.nt_asgd.averaged_from = sum(r["stage"] == "sgd" for r in records)
        if self.dist.is_main:
            write_text_atomic(self.files.metrics, "".join(json.dumps(r) + "\n" for r in records))


def _require_windows(cfg: Config, tokens: int, folder: Path) -> None:
    """Each training stream must hold more than one window: ``train.bptt`` longer than a stream trained one short
    window an epoch and said nothing."""
    per_stream = tokens // cfg.train.batch_size
    if per_stream <= cfg.train.bptt:
        raise UsageError(
            f"train.bptt = {cfg.train.bptt} is longer than each of the {cfg.train.batch_size} training streams of "
            f"{folder / 'train.txt'} ({per_stream} tokens each); lower train.bptt or train.batch_size"
        )


def _require_memory(cfg: Config, vocab_size: int, device: torch.device) -> None:
    """A model whose weights, gradients and optimiser state cannot fit in the device's free memory is refused in
    one line before it is allocated (its size counted on the meta device, which allocates nothing)."""
    try:
        with torch.device("meta"):
            params = sum(p.numel() for p in LanguageModel(cfg.model, vocab_size).parameters())
    except (RuntimeError, OverflowError):  # a weight larger than any tensor can be
        raise UsageError(
            "the model's sizes give a weight larger than a tensor can hold; choose smaller model sizes"
        ) from None
    need = params * 4 * 4  # fp32 weights, gradients, and up to two optimiser (or NT-ASGD average) tensors each
    if device.type == "cuda":
        free = torch.cuda.mem_get_info(device)[0]
    else:
        try:
            free = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):
            return
    if need > free:
        raise UsageError(
            f"the model has {params:,} parameters: its weights, gradients and optimiser state need about "
            f"{need / 2**30:,.1f} GiB, more than the {free / 2**30:,.1f} GiB free on the {device.type}; choose "
            "smaller model sizes"
        )


def _position(meta: dict) -> Progress:
    """The position saved in a ``last`` checkpoint's metadata (the one schema's, or the language model's own
    names from before it)."""
    if meta.get("schema") == SCHEMA:
        return Progress.from_meta(meta)
    sums = meta["sums"]
    return Progress(
        epoch=meta["epoch"],
        batch=meta["window"],
        updates=meta.get("updates", 0),
        sums={"loss": sums["ce"], "count": sums["tokens"], "aug": sums["aug"], "skipped": sums["skipped"]},
        epoch_seconds=sums["time"],
        seconds=meta["elapsed"],
        best_score=None if math.isinf(meta["best_valid"]) else meta["best_valid"],
        best_epoch=meta["best_epoch"],
    )


def _refuse_finished(trainer: Trainer, out_dir: Path) -> None:
    """A resume with nothing to train is a one-line error that says how to train on: raise ``train.epochs``, or,
    for a run that NT-ASGD's non-monotone stops ended, start a new run from its weights."""
    done, cfg, nt = trainer.epoch - 1, trainer.cfg, trainer.nt_asgd  # epochs trained, finetune included
    finished = trainer.epoch > trainer.epochs or nt.stopped
    if finished and RunDir(out_dir).summary.exists():
        if nt.stopped or nt.main_end:
            raise UsageError(
                f"{out_dir} is finished: NT-ASGD's non-monotone stop ended it after {done} epochs; to train on from "
                f"its weights start a new run with --set train.init_from={out_dir}"
            )
        asked = f" (train.epochs = {cfg.train.epochs} asks for no more)" if done > trainer.epochs else ""
        raise UsageError(
            f"{out_dir} is finished: it trained {done} epochs{asked}; to train longer resume with "
            f"--set train.epochs=N (N > {done})"
        )
    if done > trainer.epochs:
        raise UsageError(
            f"{out_dir} has trained {done} epochs already; train.epochs = {cfg.train.epochs} cannot undo "
            f"them: resume with --set train.epochs=N (N >= {done})"
        )


def read_metrics(run_dir: Path) -> list[dict]:
    return RunDir(run_dir).read_metrics()


def train(
    cfg: Config,
    out_dir: Path,
    *,
    resume: bool = False,
    command: str = "",
    progress: bool = True,
    log=print,
    budget_windows: int | None = None,
    tensorboard: str = "",
) -> dict:
    """Train (or resume) a run in ``out_dir``; returns the summary. Raises :class:`Interrupted` on Ctrl-C.
    ``tensorboard``: a folder that also gets each epoch's figures as TensorBoard scalars."""
    out_dir = Path(out_dir)
    if not resume:
        refuse_committed(out_dir)
    created = not out_dir.exists()
    ensure_writable_folder(out_dir, "--resume" if resume else "--out")
    # one process trains in a folder at a time (and a folder made for a run that wrote nothing goes again);
    # under torchrun, rank 0 holds it for all ranks
    rank0 = int(os.environ.get("RANK", "0")) == 0
    with RunDir(out_dir).training_lock(created) if rank0 else contextlib.nullcontext():
        if not resume and RunDir(out_dir).checkpoint("last").exists():
            raise UsageError(
                f"{out_dir} already holds a run; resume it with --resume {out_dir} or choose another --out"
            )
        trainer = Trainer(cfg, out_dir, command=command, progress=progress, log=log)
        trainer.tensorboard = tensorboard
        try:
            trainer.setup(resume)  # bad data or settings: the lock leaves no empty run folder behind
            if resume:
                _refuse_finished(trainer, out_dir)
            return trainer.fit(budget_windows)
        finally:
            trainer.step_model = None  # release DDP (its reducer holds the process group) before the group goes
            trainer.dist.shutdown()
