"""The training loop: SGD, lr decay per epoch, global-norm clipping (Inan et al. 2017, §6.1 / App. A),
and for the AWD-LSTM (Merity et al. 2017): weight decay, AR/TAR, variable-length BPTT windows and
NT-ASGD — plain SGD until validation stops improving for ``nonmono`` epochs, then averaged SGD (the
average of the iterates, kept by ``torch.optim.swa_utils.AveragedModel``, is what gets validated and
saved), followed by an optional finetune stage that restarts the averaging from the best weights.

A run directory (its layout: :class:`tiedlm.run_dir.RunDir`) holds ``config.toml``, ``vocab.txt``, ``metrics.jsonl``,
``checkpoints/{last,best}.safetensors`` and, when training ends, ``summary.json``.
``last`` is written at every epoch end and on interruption (Ctrl-C), with the position inside
the epoch, the hidden state, the RNG state and the running sums, so that a resumed run
reproduces an uninterrupted one exactly.

Under ``torchrun`` the same loop trains data-parallel (see :mod:`tiedlm.train.distributed`). On a GPU the
step of every full-length window is replayed from a CUDA graph where the run allows it
(:mod:`tiedlm.train.cuda_graph`); :meth:`Trainer._eager_step` is the same step op by op.
"""

from __future__ import annotations

import contextlib
import copy
import json
import math
import os
import platform
import sys
import time
from pathlib import Path

import torch

from .. import __version__, native
from ..config import Config
from ..data import Vocabulary, batchify, load_corpus
from ..data.batching import fixed_window_lengths, scheduled_windows, variable_window_lengths
from ..data.corpus import check_split_sizes
from ..errors import TiedlmError, UsageError
from ..evaluation import evaluate, perplexity
from ..losses import LanguageModelLoss
from ..models import LanguageModel
from ..models.encoders.state import detach_state
from ..paths import ensure_writable_folder, refuse_committed
from ..run_dir import RunDir, write_json_atomic, write_text_atomic
from ..runtime import resolve_device, resolve_precision, set_threads
from .checkpoint import (
    load_checkpoint,
    load_optimizer,
    model_state,
    optimizer_tensors,
    save_checkpoint,
)
from .cuda_graph import GraphedSteps, unsupported_reason
from .distributed import DistributedContext
from .interrupts import RunInterrupted, StopRequest, StopRequested
from .loop import signals_deferred
from .nt_asgd import NTASGD, make_optimizer
from .step import NonFiniteSteps, update, window_loss


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


