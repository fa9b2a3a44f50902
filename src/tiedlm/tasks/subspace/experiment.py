"""Inan et al. (2017) §6.2 / Figure 1: does the augmented loss pull W towards the span of Lᵀ?

Each run trains a 2-layer LSTM LM with an *untied* output layer on a random contiguous slice of PTB
train, with no regularisation, every input-embedding row renormalised to unit norm after each
update, and loss (6.1) J_tot = β·J_aug·τ²|V| + (1−β)·J; it then measures
``subspace_distance(Lᵀ, W)``. Two sweeps, each point averaged over ``runs`` seeds:
(a) β ∈ {0, 0.1, …, 1} at τ = 10; (b) τ ∈ {1, 2, 5, 10, 20, 40} at β = 1.

Choices the paper leaves open (recorded in every CSV row's settings and in the summary):
the optimiser (SGD by default, with the loss summed over the BPTT steps as in the LM presets: SGD's
updates are sums of gradients, so they stay in the span the theory of §4 reasons about; Adam's
per-coordinate scaling does not), epochs, batch, BPTT and init range.
Run r uses seed ``seed + r`` for both its slice and its initialisation, so every point of a
sweep sees the same r slices (paired comparison).
"""

from __future__ import annotations

import csv
import math
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from ...analysis.subspace import subspace_distance
from ...data import batchify, bptt_windows, load_corpus
from ...errors import RunInterrupted, UsageError
from ...evaluation import stream_logits
from ...losses import LanguageModelLoss
from ...models import LanguageModel
from ...models.config import ModelConfig
from ...models.encoders.state import detach_state
from ...run_dir import RunDir, write_figure_atomic, write_json_atomic, write_text_atomic
from ...runtime import autocast
from ...train.checkpoint import carried_state, state_tensors
from ...train.loop import Progress, Task, run
from ...train.optimizers import make_optimizer
from ...train.step import update
from ...train.wall_time import duration
from .config import SubspaceExperimentConfig

PAPER_CLAIMS = {"beta0_tau10": 1.0, "beta1_tau10": 0.06}  # Inan et al. §6.2, Figure 1 ("almost 1", "around 0.06")
# the columns of subspace.csv: one row a trained model
CSV_FIELDS = (
    "sweep_point beta tau run seed slice_start distance train_ppl train_aug vocab_size epochs seconds settings"
).split()


def renormalise_rows_(weight: torch.Tensor) -> None:
    """Constrain every input-embedding row to unit L2 norm (§6.2), in place."""
    with torch.no_grad():
        weight.div_(weight.norm(dim=1, keepdim=True).clamp_min(1e-12))


def draw_slice(train: torch.Tensor, words: int, seed: int) -> tuple[int, torch.Tensor]:
    """A random contiguous ``words``-token slice of ``train`` (seeded)."""
    if words > train.numel():
        raise UsageError(f"--slice-words {words} exceeds the training set ({train.numel()} tokens)")
    start = int(np.random.default_rng(seed).integers(0, train.numel() - words + 1))
    return start, train[start : start + words]


def build_model(vocab_size: int, seed: int, cfg: SubspaceExperimentConfig) -> LanguageModel:
    """The §6.2 model: untied output, no dropout, unit-norm input rows, W uniform in ±output_init_range.

    Why W's initial scale matters: the subspace distance weighs every one of W's d directions equally,
    and SGD never changes the part of W that the hidden states do not excite (its gradient Σ g_t h_tᵀ
    is zero there). A W drawn in ±0.1 keeps a random component whose norm (~0.06·sqrt(|V|·d)) dwarfs
    what J_aug builds in a short training run, so the distance stays near its random-subspace value
    whatever β is; starting W at 0 shows where the loss pushes it.
    """
    torch.manual_seed(seed)
    encoder = {"name": "vd-lstm", "hidden_size": cfg.model.hidden_size, "layers": cfg.model.layers, "dropout": 0.0}
    mcfg = ModelConfig(
        embedding_size=cfg.model.hidden_size, init_range=cfg.model.init_range, output="full", encoder=encoder
    )
    model = LanguageModel(mcfg, vocab_size)
    if cfg.model.output_init_range >= 0:
        with torch.no_grad():
            model.output.weight.uniform_(-cfg.model.output_init_range, cfg.model.output_init_range)
            model.output.bias.zero_()
    renormalise_rows_(model.embedding.weight)
    return model


