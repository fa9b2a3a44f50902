"""Every task's run stops on a real SIGTERM in the middle of a training step and resumes exactly: the language
model, the tagger and the translator, all trained by the one loop (tiedlm.train.loop). A resumed run ends with
the weights, metrics and summary of the same run trained straight through. Also: the harness converts the
checkpoints the tagger's and translator's own loops wrote before it, and refuses what a run folder cannot take."""

import dataclasses
import json
import os
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from tiedlm.errors import TiedlmError, UsageError
from tiedlm.interrupts import RunInterrupted
from tiedlm.train import loop
from tiedlm.train.checkpoint import load_checkpoint, save_checkpoint
from tiedlm.train.loop import Progress

from conftest import (
    flat_config,
    migrate_runs,
    tiny_overrides,
    write_tiny_corpus,
    write_tiny_hf_config,
    write_tiny_parallel,
)


def _treebank(folder: Path) -> Path:
    """A small CoNLL-U treebank of one's own: 20 words, each with its own tag of 4, random sentences."""
    gen = torch.Generator().manual_seed(0)
    tags = ["NOUN", "VERB", "ADJ", "DET"]
    folder.mkdir(parents=True)
    for split, n in (("train", 60), ("dev", 12), ("test", 12)):
        rows = []
        for _ in range(n):
            ids = torch.randint(0, 20, (int(torch.randint(2, 7, (1,), generator=gen)),), generator=gen).tolist()
            rows += [f"{i + 1}\tw{w}\tw{w}\t{tags[w % 4]}\t_\t_\t0\tdep\t_\t_" for i, w in enumerate(ids)] + [""]
        (folder / f"xx_mine-ud-{split}.conllu").write_text("\n".join(rows) + "\n")
    return folder


@dataclasses.dataclass
class Case:
    """A task's tiny run: its config, its training function and the loss function its steps call."""

    cfg: object
    fit: Callable  # (cfg, run folder, resume) -> summary
    module: object
    loss: str

    def train(self, run: Path, resume: bool, *overrides: str):
        return self.fit(self.cfg.with_overrides(list(overrides)), run, resume)


def _train_lm(cfg, run: Path, resume: bool) -> dict:
    from tiedlm.tasks.lm.task import LanguageModelTask

    return loop.run(LanguageModelTask(cfg), run, resume, **QUIET)


def _lm(tmp_path) -> Case:
    from tiedlm.tasks.lm import task as trainer
    from tiedlm.tasks.lm.config import Config

    cfg = Config.load("ptb-small-re").with_overrides(tiny_overrides(write_tiny_corpus(tmp_path / "corpus")))
    return Case(
        cfg, lambda c, run, resume: loop.run(trainer.LanguageModelTask(c), run, resume, **QUIET), trainer, "window_loss"
    )


def _transformer_lm(tmp_path) -> Case:
    """The Transformer LM with a DRILL output layer: AdamW, warm-up, its memory of embeddings as carried state."""
    from tiedlm.tasks.lm import task as trainer
    from tiedlm.tasks.lm.config import Config

    tiny = [*tiny_overrides(write_tiny_corpus(tmp_path / "corpus")), "model.encoder.layers=1"]
    cfg = Config.load("ptb-transformer-drill").with_overrides(tiny)
    return Case(
        cfg, lambda c, run, resume: loop.run(trainer.LanguageModelTask(c), run, resume, **QUIET), trainer, "window_loss"
    )


def _hf_lm(tmp_path) -> Case:
    """A Hugging Face Llama body as the encoder (model.encoder = "hf"), tiedlm's DRILL output layer."""
    pytest.importorskip("transformers")
    from tiedlm.tasks.lm import task as trainer
    from tiedlm.tasks.lm.config import Config

    corpus, config = write_tiny_corpus(tmp_path / "corpus"), write_tiny_hf_config(tmp_path / "llama")
    tiny = [o for o in tiny_overrides(corpus, **{"train.lr": "0.003"}) if not o.startswith("model.encoder.hidden_size")]
    cfg = Config.load("ptb-llama-drill").with_overrides([*tiny, f"model.encoder.config={config}"])
    return Case(
        cfg, lambda c, run, resume: loop.run(trainer.LanguageModelTask(c), run, resume, **QUIET), trainer, "window_loss"
    )


