"""Train, evaluate and use a Transformer translator.

Its run folder has every task's layout (:class:`tiedlm.run_dir.RunDir`), with the sentencepiece model(s)
``spm.*.model`` and, after training, ``test.hyp.txt`` and test BLEU (sacrebleu, with its signature) in the summary.

Training: Adam (β 0.9/0.98) with linear warm-up to ``lr`` and inverse-square-root decay (Vaswani et al.
§5.3), label-smoothed cross-entropy on target subwords, optionally + γτ·J_aug (the augmented loss of
Inan et al. eq. 3.3 over the target embedding). The run harness (:mod:`tiedlm.train.loop`) does the rest:
Ctrl-C / SIGTERM writes a checkpoint between two batches, ``--resume`` continues from the same batch with the
same RNG state.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from ...errors import DataError, UsageError
from ...evaluation import perplexity
from ...losses import AugmentedLoss
from ...losses.fused import at_least_fp32
from ...paths import missing
from ...run_dir import RunDir, write_text_atomic
from ...runtime import autocast, resolve_precision, run_device
from ...train.checkpoint import best_weights
from ...train.loop import Progress, Task
from ...train.optimizers import make_optimizer
from ...train.step import update
from .config import TranslationConfig
from .data import PAD, ParallelCorpus, SubwordVocab, encode_source, load_parallel_corpus, own_parallel_dir
from .model import TransformerTranslator
from .search import beam_search, greedy_search


def inverse_sqrt_lr(cfg: TranslationConfig, step: int) -> float:
    """lr · min(step/warmup, sqrt(warmup/step)) for the 1-based update ``step``: peak ``lr`` at warmup."""
    return cfg.train.lr * min(step / cfg.train.warmup_steps, math.sqrt(cfg.train.warmup_steps / step))


def translation_loss(
    model: TransformerTranslator,
    cfg: TranslationConfig,
    source,
    target_in,
    target_out,
    aug: AugmentedLoss | None = None,
):
    """(total, summed NLL, tokens): label-smoothed CE (+ γτ·J_aug) averaged over non-pad target tokens;
    the output layer scores only the non-pad positions."""
    h = model(source, target_in)
    keep = target_out != PAD
    logits, labels = model.output(h[keep])
    logits, gold = at_least_fp32(logits), target_out[keep]
    total = F.cross_entropy(logits, gold, label_smoothing=cfg.loss.label_smoothing)
    nll = F.cross_entropy(logits.detach(), gold, reduction="sum")
    if aug is not None:
        total = total + cfg.loss.gamma * cfg.loss.tau * aug(logits, gold, model.input_embeddings)
    return total, nll, gold.numel()


@torch.inference_mode()
def validation_nll(
    model: TransformerTranslator, cfg: TranslationConfig, corpus: ParallelCorpus, split: str, precision: str, device
) -> float:
    """Per-subword negative log-likelihood of the references (no label smoothing)."""
    model.eval()
    nll = tokens = 0
    for index in corpus.batches(split, cfg.train.batch_tokens):
        src, tin, tout = (t.to(device) for t in corpus.tensors(split, index))
        with autocast(device, precision):
            _, batch_nll, n = translation_loss(model, cfg, src, tin, tout)
        nll, tokens = nll + float(batch_nll), tokens + n
    return nll / tokens


class TranslationTask(Task):
    """The translator's part of a run (:func:`tiedlm.train.loop.run` does the rest): Adam with warm-up and
    inverse-square-root decay on label-smoothed cross-entropy (+ γτ·J_aug), kept by its validation perplexity;
    after training, test BLEU and the hypotheses (``test.hyp.txt``)."""

    higher_is_better = False  # validation: per-subword negative log-likelihood

    def preflight(self) -> None:
        """A folder of one's own parallel text found with its six files, before the banner."""
        d = self.cfg.data
        if d.own_data or {d.source_lang, d.target_lang} != {"en", "de"}:
            own_parallel_dir(d.data_dir, d.source_lang, d.target_lang)

    def setup(self, run_dir: Path, resume: bool, log) -> None:
        cfg = self.cfg
        self.run_dir = run_dir
        run_dir.mkdir(parents=True, exist_ok=True)
        self.corpus = load_parallel_corpus(cfg, run_dir, train_vocab=not resume)
        if not resume:
            cfg.save(run_dir)
        torch.manual_seed(cfg.train.seed)
        c = self.corpus
        self.model = TransformerTranslator(cfg, len(c.source_vocab), len(c.target_vocab)).to(self.device)
        self.optimizer = make_optimizer(cfg.train.optimizer, self.model.parameters(), cfg.train.lr, 0.0)
        self.aug = AugmentedLoss(cfg.loss.tau) if cfg.loss.augmented else None
        counts = self.model.parameter_counts()
        log(
            f"{cfg.data.source_lang}->{cfg.data.target_lang} | subwords {len(c.source_vocab)}/{len(c.target_vocab)} | "
            f"output {cfg.model.output.name} | parameters {counts['total']:,}"
        )

    def batches(self, epoch: int):
        cfg = self.cfg
        return self.corpus.batches(
            "train", cfg.train.batch_tokens, shuffle_seed=cfg.train.seed * 1000 + epoch, max_length=cfg.data.max_length
        )

    def train_step(self, batch, progress: Progress) -> tuple[bool, dict]:
        src, tin, tout = (t.to(self.device) for t in self.corpus.tensors("train", batch))
        for group in self.optimizer.param_groups:
            group["lr"] = inverse_sqrt_lr(self.cfg, progress.updates + 1)
        with autocast(self.device, self.precision):
            loss, nll, n = translation_loss(self.model, self.cfg, src, tin, tout, self.aug)
        if not update(loss, self.model.parameters(), self.optimizer, self.cfg.train.clip):
            return False, {}
        return True, {"loss": float(nll), "count": n}

    def validate(self) -> float:
        return validation_nll(self.model, self.cfg, self.corpus, "valid", self.precision, self.device)

    def running(self, sums: dict) -> dict:
        return {"ppl": f"{perplexity(sums.get('loss', 0.0) / max(sums.get('count', 0), 1)):.1f}"}

    def diverged(self, what: str, run_dir: Path, checkpoint_written: bool) -> str:
        cfg = self.cfg
        return (
            f"translation training diverged: {what}; lower lr (now {cfg.train.lr:g}) or raise warmup_steps "
            f"(now {cfg.train.warmup_steps}) in a new run"
        )

    def epoch_record(self, progress: Progress, seconds: float, wall: float, score: float) -> dict:
        s = progress.sums
        return {
            "epoch": progress.epoch,
            "train_ppl": perplexity(s["loss"] / s["count"]),
            "valid_ppl": perplexity(score),
            "lr": inverse_sqrt_lr(self.cfg, max(progress.updates, 1)),
            "epoch_seconds": seconds,
            "target_tokens_per_s": s["count"] / max(seconds, 1e-9),
        }

    def epoch_line(self, record: dict, seconds: float) -> str:
        return (
            f"epoch {record['epoch']:3d} | train ppl {record['train_ppl']:7.2f} | valid ppl "
            f"{record['valid_ppl']:7.2f} | {record['target_tokens_per_s']:,.0f} target tok/s | {seconds:.0f} s"
        )

    def summary(self, progress: Progress, history: list[dict]) -> dict:
        cfg, model, device, precision = self.cfg, self.model, self.device, self.precision
        result = bleu(model, cfg, self.corpus, "test", device, precision, progress=self.show_progress)
        write_text_atomic(RunDir(self.run_dir).hypotheses("test"), "\n".join(result.pop("hypotheses")) + "\n")
        return {
            "test_bleu": result["bleu"],
            "bleu_signature": result["signature"],
            "test_ppl": perplexity(validation_nll(model, cfg, self.corpus, "test", precision, device)),
            "valid_ppl": perplexity(progress.best_score),
            "epochs": cfg.train.epochs,
            "parameters": model.parameter_counts(),
            "train_seconds": progress.seconds,
            "decode_seconds": result["seconds"],
            "output": cfg.model.output.name,
            "beam": cfg.decode.beam,
            "length_penalty": cfg.decode.length_penalty,
        }


