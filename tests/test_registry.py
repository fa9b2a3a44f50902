"""Output layers as registered components: the [model.output] table, --set grammar, old run folders, `tiedlm list`."""

import json
from pathlib import Path

import pytest
import tomllib

from tiedlm.cli import main
from tiedlm.config import Config
from tiedlm.errors import UsageError
from tiedlm.models.config import LEGACY_OUTPUT_KEYS
from tiedlm.models.outputs import OUTPUTS, DrillConfig, TiedConfig

ROOT = Path(__file__).resolve().parent.parent


def test_every_output_layer_is_registered_with_its_class_and_config():
    assert OUTPUTS.names() == ["full", "tied", "bilinear", "dual", "drill"]  # the paper's order
    for entry in OUTPUTS:
        assert entry.config.name == entry.name and entry.summary
        assert entry.cls.from_config is not None  # the lazy class path resolves


def test_output_table_round_trips_through_toml():
    cfg = Config.load("ptb-awd-drill")
    text = cfg.to_toml()
    assert "[model.output]" in text and 'name = "drill"' in text and "drill_depth" not in text
    assert Config.from_dict(tomllib.loads(text)) == cfg


def test_set_grammar_switches_layer_and_sets_its_keys_in_any_order():
    base = Config.load("ptb-small-re")
    a = base.with_overrides(["model.output=drill", "model.output.depth=3", "model.output.dropout=0.2"])
    b = base.with_overrides(["model.output.depth=3", "model.output.dropout=0.2", "model.output=drill"])
    assert a == b and a.model.output == DrillConfig(depth=3, dropout=0.2)
    assert base.with_overrides(["model.output.bias=yes"]).model.output == TiedConfig(bias=True)
    # naming the layer already chosen keeps its settings
    assert a.with_overrides(["model.output=drill"]).model.output.depth == 3
    with pytest.raises(UsageError, match="output layer 'tied' has no key 'depth'; its keys: bias"):
        base.with_overrides(["model.output.depth=3"])
    with pytest.raises(UsageError, match=r"model.output.depth = 0 is not allowed; expected an integer >= 1"):
        base.with_overrides(["model.output=drill", "model.output.depth=0"])
    with pytest.raises(UsageError, match="expected a int"):
        base.with_overrides(["model.output=drill", "model.output.depth=four"])


def test_old_flat_keys_still_work_from_set():
    old = Config.load("ptb-small-re").with_overrides(["model.drill_depth=4", "model.output=drill",
                                                      "model.drill_dropout=0.6"])
    assert old.model.output == DrillConfig(depth=4, dropout=0.6)


def test_a_layer_too_small_for_tied_scoring_is_refused_with_the_fix():
    with pytest.raises(UsageError, match="needs model.hidden_size == model.embedding_size.*'bilinear' or 'dual'"):
        Config.load("ptb-small-re").with_overrides(["model.hidden_size=300"])


def _legacy(raw_model: dict) -> dict:
    """The old [model] table: `output` a string and every output key flat, as old config.toml files hold them."""
    flat = dict(raw_model)
    table = flat.pop("output")
    flat["output"] = table["name"]
    for old, (layer, key) in LEGACY_OUTPUT_KEYS.items():
        flat[old] = table.get(key, getattr(OUTPUTS[layer].config(), key)) if layer == table["name"] else \
            getattr(OUTPUTS[layer].config(), key)
    return flat


@pytest.mark.parametrize("preset,override", [("ptb-awd-drill", []), ("ptb-small-re", ["model.output.bias=true"]),
                                             ("ptb-awd-dual", ["model.output.joint_size=300"]), ("ptb-small-vd", [])])
def test_old_flat_config_files_load_as_the_same_config(tmp_path, preset, override):
    cfg = Config.load(preset).with_overrides(override)
    raw = cfg.to_dict()
    raw["model"] = _legacy(raw["model"])
    assert "output" in raw["model"] and isinstance(raw["model"]["output"], str)
    assert Config.from_dict(raw) == cfg


def test_committed_old_run_folders_load():
    """Results committed before the [model.output] table (flat keys, every layer's defaults listed) still load."""
    files = sorted((ROOT / "experiments" / "results").rglob("config.toml"))
    assert files
    for path in files:
        raw = tomllib.loads(path.read_text())
        cfg = Config.load(path)
        flat = raw["model"]
        if isinstance(flat.get("output"), str):  # an old file: the converted table has the flat values
            assert cfg.model.output.name == flat["output"]
            for old, (layer, key) in LEGACY_OUTPUT_KEYS.items():
                if layer == flat["output"] and old in flat:
                    assert getattr(cfg.model.output, key) == flat[old], (path, old)


def test_list_command_shows_every_layer_and_its_keys(capsys):
    assert main(["list", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["name"] for r in rows] == OUTPUTS.names()
    drill = next(r for r in rows if r["name"] == "drill")
    assert drill["keys"]["depth"] == 1 and drill["keys"]["activation"] == "sigmoid"
    assert next(r for r in rows if r["name"] == "tied")["keys"] == {"bias": False}