def _tagger(tmp_path) -> Case:
    from tiedlm.tasks.tagging import TaggerConfig
    from tiedlm.tasks.tagging import task as tagging

    cfg = flat_config(
        TaggerConfig,
        dict(
            data_dir=str(_treebank(tmp_path / "treebank")),
            own_data=True,
            min_count=1,
            embedding_size=8,
            hidden_size=8,
            batch_size=8,
            epochs=2,
            threads=1,
            device="cpu",
        ),
    )
    return Case(
        cfg, lambda c, run, resume: loop.run(tagging.TaggerTask(c), run, resume, **QUIET), tagging, "tagging_loss"
    )


def _translator(tmp_path) -> Case:
    from tiedlm.tasks.translation import TranslationConfig
    from tiedlm.tasks.translation import task as translation

    cfg = flat_config(
        TranslationConfig,
        dict(
            source_lang="xx",
            target_lang="yy",
            data_dir=str(write_tiny_parallel(tmp_path)),
            vocab_size=40,
            d_model=16,
            ffn_size=32,
            heads=2,
            encoder_layers=1,
            decoder_layers=1,
            dropout=0.2,
            epochs=2,
            batch_tokens=256,
            warmup_steps=5,
            beam=1,
            threads=1,
            precision="fp32",
            device="cpu",
        ),
    )
    fit = lambda c, run, resume: loop.run(translation.TranslationTask(c), run, resume, **QUIET)  # noqa: E731
    return Case(cfg, fit, translation, "translation_loss")


def _subspace(tmp_path) -> Case:
    """One point of the subspace experiment (Inan et al. §6.2): no validation split, the final weights measured."""
    from tiedlm.tasks.subspace import experiment
    from tiedlm.tasks.subspace.config import SubspaceExperimentConfig

    flat = dict(hidden_size=8, layers=1, epochs=2, batch_size=4, bptt=10, slice_words=600, threads=1)
    tokens = torch.randint(0, 50, (600,), generator=torch.Generator().manual_seed(0))
    point = lambda c: experiment.SubspacePoint(tokens, 50, 1.0, 10.0, 3, c)  # noqa: E731
    fit = lambda c, run, resume: loop.run(point(c), run, resume, **QUIET)  # noqa: E731
    return Case(flat_config(SubspaceExperimentConfig, flat), fit, experiment, "update")


QUIET = {"progress": False, "log": lambda *a: None}
CASES = {"lm": _lm, "tag": _tagger, "translate": _translator, "subspace": _subspace}  # one per registered task
# every kind of run the thread-count test resumes from its folder's config
RESUMED = {"lm": _lm, "tag": _tagger, "translate": _translator, "Transformer LM": _transformer_lm}
RESUMED["Hugging Face LM"] = _hf_lm


def test_every_registered_task_has_a_case_here():
    from tiedlm.registry import tasks

    TASKS = tasks()

    assert set(CASES) == set(TASKS)


def _same_metrics(a: Path, b: Path) -> None:
    """Every metrics line alike but for the clocks."""
    clocks = ("second", "time", "per_s")
    ra, rb = ([json.loads(x) for x in (p / "metrics.jsonl").read_text().splitlines()] for p in (a, b))
    assert len(ra) == len(rb) == 2
    for x, y in zip(ra, rb):
        assert {k: v for k, v in x.items() if not any(c in k for c in clocks)} == {
            k: v for k, v in y.items() if not any(c in k for c in clocks)
        }


