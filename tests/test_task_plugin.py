"""A fifth task with no edit to tiedlm: a character-level language model defined in two files of a package of
its own (a test's temporary folder), found through ``TIEDLM_TASKS`` as an installed package's ``tiedlm.tasks``
entry point would be. It trains through the generated ``tiedlm char train``, stops on a real SIGTERM in the
middle of an epoch, resumes bit for bit, and runs as a row of a ``reproduce`` table given as a file."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

CONFIG = """
from dataclasses import dataclass, field

from tiedlm.config import SectionedConfig, TrainSettings
from tiedlm.registry import register_task


@dataclass
class CharData:
    text: str = ""  # a text file: its first 90% trains, the rest validates


@dataclass
class CharModel:
    hidden: int = 24
    dropout: float = 0.1


@dataclass
class CharTrain(TrainSettings):
    epochs: int = 3
    lr: float = 0.5
    precision: str = "fp32"
    window: int = 24  # characters a window


@register_task(
    "char",
    "character LM",
    task="chartask.task:CharTask",
    metric=("valid bits per character", ("valid_bpc", "valid_bpc"), "{:.3f}"),
    seed_columns=("valid bpc", "valid bpc"),
    done="char LM {run_dir}: valid bpc {valid_bpc:.3f}",
)
@dataclass
class CharConfig(SectionedConfig):
    data: CharData = field(default_factory=CharData)
    model: CharModel = field(default_factory=CharModel)
    train: CharTrain = field(default_factory=CharTrain)
"""

TASK = """
import math
import os
import signal
from pathlib import Path

import torch
import torch.nn.functional as F

from tiedlm.train import Task
from tiedlm.train.step import update


class Net(torch.nn.Module):
    def __init__(self, vocab, hidden, dropout):
        super().__init__()
        self.embed, self.rnn = torch.nn.Embedding(vocab, hidden), torch.nn.GRU(hidden, hidden, batch_first=True)
        self.drop, self.out = torch.nn.Dropout(dropout), torch.nn.Linear(hidden, vocab)

    def forward(self, x):
        return self.out(self.drop(self.rnn(self.embed(x))[0]))


class CharTask(Task):
    unit = "window"

    def setup(self, run_dir, resume, log):
        text = Path(self.cfg.data.text).read_text(encoding="utf-8")
        chars = sorted(set(text))
        ids = torch.tensor([chars.index(c) for c in text])
        cut = len(ids) * 9 // 10
        self.train_ids, self.valid_ids = ids[:cut], ids[cut:]
        torch.manual_seed(self.cfg.train.seed)
        self.model = Net(len(chars), self.cfg.model.hidden, self.cfg.model.dropout)
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=self.cfg.train.lr, momentum=0.5)
        if not resume:
            self.cfg.save(run_dir)
        self.steps = 0

    def windows(self, ids, starts):
        w = self.cfg.train.window
        return torch.stack([ids[s : s + w + 1] for s in starts.tolist()])

    def batches(self, epoch):
        g = torch.Generator().manual_seed(self.cfg.train.seed * 1000 + epoch)
        starts = torch.randperm(len(self.train_ids) - self.cfg.train.window - 1, generator=g)[:24]
        return [starts[i : i + 4] for i in range(0, 24, 4)]

    def train_step(self, batch, progress):
        self.steps += 1
        if str(self.steps) == os.environ.get("CHARTASK_SIGTERM_AT"):  # a real signal, mid-epoch (the test's)
            os.kill(os.getpid(), signal.SIGTERM)
        seq = self.windows(self.train_ids, batch)
        loss = F.cross_entropy(self.model(seq[:, :-1]).flatten(0, 1), seq[:, 1:].flatten())
        made = update(loss, self.model.parameters(), self.optimizer, self.cfg.train.clip)
        return made, ({"loss": loss.item() * seq[:, 1:].numel(), "count": seq[:, 1:].numel()} if made else {})

    @torch.no_grad()
    def validate(self):
        self.model.eval()
        w = self.cfg.train.window
        seq = self.windows(self.valid_ids, torch.arange(0, len(self.valid_ids) - w - 1, w))
        loss = F.cross_entropy(self.model(seq[:, :-1]).flatten(0, 1), seq[:, 1:].flatten()).item()
        self.model.train()
        return loss

    def epoch_record(self, progress, seconds, wall, score):
        s = progress.sums
        return {"epoch": progress.epoch, "train_bpc": s["loss"] / s["count"] / math.log(2),
                "valid_bpc": score / math.log(2), "seconds": wall}

    def epoch_line(self, record, seconds):
        return f"epoch {record['epoch']}: valid bpc {record['valid_bpc']:.3f}"

    def summary(self, progress, history):
        return {"valid_bpc": self.validate() / math.log(2), "epochs": len(history)}
