"""tools/device_carry.sh unpack: a run returned from a lent GPU machine (runs.tar.gz, cut into 15 MiB pieces by
tools/device_reproduce.sh) goes back under the runs folder, its device log into the run's queue log, and never
replaces a folder that has trained further; tools/device_env.sh, the set-up both device scripts source there."""

import io
import subprocess
import sys
import tarfile
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "tools" / "device_carry.sh"
DEVICE_ENV = SCRIPT.parent / "device_env.sh"


def _returned(at: Path, epochs: int, pieces: int = 2) -> None:
    """What a device call sends back: runs.tar.gz.NN and its reproduce.log naming the GPU."""
    files = {
        "t/re-bias/config.toml": '[data]\nname = "wikitext-2"\n',
        "t/re-bias/metrics.jsonl": "".join(f'{{"epoch": {e + 1}}}\n' for e in range(epochs)),
        "t/re-bias/checkpoints/last.safetensors": "weights",
        "t/re-bias.log": '[data]\nname = "wikitext-2"\n\nepoch   1 | valid ppl 217.41\ntiedlm: interrupted\n',
    }
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo("./" + name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    blob = buffer.getvalue()
    at.mkdir()
    cut = len(blob) // pieces + 1
    for i in range(pieces):
        (at / f"runs.tar.gz.{i:02d}").write_bytes(blob[i * cut : (i + 1) * cut])
    (at / "reproduce.log").write_text(
        "NVIDIA H200, 143771 MiB, 580.159.04\nre-bias: exit 130\nreproduce exit 124 after 452 s\nNVIDIA H200\ntotal 4\n"
    )


def _unpack(at: Path, runs: Path) -> subprocess.CompletedProcess:
    env = {"PATH": "/usr/bin:/bin", "TIEDLM_RUNS": str(runs), "HOME": str(runs.parent)}
    return subprocess.run(["bash", str(SCRIPT), "unpack", str(at)], env=env, capture_output=True, text=True)


def test_unpack_puts_a_returned_run_back_with_its_device_log(tmp_path):
    _returned(tmp_path / "at", epochs=3)
    done = _unpack(tmp_path / "at", tmp_path / "runs")
    assert done.returncode == 0, done.stderr
    run = tmp_path / "runs" / "t" / "re-bias"
    assert len((run / "metrics.jsonl").read_text().splitlines()) == 3
    assert (run / "checkpoints" / "last.safetensors").read_text() == "weights"
    log = (tmp_path / "runs" / "queue-t-re-bias.log").read_text().splitlines()
    assert "returned from NVIDIA H200 (tools/device_reproduce.sh" in log[0] and log[0].endswith("now 3 epochs done:")
    assert log[1:] == ["epoch   1 | valid ppl 217.41", "tiedlm: interrupted"]  # the config's lines left out

    # a later call's run replaces it; a returned run with fewer epochs than the folder here does not
    (tmp_path / "at").rename(tmp_path / "at-1")
    _returned(tmp_path / "at", epochs=5, pieces=1)
    assert _unpack(tmp_path / "at", tmp_path / "runs").returncode == 0
    assert len((run / "metrics.jsonl").read_text().splitlines()) == 5
    kept = _unpack(tmp_path / "at-1", tmp_path / "runs")
    assert kept.returncode == 0 and "kept" in kept.stdout
    assert len((run / "metrics.jsonl").read_text().splitlines()) == 5


def test_usage_error_exits_2(tmp_path):
    done = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True)
    assert done.returncode == 2 and done.stderr.startswith("usage: bash tools/device_carry.sh")


def _wheel(at: Path) -> None:
    """A one-module wheel standing in for the carried tomli-w wheel (no package index here or there)."""
    import zipfile

    at.mkdir()
    files = {
        "carried.py": "NAME = 'carried'\n",
        "carried-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: carried\nVersion: 1.0\n",
        "carried-1.0.dist-info/WHEEL": "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    files["carried-1.0.dist-info/RECORD"] = "".join(f"{name},,\n" for name in [*files, "carried-1.0.dist-info/RECORD"])
    with zipfile.ZipFile(at / "carried-1.0-py3-none-any.whl", "w") as whl:
        for name, text in files.items():
            whl.writestr(name, text)


def _carried_corpus(root: Path) -> dict:
    """A carried .data.tar.xz holding ptb/train.txt ("a b c") in ``root``; the environment device_env.sh runs in
    here (this Python on PATH, the site folder under ``root``)."""
    (root / "ptb").mkdir()
    (root / "ptb" / "train.txt").write_text("a b c\n")
    subprocess.run(["tar", "-cJf", ".data.tar.xz", "ptb"], cwd=root, check=True)
    return {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "TIEDLM_DEVICE_SITE": str(root / "site")}


def test_device_env_installs_the_carried_wheel_once_and_points_at_the_carried_corpora(tmp_path):
    """tools/device_env.sh, which both device scripts source: the wheel into the site folder (once), src ahead of
    it on PYTHONPATH, .data.tar.xz unpacked and named by TIEDLM_DATA."""
    _wheel(tmp_path / ".whl")
    env = _carried_corpus(tmp_path)
    site = Path(env["TIEDLM_DEVICE_SITE"])
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    show = 'python3 -c "import carried; print(carried.NAME)"; echo "$PYTHONPATH"; echo "$TIEDLM_DATA"'
    (tmp_path / ".data" / "ptb").mkdir(parents=True)  # an older .data kept by a warm machine: PTB alone, empty
    for _ in range(2):  # two calls on a warm machine (fresh shells): the second installs nothing again
        done = subprocess.run(
            ["bash", "-c", f". {DEVICE_ENV} && {show}"], cwd=tmp_path, env=env, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines() == ["carried", f"src:{site}", f"{tmp_path}/.data"]
        assert (tmp_path / ".data" / "ptb" / "train.txt").read_text() == "a b c\n"
        (tmp_path / ".whl" / "carried-1.0-py3-none-any.whl").write_text("not a wheel")  # pip would fail on it
        assert done.stderr == ""
    assert sorted(p.name for p in site.iterdir()) == ["carried-1.0.dist-info", "carried.py"]


def test_device_env_sourced_again_by_a_child_script_does_nothing(tmp_path):
    """device_reproduce.sh sources tools/device_env.sh and then runs device_selfcheck.sh, which sources it again:
    the child inherits the set-up and skips it (no second unpack; PYTHONPATH keeps one src)."""
    env = _carried_corpus(tmp_path)
    child = f'. {DEVICE_ENV} && echo "$PYTHONPATH" && echo "$TIEDLM_DATA"'
    parent = f". {DEVICE_ENV} && echo broken > .data.tar.xz && bash -c '{child}'"  # a second unpack would fail on it
    done = subprocess.run(["bash", "-c", parent], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert done.stdout.splitlines() == ["src", f"{tmp_path}/.data"]
    assert (tmp_path / ".data" / "ptb" / "train.txt").read_text() == "a b c\n"
