"""tiedlm's output layers and augmented loss on Hugging Face causal LMs (tiedlm.hf), and HF bodies as tiedlm
encoders. Tiny random GPT-2 and Llama configs built here: no hub, no download."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from tiedlm.errors import UsageError
from tiedlm.models.outputs import OUTPUTS, build_output

from conftest import TINY_HF, tiny_overrides, write_tiny_corpus, write_tiny_hf_config

transformers = pytest.importorskip("transformers")
hf = pytest.importorskip("tiedlm.hf")

VOCAB = 40
ARCHS = list(TINY_HF)
LAYERS = {name: {"drill": {"depth": 2}, "dual": {"joint_size": 12}}.get(name, {}) for name in OUTPUTS.names()}


def causal_lm(arch: str, seed: int = 0):
    torch.manual_seed(seed)
    config = transformers.AutoConfig.for_model(**TINY_HF[arch], vocab_size=VOCAB, pad_token_id=0, bos_token_id=1)
    config.eos_token_id = None
    return transformers.AutoModelForCausalLM.from_config(config)


def tokens(*shape, seed=1):
    return torch.randint(2, VOCAB, shape, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("name", OUTPUTS.names())
def test_every_output_layer_attaches_and_scores_the_models_hidden_states_as_tiedlms_own_layer(arch, name):
    """The logits are those of a tiedlm output layer (built by build_output, as `tiedlm train` does) fed the model's
    last hidden states and its input embedding E, with the attached layer's weights; E is shared, not copied."""
    model = hf.with_output_layer(causal_lm(arch), name, **LAYERS[name]).eval()
    assert type(model).__name__.startswith("TiedLM") and isinstance(model, transformers.PreTrainedModel)
    x = tokens(2, 7)
    with torch.no_grad():
        logits = model(input_ids=x).logits
        h = model.base_model(input_ids=x).last_hidden_state
        embedding = model.get_input_embeddings()
        own = build_output(OUTPUTS.config({"name": name, **LAYERS[name]}), embedding, h.size(-1))
        own.load_state_dict(model.lm_head.layer.state_dict())
        assert torch.equal(logits, own.eval()(h)[0])
    if own.tied:
        assert model.lm_head.layer.embedding_weight is embedding.weight
    assert model.config.tiedlm_output == {"name": name, **OUTPUTS.config(name).to_dict(), **LAYERS[name]}


def test_drill_on_llama_is_the_papers_equations_written_out():
    """logits = E⁽ᵏ⁾ h + b with E⁽ⁱ⁾ = σ(E⁽ⁱ⁻¹⁾ U⁽ⁱ⁾ᵀ + b⁽ⁱ⁾) + E (DRILL eqs. 8–10), from the model's own E."""
    model = hf.with_output_layer(causal_lm("llama"), "drill", depth=2).eval()
    x = tokens(1, 5)
    with torch.no_grad():
        h = model.base_model(input_ids=x).last_hidden_state
        E = model.get_input_embeddings().weight
        layers = model.lm_head.layer.label_encoder.layers
        labels = E
        for layer in layers:
            labels = torch.sigmoid(labels @ layer.weight.T + layer.bias) + E
        expected = h @ labels.T + model.lm_head.layer.bias
        assert torch.allclose(model(input_ids=x).logits, expected, atol=1e-6, rtol=0)


@pytest.mark.parametrize("arch", ARCHS)
def test_generate_with_the_kv_cache_equals_greedy_decoding_step_by_step(arch):
    model = hf.with_output_layer(causal_lm(arch), "drill", depth=2).eval()
    prompt = tokens(2, 4)
    with torch.no_grad():
        out = model.generate(
            prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=8, do_sample=False, use_cache=True
        )
        ids = prompt
        for _ in range(8):
            ids = torch.cat([ids, model(input_ids=ids).logits[:, -1].argmax(-1, keepdim=True)], dim=1)
    assert out.shape == (2, 12)
    assert torch.equal(out, ids)


