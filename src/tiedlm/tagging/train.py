"""Train and evaluate the POS tagger: Adam, best-dev model kept, a resumable checkpoint after every epoch.

A run directory (:class:`tiedlm.run_dir.RunDir`, the layout of every task) holds ``config.toml``,
``vocab.txt``, ``tags.txt``, ``checkpoints/last.safetensors`` (model, best model, optimizer and RNG state and
the position in the epoch; written atomically, no pickle), ``metrics.jsonl`` (one line per epoch) and
``summary.json``. SIGINT/SIGTERM stop between two batches with a checkpoint (:mod:`tiedlm.train.interrupts`);
``--resume`` continues from the same batch.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from ..data.vocab import Vocabulary
from ..errors import UsageError
from ..paths import refuse_committed
from ..run_dir import RunDir, write_json_atomic, write_text_atomic
from ..runtime import resolve_device, run_device, set_threads
from ..train.checkpoint import load_checkpoint, load_training_state, model_state, save_training_state
from ..train.interrupts import RunInterrupted, StopRequest, StopRequested
from ..train.step import NonFiniteSteps, update
from .config import TaggerConfig
from .data import TaggingCorpus, load_tagging_corpus
from .model import BiLSTMTagger


@torch.inference_mode()
def accuracy(model: BiLSTMTagger, corpus: TaggingCorpus, split: str, batch_size: int = 256) -> float:
    """Word-level UPOS accuracy over every token of ``split``."""
    model.eval()
    device = next(model.parameters()).device
    correct = total = 0
    for ids, tags, lengths in corpus.batches(split, batch_size):
        ids, tags = ids.to(device), tags.to(device)
        pred = model(ids, lengths).argmax(-1)
        keep = tags != -100
        correct += int((pred[keep] == tags[keep]).sum())
        total += int(keep.sum())
    return correct / total


def tagging_loss(model: BiLSTMTagger, ids: torch.Tensor, tags: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of the tag scores over the real (unpadded, tag ≠ -100) tokens of a batch."""
    return F.cross_entropy(model(ids, lengths).flatten(0, 1), tags.flatten(), ignore_index=-100)


def _diverged(what: str, run_dir: Path, cfg: TaggerConfig) -> str:
    done = RunDir(run_dir).checkpoint("last").is_file()
    fix = (
        f"resume from the last epoch's checkpoint with a lower rate: tiedlm tag train --resume {run_dir} "
        f"(after lowering lr in its config.toml)"
        if done
        else "start a new run with a lower --set train.lr"
    )
    return f"tagger training diverged: {what}; the learning rate (now {cfg.lr:g}) is too high: {fix}"


class TaggerInterrupted(RunInterrupted):
    def __init__(self, run_dir: Path, epoch: int, batch: int, saved: bool = True):
        where = f"in epoch {epoch} after batch {batch}" if saved else "at once by a second signal (nothing written)"
        super().__init__(f"tagger training interrupted {where}; resume with: tiedlm tag train --resume {run_dir}")


def train_tagger(cfg: TaggerConfig, run_dir: Path, resume: bool = False, progress: bool = True, log=print) -> dict:
    """Train (or continue) a tagger in ``run_dir``; returns the summary written to ``summary.json``."""
    if not resume:
        refuse_committed(Path(run_dir))  # committed results are never overwritten (as `tiedlm train`)
    with RunDir(run_dir).training_lock():  # one process trains in a folder at a time
        return _train_tagger(cfg, Path(run_dir), resume, progress, log)


def _train_tagger(cfg: TaggerConfig, run_dir: Path, resume: bool = False, progress: bool = True, log=print) -> dict:
    cfg.validate()
    threads = set_threads(cfg.threads, log)
    device = resolve_device(cfg.device)
    run_dir = Path(run_dir)
    files = RunDir(run_dir)
    if resume:
        corpus = load_tagging_corpus(
            cfg.data_dir,
            vocab=Vocabulary.load(files.vocab),
            tags=(run_dir / "tags.txt").read_text().split(),
            own_data=cfg.own_data,
        )
    else:
        if files.training_state().exists():
            raise UsageError(
                f"{run_dir} already holds a tagger run; resume it with --resume {run_dir} or pick another --out"
            )
        corpus = load_tagging_corpus(cfg.data_dir, cfg.min_count, own_data=cfg.own_data)
        run_dir.mkdir(parents=True, exist_ok=True)
        corpus.vocab.save(files.vocab)
        write_text_atomic(run_dir / "tags.txt", "\n".join(corpus.tags) + "\n")
        cfg.save(run_dir)
        write_text_atomic(files.metrics, "")
    if cfg.max_sentences:
        corpus.splits["train"] = corpus.splits["train"][: cfg.max_sentences]
    torch.manual_seed(cfg.seed)
    model = BiLSTMTagger(cfg, len(corpus.vocab), len(corpus.tags)).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    state = {
        "epoch": 0,
        "batch": 0,
        "sums": [0.0, 0],
        "best_dev": -1.0,
        "best_epoch": 0,
        "history": [],
        "seconds": 0.0,
        "epoch_seconds": 0.0,
    }
    best = {k: v.clone() for k, v in model.state_dict().items()}
    if resume:
        best, state = load_training_state(files.training_state(), model, opt)
        if state["epoch"] >= cfg.epochs and files.summary.exists():
            raise UsageError(
                f"{run_dir} is finished: it trained {state['epoch']} epochs; to train longer resume with "
                f"--set train.epochs=N (N > {state['epoch']}); `tiedlm tag evaluate {run_dir}` scores it"
            )
        log(f"resuming {run_dir} after epoch {state['epoch']} of {cfg.epochs}")
    counts = model.parameter_counts()
    n_train = corpus.tokens("train")
    with StopRequest() as stop:
        while state["epoch"] < cfg.epochs:
            try:
                best = _train_epoch(cfg, run_dir, corpus, model, opt, state, best, n_train, progress, log, stop)
            except StopRequested:  # between two batches: model, optimizer and position agree
                save_training_state(files.checkpoint("last"), model, best, opt, state)
                raise TaggerInterrupted(run_dir, state["epoch"] + 1, state["batch"]) from None
            except KeyboardInterrupt:  # a second signal: stop now, write nothing
                raise TaggerInterrupted(run_dir, state["epoch"] + 1, state["batch"], saved=False) from None
    model.load_state_dict(best)
    metrics = {
        "dev_accuracy": accuracy(model, corpus, "dev"),
        "test_accuracy": accuracy(model, corpus, "test"),
        "best_epoch": state["best_epoch"],
        "epochs": cfg.epochs,
        "parameters": counts,
        "embedding_size": cfg.embedding_size,
        "embedding_density": cfg.embedding_density,
        "train_seconds": state["seconds"],
        "threads": threads,
        "device": str(device),
        "seed": cfg.seed,
        "vocab_size": len(corpus.vocab),
        "history": state["history"],
    }
    write_json_atomic(files.summary, metrics)
    return metrics


