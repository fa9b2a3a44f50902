"""``tiedlm reproduce``: the papers' tables as lists of runs, started, resumed or skipped, and rendered.

A table is a list of :class:`RunSpec` (preset + overrides + seed, with the paper's numbers for that row) at a
scale: ``budget`` (what this 2-core CPU can train) or ``paper`` (the papers' settings, for a GPU). Each run is
an ordinary ``tiedlm train`` run in ``RUNS/<table>/<run>``: missing runs are started, interrupted ones
resumed exactly (``train --resume``), finished ones skipped. The page ``OUT/<table>.md`` sets ours beside
the paper's numbers, with parameters, epochs, wall time, device, tokens/s, the exact command of every run
and the validation curves.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from .errors import UsageError
from .run_dir import RunDir, write_json_atomic

SCALES = ("budget", "paper")


@dataclass(frozen=True)
class RunSpec:
    name: str
    preset: str  # a language-model preset; "" for the tagger and the translator (their defaults)
    overrides: tuple[str, ...] = ()
    paper: tuple[float | None, float | None] = (None, None)  # the paper's (valid, test) figure for this row
    note: str = ""
    task: str = "lm"  # lm (tiedlm train) | tag (tiedlm tag train) | translate (tiedlm translate train)
    # "TABLE/RUN": this row is that row of another table (the same config, checked by a test), so both read,
    # train and publish one run folder, RUNS/TABLE/RUN, instead of training the same model twice
    same_as: str = ""

    def folder(self, table_name: str) -> Path:
        """This row's run folder under a ``--runs`` folder (its own, or the row it is the same as)."""
        return Path(self.same_as) if self.same_as else Path(table_name) / self.name


# what each task's page shows from a run's summary.json: (column title, summary keys of the valid and test figure,
# format)
METRICS = {
    "lm": ("valid / test perplexity (test: batch 1)", ("valid_ppl", "test_ppl"), "{:.2f}"),
    "tag": ("dev / test accuracy (%)", ("dev_accuracy", "test_accuracy"), "{:.2%}"),
    "translate": ("valid perplexity / test BLEU", ("valid_ppl", "test_bleu"), "{:.2f}"),
}


@dataclass(frozen=True)
class Table:
    name: str
    title: str
    source: str
    runs: dict[str, tuple[RunSpec, ...]] = field(default_factory=dict)  # scale -> runs
    notes: str = ""  # where ours differs from the paper and what was tried (rendered under the table)
    bands_baseline: str = ""  # a run's name: the page shows Figure 3's bands of the finished runs against it


BUDGET_AWD_EPOCHS = 40  # the CPU-budget AWD-LSTM comparisons: a stated epoch count both models reach


def _family(
    base: str, layers: dict[str, tuple[str, ...]], same_as: dict[str, str], notes: dict[str, str]
) -> tuple[RunSpec, ...]:
    return tuple(
        RunSpec(name, base, sets, note=notes.get(name, ""), same_as=same_as.get(name, ""))
        for name, sets in layers.items()
    )


_DRILL = (
    "model.output=drill",
    "model.output.dropout=0.6",
    "model.output.variational=true",
    "model.output.activation=sigmoid",
)
_OUTPUT_LAYERS = {
    "full": ("model.output=full",),
    "tied": ("model.output=tied", "model.output.bias=true"),
    "bilinear": ("model.output=bilinear",),
    "dual": ("model.output=dual", "model.output.joint_size=200"),
    "dual-res": (
        "model.output=dual",
        "model.output.residual=true",  # d_j = d (joint_size 0), as the residual needs
        "model.output.dropout=0.6",
        "model.output.variational=true",
        "model.output.init_range=0.1",
    ),
    "drill-1": (*_DRILL, "model.output.depth=1"),
    "drill-4": (*_DRILL, "model.output.depth=4"),
}
_OUTPUT_NOTES = {
    "dual": "eqs. 4-5 as written: no dropout, no residual",
    "dual-res": "Table 4's dual setting, its footnote 6: dropout 0.6 on E, residual to E and h",
}
_INAN_SMALL = (
    RunSpec("vd", "ptb-small-vd", paper=(None, 87.3)),
    RunSpec("al", "ptb-small-al", paper=(None, 82.9)),
    RunSpec("re", "ptb-small-re", paper=(None, 85.1)),
    RunSpec("real", "ptb-small-real", paper=(None, 82.7)),
    RunSpec("re-bias", "ptb-small-re", ("model.output.bias=true",), note="standard tying with a learnable bias"),
    *(
        RunSpec(f"real-bias-tau{t}", "ptb-small-real-bias", (f"loss.tau={t}",), note=f"tuned setting: tau = {t}")
        for t in (2, 5, 10)
    ),
)