class SubspacePoint(Task):
    """One run of the experiment (one point of a sweep, one seed) on the training loop of every task
    (:mod:`tiedlm.train.loop`): an untied 2-layer LSTM on ``tokens`` with loss (6.1), every input-embedding row
    renormalised after each update, no validation split (the epoch's training cross-entropy is its score) and
    no best weights: §6.2 measures the final ``W``. A stopped run resumes from its last window (the carried
    state is in its checkpoint)."""

    unit = "window"
    keeps_best = False  # §6.2 measures the final weights

    def __init__(self, tokens, vocab_size: int, beta: float, tau: float, seed: int, cfg, on_epoch=None, out=None):
        self.tokens, self.vocab_size, self.beta, self.tau, self.seed = tokens, vocab_size, beta, tau, seed
        self.cfg, self.on_epoch, self.out = cfg, on_epoch, out
        self.epochs, self.max_nonfinite = cfg.train.epochs, cfg.train.max_nonfinite

    def setup(self, run_dir: Path, resume: bool, log) -> None:
        cfg = self.cfg
        if self.out is not None:  # the threads and precision the harness resolved, before the first step: kept
            cfg.save(self.out)  # by a resumed sweep, however busy the machine is then
        self.model = build_model(self.vocab_size, self.seed, cfg).to(self.device)
        self.loss_fn = LanguageModelLoss(augmented=self.beta > 0, tau=self.tau, form="beta", beta=self.beta)
        t = cfg.train
        self.optimizer = make_optimizer(t.optimizer, self.model.parameters(), t.lr, 0.0)
        # sum_over_time: the loss summed over the BPTT steps and averaged over the batch (Zaremba et al.'s convention)
        self.scale = float(t.bptt) if t.loss_reduction == "sum_over_time" else 1.0
        self.data, self.state = batchify(self.tokens.to(self.device), cfg.train.batch_size), None
        self.t0 = time.perf_counter()

    def start_epoch(self, progress: Progress) -> None:
        self.model.train()
        self.progress = progress
        if progress.batch == 0:
            self.state = self.model.init_state(self.cfg.train.batch_size)

    def batches(self, epoch: int) -> list:
        return list(bptt_windows(self.data, self.cfg.train.bptt))

    def train_step(self, batch, progress: Progress) -> tuple[bool, dict]:
        k, x, y = batch
        with autocast(self.device, self.precision):
            logits, state = self.model(x, detach_state(self.state))
        total, ce, _ = self.loss_fn(logits, y, self.model.input_embeddings)
        made = update(total * self.scale, self.model.parameters(), self.optimizer, self.cfg.train.clip)
        self.state = state
        if made:
            renormalise_rows_(self.model.embedding.weight)
        return made, ({"loss": float(ce) * y.numel(), "count": y.numel()} if made else {})

    def validate(self) -> float:
        """The epoch's mean training cross-entropy (there is no validation split)."""
        sums = self.progress.sums
        return sums.get("loss", math.inf) / max(sums.get("count", 0), 1)

    def after_validation(self, score: float, progress: Progress) -> None:
        if self.on_epoch:
            self.on_epoch()

    def epoch_record(self, progress: Progress, seconds: float, wall: float, score: float) -> dict:
        return {"epoch": progress.epoch, "train_ppl": math.exp(score), "epoch_time_s": seconds}

    def epoch_line(self, record: dict, seconds: float) -> str:
        return f"epoch {record['epoch']}: train ppl {record['train_ppl']:.2f}"

    def extra_state(self, progress: Progress) -> tuple[dict, dict]:
        return state_tensors(self.state), {}

    def load_extra_state(self, tensors: dict, meta: dict, progress: Progress) -> None:
        self.state = carried_state(tensors, self.device)

    def summary(self, progress: Progress, history: list[dict]) -> dict:
        t = self.cfg.train
        ce, aug = _fit(self.model, self.tokens.to(self.device), t.batch_size, t.bptt, self.tau, self.precision)
        distance = subspace_distance(self.model.input_embeddings, self.model.output.weight)
        return {
            "distance": distance,
            "train_ppl": math.exp(ce),
            "train_aug": aug,
            "seconds": time.perf_counter() - self.t0,
        }

    def diverged(self, what: str, run_dir: Path, checkpoint_written: bool) -> str:
        where = f"beta {self.beta:g}, tau {self.tau:g}"
        return f"the subspace run at {where} diverged: {what}; lower --lr (now {self.cfg.train.lr:g})"

    def interrupted(self, run_dir: Path, progress: Progress, saved: bool, final: bool = False) -> RunInterrupted:
        kept = "its checkpoint" if saved else "its last epoch"
        return RunInterrupted(
            f"subspace experiment interrupted at beta {self.beta:g}, tau {self.tau:g}, seed {self.seed}, epoch "
            f"{progress.epoch} ({kept} kept); resume with: {self.command} --resume {self.out or run_dir}"
        )