def translate_ids(
    model: TransformerTranslator, cfg: TranslationConfig, source: torch.Tensor, beam: int | None = None
) -> list[list[int]]:
    beam = cfg.decode.beam if beam is None else beam
    if beam == 1:
        return greedy_search(model, source, cfg.decode.max_decode_ratio)
    return beam_search(model, source, beam, cfg.decode.length_penalty, cfg.decode.max_decode_ratio)


def translate_lines(
    model: TransformerTranslator,
    cfg: TranslationConfig,
    source_vocab: SubwordVocab,
    target_vocab: SubwordVocab,
    lines: list[str],
    beam: int | None = None,
    batch_size: int = 64,
    device=None,
    precision: str = "fp32",
    progress: bool = False,
) -> list[str]:
    """Detokenized translations of ``lines`` (batched by length; output in input order). A blank line
    translates to a blank line: the model is never asked to invent a sentence from nothing."""
    from tqdm import tqdm

    device = device or next(model.parameters()).device
    order = sorted((i for i in range(len(lines)) if lines[i].strip()), key=lambda i: len(lines[i]))
    out: list[str] = [""] * len(lines)
    for start in tqdm(
        range(0, len(order), batch_size), desc="translate", unit="batch", disable=not progress, leave=False
    ):
        index = order[start : start + batch_size]
        src = encode_source(source_vocab, [lines[i] for i in index]).to(device)
        with autocast(device, precision):
            hyps = translate_ids(model, cfg, src, beam)
        for i, ids in zip(index, hyps):
            out[i] = target_vocab.decode(ids)
    return out