_POS = (
    *(
        RunSpec(f"dense-{k}", "", (f"model.embedding_size={k}", "train.epochs=10", "train.seed=1"), task="tag")
        for k in (8, 16, 32, 64, 128)
    ),
    *(
        RunSpec(
            f"sparse-128-{d:g}",
            "",
            ("model.embedding_size=128", f"model.embedding_density={d}", "train.epochs=10", "train.seed=1"),
            task="tag",
        )
        for d in (0.5, 0.25, 0.125, 0.0625)
    ),
)
_MT = (
    RunSpec("tied", "", ("model.output=tied",), paper=(None, 27.3), note="WMT14 in the paper", task="translate"),
    RunSpec("drill", "", ("model.output=drill",), paper=(None, 28.1), note="WMT14 in the paper", task="translate"),
)

# The budget rows train in fp32 on every machine: where the CPU has bf16 (AVX512-BF16), "auto" would train
# in bf16 there, and a table whose rows were trained on different machines would then compare precisions as
# well as models. The price on such a CPU: bf16 trains the small VD-LSTM 1.39x faster at 1 thread (1.63x with
# the augmented loss; benchmarks/throughput.py, docs/results.md); `--set train.precision=auto` takes it.
BUDGET_PRECISION = "train.precision=fp32"


def _budget_in_fp32(t: Table) -> Table:
    """``t`` with ``BUDGET_PRECISION`` before the overrides of its budget rows (the tagger has no precision)."""
    fp32 = tuple(
        s if s.task == "tag" else replace(s, overrides=(BUDGET_PRECISION, *s.overrides)) for s in t.runs["budget"]
    )
    return replace(t, runs={**t.runs, "budget": fp32})