@pytest.mark.parametrize("task", list(CASES))
def test_a_real_sigterm_in_a_step_stops_with_a_checkpoint_and_the_resumed_run_is_the_straight_one(
    task, tmp_path, monkeypatch, capsys
):
    """For every task: a real SIGTERM in the 5th step stops it with a checkpoint and the resumed run ends bit for
    bit as the straight one; a finished folder, one holding a run, a committed one and one that cannot be written
    are refused with one line each."""
    case = CASES[task](tmp_path)
    straight = case.train(tmp_path / "straight", False)
    facts = {"device": "cpu", "precision": "fp32", "threads": 1}  # the harness's, in every record of every task
    lines = [json.loads(x) for x in (tmp_path / "straight" / "metrics.jsonl").read_text().splitlines()]
    assert all(r.items() >= facts.items() for r in [*lines, straight])
    assert {"seed", "command", "versions", "machine", "numerics"} <= set(straight)

    real, calls = getattr(case.module, case.loss), {"n": 0}

    def sigterm_in_the_5th_step(*a, **k):
        if torch.is_grad_enabled():  # a training step, not a validation batch
            calls["n"] += 1
            if calls["n"] == 5:
                os.kill(os.getpid(), signal.SIGTERM)  # delivered now, in the middle of the step
        return real(*a, **k)

    monkeypatch.setattr(case.module, case.loss, sigterm_in_the_5th_step)
    with pytest.raises(RunInterrupted, match=r"epoch 1\b.*(resume with: tiedlm .*--resume|run the same command)"):
        case.train(tmp_path / "split", False)
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # the handler is gone with the run
    monkeypatch.setattr(case.module, case.loss, real)
    resumed = case.train(tmp_path / "split", True)

    a, _ = load_checkpoint(tmp_path / "straight" / "checkpoints" / "last.safetensors")
    b, _ = load_checkpoint(tmp_path / "split" / "checkpoints" / "last.safetensors")
    assert {k for k in a if k.startswith("model.")} == {k for k in b if k.startswith("model.")}
    assert all(torch.equal(a[k], b[k]) for k in a if k.startswith("model."))
    _same_metrics(tmp_path / "straight", tmp_path / "split")
    clocks = ("second", "time", "per_s", "history")
    assert {k: v for k, v in resumed.items() if not any(c in k for c in clocks)} == {
        k: v for k, v in straight.items() if not any(c in k for c in clocks)
    }
    refusals = [("is finished", tmp_path / "split", True), ("already holds a", tmp_path / "split", False)]
    committed = tmp_path / "repo" / "run"  # results tracked by git
    committed.mkdir(parents=True)
    (committed / "summary.json").write_text("{}")
    subprocess.run(["git", "init", "-q", str(committed.parent)], check=True)
    subprocess.run(["git", "-C", str(committed.parent), "add", "."], check=True)
    (tmp_path / "afile").write_text("x")  # a file where the run's folder would go: nothing can be written there
    refusals += [
        ("holds committed results", committed, False),
        ("cannot write there", tmp_path / "afile" / "run", False),
    ]
    for message, folder, resume in refusals:
        with pytest.raises(UsageError, match=message) as refused:
            case.train(folder, resume)
        assert "\n" not in str(refused.value)
    assert (committed / "summary.json").read_text() == "{}"
    # the language model's commands name another task's run as such, with the command that works on it
    from tiedlm.cli import main
    from tiedlm.registry import tasks
    from tiedlm.run_dir import RunDir

    TASKS = tasks()

    info = TASKS[task]
    if info.evaluate and info.name != "lm":
        assert RunDir(tmp_path / "split").task == info.name
        capsys.readouterr()
        assert main(["evaluate", str(tmp_path / "split")]) == 2
        err = capsys.readouterr().err.strip()
        assert err.endswith(
            f"is a {info.noun} run (`tiedlm {' '.join(info.train)}`), not a language model's: use `tiedlm "
            f"{' '.join(info.evaluate)} {tmp_path / 'split'}`"
        ), err


