"""Data-parallel training under torchrun: 2 CPU ranks (gloo) against one process with the same global batch."""

import json
import os
import subprocess
import sys

import pytest
import torch

from tiedlm.tasks.lm.config import Config
from tiedlm.tasks.lm.task import LanguageModelTask
from tiedlm.train import load_checkpoint, run

from conftest import tiny_overrides


def _overrides(corpus, **extra):
    # dropout 0: the ranks draw their own masks, so only a dropout-free run can match one process exactly
    return tiny_overrides(
        corpus, **{"model.encoder.dropout": "0", "train.epochs": "2", "train.batch_size": "4"} | extra
    )


def _torchrun(args, tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    env["OMP_NUM_THREADS"] = "1"
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node",
        "2",
        "-m",
        "tiedlm.cli",
        *args,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)


def _why(proc) -> str:
    """A failed torchrun's story: the ranks' own lines come first in its stderr, torchrun's summary of the failure
    last, so both ends are shown."""
    err = proc.stderr
    return err if len(err) <= 4000 else f"{err[:2500]}\n[...]\n{err[-1500:]}"


@pytest.mark.slow
def test_two_ranks_match_one_process_and_stay_identical(tiny_corpus, tmp_path):
    sets = [a for o in _overrides(tiny_corpus) for a in ("--set", o)]
    ddp = _torchrun(
        ["train", "ptb-small-re", "--out", str(tmp_path / "ddp"), "--no-progress", "--json", *sets], tmp_path
    )
    assert ddp.returncode == 0, _why(ddp)
    summary = json.loads(ddp.stdout)  # printed once (rank 0 only)
    assert summary["distributed"] == {"world_size": 2, "global_batch_size": 4, "max_parameter_spread": 0.0}
    single = run(
        LanguageModelTask(Config.load("ptb-small-re").with_overrides(_overrides(tiny_corpus))),
        tmp_path / "one",
        progress=False,
        log=lambda *a: None,
    )
    a, _ = load_checkpoint(tmp_path / "ddp" / "checkpoints" / "last.safetensors")
    b, _ = load_checkpoint(tmp_path / "one" / "checkpoints" / "last.safetensors")
    for name in (k for k in b if k.startswith("model.")):
        torch.testing.assert_close(a[name], b[name], atol=2e-5, rtol=1e-4)
    assert abs(summary["valid_ppl"] - single["valid_ppl"]) < 1e-3 * single["valid_ppl"]
    assert [k for k in a if k.startswith("rng.torch.rank")] == ["rng.torch.rank0", "rng.torch.rank1"]


@pytest.mark.slow
def test_resume_of_a_distributed_run_and_uneven_batch_error(tiny_corpus, tmp_path):
    sets = [a for o in _overrides(tiny_corpus, **{"train.epochs": "1"}) for a in ("--set", o)]
    first = _torchrun(["train", "ptb-small-re", "--out", str(tmp_path / "r"), "--no-progress", *sets], tmp_path)
    assert first.returncode == 0, _why(first)
    more = _torchrun(
        ["train", "--resume", str(tmp_path / "r"), "--set", "train.epochs=2", "--no-progress", "--json"], tmp_path
    )
    assert more.returncode == 0, _why(more)
    assert json.loads(more.stdout)["epochs"] == 2
    whole = _torchrun(
        [
            "train",
            "ptb-small-re",
            "--out",
            str(tmp_path / "w"),
            "--no-progress",
            "--json",
            *[a for o in _overrides(tiny_corpus) for a in ("--set", o)],
        ],
        tmp_path,
    )
    assert json.loads(whole.stdout)["valid_ppl"] == json.loads(more.stdout)["valid_ppl"]
    odd = _torchrun(
        [
            "train",
            "ptb-small-re",
            "--out",
            str(tmp_path / "odd"),
            "--no-progress",
            *[a for o in _overrides(tiny_corpus, **{"train.batch_size": "5"}) for a in ("--set", o)],
        ],
        tmp_path,
    )
    assert odd.returncode != 0 and "does not split evenly over 2 processes" in odd.stderr  # torchrun exits 1
