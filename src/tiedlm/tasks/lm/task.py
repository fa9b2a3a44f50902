"""The language model's task: SGD, lr decay per epoch, global-norm clipping (Inan et al. 2017, §6.1 / App. A),
and for the AWD-LSTM (Merity et al. 2017): weight decay, AR/TAR, variable-length BPTT windows and
NT-ASGD — plain SGD until validation stops improving for ``nonmono`` epochs, then averaged SGD (the
average of the iterates, kept by ``torch.optim.swa_utils.AveragedModel``, is what gets validated and
saved) to ``train.epochs`` or, with ``stop_on_stall``, until the average stalls by the same test, followed by an
optional finetune stage that restarts the averaging from the best weights.

Its run folder has every task's layout (:class:`tiedlm.run_dir.RunDir`); its ``last`` checkpoint adds the carried
state and NT-ASGD's average and history, so that a resumed run reproduces an uninterrupted one exactly.

The harness (:mod:`tiedlm.train.loop`) runs it as every task: ``run(LanguageModelTask(cfg), out)``; under
``torchrun`` it trains data-parallel (:mod:`tiedlm.train.distributed`). On a GPU the step of every window is
replayed from a CUDA graph where the run allows it (:mod:`.cuda_graph`); :meth:`LanguageModelTask._eager_step` is
the same step op by op.
"""

from __future__ import annotations

import copy
import os
import time
from pathlib import Path

import torch

from ... import native
from ...data import Vocabulary, batchify, load_corpus
from ...data.batching import fixed_window_lengths, scheduled_windows, variable_window_lengths
from ...data.corpus import CORPORA, check_split_sizes, resolve_corpus_dir
from ...errors import UsageError
from ...evaluation import evaluate, perplexity
from ...losses import LanguageModelLoss
from ...models import LanguageModel
from ...models.encoders.lstm_layer import pad_fused_lstms
from ...models.encoders.state import detach_state
from ...run_dir import RunDir, write_text_atomic
from ...train.checkpoint import carried_state, load_checkpoint, model_state, state_tensors
from ...train.loop import Progress, Task, older_checkpoint
from ...train.optimizers import make_optimizer
from ...train.step import scaled_update, update, window_loss
from ...train.wall_time import duration
from .config import Config
from .cuda_graph import GraphedSteps, unsupported_reason
from .nt_asgd import NTASGD


