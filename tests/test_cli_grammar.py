"""One CLI grammar for every task: --set section.key=value, --resume RUN_DIR, --threads, --json."""

import dataclasses
import json
import tomllib
from pathlib import Path

import pytest

from tiedlm.cli import main
from tiedlm.errors import UsageError
from tiedlm.tasks.tagging import TaggerConfig
from tiedlm.tasks.translation import TranslationConfig
from tiedlm.train import load_checkpoint, save_checkpoint


def _treebank(folder):
    rows = "1\tdogs\tdog\tNOUN\t_\t_\t0\troot\t_\t_\n2\tbark\tbark\tVERB\t_\t_\t1\tdep\t_\t_\n\n"
    folder.mkdir()
    for split in ("train", "dev", "test"):
        (folder / f"xx_mine-ud-{split}.conllu").write_text(rows * 8)
    return folder


def test_sectioned_keys_of_the_tagger_and_translator():
    t = TaggerConfig().with_overrides(["train.epochs=3", "model.hidden_size=8", "data.min_count=1"])
    assert (t.train.epochs, t.model.hidden_size, t.data.min_count) == (3, 8, 1)
    with pytest.raises(UsageError, match="tagger key 'epochs' is not in \\[model\\]; it is in \\[train\\]"):
        TaggerConfig().with_overrides(["model.epochs=3"])
    with pytest.raises(UsageError, match="unknown section \\[optim\\]"):
        TaggerConfig().with_overrides(["optim.lr=1"])
    # the translator's output layer is the language model's [model.output] table; a bare key is refused
    tr = TranslationConfig().with_overrides(["model.output=drill", "model.output.depth=3", "train.epochs=2"])
    assert (tr.model.output.name, tr.model.output.depth, tr.train.epochs) == ("drill", 3, 2)
    with pytest.raises(UsageError, match="expected section.key=value"):
        TranslationConfig().with_overrides(["output=drill"])
    assert "[model.output]" in tr.to_toml() and "drill_depth" not in tr.to_toml()


def test_one_sectioned_loader_reads_every_tasks_settings():
    """The language model's, the tagger's and the translator's settings are one loader's (SectionedConfig):
    sections of dataclasses that round-trip through config.toml, one --set grammar and error, the resumable keys
    from the fields marked resumable."""
    from tiedlm.config import SectionedConfig
    from tiedlm.tasks.lm.config import Config

    for cls in (Config, TaggerConfig, TranslationConfig):
        assert issubclass(cls, SectionedConfig)
        cfg = cls().with_overrides(["train.epochs=3", "train.seed=7"])
        assert (cfg.train.epochs, cfg.train.seed) == (3, 7)
        assert cls.from_dict(tomllib.loads(cfg.to_toml())) == cfg
        assert "train.epochs" in cls.resumable_keys() and "train.seed" not in cls.resumable_keys()
        with pytest.raises(UsageError, match="unknown section \\[optim\\]"):
            cfg.with_overrides(["optim.lr=1"])
        with pytest.raises(UsageError, match="train.epochs = 0 is not allowed"):
            cls.from_dict({"train": {"epochs": 0}})
    with pytest.raises(UsageError, match="expected section.key=value"):  # the language model takes no bare key
        Config().with_overrides(["epochs=3"])


def test_tag_train_resume_dir_and_threads(tmp_path, capsys):
    data, run = _treebank(tmp_path / "tb"), tmp_path / "run"
    common = ["--no-progress", "--json", "--threads", "1"]
    assert (
        main(
            [
                "tag",
                "train",
                "--out",
                str(run),
                "--data",
                str(data),
                *common,
                "--set",
                "train.epochs=1",
                "--set",
                "model.embedding_size=4",
                "--set",
                "model.hidden_size=4",
                "--set",
                "data.min_count=1",
            ]
        )
        == 0
    )
    assert json.loads(capsys.readouterr().out)["epochs"] == 1
    assert "threads = 1" in (run / "config.toml").read_text() and "[model]" in (run / "config.toml").read_text()
    assert (run / "checkpoints" / "last.safetensors").is_file() and (run / "summary.json").is_file()
    assert [json.loads(line)["epoch"] for line in (run / "metrics.jsonl").read_text().splitlines()] == [1]
    # continue the finished run for one more epoch, named the way `tiedlm train --resume RUN_DIR` is
    assert main(["tag", "train", "--resume", str(run), *common, "--set", "train.epochs=2"]) == 0
    assert json.loads(capsys.readouterr().out)["epochs"] == 2
    assert main(["tag", "train", "--resume", str(run), "--out", str(tmp_path / "other")]) == 2
    assert "name two folders" in capsys.readouterr().err
    assert main(["tag", "train", "--no-progress"]) == 2
    assert "give --out DIR for a new run, or --resume DIR" in capsys.readouterr().err
    assert main(["tag", "train", "--resume", str(run), "--set", "model.hidden_size=8"]) == 2
    assert "only accepts train.epochs, train.threads, train.max_nonfinite" in capsys.readouterr().err
    # a new run from a run's settings, as `tiedlm train CONFIG.toml` starts one: every setting but those --set
    again = tmp_path / "again"
    assert main(["tag", "train", str(run / "config.toml"), "--out", str(again), *common, "--set", "train.seed=2"]) == 0
    capsys.readouterr()
    first, second = TaggerConfig.load_run(run), TaggerConfig.load_run(again)
    assert second.train.seed == 2 and dataclasses.replace(second.train, seed=first.train.seed) == first.train
    assert (second.data, second.model) == (first.data, first.model)
    for given, message in (
        (run, f"is a run folder: resume it with `tiedlm tag train --resume {run}`, or start a new run from its "),
        (tmp_path / "none.toml", "does not exist; give a CONFIG.toml file (a run's config.toml too), or none"),
    ):
        assert main(["tag", "train", str(given), "--out", str(tmp_path / "x")]) == 2
        assert message in capsys.readouterr().err
    assert main(["train", str(run / "config.toml")]) == 2
    err = capsys.readouterr().err
    assert "these are the settings of a 'tag' run, not a language model's; start one with `tiedlm tag train" in err