class Trainer:
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
        # the saved config is the resolved one: a resumed or repeated run uses the same device and precision
        cfg.train.precision, cfg.train.device = self.precision, self.device.type

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
        self.updates = 0  # optimizer steps taken (linear warm-up)
        # the iterate average of NT-ASGD, once triggered (inert for the other optimisers)
        self.nt_asgd = NTASGD(type(t.optimizer).averages_iterates, getattr(t.optimizer, "nonmono", 1), self.log)
        self.train_data = self.dist.shard(batchify(self.corpus.train, cfg.train.batch_size)).to(self.device)
        self.graphs = None  # the CUDA-graph steps (tiedlm.train.cuda_graph), one per window length, captured on use
        self.graph_reason = unsupported_reason(cfg, self.device, self.dist.enabled)
        # position and running state; overwritten by a resumed checkpoint
        self.epoch, self.window, self.best_valid, self.best_epoch, self.elapsed = 1, 0, math.inf, 0, 0.0
        self.state, self.sums = None, _zero_sums()
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
        """Train until ``train.epochs``; then evaluate the best checkpoint on valid and test."""
        cfg, t = self.cfg, self.cfg.train
        self.log(f"tiedlm {__version__} | device {self.device} | precision {self.precision} | threads {self.threads}")
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
        with StopRequest(budget_windows) as self.stop:
            while self.epoch <= t.total_epochs and not self.nt_asgd.stopped:
                try:
                    self._run_epoch()
                except StopRequested:  # between two steps, or between two validation windows
                    self._save("last")  # one consistent state: every rank stops at the same window
                    raise Interrupted(self.run_dir, self.epoch, self.window) from None
                except KeyboardInterrupt:  # a second signal: stopped at once, nothing written
                    raise Interrupted(self.run_dir, self.epoch, self.window, saved=False) from None
            try:
                return self.finish()
            except (StopRequested, KeyboardInterrupt):  # the final evaluation is redone on resume
                raise Interrupted(self.run_dir, self.epoch, 0, saved=False, final=True) from None

    def _run_epoch(self) -> None:
        """Train one epoch, validate, keep the best checkpoint, log, and advance (saving `last`)."""
        t = self.cfg.train
        if self.epoch == t.epochs + 1 and self.window == 0:
            self._start_finetune()
        lr = self.cfg.lr_at(self.epoch)
        self._train_epoch(lr)
        t0 = time.perf_counter()
        valid = evaluate(
            self.eval_model, self.corpus.valid, t.eval_batch_size, t.bptt, self.precision, check=self._check_stop
        )
        epoch_wall = self.sums["time"] + time.perf_counter() - t0
        if not math.isfinite(valid["ppl"]):  # diverged: this epoch's weights are worth nothing, keep the last ones
            raise TiedlmError(self._diverged(f"validation perplexity is {valid['ppl']} after epoch {self.epoch}"))
        if valid["ppl"] < self.best_valid:
            self.best_valid, self.best_epoch = valid["ppl"], self.epoch
            self._save("best")
        self.nt_asgd.check(valid["loss"], self.epoch, finetuning=self.epoch > t.epochs, model=self.model)
        record = self._epoch_record(lr, valid["ppl"], self.elapsed + epoch_wall)
        with signals_deferred():  # the metrics line and the `last` checkpoint that counts it go together
            if self.dist.is_main:
                with open(self.files.metrics, "a") as f:
                    f.write(json.dumps(record) + "\n")
            self.epoch, self.window, self.state, self.sums, self.elapsed = (
                self.epoch + 1,
                0,
                None,
                _zero_sums(),
                self.elapsed + epoch_wall,
            )
            self._save("last")
        stage = " | averaged" if self.nt_asgd.averaging else ""
        self.log(
            f"epoch {record['epoch']:3d}{stage} | lr {lr:.4f} | train ppl {record['train_ppl']:8.2f} | valid ppl "
            f"{valid['ppl']:8.2f} | {record['tokens_per_s']:,.0f} tok/s | {record['epoch_time_s']:.0f} s"
        )

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
            f"finetune: epochs {self.epoch}-{self.cfg.train.total_epochs} from the "
            f"best weights (epoch {self.best_epoch}), averaging every step"
        )

    def window_lengths(self) -> list[int]:
        """This epoch's BPTT window lengths: fixed, or AWD-LSTM's random ones (seeded by seed and epoch)."""
        t, steps = self.cfg.train, self.train_data.size(0) - 1
        if t.variable_bptt:
            return variable_window_lengths(steps, t.bptt, seed=t.seed * 100_003 + self.epoch)
        return fixed_window_lengths(steps, t.bptt)

    # ------------------------------------------------------------------ one epoch
    def _train_epoch(self, lr: float) -> None:
        from tqdm import tqdm

        t = self.cfg.train
        self.model.train()
        lengths = self.window_lengths()
        total = len(lengths)
        if self.state is None:
            self.state = self.model.init_state(self.train_data.size(1))  # this rank's streams
        params = [p for p in self.model.parameters()]
        bar = tqdm(
            total=self.train_data[1:].numel(),
            initial=int(self.sums["all_tokens"]),
            unit="tok",
            unit_scale=True,
            desc=f"epoch {self.epoch}/{t.total_epochs}",
            disable=not self.progress,
            dynamic_ncols=True,
            mininterval=0.5 if sys.stderr.isatty() else 30,
        )
        skipped = NonFiniteSteps(t.max_nonfinite, self._diverged, bar.write)
        start = time.perf_counter() - self.sums["time"]
        with bar:
            for k, x, y in scheduled_windows(self.train_data, lengths, start=self.window):
                self._check_stop()  # between two steps: the state below is always one consistent whole
                step_lr = lr * min(1.0, (self.updates + 1) / t.warmup_steps) if t.warmup_steps else lr
                if t.variable_bptt:  # variable windows: lr scaled by length / bptt
                    step_lr *= y.size(0) / t.bptt
                if self.graph_reason is None and (t.variable_bptt or y.size(0) == t.bptt):
                    ce, aug, finite, new_state = self._graphed_step(x, y, step_lr)
                else:
                    ce, aug, finite, new_state = self._eager_step(x, y, step_lr, params)
                if not skipped(finite, f"at epoch {self.epoch} window {k}"):  # raises after max_nonfinite in a row
                    self.sums["skipped"] += 1  # no update was made: the last good weights and state stay
                    self.window = k + 1
                    continue
                self.updates += 1
                self.nt_asgd.after_step(self.model)
                self.state, self.window = new_state, k + 1
                n = y.numel()
                self.sums["ce"] += ce.item() * n
                self.sums["aug"] += (aug.item() if aug is not None else 0.0) * n
                self.sums["tokens"] += n
                self.sums["all_tokens"] += n
                self.sums["time"] = time.perf_counter() - start
                bar.update(n)
                bar.set_postfix(
                    ppl=f"{perplexity(self.sums['ce'] / self.sums['tokens']):.1f}", lr=f"{lr:.3g}", refresh=False
                )
                self.stop.step_done(stop_allowed=self.window < total)

    def _check_stop(self) -> None:
        """Raise :class:`StopRequested` once a signal (or the window budget) asked to stop; under torchrun the
        ranks decide together, so that all of them stop after the same window."""
        if self.dist.enabled:
            if not self.dist.all_true(not self.stop.requested):
                raise StopRequested
        else:
            self.stop.check()

    def _diverged(self, what: str) -> str:
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
    def finish(self) -> dict:
        t = self.cfg.train
        self.finish_start = time.perf_counter()
        tensors, _ = load_checkpoint(self.files.checkpoint("best"))
        self.model.load_state_dict(model_state(tensors))
        check = self._check_stop
        valid = evaluate(self.model, self.corpus.valid, t.eval_batch_size, t.bptt, self.precision, check=check)
        # test as the papers measure it (Zaremba et al.'s and Merity et al.'s code): one stream, state carried,
        # every token scored; and as validation is measured (eval_batch_size streams, each started cold)
        test = evaluate(self.model, self.corpus.test, 1, t.bptt, self.precision, check=check)
        test_streams = evaluate(self.model, self.corpus.test, t.eval_batch_size, t.bptt, self.precision, check=check)
        records = read_metrics(self.run_dir)
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
            "machine": platform.processor() or platform.machine(),
        }
        if self.dist.enabled:
            summary["distributed"] = {
                "world_size": self.dist.world_size,
                "global_batch_size": t.batch_size,
                "max_parameter_spread": self.dist.max_parameter_spread(self.model),
            }
        if self.dist.is_main:
            write_json_atomic(self.files.summary, summary)
        self.log(
            f"best epoch {self.best_epoch}: valid ppl {valid['ppl']:.2f} | test ppl {test['ppl']:.2f} | "
            f"wall time {summary['wall_time_s'] / 60:.1f} min"
        )
        return summary

    # ------------------------------------------------------------------ checkpoints
    def _epoch_record(self, lr: float, valid_ppl: float, wall_time: float) -> dict:
        s = self.sums
        return {
            "epoch": self.epoch,
            "lr": lr,
            "train_ppl": perplexity(s["ce"] / max(s["tokens"], 1)),
            "train_aug": s["aug"] / max(s["tokens"], 1) if self.cfg.loss.augmented else None,
            "valid_ppl": valid_ppl,
            "train_tokens": int(s["tokens"]),
            "skipped_steps": int(s["skipped"]),
            "tokens_per_s": s["tokens"] / s["time"] if s["time"] else 0.0,
            "epoch_time_s": s["time"],
            "wall_time_s": wall_time,
        }

    def _save(self, which: str) -> None:
        rng_states = self.dist.gather_rng()  # a collective: every rank comes here at the same points
        if not self.dist.is_main:
            return
        weights = self.eval_model if which == "best" else self.model
        tensors = {f"model.{k}": v for k, v in weights.state_dict().items()}
        if which == "last":
            tensors.update(self.nt_asgd.tensors())
        tensors["rng.torch"] = torch.get_rng_state()
        if self.dist.enabled:
            tensors.update({f"rng.torch.rank{r}": state for r, state in enumerate(rng_states)})
        if self.device.type == "cuda":
            tensors["rng.cuda"] = torch.cuda.get_rng_state(self.device)
        if which == "last" and self.state is not None:
            for i, layer_state in enumerate(self.state):
                for j, t in enumerate(layer_state):
                    tensors[f"state.{i}.{j}"] = t.clone()  # initial states share memory
        groups = None
        if which == "last" and self.optimizer.state:  # adam's moments (SGD keeps none)
            opt_tensors, groups = optimizer_tensors(self.optimizer)
            tensors.update(opt_tensors)
        meta = {
            "updates": self.updates,
            "param_groups": groups,
            "which": which,
            "epoch": self.epoch,
            "window": self.window,
            "best_valid": self.best_valid,
            "best_epoch": self.best_epoch,
            "elapsed": self.elapsed,
            "sums": self.sums,  # elapsed: finished epochs
            **self.nt_asgd.meta(),  # valid_history, stopped
            "vocab_size": len(self.vocab),
            "config": self.cfg.to_dict(),
        }
        save_checkpoint(self.files.checkpoint(which), tensors, meta)

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
        done = f"{meta['epoch'] - 1} epochs" + (f" and {meta['window']} windows" if meta["window"] else "")
        self.log(f"initialised from the weights of {run_dir} after {done}; lr schedule starts afresh")

    def _restore(self, path: Path) -> None:
        tensors, meta = load_checkpoint(path)
        self.model.load_state_dict(model_state(tensors))
        torch.set_rng_state(tensors.get(f"rng.torch.rank{self.dist.rank}", tensors["rng.torch"]))
        if "rng.cuda" in tensors and self.device.type == "cuda":
            torch.cuda.set_rng_state(tensors["rng.cuda"], self.device)
        self.epoch, self.window = meta["epoch"], meta["window"]
        self.best_valid, self.best_epoch = meta["best_valid"], meta["best_epoch"]
        self.elapsed, self.sums = meta["elapsed"], meta["sums"]
        self.nt_asgd.restore(tensors, meta, self.model)
        self.updates = meta.get("updates", 0)
        if meta.get("param_groups"):
            load_optimizer(self.optimizer, tensors, meta["param_groups"])
        self.state = _restore_state(tensors, self.device)
        # drop metric lines of epochs that the checkpoint has not completed
        records = [r for r in read_metrics(self.run_dir) if r["epoch"] < self.epoch]
        if self.dist.is_main:
            write_text_atomic(self.files.metrics, "".join(json.dumps(r) + "\n" for r in records))