def test_the_label_encoding_is_kept_within_one_generate_call_and_fresh_everywhere_else(monkeypatch):
    """g_out(E) is computed once for a whole generate() call, whose weights cannot change, and afresh in every
    other forward pass, so that the logits follow any change of the weights: an optimiser step, an in-place edit
    through ``.data`` (EMA, weight averaging) or ``copy_`` under no_grad."""
    model = hf.with_output_layer(causal_lm("llama"), "drill", depth=2)
    layer, calls = model.lm_head.layer, {"n": 0}
    real = layer.encode_labels

    def counted():
        calls["n"] += type(layer._embedding[0]).__name__ != "_Rows"  # a whole table, not the probe words' check
        return real()

    monkeypatch.setattr(layer, "encode_labels", counted)
    x = tokens(1, 6)
    model.eval()
    with torch.no_grad():
        model.generate(x, max_new_tokens=5, do_sample=False)
        assert calls["n"] == 1  # five tokens, one label encoding
        model.generate(x, max_new_tokens=5, do_sample=False)
        assert calls["n"] == 1  # the weights are unchanged: the kept encoding serves the next call
        before = model.generate(x, max_new_tokens=5, do_sample=False)
        model.get_input_embeddings().weight.data[3].mul_(-1)  # one word's row, written through .data
        edited = model.generate(x, max_new_tokens=5, do_sample=False)
        assert calls["n"] == 2
        model.get_input_embeddings().weight.data[3].mul_(-1)
        assert torch.equal(model.generate(x, max_new_tokens=5, do_sample=False), before) and calls["n"] == 3
        calls["n"] = 1
        del edited
        first = model(input_ids=x).logits
        model.get_input_embeddings().weight.data.mul_(2)  # as an EMA or weight averaging writes
        doubled = model(input_ids=x).logits
        model.get_input_embeddings().weight.data.div_(2)
        assert torch.equal(model(input_ids=x).logits, first) and not torch.allclose(doubled, first)
        layer.label_encoder.layers[0].weight.copy_(torch.zeros_like(layer.label_encoder.layers[0].weight))
        assert not torch.allclose(model(input_ids=x).logits, first)
    assert calls["n"] == 5
    fresh = hf.with_output_layer(causal_lm("llama"), "drill", depth=2).eval()
    fresh.load_state_dict(model.state_dict())
    with torch.no_grad():  # the edited model's logits are those of a model built with its weights
        assert torch.equal(fresh(input_ids=x).logits, model(input_ids=x).logits)