class LanguageModelTask(Task):
    """The language model's part of a run (:func:`tiedlm.train.loop.run` does the rest): its BPTT windows over
    the carried state, its step (eager or from a CUDA graph), its validation, NT-ASGD's trigger and average, its
    summary (valid and test perplexity of the best weights). ``command``: the command line it was started with
    (kept in the summary)."""

    unit, distributed = "window", True

    def __init__(self, cfg: Config, command: str = ""):
        cfg = copy.deepcopy(cfg)  # resolved by the run; the caller's config is left as it was
        cfg.data = cfg.data.resolved()  # a folder is saved as an absolute path: the run works from anywhere
        self.cfg, self.invocation, self.max_nonfinite = cfg, command, cfg.train.max_nonfinite
        self.state, self.validated_average, self.graphs = None, False, None

    # ------------------------------------------------------------------ set-up
    def preflight(self) -> None:
        """The model's components' own checks (a Hugging Face body's config as transformers reads it), and a folder
        of one's own text found with its three splits."""
        for part in ("encoder", "output"):
            getattr(self.cfg.model, part).preflight(f"model.{part}")
        if self.cfg.data.name not in CORPORA:
            resolve_corpus_dir(self.cfg.data.name, self.cfg.data.data_dir)

    def setup(self, run_dir: Path, resume: bool, log) -> None:
        cfg, self.run_dir, self.log = self.cfg, run_dir, log
        init = Path(cfg.train.init_from).expanduser() if cfg.train.init_from and not resume else None
        if resume:
            vocab = Vocabulary.load(RunDir(run_dir).vocab)
        elif init is not None:  # the source run's vocabulary, so that its weights line up word for word
            if not RunDir(init).vocab.is_file():
                raise UsageError(f"train.init_from = {str(init)!r}: no vocab.txt there; give a tiedlm run directory")
            vocab = Vocabulary.load(RunDir(init).vocab)
        else:
            vocab = None
        self.corpus = load_corpus(cfg.data.name, cfg.data.data_dir, vocab=vocab)
        # every split is checked before the first step: a bad valid.txt must not cost a training epoch
        t = cfg.train
        check_split_sizes(self.corpus, {"train": t.batch_size, "valid": t.eval_batch_size, "test": t.eval_batch_size})
        self.vocab = self.corpus.vocab
        _require_windows(cfg, self.corpus.train.numel(), self.corpus.folder)
        _require_memory(cfg, len(self.vocab), self.device)  # one line before allocating, not an out-of-memory kill
        if self.device.type == "cpu":  # build the C++ kernels (once per machine) before any clock starts
            native.available()
        torch.manual_seed(t.seed)
        self.model = LanguageModel(cfg.model, len(self.vocab)).to(self.device)
        pad_fused_lstms(self.model, t.lstm_pad_units, t.lstm_pad_batch)
        if init is not None:
            self._init_from(init)
        self.loss_fn = LanguageModelLoss.from_config(cfg.loss)
        self.optimizer = make_optimizer(t.optimizer, self.model.parameters(), t.lr, t.weight_decay)
        # fp16's dynamic loss scaling (train.step.scaled_update); its scale is kept in the checkpoint
        self.scaler = torch.amp.GradScaler(self.device.type) if self.precision == "fp16" else None
        # the iterate average of NT-ASGD, once triggered (inert for the other optimisers)
        opt = t.optimizer
        averages, nonmono = type(opt).averages_iterates, getattr(opt, "nonmono", 1)
        self.nt_asgd = NTASGD(averages, nonmono, log, stop_on_stall=getattr(opt, "stop_on_stall", False))
        self.train_data = self.dist.shard(batchify(self.corpus.train, t.batch_size)).to(self.device)
        self.graph_reason = unsupported_reason(cfg, self.device, self.dist.enabled)
        if not resume and self.is_main:
            run_dir.mkdir(parents=True, exist_ok=True)
            write_text_atomic(RunDir(run_dir).config, cfg.to_toml())
            self.vocab.save(RunDir(run_dir).vocab)
        log(
            f"corpus {cfg.data.name}: |V| = {len(self.vocab)}, train {self.corpus.train.numel():,} tokens "
            f"({self.corpus.folder}) | parameters {self.model.parameter_counts()['total']:,}"
        )
        if self.device.type == "cuda":
            how = "the training step of full windows is captured once and replayed"
            log(f"CUDA graph: {how if self.graph_reason is None else f'off ({self.graph_reason})'}")

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
        at = Progress.from_meta(meta)
        done = f"{at.epoch - 1} epochs" + (f" and {at.batch} windows" if at.batch else "")
        self.log(f"initialised from the weights of {run_dir} after {done}; lr schedule starts afresh")

    # ------------------------------------------------------------------ NT-ASGD
    @property
    def main_epochs(self) -> int:
        """The epochs before the finetune stage: ``train.epochs``, or fewer where the average stalled
        (``train.optimizer.stop_on_stall``)."""
        return self.nt_asgd.main_end or self.cfg.train.epochs

    @property
    def epochs(self) -> int:
        return self.main_epochs + self.cfg.train.finetune_epochs  # the finetune stage's included

    def eval_weights(self) -> torch.nn.Module:
        """The weights that are validated and saved: the iterate average once NT-ASGD averages."""
        return self.nt_asgd.weights(self.model)

    def finished_early(self) -> bool:
        return self.nt_asgd.stopped

    def after_validation(self, score: float, progress: Progress) -> None:
        finetuning = progress.epoch > self.main_epochs
        self.nt_asgd.check(self.valid["loss"], progress.epoch, finetuning=finetuning, model=self.model)

    def finished(self, run_dir: Path, done: int, asked: int) -> str:
        if self.nt_asgd.stopped or self.nt_asgd.main_end:
            return (
                f"NT-ASGD's non-monotone stop ended it after {done} epochs; to train on from its weights start a new "
                f"run with --set train.init_from={run_dir}"
            )
        return super().finished(run_dir, done, asked)

    # ------------------------------------------------------------------ the loop's hooks
    def start_epoch(self, progress: Progress) -> None:
        if progress.epoch == self.main_epochs + 1 and progress.batch == 0:  # the finetune stage: from the best
            self.model.load_state_dict(model_state(load_checkpoint(RunDir(self.run_dir).checkpoint("best"))[0]))
            self.nt_asgd.start_finetune(self.model)  # weights, with a fresh average and history
            self.log(
                f"finetune: epochs {progress.epoch}-{self.epochs} from the best weights (epoch "
                f"{progress.best_epoch}), averaging every step"
            )
        self.lr = self.cfg.lr_at(progress.epoch)
        self.model.train()
        if progress.batch == 0 or self.state is None:  # an epoch starts its streams afresh
            self.state = self.model.init_state(self.train_data.size(1))  # this rank's streams
        self.params = list(self.model.parameters())

    def batches(self, epoch: int) -> list:
        """This epoch's BPTT windows ``(k, x, y)`` over this rank's streams: fixed, or AWD-LSTM's random lengths
        (seeded by seed and epoch)."""
        t, steps = self.cfg.train, self.train_data.size(0) - 1
        if t.variable_bptt:
            lengths = variable_window_lengths(steps, t.bptt, seed=t.seed * 100_003 + epoch)
        else:
            lengths = fixed_window_lengths(steps, t.bptt)
        return list(scheduled_windows(self.train_data, lengths))

    def train_step(self, batch, progress: Progress) -> tuple[bool, dict]:
        """One window: the graphed step where the run allows it, else the eager one; a made step carries the
        state on and updates NT-ASGD's average."""
        t = self.cfg.train
        _, x, y = batch
        lr = self.lr * min(1.0, (progress.updates + 1) / t.warmup_steps) if t.warmup_steps else self.lr
        if t.variable_bptt:  # variable windows: lr scaled by length / bptt
            lr *= y.size(0) / t.bptt
        if self.graph_reason is None and (t.variable_bptt or y.size(0) == t.bptt):
            if self.graphs is None:  # one graph per window length, each captured on first use
                self.graphs = GraphedSteps(self.model, self.loss_fn, self.cfg, self.precision)
            ce, aug, finite, new_state = self.graphs.step(x, y, self.state, lr)
        else:
            ce, aug, finite, new_state = self._eager_step(x, y, lr, self.params)
        if not finite:  # no update was made: the last good weights and state stay
            return False, {}
        self.nt_asgd.after_step(self.model)
        self.state, n = new_state, y.numel()
        return True, {"loss": ce.item() * n, "count": n, "aug": (aug.item() if aug is not None else 0.0) * n}

    def _eager_step(self, x, y, lr: float, params):
        """Forward, loss, backward, clipping and the optimizer's update, op by op; returns
        ``(ce, aug, finite, new_state)``, with no update made when the loss or gradient is not finite."""
        t, ls = self.cfg.train, self.cfg.loss
        for group in self.optimizer.param_groups:
            group["lr"] = lr

        def window():
            return window_loss(
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

        if self.scaler is not None:
            finite, (_, ce, aug, new_state) = scaled_update(
                window, params, self.optimizer, t.clip, self.scaler, self.dist.all_true
            )
        else:
            loss, ce, aug, new_state = window()
            finite = update(loss, params, self.optimizer, t.clip, self.dist.all_true)
        return ce, aug, finite, new_state

    def running(self, sums: dict) -> dict:
        ppl = perplexity(sums.get("loss", 0.0) / max(sums.get("count", 0), 1))
        return {"ppl": f"{ppl:.1f}", "lr": f"{self.lr:.3g}"}

    def validate(self) -> float:
        t = self.cfg.train
        self.validated_average = self.nt_asgd.averaging  # before after_validation can start the average
        self.valid = evaluate(
            self.eval_weights(), self.corpus.valid, t.eval_batch_size, t.bptt, self.precision, check=self.check_stop
        )
        return self.valid["ppl"]

    def epoch_record(self, progress: Progress, seconds: float, wall: float, score: float) -> dict:
        s, n = progress.sums, progress.sums.get("count", 0)
        stage = "averaged" if self.validated_average else "sgd"  # what this epoch's validation measured
        return {
            "epoch": progress.epoch,
            "lr": self.lr,
            "train_ppl": perplexity(s.get("loss", 0.0) / max(n, 1)),
            "train_aug": s.get("aug", 0.0) / max(n, 1) if self.cfg.loss.augmented else None,
            "valid_ppl": score,
            "train_tokens": int(n),
            "skipped_steps": int(s.get("skipped", 0)),
            "tokens_per_s": n / seconds if seconds else 0.0,
            "epoch_time_s": seconds,
            "wall_time_s": progress.seconds + wall,
            # sgd: the iterate; averaged: NT-ASGD's average (Merity et al. 2017 Alg. 1); finetune: its fresh average
            "stage": "finetune" if progress.epoch > self.main_epochs else stage,
        }

    def epoch_line(self, record: dict, seconds: float) -> str:
        stage = "" if record["stage"] == "sgd" else f" | {record['stage']}"
        return (
            f"epoch {record['epoch']:3d}{stage} | lr {record['lr']:.4f} | train ppl {record['train_ppl']:8.2f} | "
            f"valid ppl {record['valid_ppl']:8.2f} | {record['tokens_per_s']:,.0f} tok/s | "
            f"{record['epoch_time_s']:.0f} s"
        )

    # ------------------------------------------------------------------ checkpoints
    def extra_state(self, progress: Progress) -> tuple[dict, dict]:
        """NT-ASGD's average and history, the carried state (none at an epoch's end) and fp16's loss scale."""
        state = state_tensors(self.state if progress.batch else None)  # cloned: initial states share memory
        scale = {"loss_scale": self.scaler.state_dict()} if self.scaler is not None else {}
        return {**self.nt_asgd.tensors(), **state}, self.nt_asgd.meta() | scale

    def load_extra_state(self, tensors: dict, meta: dict, progress: Progress) -> None:
        if "averaged_from" not in meta:  # NT-ASGD's state as kept before the average's start was
            raise older_checkpoint(self.run_dir)
        self.nt_asgd.restore(tensors, meta, self.model)
        self.state = carried_state(tensors, self.device)
        if self.scaler is not None and "loss_scale" in meta:  # none before the first checkpoint of an fp16 run
            self.scaler.load_state_dict(meta["loss_scale"])

    # ------------------------------------------------------------------ end of training
    def summary(self, progress: Progress, history: list[dict]) -> dict:
        """Valid and test perplexity of the best weights, and the run's facts."""
        start, t, check = time.perf_counter(), self.cfg.train, self.check_stop
        valid = evaluate(self.model, self.corpus.valid, t.eval_batch_size, t.bptt, self.precision, check=check)
        # test as the papers measure it (Zaremba et al.'s and Merity et al.'s code): one stream, state carried,
        # every token scored; and as validation is measured (eval_batch_size streams, each started cold)
        test = evaluate(self.model, self.corpus.test, 1, t.bptt, self.precision, check=check)
        test_streams = evaluate(self.model, self.corpus.test, t.eval_batch_size, t.bptt, self.precision, check=check)
        train_time = sum(r["epoch_time_s"] for r in history)
        train_tokens = sum(r["train_tokens"] for r in history)
        summary = {
            "valid_ppl": valid["ppl"],
            "test_ppl": test["ppl"],
            "test_protocol": "batch 1: the test split read as one stream (the papers' protocol)",
            "test_ppl_streams": test_streams["ppl"],
            "valid_tokens": valid["tokens"],
            "test_tokens": test["tokens"],
            "epochs": len(history),
            "parameters": self.model.parameter_counts(),
            "wall_time_s": round(progress.seconds + time.perf_counter() - start, 1),
            "train_time_s": round(train_time, 1),
            "tokens_per_s": round(train_tokens / train_time, 1) if train_time else None,
            "preset_data": self.cfg.data.name,
            "eval_batch_size": t.eval_batch_size,
        }
        if self.dist.enabled:
            summary["distributed"] = {
                "world_size": self.dist.world_size,
                "global_batch_size": t.batch_size,
                "max_parameter_spread": self.dist.max_parameter_spread(self.model),
            }
        self.log(
            f"best epoch {progress.best_epoch}: valid ppl {valid['ppl']:.2f} | test ppl {test['ppl']:.2f} | "
            f"wall time {duration(summary['wall_time_s'])}"
        )
        return summary


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
