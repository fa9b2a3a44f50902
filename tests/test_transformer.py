"""Transformer LM encoder and the translation stack: masking, decoding, save/load/translate round trips."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys

import pytest
import torch

from tiedlm.errors import UsageError
from tiedlm.models import ENCODERS, OUTPUTS, LanguageModel
from tiedlm.models.encoders.transformer import Attention, CausalTransformer
from tiedlm.tasks.lm.config import Config
from tiedlm.tasks.translation import TransformerTranslator, TranslationConfig, beam_search, greedy_search
from tiedlm.tasks.translation.config import translator_output
from tiedlm.tasks.translation.data import BOS, EOS, PAD

from conftest import flat_config, write_tiny_parallel


def lm_config(output: str = "tied", **model) -> Config:
    cfg = Config()
    cfg.model.encoder = ENCODERS.config(
        {"name": "transformer", "hidden_size": 32, "layers": 2, "heads": 2, "dropout": 0.0}
    )
    cfg.model.output, cfg.model.embedding_size = OUTPUTS.config(output), 16
    cfg.validate()
    return cfg.with_overrides([f"model.encoder.{k}={v}" for k, v in model.items()])


@pytest.mark.parametrize("output", ["full", "tied", "bilinear", "dual", "drill"])
def test_transformer_lm_no_attention_to_the_future(output):
    torch.manual_seed(0)
    model = LanguageModel(lm_config(output).model, 50).eval()
    x = torch.randint(0, 50, (9, 3))
    y = x.clone()
    y[5:] = torch.randint(0, 50, (4, 3))  # change only the future of position 4
    a, _ = model(x, model.init_state(3))
    b, _ = model(y, model.init_state(3))
    assert torch.allclose(a[:5], b[:5], atol=1e-6)
    assert not torch.allclose(a[5:], b[5:], atol=1e-3)


def test_transformer_memory_equals_reading_the_whole_stream():
    """Windows fed one after the other with memory M give what one pass over the stream gives to tokens
    that see at most M earlier tokens."""
    torch.manual_seed(0)
    enc = CausalTransformer(8, 16, 2, 2, dropout=0.0, memory=4).eval()
    x = torch.randn(8, 2, 8)
    first, state = enc(x[:4], enc.init_state(2, x))
    second, _ = enc(x[4:], state)  # sees x[0:4] as memory: positions 0..7, like one pass
    whole, _ = CausalTransformer.forward(enc, x, enc.init_state(2, x))
    assert torch.allclose(torch.cat([first, second]), whole, atol=1e-5)


def test_transformer_config_errors():
    with pytest.raises(UsageError, match="model.encoder.heads = 3 is not allowed; expected a divisor of model.emb"):
        lm_config(heads=3)
    with pytest.raises(UsageError, match="encoder 'transformer' has no key 'weight_drop'"):
        lm_config(weight_drop=0.5)
    with pytest.raises(UsageError, match="model.encoder.max_positions = 10 is not allowed"):
        lm_config(positions="learned", max_positions=10)


def test_attention_key_padding_mask_hides_padded_keys():
    torch.manual_seed(0)
    attn = Attention(8, 2).eval()
    x = torch.randn(2, 5, 8)
    mask = torch.tensor([[True] * 3 + [False] * 2, [True] * 5])[:, None, None, :]
    y = x.clone()
    y[0, 3:] = torch.randn(2, 8)  # change the padded keys of sentence 0
    assert torch.allclose(attn(x, mask=mask)[0, :3], attn(y, mask=mask)[0, :3], atol=1e-6)


def tiny_translator(output="tied", vocab=7, **kw) -> TransformerTranslator:
    cfg = flat_config(
        TranslationConfig,
        dict(
            d_model=16,
            ffn_size=32,
            heads=2,
            encoder_layers=2,
            decoder_layers=2,
            dropout=0.0,
            output=translator_output(output, dropout=0.0),
            **kw,
        ),
    )
    torch.manual_seed(3)
    model = TransformerTranslator(cfg, vocab, vocab).eval()
    with torch.no_grad():  # sharpen the random model so that search choices matter
        for p in model.parameters():
            p.mul_(3.0)
    return model


def sequence_score(model, source: torch.Tensor, hyp: list[int]) -> float:
    """log P(hyp </s> | source) by teacher forcing (no cache)."""
    tin = torch.tensor([[BOS] + hyp])
    tout = torch.tensor([hyp + [EOS]])
    with torch.no_grad():
        logits, _ = model.output(model(source, tin))
    return float(torch.log_softmax(logits.float(), -1).gather(-1, tout.unsqueeze(-1)).sum())


@pytest.mark.parametrize("output", ["tied", "drill"])
def test_decoder_is_causal_and_ignores_source_padding(output):
    model = tiny_translator(output)
    src = torch.tensor([[4, 5, 6, EOS, PAD, PAD]])
    src2 = src.clone()
    src2[0, 4:] = torch.tensor([5, 5])  # non-PAD garbage is not ignored, so compare with a re-padded copy
    tin = torch.tensor([[BOS, 4, 5, 6, 4]])
    tin2 = tin.clone()
    tin2[0, 3:] = torch.tensor([5, 6])
    a = model(src, tin)
    assert torch.allclose(a[:, :3], model(src, tin2)[:, :3], atol=1e-6)  # the future does not leak back
    unpadded = model(src[:, :4], tin)
    assert torch.allclose(a, unpadded, atol=1e-5)  # padding changes nothing
    assert not torch.allclose(a, model(src2, tin), atol=1e-3)


def test_incremental_decoding_matches_teacher_forcing():
    model = tiny_translator()
    src = torch.tensor([[4, 5, 6, EOS]])
    tin = torch.tensor([[BOS, 4, 6, 5, 5]])
    memory, mask = model.encode(src)
    full = model.decode(tin, memory, mask)
    cache: dict = {}
    steps = [model.decode(tin[:, t : t + 1], memory, mask, cache=cache, offset=t) for t in range(tin.size(1))]
    assert torch.allclose(torch.cat(steps, 1), full, atol=1e-5)


def test_beam_search_scores_are_the_models_and_beat_greedy():
    model = tiny_translator()
    src = torch.tensor([[4, 5, 6, EOS], [6, 6, EOS, PAD]])
    greedy = greedy_search(model, src, max_ratio=1.0)
    for alpha in (0.0, 1.0):
        for beam in (1, 3):
            hyps, scores = beam_search(model, src, beam=beam, length_penalty=alpha, max_ratio=1.0, return_scores=True)
            for i, (hyp, score) in enumerate(zip(hyps, scores)):
                logp = sequence_score(model, src[i : i + 1], hyp)
                assert score == pytest.approx(logp / (len(hyp) + 1) ** alpha, abs=1e-4)  # cache reordering is right
                g = sequence_score(model, src[i : i + 1], greedy[i]) / (len(greedy[i]) + 1) ** alpha
                assert score >= g - 1e-5  # search never does worse than greedy


def test_search_encodes_drills_label_table_once_and_scores_as_teacher_forcing():
    """Greedy and beam search run DRILL's label encoder once per search (OutputLayer.labels_reused), not once a
    step, and the beam's scores are still the teacher-forced log-probabilities of its hypotheses."""
    model = tiny_translator("drill")
    calls, steps, encode = [], [], model.output.encode_labels
    model.output.encode_labels = lambda: calls.append(1) or encode()
    model.output.register_forward_hook(lambda *a: steps.append(1))
    src = torch.tensor([[4, 5, 6, EOS], [6, 6, EOS, PAD]])
    greedy_search(model, src, max_ratio=1.0)
    hyps, scores = beam_search(model, src, beam=3, max_ratio=1.0, return_scores=True)
    assert len(calls) == 2 and len(steps) > 4  # one table per search, searches of several steps
    for i, (hyp, score) in enumerate(zip(hyps, scores)):
        assert score == pytest.approx(sequence_score(model, src[i : i + 1], hyp) / (len(hyp) + 1), abs=1e-4)