def train_point(
    tokens: torch.Tensor,
    vocab_size: int,
    beta: float,
    tau: float,
    seed: int,
    cfg: SubspaceExperimentConfig,
    on_epoch=None,
    folder: Path | None = None,
    out: Path | None = None,
) -> dict:
    """Train one model on ``tokens`` with loss (6.1) (:class:`SubspacePoint` on the training loop, its run
    folder ``folder``: resumed where it holds a stopped run, a temporary one where None; ``out``: the experiment's
    folder, which gets the settings as resolved) and return its subspace distance and final training fit."""
    task = SubspacePoint(tokens, vocab_size, beta, tau, seed, cfg, on_epoch, out)
    if folder is None:
        with tempfile.TemporaryDirectory() as tmp:
            return run(task, Path(tmp) / "run", progress=False, log=lambda *a, **k: None)
    files = RunDir(folder)
    if files.summary.is_file():  # finished, its row not yet written
        return files.read_summary()
    return run(task, folder, resume=files.checkpoint("last").is_file(), progress=False, log=lambda *a, **k: None)


@torch.inference_mode()
def _fit(model, tokens: torch.Tensor, batch_size: int, bptt: int, tau: float, precision: str) -> tuple[float, float]:
    """Mean cross-entropy and mean KL(ỹ‖ŷ) at temperature τ over the training slice, in eval mode."""
    aug_loss = LanguageModelLoss(augmented=True, tau=tau)
    ce_sum = aug_sum = 0.0
    n = 0
    for logits, y in stream_logits(model, tokens, batch_size, bptt, precision):
        _, ce, aug = aug_loss(logits, y, model.input_embeddings)
        ce_sum += float(ce) * y.numel()
        aug_sum += float(aug) * y.numel()
        n += y.numel()
    return ce_sum / n, aug_sum / n


def _done_rows(csv_path: Path, settings: str) -> dict[tuple, dict]:
    if not csv_path.exists():
        return {}
    with csv_path.open() as f:
        rows = [r for r in csv.DictReader(f) if r.get("settings") == settings]
    return {(float(r["beta"]), float(r["tau"]), int(r["run"])): r for r in rows}