def _train_epoch(
    cfg: TaggerConfig,
    run_dir: Path,
    corpus: TaggingCorpus,
    model,
    opt,
    state: dict,
    best: dict,
    n_train: int,
    progress: bool,
    log,
    stop: StopRequest,
) -> dict:
    """Epoch ``state["epoch"] + 1`` from batch ``state["batch"]`` on, then dev accuracy and the checkpoint;
    returns the best weights. Raises :class:`StopRequested` between two batches once a signal asked to stop."""
    from tqdm import tqdm

    epoch = state["epoch"] + 1
    device = next(model.parameters()).device
    model.train()
    start = time.perf_counter() - state.get("epoch_seconds", 0.0)
    total, seen = state.get("sums", [0.0, 0])
    skipped = NonFiniteSteps(cfg.max_nonfinite, lambda what: _diverged(what, run_dir, cfg), log)
    with tqdm(
        total=n_train,
        initial=seen,
        desc=f"tag epoch {epoch}/{cfg.epochs}",
        unit="tok",
        unit_scale=True,
        disable=not progress,
        leave=False,
    ) as bar:
        batches = corpus.batches("train", cfg.batch_size, shuffle_seed=cfg.seed * 1000 + epoch)
        for b, (ids, tags, lengths) in enumerate(batches):
            if b < state.get("batch", 0):
                continue
            state["epoch_seconds"] = time.perf_counter() - start
            stop.check()
            loss = tagging_loss(model, ids.to(device), tags.to(device), lengths)
            if not skipped(update(loss, model.parameters(), opt, cfg.clip), f"at epoch {epoch}, batch {b}"):
                state["batch"] = b + 1
                continue
            n = int(lengths.sum())
            total, seen = total + loss.item() * n, seen + n
            state["batch"], state["sums"] = b + 1, [total, seen]
            bar.update(n)
            bar.set_postfix(loss=f"{total / seen:.3f}")
    dev = accuracy(model, corpus, "dev")
    seconds = time.perf_counter() - start
    state["seconds"] += seconds
    state["history"].append({"epoch": epoch, "train_loss": total / seen, "dev_accuracy": dev, "seconds": seconds})
    if dev > state["best_dev"]:
        state["best_dev"], state["best_epoch"] = dev, epoch
        best = {k: v.clone() for k, v in model.state_dict().items()}
    state.update(epoch=epoch, batch=0, sums=[0.0, 0], epoch_seconds=0.0)
    save_training_state(RunDir(run_dir).checkpoint("last"), model, best, opt, state)
    with open(RunDir(run_dir).metrics, "a") as f:
        f.write(json.dumps(state["history"][-1]) + "\n")
    log(
        f"epoch {epoch:3d} | train loss {total / seen:.4f} | dev acc {100 * dev:.2f}% | "
        f"{n_train / seconds:,.0f} tok/s | {seconds:.0f} s"
    )
    return best


def load_tagger(run_dir: Path) -> tuple[BiLSTMTagger, TaggerConfig, Vocabulary, list[str]]:
    """The best model of a tagger run directory."""
    run_dir = Path(run_dir)
    cfg = TaggerConfig.load_run(run_dir)
    vocab = Vocabulary.load(RunDir(run_dir).vocab)
    tags = (run_dir / "tags.txt").read_text().split()
    tensors, _ = load_checkpoint(RunDir(run_dir).training_state())
    model = BiLSTMTagger(cfg, len(vocab), len(tags))
    model.load_state_dict(model_state(tensors, "best."))
    return model.eval(), cfg, vocab, tags


def evaluate_tagger(run_dir: Path, splits=("dev", "test"), data_dir: str = "", own_data: bool = False) -> dict:
    """Accuracy of a run's best model on ``splits``."""
    model, cfg, vocab, tags = load_tagger(run_dir)
    model.to(run_device(cfg.device))  # where it trained, or the CPU where that GPU is not here
    corpus = load_tagging_corpus(
        data_dir or cfg.data_dir, vocab=vocab, tags=tags, own_data=own_data if data_dir else cfg.own_data
    )
    return {f"{s}_accuracy": accuracy(model, corpus, s) for s in splits} | {"parameters": model.parameter_counts()}