def test_train_threads_option_sets_train_threads(tiny_corpus, tmp_path, capsys):
    from tests.conftest import tiny_overrides

    sets = [
        x
        for item in tiny_overrides(tiny_corpus, **{"train.epochs": "1", "train.threads": "2"})
        for x in ("--set", item)
    ]
    run = tmp_path / "lm"
    assert main(["train", "ptb-small-vd", "--out", str(run), "--no-progress", "--threads", "1", *sets]) == 0
    assert "threads = 1" in (run / "config.toml").read_text()


def test_a_tagger_run_folder_of_the_old_layout_is_migrated_then_evaluates_and_resumes(tmp_path, capsys):
    """config.json (flat keys) + checkpoint.safetensors, as tagger runs were written before the shared layout:
    tools/migrate_runs.py rewrites the folder once."""
    import subprocess
    import sys

    data, run = _treebank(tmp_path / "tb"), tmp_path / "old"
    sets = ["--set", "train.epochs=1", "--set", "model.embedding_size=4", "--set", "model.hidden_size=4"]
    sets += ["--set", "data.min_count=1"]
    assert main(["tag", "train", "--out", str(run), "--data", str(data), "--no-progress", "--threads", "1", *sets]) == 0
    cfg = TaggerConfig.load_run(run)
    (run / "config.toml").unlink()
    flat = {k: v for s in dataclasses.asdict(cfg).values() for k, v in s.items() if k != "optimizer"}  # none then
    (run / "config.json").write_text(json.dumps(flat))
    (run / "checkpoints" / "last.safetensors").rename(run / "checkpoint.safetensors")
    tensors, meta = load_checkpoint(run / "checkpoint.safetensors")  # the CPU generator's state as "rng"
    tensors["rng"] = tensors.pop("rng.torch")
    save_checkpoint(run / "checkpoint.safetensors", tensors, meta)
    tool = Path(__file__).resolve().parents[1] / "tools" / "migrate_runs.py"
    migrated = subprocess.run([sys.executable, str(tool), str(run)], capture_output=True, text=True)
    assert "tag run, settings and checkpoints rewritten" in migrated.stdout, migrated.stderr[-2000:]
    assert TaggerConfig.load_run(run) == cfg
    capsys.readouterr()
    assert main(["tag", "evaluate", str(run), "--split", "dev", "--json"]) == 0
    assert 0 <= json.loads(capsys.readouterr().out)["dev_accuracy"] <= 1
    assert main(["tag", "train", "--resume", str(run), "--no-progress", "--set", "train.epochs=2"]) == 0
    assert (run / "checkpoints" / "last.safetensors").is_file() and (run / "config.toml").is_file()
    assert "rng.torch" in load_checkpoint(run / "checkpoints" / "last.safetensors")[0]


def test_options_generated_from_settings_take_their_types_bounds_and_defaults_from_the_fields():
    """registry.option(): each field an option of its own type and bounds, its default shown in the help and left
    to the settings (an option not given is not returned), a list as several values, a bad value one line."""
    from dataclasses import dataclass

    from tiedlm.cli.common import Parser, add_options, as_overrides, options_of
    from tiedlm.registry import option

    @dataclass
    class Section:
        runs: int = option(3, "--runs", "seeds", minimum=1)
        taus: list[float] = option([1.0, 2.5], "--taus", "temperatures", minimum=0, above=True)
        vocab: str = option("slice", "--vocab", "which words", choices=("full", "slice"))
        quiet: bool = option(False, "--quiet", "say less")
        plain: int = 7  # not an option

    @dataclass
    class Settings:
        sweep: Section = None

        def __post_init__(self):
            self.sweep = self.sweep or Section()

    parser = Parser(prog="t")
    add_options(parser, Settings())
    helps = {a.dest: a.help for a in parser._actions}
    assert helps["runs"] == "seeds (default: 3)" and helps["taus"] == "temperatures (default: 1 2.5)"
    assert "plain" not in helps and helps["quiet"] == "say less"
    args = parser.parse_args(["--taus", "0.5", "4", "--quiet"])
    given = options_of(args, Settings())
    assert given == {"sweep.taus": [0.5, 4.0], "sweep.quiet": True}
    assert options_of(args, Settings(), flags=True) == {"sweep.taus": "--taus", "sweep.quiet": "--quiet"}
    assert as_overrides(given) == ["sweep.taus=0.5,4.0", "sweep.quiet=True"]
    for bad in (["--runs", "0"], ["--taus", "0"], ["--vocab", "all"]):
        with pytest.raises(UsageError) as refused:
            parser.parse_args(bad)
        assert bad[0] in str(refused.value) and "\n" not in str(refused.value)
