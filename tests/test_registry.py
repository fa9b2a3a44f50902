"""Output layers as registered components: the [model.output] table, --set grammar, old run folders, `tiedlm list`."""

import json
import tomllib
from pathlib import Path

import pytest

from tiedlm.cli import main
from tiedlm.errors import UsageError
from tiedlm.models.encoders import ENCODERS, AWDLSTMConfig, TransformerConfig
from tiedlm.models.outputs import OUTPUTS, DrillConfig, TiedConfig
from tiedlm.registry import field_names
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
    with pytest.raises(UsageError, match=r"model.output.depth = 0 is not allowed; expected an integer in \[1, 64\]"):
        base.with_overrides(["model.output=drill", "model.output.depth=0"])
    with pytest.raises(UsageError, match="expected an integer"):
        base.with_overrides(["model.output=drill", "model.output.depth=four"])


def test_a_layer_too_small_for_tied_scoring_is_refused_with_the_fix():
    with pytest.raises(UsageError, match="needs model.encoder.hidden_size == model.embedding_size.*'bilinear'"):
        Config.load("ptb-small-re").with_overrides(["model.encoder.hidden_size=300"])


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


def _migration():
    import importlib.util
    import sys

    tool = ROOT / "tools" / "migrate_runs.py"
    sys.path.insert(0, str(tool.parent))
    spec = importlib.util.spec_from_file_location("migrate_runs", tool)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_old_flat_files_with_every_key_migrate_exactly():
    """An old config.toml listed every [model] key flat, those of other encoders and output layers included:
    tools/migrate_runs.py rewrites it as the config it was."""
    migrate = _migration()
    legacy_keys = {old: ("output", layer, key) for old, (layer, key) in migrate.OUTPUT_KEYS.items()}
    legacy_keys |= {k: ("encoder", None, k) for e in ENCODERS for k in field_names(e.config)}
    for preset in ("ptb-awd-drill", "ptb-transformer-tied", "ptb-small-real", "ptb-awd-sparse-budget"):
        cfg = Config.load(preset)
        raw = cfg.to_dict()
        model = {k: v for k, v in raw["model"].items() if k not in ("encoder", "output")}
        model["encoder"], model["output"] = cfg.model.encoder.name, cfg.model.output.name
        for old, (table, layer, key) in legacy_keys.items():  # every flat key: this run's value or a default
            component = getattr(cfg.model, table)
            owners = [
                e
                for e in (ENCODERS if table == "encoder" else OUTPUTS)
                if (layer is None or e.name == layer) and hasattr(e.config(), key)
            ]
            mine = component.name in [e.name for e in owners]
            model[old] = getattr(component, key) if mine else getattr(owners[0].config(), key)
        raw["model"] = migrate.lm_model(model)
        assert Config.from_dict(raw) == cfg, preset


def test_every_committed_run_folder_is_in_todays_layout():
    """results/ was migrated once (tools/migrate_runs.py): each config.toml names its task and loads as it is,
    and the migration finds nothing left to rewrite."""
    from tiedlm.registry import tasks
    from tiedlm.run_dir import RunDir

    files = sorted((ROOT / "results").rglob("config.toml"))
    assert files
    for path in files:
        task = RunDir(path.parent).task
        assert task in tasks(), path
        tasks()[task].config.load_run(path.parent)
    assert _migration().main([str(ROOT / "results")]) == 0


def test_optimizer_table():
    from tiedlm.optimizers import AdamConfig, NTASGDConfig, SGDConfig

    awd = Config.load("ptb-awd-drill")
    assert awd.train.optimizer == NTASGDConfig(nonmono=5, finetune_epochs=500) and awd.train.total_epochs == 1000
    assert "[train.optimizer]" in awd.to_toml() and Config.from_dict(tomllib.loads(awd.to_toml())) == awd
    short = awd.with_overrides(["train.optimizer.nonmono=3", "train.optimizer.finetune_epochs=0"])
    assert short.train.optimizer == NTASGDConfig(nonmono=3, finetune_epochs=0) and short.train.total_epochs == 500
    vd = Config.load("ptb-small-vd")
    assert vd.train.optimizer == SGDConfig() and vd.train.total_epochs == vd.train.epochs
    with pytest.raises(UsageError, match="unknown key 'nonmono'"):
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


def test_a_lazily_exported_name_is_never_shadowed_by_its_module():
    """A package's lazy names stay themselves after their module is imported directly (Python then sets the module
    as the package's attribute of the same name), and a name that is its module's is refused when declared."""
    import importlib

    from tiedlm.registry import lazy_exports

    importlib.import_module("tiedlm.evaluation.scoring")
    from tiedlm.evaluation import perplexity

    assert callable(perplexity) and perplexity(0.0) == 1.0
    with pytest.raises(ValueError, match="'scoring' names a module"):
        lazy_exports("tiedlm.evaluation", {".scoring": "evaluate scoring"})
