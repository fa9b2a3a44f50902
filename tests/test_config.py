import pytest

from tiedlm.config import list_presets
from tiedlm.errors import UsageError
from tiedlm.tasks.lm.config import Config


def test_the_presets_are_what_tools_make_presets_writes(tmp_path, monkeypatch):
    """docs/configuration.md says the presets are generated: the generator's files load as the very configs the
    committed ones do (the committed files may be laid out differently), and name the same presets."""
    import importlib.util
    from pathlib import Path

    tool = Path(__file__).resolve().parents[1] / "tools" / "make_presets.py"
    spec = importlib.util.spec_from_file_location("make_presets", tool)
    make_presets = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make_presets)
    monkeypatch.setattr(make_presets, "OUT", tmp_path)
    make_presets.main()
    written = sorted(p.stem for p in tmp_path.glob("*.toml"))
    assert written == sorted(list_presets())
    assert [n for n in written if Config.load(tmp_path / f"{n}.toml") != Config.load(n)] == []
    dual = Config.load("ptb-awd-dual").model.output  # DRILL Table 4's dual row (footnote 6)
    assert (dual.residual, dual.dropout, dual.init_range) == (True, 0.6, 0.1)


def test_all_presets_load_and_validate():
    names = list_presets()
    grid = {
        f"{c}-{s}-{v}" for c in ("ptb", "wt2") for s in ("small", "medium", "large") for v in ("vd", "al", "re", "real")
    }
    grid |= {f"wt2half{h}-small-{v}" for h in (1, 2) for v in ("vd", "al", "re", "real")}
    assert grid <= set(names)
    awd = {f"ptb-awd-{o}{b}" for o in ("tied", "full", "bilinear", "dual", "drill") for b in ("", "-budget")}
    awd |= {f"wt2-awd-{o}{b}" for o in ("tied", "drill") for b in ("", "-budget")}
    assert awd <= set(names)
    for n in names:
        c = Config.load(n)
        if "-awd-sparse" in n:  # the tied model, both hidden sizes 1.5x wider, every layer predefined-sparse
            dense = Config.load(n.replace("sparse", "tied"))
            assert c.model.output.name == "tied" and not c.model.encoder.sparse_layer
            assert c.model.encoder.hidden_size == 3 * dense.model.encoder.hidden_size // 2
            assert c.model.encoder.sparse_fraction == 2 / 3
            continue
        if "-awd-" in n:
            assert c.model.encoder.name == "awd-lstm" and c.model.output.name == n.split("-")[2]
            continue
        if "-transformer-" in n:
            assert c.model.encoder.name == "transformer" and c.model.output.name == n.split("-")[2]
            assert c.train.optimizer.name == "adam" and c.model.embedding_size % c.model.encoder.heads == 0
            continue
        if "-llama-" in n:  # a Hugging Face Llama body from the shipped config: d is its hidden size
            assert c.model.encoder.name == "hf" and c.model.output.name == n.split("-")[2]
            assert c.model.embedding_size == c.model.encoder.hf_sizes()["hidden"] == 256
            continue
        if n == "ptb-small-real-bias":  # our deviation: ptb-small-real plus a learnable output bias, ỹ fixed
            base = Config.load("ptb-small-real")
            base.model.output.bias, base.loss.target_grad = True, False
            assert c.to_dict() == base.to_dict()
            continue
        assert (c.model.output.name == "tied") == n.endswith(("-re", "-real"))
        assert not getattr(c.model.output, "bias", False)
        assert c.loss.augmented == n.endswith(("-al", "-real"))
        assert c.loss.target_grad == n.endswith("-real")  # gradients through ỹ: REAL only (README, Presets)


def test_drill_preset_settings_of_the_paper():
    """§4: depth 4, 400, dropout 0.6, residual to E; PTB sigmoid + variational, WikiText-2 relu + standard."""
    p, w = Config.load("ptb-awd-drill").model, Config.load("wt2-awd-drill").model
    po, wo = p.output, w.output
    assert (po.name, po.depth, p.embedding_size, po.dropout, po.residual_embedding) == ("drill", 4, 400, 0.6, True)
    assert (po.activation, po.variational, wo.activation, wo.variational) == (
        "sigmoid",
        True,
        "relu",
        False,
    )
    t = Config.load("ptb-awd-tied").train
    assert (
        t.batch_size,
        Config.load("ptb-awd-tied").model.encoder.dropout_input,
        Config.load("ptb-awd-tied").model.encoder.dropout_hidden,
    ) == (20, 0.4, 0.25)


def test_paper_hyperparameters_in_presets():
    s, m, lg = Config.load("ptb-small-vd"), Config.load("ptb-medium-vd"), Config.load("ptb-large-vd")
    assert (s.train.decay_start, m.train.decay_start, lg.train.decay_start) == (5, 10, 1)
    assert (s.train.lr_decay, lg.train.lr_decay, lg.train.clip) == (0.9, 0.97, 6.0)
    assert (s.model.encoder.dropout, m.model.encoder.dropout, lg.model.encoder.dropout) == (0.3, 0.5, 0.65)
    assert Config.load("wt2-small-al").loss.gamma * 20 == pytest.approx(25.0)


def test_lr_schedule():
    c = Config.load("ptb-small-vd")
    assert [round(c.lr_at(e), 4) for e in (1, 4, 5, 6)] == [1.0, 1.0, 0.9, 0.81]


