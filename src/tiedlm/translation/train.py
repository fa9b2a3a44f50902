"""Train, evaluate and use a Transformer translator.

A run directory (:class:`tiedlm.run_dir.RunDir`, the layout of every task) holds ``config.toml``, the
sentencepiece model(s) ``spm.*.model``, ``checkpoints/last.safetensors`` (model, best-valid model, Adam and
RNG state, the position in the epoch; written atomically, no pickle), ``metrics.jsonl`` (one line per epoch)
and, after training, ``summary.json`` with test BLEU (sacrebleu, with its signature) and ``test.hyp.txt``.

Training: Adam (β 0.9/0.98) with linear warm-up to ``lr`` and inverse-square-root decay (Vaswani et al.
§5.3), label-smoothed cross-entropy on target subwords, optionally + γτ·J_aug (the augmented loss of
Inan et al. eq. 3.3 over the target embedding). Ctrl-C / SIGTERM (:mod:`tiedlm.train.interrupts`) writes a
checkpoint between two batches;
``--resume`` continues from the same batch with the same RNG state.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from ..errors import UsageError
from ..evaluation import perplexity
from ..losses import AugmentedLoss
from ..losses.fused import at_least_fp32
from ..paths import refuse_committed
from ..run_dir import RunDir, write_json_atomic, write_text_atomic
from ..runtime import autocast, resolve_device, resolve_precision, run_device, set_threads
from ..train.checkpoint import load_checkpoint, load_training_state, model_state, save_training_state
from ..train.interrupts import RunInterrupted, StopRequest, StopRequested
from ..train.step import NonFiniteSteps, update
from .config import TranslationConfig
from .data import PAD, ParallelCorpus, SubwordVocab, encode_source, load_parallel_corpus
from .model import TransformerTranslator
from .search import beam_search, greedy_search


class TranslationInterrupted(RunInterrupted):
    def __init__(self, run_dir: Path, epoch: int, batch: int, saved: bool = True):
        where = f"at epoch {epoch}, batch {batch}" if saved else "at once by a second signal (nothing written)"
        super().__init__(
            f"translation training interrupted {where}; resume with: tiedlm translate train --resume {run_dir}"
        )
        self.run_dir, self.epoch, self.batch = run_dir, epoch, batch


def inverse_sqrt_lr(cfg: TranslationConfig, step: int) -> float:
    """lr · min(step/warmup, sqrt(warmup/step)) for the 1-based update ``step``: peak ``lr`` at warmup."""
    return cfg.lr * min(step / cfg.warmup_steps, math.sqrt(cfg.warmup_steps / step))


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
    total = F.cross_entropy(logits, gold, label_smoothing=cfg.label_smoothing)
    nll = F.cross_entropy(logits.detach(), gold, reduction="sum")
    if aug is not None:
        total = total + cfg.gamma * cfg.tau * aug(logits, gold, model.input_embeddings)
    return total, nll, gold.numel()


@torch.inference_mode()
def validation_nll(
    model: TransformerTranslator, cfg: TranslationConfig, corpus: ParallelCorpus, split: str, precision: str, device
) -> float:
    """Per-subword negative log-likelihood of the references (no label smoothing)."""
    model.eval()
    nll = tokens = 0
    for index in corpus.batches(split, cfg.batch_tokens):
        src, tin, tout = (t.to(device) for t in corpus.tensors(split, index))
        with autocast(device, precision):
            _, batch_nll, n = translation_loss(model, cfg, src, tin, tout)
        nll, tokens = nll + float(batch_nll), tokens + n
    return nll / tokens


def train_translator(
    cfg: TranslationConfig, run_dir: Path, resume: bool = False, progress: bool = True, log=print
) -> dict:
    """Train (or continue) a translator in ``run_dir``; returns the summary written to ``summary.json``."""
    if not resume:
        refuse_committed(Path(run_dir))  # committed results are never overwritten (as `tiedlm train`)
    with RunDir(run_dir).training_lock():  # one process trains in a folder at a time
        return _train_translator(cfg, Path(run_dir), resume, progress, log)


def _train_translator(
    cfg: TranslationConfig, run_dir: Path, resume: bool = False, progress: bool = True, log=print
) -> dict:
    cfg.validate()
    threads = set_threads(cfg.threads, log)
    device = resolve_device(cfg.device)
    precision = resolve_precision(cfg.precision, device)
    run_dir = Path(run_dir)
    files = RunDir(run_dir)
    if not resume and files.training_state().exists():
        raise UsageError(
            f"{run_dir} already holds a translation run; resume it with --resume {run_dir} or pick another --out"
        )
    run_dir.mkdir(parents=True, exist_ok=True)
    corpus = load_parallel_corpus(cfg, run_dir, train_vocab=not resume)
    if not resume:
        cfg.save(run_dir)
        write_text_atomic(files.metrics, "")
    torch.manual_seed(cfg.seed)
    model = TransformerTranslator(cfg, len(corpus.source_vocab), len(corpus.target_vocab)).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr, betas=(0.9, 0.98), eps=1e-9)
    aug = AugmentedLoss(cfg.tau) if cfg.augmented else None
    state = {
        "epoch": 1,
        "batch": 0,
        "step": 0,
        "best_valid": math.inf,
        "best_epoch": 0,
        "seconds": 0.0,
        "sums": [0.0, 0],
    }
    best = {k: v.clone() for k, v in model.state_dict().items()}
    if resume:
        best, state = load_training_state(files.training_state(), model, opt)
        if state["epoch"] > cfg.epochs and files.summary.exists():
            raise UsageError(
                f"{run_dir} is finished: it trained {state['epoch'] - 1} epochs; to train longer resume with "
                f"--set train.epochs=N (N > {state['epoch'] - 1}); `tiedlm translate evaluate {run_dir}` scores it"
            )
        log(f"resuming {run_dir} at epoch {state['epoch']}, batch {state['batch']}")
    counts = model.parameter_counts()
    log(
        f"tiedlm translate | {cfg.source_lang}->{cfg.target_lang} | device {device} | precision {precision} | "
        f"threads {threads} | subwords {len(corpus.source_vocab)}/{len(corpus.target_vocab)} | output {cfg.output} | "
        f"parameters {counts['total']:,}"
    )
    with StopRequest() as stop:
        while state["epoch"] <= cfg.epochs:
            try:
                best = _train_epoch(
                    cfg, run_dir, corpus, model, opt, aug, state, best, device, precision, progress, log, stop
                )
            except StopRequested:  # between two batches: model, optimizer and position agree
                save_training_state(files.checkpoint("last"), model, best, opt, state)
                raise TranslationInterrupted(run_dir, state["epoch"], state["batch"]) from None
            except KeyboardInterrupt:  # a second signal: stop now, write nothing
                raise TranslationInterrupted(run_dir, state["epoch"], state["batch"], saved=False) from None
    model.load_state_dict(best)
    result = bleu(model, cfg, corpus, "test", device, precision, progress=progress)
    (run_dir / "test.hyp.txt").write_text("\n".join(result.pop("hypotheses")) + "\n")
    metrics = {
        "test_bleu": result["bleu"],
        "bleu_signature": result["signature"],
        "test_ppl": perplexity(validation_nll(model, cfg, corpus, "test", precision, device)),
        "valid_ppl": perplexity(state["best_valid"]),
        "best_epoch": state["best_epoch"],
        "epochs": cfg.epochs,
        "parameters": counts,
        "train_seconds": state["seconds"],
        "decode_seconds": result["seconds"],
        "threads": threads,
        "device": str(device),
        "precision": precision,
        "seed": cfg.seed,
        "output": cfg.output,
        "beam": cfg.beam,
        "length_penalty": cfg.length_penalty,
    }
    write_json_atomic(files.summary, metrics)
    return metrics


def _train_epoch(
    cfg: TranslationConfig,
    run_dir: Path,
    corpus: ParallelCorpus,
    model,
    opt,
    aug,
    state: dict,
    best: dict,
    device,
    precision: str,
    progress: bool,
    log,
    stop: StopRequest,
) -> dict:
    """One epoch from ``state["batch"]`` on, then validation and the epoch-end checkpoint; returns the best
    weights. Raises :class:`StopRequested` between two batches once a signal asked to stop."""
    from tqdm import tqdm

    epoch = state["epoch"]
    skipped = NonFiniteSteps(
        cfg.max_nonfinite,
        lambda what: (
            f"translation training diverged: {what}; lower lr (now {cfg.lr:g}) or raise warmup_steps "
            f"(now {cfg.warmup_steps}) in a new run"
        ),
        log,
    )
    batches = corpus.batches("train", cfg.batch_tokens, shuffle_seed=cfg.seed * 1000 + epoch, max_length=cfg.max_length)
    model.train()
    start = time.perf_counter() - state.get("epoch_seconds", 0.0)
    with tqdm(
        total=len(batches),
        initial=state["batch"],
        desc=f"translate epoch {epoch}/{cfg.epochs}",
        unit="batch",
        disable=not progress,
        leave=False,
        dynamic_ncols=True,
    ) as bar:
        for b in range(state["batch"], len(batches)):
            state["epoch_seconds"] = time.perf_counter() - start
            stop.check()
            src, tin, tout = (t.to(device) for t in corpus.tensors("train", batches[b]))
            step = state["step"] + 1
            for group in opt.param_groups:
                group["lr"] = inverse_sqrt_lr(cfg, step)
            with autocast(device, precision):
                loss, nll, n = translation_loss(model, cfg, src, tin, tout, aug)
            if not skipped(update(loss, model.parameters(), opt, cfg.clip), f"at epoch {epoch}, batch {b}"):
                state["batch"] = b + 1
                continue
            state["step"], state["batch"] = step, b + 1
            state["sums"][0] += float(nll)
            state["sums"][1] += n
            bar.update(1)
            bar.set_postfix(ppl=f"{perplexity(state['sums'][0] / state['sums'][1]):.1f}")
    seconds = time.perf_counter() - start
    valid = validation_nll(model, cfg, corpus, "valid", precision, device)
    state["seconds"] += seconds
    record = {
        "epoch": epoch,
        "train_ppl": perplexity(state["sums"][0] / state["sums"][1]),
        "valid_ppl": perplexity(valid),
        "lr": inverse_sqrt_lr(cfg, max(state["step"], 1)),
        "epoch_seconds": seconds,
        "target_tokens_per_s": state["sums"][1] / max(seconds, 1e-9),
    }
    if valid < state["best_valid"]:
        state["best_valid"], state["best_epoch"] = valid, epoch
        best = {k: v.detach().clone() for k, v in model.state_dict().items()}
    state.update(epoch=epoch + 1, batch=0, sums=[0.0, 0], epoch_seconds=0.0)
    save_training_state(RunDir(run_dir).checkpoint("last"), model, best, opt, state)
    with open(RunDir(run_dir).metrics, "a") as f:
        f.write(json.dumps(record) + "\n")
    log(
        f"epoch {epoch:3d} | train ppl {record['train_ppl']:7.2f} | valid ppl {record['valid_ppl']:7.2f} | "
        f"{record['target_tokens_per_s']:,.0f} target tok/s | {seconds:.0f} s"
    )
    return best


def translate_ids(
    model: TransformerTranslator, cfg: TranslationConfig, source: torch.Tensor, beam: int | None = None
) -> list[list[int]]:
    beam = cfg.beam if beam is None else beam
    if beam == 1:
        return greedy_search(model, source, cfg.max_decode_ratio)
    return beam_search(model, source, beam, cfg.length_penalty, cfg.max_decode_ratio)


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
    from sacrebleu.metrics import BLEU

    sources, references = corpus.text[split]
    start = time.perf_counter()
    hyps = translate_lines(
        model,
        cfg,
        corpus.source_vocab,
        corpus.target_vocab,
        sources,
        beam,
        device=device,
        precision=precision,
        progress=progress,
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
    if not TranslationConfig.saved(run_dir) or not RunDir(run_dir).training_state().is_file():
        raise UsageError(
            f"{run_dir} is not a translation run directory (needs config.toml and checkpoints/last.safetensors); "
            "train one with `tiedlm translate train`"
        )
    cfg = TranslationConfig.load_run(run_dir)
    names = ["spm.joint"] if cfg.vocab == "joint" else [f"spm.{cfg.source_lang}", f"spm.{cfg.target_lang}"]
    vocabs = [SubwordVocab(run_dir / f"{n}.model") for n in names]
    tensors, _ = load_checkpoint(RunDir(run_dir).training_state())
    model = TransformerTranslator(cfg, len(vocabs[0]), len(vocabs[-1]))
    model.load_state_dict(model_state(tensors, "best."))
    return model.eval(), cfg, vocabs[0], vocabs[-1]


def evaluate_translator(
    run_dir: Path, split: str = "test", beam: int | None = None, data_dir: str = "", progress: bool = False
) -> dict:
    """BLEU and perplexity of a run's best model on ``split``."""
    model, cfg, _, _ = load_translator(run_dir)
    if data_dir:
        cfg = dataclasses.replace(cfg, data_dir=data_dir)
    corpus = load_parallel_corpus(cfg, Path(run_dir), train_vocab=False)
    device = run_device(cfg.device)  # where it trained, or the CPU where that GPU is not here
    model.to(device)
    precision = resolve_precision(cfg.precision, device)
    result = bleu(model, cfg, corpus, split, device, precision, beam, progress=progress)
    result.pop("hypotheses")
    ppl = perplexity(validation_nll(model, cfg, corpus, split, precision, device))
    return {
        "split": split,
        "bleu": result["bleu"],
        "signature": result["signature"],
        "ppl": ppl,
        "beam": cfg.beam if beam is None else beam,
        "decode_seconds": result["seconds"],
        "parameters": model.parameter_counts(),
    }