def run_experiment(cfg: SubspaceExperimentConfig, out: Path, progress: bool = True, log=print) -> dict:
    """Run (or finish) both sweeps; rows go to ``out/subspace.csv`` as each run ends, and a stopped run keeps its
    checkpoint in ``out/points/POINT`` (the training loop's), so an interrupted experiment resumes where it
    stopped, in the middle of a run too. Returns the aggregated summary (also written as JSON/markdown/PNG)."""
    from tqdm import tqdm

    cfg.validate()
    out.mkdir(parents=True, exist_ok=True)
    cfg.save(out)  # what --resume finishes (each point saves it again with its threads and precision resolved)
    csv_path = out / "subspace.csv"
    settings = cfg.settings()
    done = _done_rows(csv_path, settings)
    corpus = load_corpus(cfg.data.corpus, cfg.data.data_dir)
    todo = [(b, t, r) for r in range(cfg.sweep.runs) for (b, t) in cfg.points() if (b, t, r) not in done]
    log(
        f"subspace experiment: {len(cfg.points())} points x {cfg.sweep.runs} runs, {len(done)} already in {csv_path}, "
        f"{len(todo)} to train ({cfg.train.epochs} epochs each, precision {cfg.train.precision})"
    )
    new_file = not csv_path.exists()
    bar = tqdm(total=len(todo) * cfg.train.epochs, unit="epoch", disable=not progress, dynamic_ncols=True)
    with csv_path.open("a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=CSV_FIELDS)
        if new_file:
            writer.writeheader()
        for beta, tau, r in todo:
            seed = cfg.train.seed + r
            start, tokens = draw_slice(corpus.train, cfg.data.slice_words, seed)
            vocab_size = len(corpus.vocab)
            if cfg.data.vocab == "slice":
                ids, tokens = torch.unique(tokens, return_inverse=True)
                vocab_size = ids.numel()
            bar.set_description(f"beta={beta:g} tau={tau:g} run {r + 1}/{cfg.sweep.runs}")
            folder = out / "points" / f"beta={beta:g},tau={tau:g},run={r}"
            res = train_point(tokens, vocab_size, beta, tau, seed, cfg, lambda: bar.update(1), folder, out)
            bar.set_postfix(distance=f"{res['distance']:.3f}", train_ppl=f"{res['train_ppl']:.1f}")
            writer.writerow(
                {
                    "sweep_point": f"beta={beta:g},tau={tau:g}",
                    "beta": beta,
                    "tau": tau,
                    "run": r,
                    "seed": seed,
                    "slice_start": start,
                    "distance": f"{res['distance']:.6f}",
                    "train_ppl": f"{res['train_ppl']:.4f}",
                    "train_aug": f"{res['train_aug']:.6g}",
                    "vocab_size": vocab_size,
                    "epochs": cfg.train.epochs,
                    "seconds": f"{res['seconds']:.1f}",
                    "settings": settings,
                }
            )
            f.flush()
            shutil.rmtree(folder)  # its row is written: the run folder (checkpoints of a stopped run) goes
    bar.close()
    if (out / "points").is_dir() and not any((out / "points").iterdir()):
        (out / "points").rmdir()
    return summarise(cfg, out)


def random_subspace_distance(d: int, n: int) -> float:
    """Expected distance between two random d-dimensional subspaces of R^n: E[sin²θ] = 1 − d/n for each of
    the d principal angles, so the distance is sqrt(1 − d/n) (≈ 0.96 for d = 300, n ≈ 3,500 slice words)."""
    return math.sqrt(1.0 - d / n)


def summarise(cfg: SubspaceExperimentConfig, out: Path) -> dict:
    """Aggregate ``subspace.csv`` into ``summary.json``, ``subspace.png`` (Figure 1) and ``summary.md``."""
    rows = _done_rows(out / "subspace.csv", cfg.settings())

    def stats(beta, tau):
        point = [r for (b, t, _), r in rows.items() if b == beta and t == tau]
        if not point:
            return None
        vals, ppl, aug = ([float(r[k]) for r in point] for k in ("distance", "train_ppl", "train_aug"))
        return {
            "beta": beta,
            "tau": tau,
            "n": len(vals),
            "mean": float(np.mean(vals)),
            "std": float(np.std(vals, ddof=1)) if len(vals) > 1 else None,  # one run has no spread to show
            "min": min(vals),
            "max": max(vals),
            "train_ppl_mean": float(np.mean(ppl)),
            "train_aug_mean": float(np.mean(aug)),
        }

    sweep_a = [s for b in cfg.sweep.betas if (s := stats(b, cfg.sweep.beta_sweep_tau))]
    sweep_b = [s for t in cfg.sweep.taus if (s := stats(cfg.sweep.tau_sweep_beta, t))]
    seconds = sum(float(r["seconds"]) for r in rows.values())
    vocab = float(np.mean([int(r["vocab_size"]) for r in rows.values()])) if rows else 0.0
    random = random_subspace_distance(cfg.model.hidden_size, vocab) if vocab > cfg.model.hidden_size else None
    summary = {
        "config": cfg.flat(),
        "beta_sweep": sweep_a,
        "tau_sweep": sweep_b,
        "paper_claims": PAPER_CLAIMS,
        "train_seconds": seconds,
        "runs_in_csv": len(rows),
        "mean_vocab_size": vocab,
        "random_distance": random,
    }
    write_json_atomic(out / "summary.json", summary)
    _plot(summary, out / "subspace.png")
    write_text_atomic(out / "summary.md", _markdown(summary))
    return summary


def _plot(summary: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cfg = summary["config"]
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for ax, key, x, label, title in (
        (axes[0], "beta_sweep", "beta", "β (share of the augmented loss)", f"(a) τ = {cfg['beta_sweep_tau']:g}"),
        (axes[1], "tau_sweep", "tau", "τ (temperature)", f"(b) β = {cfg['tau_sweep_beta']:g}"),
    ):
        pts = summary[key]
        if pts:
            xs = [p[x] for p in pts]
            n = max(p["n"] for p in pts)
            label = f"tiedlm (mean ± sd over {n} runs)" if n > 1 else "tiedlm (one run a point)"
            means, sds = [p["mean"] for p in pts], [p["std"] or 0.0 for p in pts]
            ax.errorbar(xs, means, yerr=sds, marker="o", capsize=3, label=label)
        if random := summary.get("random_distance"):
            ax.axhline(random, color="grey", linestyle=":", linewidth=1, label=f"two random subspaces ({random:.3f})")
        if key == "beta_sweep":
            paper = [PAPER_CLAIMS["beta0_tau10"], PAPER_CLAIMS["beta1_tau10"]]
            ax.scatter([0, 1], paper, marker="x", color="red", zorder=3, label="paper (text of §6.2)")
        else:
            ax.set_xscale("log", base=2)
            if pts:
                ax.set_xticks(xs, [f"{t:g}" for t in xs])
                ax.minorticks_off()
        ax.set_xlabel(label)
        ax.set_ylabel("subspace distance d(Lᵀ, W)")
        ax.set_ylim(0, 1.05)
        ax.set_title(title)
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:  # no labelled artist: no legend (and no warning)
            ax.legend(fontsize=8)
    fig.suptitle("Inan et al. (2017) Figure 1: subspace distance between input embedding and output projection")
    fig.tight_layout()
    write_figure_atomic(path, fig, dpi=120)
    plt.close(fig)


def _sd(std: float | None) -> str:
    return "–" if std is None else f"{std:.3f}"


def _markdown(summary: dict) -> str:
    cfg = summary["config"]
    lines = [
        "# Subspace validation experiment (Inan et al. 2017, §6.2 / Figure 1)",
        "",
        f"{summary['runs_in_csv']} trained models, {duration(summary['train_seconds'])} of training. "
        f"Settings: slice {cfg['slice_words']} words of PTB train, vocabulary {cfg['vocab']}, "
        f"{cfg['layers']}x{cfg['hidden_size']} LSTM, untied output, no dropout, unit-norm input rows, "
        f"{cfg['optimizer']} lr {cfg['lr']} (momentum {cfg['momentum']}), clip {cfg['clip']}, "
        f"{cfg['epochs']} epochs, batch {cfg['batch_size']}, "
        f"BPTT {cfg['bptt']}, init ±{cfg['init_range']:g} (output W "
        f"{'the same' if cfg['output_init_range'] < 0 else '±%g' % cfg['output_init_range']}), "
        f"precision {cfg['precision']}, seeds {cfg['seed']}..{cfg['seed'] + cfg['runs'] - 1}.",
        "",
        "| sweep | β | τ | runs | distance mean | sd | min | max | train ppl (mean) | train J_aug (mean KL) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for key, name in (("beta_sweep", "a"), ("tau_sweep", "b")):
        for p in summary[key]:
            lines.append(
                f"| {name} | {p['beta']:g} | {p['tau']:g} | {p['n']} | {p['mean']:.3f} | {_sd(p['std'])} | "
                f"{p['min']:.3f} | {p['max']:.3f} | {p['train_ppl_mean']:.2f} | {p['train_aug_mean']:.3g} |"
            )
    by = {(p["beta"], p["tau"]): p for p in summary["beta_sweep"] + summary["tau_sweep"]}
    lines += ["", "Paper (§6.2 text): distance ≈ 1 at β = 0 and ≈ 0.06 at β = 1 (τ = 10); already low at τ = 2."]
    if summary.get("random_distance"):
        lines.append(
            f"Two random {cfg['hidden_size']}-dimensional subspaces of the mean slice vocabulary "
            f"({summary['mean_vocab_size']:.0f} words) are {summary['random_distance']:.3f} apart."
        )
    b0, b1 = by.get((0.0, cfg["beta_sweep_tau"])), by.get((1.0, cfg["beta_sweep_tau"]))
    if b0 and b1:
        lines.append(
            f"Measured: {b0['mean']:.3f} at β = 0 and {b1['mean']:.3f} at β = 1 (τ = {cfg['beta_sweep_tau']:g})."
        )
    t2 = by.get((cfg["tau_sweep_beta"], 2.0))
    if t2:
        lines.append(f"Measured at τ = 2, β = {cfg['tau_sweep_beta']:g}: {t2['mean']:.3f}.")
    return "\n".join(lines) + "\n"