def test_overrides_and_errors():
    c = Config.load("ptb-small-vd").with_overrides(
        ["train.epochs=3", "loss.augmented=true", "model.encoder.dropout=0.1"]
    )
    assert (c.train.epochs, c.loss.augmented, c.model.encoder.dropout) == (3, True, 0.1)
    bad = [
        ("train.epochs=x", "expected an integer"),
        ("model.output=softmax", "one of: full, tied"),
        ("nope.x=1", "unknown section"),
        ("model.size=3", "unknown key"),
        ("train.epochs", "section.key=value"),
        ("model.encoder.dropout=1.5", "drop probability"),
        ("train.precision=fp8", "one of: auto, fp32, bf16, fp16"),
        # a key of another section, or of a component's table (the flat [model] keys of older configs)
        ("model.epochs=3", r"not in \[model\]; it is in \[train\]"),
        ("model.hidden_size=650", r"not in \[model\]; it is in \[model.encoder\]"),
        ("train.momentum=0.9", r"not in \[train\]; it is in \[train.optimizer\]"),
    ]
    for item, msg in bad:
        with pytest.raises(UsageError, match=msg):
            Config.load("ptb-small-vd").with_overrides([item])


def test_toml_errors(tmp_path):
    p = tmp_path / "c.toml"
    p.write_text("[train]\nepochs = 'ten'\n")
    with pytest.raises(UsageError, match="train.epochs = 'ten' must be of type int"):
        Config.load(p)
    p.write_text("[train\n")
    with pytest.raises(UsageError, match="not valid TOML"):
        Config.load(p)
    with pytest.raises(UsageError, match="does not exist"):
        Config.load(tmp_path / "absent.toml")
    with pytest.raises(UsageError, match="unknown preset"):
        Config.load("ptb-tiny-vd")


def test_toml_roundtrip(tmp_path):
    c = Config.load("wt2-medium-real")
    (tmp_path / "c.toml").write_text(c.to_toml())
    assert Config.load(tmp_path / "c.toml") == c


def test_run_precision_falls_back_to_fp32_where_bf16_is_missing(monkeypatch):
    """A run trained in bf16 (GPU, AVX512-BF16 CPU) is evaluated in fp32 on a CPU without bf16, unless asked."""
    import torch

    from tiedlm import runtime

    cpu = torch.device("cpu")
    monkeypatch.setattr(runtime, "cpu_supports_bf16", lambda: False)
    assert runtime.run_precision("bf16", cpu) == "fp32"
    assert runtime.run_precision("bf16", cpu, "bf16") == "bf16"
    assert runtime.run_precision("fp32", cpu) == "fp32"
    monkeypatch.setattr(runtime, "cpu_supports_bf16", lambda: True)
    assert runtime.run_precision("bf16", cpu) == "bf16"
    # a run trained in fp16 (the language model's GPU option) runs in fp32 off a GPU, unless asked
    assert runtime.run_precision("fp16", cpu) == "fp32" and runtime.run_precision("fp16", cpu, "fp16") == "fp16"
    assert runtime.run_precision("fp16", torch.device("cuda")) == "fp16"


def test_declared_bounds_hold_however_a_setting_is_set(tmp_path):
    """What a field declares it allows (registry.bounded, registry.option) refuses a value from a TOML file, from
    --set and from a component built in Python alike, naming the flag where the setting is also an option; a
    task's [train] that only sets another default keeps the base's bounds; a non-finite number is refused in any
    section."""
    from tiedlm.models.config import ModelConfig
    from tiedlm.models.outputs import DrillConfig
    from tiedlm.tasks.subspace.config import SubspaceExperimentConfig
    from tiedlm.tasks.tagging.config import TaggerConfig

    toml = tmp_path / "subspace.toml"
    toml.write_text("[model]\nhidden_size = 0\n")
    refusals = [
        (
            lambda: SubspaceExperimentConfig.load(toml),
            r"model.hidden_size = 0 is not allowed; expected an integer >= 1 \(--hidden-size\)",
        ),
        (
            lambda: SubspaceExperimentConfig().with_overrides(["sweep.taus=1,0"]),
            r"sweep.taus = \[1.0, 0.0\] is not allowed; expected each value a number > 0 \(--taus\)",
        ),
        (
            lambda: TaggerConfig().with_overrides(["train.epochs=0"]),
            r"train.epochs = 0 is not allowed; expected an integer >= 1$",
        ),
        (
            lambda: Config().with_overrides(["train.threads=-1"]),
            r"train.threads = -1 is not allowed; expected an integer >= 0 \(0 = the free cores\)",
        ),
        (
            lambda: ModelConfig(encoder="awd-lstm", output=DrillConfig(dropout=1.0)).validate(),
            r"model.output.dropout = 1.0 is not allowed; expected a drop probability in \[0, 1\)",
        ),
        (
            lambda: Config().with_overrides(["train.lr_decay=0"]),
            r"train.lr_decay = 0.0 is not allowed; expected a number in \(0, 1\]",
        ),
        (
            lambda: Config().with_overrides(["loss.gamma=nan"]),
            "loss.gamma = nan is not allowed; expected a finite number",
        ),
        (
            lambda: Config().with_overrides(["model.output=drill", "model.output.activation=gelu"]),
            "expected one of: sigmoid, relu",
        ),
    ]
    for make, message in refusals:
        with pytest.raises(UsageError, match=message):
            make()
    assert SubspaceExperimentConfig().with_overrides(["model.hidden_size=1", "sweep.taus=0.5"]).sweep.taus == [0.5]