TABLES: dict[str, Table] = {
    t.name: _budget_in_fp32(t)
    for t in (
        Table(
            "inan2017-table1-small",
            "Inan et al. (2017) Table 1, small PTB models",
            "Inan, Khosravi & Socher (2017), Table 1",
            {"budget": _INAN_SMALL, "paper": _INAN_SMALL},
            "The paper's VD (87.3) is matched by our earlier VD run (87.51 test, in [results.md](../results.md); its "
            "folder predates this page, so the vd row, which is also the full row of "
            "[pappas2019-table4-small](pappas2019-table4-small.md), is trained again in this layout). AL and REAL "
            "as the paper states them trail its numbers by 4-5 points (86.83 vs 82.9, 87.43 vs 82.7). "
            "REAL with b = 0 reached 100.30 with ỹ fixed and 87.43 with gradients through ỹ; "
            "standard tying with a learnable bias (re-bias, 85.24) gives the paper's RE gain (85.1). What was tried "
            "(target gradients, the ICLR schedule, re-training from the final weights, input dropout) is in "
            "[Why REAL trails VD](../results.md#why-real-trails-vd-the-augmented-loss-together-with-b--0). "
            "The τ sweep rows (REAL with a bias, τ = 2, 5, 10) are not run yet.",
        ),
        Table(
            "pappas2019-table4-small",
            "Output layers on the small VD-LSTM encoder (Pappas & Henderson Table 4 ordering)",
            "Pappas & Henderson (2019), Table 4 (AWD-LSTM there; the small encoder here)",
            {
                s: _family(
                    "ptb-small-re",
                    _OUTPUT_LAYERS,
                    {"full": "inan2017-table1-small/vd", "tied": "inan2017-table1-small/re-bias"},
                    _OUTPUT_NOTES,
                )
                for s in SCALES
            },
            "The paper's Table 4 uses the AWD-LSTM; its test ordering there is full 66.8 > bilinear 58.5 > tied 57.3 "
            "> dual 56.4 > DRILL-1 56.2 > DRILL-4 55.7. These rows put the same output layers on the small 2x200 "
            "VD-LSTM of Inan et al., 40 epochs each, seed 1111, to compare their order at convergence; the paper "
            "has no numbers for this encoder. The full and tied rows are the vd and re-bias rows "
            "of [inan2017-table1-small](inan2017-table1-small.md): the same configs, so both pages read one run "
            "folder each. "
            "Two dual rows: `dual` is eqs. 4-5 as the paper writes them; `dual-res` is the setting behind Table 4's "
            'dual figure, which its footnote 6 states ("we also used dropout and residual connections to E and '
            "h\"): g_out(E) = σ(δ(E) U + b_u) + E, g_in(h) = σ(V h + b_v) + h, as the authors' code runs a dual "
            "encoder of depth 1 (`--joint_emb_dual`), with the DRILL rows' dropout (0.6, variational) and "
            "initialisation (uniform ±0.1). "
            "Where the order differs from the paper's: dual as eqs. 4-5 are written is the worst layer here, 9.4 "
            "points behind tied (94.63 vs 85.24), where the paper's dual is 0.9 ahead of tied; dual-res asks "
            "whether footnote 6's residuals and dropout make that difference, and is not run yet. DRILL-1 and "
            "DRILL-4 are level (84.60, 84.61), where depth gains 0.5 in the paper (on the 400/1150 AWD-LSTM "
            "over 500+ epochs: the paper-scale rows of pappas2019-table4-awd). In the bands, DRILL-1 gains on "
            "every band below 1,000 occurrences and DRILL-4 on 10-1,000, both losing on the frequent words: "
            "the paper's Figure 3 finds DRILL's gain on the rare words too.",
            bands_baseline="tied",
        ),
        Table(
            "pappas2019-table4-awd",
            "AWD-LSTM tied vs DRILL-4 on PTB (Pappas & Henderson Table 4)",
            "Pappas & Henderson (2019), Table 4",
            {
                "budget": (RunSpec("tied", "ptb-awd-tied-budget"), RunSpec("drill-4", "ptb-awd-drill-budget")),
                "paper": (
                    RunSpec("tied", "ptb-awd-tied", paper=(60.0, 57.3)),
                    RunSpec("drill-4", "ptb-awd-drill", paper=(58.2, 55.7)),
                ),
            },
            "The paper's rows are 500 epochs plus the finetune stage of the full AWD-LSTM (400/1150): GPU runs. "
            "Their plan, with the commands that resume them exactly across device calls, is in "
            "[paper-scale-plan.md](paper-scale-plan.md). The budget rows (embedding 200, hidden 400, 6 epochs) "
            "check that the recipe runs end to end on a CPU, not the paper's numbers; the converged CPU "
            "comparison of the output layers is [pappas2019-table4-small](pappas2019-table4-small.md).",
        ),
        Table(
            "demeester2018-lm",
            "Dense vs predefined-sparse AWD-LSTM (Demeester et al. Table 1)",
            "Demeester et al. (2018), Table 1 (without finetune: dense 58.8, sparse 57.9 test)",
            {
                "budget": tuple(
                    RunSpec(
                        f"{kind}-seed{seed}",
                        f"ptb-awd-{preset}-budget",
                        (f"train.seed={seed}", f"train.epochs={BUDGET_AWD_EPOCHS}"),
                    )
                    for seed in (141, 142)
                    for kind, preset in (("dense", "tied"), ("sparse", "sparse"))
                ),
                "paper": (
                    RunSpec("dense", "ptb-awd-tied", paper=(None, 58.8)),
                    RunSpec("sparse", "ptb-awd-sparse", paper=(None, 57.9)),
                ),
            },
            f"At the budget scale both models train {BUDGET_AWD_EPOCHS} epochs (the budget presets stop at 6, far from "
            "convergence; an AWD-LSTM keeps improving for hundreds of epochs, so a stated count that both reach is "
            "the comparison the page makes), with the presets' NT-ASGD switch (non-monotone interval 5) and no "
            "finetune, two seeds each. The sparse model is the authors' shape: every layer sparse and 1.5x wider, "
            "with the dense model's parameters (within 0.02%). The paper's figures are for the full-size models "
            "(means of 5 runs), so they sit beside the paper-scale rows only.",
        ),
        Table(
            "transformer-lm",
            "Transformer LM on PTB: tied vs DRILL",
            "Pappas & Henderson (2019) §4 output layers",
            {s: (RunSpec("tied", "ptb-transformer-tied"), RunSpec("drill", "ptb-transformer-drill")) for s in SCALES},
            "The paper puts DRILL on a Transformer for translation only (Table 5: +0.8 BLEU); this table asks the "
            "same question of a Transformer language model on PTB, trained to the end of its presets (4 pre-norm "
            "blocks, d 256, 12 epochs of AdamW with warm-up and decay; DRILL depth 2, sigmoid, dropout 0.3). There "
            "is no paper number to put beside it. The tied Transformer (5.72M parameters, test 112.25) trails the "
            "tied 2x200 VD-LSTM of [pappas2019-table4-small](pappas2019-table4-small.md) (2.65M, 85.24) by 27 "
            "points: on a corpus of PTB's size, at 12 epochs, the LSTM is the stronger encoder; the question here "
            "is only the output layer's difference. Its valid perplexity still fell by 1.8-3.7 an epoch over the "
            "last four epochs, so it had not converged when its preset's schedule ended.",
            bands_baseline="tied",
        ),
        Table(
            "demeester2018-pos",
            "POS tagging with dense vs frequency-sparse embeddings (Demeester et al. 2018 §4.2, UD English-EWT)",
            "Demeester et al. (2018) §4.2: sparse embeddings reach dense accuracy at a fraction of the parameters",
            {s: _POS for s in SCALES},
            "Dense embeddings of size k against sparse ones of size 128 whose density gives the trainable "
            "parameters of dense 64, 32, 16 and 8; BiLSTM 100 per direction, Adam, dropout 0.3, 10 epochs, seed 1. "
            "The paper reports this as a figure, not a table, so there is no number to put beside ours: the claim "
            "checked is the order (sparse at or above dense with the same trainable parameters). An earlier run "
            "of the same settings is in ../../experiments/results/pos_tagging/results.md.",
        ),
        Table(
            "pappas2019-mt",
            "Translation: Transformer-tied vs Transformer-DRILL (Pappas & Henderson 2019 §4.3), Multi30k En-De",
            "Pappas & Henderson (2019) Table 5: 27.3 vs 28.1 BLEU on WMT14 En-De (Transformer base)",
            {s: _MT for s in SCALES},
            "The paper's numbers are on WMT14 with the Transformer base (BLEU 27.3 tied vs 28.1 DRILL, +0.8); this "
            "table trains the default CPU-sized translator (d 256, 3+3 layers, joint 8k BPE, 12 epochs) on "
            "Multi30k, so only the difference, not the level, compares. An earlier pair is in "
            "../../experiments/results/translation/summary.md.",
        ),
    )
}