def bleu(
    model,
    cfg: TranslationConfig,
    corpus: ParallelCorpus,
    split: str,
    device,
    precision: str,
    beam: int | None = None,
    progress: bool = False,
) -> dict:
    """Corpus BLEU (sacrebleu, default 13a tokenization) of detokenized translations against raw references."""
    vocabs = corpus.source_vocab, corpus.target_vocab
    return score_translations(model, cfg, *vocabs, *corpus.text[split], beam, device, precision, progress)


def score_translations(
    model, cfg, source_vocab, target_vocab, sources, references, beam, device, precision: str, progress: bool = False
) -> dict:
    """``sources`` translated and scored with sacrebleu's corpus BLEU against ``references``: the score, its
    signature, the hypotheses and the seconds it took."""
    from sacrebleu.metrics import BLEU

    start = time.perf_counter()
    hyps = translate_lines(
        model, cfg, source_vocab, target_vocab, sources, beam, device=device, precision=precision, progress=progress
    )
    metric = BLEU()
    score = metric.corpus_score(hyps, [references])
    return {
        "bleu": score.score,
        "signature": str(metric.get_signature()),
        "hypotheses": hyps,
        "seconds": time.perf_counter() - start,
    }


def load_translator(run_dir: Path):
    """The best model of a run directory, its config and subword vocabularies."""
    run_dir = Path(run_dir)
    cfg = TranslationConfig.load_run(run_dir)  # another task's run: named, with its commands
    models = RunDir(run_dir).subword_models(cfg.data.vocab == "joint", cfg.data.source_lang, cfg.data.target_lang)
    vocabs = [SubwordVocab(model) for model in models]
    model = TransformerTranslator(cfg, len(vocabs[0]), len(vocabs[-1]))
    model.load_state_dict(best_weights(RunDir(run_dir)))
    return model.eval(), cfg, vocabs[0], vocabs[-1]


def evaluate_translator_files(
    run_dir: Path, source: Path, reference: Path, beam: int | None = None, progress: bool = False
) -> dict:
    """BLEU of a run's best model on another test set: a source file and its reference translation, aligned line
    by line (no train or valid split beside them)."""
    from .data import read_lines

    model, cfg, source_vocab, target_vocab = load_translator(run_dir)
    for option, path in (("--source", source), ("--reference", reference)):
        if not Path(path).is_file():
            raise UsageError(f"{option} {path} {missing(path)}; give a text file, one sentence per line")
    sources, references = read_lines(Path(source)), read_lines(Path(reference))
    for option, path, lines in (("--source", source, sources), ("--reference", reference, references)):
        if not lines:
            raise DataError(f"{option} {path} is empty or blank; give a text file, one sentence per line")
    if len(sources) != len(references):
        raise DataError(
            f"{source} has {len(sources)} lines and {reference} {len(references)}: give two non-empty files aligned "
            "line by line"
        )
    device = run_device(cfg.train.device)
    model.to(device)
    precision = resolve_precision(cfg.train.precision, device)
    vocabs, texts = (source_vocab, target_vocab), (sources, references)
    result = score_translations(model, cfg, *vocabs, *texts, beam, device, precision, progress)
    beam = cfg.decode.beam if beam is None else beam
    return {"source": str(source), "bleu": result["bleu"], "signature": result["signature"], "beam": beam}


def evaluate_translator(
    run_dir: Path, split: str = "test", beam: int | None = None, data_dir: str = "", progress: bool = False
) -> dict:
    """BLEU and perplexity of a run's best model on ``split``."""
    model, cfg, _, _ = load_translator(run_dir)
    if data_dir:  # the same corpus found in another folder (checked against its SHA-256 as on training)
        cfg = cfg.with_overrides([f"data.data_dir={Path(data_dir).expanduser().resolve()}"])
    corpus = load_parallel_corpus(cfg, Path(run_dir), train_vocab=False)
    device = run_device(cfg.train.device)  # where it trained, or the CPU where that GPU is not here
    model.to(device)
    precision = resolve_precision(cfg.train.precision, device)
    result = bleu(model, cfg, corpus, split, device, precision, beam, progress=progress)
    result.pop("hypotheses")
    ppl = perplexity(validation_nll(model, cfg, corpus, split, precision, device))
    return {
        "split": split,
        "bleu": result["bleu"],
        "signature": result["signature"],
        "ppl": ppl,
        "beam": cfg.decode.beam if beam is None else beam,
        "decode_seconds": result["seconds"],
        "parameters": model.parameter_counts(),
    }
