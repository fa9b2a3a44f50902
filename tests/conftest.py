import os
import random
import signal
from dataclasses import fields
from pathlib import Path

import pytest
import torch

# The suite's thread count is fixed, so that no test's outcome depends on how busy the machine is when each of
# its commands starts (``threads = 0`` otherwise takes the cores other processes leave free at that moment);
# the child processes the tests start inherit it
os.environ.setdefault("TIEDLM_THREADS", "2")


def write_tiny_corpus(folder: Path, seed: int = 0, lines=(300, 40, 40)) -> Path:
    """A small synthetic corpus with a Zipf-like vocabulary, <unk> and some empty lines."""
    rng = random.Random(seed)
    vocab = [f"w{i}" for i in range(120)] + ["<unk>"]
    weights = [1 / (i + 1) for i in range(len(vocab))]
    folder.mkdir(parents=True, exist_ok=True)
    for split, n in zip(("train", "valid", "test"), lines):
        out = []
        for _ in range(n):
            if rng.random() < 0.05:
                out.append("")
                continue
            out.append(" " + " ".join(rng.choices(vocab, weights, k=rng.randint(3, 15))) + " ")
        (folder / f"{split}.txt").write_text("\n".join(out) + "\n")
    return folder


@pytest.fixture
def tiny_corpus(tmp_path) -> Path:
    return write_tiny_corpus(tmp_path / "corpus")


def pytest_ignore_collect(collection_path, config):
    """Not even collected where slow tests are deselected (``-m "not slow"``, the fast loop): the module of Hugging
    Face's own model tests, which fetches transformers' source distribution to make its test classes."""
    if collection_path.name == "test_hf_model_tester.py" and "not slow" in (config.option.markexpr or ""):
        return True
    return None


@pytest.fixture(autouse=True)
def _deterministic():
    torch.manual_seed(0)
    torch.set_num_threads(1)
    yield


@pytest.fixture(autouse=True)
def _ctrl_c_deliverable():
    """The tests send SIGINT as Ctrl-C does. A suite started in the background by a non-interactive shell
    (``pytest &`` in a script) inherits SIGINT as ignored, which tiedlm keeps, as a background job asks
    (:class:`tiedlm.interrupts.StopRequest`): each test gets Python's own handler back, and its subprocesses the
    default disposition, whatever started the suite."""
    inherited = signal.getsignal(signal.SIGINT)
    if inherited is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, inherited)


def tiny_overrides(corpus: Path, **extra) -> list[str]:
    base = {
        "data.name": str(corpus),
        "model.embedding_size": "16",
        "model.encoder.hidden_size": "16",
        "train.epochs": "2",
        "train.batch_size": "4",
        "train.bptt": "8",
        "train.eval_batch_size": "4",
        "train.precision": "fp32",
        "train.device": "cpu",
        "train.threads": "1",
        "train.decay_start": "2",
        "train.lr": "1.0",
    }
    base.update(extra)
    return [f"{k}={v}" for k, v in base.items()]


@pytest.fixture
def shared_data() -> Path:
    """The verified corpora's mirror (``TIEDLM_DATA``), for the tests that read real PTB."""
    root = Path(os.environ.get("TIEDLM_DATA", "") or "/nonexistent")
    if not (root / "ptb" / "train.txt").is_file():
        pytest.skip("no TIEDLM_DATA mirror with PTB")
    return root


def write_tiny_parallel(tmp_path: Path) -> Path:
    """A tiny word-for-word xx -> yy parallel corpus (train 300, valid 20, test 20 pairs) in tmp_path/para."""
    words_en = ["a", "man", "dog", "runs", "sits", "the", "woman", "cat", "red", "blue"]
    words_de = ["ein", "mann", "hund", "läuft", "sitzt", "der", "frau", "katze", "rot", "blau"]
    rng = torch.Generator().manual_seed(0)
    folder = tmp_path / "para"
    folder.mkdir()
    for split, n in (("train", 300), ("valid", 20), ("test", 20)):
        en, de = [], []
        for _ in range(n):
            idx = torch.randint(0, 10, (int(torch.randint(3, 7, (1,), generator=rng)),), generator=rng).tolist()
            en.append(" ".join(words_en[i] for i in idx))
            de.append(" ".join(words_de[i] for i in idx))
        (folder / f"{split}.xx").write_text("\n".join(en) + "\n")
        (folder / f"{split}.yy").write_text("\n".join(de) + "\n")
    return folder


def write_tiny_treebank(folder: Path, sentences: int = 8) -> Path:
    """A tiny CoNLL-U treebank of one's own (train, dev and test alike: "dogs bark" a sentence)."""
    rows = "1\tdogs\tdog\tNOUN\t_\t_\t0\troot\t_\t_\n2\tbark\tbark\tVERB\t_\t_\t1\tdep\t_\t_\n\n"
    folder.mkdir(parents=True, exist_ok=True)
    for split in ("train", "dev", "test"):
        (folder / f"xx_mine-ud-{split}.conllu").write_text(rows * sentences)
    return folder


TINY_HF = {
    "gpt2": {"model_type": "gpt2", "n_embd": 16, "n_layer": 2, "n_head": 2, "n_positions": 64},
    "llama": {
        "model_type": "llama",
        "hidden_size": 16,
        "intermediate_size": 32,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "max_position_embeddings": 64,
    },
}


def write_tiny_hf_config(folder: Path, arch: str = "llama") -> Path:
    """A tiny Hugging Face config.json (width 16, 2 blocks) of ``arch`` (gpt2 | llama), written in ``folder``."""
    import json

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(TINY_HF[arch]))
    return folder / "config.json"


class LMRun:
    """A quiet language-model run on the harness, set up at once (``tiedlm.train.Run`` entered) so that a test can
    reach into ``task`` before training; :meth:`fit` trains (``budget``: stop after that many windows) and leaves
    the run (its lock released) whether it finishes or stops."""

    def __init__(self, cfg, path, resume: bool = False):
        from tiedlm.tasks.lm.task import LanguageModelTask
        from tiedlm.train import Run

        self.run = Run(LanguageModelTask(cfg), path, resume, progress=False, log=lambda *a, **k: None).__enter__()
        self.task, self.progress, self.files = self.run.task, self.run.progress, self.run.files

    def fit(self, budget: int | None = None) -> dict:
        try:
            return self.run.fit(budget)
        finally:
            self.run.__exit__(None, None, None)


def read_metrics(run: Path) -> list[dict]:
    from tiedlm.run_dir import RunDir

    return RunDir(run).read_metrics()


def flat_config(cls, raw: dict):
    """Settings of ``cls`` from flat keys, each placed in the one section that has it: a test's shorthand (run
    folders and TOML files name their sections)."""
    defaults = cls()
    sections = {}
    for key, value in raw.items():
        home = next(s for s in cls.section_names() if key in [f.name for f in fields(getattr(defaults, s))])
        sections.setdefault(home, {})[key] = value
    return cls.from_dict(sections)


def migrate_runs(folder: Path) -> None:
    """tools/migrate_runs.py over ``folder``, as a user runs it; asserts that it rewrote checkpoints."""
    import subprocess
    import sys

    tool = Path(__file__).resolve().parents[1] / "tools" / "migrate_runs.py"
    out = subprocess.run([sys.executable, str(tool), str(folder)], capture_output=True, text=True)
    assert out.returncode == 0 and "checkpoints rewritten" in out.stdout, out.stdout + out.stderr[-2000:]