def test_wide_beam_finds_the_exhaustive_optimum():
    """With a beam as wide as the set of prefixes, beam search returns the brute-force best sequence."""
    model = tiny_translator(vocab=6)  # ids 0-3 pad/unk/bos/eos, 4-5 words; search may emit any id but </s>
    src = torch.tensor([[4, 5, EOS]])
    emit = [0, 1, 2, 4, 5]
    for alpha in (0.0, 1.0):
        hyps, scores = beam_search(
            model, src, beam=len(emit) ** 3, length_penalty=alpha, max_length=4, return_scores=True
        )  # hypotheses of at most 3 tokens + </s>
        brute = max(
            (sequence_score(model, src, list(seq)) / (n + 1) ** alpha, list(seq))
            for n in range(4)
            for seq in itertools.product(emit, repeat=n)
        )
        assert hyps[0] == brute[1]
        assert scores[0] == pytest.approx(brute[0], abs=1e-4)


def test_translation_config_errors():
    with pytest.raises(UsageError, match="share_embeddings"):
        flat_config(TranslationConfig, dict(vocab="separate"))
    with pytest.raises(UsageError, match="heads"):
        flat_config(TranslationConfig, dict(d_model=10, heads=4))
    with pytest.raises(UsageError, match="--set"):
        TranslationConfig().with_overrides(["no_such_key=1"])
    with pytest.raises(UsageError, match="device"):
        flat_config(TranslationConfig, dict(device="gpu"))
    assert TranslationConfig().with_overrides(["train.device=cpu"]).train.device == "cpu"


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message of a machine without a GPU")
def test_translator_honours_train_device(tmp_path, capsys):
    """train.device = cuda on a machine without a GPU is one line, exit 2, before anything is written (the
    translator used to pick the device by itself, ignoring the setting)."""
    from tiedlm.cli import main

    folder = write_tiny_parallel(tmp_path)
    out = tmp_path / "run"
    code = main(
        [
            "translate",
            "train",
            "--out",
            str(out),
            "--data-dir",
            str(folder),
            "--set",
            "train.device=cuda",
            "--set",
            "data.source_lang=xx",
            "--set",
            "data.target_lang=yy",
            "--set",
            "data.vocab_size=40",
        ]
    )
    assert code == 2 and not (out / "config.toml").exists()
    assert "no CUDA GPU is visible" in capsys.readouterr().err


