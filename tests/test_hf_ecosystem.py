"""tiedlm.hf among the tools of the Hugging Face ecosystem: the head always scores against the model's live input
embedding (copies, PEFT, set_input_embeddings, resizing), never serves stale label encodings, saves as every
PyTorch loop saves, leaves the caller's config alone and refuses a hostile config.json in one line."""

import copy
import json

import pytest
import torch
from torch import nn

from tiedlm.errors import UsageError

from conftest import TINY_HF, tiny_overrides, write_tiny_corpus, write_tiny_hf_config

transformers = pytest.importorskip("transformers")
hf = pytest.importorskip("tiedlm.hf")

VOCAB = 40


def causal_lm(arch: str = "llama", seed: int = 0):
    torch.manual_seed(seed)
    config = transformers.AutoConfig.for_model(**TINY_HF[arch], vocab_size=VOCAB, pad_token_id=0, bos_token_id=1)
    config.eos_token_id = None
    return transformers.AutoModelForCausalLM.from_config(config)


def tokens(*shape, seed=1, vocab=VOCAB):
    return torch.randint(2, vocab, shape, generator=torch.Generator().manual_seed(seed))


def scored_against(model, x, weight):
    """The logits the head's layer gives the model's last hidden states when E is ``weight`` (written out here)."""
    layer = model.get_output_embeddings().layer
    h = model.base_model(input_ids=x).last_hidden_state
    e = weight
    for lin in layer.label_encoder.layers:  # DRILL eqs. 8-10 with the residual to E
        e = torch.sigmoid(lin(e)) + weight
    return h @ e.T + layer.bias


@pytest.mark.parametrize("arch", list(TINY_HF))
def test_a_state_dict_saved_with_torch_save_loads_with_weights_only(arch, tmp_path):
    model = hf.with_output_layer(causal_lm(arch), "drill", depth=2)
    torch.save(model.state_dict(), tmp_path / "sd.pt")
    state = torch.load(tmp_path / "sd.pt")  # weights_only=True, the default
    again = hf.with_output_layer(causal_lm(arch, seed=5), "drill", depth=2)
    again.load_state_dict(state)
    x = tokens(2, 6)
    with torch.no_grad():
        assert torch.equal(again.eval()(input_ids=x).logits, model.eval()(input_ids=x).logits)


def test_copies_and_set_input_embeddings_keep_the_head_on_the_live_embedding():
    model = hf.with_output_layer(causal_lm(), "drill", depth=2).eval()
    x = tokens(1, 5)
    twin = copy.deepcopy(model)
    with torch.no_grad():
        twin.get_input_embeddings().weight.mul_(3)  # the copy's own E: the original's head must not see it
        assert torch.allclose(twin(input_ids=x).logits, scored_against(twin, x, twin.get_input_embeddings().weight))
        assert torch.allclose(model(input_ids=x).logits, scored_against(model, x, model.get_input_embeddings().weight))
        head = copy.deepcopy(model.lm_head)  # a head copied alone (PEFT's modules_to_save) reads its model's E
        h = model.base_model(input_ids=x).last_hidden_state
        assert torch.allclose(head(h), model(input_ids=x).logits)
        new = nn.Embedding(VOCAB, model.get_input_embeddings().embedding_dim)
        model.set_input_embeddings(new)
        assert model.lm_head.layer.embedding_weight is new.weight
        assert torch.allclose(model(input_ids=x).logits, scored_against(model, x, new.weight))


def test_the_callers_config_is_left_alone_and_can_build_again():
    plain = causal_lm()
    given = plain.config
    model = hf.with_output_layer(plain, "tied")
    assert type(given) is transformers.LlamaConfig and given.model_type == "llama" and not hasattr(given, "tiedlm_base")
    assert model.config is not given and model.config.model_type == "tiedlm"
    assert all(getattr(m, "config", model.config) is model.config for m in model.modules())
    transformers.AutoModelForCausalLM.from_config(given)  # the user's object still builds their model


