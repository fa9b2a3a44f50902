"""`tiedlm reproduce`: tables listed, planned with an estimate, run end to end on a tiny corpus (start, skip,
resume), and rendered as a page beside the paper's numbers."""

import json
import math
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tiedlm import reproduce as rp
from tiedlm.cli import main
from tiedlm.registry import tasks as _tasks

from conftest import write_tiny_treebank

TASKS = _tasks()

TINY = [
    "--set",
    "model.embedding_size=16",
    "--set",
    "model.encoder.hidden_size=16",
    "--set",
    "train.epochs=1",
    "--set",
    "train.batch_size=4",
    "--set",
    "train.bptt=8",
    "--set",
    "train.eval_batch_size=4",
    "--set",
    "train.precision=fp32",
    "--set",
    "train.device=cpu",
]


def _result_folder(run, config_toml: str, **summary) -> None:
    """A published run folder (config.toml, metrics.jsonl, summary.json: no checkpoints), its summary's figures
    given (the rest filled in)."""
    run.mkdir(parents=True)
    (run / "config.toml").write_text(config_toml)
    (run / "metrics.jsonl").write_text(json.dumps({"epoch": 1, "valid_ppl": 99.0}) + "\n")
    base = {"parameters": {"total": 2_650_000}, "wall_time_s": 600, "device": "cpu", "tokens_per_s": 1000}
    (run / "summary.json").write_text(json.dumps({**base, "command": "tiedlm train x", "seed": 1111, **summary}))


def test_list_names_every_table(capsys):
    assert main(["reproduce", "--list", "--json"]) == 0
    tables = {t["table"]: t for t in json.loads(capsys.readouterr().out)}
    assert set(tables) == set(rp.TABLES)
    assert tables["pappas2019-table4-small"]["runs"]["budget"] == [
        "full",
        "tied",
        "bilinear",
        "dual",
        "dual-res",
        "drill-1",
        "drill-4",
        "dual-res-cpu",
        "tied-seed1112",
        "dual-res-seed1112",
        "drill-4-seed1112",
        "dual-res-cpu-seed1112",
    ]
    assert main(["reproduce", "inan2017-tabel1-small"]) == 2
    assert "similar: inan2017-table1-small" in capsys.readouterr().err