@pytest.mark.slow
def test_train_save_load_translate_round_trip(tmp_path):
    """A tiny word-for-word task: train, resume from an interrupted epoch, evaluate, translate via the CLI."""
    from tiedlm.tasks.translation import TranslationTask, evaluate_translator, load_translator, translate_lines
    from tiedlm.train import run as train

    folder = write_tiny_parallel(tmp_path)
    cfg = flat_config(
        TranslationConfig,
        dict(
            source_lang="xx",
            target_lang="yy",
            data_dir=str(folder),
            vocab_size=40,
            d_model=32,
            ffn_size=64,
            heads=2,
            encoder_layers=1,
            decoder_layers=1,
            dropout=0.0,
            output=translator_output("drill", depth=1, dropout=0.0),
            epochs=10,
            batch_tokens=128,
            lr=5e-3,
            label_smoothing=0.0,
            warmup_steps=20,
            beam=3,
            threads=1,
            precision="fp32",
        ),
    )
    run = tmp_path / "run"
    m = train(TranslationTask(cfg), run, progress=False, log=lambda *a: None)
    assert m["test_bleu"] > 15  # learnt much of the word mapping (an untrained model scores ~0)
    history = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert len(history) == 10 and history[-1]["valid_ppl"] < history[0]["valid_ppl"]
    model, loaded_cfg, sv, tv = load_translator(run)
    assert loaded_cfg == cfg
    out = translate_lines(model, loaded_cfg, sv, tv, ["a man runs", "the red cat"], beam=3)
    ev = evaluate_translator(run, "test")
    assert ev["bleu"] == pytest.approx(m["test_bleu"], abs=1e-6)  # the saved best model is the evaluated one
    cli = subprocess.run(
        [sys.executable, "-m", "tiedlm", "translate", "translate", str(run), "--beam", "3"],
        input="a man runs\nthe red cat\n",
        capture_output=True,
        text=True,
        check=True,
    )
    assert cli.stdout.splitlines() == out
    bad = subprocess.run(
        [sys.executable, "-m", "tiedlm", "translate", "translate", str(tmp_path)],
        input="x\n",
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2 and "not a translator run directory" in bad.stderr and "Traceback" not in bad.stderr


def test_augmented_loss_reaches_transformer_lm_and_translator():
    """The AL term is added for both Transformer models and its gradient reaches the shared embedding."""
    from tiedlm.losses import AugmentedLoss, LanguageModelLoss
    from tiedlm.tasks.translation.task import translation_loss

    torch.manual_seed(0)
    lm = LanguageModel(lm_config("drill").model, 30)
    x, y = torch.randint(0, 30, (6, 2)), torch.randint(0, 30, (6, 2))
    logits, _ = lm(x, lm.init_state(2))
    total, ce, aug = LanguageModelLoss(augmented=True, tau=2.0, gamma=0.5)(logits, y, lm.input_embeddings)
    assert total.item() == pytest.approx(float(ce) + 0.5 * 2.0 * float(aug), rel=1e-5) and float(aug) > 0
    model = tiny_translator("tied", augmented=True, tau=2.0, gamma=0.5, label_smoothing=0.0)
    src, tin, tout = torch.tensor([[4, 5, EOS]]), torch.tensor([[BOS, 4, 6]]), torch.tensor([[4, 6, EOS]])
    plain, nll, n = translation_loss(model, model.cfg, src, tin, tout)
    with_aug, _, _ = translation_loss(model, model.cfg, src, tin, tout, AugmentedLoss(2.0))
    assert plain.item() == pytest.approx(float(nll) / n, rel=1e-5) and with_aug.item() > plain.item()
    with_aug.backward()
    assert model.target_embedding.weight.grad.abs().sum() > 0


def test_own_en_de_data_and_vocab_size_messages(tmp_path):
    """Your own en-de folder: --data (own_data) reads it as it is; without it, the Multi30k checksum error says
    to use --data. A vocab_size below the text's characters says to raise it, not to lower it."""
    from tiedlm.errors import DataError
    from tiedlm.tasks.translation.data import SubwordVocab, resolve_parallel_dir

    folder = write_tiny_parallel(tmp_path)
    for split in ("train", "valid", "test"):
        (folder / f"{split}.xx").rename(folder / f"{split}.en")
        (folder / f"{split}.yy").rename(folder / f"{split}.de")
    assert resolve_parallel_dir(str(folder), "en", "de", own_data=True) == folder
    with pytest.raises(DataError, match=f"use --data {folder}"):
        resolve_parallel_dir(str(folder), "en", "de")
    lines = (folder / "train.en").read_text().splitlines()
    with pytest.raises(UsageError, match="raise --set vocab_size"):
        SubwordVocab.train(lines, tmp_path / "spm", 16, "bpe")
    with pytest.raises(UsageError, match="lower --set vocab_size"):
        SubwordVocab.train(lines, tmp_path / "spm", 5000, "bpe")


def test_the_translator_takes_any_key_of_its_output_layer_as_the_lm_does(tmp_path):
    """`translate train --set model.output=dual --set model.output.residual=true` (DRILL's Table 4 dual setting):
    the translator's [model.output] is the language model's table: any key of the chosen layer, typed and checked by
    it, saved in config.toml and reaching the built layer."""
    import torch

    from tiedlm.tasks.translation import TransformerTranslator

    cfg = flat_config(
        TranslationConfig, dict(d_model=16, ffn_size=32, heads=2, encoder_layers=1, decoder_layers=1)
    ).with_overrides(["model.output=dual", "model.output.residual=true", "model.output.dropout=0.6"])
    layer = cfg.model.output
    assert layer.name == "dual" and layer.residual is True and layer.dropout == 0.6
    cfg.save(tmp_path)
    assert TranslationConfig.load_run(tmp_path) == cfg
    model = TransformerTranslator(cfg, 30, 30)
    states = model(torch.randint(3, 30, (2, 5)), torch.randint(3, 30, (2, 4)))  # teacher forcing: (B, T, d)
    logits, _ = model.output(states)
    assert model.output.residual and logits.shape == (2, 4, 30) and torch.isfinite(logits).all()
    with pytest.raises(UsageError, match="output layer 'drill' has no key 'residual'"):
        TranslationConfig().with_overrides(["model.output=drill", "model.output.residual=true"])
    with pytest.raises(UsageError, match="expected true or false"):
        TranslationConfig().with_overrides(["model.output=dual", "model.output.residual=maybe"])