def test_resize_token_embeddings_resizes_e_and_the_heads_rows_keeps_the_encoder_and_the_tie(tmp_path):
    model = hf.with_output_layer(causal_lm(), "drill", depth=2)
    layer = model.lm_head.layer
    with torch.no_grad():
        layer.bias.normal_()  # as training leaves it
    encoder = {k: v.clone() for k, v in layer.label_encoder.state_dict().items()}
    bias = layer.bias.detach().clone()
    model.resize_token_embeddings(VOCAB + 8)
    assert model.get_input_embeddings().weight.shape[0] == VOCAB + 8 and model.config.vocab_size == VOCAB + 8
    assert layer.embedding_weight is model.get_input_embeddings().weight  # the tie holds
    assert torch.equal(layer.bias[:VOCAB], bias) and torch.allclose(layer.bias[VOCAB:], bias.mean().expand(8))
    assert all(torch.equal(layer.label_encoder.state_dict()[k], v) for k, v in encoder.items())
    x = tokens(2, 6, vocab=VOCAB + 8)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    model.train()
    model(input_ids=x, labels=x).loss.backward()
    opt.step()
    model.eval()
    with torch.no_grad():
        logits = model(input_ids=x).logits
    assert logits.shape[-1] == VOCAB + 8
    model.save_pretrained(tmp_path / "m")
    again = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "m").eval()
    with torch.no_grad():
        assert torch.equal(again(input_ids=x).logits, logits)
    full = hf.with_output_layer(causal_lm(), "full")
    rows = full.lm_head.layer.weight.detach().clone()
    full.resize_token_embeddings(VOCAB + 3, mean_resizing=True)
    assert torch.allclose(full.lm_head.layer.weight[VOCAB:], rows.mean(0).expand(3, -1))


@pytest.mark.parametrize(
    "edit, said",
    [
        ({"tiedlm_output": {"name": "drill", "depth": 1_000_000}}, "depth"),
        ({"tiedlm_base": "gpt2"}, "tiedlm_base = 'gpt2'"),
        ({"tiedlm_base": 7}, "tiedlm_base must be a transformers model type"),
        ({"tiedlm_base": "tiedlm"}, "tiedlm_base must be a transformers model type"),
        ({"tiedlm_output": "drill"}, "tiedlm_output must be an output layer's table"),
        ({"tiedlm_output": {"name": 3}}, "tiedlm_output must be an output layer's table"),
        ({"tiedlm_output": {"name": "drill", "deepness": 2}}, "unknown key"),
    ],
)
def test_a_hostile_or_broken_config_json_is_one_line_before_anything_is_built(edit, said, tmp_path, monkeypatch):
    model = hf.with_output_layer(causal_lm(), "drill", depth=2)
    model.save_pretrained(tmp_path / "m")
    path = tmp_path / "m" / "config.json"
    config = json.loads(path.read_text())
    config.update(edit)
    path.write_text(json.dumps(config))
    built = []
    monkeypatch.setattr(transformers.LlamaModel, "__init__", lambda *a, **k: built.append(1) or None)
    with pytest.raises(UsageError, match=said) as err:
        transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "m")
    assert "\n" not in str(err.value) and not built


def test_a_gpt2_folder_relabelled_llama_is_refused_not_built_at_llamas_default_size(tmp_path):
    hf.with_output_layer(causal_lm("gpt2"), "tied").save_pretrained(tmp_path / "m")
    path = tmp_path / "m" / "config.json"
    config = json.loads(path.read_text())
    config["architectures"] = ["TiedLMLlamaForCausalLM"]  # even with a matching class name, the keys are GPT-2's
    config["tiedlm_base"] = "llama"
    path.write_text(json.dumps(config))
    with pytest.raises(UsageError, match="has no 'hidden_size', which a llama config holds"):
        transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "m")


