"""Output layers as registered components: the [model.output] table, --set grammar, old run folders, `tiedlm list`."""

import json
from pathlib import Path

import pytest
import tomllib

from tiedlm.cli import main
from tiedlm.errors import UsageError
from tiedlm.models.config import LEGACY_KEYS, LEGACY_OUTPUT_KEYS
from tiedlm.models.encoders import ENCODERS, AWDLSTMConfig, TransformerConfig, VDLSTMConfig
from tiedlm.models.outputs import OUTPUTS, DrillConfig, TiedConfig
from tiedlm.tasks.lm.config import Config

ROOT = Path(__file__).resolve().parent.parent


def test_every_output_layer_is_registered_with_its_class_and_config():
    assert OUTPUTS.names()[:5] == ["full", "tied", "bilinear", "dual", "drill"]  # the paper's, in its order
    from tiedlm.models.outputs.base import OutputLayer

    for entry in OUTPUTS:
        assert entry.config.name == entry.name and entry.summary
        assert issubclass(entry.cls, OutputLayer)  # the lazy class path resolves to an output layer


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
    with pytest.raises(UsageError, match=r"model.output.depth = 0 is not allowed; expected an integer from 1 to 64"):
        base.with_overrides(["model.output=drill", "model.output.depth=0"])
    with pytest.raises(UsageError, match="expected an integer"):
        base.with_overrides(["model.output=drill", "model.output.depth=four"])


def test_old_flat_keys_still_work_from_set():
    old = Config.load("ptb-small-re").with_overrides(
        ["model.drill_depth=4", "model.output=drill", "model.drill_dropout=0.6"]
    )
    assert old.model.output == DrillConfig(depth=4, dropout=0.6)


def test_a_layer_too_small_for_tied_scoring_is_refused_with_the_fix():
    with pytest.raises(UsageError, match="needs model.encoder.hidden_size == model.embedding_size.*'bilinear'"):
        Config.load("ptb-small-re").with_overrides(["model.hidden_size=300"])


def _legacy(raw_model: dict) -> dict:
    """The old [model] table: `output` a string and every output key flat, as old config.toml files hold them."""
    flat = dict(raw_model)
    table = flat.pop("output")
    flat["output"] = table["name"]
    for old, (layer, key) in LEGACY_OUTPUT_KEYS.items():
        flat[old] = (
            table.get(key, getattr(OUTPUTS[layer].config(), key))
            if layer == table["name"]
            else getattr(OUTPUTS[layer].config(), key)
        )
    return flat


@pytest.mark.parametrize(
    "preset,override",
    [
        ("ptb-awd-drill", []),
        ("ptb-small-re", ["model.output.bias=true"]),
        # the flat format knew only the dual layer's joint_size (its residual setting came later)
        (
            "ptb-awd-dual",
            [
                "model.output.joint_size=300",
                "model.output.residual=false",
                "model.output.dropout=0",
                "model.output.init_range=0",
            ],
        ),
        ("ptb-small-vd", []),
    ],
)
def test_old_flat_config_files_load_as_the_same_config(tmp_path, preset, override):
    cfg = Config.load(preset).with_overrides(override)
    raw = cfg.to_dict()
    raw["model"] = _legacy(raw["model"])
    assert "output" in raw["model"] and isinstance(raw["model"]["output"], str)
    assert Config.from_dict(raw) == cfg


ADDED_SINCE = {("train", "device"), ("train", "max_nonfinite"), ("train", "optimizer")}