def table(name: str) -> Table:
    if name not in TABLES:
        import difflib

        close = difflib.get_close_matches(name, TABLES, n=3, cutoff=0.5)
        hint = f" (similar: {', '.join(close)})" if close else ""
        raise UsageError(f"unknown table {name!r}{hint}; `tiedlm reproduce --list` names them all")
    return TABLES[name]


def run_status(run_dir: Path) -> str:
    """finished | running (trained by another process now) | interrupted | missing."""
    return RunDir(run_dir).status()


def train_command(spec: RunSpec, run_dir: Path, extra: list[str], threads: int) -> list[str]:
    """The ``tiedlm train`` (``tag train``, ``translate train``) arguments that start or resume ``spec``."""
    if run_status(run_dir) in ("interrupted", "running"):
        command = ["train"] if spec.task == "lm" else [spec.task, "train"]
        return [*command, "--resume", str(run_dir), "--no-progress", "--threads", str(threads)]
    start, sets = _start(spec, extra)
    return [*start, "--out", str(run_dir), "--no-progress", "--threads", str(threads), *sets]


def _start(spec: RunSpec, extra: list[str]) -> tuple[list[str], list[str]]:
    """The command that starts ``spec`` (``train PRESET``, ``tag train``, ...) and its ``--set`` arguments."""
    command = ["train", spec.preset] if spec.task == "lm" else [spec.task, "train"]
    return command, [a for s in (*spec.overrides, *extra) for a in ("--set", s)]


def rerun_command(spec: RunSpec, extra: list[str]) -> str:
    """The command line that starts ``spec`` afresh (``RUN`` for its folder; thread count left to the default)."""
    start, sets = _start(spec, extra)
    return shlex.join(["tiedlm", *start, "--out", "RUN", *sets])


def run_config(spec: RunSpec, extra: list[str]):
    """The config a run of ``spec`` trains with (the table's and the caller's overrides applied)."""
    if spec.task == "tag":
        from .tagging import TaggerConfig

        return TaggerConfig().with_overrides([*spec.overrides, *extra])
    if spec.task == "translate":
        from .translation import TranslationConfig

        return TranslationConfig().with_overrides([*spec.overrides, *extra])
    from .config import Config

    return Config.load(spec.preset).with_overrides([*spec.overrides, *extra])


def data_settings(task: str, folder: str) -> list[str]:
    """``reproduce --data FOLDER`` as the task's settings: the LM's corpus, or the tagger's/translator's own data."""
    return [f"data.name={folder}"] if task == "lm" else [f"data.data_dir={folder}", "data.own_data=true"]


def plan(tab: Table, scale: str, runs_dir: Path, extra: list[str]) -> list[dict]:
    """One row per run: its folder, status and config (with the table's and the caller's overrides), its table
    and the label it is logged by (the run's name; ``TABLE/RUN`` where several tables run together)."""
    rows = []
    for spec in tab.runs[scale]:
        run_dir = runs_dir / spec.folder(tab.name)
        status, config = run_status(run_dir), run_config(spec, extra)
        rows.append(
            {
                "spec": spec,
                "dir": run_dir,
                "status": status,
                "config": config,
                "extra": extra,
                "table": tab.name,
                "label": spec.name,
            }
        )
    return rows


