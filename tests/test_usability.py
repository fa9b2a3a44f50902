"""What a new user runs into: each bad input is one line that names the fix (exit 2 for usage errors), and
nothing a user has is lost or silently changed. One test per defect found by trying tiedlm as a newcomer."""

import re

import pytest

from tiedlm.cli import main
from tiedlm.data import load_corpus
from tiedlm.data.corpus import read_tokens
from tiedlm.errors import DataError

from conftest import tiny_overrides


def _sets(corpus, **extra) -> list[str]:
    out = []
    for item in tiny_overrides(corpus, **{"train.epochs": "1", **extra}):
        out += ["--set", item]
    return out


@pytest.fixture
def run(tiny_corpus, tmp_path, capsys):
    """A finished one-epoch run on the tiny corpus."""
    out = tmp_path / "run"
    assert main(["train", "ptb-small-vd", "--out", str(out), "--no-progress", *_sets(tiny_corpus)]) == 0
    capsys.readouterr()
    return out


def _one_line_error(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


def test_a_damaged_vocab_is_named_not_a_size_mismatch(run, capsys):
    vocab = run / "vocab.txt"
    vocab.write_text("\n".join(vocab.read_text().splitlines()[:-3]) + "\n")  # three words lost
    assert main(["evaluate", str(run)]) == 1
    err = _one_line_error(capsys)
    assert "vocab.txt has" in err and "restore the run's own vocab.txt" in err and "size mismatch" not in err


def test_a_byte_order_mark_is_not_part_of_the_first_word(tmp_path):
    path = tmp_path / "t.txt"
    path.write_bytes("\ufeffthe cat\nsat\n".encode())
    assert read_tokens(path) == ["the", "cat", "<eos>", "sat", "<eos>"]


def test_a_literal_eos_in_the_text_is_refused_with_its_line(tmp_path):
    path = tmp_path / "t.txt"
    path.write_text("the cat\nsat <eos> down\n")
    with pytest.raises(DataError, match=r"t.txt, line 2: the text holds the token <eos>"):
        read_tokens(path)
    path.write_text("a<eos>b is one word\n")  # only the token itself is tiedlm's
    assert read_tokens(path)[0] == "a<eos>b"


def test_resume_refuses_another_corpus_and_a_finished_run_says_what_it_trained(run, tiny_corpus, tmp_path, capsys):
    assert main(["train", "--resume", str(run), "--data", "ptb"]) == 2
    assert "trains on its own corpus" in _one_line_error(capsys)
    assert main(["train", "--resume", str(run), "--set", "train.epochs=1"]) == 2
    err = _one_line_error(capsys)
    assert "is finished: it trained 1 epochs" in err and "N > 1" in err
    # a lower count than it trained: not "finished all 0 epochs ... N > 0"
    two = tmp_path / "two"
    assert (
        main(
            ["train", "ptb-small-vd", "--out", str(two), "--no-progress", *_sets(tiny_corpus, **{"train.epochs": "2"})]
        )
        == 0
    )
    capsys.readouterr()
    assert main(["train", "--resume", str(two), "--set", "train.epochs=1"]) == 2
    err = _one_line_error(capsys)
    assert "it trained 2 epochs (train.epochs = 1 asks for no more)" in err and "N > 2" in err


def test_a_custom_corpus_always_has_unk(tmp_path):
    folder = tmp_path / "mine"
    folder.mkdir()
    for split in ("train", "valid", "test"):
        (folder / f"{split}.txt").write_text("the cat sat\nthe dog sat\n")  # no unseen word anywhere
    corpus = load_corpus(str(folder))
    assert "<unk>" in corpus.vocab and corpus.vocab.encode(["zebra"])[0] == [corpus.vocab.unk_id]


def test_predict_prints_at_most_the_vocabulary_and_both_take_checkpoint(run, capsys):
    assert main(["predict", str(run), "w1 w2", "--top", "1000", "--checkpoint", "last"]) == 0
    rows = [ln for ln in capsys.readouterr().out.splitlines() if ln.strip()[:1].isdigit()]
    vocab_size = len((run / "vocab.txt").read_text().splitlines())
    assert len(rows) == vocab_size and all(ln.split(". ", 1)[1].strip() for ln in rows)  # no empty rows
    assert main(["generate", str(run), "--checkpoint", "last", "--words", "200", "--temperature", "1e9"]) == 0
    text = capsys.readouterr().out.rstrip("\n")
    lines = text.split("\n")
    assert len(lines) > 1 and all(ln == ln.strip(" ") for ln in lines)  # no stray space at a line's start or end


def test_info_and_evaluate_say_what_is_wrong_with_a_folder(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert main(["info", str(tmp_path / "empty")]) == 2
    assert "is a folder but not a tiedlm run directory" in _one_line_error(capsys)
    assert main(["evaluate", str(tmp_path / "nothing")]) == 2
    assert "does not exist" in _one_line_error(capsys)


def test_version_info_set_and_tables_without_a_name(tmp_path, capsys):
    with pytest.raises(SystemExit) as stop:
        main(["--version"])
    assert stop.value.code == 0 and capsys.readouterr().out.startswith("tiedlm ")
    assert main(["info", "ptb-small-re", "--set", "model.output=drill"]) == 0
    assert "output drill" in capsys.readouterr().out
    config = tmp_path / "c.toml"
    config.write_text('[data]\nname = "ptb"\n[model.encoder]\nhidden_size = 300\n')  # the default encoder
    assert main(["info", str(config)]) == 0
    assert "2x300 VD-LSTM" in capsys.readouterr().out
    assert main(["train", "ptb-small-vd", "--set", "train.epochs=two"]) == 2
    assert "expected an integer" in _one_line_error(capsys)


def test_list_gives_each_summary_whole(capsys):
    assert main(["list"]) == 0
    dual = next(ln for ln in capsys.readouterr().out.splitlines() if ln.strip().startswith("dual "))
    assert dual.rstrip().endswith("(its footnote 6).")


@pytest.mark.parametrize("task", ["tag", "translate"])
def test_tag_and_translate_train_refuse_a_folder_of_committed_results(tmp_path, capsys, task):
    """As `tiedlm train` does: a folder holding files tracked by git is never trained into."""
    import subprocess

    folder = tmp_path / "results" / "run"
    folder.mkdir(parents=True)
    (folder / "summary.json").write_text("{}\n")
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    subprocess.run(["git", "-C", str(tmp_path), "add", "results"], check=True)
    assert main([task, "train", "--out", str(folder)]) == 2
    assert "holds committed results" in _one_line_error(capsys)
    assert sorted(p.name for p in folder.iterdir()) == ["summary.json"]


def test_every_task_takes_the_non_finite_limit_as_a_setting():
    """train.max_nonfinite was the LM's only; the tagger, the translator and the subspace experiment had a
    literal 10."""
    from tiedlm.errors import UsageError
    from tiedlm.tasks.subspace.config import SubspaceExperimentConfig
    from tiedlm.tasks.tagging import TaggerConfig
    from tiedlm.tasks.translation import TranslationConfig

    for config in (TaggerConfig, TranslationConfig):
        assert config().with_overrides(["train.max_nonfinite=3"]).train.max_nonfinite == 3
        with pytest.raises(UsageError, match="max_nonfinite"):
            config.from_dict({"train": {"max_nonfinite": 0}})
    assert SubspaceExperimentConfig().train.max_nonfinite == 10


def test_a_resumed_run_accepts_the_settings_marked_resumable_and_names_them(run, capsys):
    """The keys `--resume` accepts are the fields marked resumable (config.py, optimizers.py); any other is one
    line that lists them, and the run folder is left as it was."""
    before = (run / "config.toml").read_text()
    assert main(["train", "--resume", str(run), "--set", "train.bptt=10"]) == 2
    err = _one_line_error(capsys).strip()
    assert err.endswith(
        "--set train.bptt=10: a resumed run only accepts train.epochs, train.lr, train.clip, train.threads, "
        "train.max_nonfinite, train.cuda_graph, train.lstm_pad_units, train.lstm_pad_batch, "
        "train.optimizer.finetune_epochs, train.optimizer.stop_on_stall"
    ), err
    assert (run / "config.toml").read_text() == before
    assert (
        main(["train", "--resume", str(run), "--set", "train.lr=0.5", "--set", "train.epochs=2", "--no-progress"]) == 0
    )
    assert "lr = 0.5" in (run / "config.toml").read_text()


@pytest.mark.parametrize("command", [["train", "ptb-small-vd"], ["tag", "train"], ["translate", "train"]])
@pytest.mark.parametrize("option", ["--out", "--data"])
def test_an_empty_out_or_data_is_refused_not_read_as_the_default(command, option, tmp_path, capsys, monkeypatch):
    """`--data ''` trained on the preset's corpus and `--out ''` wrote to runs/PRESET, silently."""
    monkeypatch.chdir(tmp_path)
    other = ["--data", str(tmp_path / "nowhere")] if option == "--out" else ["--out", str(tmp_path / "run")]
    assert main([*command, option, "", *other]) == 2
    assert f"{option} is empty" in _one_line_error(capsys)
    assert not (tmp_path / "runs").exists() and not (tmp_path / "run").exists()


def test_resume_in_one_folder_refuses_another_out(run, tmp_path, capsys):
    """`train --resume RUN --out OTHER` ignored --out."""
    assert main(["train", "--resume", str(run), "--out", str(tmp_path / "other")]) == 2
    assert "name two folders" in _one_line_error(capsys)


def test_predict_refuses_a_third_run_rather_than_reading_it_as_words(run, capsys):
    assert main(["predict", str(run), str(run), str(run), "the company said"]) == 2
    assert "third run directory" in _one_line_error(capsys)


def test_a_metrics_line_cut_off_by_a_kill_is_left_out_and_a_damaged_one_is_named(run, capsys):
    """One damaged line in metrics.jsonl (a SIGKILL mid-write) blocked `report` and `train --resume` with a
    JSONDecodeError that named no file."""
    metrics = run / "metrics.jsonl"
    good = metrics.read_text()
    metrics.write_text(good + '{"epoch": 2, "valid_pp')  # the last line, cut off while written
    assert main(["report", str(run), "--out", str(run.parent / "report")]) == 0
    assert "its last line was cut off while written; left out" in capsys.readouterr().err
    metrics.write_text('{"epoch": 0, "val\n' + good)  # a damaged line before the last
    assert main(["report", str(run), "--out", str(run.parent / "report")]) == 1
    err = _one_line_error(capsys)
    assert f"{metrics}, line 1: not a metrics record" in err and "JSONDecodeError" not in err


@pytest.mark.parametrize("case", ["blank test", "too many streams"])
def test_evaluate_refuses_a_split_it_cannot_score_rather_than_printing_a_perplexity(run, tmp_path, capsys, case):
    """A blank test.txt evaluated to "ppl 22.03 over 2 tokens"; --batch-size 100000 raised a traceback."""
    data = tmp_path / "other"
    data.mkdir()
    words = "w1 w2 w3 w4 w5\n" * 40
    for split in ("train", "valid"):
        (data / f"{split}.txt").write_text(words)
    (data / "test.txt").write_text("\n  \n" if case == "blank test" else words)
    extra = ["--batch-size", "100000"] if case == "too many streams" else []
    assert main(["evaluate", str(run), "--data", str(data), "--split", "test", *extra]) == 1
    err = _one_line_error(capsys)
    assert ("holds no words" in err) if case == "blank test" else ("lower --batch-size" in err), err


def test_cr_only_line_ends_keep_their_sentence_breaks(tmp_path):
    path = tmp_path / "t.txt"
    path.write_bytes(b"the cat\rsat down\r")
    assert read_tokens(path) == ["the", "cat", "<eos>", "sat", "down", "<eos>"]
    path.write_bytes(b"the cat\r\nsat\r\n")  # CRLF as before
    assert read_tokens(path) == ["the", "cat", "<eos>", "sat", "<eos>"]


def test_nul_bytes_and_utf16_are_named_not_read_as_words(tmp_path):
    path = tmp_path / "t.txt"
    path.write_bytes(b"the cat\nsat\x00down\n")
    with pytest.raises(DataError, match=r"t.txt, line 2: a NUL byte"):
        read_tokens(path)
    path.write_bytes("the cat\n".encode("utf-16"))
    with pytest.raises(DataError, match=r"is UTF-16 text; save it as UTF-8 \(e.g. iconv -f utf-16 -t utf-8\)"):
        read_tokens(path)


def test_a_checkpoint_of_another_model_is_named_not_a_size_mismatch_nor_blamed_on_vocab(run, tmp_path, capsys):
    """A checkpoint from another model size or output layer: `train --resume` raised PyTorch's size mismatch,
    `evaluate` its unexpected keys or blamed vocab.txt."""
    import shutil

    ours = run / "checkpoints"
    for name in ("best", "last"):
        (ours / f"{name}.safetensors").unlink()
    wide = tmp_path / "wide"
    sets = _sets(run.parent / "corpus", **{"model.embedding_size": "24", "model.encoder.hidden_size": "24"})
    assert main(["train", "ptb-small-vd", "--out", str(wide), "--no-progress", *sets]) == 0
    capsys.readouterr()
    for name in ("best", "last"):
        shutil.copy(wide / "checkpoints" / f"{name}.safetensors", ours / f"{name}.safetensors")
    assert main(["evaluate", str(run)]) == 1
    err = _one_line_error(capsys)
    assert "does not fit the model of its run's config.toml" in err and "vocab.txt" not in err, err
    assert main(["train", "--resume", str(run), "--set", "train.epochs=3"]) == 1
    assert "does not fit the model" in _one_line_error(capsys)


def test_misleading_messages_name_what_the_folder_holds(run, tmp_path, capsys):
    assert main(["tag", "train", "--out", str(run)]) == 2  # said it "holds a tagger run"
    assert "already holds a language model run; pick another --out" in _one_line_error(capsys)
    assert main(["translate", "evaluate", str(run)]) == 2  # said "unknown key data.name"
    err = _one_line_error(capsys)
    assert "is a language model run (`tiedlm train`), not a translator's: use `tiedlm evaluate" in err
    assert main(["train", str(run)]) == 2  # said the config file "does not exist"
    assert "is a run folder: resume it with `tiedlm train --resume" in _one_line_error(capsys)
    from tiedlm.tasks.subspace.config import SubspaceExperimentConfig

    experiment = tmp_path / "experiment"
    experiment.mkdir()
    (experiment / "config.toml").write_text(SubspaceExperimentConfig().to_toml())  # as the experiment saves it
    assert main(["report", str(experiment)]) == 2  # said "unknown section [runs]"
    assert "is a subspace experiment run" in _one_line_error(capsys)


def test_evaluate_on_a_missing_gpu_names_its_own_option(run, capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is here")
    assert main(["evaluate", str(run), "--device", "cuda"]) == 2
    err = _one_line_error(capsys)
    assert "use --device cpu" in err and "--set" not in err


@pytest.mark.parametrize(
    "present, said",
    [
        ("Train.txt", "(found Train.txt: rename it to train.txt)"),
        ("train.txt.gz", "(found train.txt.gz: decompress it)"),
        ("train.txt/", "(found a folder train.txt: the split must be a file)"),
    ],
)
def test_a_split_file_that_is_almost_there_is_named(tmp_path, present, said):
    folder = tmp_path / "mine"
    folder.mkdir()
    for split in ("valid", "test"):
        (folder / f"{split}.txt").write_text("a b\n")
    if present.endswith("/"):
        (folder / present).mkdir()
    else:
        (folder / present).write_text("a b\n")
    how = "is not a regular file" if present.endswith("/") else "is missing"  # there, but a folder: not "missing"
    with pytest.raises(DataError, match=f"train.txt {how} " + said.replace("(", r"\(").replace(")", r"\)")):
        load_corpus(str(folder))


def test_a_model_too_big_for_memory_is_refused_before_it_is_allocated(tiny_corpus, tmp_path, capsys):
    args = ["train", "ptb-small-vd", "--out", str(tmp_path / "big"), "--no-progress", *_sets(tiny_corpus)]
    assert main([*args, "--set", "model.encoder.hidden_size=200000"]) == 2  # 3.2e11 parameters: terabytes
    err = _one_line_error(capsys)
    assert "parameters: its weights, gradients and optimiser state need about" in err and "smaller model" in err
    assert main([*args, "--set", "model.encoder.hidden_size=1000000000"]) == 2  # beyond any tensor
    assert "larger than a tensor can hold; choose smaller model sizes" in _one_line_error(capsys)
    assert not (tmp_path / "big" / "checkpoints").exists()


def test_a_bptt_longer_than_the_streams_is_refused_not_trained_as_one_short_window(tiny_corpus, tmp_path, capsys):
    args = ["train", "ptb-small-vd", "--out", str(tmp_path / "long"), "--no-progress", *_sets(tiny_corpus)]
    assert main([*args, "--set", "train.bptt=100000"]) == 2
    assert "train.bptt = 100000 is longer than each of the 4 training streams" in _one_line_error(capsys)


def test_the_banner_names_the_run_folder_and_each_epoch_the_time_left(tiny_corpus, tmp_path, capsys):
    out = tmp_path / "run"
    sets = _sets(tiny_corpus, **{"train.epochs": "2"})
    assert main(["train", "ptb-small-vd", "--out", str(out), "--no-progress", "--threads", "64", *sets]) == 0
    text = capsys.readouterr().out
    assert f"| run {out} |" in text.splitlines()[1] or f"| run {out} |" in text
    assert "64 threads on" in text and "more threads than cores" in text
    epochs = [ln for ln in text.splitlines() if ln.startswith("epoch ")]
    assert epochs[0].endswith(" left") and not epochs[1].endswith(" left")  # the last epoch has nothing left
    assert re.search(r"\| ~\d+ s left$", epochs[0]), epochs[0]  # a tiny run's minute is no "~0 min"
    assert "[train]" not in text  # the config is in the run folder, not 57 lines before the banner
    assert main(["train", "--resume", str(out), "--set", "train.epochs=3", "--no-progress"]) == 0
    resumed = capsys.readouterr().out
    assert "resuming at epoch 3, window 0" in resumed and "resuming at the 64 threads it started with" in resumed


@pytest.mark.parametrize("command", [["train", "ptb-small-vd"], ["tag", "train"], ["translate", "train"]])
def test_train_commands_take_device_as_evaluate_does(command, tmp_path, capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is here")
    assert main([*command, "--out", str(tmp_path / "run"), "--device", "cuda"]) == 2
    assert "train.device = 'cuda' but no CUDA GPU is visible" in _one_line_error(capsys)
    again = ["train"] if command[0] == "train" else [command[0], "train"]
    assert main([*again, "--resume", str(tmp_path / "run"), "--device", "cpu"]) == 2
    assert "a resumed run trains on its own device" in _one_line_error(capsys)


def test_evaluate_text_scores_one_file_and_each_line_without_a_corpus_folder(run, tmp_path, capsys):
    """Scoring one held-out file needed dummy train.txt/valid.txt beside it; now `--text FILE`, and
    `--per-sentence` gives each line's perplexity. Checked against one forward pass over the whole stream."""
    import json

    import torch
    import torch.nn.functional as F

    from tiedlm.run import load_run

    text = tmp_path / "held-out.txt"
    text.write_text("w1 w2 w3 w4\nw5 w6 unseenword\nw7 w8 w9 w10 w11\n")
    assert main(["evaluate", str(run), "--text", str(text), "--per-sentence", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    loaded = load_run(run)
    ids = torch.tensor(loaded.vocab.encode(read_tokens(text))[0])
    with torch.inference_mode():
        logits, _ = loaded.model(ids[:-1].view(-1, 1), loaded.model.init_state(1))
        nll = F.cross_entropy(logits.reshape(-1, logits.size(-1)).float(), ids[1:], reduction="none")
    assert out["tokens"] == nll.numel() == 14 and out["unknown_mapped"] == 1
    assert abs(out["loss"] - nll.mean().item()) < 1e-5
    assert [s["tokens"] for s in out["sentences"]] == [4, 4, 6]  # the first word starts the stream, unscored
    assert abs(sum(s["nll"] for s in out["sentences"]) - nll.sum().item()) < 1e-4
    assert main(["evaluate", str(run), "--text", str(tmp_path / "none.txt")]) == 2
    assert "none.txt is missing" in _one_line_error(capsys)


def test_tensorboard_gets_each_epochs_figures_as_the_metrics_lines_have_them(tiny_corpus, tmp_path, capsys):
    """`--tensorboard DIR` (fairseq's --tensorboard-logdir, Lightning's logger): every numeric field of each
    metrics line as a scalar at its epoch, read back with TensorBoard's own reader."""
    import json

    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    out, board = tmp_path / "run", tmp_path / "board"
    sets = _sets(tiny_corpus, **{"train.epochs": "2"})
    assert main(["train", "ptb-small-vd", "--out", str(out), "--no-progress", "--tensorboard", str(board), *sets]) == 0
    events = EventAccumulator(str(board / "run"))  # each run its own subfolder
    events.Reload()
    lines = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    got = [(e.step, e.value) for e in events.Scalars("valid_ppl")]
    assert got == [(m["epoch"], pytest.approx(m["valid_ppl"], rel=1e-6)) for m in lines]
    assert {"train_ppl", "lr", "tokens_per_s"} <= set(events.Tags()["scalars"])


@pytest.mark.parametrize(
    "words, message",
    [
        (["train", "ptb-small-vd"], "is neither a known corpus nor an existing folder"),
        (["tag", "train"], "is not a folder; give a folder holding *train*.conllu"),
        (["translate", "train"], "is not a folder; give a folder holding {train,valid,test}.{en,de}"),
    ],
)
def test_a_missing_data_folder_is_refused_before_the_banner(words, message, tmp_path, capsys):
    out = tmp_path / "run"
    assert main([*words, "--data", str(tmp_path / "absent"), "--out", str(out), "--no-progress"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and message in captured.err and captured.err.count("\n") == 1, captured
    assert not out.exists()


def test_a_parallel_folder_without_one_of_its_files_names_the_six_it_needs(tmp_path, capsys):
    (tmp_path / "par").mkdir()
    for name in ("train.en", "train.de", "valid.en", "test.en", "test.de"):
        (tmp_path / "par" / name).write_text("a b\n")
    argv = ["translate", "train", "--data", str(tmp_path / "par"), "--out", str(tmp_path / "run")]
    assert main(argv) == 1  # a data error
    err = _one_line_error(capsys)
    assert "valid.de is missing; the folder needs {train,valid,test}.{en,de}, aligned line by line" in err


def test_a_failed_command_leaves_no_folder_it_made(run, tmp_path, capsys):
    """An analysis's --out and a new run's --out are made before the work (to check them early); a command that
    then fails (a damaged run, a missing data folder) removes those it made, parents too, and nothing else."""
    (run / "vocab.txt").unlink()
    capsys.readouterr()
    for argv in (
        ["analyze", "bands", str(run), "--out", str(tmp_path / "a" / "bands")],
        ["analyze", "augmented", str(run), "--out", str(tmp_path / "a" / "aug")],
        ["report", str(tmp_path / "absent"), "--out", str(tmp_path / "a" / "report")],
        ["train", "ptb-small-vd", "--data", str(tmp_path / "absent"), "--out", str(tmp_path / "a" / "b" / "run")],
    ):
        assert main(argv) in (1, 2), argv
        _one_line_error(capsys)
        assert not (tmp_path / "a").exists(), argv
    kept = tmp_path / "kept"
    kept.mkdir()  # a folder the user made is theirs: it stays
    assert main(["analyze", "bands", str(run), "--out", str(kept)]) == 1
    assert kept.is_dir()