@pytest.mark.parametrize("arch", list(TINY_HF))
@pytest.mark.parametrize("on_disk", [["lm_head"], ["embedding"], ["lm_head", "embedding"]])
def test_the_head_and_the_embedding_offloaded_to_disk_give_the_same_logits(arch, on_disk, tmp_path):
    pytest.importorskip("accelerate")
    model = hf.with_output_layer(causal_lm(arch), "drill", depth=2).eval()
    model.save_pretrained(tmp_path / "m")
    x = tokens(1, 6)
    with torch.no_grad():
        want = model(input_ids=x).logits
    body = getattr(model, model.base_model_prefix)
    embedding = next(n for n, m in body.named_children() if m is model.get_input_embeddings())
    where = {f"{model.base_model_prefix}.{n}": "cpu" for n, _ in body.named_children()} | {"lm_head": "cpu"}
    for part in on_disk:
        where["lm_head" if part == "lm_head" else f"{model.base_model_prefix}.{embedding}"] = "disk"
    loaded = transformers.AutoModelForCausalLM.from_pretrained(
        tmp_path / "m", device_map=where, offload_folder=str(tmp_path / "offload")
    ).eval()
    with torch.no_grad():
        assert torch.allclose(loaded(input_ids=x).logits, want, atol=1e-6)
        assert torch.equal(
            loaded.generate(x, max_new_tokens=4, do_sample=False), model.generate(x, max_new_tokens=4, do_sample=False)
        )


# ------------------------------------------------------------------ HF bodies as tiedlm encoders
def _hf_run(tmp_path, config, *extra):
    from tiedlm.cli import main

    corpus = write_tiny_corpus(tmp_path / "corpus")
    tiny = [o for o in tiny_overrides(corpus, **{"train.epochs": "1"}) if not o.startswith("model.encoder.hidden_size")]
    sets = [*tiny, "model.encoder=hf", f"model.encoder.config={config}", "model.encoder.memory=4", *extra]
    args = ["train", "ptb-transformer-drill", "--out", str(tmp_path / "run"), "--no-progress"]
    return main([*args, *(a for s in sets for a in ("--set", s))])