def skip_published(rows: list[dict], runs_dir: Path, published: Path) -> None:
    """Mark ``published`` the rows not finished in ``runs_dir`` whose run is finished in the results folder
    ``published`` (``published/TABLE/RUN/summary.json``, as :func:`publish` writes it): a campaign on a machine
    without the run folders trains only what the committed results lack."""
    for r in rows:
        copy = published / r["dir"].relative_to(runs_dir)
        if r["status"] in ("missing", "interrupted") and (copy / "summary.json").is_file():
            r["status"], r["published"] = "published", copy


def fraction_left(row: dict) -> float:
    """The share of a planned run's epochs still to train: 1 for a missing run, 0 for a finished one, and for an
    interrupted one its epochs without a metrics record over all (the epoch it stopped in counts as whole)."""
    if row["status"] not in ("interrupted", "running"):
        return float(row["status"] == "missing")
    cfg = row["config"]
    total = cfg.train.total_epochs if row["spec"].task == "lm" else cfg.epochs
    return max(total - len(RunDir(row["dir"]).read_metrics()), 1) / total


def _seconds_per_token(step, batches, steps: int) -> float:
    """The least seconds per token over ``steps`` timed calls of ``step(batch) -> tokens`` (after one warm-up;
    ``batches`` is gone through again where it holds fewer)."""
    import itertools

    rates = []
    for i, batch in enumerate(itertools.islice(itertools.cycle(batches), steps + 1)):
        start = time.perf_counter()
        tokens = step(batch)
        if i:  # the first call warms caches and kernels up
            rates.append((time.perf_counter() - start) / tokens)
    return min(rates)


def machine_load() -> dict:
    """The one-minute load average against the CPU count, read before the estimates' timed steps: ``busy`` where
    other processes keep at least half a core busy, so that the timed steps shared the CPU and the estimates run
    long (a dry run beside a training run measures the run slowed by it)."""
    import os

    cpus = os.cpu_count() or 1
    try:
        load = os.getloadavg()[0]
    except OSError:  # not available on this platform
        return {"load_average": None, "cpus": cpus, "busy": False}
    return {"load_average": round(load, 2), "cpus": cpus, "busy": load >= 0.5}


def estimate_seconds(cfg, vocab_size: int, train_tokens: int, threads: int, steps: int = 2) -> float:
    """Wall-time estimate of a whole run on this machine: the seconds per token of ``steps`` timed training
    steps (forward, loss, backward, SGD) of the run's model on random ids, in the run's precision (bf16 where
    it is "auto" and the CPU has bf16), times its training tokens and epochs, plus 10% for validation. An
    estimate, not a measurement of the run."""
    import torch

    from .losses import LanguageModelLoss
    from .models import LanguageModel
    from .models.encoders.state import detach_state
    from .runtime import resolve_precision, set_threads
    from .train.step import window_loss

    set_threads(threads)
    torch.manual_seed(0)
    t = cfg.train
    model = LanguageModel(cfg.model, vocab_size).train()
    loss_fn = LanguageModelLoss.from_config(cfg.loss)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)

    device = torch.device("cpu")
    precision = resolve_precision(t.precision, device)

    carried = [model.init_state(t.batch_size)]

    def step(x):  # the trainer's own forward and loss of one window, the state carried over (a Transformer's memory)
        loss, _, _, state = window_loss(model, loss_fn, x, x, carried[0], precision)
        carried[0] = detach_state(state)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return x.numel()

    batches = (torch.randint(0, vocab_size, (t.bptt, t.batch_size)) for _ in range(steps + 1))
    return 1.1 * _seconds_per_token(step, batches, steps) * train_tokens * t.total_epochs