def test_committed_old_run_folders_load():
    """Results committed before the [model.output] table (flat keys, every layer's defaults listed) still load."""
    from tiedlm.reproduce import TABLES, run_config
    from tiedlm.tasks.translation.config import TranslationConfig

    files = sorted((ROOT / "results").rglob("config.toml"))
    assert files
    for path in files:
        raw = tomllib.loads(path.read_text())
        table = TABLES.get(path.parent.parent.name)
        spec = next(iter(table.runs.values()))[0] if table else None
        outside = spec is None and "source_lang" in raw["data"]  # a translator's run outside the tables
        if outside or (spec is not None and spec.task != "lm"):  # a tagger's or translator's run: its own config
            kind = TranslationConfig if outside else type(run_config(spec, []))
            loaded = tomllib.loads(kind.load_run(path.parent).to_toml())
            if isinstance(raw["model"].get("output"), str):  # a translator's flat output keys: now its table
                from tiedlm.tasks.translation.config import LEGACY_OUTPUT_KEYS as FLAT

                table, flat = loaded["model"]["output"], raw["model"]
                assert table["name"] == flat.pop("output"), path
                for old, key in FLAT.items():
                    value = flat.pop(old)
                    assert table.get(key, value) == value, (path, old)  # a key the layer has keeps its value
                loaded["model"].pop("output")
            for section, values in raw.items():  # every saved value loads as it was saved
                assert {k: loaded[section][k] for k in values} == values, (path, section)
            new = {(s, k) for s, vs in loaded.items() for k in vs} - {(s, k) for s, vs in raw.items() for k in vs}
            assert new <= ADDED_SINCE, (path, new)  # settings added since the run: their defaults
            assert all(loaded[s][k] == kind().to_dict()[s][k] for s, k in new)
            continue
        cfg = Config.load(path)
        flat = raw["model"]
        if isinstance(flat.get("output"), str):  # an old file: the converted table has the flat values
            assert cfg.model.output.name == flat["output"]
            for old, (layer, key) in LEGACY_OUTPUT_KEYS.items():
                if layer == flat["output"] and old in flat:
                    assert getattr(cfg.model.output, key) == flat[old], (path, old)
            assert cfg.model.encoder.name == flat.get("encoder", "vd-lstm")
            for key in vars(cfg.model.encoder):  # the encoder's own keys keep their flat values
                if key in flat:
                    assert getattr(cfg.model.encoder, key) == flat[key], (path, key)


