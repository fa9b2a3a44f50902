"""Train and evaluate the POS tagger: Adam, best-dev model kept, a resumable checkpoint after every epoch.

Its run folder has every task's layout (:class:`tiedlm.run_dir.RunDir`), with its tag set in ``tags.txt``. The
harness (:mod:`tiedlm.train.loop`) does the rest: SIGINT/SIGTERM stop between two batches with a checkpoint,
``--resume`` continues from the same batch, non-finite steps are skipped.
"""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F

from ...data.vocab import Vocabulary
from ...errors import DataError, UsageError
from ...run_dir import RunDir, write_text_atomic
from ...runtime import autocast, run_device
from ...train.checkpoint import best_weights
from ...train.loop import Progress, Task
from ...train.optimizers import make_optimizer
from ...train.step import update
from .config import TaggerConfig
from .data import TaggingCorpus, load_tagging_corpus, own_treebank_files
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


class TaggerTask(Task):
    """The tagger's part of a run (:func:`tiedlm.train.loop.run` does the rest): Adam on the mean
    cross-entropy of each batch of sentences, shuffled per epoch, kept by its dev accuracy."""

    higher_is_better = True

    def preflight(self) -> None:
        """A treebank folder of one's own found with its three files, before the banner."""
        if self.cfg.data.own_data:
            own_treebank_files(self.cfg.data.data_dir)

    def setup(self, run_dir: Path, resume: bool, log) -> None:
        cfg, files = self.cfg, RunDir(run_dir)
        if resume:
            self.corpus = load_tagging_corpus(
                cfg.data.data_dir,
                vocab=Vocabulary.load(files.vocab),
                tags=files.tags.read_text().split(),
                own_data=cfg.data.own_data,
            )
        else:
            self.corpus = load_tagging_corpus(cfg.data.data_dir, cfg.data.min_count, own_data=cfg.data.own_data)
            run_dir.mkdir(parents=True, exist_ok=True)
            self.corpus.vocab.save(files.vocab)
            write_text_atomic(files.tags, "\n".join(self.corpus.tags) + "\n")
            cfg.save(run_dir)
        if cfg.data.max_sentences:
            self.corpus.splits["train"] = self.corpus.splits["train"][: cfg.data.max_sentences]
        torch.manual_seed(cfg.train.seed)
        self.model = BiLSTMTagger(cfg, len(self.corpus.vocab), len(self.corpus.tags)).to(self.device)
        self.optimizer = make_optimizer(cfg.train.optimizer, self.model.parameters(), cfg.train.lr, 0.0)

    def batches(self, epoch: int):
        return list(
            self.corpus.batches("train", self.cfg.train.batch_size, shuffle_seed=self.cfg.train.seed * 1000 + epoch)
        )

    def train_step(self, batch, progress: Progress) -> tuple[bool, dict]:
        ids, tags, lengths = batch
        with autocast(self.device, self.precision):
            loss = tagging_loss(self.model, ids.to(self.device), tags.to(self.device), lengths)
        if not update(loss, self.model.parameters(), self.optimizer, self.cfg.train.clip):
            return False, {}
        n = int(lengths.sum())
        return True, {"loss": loss.item() * n, "count": n}

    def validate(self) -> float:
        return accuracy(self.model, self.corpus, "dev")

    def epoch_record(self, progress: Progress, seconds: float, wall: float, score: float) -> dict:
        s = progress.sums
        return {"epoch": progress.epoch, "train_loss": s["loss"] / s["count"], "dev_accuracy": score, "seconds": wall}

    def epoch_line(self, record: dict, seconds: float) -> str:
        n_train = self.corpus.tokens("train")
        return (
            f"epoch {record['epoch']:3d} | train loss {record['train_loss']:.4f} | dev acc "
            f"{100 * record['dev_accuracy']:.2f}% | {n_train / seconds:,.0f} tok/s | {seconds:.0f} s"
        )

    def summary(self, progress: Progress, history: list[dict]) -> dict:
        cfg = self.cfg
        return {
            "dev_accuracy": accuracy(self.model, self.corpus, "dev"),
            "test_accuracy": accuracy(self.model, self.corpus, "test"),
            "epochs": cfg.train.epochs,
            "parameters": self.model.parameter_counts(),
            "embedding_size": cfg.model.embedding_size,
            "embedding_density": cfg.model.embedding_density,
            "train_seconds": progress.seconds,
            "vocab_size": len(self.corpus.vocab),
            "history": history,
        }


def load_tagger(run_dir: Path) -> tuple[BiLSTMTagger, TaggerConfig, Vocabulary, list[str]]:
    """The best model of a tagger run directory."""
    run_dir = Path(run_dir)
    cfg = TaggerConfig.load_run(run_dir)  # another task's run: named, with its commands
    vocab = Vocabulary.load(RunDir(run_dir).vocab)
    tags = RunDir(run_dir).tags.read_text().split()
    model = BiLSTMTagger(cfg, len(vocab), len(tags))
    model.load_state_dict(best_weights(RunDir(run_dir)))
    return model.eval(), cfg, vocab, tags


def evaluate_tagger_file(run_dir: Path, path: Path) -> dict:
    """Accuracy of a run's best model on one CoNLL-U file of your own (another test set), read with the run's
    vocabulary and tags; no train or dev split beside it."""
    from .data import encode_sentences, read_conllu

    model, cfg, vocab, tags = load_tagger(run_dir)
    model.to(run_device(cfg.train.device))
    if not Path(path).is_file():
        raise UsageError(f"--file {path}: no such file; give a CoNLL-U file")
    sentences = encode_sentences(read_conllu(Path(path)), vocab, tags, str(path))
    if not sentences:
        raise DataError(f"{path} holds no sentences; give a CoNLL-U file with tagged sentences")
    corpus = TaggingCorpus(vocab, tags, {"file": sentences}, Path(path).parent)
    return {"file": str(path), "file_accuracy": accuracy(model, corpus, "file"), "tokens": corpus.tokens("file")}


def evaluate_tagger(run_dir: Path, splits=("dev", "test"), data_dir: str = "", own_data: bool = False) -> dict:
    """Accuracy of a run's best model on ``splits``."""
    model, cfg, vocab, tags = load_tagger(run_dir)
    model.to(run_device(cfg.train.device))  # where it trained, or the CPU where that GPU is not here
    corpus = load_tagging_corpus(
        data_dir or cfg.data.data_dir, vocab=vocab, tags=tags, own_data=own_data if data_dir else cfg.data.own_data
    )
    return {f"{s}_accuracy": accuracy(model, corpus, s) for s in splits} | {"parameters": model.parameter_counts()}