def estimate_task_seconds(task: str, cfg, threads: int, steps: int = 3) -> float:
    """The same estimate for a tagger (``tag``) or translator (``translate``) run: ``steps`` timed training batches
    of its model on the first batches of its real training data (the translator's subword model trained in a
    temporary folder, as the run does), times its training tokens (target tokens for the translator) and epochs,
    plus 10% for evaluation. The translator's test decoding (beam search) is not included."""
    import tempfile

    import torch

    from .runtime import autocast, set_threads

    set_threads(threads)
    torch.manual_seed(0)
    if task == "tag":
        from .tagging.data import load_tagging_corpus
        from .tagging.model import BiLSTMTagger
        from .tagging.train import tagging_loss

        corpus = load_tagging_corpus(cfg.data_dir, cfg.min_count, own_data=cfg.own_data)
        model = BiLSTMTagger(cfg, len(corpus.vocab), len(corpus.tags)).train()
        opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)

        def step(batch):
            ids, tags, lengths = batch
            loss = tagging_loss(model, ids, tags, lengths)
            opt.zero_grad()
            loss.backward()
            opt.step()
            return int(lengths.sum())

        per_token = _seconds_per_token(step, corpus.batches("train", cfg.batch_size, shuffle_seed=0), steps)
        return 1.1 * per_token * corpus.tokens("train") * cfg.epochs
    from .runtime import resolve_precision
    from .translation.data import load_parallel_corpus
    from .translation.model import TransformerTranslator
    from .translation.train import translation_loss

    with tempfile.TemporaryDirectory() as folder:
        corpus = load_parallel_corpus(cfg, Path(folder), train_vocab=True)
    model = TransformerTranslator(cfg, len(corpus.source_vocab), len(corpus.target_vocab)).train()
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    device, precision = torch.device("cpu"), resolve_precision(cfg.precision, torch.device("cpu"))

    def step(index):
        with autocast(device, precision):
            loss, _, n = translation_loss(model, cfg, *corpus.tensors("train", index))
        opt.zero_grad()
        loss.backward()
        opt.step()
        return n

    batches = corpus.batches("train", cfg.batch_tokens, shuffle_seed=0, max_length=cfg.max_length)
    tokens = sum(len(t) + 1 for _, t in corpus.ids["train"])
    return 1.1 * _seconds_per_token(step, batches, steps) * tokens * cfg.epochs


def execute(rows: list[dict], jobs: int, threads: int, log=print) -> list[dict]:
    """Start the missing runs and resume the interrupted ones, in the order given, ``jobs`` at a time, ``threads``
    each; skip the finished ones. A row is named in the log by its ``label`` (:func:`plan`). Returns one record
    per run started (command, exit code, log file)."""
    name = lambda r: r["label"]  # noqa: E731
    todo = [r for r in rows if r["status"] not in ("finished", "running", "published")]
    for r in rows:
        if r["status"] == "finished":
            log(f"{name(r)}: finished, skipped")
        elif r["status"] == "published":
            log(f"{name(r)}: finished in {r['published']}, skipped")
        elif r["status"] == "running":
            log(f"{name(r)}: another process is training it in {r['dir']}, skipped")
    running: list[tuple[dict, subprocess.Popen, list[str], Path]] = []
    done = []
    while todo or running:
        while todo and len(running) < jobs:
            r = todo.pop(0)
            args = train_command(r["spec"], r["dir"], r["extra"], threads)
            r["dir"].parent.mkdir(parents=True, exist_ok=True)
            log(
                f"{name(r)}: {'resume' if r['status'] == 'interrupted' else 'start'}: tiedlm "
                + " ".join(shlex.quote(a) for a in args)
            )
            log_file = r["dir"].parent / f"{r['dir'].name}.log"
            with open(log_file, "a") as out:
                proc = subprocess.Popen(
                    [sys.executable, "-m", "tiedlm.cli", *args], stdout=out, stderr=subprocess.STDOUT
                )
            running.append((r, proc, args, log_file))
        time.sleep(0.2)
        for item in list(running):
            r, proc, args, log_file = item
            if proc.poll() is not None:
                running.remove(item)
                done.append({"run": name(r), "command": args, "returncode": proc.returncode, "log": str(log_file)})
                log(f"{name(r)}: exit {proc.returncode}")
    return done


def _test_ppl(files: RunDir, summary: dict) -> str:
    """The run's test perplexity by the papers' protocol (batch 1), saying so where only another is known.

    Runs trained before the summary recorded ``test_protocol`` measured test over ``eval_batch_size`` streams;
    their batch-1 figure, where taken afterwards, is ``test_batch1.json`` (``tiedlm evaluate RUN --split test
    --json`` saved in the run folder)."""
    if "test_protocol" in summary:
        return f"{summary['test_ppl']:.2f}"
    later = files.path / "test_batch1.json"
    streams = f"{summary['test_ppl']:.2f} ({summary.get('eval_batch_size', 10)} streams)"
    if later.is_file():
        return f"{json.loads(later.read_text())['ppl']:.2f}; {streams}"
    return streams


PUBLISHED = ("config.toml", "metrics.jsonl", "summary.json", "test_batch1.json")