def _restore_state(tensors: dict[str, torch.Tensor], device) -> list | None:
    """The encoder state saved as ``state.{layer}.{j}`` (``state.{layer}.h/.c`` in older checkpoints)."""
    layers: dict[int, dict[str, torch.Tensor]] = {}
    for name, t in tensors.items():
        if name.startswith("state."):
            _, i, j = name.split(".")
            layers.setdefault(int(i), {})[{"h": "0", "c": "1"}.get(j, j)] = t.to(device)
    if not layers:
        return None
    return [tuple(parts[j] for j in sorted(parts, key=int)) for _, parts in sorted(layers.items())]


def _zero_sums() -> dict:
    return {"ce": 0.0, "aug": 0.0, "tokens": 0, "all_tokens": 0, "time": 0.0, "skipped": 0}


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
) -> dict:
    """Train (or resume) a run in ``out_dir``; returns the summary. Raises :class:`Interrupted` on Ctrl-C."""
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
        try:
            trainer.setup(resume)  # bad data or settings: the lock leaves no empty run folder behind
            done = trainer.epoch - 1  # epochs the run has trained (finetune included)
            if (
                resume
                and (trainer.epoch > cfg.train.total_epochs or trainer.nt_asgd.stopped)
                and RunDir(out_dir).summary.exists()
            ):
                asked = (
                    f" (train.epochs = {cfg.train.epochs} asks for no more)" if done > cfg.train.total_epochs else ""
                )
                raise UsageError(
                    f"{out_dir} is finished: it trained {done} epochs{asked}; to train longer resume with "
                    f"--set train.epochs=N (N > {done})"
                )
            if resume and done > cfg.train.total_epochs:
                raise UsageError(
                    f"{out_dir} has trained {done} epochs already; train.epochs = {cfg.train.epochs} cannot undo "
                    f"them: resume with --set train.epochs=N (N >= {done})"
                )
            return trainer.fit(budget_windows)
        finally:
            trainer.step_model = None  # release DDP (its reducer holds the process group) before the group goes
            trainer.dist.shutdown()