def test_an_hf_encoder_run_keeps_its_config_moves_and_evaluates_as_it_trained(tmp_path, capsys, monkeypatch):
    from tiedlm.cli import main

    config = write_tiny_hf_config(tmp_path / "hf")
    assert _hf_run(tmp_path, config) == 0
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    edited = json.loads(config.read_text())
    edited["num_hidden_layers"] = 1  # edited after training, then moved away: the run does not read it again
    config.write_text(json.dumps(edited))
    moved = tmp_path / "elsewhere" / "run"
    moved.parent.mkdir()
    (tmp_path / "run").rename(moved)
    config.rename(tmp_path / "gone.json")
    monkeypatch.chdir(moved.parent)
    capsys.readouterr()
    assert main(["evaluate", str(moved), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["ppl"] == pytest.approx(summary["test_ppl"], rel=1e-12)


def test_a_folder_saved_by_tiedlm_hf_is_an_encoder_config_of_its_base_architecture(tmp_path):
    small = transformers.AutoConfig.for_model(**TINY_HF["llama"], vocab_size=VOCAB)
    hf.with_output_layer(transformers.AutoModelForCausalLM.from_config(small), "drill").save_pretrained(tmp_path / "m")
    reused = hf.with_output_layer(causal_lm(), "tied").config  # a config object saved from a tiedlm model
    reused.save_pretrained(tmp_path / "c")
    for source in (tmp_path / "m", tmp_path / "c" / "config.json"):
        assert _hf_run(tmp_path / source.name, source) == 0


@pytest.mark.parametrize(
    "config, said",
    [
        (
            {
                "model_type": "bert",
                "hidden_size": 16,
                "num_hidden_layers": 1,
                "num_attention_heads": 2,
                "intermediate_size": 32,
            },
            "not causal",
        ),
        (
            {"model_type": "t5", "d_model": 16, "d_ff": 32, "num_layers": 1, "num_heads": 2, "d_kv": 8},
            "encoder-decoder",
        ),
        ({**TINY_HF["llama"], "hidden_size": 15}, "transformers refuses it"),
        ({"model_type": "nosuchmodel", "hidden_size": 16}, "knows no model type 'nosuchmodel'"),
    ],
)
def test_a_body_that_is_not_a_causal_decoder_is_refused_in_one_line(config, said, tmp_path, capsys):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    capsys.readouterr()
    assert _hf_run(tmp_path, path) == 2
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert len(lines) == 1 and said in lines[0] and "Traceback" not in err, err
    assert not (tmp_path / "run" / "metrics.jsonl").exists()
    if said != "not causal":  # refused before the banner; the causal test needs the built body
        assert "tiedlm 0.1.0 |" not in out


def test_a_causal_body_s_logits_at_t_do_not_depend_on_later_inputs(tmp_path):
    from tiedlm.models import LanguageModel
    from tiedlm.tasks.lm.config import Config

    config = write_tiny_hf_config(tmp_path / "hf")
    sets = ["model.encoder=hf", f"model.encoder.config={config}", "model.encoder.memory=4", "train.bptt=8"]
    cfg = Config.load("ptb-transformer-drill").with_overrides(sets)
    torch.manual_seed(0)
    model = LanguageModel(cfg.model, 30).eval()
    x = torch.randint(0, 30, (7, 2), generator=torch.Generator().manual_seed(1))
    later = x.clone()
    later[-1] = (later[-1] + 1) % 30
    with torch.no_grad():
        a, _ = model(x, model.init_state(2))
        b, _ = model(later, model.init_state(2))
    assert torch.equal(a[:-1], b[:-1]) and not torch.equal(a[-1], b[-1])


# ------------------------------------------------------------------ PEFT
peft = pytest.importorskip("peft")


def _one_step(model, x):
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=1.0)
    model.train()
    model(input_ids=x, labels=x).loss.backward()
    opt.step()
    model.eval()


def test_lora_on_the_label_encoder_and_disable_adapter_give_fresh_logits():
    base = hf.with_output_layer(causal_lm(), "drill", depth=2).eval()
    x = tokens(1, 6)
    with torch.no_grad():
        before = base(input_ids=x).logits.clone()
    config = peft.LoraConfig(
        r=2, target_modules=["label_encoder.layers.0", "label_encoder.layers.1"], init_lora_weights=False
    )
    model = peft.get_peft_model(base, config).eval()
    with torch.no_grad():
        on = model(input_ids=x).logits
        model.generate(input_ids=x, max_new_tokens=3, do_sample=False)
        with model.disable_adapter():
            off = model(input_ids=x).logits
            model.generate(input_ids=x, max_new_tokens=3, do_sample=False)
            off_again = model(input_ids=x).logits
    assert not torch.allclose(on, before) and torch.allclose(off, before) and torch.equal(off, off_again)


@pytest.mark.parametrize("saved", [["lm_head"], ["embed_tokens", "lm_head"]])
@pytest.mark.parametrize("ensure", [False, True])
def test_peft_modules_to_save_train_a_head_that_scores_against_the_trained_embedding(saved, ensure):
    base = hf.with_output_layer(causal_lm(), "drill", depth=2)
    options = {"ensure_weight_tying": True} if ensure else {}
    config = peft.LoraConfig(r=2, target_modules=["q_proj"], modules_to_save=saved, **options)
    model = peft.get_peft_model(base, config)
    x = tokens(2, 6)
    _one_step(model, x)
    inner = model.base_model.model
    live = inner.get_input_embeddings().weight  # the embedding the model reads now (a trained copy, or the base's)
    with torch.no_grad():
        assert torch.allclose(model(input_ids=x).logits, _peft_scored(model, x, live), atol=1e-5)


def _peft_scored(model, x, weight):
    inner = model.base_model.model
    head = inner.get_output_embeddings()
    layer = getattr(head, "modules_to_save", None)
    layer = (layer[model.active_adapter] if layer is not None else head).layer
    h = inner.base_model(input_ids=x).last_hidden_state
    e = weight
    for lin in layer.label_encoder.layers:
        e = torch.sigmoid(lin(e)) + weight
    return h @ e.T + layer.bias