def test_list_command_shows_every_component_and_its_keys(capsys):
    assert main(["list", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["name"] for r in rows] == ENCODERS.names() + OUTPUTS.names() + ["sgd", "nt-asgd", "adam"]
    awd = next(r for r in rows if r["name"] == "awd-lstm")
    assert awd["key"] == "model.encoder" and awd["keys"]["weight_drop"] == 0.0 and "heads" not in awd["keys"]
    drill = next(r for r in rows if r["name"] == "drill")
    assert drill["keys"]["depth"] == 1 and drill["keys"]["activation"] == "sigmoid"
    assert next(r for r in rows if r["name"] == "tied")["keys"] == {"bias": False}


def test_every_encoder_is_registered_and_builds():
    assert ENCODERS.names()[:3] == ["vd-lstm", "awd-lstm", "transformer"]
    from tiedlm.models.encoders import Encoder

    for entry in ENCODERS:
        assert entry.config.name == entry.name and entry.summary and issubclass(entry.cls, Encoder)


def test_encoder_table_and_its_set_grammar():
    cfg = Config.load("ptb-awd-tied")
    assert cfg.model.encoder == AWDLSTMConfig(
        hidden_size=1150, layers=3, dropout=0.4, dropout_input=0.4, dropout_hidden=0.25, weight_drop=0.5
    )
    assert "[model.encoder]" in cfg.to_toml() and Config.from_dict(tomllib.loads(cfg.to_toml())) == cfg
    # a switch keeps the keys the two encoders share; the others take the new encoder's defaults
    t = cfg.with_overrides(["model.encoder=transformer", "model.encoder.heads=8", "loss.ar=0", "loss.tar=0"])
    assert t.model.encoder == TransformerConfig(hidden_size=1150, layers=3, dropout=0.4, heads=8)
    with pytest.raises(UsageError, match="encoder 'vd-lstm' has no key 'weight_drop'; its keys: hidden_size"):
        Config.load("ptb-small-vd").with_overrides(["model.encoder.weight_drop=0.5"])
    with pytest.raises(UsageError, match="model.encoder.dropout = 1.5 is not allowed; expected a drop probability"):
        Config.load("ptb-small-vd").with_overrides(["model.encoder.dropout=1.5"])


def test_old_flat_encoder_keys_from_set_map_to_the_table_or_name_their_owner():
    vd = Config.load("ptb-small-vd").with_overrides(["model.hidden_size=650", "model.dropout=0.5"])
    assert vd.model.encoder == VDLSTMConfig(hidden_size=650, dropout=0.5)
    assert vd == Config.load("ptb-small-vd").with_overrides(
        ["model.encoder.hidden_size=650", "model.encoder.dropout=0.5"]
    )
    with pytest.raises(
        UsageError, match="model.weight_drop belongs to encoder 'awd-lstm', but model.encoder is 'vd-lstm'"
    ):
        Config.load("ptb-small-vd").with_overrides(["model.weight_drop=0.5"])


def test_old_flat_files_with_every_key_convert_exactly():
    """An old config.toml listed every [model] key flat, those of other encoders and output layers included."""
    for preset in ("ptb-awd-drill", "ptb-transformer-tied", "ptb-small-real", "ptb-awd-sparse-budget"):
        cfg = Config.load(preset)
        raw = cfg.to_dict()
        model = {k: v for k, v in raw["model"].items() if k not in ("encoder", "output")}
        model["encoder"], model["output"] = cfg.model.encoder.name, cfg.model.output.name
        for old, (table, layer, key) in LEGACY_KEYS.items():  # every flat key: this run's value or a default
            component = getattr(cfg.model, table)
            owners = [
                e
                for e in (ENCODERS if table == "encoder" else OUTPUTS)
                if (layer is None or e.name == layer) and hasattr(e.config(), key)
            ]
            mine = component.name in [e.name for e in owners]
            model[old] = getattr(component, key) if mine else getattr(owners[0].config(), key)
        raw["model"] = model
        assert Config.from_dict(raw) == cfg, preset


def test_an_interrupted_run_with_an_old_flat_config_resumes_exactly(tiny_corpus, tmp_path):
    """A run folder written before [model.encoder] / [model.output] (every key flat in [model]) resumes, through
    the converted config, to the numbers of an uninterrupted run."""
    import tomli_w

    from tiedlm.errors import RunInterrupted

    from conftest import LMRun, read_metrics, tiny_overrides

    cfg = Config.load("ptb-small-re").with_overrides(
        tiny_overrides(tiny_corpus, **{"train.epochs": "2", "model.output": "drill", "model.output.depth": "2"})
    )
    full = LMRun(cfg, tmp_path / "full")
    s_full = full.fit()
    part = LMRun(cfg, tmp_path / "part")
    with pytest.raises(RunInterrupted):
        part.fit(5)
    raw = cfg.to_dict()  # the old flat form, every key of every component listed, as old runs wrote it
    model = {k: v for k, v in raw["model"].items() if k not in ("encoder", "output")}
    model |= {k: v for k, v in raw["model"]["encoder"].items() if k != "name"} | {"encoder": "vd-lstm"}
    model |= {"output": "drill", "drill_depth": 2, "tied_bias": False, "joint_size": 0, "weight_drop": 0.0}
    raw["model"] = model
    (tmp_path / "part" / "config.toml").write_text(tomli_w.dumps(raw))
    resumed = LMRun(Config.load(tmp_path / "part" / "config.toml"), tmp_path / "part", resume=True)
    s_res = resumed.fit()
    assert [m["valid_ppl"] for m in read_metrics(tmp_path / "full")] == [
        m["valid_ppl"] for m in read_metrics(tmp_path / "part")
    ]
    assert s_full["test_ppl"] == s_res["test_ppl"]


def test_optimizer_table_and_its_old_flat_keys():
    from tiedlm.optimizers import AdamConfig, NTASGDConfig, SGDConfig

    awd = Config.load("ptb-awd-drill")
    assert awd.train.optimizer == NTASGDConfig(nonmono=5, finetune_epochs=500) and awd.train.total_epochs == 1000
    assert "[train.optimizer]" in awd.to_toml() and Config.from_dict(tomllib.loads(awd.to_toml())) == awd
    old = awd.with_overrides(["train.nonmono=3", "train.finetune_epochs=0"])  # the old flat keys still work
    assert old.train.optimizer == NTASGDConfig(nonmono=3, finetune_epochs=0) and old.train.total_epochs == 500
    assert old == awd.with_overrides(["train.optimizer.nonmono=3", "train.optimizer.finetune_epochs=0"])
    vd = Config.load("ptb-small-vd")
    assert vd.train.optimizer == SGDConfig() and vd.train.total_epochs == vd.train.epochs
    with pytest.raises(UsageError, match="train.nonmono belongs to optimizer 'nt-asgd'"):
        vd.with_overrides(["train.nonmono=3"])
    adam = vd.with_overrides(["train.optimizer=adam", "train.optimizer.beta2=0.999"])
    assert adam.train.optimizer == AdamConfig(beta2=0.999)
    with pytest.raises(UsageError, match="train.optimizer.beta1 = 1.5 is not allowed"):
        vd.with_overrides(["train.optimizer=adam", "train.optimizer.beta1=1.5"])


def test_the_optimizer_built_is_the_one_named():
    import torch

    from tiedlm.train.optimizers import make_optimizer

    params = [torch.nn.Parameter(torch.zeros(2))]
    adam = Config.load("ptb-small-vd").with_overrides(["train.optimizer=adam", "train.optimizer.beta2=0.999"])
    opt = make_optimizer(adam.train.optimizer, params, 0.1, 0.01)
    assert isinstance(opt, torch.optim.AdamW) and opt.defaults["betas"] == (0.9, 0.999)
    sgd = make_optimizer(Config.load("ptb-awd-drill").train.optimizer, params, 30.0, 1.2e-6)
    assert type(sgd) is torch.optim.SGD and sgd.defaults["weight_decay"] == 1.2e-6


def test_an_encoder_is_an_encoder_and_its_capabilities_are_declared_not_named(tmp_path):
    """Registering a class that is not an Encoder (an OutputLayer) is one line naming the fix, and so is building
    a "module:Class" that is not one; what an encoder or an
    optimiser can do (AR/TAR, CUDA graphs, the iterate average) comes from its config class, not its name."""
    from dataclasses import dataclass
    from typing import ClassVar

    from torch import nn

    from tiedlm.models.encoders import ENCODERS, EncoderConfig, build_encoder
    from tiedlm.models.outputs import OUTPUTS
    from tiedlm.models.outputs.configs import FullConfig
    from tiedlm.optimizers import OPTIMIZERS

    class NotAnEncoder(nn.Module):
        pass

    @dataclass
    class NotConfig(EncoderConfig):
        """A class that is not an Encoder, registered."""

    @ENCODERS.register("keeps-activations-test", builds="tiedlm.models.encoders.awd_lstm:AWDLSTM")
    @dataclass
    class KeepsConfig(AWDLSTMConfig):
        """An AWD-LSTM under another name: its declarations, not its name, decide."""

        activation_regularization: ClassVar[bool] = True

    try:  # a class is refused when registered; a "module:Class" when first built (configs load without torch)
        refused = r"which is not a tiedlm.models.encoders.Encoder: subclass Encoder \(CONTRIBUTING.md, 'Adding an"
        with pytest.raises(UsageError, match="encoder 'not-an-encoder-test' is registered to build .*NotAnEncoder"):
            ENCODERS.register("not-an-encoder-test", builds=NotAnEncoder)(NotConfig)
        assert "not-an-encoder-test" not in ENCODERS.names()
        ENCODERS.register("not-an-encoder-test", builds="torch.nn:Linear")(NotConfig)
        with pytest.raises(UsageError, match=refused):
            build_encoder(NotConfig(), 8, 8)
        with pytest.raises(UsageError, match=r"'Linear', which is not a tiedlm.models.outputs.OutputLayer: subclass"):
            OUTPUTS.register("not-an-output-test", builds=nn.Linear)(FullConfig)
        assert "not-an-output-test" not in OUTPUTS.names() and FullConfig.name == "full"
        awd = Config.load("ptb-awd-tied-budget")
        renamed = awd.with_overrides(["model.encoder=keeps-activations-test"])
        assert renamed.loss.ar == 2.0 and type(renamed.model.encoder).activation_regularization
        with pytest.raises(UsageError, match="model.encoder = 'vd-lstm' keeps none"):
            Config.load("ptb-small-vd").with_overrides(["loss.ar=1"])
        with pytest.raises(UsageError, match="max_positions = 64 is not allowed; expected >= model.encoder.memory"):
            Config.load("ptb-transformer-tied").with_overrides(
                ["model.encoder.positions=learned", "model.encoder.max_positions=64", "train.bptt=35"]
            )
    finally:
        for name in ("not-an-encoder-test", "keeps-activations-test"):
            ENCODERS._entries.pop(name, None)
    assert [e.name for e in OPTIMIZERS if e.config.averages_iterates] == ["nt-asgd"]
    assert [e.name for e in OPTIMIZERS if e.config.graph_capturable] == ["sgd", "nt-asgd"]
