import hashlib

import pytest
import torch

from tiedlm.data import Vocabulary, batchify, bptt_windows, load_corpus
from tiedlm.data.corpus import read_tokens, resolve_corpus_dir
from tiedlm.data.sources import SOURCES, VOCAB_SIZES, CorpusFile, CorpusSource
from tiedlm.errors import DataError, UsageError


def test_vocab_sorted_by_frequency_with_deterministic_ties():
    v = Vocabulary.build("b a c a b a d c".split())
    assert v.words == ["a", "b", "c", "d"] and v.counts == [3, 2, 2, 1]
    assert Vocabulary.build("c b d a a b c a".split()).words == v.words  # order of text is irrelevant


def test_vocab_roundtrip(tmp_path):
    v = Vocabulary.build("x y y z".split())
    v.save(tmp_path / "v.txt")
    w = Vocabulary.load(tmp_path / "v.txt")
    assert w.words == v.words and w.counts == v.counts


def test_eos_after_every_line_including_empty(tmp_path):
    p = tmp_path / "t.txt"
    p.write_text(" a b \n\n c \n")
    assert read_tokens(p) == ["a", "b", "<eos>", "<eos>", "c", "<eos>"]


def test_batchify_and_windows():
    data = batchify(torch.arange(23), 4)
    assert data.shape == (5, 4)
    assert data[:, 1].tolist() == [5, 6, 7, 8, 9]  # contiguous streams
    wins = list(bptt_windows(data, 3))
    assert [x.shape[0] for _, x, _ in wins] == [3, 1]
    for _, x, y in wins:
        assert torch.equal(y, data[1:][: len(y)] if _ == 0 else data[4:5])
    assert [k for k, _, _ in bptt_windows(data, 3, start=1)] == [1]


def test_custom_folder_maps_unknown_words(tiny_corpus):
    (tiny_corpus / "test.txt").write_text(" w1 neverseen w2 \n")
    c = load_corpus(str(tiny_corpus))
    assert c.unknown["test"] == 1 and c.vocab.words[c.test[1]] == "<unk>"
    assert c.test.numel() == 4


def test_missing_folder_is_usage_error():
    with pytest.raises(UsageError, match="neither a known corpus"):
        resolve_corpus_dir("no/such/folder")


def test_missing_mirror_file_names_file_sha_and_fix(tmp_path, monkeypatch):
    monkeypatch.setenv("TIEDLM_DATA", str(tmp_path))
    with pytest.raises(DataError) as e:
        resolve_corpus_dir("ptb")
    msg = str(e.value)
    assert "ptb/train.txt" in msg and SOURCES["ptb"].file("train").sha256 in msg and "TIEDLM_DATA" in msg


def test_corrupt_mirror_file(tmp_path, monkeypatch):
    (tmp_path / "ptb").mkdir()
    for s in ("train", "valid", "test"):
        (tmp_path / "ptb" / f"{s}.txt").write_text("not ptb\n")
    monkeypatch.setenv("TIEDLM_DATA", str(tmp_path))
    with pytest.raises(DataError, match="is not the verified train file"):
        load_corpus("ptb")


def test_download_to_cache_with_verification(tmp_path, monkeypatch, tiny_corpus):
    """The cache path downloads each file (here from file:// URLs) and checks its sha256."""
    files = []
    for split in ("train", "valid", "test"):
        path = tiny_corpus / f"{split}.txt"
        files.append(CorpusFile(split, path.as_uri(), hashlib.sha256(path.read_bytes()).hexdigest()))
    monkeypatch.setitem(SOURCES, "ptb", CorpusSource("ptb", tuple(files)))
    monkeypatch.setenv("TIEDLM_DATA", "")  # no mirror
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    folder = resolve_corpus_dir("ptb")
    assert folder == tmp_path / "cache" / "tiedlm" / "ptb"
    assert (folder / "train.txt").read_bytes() == (tiny_corpus / "train.txt").read_bytes()
    # a corrupt cached file is reported with the way to fix it
    (folder / "valid.txt").write_text("tampered\n")
    with pytest.raises(DataError, match="delete it to download it again"):
        resolve_corpus_dir("ptb")
    # a bad download leaves nothing behind
    bad = CorpusFile("test", files[2].url, "0" * 64)
    monkeypatch.setitem(SOURCES, "ptb", CorpusSource("ptb", (files[0], files[1], bad)))
    (folder / "valid.txt").write_bytes((tiny_corpus / "valid.txt").read_bytes())
    (folder / "test.txt").unlink()
    with pytest.raises(DataError, match="not the expected file"):
        resolve_corpus_dir("ptb")
    assert not (folder / "test.txt").exists() and not list(folder.glob(".*part"))


def test_unreachable_download(tmp_path, monkeypatch):
    f = CorpusFile("train", (tmp_path / "absent.txt").as_uri(), "0" * 64)
    monkeypatch.setitem(SOURCES, "ptb", CorpusSource("ptb", (f,)))
    monkeypatch.setenv("TIEDLM_DATA", "")  # no mirror
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    with pytest.raises(DataError, match="could not download"):
        resolve_corpus_dir("ptb")


def test_shared_ptb_and_wikitext2_official_counts(shared_data, monkeypatch):
    monkeypatch.setenv("TIEDLM_DATA", str(shared_data))
    ptb = load_corpus("ptb")
    assert len(ptb.vocab) == VOCAB_SIZES["ptb"] == 10000
    assert [ptb.splits[s].numel() for s in ("train", "valid", "test")] == [929589, 73760, 82430]
    h1, h2 = load_corpus("wikitext-2-half1"), load_corpus("wikitext-2-half2")
    assert len(h1.vocab) == VOCAB_SIZES["wikitext-2"] == 33278
    assert h1.train.numel() + h2.train.numel() == 2088628 and h1.valid.numel() == 217646
    assert h1.vocab.words == h2.vocab.words