@pytest.mark.parametrize("arch", ARCHS)
def test_save_pretrained_then_from_pretrained_in_a_fresh_process_gives_identical_logits(arch, tmp_path):
    """The folder holds safetensors and JSON only; a new Python process that imports tiedlm.hf reloads it with
    AutoModelForCausalLM (no trust_remote_code) and scores a batch bit for bit as the saved model did."""
    model = hf.with_output_layer(causal_lm(arch), "drill", depth=2, dropout=0.2).eval()
    x = tokens(2, 6)
    with torch.no_grad():
        expected = model(input_ids=x).logits
    model.save_pretrained(tmp_path / "model")
    assert {p.suffix for p in (tmp_path / "model").iterdir()} == {".json", ".safetensors", ".md"}
    card = (tmp_path / "model" / "README.md").read_text()  # what loading it needs, for a person and a program
    assert "library_name: transformers" in card and "import tiedlm.hf" in card and "pip install 'tiedlm[hf]'" in card
    saved = json.loads((tmp_path / "model" / "config.json").read_text())
    assert saved["model_type"] == "tiedlm" and saved["tiedlm_base"] == arch
    torch.save({"x": x, "logits": expected}, tmp_path / "expected.pt")
    script = f"""
import torch, tiedlm.hf
from transformers import AutoModelForCausalLM
model = AutoModelForCausalLM.from_pretrained({str(tmp_path / "model")!r}).eval()
want = torch.load({str(tmp_path / "expected.pt")!r})
with torch.no_grad():
    assert torch.equal(model(input_ids=want["x"]).logits, want["logits"]), "logits differ"
assert type(model).__name__.startswith("TiedLM"), type(model)
bf16 = AutoModelForCausalLM.from_pretrained({str(tmp_path / "model")!r}, dtype=torch.bfloat16).eval()
assert bf16.lm_head.layer.bias.dtype == torch.bfloat16
with torch.no_grad():
    got = bf16(input_ids=want["x"]).logits.float()
assert (got.softmax(-1) - want["logits"].softmax(-1)).abs().max() < 0.05
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]


def test_hf_trainer_trains_it_with_the_augmented_loss_and_the_loss_falls(tmp_path):
    from torch.utils.data import Dataset

    class Repeated(Dataset):
        def __init__(self):
            self.x = tokens(8, 12, seed=3)

        def __len__(self):
            return 32

        def __getitem__(self, i):
            ids = self.x[i % 8]
            return {"input_ids": ids, "labels": ids.clone()}

    model = hf.with_output_layer(causal_lm("llama"), "drill", depth=1)
    data = Repeated()
    batch = {k: torch.stack([data[i][k] for i in range(8)]) for k in ("input_ids", "labels")}
    with torch.no_grad():
        before = model.eval()(**batch).loss.item()
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path / "out"),
        max_steps=40,
        per_device_train_batch_size=8,
        learning_rate=1e-2,
        report_to=[],
        use_cpu=True,
        save_strategy="no",
        logging_strategy="no",
        disable_tqdm=True,
    )
    loss = hf.AugmentedLoss(model, tau=2.0, gamma=0.5)
    transformers.Trainer(model=model, args=args, train_dataset=data, compute_loss_func=loss).train()
    with torch.no_grad():
        after = model.eval()(**batch).loss.item()
    assert after < 0.8 * before, (before, after)


def test_gradient_checkpointing_gives_the_gradients_of_the_plain_backward_pass():
    grads = []
    for checkpointing in (False, True):
        model = hf.with_output_layer(causal_lm("gpt2"), "drill", depth=2).train()
        for m in model.modules():  # no dropout: the two passes must not draw different masks
            if isinstance(m, nn.Dropout):
                m.p = 0.0
        if checkpointing:  # transformers 5 renamed it activation checkpointing
            getattr(model, "activation_checkpointing_enable", model.gradient_checkpointing_enable)()
            assert getattr(model, "is_activation_checkpointing", None) or model.is_gradient_checkpointing
        x = tokens(2, 6)
        model(input_ids=x, labels=x).loss.backward()
        grads.append({n: p.grad.clone() for n, p in model.named_parameters()})
    assert grads[0].keys() == grads[1].keys()
    assert all(torch.allclose(grads[0][n], grads[1][n], atol=1e-6) for n in grads[0])


def test_the_augmented_loss_is_eq_3_3_written_out():
    """J_tot = J + γτ·KL(ỹ ‖ ŷ), ŷ = softmax(z/τ), ỹ = softmax(E E[y*]/τ) (Inan et al. eqs. 3.1–3.3, 3.6–3.7),
    over the shifted targets, with -100 labels left out and num_items_in_batch dividing the sum."""
    model = hf.with_output_layer(causal_lm("llama"), "tied", bias=True)
    x = tokens(2, 7)
    labels = x.clone()
    labels[0, 5:] = -100
    tau, gamma = 3.0, 0.6
    out = model(input_ids=x)
    got = hf.AugmentedLoss(model, tau=tau, gamma=gamma)(out, labels)

    z = out.logits[:, :-1].reshape(-1, VOCAB).double()
    y = labels[:, 1:].reshape(-1)
    keep = y != -100
    z, y = z[keep], y[keep]
    E = model.get_input_embeddings().weight.double()
    ce = F.cross_entropy(z, y)
    target = torch.softmax(E[y] @ E.T / tau, dim=-1)
    kl = (target * (target.log() - torch.log_softmax(z / tau, dim=-1))).sum(-1).mean()
    assert torch.allclose(got.double(), ce + gamma * tau * kl, rtol=1e-5)
    summed = hf.AugmentedLoss(model, tau=tau, gamma=gamma)(out, labels, num_items_in_batch=torch.tensor(20))
    assert torch.allclose(summed.double(), (ce + gamma * tau * kl) * keep.sum() / 20, rtol=1e-5)


def test_bad_combinations_are_one_line_errors():
    body = transformers.AutoModel.from_config(causal_lm("llama").config)
    with pytest.raises(UsageError, match="has no language-model head; load it with AutoModelForCausalLM"):
        hf.with_output_layer(body, "tied")
    narrow = causal_lm("llama")
    narrow.lm_head = nn.Linear(8, VOCAB)  # h of 8 against E of 16
    with pytest.raises(UsageError, match=r"\(size 8\) against its input embeddings \(size 16\); use 'bilinear'"):
        hf.with_output_layer(narrow, "drill")
    assert hf.with_output_layer(narrow, "bilinear").lm_head.layer.dedicated_parameters() > 0
    with pytest.raises(UsageError, match="depth = 0 is not allowed"):
        hf.with_output_layer(causal_lm("llama"), "drill", depth=0)
    with pytest.raises(UsageError, match="unknown key model.output.deepness"):
        hf.with_output_layer(causal_lm("llama"), "drill", deepness=2)
    twice = hf.with_output_layer(causal_lm("llama"), "tied")
    with pytest.raises(UsageError, match="already has a tiedlm output layer"):
        hf.with_output_layer(twice, "drill")
    with pytest.raises(UsageError, match="expected a transformers PreTrainedModel, got Linear"):
        hf.with_output_layer(nn.Linear(2, 2), "tied")


# ----- HF bodies as tiedlm encoders ------------------------------------------------------------------------


def hf_overrides(tmp_path, arch="llama", *extra: str) -> list[str]:
    corpus = write_tiny_corpus(tmp_path / "corpus")
    config = write_tiny_hf_config(tmp_path / arch, arch)
    tiny = [o for o in tiny_overrides(corpus, **{"train.lr": "0.003"}) if not o.startswith("model.encoder.hidden_size")]
    return [*tiny, "model.encoder=hf", f"model.encoder.config={config}", "model.encoder.memory=4", *extra]


@pytest.mark.parametrize("arch", ARCHS)
def test_any_preset_trains_on_a_hf_body_whose_config_sets_the_sizes(arch, tmp_path):
    """`--set model.encoder=hf --set model.encoder.config=CONFIG`: the embedding size comes from the HF config
    (16, whatever the preset says), the vocabulary from the corpus; it trains and evaluates like any LM."""
    from tiedlm.tasks.lm.config import Config
    from tiedlm.tasks.lm.task import LanguageModelTask
    from tiedlm.train import run

    cfg = Config.load("ptb-transformer-drill").with_overrides(hf_overrides(tmp_path, arch, "train.epochs=1"))
    assert cfg.model.embedding_size == 16 and cfg.model.encoder.name == "hf"
    summary = run(LanguageModelTask(cfg), tmp_path / "run", progress=False, log=lambda *a: None)
    assert summary["test_ppl"] < 120  # below a uniform guess over the 121 words
    saved = Config.for_run(tmp_path / "run", True, [])  # the run keeps the HF config itself, not its path
    assert json.loads(saved.model.encoder.config) == json.loads(Path(cfg.model.encoder.config).read_text())


def test_cli_refuses_bad_hf_encoder_settings_with_one_line_and_exit_2(tmp_path, capsys):
    from tiedlm.cli import main

    base = ["train", "ptb-llama-drill", "--out", str(tmp_path / "run")]
    cases = {
        "model.encoder.config=nowhere.json": "model.encoder.config = 'nowhere.json' is not allowed; expected a",
        f"model.encoder.config={tmp_path}": "is not allowed; expected a config.json, a model folder",
        "train.bptt=300": "model.encoder.memory + 2 * train.bptt = 632 is not allowed; expected <= the 512",
    }
    (tmp_path / "bad.json").write_text('{"model_type": "llama", "layers": 2}')
    cases[f"model.encoder.config={tmp_path / 'bad.json'}"] = "gives no hidden size"
    for setting, message in cases.items():
        assert main([*base, "--set", setting]) == 2
        err = capsys.readouterr().err.strip()
        assert "\n" not in err and message in err, err
    assert not (tmp_path / "run").exists()


def test_the_whole_pipeline_runs_on_a_hf_body_from_the_cli(tmp_path, capsys):
    """train (tied and DRILL), evaluate at batch 1, dynamic evaluation, analyze bands and report, each from the
    command line on runs whose encoder is a GPT-2 body built from a config.json."""
    from tiedlm.cli import main

    runs = []
    for name in ("tied", "drill"):
        run = tmp_path / name
        sets = [*hf_overrides(tmp_path, "gpt2", "train.epochs=1"), f"model.output={name}"]
        settings = [a for s in sets for a in ("--set", s)]
        assert main(["train", "ptb-llama-tied", "--out", str(run), "--no-progress", *settings]) == 0
        runs.append(run)
    capsys.readouterr()
    assert main(["evaluate", str(runs[1]), "--json"]) == 0
    test = json.loads(capsys.readouterr().out)
    assert 1 < test["ppl"] < 121
    summary = json.loads((runs[1] / "summary.json").read_text())
    assert test["ppl"] == pytest.approx(summary["test_ppl"], rel=1e-6)  # the batch-1 figure training reported
    dynamic = ["--dynamic", "--grid", "--grid-lrs", "0.001", "--grid-lambdas", "0.02", "--stat-tokens", "200"]
    assert main(["evaluate", str(runs[1]), *dynamic, "--grid-tokens", "100", "--json"]) == 0
    dyn = json.loads(capsys.readouterr().out)
    assert dyn["static_ppl"] == pytest.approx(test["ppl"], rel=1e-6) and dyn["dynamic_ppl"] > 1
    assert main(["analyze", "bands", *map(str, runs), "--split", "valid", "--out", str(tmp_path / "bands")]) == 0
    assert main(["report", *map(str, runs), "--out", str(tmp_path / "report")]) == 0
    assert "hf" in (tmp_path / "report" / "report.md").read_text()


OTHER_ARCHS = {
    "qwen2": {},
    "qwen3": {"head_dim": 8},
    "mistral": {},
    "gemma": {"head_dim": 8},
    "gpt_neox": {"num_key_value_heads": None},  # its head is embed_out, not lm_head
    "opt": {"ffn_dim": 64, "word_embed_proj_dim": 32, "num_key_value_heads": None},
}


@pytest.mark.parametrize("arch", list(OTHER_ARCHS))
def test_other_architectures_take_drill_generate_and_round_trip(arch, tmp_path):
    small = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4)
    keys = {k: v for k, v in {**small, "num_key_value_heads": 2, **OTHER_ARCHS[arch]}.items() if v is not None}
    torch.manual_seed(0)
    config = transformers.AutoConfig.for_model(arch, **keys, vocab_size=VOCAB, pad_token_id=0)
    model = hf.with_output_layer(transformers.AutoModelForCausalLM.from_config(config), "drill", depth=2).eval()
    assert isinstance(model.get_output_embeddings(), hf.OutputHead)
    x = tokens(1, 6)
    with torch.no_grad():
        logits = model(input_ids=x).logits
        out = model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=4, do_sample=False)
        assert torch.equal(out[:, 6], logits[:, -1].argmax(-1))
    model.save_pretrained(tmp_path)
    again = transformers.AutoModelForCausalLM.from_pretrained(tmp_path).eval()
    with torch.no_grad():
        assert torch.equal(again(input_ids=x).logits, logits)