"""


@pytest.fixture()
def plugin(tmp_path):
    """The task's package (two files, no __init__: a namespace package) and the environment that names it."""
    package = tmp_path / "plugins" / "chartask"
    package.mkdir(parents=True)
    (package / "config.py").write_text(textwrap.dedent(CONFIG))
    (package / "task.py").write_text(textwrap.dedent(TASK))
    text = tmp_path / "text.txt"
    words = "the cat sat on the mat and the dog ran to the park while a bird sang in the tree ".split()
    text.write_text(" ".join(words[(i * 7) % len(words)] for i in range(900)))
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "plugins"), "TIEDLM_TASKS": "chartask.config"}
    return env, text


def _tiedlm(env, *args, code=0):
    out = subprocess.run([sys.executable, "-m", "tiedlm", *args], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == code, (out.returncode, out.stdout[-2000:], out.stderr[-2000:])
    return out


def _state(run):
    from safetensors.torch import load_file

    tensors = load_file(str(run / "checkpoints" / "last.safetensors"))
    metrics = [
        {k: v for k, v in json.loads(line).items() if k not in ("seconds", "machine", "host")}
        for line in (run / "metrics.jsonl").read_text().splitlines()
    ]
    return tensors, metrics, json.loads((run / "summary.json").read_text())["valid_bpc"]


def test_a_task_of_ones_own_trains_stops_resumes_bit_for_bit_and_reproduces(plugin, tmp_path):
    env, text = plugin
    args = ["--set", f"data.text={text}", "--threads", "1", "--no-progress"]
    assert "char" in _tiedlm(env, "--help").stdout
    done = _tiedlm(env, "char", "train", "--out", str(tmp_path / "whole"), *args)
    assert "char LM" in done.stdout and "valid bpc" in done.stdout

    stopped = _tiedlm(
        env | {"CHARTASK_SIGTERM_AT": "9"}, "char", "train", "--out", str(tmp_path / "cut"), *args, code=130
    )
    assert "interrupted at epoch 2" in stopped.stderr and "tiedlm char train --resume" in stopped.stderr
    assert not (tmp_path / "cut" / "summary.json").exists()
    assert 'task = "char"' in (tmp_path / "cut" / "config.toml").read_text()  # what the folder holds, recorded
    _tiedlm(env, "char", "train", "--resume", str(tmp_path / "cut"), "--no-progress")

    (w_tensors, w_metrics, w_bpc), (c_tensors, c_metrics, c_bpc) = _state(tmp_path / "whole"), _state(tmp_path / "cut")
    assert w_tensors.keys() == c_tensors.keys()
    assert all(w_tensors[k].equal(c_tensors[k]) for k in w_tensors)
    assert w_metrics == c_metrics and w_bpc == c_bpc

    refused = _tiedlm(env, "train", "--resume", str(tmp_path / "whole"), code=2)  # not a language model's run
    assert "is a character LM run (`tiedlm char train`)" in refused.stderr

    table = tmp_path / "chars.toml"
    table.write_text(
        f'title = "Characters"\nsource = "a test"\ntask = "char"\n\n[[row]]\nname = "small"\n'
        f'set = ["data.text={text}", "model.hidden=16", "train.epochs=2"]\n'
    )
    _tiedlm(
        env,
        "reproduce",
        str(table),
        "--runs",
        str(tmp_path / "runs"),
        "--out",
        str(tmp_path / "pages"),
        "--threads",
        "1",
        "--jobs",
        "1",
    )
    page = (tmp_path / "pages" / "chars.md").read_text()
    assert "| small |" in page and (tmp_path / "runs" / "chars" / "small" / "summary.json").is_file()