def publish(rows: list[dict], into: Path, log=print) -> list[str]:
    """Copy each finished run's small files (config, metrics, summary, a later batch-1 test) and its log into
    ``into/TABLE/RUN/``, for committing; returns the runs copied. A file already there with other content is
    never overwritten (a one-line error: committed results stay as they are); an identical one is left."""
    import shutil

    copied = []
    for r in rows:
        if r["status"] != "finished":
            continue
        src, dst = r["dir"], into / r["dir"].parent.name / r["dir"].name
        files = [(src / name, dst / name) for name in PUBLISHED if (src / name).is_file()]
        log_file = src.parent / f"{src.name}.log"
        if log_file.is_file():
            files.append((log_file, dst / "train.log"))
        for a, b in files:
            if b.exists() and b.read_bytes() != a.read_bytes():
                raise UsageError(
                    f"{b} already holds other results; published results are never overwritten "
                    f"(move it away first if this run replaces it)"
                )
        dst.mkdir(parents=True, exist_ok=True)
        for a, b in files:
            if not b.exists():
                shutil.copyfile(a, b)
        copied.append(r["spec"].name)
        log(f"{r['spec'].name}: published to {dst}")
    return copied


BANDS = "bands.json"  # a table's Figure-3 analysis of its finished runs: RUNS/TABLE/bands.json


def band_analysis(
    tab: Table, rows: list[dict], runs_dir: Path, threads: int, log=print, earlier: Path | None = None
) -> Path | None:
    """Figure 3 of Pappas & Henderson (2019) over a table's finished runs: cross-entropy per training-frequency
    band of the test targets, each run's best checkpoint, against ``tab.bands_baseline``; written to
    ``RUNS/TABLE/bands.json``. A run already in that file, or in ``earlier`` (the published analysis), keeps
    its figures there and is not analysed again, so a run whose checkpoints are gone (a published folder has
    none; a machine handed back bare has none) still counts, the baseline included; only the finished runs
    with checkpoints that no analysis holds yet are analysed. None where there is nothing new, or where the
    baseline and one other run are not both there."""
    path = runs_dir / tab.name / BANDS
    known = [json.loads(p.read_text()) for p in (path, earlier) if p is not None and p.is_file()]
    done = {n for t in known for n in t["runs"]}
    todo = [
        r
        for r in rows
        if r["status"] == "finished" and r["spec"].name not in done and RunDir(r["dir"]).checkpoint("best").is_file()
    ]
    todo.sort(key=lambda r: r["spec"].name != tab.bands_baseline)  # stable: the baseline first, then table order
    names = [r["spec"].name for r in todo]
    analysed = done | set(names)
    if not todo or tab.bands_baseline not in analysed or len(analysed) < 2:
        return None
    from .analysis.bands import bands_of_runs, merge_band_tables
    from .run import load_run
    from .runtime import set_threads

    set_threads(threads)
    fresh = bands_of_runs([load_run(r["dir"], which="best") for r in todo], names, "test")
    fresh.update(checkpoint="best")
    order = [s.name for specs in tab.runs.values() for s in specs]
    table = merge_band_tables([*known, fresh], tab.bands_baseline, order)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, table)
    log(
        f"bands (Figure 3) of {', '.join(names)}"
        + (f", beside {', '.join(sorted(done))}" if done else "")
        + f": {path}"
    )
    return path


def publish_bands(tab: Table, runs_dir: Path, into: Path, log=print) -> bool:
    """Copy ``RUNS/TABLE/bands.json`` into ``into/TABLE/``. One already there is replaced only by an analysis that
    holds each of its runs with the same cross-entropies (to 1e-5, relative) and more runs; anything else is a
    one-line error (published results are never overwritten)."""
    src, dst = runs_dir / tab.name / BANDS, into / tab.name / BANDS
    if not src.is_file():
        return False
    new = json.loads(src.read_text())
    if dst.is_file():
        old = json.loads(dst.read_text())

        def same(a, b):
            return (a is None and b is None) or (a is not None and b is not None and abs(a - b) <= 1e-5 * abs(a))

        kept = set(old["runs"]) <= set(new["runs"]) and all(
            same(o["ce"][n], w["ce"][n]) for o, w in zip(old["rows"], new["rows"]) for n in old["runs"]
        )
        if not kept or old["baseline"] != new["baseline"]:
            raise UsageError(
                f"{dst} holds other band figures than {src}; published results are never overwritten "
                f"(move it away first if this analysis replaces it)"
            )
        if len(new["runs"]) == len(old["runs"]):
            return False
    dst.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(dst, new)
    log(f"bands of {', '.join(new['runs'])}: published to {dst}")
    return True


