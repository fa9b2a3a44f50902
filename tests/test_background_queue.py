"""tools/background_queue.sh --snapshot: a run that trains again after its folder was lost is compared with its
snapshot; a snapshot it repeats stays, one it does not repeat (another host's numerics) moves aside as
RUN/lost-N-epochs and the run training now is snapshotted; --status says which of the two a run does, and
which attempt set aside earlier the run repeats as far as both go."""

import json
import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "tools" / "background_queue.sh"


def _queued_run() -> tuple[str, str]:
    """A run of the queue that trains on this CPU and is not published (the script skips published ones)."""
    for commit, table, run in re.findall(r'^  "(\S+) (\S+) (\S+)"$', SCRIPT.read_text(), re.M):
        if commit != "gpu" and not (REPO / "experiments/results/reproduce" / table / run / "summary.json").exists():
            return table, run
    pytest.skip("every run of the queue is published or on GPUs")


def _metrics(folder: Path, valid: list[float]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.toml").write_text("[train]\nseed = 141\n")
    lines = [json.dumps({"epoch": e + 1, "valid_ppl": v, "tokens_per_s": 100.0 + e}) for e, v in enumerate(valid)]
    (folder / "metrics.jsonl").write_text("".join(line + "\n" for line in lines))


def _snapshot(tmp_path: Path, option: str = "--snapshot") -> str:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "TIEDLM_RUNS": str(tmp_path / "runs")}
    env["TIEDLM_SNAPSHOTS"] = str(tmp_path / "snapshots")
    done = subprocess.run(["bash", str(SCRIPT), option], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.slow  # each call reads the host's numerics and estimates what is left (~15 s with two runs beside)
def test_a_run_trained_again_keeps_the_snapshot_it_repeats_and_sets_aside_one_it_does_not(tmp_path):
    table, run = _queued_run()
    keep, folder = tmp_path / "snapshots" / table / run, tmp_path / "runs" / table / run
    lost = [232.05, 175.11, 150.2, 140.7, 133.9]
    _metrics(keep, lost)
    (keep / "queue.log").write_text("host: AMD EPYC\n")

    _metrics(folder, lost[:2])  # the same numerics: the snapshot holds more, and stays
    assert "snapshot kept" in (said := _snapshot(tmp_path))
    assert "repeats the first 2 of the snapshot's 5 epochs to the last digit" in said
    assert len((keep / "metrics.jsonl").read_text().splitlines()) == 5

    _metrics(folder, [231.08, 175.11])  # another host: its epochs differ from the first
    said = _snapshot(tmp_path, "--status")  # says so, and moves nothing
    assert f"{run}: waiting (2 epochs done; epoch 2: valid 175.11; does not repeat the snapshot's first 2" in said
    assert len((keep / "metrics.jsonl").read_text().splitlines()) == 5
    said = _snapshot(tmp_path)
    assert f"{run}: the run does not repeat the snapshot's first 2 epochs: its 5 epochs moved to" in said
    assert f"{run}: snapshot of 2 epochs" in said
    aside = keep / "lost-5-epochs"
    assert [json.loads(line)["valid_ppl"] for line in (aside / "metrics.jsonl").open()] == lost
    assert (aside / "queue.log").read_text() == "host: AMD EPYC\n"
    assert [json.loads(line)["valid_ppl"] for line in (keep / "metrics.jsonl").open()] == [231.08, 175.11]

    # an attempt set aside earlier, from a host with the numerics of the one training now: repeated as far as both go
    _metrics(keep / "lost-3-epochs", [231.08, 175.11, 160.5])
    said = _snapshot(tmp_path, "--status")
    assert "repeats the first 2 epochs of lost-3-epochs to the last digit" in said
    assert "lost-5-epochs to the last digit" not in said