def test_dry_run_plans_every_run_with_an_estimate(tiny_corpus, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("tiedlm.runtime.cpu_model", lambda: "Test CPU (family 1 model 2)")
    dry = ["reproduce", "transformer-lm", "--dry-run", "--json", "--data", str(tiny_corpus)]
    dry += ["--runs", str(tmp_path / "runs"), *TINY]
    assert main(dry) == 0
    plan = json.loads(capsys.readouterr().out)
    assert [r["run"] for r in plan["runs"]] == [s.name for s in rp.table("transformer-lm").runs["budget"]]
    assert all(r["status"] == "missing" and r["estimated_s"] > 0 for r in plan["runs"])
    assert all(r["command"].startswith("tiedlm train ptb-transformer-") for r in plan["runs"])
    assert not (tmp_path / "runs").exists()  # a dry run starts nothing
    assert set(plan["machine"]) == {"other_cores", "cpus", "busy", "cpu", "cpu_class"}

    # where other processes kept cores busy while it timed, the plan says that its estimates run long; else nothing
    for cores, busy in ((1.5, True), (0.1, False), (None, False)):
        monkeypatch.setattr("tiedlm.runtime.OtherLoad.cores", lambda self, cores=cores: cores)
        assert main([a for a in dry if a != "--json"]) == 0
        out = capsys.readouterr().out
        assert ("note: the machine was busy (other processes kept 1.5 of its" in out) is busy
        assert "would train on this machine's GPU" not in out  # no GPU here
    # with a GPU, runs on train.device = auto would train there: the CPU estimate says it does not measure that
    monkeypatch.setattr("torch.cuda.is_available", lambda: True)
    assert main([*(a for a in dry if a != "--json"), "--set", "train.device=auto"]) == 0
    every = ", ".join(s.name for s in rp.table("transformer-lm").runs["budget"])
    assert f"note: {every} would train on this machine's GPU" in capsys.readouterr().out
    assert main([a for a in dry if a != "--json"]) == 0  # TINY trains on the CPU (train.device = cpu)
    assert "would train on this machine's GPU" not in capsys.readouterr().out
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    assert main([*dry, "--only", "drill"]) == 0
    assert [r["run"] for r in json.loads(capsys.readouterr().out)["runs"]] == ["drill"]
    assert main(["reproduce", "transformer-lm", "--dry-run", "--only", "drill-9"]) == 2
    assert "its runs are tied, drill" in capsys.readouterr().err

    # an interrupted run is estimated for the epochs it has left: 9 of 12 here
    run = tmp_path / "runs" / "transformer-lm" / "drill"
    (run / "checkpoints").mkdir(parents=True)
    (run / "checkpoints" / "last.safetensors").write_bytes(b"")
    (run / "metrics.jsonl").write_text("".join(json.dumps({"epoch": e}) + "\n" for e in (1, 2, 3)))
    assert (
        rp.fraction_left(
            {
                "status": "interrupted",
                "dir": run,
                "spec": rp.table("transformer-lm").runs["budget"][1],
                "config": rp.run_config(rp.table("transformer-lm").runs["budget"][1], []),
            }
        )
        == 9 / 12
    )
    assert main([*dry, "--set", "train.epochs=12", "--only", "drill"]) == 0
    left = json.loads(capsys.readouterr().out)["runs"][0]
    assert left["status"] == "interrupted" and left["command"].startswith("tiedlm train --resume")
    assert (left["epochs_done"], left["epochs"], left["at_most"]) == (3, 12, False)  # no early stop: not a bound

    # the table's folder now exists, so the estimate is kept for its page, which says what is left of the run
    kept = json.loads((tmp_path / "runs" / "transformer-lm" / rp.ESTIMATE).read_text())
    assert list(kept) == ["drill"] and kept["drill"]["estimated_h"] == round(left["estimated_s"] / 3600, 2)
    assert (kept["drill"]["epochs_done"], kept["drill"]["epochs"], kept["drill"]["threads"]) == (3, 12, 1)
    page = rp.render(rp.table("transformer-lm"), "budget", tmp_path / "runs", [], tmp_path / "pages").read_text()
    (line,) = [ln for ln in page.splitlines() if ln.startswith("| `drill` |")]
    assert line.endswith(
        f"estimated ~{kept['drill']['estimated_h']:.1f} h left on a {kept['drill']['cpus']}-core "
        f"{kept['drill']['cpu_class']} at 1 thread, 3 of 12 epochs done (`--dry-run`, {kept['drill']['date']}) |"
    )
    assert not [ln for ln in page.splitlines() if ln.startswith("| `tied` |") and "h left" in ln]  # never estimated
    rp.publish_estimates(rp.table("transformer-lm"), tmp_path / "runs", tmp_path / "results", log=lambda *a: None)
    assert (tmp_path / "results" / "transformer-lm" / rp.ESTIMATE).read_bytes() == (
        tmp_path / "runs" / "transformer-lm" / rp.ESTIMATE
    ).read_bytes()

    # committed results (git-tracked): no run trains there, so a dry run over them keeps no estimate there
    import subprocess

    subprocess.run(["git", "init", "-q", str(tmp_path / "results")], check=True)
    subprocess.run(["git", "-C", str(tmp_path / "results"), "add", "."], check=True)
    published = (tmp_path / "results" / "transformer-lm" / rp.ESTIMATE).read_bytes()
    assert main([*(a if a != str(tmp_path / "runs") else str(tmp_path / "results") for a in dry)]) == 0
    capsys.readouterr()
    assert (tmp_path / "results" / "transformer-lm" / rp.ESTIMATE).read_bytes() == published

    # once the run has finished, the next dry run drops its estimate: nothing of it is left to train
    (run / "summary.json").write_text("{}")
    assert main([*dry, "--set", "train.epochs=12", "--only", "drill"]) == 0
    capsys.readouterr()
    assert json.loads((tmp_path / "runs" / "transformer-lm" / rp.ESTIMATE).read_text()) == {}


def test_dry_run_estimates_a_started_run_at_its_own_pace(tiny_corpus, tmp_path, capsys, monkeypatch):
    """A run that has trained epochs is estimated from its own epochs' wall times (the median of its last 5), not
    from steps the dry run times beside it; the page says so."""
    run = tmp_path / "runs" / "transformer-lm" / "drill"
    (run / "checkpoints").mkdir(parents=True)
    (run / "checkpoints" / "last.safetensors").write_bytes(b"")
    walls = [1000, 100, 150, 120, 130, 100]  # the first epoch slow (falls out of the last 5), median of the rest 120
    cumulative = [sum(walls[: e + 1]) for e in range(len(walls))]
    (run / "metrics.jsonl").write_text(
        "".join(json.dumps({"epoch": e + 1, "wall_time_s": w}) + "\n" for e, w in enumerate(cumulative))
    )

    def untimed(*args, **kwargs):
        raise AssertionError("a started run's estimate times no steps")

    monkeypatch.setattr("tiedlm.reproduce.estimate.estimate_seconds", untimed)
    monkeypatch.setattr("os.getloadavg", lambda: (3.0, 3.0, 3.0))
    monkeypatch.setattr("tiedlm.runtime.cpu_model", lambda: "Test CPU (family 1 model 2)")
    dry = ["reproduce", "transformer-lm", "--dry-run", "--data", str(tiny_corpus), "--runs", str(tmp_path / "runs")]
    assert main([*dry, *TINY, "--set", "train.epochs=12", "--only", "drill", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)["runs"]
    assert row["estimated_s"] == pytest.approx(120 * (12 - 6)) and row["pace"] == {"epoch_s": 120.0, "epochs": 5}
    assert main([*dry, *TINY, "--set", "train.epochs=12", "--only", "drill"]) == 0
    out = capsys.readouterr().out
    assert "estimated: drill at the pace of their last epochs" in out and "machine was busy" not in out
    kept = json.loads((tmp_path / "runs" / "transformer-lm" / rp.ESTIMATE).read_text())["drill"]
    assert kept["pace"] == {"epoch_s": 120.0, "epochs": 5} and kept["estimated_h"] == 0.2
    page = rp.render(rp.table("transformer-lm"), "budget", tmp_path / "runs", [], tmp_path / "pages").read_text()
    (line,) = [ln for ln in page.splitlines() if ln.startswith("| `drill` |")]
    assert line.endswith(
        "estimated ~0.2 h left at the run's own pace (2.0 min an epoch, the median of its last 5 epochs), 6 of 12 "
        f"epochs done (`--dry-run`, {kept['date']}) |"
    )
    assert "Test CPU" not in page  # a page names the device class, never the host
    # a row not started: the dry run's CPU figure, and the GPU figure from the row's measured epoch time
    fresh = {"estimated_h": 20.0, "epochs_done": 0, "epochs": 40, "threads": 1, "cpus": 2, "date": "d"}
    fresh |= {"cpu_class": "AVX2 CPU", "pace": None}
    assert rp.estimate.estimate_line(fresh, gpu_epoch_s=27, epochs=40) == (
        "estimated ~20.0 h on a 2-core AVX2 CPU at 1 thread (`--dry-run`, d); ~18 min on a GPU (40 epochs at 27 s "
        "an epoch, measured on an H100-class GPU)"
    )
    assert rp.estimate.estimate_line(None) == ""

    # a run whose metrics name the machine of its epochs (one trained on a lent GPU, estimated on this CPU): the
    # page names that machine, not the dry run's host
    records = [{"epoch": e + 1, "wall_time_s": w, "machine": "NVIDIA H200"} for e, w in enumerate(cumulative)]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    assert main([*dry, *TINY, "--set", "train.epochs=12", "--only", "drill", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)["runs"]
    assert row["pace"] == {"epoch_s": 120.0, "epochs": 5, "machine": "NVIDIA H200"}
    kept = json.loads((tmp_path / "runs" / "transformer-lm" / rp.ESTIMATE).read_text())["drill"]
    assert "NVIDIA" not in rp.estimate.estimate_line(kept)

    # the other tasks' records: a tagger's per-epoch `seconds`, a translator's `epoch_seconds`; untimed ones left out
    assert rp.estimate.epoch_walls([{"seconds": 30.0}, {"epoch_seconds": 40.0}, {"epoch": 3}]) == [30.0, 40.0]
    assert rp.estimate.pace([{"epoch": 1}]) is None


@pytest.mark.slow
def test_reproduce_runs_skips_resumes_and_renders(tiny_corpus, tmp_path, capsys):
    args = [
        "reproduce",
        "pappas2019-table4-small",
        "--data",
        str(tiny_corpus),
        "--runs",
        str(tmp_path / "runs"),
        "--out",
        str(tmp_path / "pages"),
        "--jobs",
        "2",
        *TINY,
    ]
    assert main(args) == 0
    table_dir = tmp_path / "runs" / "pappas2019-table4-small"
    names = ["bilinear", "dual", "dual-res", "drill-1", "drill-4", "tied-seed1112", "drill-4-seed1112", "dual-res-cpu"]
    names.append("dual-res-cpu-seed1112")
    assert all((table_dir / n / "summary.json").is_file() for n in names)
    # "full" and "tied" are Inan's "vd" and "re-bias" (the same configs): trained once, in that table's folders
    assert all((tmp_path / "runs" / "inan2017-table1-small" / n / "summary.json").is_file() for n in ("vd", "re-bias"))
    assert not (table_dir / "full").exists() and not (table_dir / "tied").exists()
    drill = json.loads((table_dir / "drill-4" / "summary.json").read_text())
    assert "model.output.depth=4" in drill["command"]
    page = (tmp_path / "pages" / "pappas2019-table4-small.md").read_text()
    rows = len(rp.table("pappas2019-table4-small").runs["budget"])
    assert page.count("| finished |") == rows and "`tiedlm train ptb-small-re" in page
    # each finished run names the command that runs it again: the same --set arguments it was started with
    line = next(ln for ln in page.splitlines() if ln.startswith("| `drill-4` |"))
    runs_arg = str(tmp_path / "runs")
    assert f"`tiedlm reproduce pappas2019-table4-small --scale budget --runs {runs_arg} --only RUN`" in page
    assert line.split(" | ")[1] == "1111, 1112"  # the row's seeds: one command, its seed as SEED
    rerun = shlex.split(line.split(" | ")[2].strip("`").replace("train.seed=SEED", f"train.seed={drill['seed']}"))
    started = shlex.split(drill["command"])
    sets = lambda argv: [argv[i + 1] for i, a in enumerate(argv) if a == "--set"]  # noqa: E731
    assert rerun[:3] == ["tiedlm", "train", "ptb-small-re"] and sets(rerun) == sets(started)
    assert (tmp_path / "pages" / "pappas2019-table4-small-valid.png").stat().st_size > 0
    # Figure 3 of the finished runs, tied first: its overall cross-entropy is the streamed test perplexity's log
    bands = json.loads((table_dir / "bands.json").read_text())
    assert bands["runs"] == ["tied", "full", "bilinear", "dual", "dual-res", "drill-1", "drill-4", "dual-res-cpu"]
    inan = tmp_path / "runs" / "inan2017-table1-small"
    for name, folder in (("tied", inan / "re-bias"), ("drill-4", table_dir / "drill-4")):
        streams = json.loads((folder / "summary.json").read_text())["test_ppl_streams"]
        assert math.exp(bands["overall_ce"][name]) == pytest.approx(streams, rel=1e-4)
    assert "## Cross-entropy by training-frequency band (Figure 3)" in page
    assert (tmp_path / "pages" / "pappas2019-table4-small-bands.png").stat().st_size > 0
    capsys.readouterr()

    (table_dir / "dual" / "summary.json").unlink()  # as if stopped during its final evaluation
    before = (table_dir / "bilinear" / "summary.json").read_text()
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "bilinear: finished, skipped" in out and "dual: resume: tiedlm train --resume" in out
    assert (table_dir / "dual" / "summary.json").is_file()
    assert (table_dir / "bilinear" / "summary.json").read_text() == before

    # A machine handed back bare: the baseline's checkpoints are gone, its figures are in the published analysis
    # (here without drill-4). Publishing adds drill-4 against those figures: the table all runs analysed together
    # gave, to float precision.
    def without(table: dict, name: str) -> dict:
        t = json.loads(json.dumps(table))
        t["runs"].remove(name)
        for r in t["rows"]:
            del r["ce"][name], r["relative_ce"][name]
        del t["overall_ce"][name]
        return t

    published = tmp_path / "results" / "pappas2019-table4-small" / "bands.json"
    published.parent.mkdir(parents=True)
    published.write_text(json.dumps(without(bands, "drill-4")))
    (table_dir / "bands.json").unlink()
    shutil.rmtree(inan / "re-bias" / "checkpoints")
    assert main([*args, "--publish", str(tmp_path / "results")]) == 0
    assert "bands (Figure 3) of drill-4, beside " in capsys.readouterr().out  # the one run no analysis held
    merged = json.loads(published.read_text())
    assert merged["runs"] == bands["runs"]
    nan = lambda d: {k: math.nan if v is None else v for k, v in d.items()}  # noqa: E731  (an empty band: None)
    for got, want in zip(merged["rows"], bands["rows"]):
        assert nan(got["ce"]) == pytest.approx(nan(want["ce"]), rel=1e-6, nan_ok=True)
        assert nan(got["relative_ce"]) == pytest.approx(nan(want["relative_ce"]), rel=1e-5, nan_ok=True)
    assert merged["overall_ce"] == pytest.approx(bands["overall_ce"], rel=1e-6)


@pytest.mark.slow
def test_several_tables_run_as_one_queue_in_the_order_asked_and_a_shared_run_once(tiny_corpus, tmp_path, capsys):
    """`reproduce A B --only B/x A/y ...` is the campaign's queue: runs in the order given, --jobs at a time, a run
    folder two tables share trained once, every named table's page written."""
    both = ["reproduce", "inan2017-table1-small", "pappas2019-table4-small", "--data", str(tiny_corpus)]
    both += ["--runs", str(tmp_path / "runs"), "--out", str(tmp_path / "pages"), *TINY]
    two = ["reproduce", "transformer-lm", "pappas2019-table4-small", "--dry-run", "--runs", str(tmp_path / "x")]
    assert main([*two, "--only", "tied"]) == 2  # both tables have a tied row
    assert "--only tied: a run of several tables: name it TABLE/RUN; their runs are transformer-lm/tied, " in (
        capsys.readouterr().err
    )
    assert main([*two, "--only", "pappas2019-table4-small/drill-9"]) == 2
    assert "not a run of transformer-lm or pappas2019-table4-small at --scale budget" in capsys.readouterr().err
    queue = ["pappas2019-table4-small/bilinear", "pappas2019-table4-small/tied", "inan2017-table1-small/re-bias"]
    assert main([*both, "--jobs", "1", "--only", *queue]) == 0
    out = capsys.readouterr().out
    started = [ln.split(":")[0] for ln in out.splitlines() if ": start: tiedlm train" in ln]
    assert started == ["pappas2019-table4-small/bilinear", "pappas2019-table4-small/tied"]  # re-bias is that tied
    runs = tmp_path / "runs"
    assert (runs / "inan2017-table1-small" / "re-bias" / "summary.json").is_file()
    assert (runs / "pappas2019-table4-small" / "bilinear" / "summary.json").is_file()
    for page in ("inan2017-table1-small", "pappas2019-table4-small"):
        assert (tmp_path / "pages" / f"{page}.md").read_text().count("| finished |") == (1 if "inan" in page else 2)
    assert json.loads((runs / "pappas2019-table4-small" / "bands.json").read_text())["runs"] == ["tied", "bilinear"]

    assert main([*both, "--dry-run", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    labels = [r["run"] for r in plan["runs"]]
    assert labels[:2] == ["inan2017-table1-small/vd", "inan2017-table1-small/al"]
    assert "pappas2019-table4-small/full" not in labels and "pappas2019-table4-small/tied" not in labels
    assert {r["run"]: r["status"] for r in plan["runs"]}["inan2017-table1-small/re-bias"] == "finished"
    assert plan["table"] == ["inan2017-table1-small", "pappas2019-table4-small"]

    # A bare machine (no run folders) with the published results: --skip-published trains only what they lack
    assert main([*both, "--publish", str(tmp_path / "results")]) == 0
    capsys.readouterr()
    bare = [a if a != str(runs) else str(tmp_path / "bare") for a in both]
    skip = ["--skip-published", str(tmp_path / "results")]
    assert main([*bare, *skip, "--dry-run", "--json"]) == 0
    status = {r["run"]: (r["status"], r["estimated_s"]) for r in json.loads(capsys.readouterr().out)["runs"]}
    assert status["pappas2019-table4-small/bilinear"] == ("published", 0.0)
    assert status["inan2017-table1-small/re-bias"] == ("published", 0.0)
    assert status["inan2017-table1-small/vd"][0] == "missing" and status["inan2017-table1-small/vd"][1] > 0
    assert main([*bare, *skip, "--only", "pappas2019-table4-small/bilinear", "--no-page"]) == 0
    published = tmp_path / "results" / "pappas2019-table4-small" / "bilinear"
    assert f"pappas2019-table4-small/bilinear: finished in {published}, skipped" in capsys.readouterr().out
    assert not (tmp_path / "bare" / "pappas2019-table4-small" / "bilinear").exists()


def test_render_only_writes_the_page_from_finished_runs_and_names_old_test_protocols(tmp_path, capsys):
    """A page from result folders (config.toml, metrics.jsonl, summary.json only: no checkpoints), as committed."""
    from tiedlm.tasks.lm.config import Config

    table_dir = tmp_path / "runs" / "pappas2019-table4-small"
    for name, protocol in (("tied", "batch 1"), ("drill-4", "10 streams")):
        run = table_dir / name if name == "drill-4" else tmp_path / "runs" / "inan2017-table1-small" / "re-bias"
        _result_folder(
            run,
            Config.load("ptb-small-re").to_toml(),
            valid_ppl=90.0,
            test_ppl=86.5,
            command=f"tiedlm train {name}",
            test_protocol=protocol,
        )
    out = tmp_path / "pages"
    assert (
        main(
            [
                "reproduce",
                "pappas2019-table4-small",
                "--runs",
                str(tmp_path / "runs"),
                "--out",
                str(out),
                "--render-only",
            ]
        )
        == 0
    )
    page = (out / "pappas2019-table4-small.md").read_text()
    rows = len(rp.table("pappas2019-table4-small").runs["budget"])
    assert page.count("| finished |") == 2 and sum(ln.endswith("| not run |") for ln in page.splitlines()) == rows - 2
    assert "| 90.00 / 86.50 |" in page and "| 90.00 / 86.50 (10 streams) |" in page  # the protocol is said
    assert not any((table_dir / n).exists() for n in ("full", "bilinear", "dual", "drill-1"))  # nothing started
    # each row still to run names the command that runs it
    runs_arg = str(tmp_path / "runs")  # not committed: the page's commands train there
    assert f"`tiedlm reproduce pappas2019-table4-small --scale budget --runs {runs_arg} --only RUN`" in page
    assert "| `dual` | not run | `tiedlm train ptb-small-re --out RUN " in page

    # second seeds: the seeds section compares batch-1 figures; a run with only a streamed figure is said so
    for name, test in (("tied-seed1112", 86.0), ("drill-4-seed1112", 85.5)):
        cfg = Config.load("ptb-small-re").to_toml()
        _result_folder(table_dir / name, cfg, valid_ppl=90.0, test_ppl=test, seed=1112, test_protocol="batch 1")
    page = rp.render(rp.table("pappas2019-table4-small"), "budget", tmp_path / "runs", [], out).read_text()
    assert "86.50 (1111, 10 streams), 85.50 (1112) |" in page and "+0.00 (1111, 10 streams)" in page
    summary = json.loads((table_dir / "drill-4" / "summary.json").read_text())
    summary.update(test_ppl=85.123, test_protocol="batch 1", test_ppl_streams=86.5)  # measured at batch 1 too
    (table_dir / "drill-4" / "summary.json").write_text(json.dumps(summary))
    page = rp.render(rp.table("pappas2019-table4-small"), "budget", tmp_path / "runs", [], out).read_text()
    assert "| drill-4 | 2 | 90.00 ± 0.00 | 85.31 ± 0.27 | 85.12 (1111), 85.50 (1112) |" in page
    assert "| drill-4 − tied | -1.38 (1111), -0.50 (1112) | -0.94 ± 0.62 | the same sign at every seed |" in page


def test_publish_copies_finished_runs_and_never_overwrites_other_results(tmp_path, capsys):
    from tiedlm.tasks.lm.config import Config

    runs, published = tmp_path / "runs", tmp_path / "results"
    run = runs / "pappas2019-table4-small" / "bilinear"
    run.mkdir(parents=True)
    (run / "config.toml").write_text(Config.load("ptb-small-re").with_overrides(["model.output=bilinear"]).to_toml())
    (run / "metrics.jsonl").write_text(json.dumps({"epoch": 1, "valid_ppl": 99.0}) + "\n")
    (run.parent / "bilinear.log").write_text("epoch 1 ...\n")
    unfinished = runs / "pappas2019-table4-small" / "dual"
    unfinished.mkdir()
    (unfinished / "config.toml").write_text((run / "config.toml").read_text())
    summary = {
        "valid_ppl": 94.0,
        "test_ppl": 90.1,
        "test_protocol": "batch 1",
        "parameters": {"total": 2_700_000},
        "wall_time_s": 600,
        "device": "cpu",
        "tokens_per_s": 1000,
        "command": "tiedlm train x",
        "seed": 1111,
    }
    (run / "summary.json").write_text(json.dumps(summary))
    args = [
        "reproduce",
        "pappas2019-table4-small",
        "--runs",
        str(runs),
        "--publish",
        str(published),
        "--out",
        str(tmp_path / "pages"),
        "--json",
    ]
    assert main(args) == 0
    assert json.loads(capsys.readouterr().out)["published"] == ["bilinear"]  # the unfinished run stays out
    dst = published / "pappas2019-table4-small" / "bilinear"
    assert sorted(p.name for p in dst.iterdir()) == ["config.toml", "metrics.jsonl", "summary.json", "train.log"]
    page = (tmp_path / "pages" / "pappas2019-table4-small.md").read_text()
    assert "| 94.00 / 90.10 |" in page
    # the page is the one its own "Rendered by" command draws from the published folder, byte for byte (it once
    # named the folder the runs trained in, which that command does not know)
    (rendered_by,) = [ln.split("Rendered by `")[1].split("`")[0] for ln in page.splitlines() if "Rendered by" in ln]
    assert main(shlex.split(rendered_by)[1:]) == 0
    assert (tmp_path / "pages" / "pappas2019-table4-small.md").read_text() == page
    capsys.readouterr()
    assert main(args) == 0  # publishing again changes nothing
    (run / "summary.json").write_text(json.dumps(summary | {"test_ppl": 80.0}))
    assert main(args) == 2  # other results under the same name: refused, the committed file kept
    assert "never overwritten" in capsys.readouterr().err
    assert json.loads((dst / "summary.json").read_text())["test_ppl"] == 90.1


def test_the_estimate_times_the_tasks_own_train_step_in_the_runs_precision(tiny_corpus, monkeypatch):
    """``reproduce --dry-run`` times the task's own ``train_step`` (no copy of it), set up by the harness as the
    run will be, in the precision the run will train in: a whole run is the mean timed step times the task's own
    batches an epoch and its epochs, plus 10% for validation."""
    import torch

    from tiedlm.runtime import resolve_precision
    from tiedlm.tasks.lm.config import Config
    from tiedlm.tasks.lm.task import LanguageModelTask
    from tiedlm.train import timing

    from conftest import tiny_overrides

    seen, real = [], LanguageModelTask.train_step

    def spy(self, batch, progress):
        seen.append((self.precision, len(self.batches(1))))
        return real(self, batch, progress)

    monkeypatch.setattr(LanguageModelTask, "train_step", spy)
    monkeypatch.setattr(timing.statistics, "mean", lambda xs: 0.5)  # a fixed step time: the arithmetic checked
    for asked in ("bf16", "auto", "fp32"):
        cfg = Config.load("ptb-small-vd").with_overrides(
            tiny_overrides(tiny_corpus, **{"train.precision": asked, "train.epochs": "3"})
        )
        seen.clear()
        seconds = timing.estimate_seconds(LanguageModelTask(cfg), threads=1)
        assert len(seen) == 3 and {p for p, _ in seen} == {resolve_precision(asked, torch.device("cpu"))}, asked
        assert seconds == pytest.approx(1.1 * 0.5 * seen[0][1] * 3)


def test_dry_run_estimates_tagger_runs_from_timed_batches(tmp_path, capsys, monkeypatch):
    """Every run of the POS table gets an estimate (timed batches of its tagger on the treebank given); the
    translator's estimate counts the target tokens it trains on, per epoch."""
    data = write_tiny_treebank(tmp_path / "tb")
    dry = ["reproduce", "demeester2018-pos", "--dry-run", "--json", "--data", str(data), "--runs", str(tmp_path)]
    assert main([*dry, "--set", "data.min_count=1"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert len(plan["runs"]) == 27 and all(r["estimated_s"] > 0 for r in plan["runs"])  # 9 runs, 3 seeds
    assert plan["estimated_s"] == pytest.approx(sum(r["estimated_s"] for r in plan["runs"]), abs=0.01)


def _subword_ids(cfg, tmp_path):
    from tiedlm.tasks.translation.data import load_parallel_corpus

    corpus = load_parallel_corpus(cfg, tmp_path / "spm", train_vocab=True)
    return [t for _, t in corpus.ids["train"]]


@pytest.mark.slow
def test_a_tagging_table_runs_and_renders_end_to_end(tmp_path, capsys):
    """demeester2018-pos on a tiny treebank of one's own: tag train runs started by reproduce, then the page."""
    data = write_tiny_treebank(tmp_path / "tb")
    args = [
        "reproduce",
        "demeester2018-pos",
        "--data",
        str(data),
        "--runs",
        str(tmp_path / "runs"),
        "--out",
        str(tmp_path / "pages"),
        "--only",
        "dense-8",
        "sparse-128-0.5",
        "--set",
        "train.epochs=1",
        "--set",
        "model.hidden_size=4",
        "--set",
        "data.min_count=1",
    ]
    assert main(args) == 0
    page = (tmp_path / "pages" / "demeester2018-pos.md").read_text()
    assert (
        page.count("| finished |") == 2 and sum(ln.endswith("| not run |") for ln in page.splitlines()) == 25
    )  # 27 rows: 9 runs, 3 seeds
    assert "dev / test accuracy (%)" in page and "%" in page.split("| dense-8 |")[1].split("\n")[0]
    summary = json.loads((tmp_path / "runs" / "demeester2018-pos" / "dense-8" / "summary.json").read_text())
    assert summary["epochs"] == 1 and summary["embedding_size"] == 8


@pytest.mark.parametrize("name", sorted(rp.TABLES))
def test_the_committed_results_pages_are_what_the_committed_runs_render(name, tmp_path):
    """docs/results/TABLE.md is exactly what its stated command renders from results/reproduce: no
    number on the page that the committed run folders do not hold (re-render after publishing a run)."""
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    how = f"tiedlm reproduce {name} --scale budget --runs results/reproduce --render-only --out docs/results"
    page = rp.render(
        rp.table(name),
        "budget",
        root / "results/reproduce",
        [],
        tmp_path,
        command=how,
        links_from=root / "docs/results",
        notes=root / "docs/results/notes" / f"{name}.md",
    )
    assert page.read_text() == (root / "docs/results" / f"{name}.md").read_text(), f"re-run: {how}"


def test_the_page_plot_names_the_curves_as_the_table_names_its_rows(tmp_path, monkeypatch):
    """A row whose run is another table's (Pappas's "full" is Inan's "vd" folder) is drawn under the row's name,
    and the plot is titled with the table's title, not Inan et al.'s Figure 2."""
    from pathlib import Path

    drawn = {}
    monkeypatch.setattr(
        "tiedlm.analysis.report.plot_curves",
        lambda runs, path, title="": drawn.update(names=[r["name"] for r in runs], title=title),
    )
    root = Path(__file__).resolve().parent.parent
    tab = rp.table("pappas2019-table4-small")
    rp.render(tab, "budget", root / "results/reproduce", [], tmp_path)
    finished = ["full", "tied", "bilinear", "dual", "dual-res", "drill-1", "drill-4", "dual-res-cpu", "tied-seed1112"]
    assert drawn["names"][: len(finished)] == finished  # the rows' names, in the table's order
    assert not {"vd", "re-bias"} & set(drawn["names"])
    assert drawn["title"] == tab.title


def test_a_row_that_is_another_tables_run_has_its_config_and_shares_its_folder(tmp_path, capsys):
    """Pappas's "full" on the small encoder is Inan's "vd": every ``same_as`` row resolves to the very config of
    the row it names, and both tables read, render and publish that one folder (nothing is trained twice)."""
    from tiedlm.tasks.lm.config import Config

    shared = [(t, sc, s) for t in rp.TABLES.values() for sc in t.runs for s in t.runs[sc] if s.same_as]
    assert any(s.name == "full" and t.name == "pappas2019-table4-small" for t, _, s in shared)
    for t, scale, spec in shared:
        other_table, other_name = spec.same_as.split("/")
        (other,) = [s for s in rp.table(other_table).runs[scale] if s.name == other_name]
        assert rp.run_config(spec, []).to_toml() == rp.run_config(other, []).to_toml(), (t.name, spec.name)

    run = tmp_path / "runs" / "inan2017-table1-small" / "vd"
    _result_folder(run, Config.load("ptb-small-vd").to_toml(), valid_ppl=92.08, test_ppl=87.51, test_protocol="batch 1")
    rows = rp.plan(rp.table("pappas2019-table4-small"), "budget", tmp_path / "runs", [])
    assert [r["dir"] for r in rows if r["status"] == "finished"] == [run]
    page = rp.render(rp.table("pappas2019-table4-small"), "budget", tmp_path / "runs", [], tmp_path / "pages")
    assert "| full | – / – | 92.08 / 87.51 |" in page.read_text()
    assert rp.publish(rows, tmp_path / "results", log=lambda *a: None) == ["full"]
    assert (tmp_path / "results" / "inan2017-table1-small" / "vd" / "summary.json").is_file()
    assert not (tmp_path / "results" / "pappas2019-table4-small").exists()


def test_published_bands_grow_with_the_runs_but_never_change_a_published_figure(tmp_path):
    tab = rp.table("pappas2019-table4-small")
    runs, into = tmp_path / "runs", tmp_path / "results"
    (runs / tab.name).mkdir(parents=True)

    def bands(ce: dict) -> dict:
        return {
            "baseline": "tied",
            "runs": list(ce),
            "rows": [{"band": "1-10", "ce": dict(ce)}],
            "overall_ce": dict(ce),
            "split": "test",
            "data": "ptb",
        }

    src, dst = runs / tab.name / rp.BANDS, into / tab.name / rp.BANDS
    src.write_text(json.dumps(bands({"tied": 5.0, "bilinear": 5.1})))
    assert rp.publish_bands(tab, runs, into, log=lambda *a: None) and json.loads(dst.read_text())["runs"] == [
        "tied",
        "bilinear",
    ]
    assert not rp.publish_bands(tab, runs, into, log=lambda *a: None)  # the same analysis again: left as it is
    src.write_text(json.dumps(bands({"tied": 5.0000001, "bilinear": 5.1, "drill-4": 4.9})))  # a run more
    assert rp.publish_bands(tab, runs, into, log=lambda *a: None)
    assert json.loads(dst.read_text())["runs"] == ["tied", "bilinear", "drill-4"]
    before = dst.read_text()
    src.write_text(json.dumps(bands({"tied": 5.0, "bilinear": 5.3, "drill-4": 4.9, "dual": 5.2})))  # bilinear changed
    with pytest.raises(rp.UsageError, match="never overwritten"):
        rp.publish_bands(tab, runs, into, log=lambda *a: None)
    assert dst.read_text() == before


def test_budget_rows_train_in_fp32_on_any_machine_and_paper_rows_keep_auto():
    """A CPU with bf16 (AVX512-BF16) would train "auto" budget rows in bf16 and others in fp32: the rows of one
    table, trained on different machines, must not differ in precision (every task has train.precision). A
    row that names its precision (hf-llama-lm's bf16) keeps it, and so do all rows of its table."""
    for t in rp.TABLES.values():
        precisions = set()
        for spec in t.runs["budget"]:
            cfg = rp.run_config(spec, [])
            own = [o for o in spec.overrides if o.startswith("train.precision=")]
            precision = cfg.train.precision
            precisions.add(precision)
            assert precision == (own[-1].split("=")[1] if own else "fp32"), (t.name, spec.name)
            assert f"--set train.precision={precision}" in rp.rerun_command(spec, [])
            assert rp.rerun_command(spec, []).count("train.precision") == 1
        assert len(precisions) <= 1, (t.name, precisions)
        for spec in t.runs.get("paper", ()):
            if spec.task == "lm" and not any(o.startswith("train.precision=") for o in spec.overrides):
                assert rp.run_config(spec, []).train.precision == "auto", (t.name, spec.name)
    assert rp.run_config(rp.table("hf-llama-lm").runs["budget"][0], []).train.precision == "bf16"


def test_a_run_another_process_trains_is_skipped_not_started_twice(tmp_path):
    """Two tables can share a run (same_as): while one `reproduce` trains it, the other leaves it alone."""
    spec = rp.table("pappas2019-table4-small").runs["budget"][0]
    row = {"spec": spec, "dir": tmp_path / "vd", "status": "running", "config": rp.run_config(spec, [])}
    row.update(extra=[], table="pappas2019-table4-small", label=spec.name)
    said = []
    assert rp.execute([row], jobs=1, threads=1, log=said.append) == []
    assert said == [f"full: another process is training it in {tmp_path / 'vd'}, skipped"]
    assert rp.fraction_left(row) == 1.0 and not (tmp_path / "vd").exists()


def _queue_command(corpus, runs, *only: str) -> list[str]:
    """`tiedlm reproduce` of ``only`` (in order, one at a time) on the tiny corpus, with runs that never end."""
    return [
        *(sys.executable, "-m", "tiedlm.cli", "reproduce", "pappas2019-table4-small", "--data", str(corpus)),
        *("--runs", str(runs), "--no-page", "--jobs", "1", "--only", *only, *TINY, "--set", "train.epochs=1000"),
    ]


def _wait(until, proc: subprocess.Popen, what: str):
    deadline = time.time() + 600  # generous: on a loaded machine the imports alone can take a minute
    while not (found := until()):
        if proc.poll() is not None:
            pytest.fail(f"reproduce exited before {what}: {proc.communicate()[1]}")
        if time.time() > deadline:
            pytest.fail(f"no {what} after 10 minutes")
        time.sleep(0.05)
    return found


def _training_process(run) -> int | None:
    """The pid of the `tiedlm train --resume RUN` process, read from /proc."""
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            argv = cmdline.read_bytes().split(b"\0")
        except OSError:  # it exited meanwhile
            continue
        if b"--resume" in argv and str(run).encode() in argv:
            return int(cmdline.parent.name)
    return None


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="finds the training process in /proc")
def test_a_signal_stops_the_queue_with_checkpoints_and_the_same_command_resumes_it(tiny_corpus, tmp_path):
    """Ctrl-C at the terminal (SIGINT to the whole foreground group) reaches the running run once, through
    reproduce: it writes a checkpoint where it is and stops, no further run starts, and reproduce exits 130
    saying how to resume. A SIGTERM to the run itself, from outside, stops the queue the same way, and so does
    one to both at once. (That a run takes two signals at the same moment as one request, not as the second
    that stops it at once, is tested in test_end_to_end: a tiny run here has stopped before the second comes.)"""
    runs = tmp_path / "runs"
    bilinear, dual = runs / "pappas2019-table4-small" / "bilinear", runs / "pappas2019-table4-small" / "dual"
    log = bilinear.parent / "bilinear.log"
    cmd = _queue_command(tiny_corpus, runs, "bilinear", "dual")
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # a process group of its own, as a terminal gives a foreground command
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    _wait(lambda: (bilinear / "checkpoints" / "last.safetensors").exists(), proc, "a checkpoint")
    time.sleep(0.3)  # somewhere inside a later epoch
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 130, err
    assert "bilinear: exit 130" in out and "Traceback" not in err
    assert "1 run(s) stopped where they were (bilinear), 1 not started (dual)" in err
    assert "run the same command again" in err
    # one signal reached the run: it wrote a checkpoint at the step it was in (a second would write nothing)
    assert "(checkpoint written)" in log.read_text()
    assert rp.run_status(bilinear) == "interrupted" and not dual.exists()

    # The same command resumes it. A SIGTERM to the training process itself stops the queue too; so does one to
    # both processes at once (a scheduler signalling every process of a job).
    for to_both in (False, True):
        epochs = len((bilinear / "metrics.jsonl").read_text().splitlines())
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        pid = _wait(lambda: _training_process(bilinear), proc, "the resumed training process")
        _wait(lambda: len((bilinear / "metrics.jsonl").read_text().splitlines()) > epochs, proc, "a resumed epoch")
        written = log.read_text().count("(checkpoint written)")
        os.kill(pid, signal.SIGTERM)
        if to_both:
            proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 130, err
        assert "bilinear: resume: tiedlm train --resume" in out and "1 not started (dual)" in err
        assert ("stopping: no further run starts" in out) is to_both
        assert ("bilinear: stopped by a signal" in out) is not to_both
        assert log.read_text().count("(checkpoint written)") == written + 1
        assert rp.run_status(bilinear) == "interrupted" and not dual.exists()


def test_a_run_the_table_now_asks_more_epochs_of_is_resumed_not_counted_finished(tiny_corpus, tmp_path, capsys):
    """A table's stated epoch count went up after its run finished: `reproduce` shows the run as `short`, resumes
    it with the table's count, and the two steps reach the numbers of one run trained to that count at once."""
    from tiedlm.run_dir import RunDir

    base = ["reproduce", "pappas2019-table4-small", "--data", str(tiny_corpus), "--no-page", "--only", "tied"]
    tiny = [*TINY, "--set", "train.seed=3"]

    def reproduce(runs, epochs: int, *more: str) -> None:
        assert main([*base, "--runs", str(runs), *tiny, "--set", f"train.epochs={epochs}", *more]) == 0

    reproduce(tmp_path / "two", 2)
    reproduce(tmp_path / "one", 1)
    tied = _spec("pappas2019-table4-small", "tied")
    folder = tied.folder("pappas2019-table4-small")  # shared with Table 1's re-bias
    run = tmp_path / "one" / folder
    assert RunDir(run).read_summary()["epochs"] == 1
    capsys.readouterr()
    reproduce(tmp_path / "one", 2, "--dry-run", "--json")
    row = json.loads(capsys.readouterr().out)["runs"][0]
    assert row["status"] == "short" and 0 < row["estimated_s"]
    assert row["command"].startswith(f"tiedlm train --resume {run} ") and row["command"].endswith("train.epochs=2")
    reproduce(tmp_path / "one", 2)
    assert "tied: resume: tiedlm train --resume" in capsys.readouterr().out
    extended, straight = RunDir(run), RunDir(tmp_path / "two" / folder)
    valid = [[m["valid_ppl"] for m in r.read_metrics()] for r in (extended, straight)]
    assert valid[0] == valid[1] and len(valid[1]) == 2
    summaries = [r.read_summary() for r in (extended, straight)]
    assert summaries[0]["test_ppl"] == summaries[1]["test_ppl"] and summaries[0]["epochs"] == 2
    # finished at the table's count now: skipped, and a table asking fewer epochs leaves it as it is
    reproduce(tmp_path / "one", 2)
    assert "tied: finished, skipped" in capsys.readouterr().out
    reproduce(tmp_path / "one", 1, "--dry-run", "--json")
    assert json.loads(capsys.readouterr().out)["runs"][0]["status"] == "finished"


def test_the_page_gives_each_row_across_seeds_and_says_when_a_difference_changes_sign():
    """Rows ROW and ROW-seedN are one row's seeds: mean ± sample sd; a pair's difference per seed, its mean, and
    whether its sign held (computed from the summaries, so a changed run changes or fails the page)."""
    import statistics

    from tiedlm.reproduce.page import seeds_section
    from tiedlm.reproduce.tables import TABLES

    def run(seed, dev, test):
        return {"seed": seed, "dev_accuracy": dev, "test_accuracy": test}

    finished = {
        "dense-64": run(1, 0.90, 0.910),
        "dense-64-seed2": run(2, 0.91, 0.920),
        "sparse-128-0.5": run(1, 0.90, 0.915),
        "sparse-128-0.5-seed2": run(2, 0.91, 0.918),
        "dense-8": run(1, 0.8, 0.8),  # one seed: not averaged
    }
    lines = seeds_section(TABLES["demeester2018-pos"], finished, "tag")
    text = "\n".join(lines)
    sd = statistics.stdev([91.0, 92.0])
    assert f"| dense-64 | 2 | 90.50 ± 0.71 | 91.50 ± {sd:.2f} | 91.00 (1), 92.00 (2) |" in text
    assert "dense-8 |" not in text
    assert "| sparse-128-0.5 − dense-64 | +0.50 (1), -0.20 (2) |" in text and "not stable" in text
    finished["sparse-128-0.5-seed2"] = run(2, 0.91, 0.921)
    assert "the same sign at every seed" in "\n".join(seeds_section(TABLES["demeester2018-pos"], finished, "tag"))


def _spec(table: str, name: str) -> rp.RunSpec:
    """The budget row ``name`` of ``table``."""
    return next(s for s in rp.table(table).runs["budget"] if s.name == name)


NOTES = Path(__file__).resolve().parent.parent / "docs" / "results" / "notes"
RESULTS = Path(__file__).resolve().parent.parent / "results" / "reproduce"


def _notes_paragraphs(tab: rp.Table, runs, out) -> list[str]:
    """The paragraphs of ``tab``'s Notes section (its committed Markdown notes), rendered from the runs in ``runs``."""
    text = rp.render(tab, "budget", runs, [], out, notes=NOTES / f"{tab.name}.md").read_text()
    if "## Notes\n\n" not in text:
        return []
    return text.split("## Notes\n\n", 1)[1].split("\n\n## ", 1)[0].split("\n\n")


def test_every_table_builds_from_its_data_file_and_every_placeholder_names_a_row_and_a_field():
    """Each reproduce/tables/TABLE.toml loads (unknown keys refused), has notes beside the pages, and each
    placeholder of those notes names one of the table's runs (or the bands' rows) and a field the renderer knows."""
    import re

    fields = {"valid", "test", "streams", "wall", "tps", "params", "epochs", "averaging", "finetune"}
    bands = {"1-10", "10-100", "100-1k", "1k-10k", "10k+"}
    assert set(rp.TABLES) == {p.stem for p in NOTES.glob("*.md")}
    for name, tab in rp.TABLES.items():
        runs = {s.name for specs in tab.runs.values() for s in specs}
        assert runs and all(s.task == tab.runs["budget"][0].task for s in tab.runs["budget"])
        for pair in tab.pairs:
            assert set(pair) <= runs, (name, pair)
        for m in rp.notes.PLACEHOLDER.finditer((NOTES / f"{name}.md").read_text()):
            for part in m[2].split(" - "):
                if part.startswith("bands:"):
                    _, row, band = part.split(":")
                    assert row in runs and band in bands, (name, part)
                    continue
                row, field = part.strip().rsplit(".", 1)
                assert row in runs, (name, part)
                assert field in fields or re.fullmatch(r"valid@\d+", field), (name, part)
    bad = Path(rp.tables.__file__).parent / "tables" / "pappas2019-mt.toml"
    text = bad.read_text().replace("\n[[row]]\n", "\n[[row]]\nseed = 1\n", 1)
    with pytest.raises(ValueError, match="unknown key.*row.seed"):
        rp.tables.load_table(_write(bad.name, text))


def _write(name: str, text: str) -> Path:
    import tempfile

    path = Path(tempfile.mkdtemp()) / name
    path.write_text(text)
    return path


def test_a_rows_seeds_run_as_row_and_row_seedN_each_with_its_seed():
    tab = rp.table("demeester2018-lm")
    budget = {s.name: s for s in tab.runs["budget"]}
    assert list(budget) == ["dense", "sparse", "dense-seed142", "sparse-seed142"]
    assert (
        budget["dense"].overrides[-1] == "train.seed=141" and budget["dense-seed142"].overrides[-1] == "train.seed=142"
    )
    assert budget["dense"].overrides[0] == rp.BUDGET_PRECISION  # budget rows train in fp32
    assert [s.name for s in tab.runs["paper"]] == ["dense", "sparse"] and tab.runs["paper"][0].paper == (None, 58.8)
    pos = rp.table("demeester2018-pos").runs["budget"]
    assert pos[0].overrides[0] == rp.BUDGET_PRECISION  # every task's budget rows train in fp32


def test_a_notes_figures_come_from_the_run_files_and_change_with_them(tmp_path):
    """The committed demeester2018-lm runs, copied: their notes state the runs' figures; a changed summary
    changes the notes, and a run gone from the folder leaves out the paragraphs that name it."""
    import shutil

    runs = tmp_path / "runs"
    shutil.copytree(RESULTS / "demeester2018-lm", runs / "demeester2018-lm", symlinks=False)
    tab = rp.table("demeester2018-lm")

    def claim() -> str:
        return next(p for p in _notes_paragraphs(tab, runs, tmp_path / "out") if "at both seeds" in p)

    first = claim()
    summary = json.loads((runs / "demeester2018-lm/sparse/summary.json").read_text())
    dense = json.loads((runs / "demeester2018-lm/dense/summary.json").read_text())
    assert f"at seed 141 by {dense['test_ppl'] - summary['test_ppl']:.2f} test perplexity" in first
    summary["test_ppl"] = 90.0
    (runs / "demeester2018-lm/sparse/summary.json").write_text(json.dumps(summary))
    second = claim()
    assert second != first and f"{dense['test_ppl'] - 90.0:.2f} test perplexity (90.00 against" in second
    (runs / "demeester2018-lm/sparse/summary.json").unlink()
    paragraphs = _notes_paragraphs(tab, runs, tmp_path / "out")
    assert paragraphs and not any("at both seeds" in p for p in paragraphs)  # no claim about a missing run
    assert "?" not in "\n".join(paragraphs)


def test_the_awd_pages_converged_paragraphs_appear_once_their_rows_finish(tmp_path):
    """The AWD page's paragraphs on the converged rows are written before they finish: each is left out while a
    row it names is not finished, then fills every figure from the run files (stages from metrics.jsonl)."""
    import shutil

    from tiedlm.tasks.lm.config import Config

    runs = tmp_path / "runs"
    shutil.copytree(RESULTS / "pappas2019-table4-awd", runs / "pappas2019-table4-awd")
    for name in ("tied-converged", "drill-4-converged"):  # both start unfinished, whatever is committed
        shutil.rmtree(runs / "pappas2019-table4-awd" / name, ignore_errors=True)
    tab = rp.table("pappas2019-table4-awd")

    def paragraphs() -> list[str]:
        return _notes_paragraphs(tab, runs, tmp_path / "out")

    assert not any("converged tied row" in p or "converged DRILL-4 row" in p for p in paragraphs())
    stages = ["sgd"] * 56 + ["averaged"] * 64 + ["finetune"] * 7  # averaging from 57, finetune from 121 to 127
    for name, preset, test in (("tied-converged", "tied", 80.0), ("drill-4-converged", "drill", 78.5)):
        run = runs / "pappas2019-table4-awd" / name
        _result_folder(run, Config.load(f"ptb-awd-{preset}-budget").to_toml(), valid_ppl=test + 4, test_ppl=test)
        valid = {120: 90.0}
        lines = [
            json.dumps({"epoch": e, "valid_ppl": valid.get(e, 100.0), "stage": st})
            for e, st in enumerate(stages, start=1)
        ]
        (run / "metrics.jsonl").write_text("\n".join(lines) + "\n")
        summary = json.loads((run / "summary.json").read_text())
        (run / "summary.json").write_text(json.dumps(summary | {"test_protocol": "batch 1", "wall_time_s": 6000}))
        if name == "tied-converged":  # tied finished, DRILL-4 not: tied's paragraph shows, the pair's does not
            (tied,) = [p for p in paragraphs() if "converged tied row" in p]
            assert (
                "averaging from epoch 57, finetune from 121, stopped after 127 epochs (100.0 min): test 80.00" in tied
            )
            assert "took valid from 90.00 to 84.00" in tied
            assert not any("converged DRILL-4 row" in p for p in paragraphs())
    (pair,) = [p for p in paragraphs() if "converged DRILL-4 row" in p]
    assert "127 epochs (100.0 min), test 78.50; DRILL-4 − tied -1.50, where" in pair and "?" not in pair


def test_the_small_pages_one_device_paragraph_waits_for_both_cpu_runs_of_dual_res(tmp_path):
    """The small-encoder page's dual-res-on-one-device paragraph is left out until both CPU runs of dual-res have
    finished, then states their differences from DRILL-4 at each seed from the run files."""
    import shutil

    from tiedlm.reproduce.notes import batch1_test_ppl

    runs = tmp_path / "runs"
    for name in ("pappas2019-table4-small", "inan2017-table1-small"):
        shutil.copytree(RESULTS / name, runs / name)
    for name in ("dual-res-cpu", "dual-res-cpu-seed1112"):  # the committed runs, set aside: not yet trained
        shutil.rmtree(runs / "pappas2019-table4-small" / name)
    tab = rp.table("pappas2019-table4-small")
    cpu, gpu = (_spec("pappas2019-table4-small", n) for n in ("dual-res-cpu", "dual-res"))
    assert cpu.overrides == (*gpu.overrides[:-1], "train.device=cpu", gpu.overrides[-1])  # the seed comes last

    def one_device() -> list[str]:
        return [p for p in _notes_paragraphs(tab, runs, tmp_path / "out") if "on one device" in p]

    assert one_device() == []
    for name, source, test in (
        ("dual-res-cpu", "dual-res", 84.5),
        ("dual-res-cpu-seed1112", "dual-res-seed1112", 84.25),
    ):
        shutil.copytree(runs / "pappas2019-table4-small" / source, runs / "pappas2019-table4-small" / name)
        summary = runs / "pappas2019-table4-small" / name / "summary.json"
        summary.write_text(json.dumps(json.loads(summary.read_text()) | {"test_ppl": test, "device": "cpu"}))

    def test_ppl(folder: str) -> float:  # the batch-1 figure the page states
        return batch1_test_ppl(json.loads((runs / folder / "summary.json").read_text()))

    drill, drill2 = (test_ppl(f"pappas2019-table4-small/{n}") for n in ("drill-4", "drill-4-seed1112"))
    (text,) = one_device()
    assert f"{84.5 - drill:+.2f} at seed 1111 and {84.25 - drill2:+.2f} at seed 1112" in text and "?" not in text


def test_committed_pages_name_no_machine_paths_hosts_or_schedules():
    """Pages and notes speak of the runs and the science: no absolute paths, no host models or numerics
    fingerprints, no clock times."""
    import re

    pages = [*(NOTES.parent).glob("*.md"), *NOTES.glob("*.md")]
    assert len(pages) >= 2 * len(rp.TABLES)
    for page in pages:
        text = page.read_text()
        assert not re.search(r"(?<![\w.])/(root|home|work|tmp|Users)/", text), page.name
        assert not re.search(r"family \d+ model \d+|numerics|fingerprint|\d\d:\d\d UTC|lost-\d+", text), page.name


def test_an_unfinished_converged_row_takes_the_tables_stall_stop_when_resumed(tiny_corpus, tmp_path, capsys):
    """The converged AWD rows ask ``train.optimizer.stop_on_stall``: a run of theirs started without it is resumed
    with ``--set train.optimizer.stop_on_stall=true`` while unfinished; a finished one is left as it is."""
    base = ["reproduce", "pappas2019-table4-awd", "--data", str(tiny_corpus), "--no-page", "--runs", str(tmp_path)]
    tiny = [*base, "--only", "tied-converged", *TINY, "--set", "train.optimizer.finetune_epochs=0"]
    assert main([*tiny, "--set", "train.optimizer.stop_on_stall=false"]) == 0
    run = tmp_path / "pappas2019-table4-awd" / "tied-converged"
    assert "stop_on_stall = false" in (run / "config.toml").read_text()

    def planned() -> dict:
        capsys.readouterr()
        assert main([*tiny, "--dry-run", "--json"]) == 0
        return json.loads(capsys.readouterr().out)["runs"][0]

    assert planned()["status"] == "finished"
    (run / "summary.json").unlink()  # as if stopped before its summary: unfinished
    row = planned()
    assert row["status"] == "interrupted"
    assert row["command"].startswith(f"tiedlm train --resume {run} ")
    assert row["command"].endswith("--set train.optimizer.stop_on_stall=true")
    # its estimate is an upper bound (the stall stop can end it sooner), and its page says so
    assert row["at_most"] and json.loads((run.parent / rp.ESTIMATE).read_text())["tied-converged"]["at_most"]
    page = rp.render(rp.table("pappas2019-table4-awd"), "budget", tmp_path, [], tmp_path / "pages").read_text()
    (line,) = [ln for ln in page.splitlines() if ln.startswith("| `tied-converged` |")]
    assert " h left at most (NT-ASGD's stops can end it sooner) at the run's own pace (" in line  # its 1 epoch's