def _bands_section(tab: Table, runs_dir: Path, out: Path) -> list[str]:
    """The page's Figure 3: the plot and the table of ``RUNS/TABLE/bands.json``, where there is one."""
    path = runs_dir / tab.name / BANDS
    if not path.is_file():
        return []
    from .analysis.bands import band_report_lines, plot_bands

    table = json.loads(path.read_text())
    plot_bands(table, out / f"{tab.name}-bands.png")
    return [
        "",
        "## Cross-entropy by training-frequency band (Figure 3)",
        "",
        f"The test targets binned by how often the word occurs in the training data; mean cross-entropy per band of "
        f"each finished run's best checkpoint, over {table['data']} {table['split']} (streams of each run's "
        f"evaluation batch), and its difference from `{table['baseline']}`: Δ% = (CE_run − CE_{table['baseline']}) "
        f"/ CE_{table['baseline']} × 100, negative where the run predicts that band's words better. Computed by "
        f"`tiedlm reproduce {tab.name} --publish` from the runs' checkpoints, kept in {BANDS} beside the runs.",
        "",
        f"![relative cross-entropy by frequency band]({tab.name}-bands.png)",
        "",
        *band_report_lines(table),
    ]


def render(
    tab: Table,
    scale: str,
    runs_dir: Path,
    extra: list[str],
    out: Path,
    command: str = "",
    links_from: Path | None = None,
) -> Path:
    """Write ``out/<table>.md`` (and ``<table>-valid.png``): paper vs ours per run, what we ran, and how.

    Links to the run folders are relative to ``links_from`` (default ``out``, where the page is read)."""
    import os

    from .analysis.report import plot_curves, read_run

    out.mkdir(parents=True, exist_ok=True)
    rows = plan(tab, scale, runs_dir, extra)
    task = tab.runs[scale][0].task
    title, keys, fmt = METRICS[task]
    present = [read_run(r["dir"]) for r in rows if task == "lm" and RunDir(r["dir"]).config.is_file()]
    command = command or f"tiedlm reproduce {tab.name} --scale {scale}"
    lines = [
        f"# {tab.title}",
        "",
        f"Source: {tab.source}. Scale: `{scale}`. Rendered by `{command}`.",
        "",
    ]
    if present:
        plot_curves(present, out / f"{tab.name}-valid.png")
        lines += [f"![validation perplexity per epoch]({tab.name}-valid.png)", ""]
    lines += [
        f"| run | paper | ours: {title} | params | epochs | wall time | device | tok/s | status |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    commands, waiting = [], []

    def how(spec: RunSpec) -> str:  # the command that runs one row, and the training command it stands for
        return (
            f"`tiedlm reproduce {tab.name} --scale {scale} --only {spec.name}`, that is `{rerun_command(spec, extra)}`"
        )

    for r in rows:
        spec, status = r["spec"], r["status"]
        files = RunDir(r["dir"])
        summary = files.read_summary() if status == "finished" else None
        metrics = files.read_metrics()
        paper = " / ".join("–" if v is None else f"{v:g}" for v in spec.paper)
        if summary:
            test = _test_ppl(files, summary) if task == "lm" else fmt.format(summary[keys[1]])
            ours = f"{fmt.format(summary[keys[0]])} / {test}"
            params = f"{summary['parameters']['total'] / 1e6:.2f}M"
            seconds = summary.get("wall_time_s", summary.get("train_seconds"))
            wall = f"{seconds / 60:.1f} min" if seconds is not None else "–"
            device = summary.get("device", "cpu" if task == "tag" else "–")
            device += f", {summary['precision']}" if "precision" in summary else ""
            tps = f"{summary['tokens_per_s']:,.0f}" if "tokens_per_s" in summary else "–"
            folder = Path(os.path.relpath(r["dir"], links_from or out)).as_posix()
            last = f"; this run's last invocation: `{summary['command']}`" if "command" in summary else ""
            commands.append(
                f"- {spec.name}: to run it again, {how(spec)} (seed {summary['seed']}){last}; the config it trained "
                f"with: [{folder}/config.toml]({folder}/config.toml)"
            )
        else:
            best = min((m["valid_ppl"] for m in metrics if "valid_ppl" in m), default=None)
            ours = f"{best:.2f} / –" if best is not None else "–"
            params = wall = device = tps = "–"
            waiting.append(f"- {spec.name} ({status}): {how(spec)}")
        total = r["config"].train.total_epochs if task == "lm" else r["config"].epochs
        epochs = f"{len(metrics)}/{total}"
        note = f" ({spec.note})" if spec.note else ""
        lines.append(
            f"| {spec.name}{note} | {paper} | {ours} | {params} | {epochs} | {wall} | {device} | {tps} | {status} |"
        )
    if tab.notes:
        lines += ["", "## Notes", "", tab.notes]
    if task == "lm":
        lines += _bands_section(tab, runs_dir, out)
    lines += ["", "## Commands", "", *(commands or ["(no run has finished yet)"]), ""]
    if waiting:
        lines += [
            "Not finished yet (`--dry-run` estimates them on this machine; a stopped run resumes where it stopped):",
            "",
            *waiting,
            "",
        ]
    path = out / f"{tab.name}.md"
    path.write_text("\n".join(lines) + "\n")
    return path