@pytest.mark.parametrize("task", list(RESUMED))
def test_a_resume_keeps_the_thread_count_its_run_started_with_however_busy_the_machine_is(task, tmp_path, monkeypatch):
    """``threads = 0`` takes the cores other processes leave free when a run starts. The run records the count it
    resolved; resumed from its folder's config while another process holds a core (the free-core probe now says
    one), it trains on at the count it started with and ends as the straight run does, bit for bit.

    What is checked is the count the harness asks of PyTorch: every run here computes on one real thread, so that
    the test costs the same on a busy machine as on an idle one (two threads beside another process can be many
    times slower)."""
    from tiedlm import runtime

    monkeypatch.delenv("TIEDLM_THREADS", raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    asked, one_thread = {"n": 1}, torch.set_num_threads

    def ask(n):  # records the count, computes on one thread
        asked["n"] = n
        one_thread(1)

    monkeypatch.setattr(torch, "set_num_threads", ask)
    busy = {"cores": 0.0}
    monkeypatch.setattr(runtime, "busy_cores", lambda interval=0.2: busy["cores"])
    case = RESUMED[task](tmp_path)
    straight = case.train(tmp_path / "straight", False, "train.threads=2")

    real, calls, used = getattr(case.module, case.loss), {"n": 0}, set()

    def spy(*a, **k):  # a SIGTERM in the 5th training step; the thread count of every step
        if torch.is_grad_enabled():
            calls["n"] += 1
            used.add(asked["n"])
            if calls["n"] == 5:
                os.kill(os.getpid(), signal.SIGTERM)
        return real(*a, **k)

    monkeypatch.setattr(case.module, case.loss, spy)
    with pytest.raises(RunInterrupted):
        case.train(tmp_path / "split", False, "train.threads=0")  # 2 free cores: 2 threads
    assert used == {2}
    saved = type(case.cfg).for_run(tmp_path / "split", True, [])  # what `--resume` reads
    assert saved.train.threads == 2
    busy["cores"] = 1.0  # another process holds a core now: threads = 0 would take 1
    used.clear()
    resumed = case.fit(saved, tmp_path / "split", True)
    assert used == {2}
    a, _ = load_checkpoint(tmp_path / "straight" / "checkpoints" / "last.safetensors")
    b, _ = load_checkpoint(tmp_path / "split" / "checkpoints" / "last.safetensors")
    assert all(torch.equal(a[k], b[k]) for k in a if k.startswith("model."))
    clocks = ("second", "time", "per_s", "history")
    assert {k: v for k, v in resumed.items() if not any(c in k for c in clocks)} == {
        k: v for k, v in straight.items() if not any(c in k for c in clocks)
    }


def test_translate_evaluate_reads_the_corpus_from_another_folder_with_data_dir(tmp_path, capsys):
    """`tiedlm translate evaluate RUN --data-dir D`: the run's corpus found in another folder gives the figures the
    run's own folder gives (it used to raise a TypeError)."""
    import shutil

    from tiedlm.cli import main

    case = _translator(tmp_path)
    case.train(tmp_path / "run", False, "train.epochs=1")
    moved = shutil.copytree(case.cfg.data.data_dir, tmp_path / "elsewhere")
    assert main(["translate", "evaluate", str(tmp_path / "run"), "--beam", "1"]) == 0
    assert "translate:" not in capsys.readouterr().err  # no progress bar off a terminal, as every command
    assert main(["translate", "evaluate", str(tmp_path / "run"), "--beam", "1", "--json"]) == 0
    here = json.loads(capsys.readouterr().out)
    assert (
        main(["translate", "evaluate", str(tmp_path / "run"), "--beam", "1", "--json", "--data-dir", str(moved)]) == 0
    )
    there = json.loads(capsys.readouterr().out)
    assert (there["bleu"], there["ppl"]) == (here["bleu"], here["ppl"])


def test_tag_evaluate_scores_another_test_set_given_as_one_file(tmp_path, capsys):
    """A tagger run scored on one CoNLL-U file of its own (no train or dev beside it): the run's own test file
    gives the run's test accuracy, to the digit."""
    import shutil

    from tiedlm.cli import main

    case = _tagger(tmp_path)
    case.train(tmp_path / "run", False, "train.epochs=1")
    test = next(Path(case.cfg.data.data_dir).glob("*test*.conllu"))
    alone = shutil.copy(test, tmp_path / "other-test.conllu")
    assert main(["tag", "evaluate", str(tmp_path / "run"), "--split", "test", "--json"]) == 0
    want = json.loads(capsys.readouterr().out)["test_accuracy"]
    assert main(["tag", "evaluate", str(tmp_path / "run"), "--file", str(alone), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["file_accuracy"] == want and got["tokens"] > 0


def test_translate_evaluate_scores_another_test_set_given_as_two_files(tmp_path, capsys):
    """A translator scored on a source file and its reference (no train or valid beside them): the run's own test
    files give the run's test BLEU."""
    from tiedlm.cli import main

    case = _translator(tmp_path)
    case.train(tmp_path / "run", False, "train.epochs=1")
    data = Path(case.cfg.data.data_dir)
    assert main(["translate", "evaluate", str(tmp_path / "run"), "--beam", "1", "--json"]) == 0
    want = json.loads(capsys.readouterr().out)["bleu"]
    files = ["--source", str(data / "test.xx"), "--reference", str(data / "test.yy")]
    assert main(["translate", "evaluate", str(tmp_path / "run"), "--beam", "1", "--json", *files]) == 0
    assert json.loads(capsys.readouterr().out)["bleu"] == want
    assert main(["translate", "evaluate", str(tmp_path / "run"), "--source", str(data / "test.xx")]) == 2
    capsys.readouterr()
    assert main(["train", "--resume", str(tmp_path / "run")]) == 2  # advised `translate evaluate` before
    assert f"use `tiedlm translate train --resume {tmp_path / 'run'}`" in capsys.readouterr().err


def test_resuming_says_it_keeps_its_thread_count_and_warns_when_told_another():
    from tiedlm.runtime import resumed_threads_note

    assert resumed_threads_note(0, None) == ""  # a run from before the count was recorded: nothing to keep
    assert resumed_threads_note(2, None).startswith("resuming at the 2 threads it started with")
    assert resumed_threads_note(2, 2).startswith("resuming at the 2 threads")
    assert "numbers will differ from an uninterrupted run's" in resumed_threads_note(2, 1)


@pytest.mark.parametrize("task", ["tag", "translate"])
def test_checkpoints_of_the_tasks_own_loops_from_before_the_harness_resume(task, tmp_path):
    """The tagger's loop counted finished epochs in ``epoch`` and kept ``best_dev``; the translator's kept
    ``step`` and ``best_valid``. A run folder stopped after epoch 1 by either is refused with the migration, and
    resumes to the straight run once tools/migrate_runs.py rewrote it."""
    case = CASES[task](tmp_path)
    straight = case.train(tmp_path / "straight", False)
    # the state after epoch 1, as the old loop wrote it: train one epoch, then rewrite the metadata
    old_run = tmp_path / "old"
    case.train(old_run, False, "train.epochs=1")
    tensors, meta = load_checkpoint(old_run / "checkpoints" / "last.safetensors")
    p = Progress.from_meta(meta)
    assert meta["schema"] == "tiedlm.train.loop/1" and (p.epoch, p.batch, p.best_epoch) == (2, 0, 1)
    if task == "tag":
        old = {"epoch": 1, "best_dev": p.best_score, "history": []}
    else:
        old = {"epoch": 2, "step": p.updates, "best_valid": p.best_score}
    old |= {"batch": 0, "sums": [0.0, 0], "best_epoch": 1, "seconds": p.seconds, "epoch_seconds": 0.0}
    save_checkpoint(old_run / "checkpoints" / "last.safetensors", tensors, old | {"param_groups": meta["param_groups"]})
    (old_run / "summary.json").unlink()
    with pytest.raises(UsageError, match="checkpoint of an older tiedlm; rewrite the run folder with"):
        case.train(old_run, True)
    migrate_runs(old_run)
    resumed = case.train(old_run, True)
    a, _ = load_checkpoint(tmp_path / "straight" / "checkpoints" / "last.safetensors")
    b, _ = load_checkpoint(old_run / "checkpoints" / "last.safetensors")
    assert all(torch.equal(a[k], b[k]) for k in a if k.startswith(("model.", "best.")))
    key = "test_accuracy" if task == "tag" else "test_bleu"
    assert resumed[key] == straight[key] and resumed["best_epoch"] == straight["best_epoch"]


def test_a_non_finite_validation_score_stops_the_run_and_keeps_the_last_checkpoint(tmp_path, monkeypatch):
    from tiedlm.tasks.tagging import task as tagging

    case = _tagger(tmp_path)
    monkeypatch.setattr(tagging, "accuracy", lambda *a, **k: float("nan"))
    with pytest.raises(TiedlmError, match="tagger training diverged: validation score nan after epoch 1"):
        case.train(tmp_path / "run", False)
    assert not (tmp_path / "run" / "checkpoints" / "last.safetensors").exists()
    assert (tmp_path / "run" / "metrics.jsonl").read_text() == ""


def test_a_task_that_trains_in_one_process_is_refused_under_torchrun_with_one_line(tmp_path, monkeypatch):
    """The harness resolves torchrun's ranks for every task: the language model trains data-parallel
    (tests/test_distributed.py); a task that does not declare ``distributed`` is refused before it writes anything."""
    from tiedlm.train.distributed import DistributedContext

    monkeypatch.setattr(DistributedContext, "from_environment", classmethod(lambda cls, device: cls(1, 2)))
    case = CASES["tag"](tmp_path)
    with pytest.raises(UsageError, match=r"trains in one process: run `tiedlm tag train` without torchrun") as e:
        case.train(tmp_path / "run", False)
    assert "\n" not in str(e.value) and not (tmp_path / "run").exists()
