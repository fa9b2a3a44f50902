"""Parallel text and subword units for translation: Multi30k En→De, sentencepiece BPE/unigram models.

Subword models are trained with `sentencepiece` (Kudo & Richardson 2018) on the training split only;
ids 0–3 are reserved as ``<pad>``, ``<unk>``, ``<s>``, ``</s>``. ``vocab = joint`` trains one model on both
languages (shared ids make a three-way tied embedding possible); ``separate`` trains one per language.
Decoding back to text is sentencepiece's detokenization, so BLEU is computed on plain text.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

import torch

from ...data.corpus import read_text, resolve_source
from ...data.sources import TRANSLATION_SOURCES
from ...errors import DataError, TiedlmError, UsageError
from ...paths import missing
from ...run_dir import RunDir, write_bytes_atomic

PAD, UNK, BOS, EOS = 0, 1, 2, 3
SPLITS = ("train", "valid", "test")


def read_lines(path: Path) -> list[str]:
    """The file's lines; none for an empty or blank file (not one empty line)."""
    text = read_text(path)
    return text.rstrip("\n").split("\n") if text.strip() else []


def resolve_parallel_dir(data_dir: str, source_lang: str, target_lang: str, own_data: bool = False) -> Path:
    """Folder with ``{split}.{lang}`` files: Multi30k (verified: mirror, cache or download) or, with ``own_data``
    or other languages, ``data_dir`` as it is."""
    if {source_lang, target_lang} == {"en", "de"} and not own_data:
        if data_dir and not (Path(data_dir) / "train.en").is_file():
            raise DataError(f"{data_dir} has no train.en; give a folder with {{train,valid,test}}.{{en,de}}")
        return resolve_source(
            TRANSLATION_SOURCES["multi30k"],
            data_dir,
            own=f"to train on en-de text of your own in that folder, use --data {data_dir}" if data_dir else "",
        )
    return own_parallel_dir(data_dir, source_lang, target_lang)


def own_parallel_dir(data_dir: str, source_lang: str, target_lang: str) -> Path:
    """A folder of one's own parallel text with its six ``{split}.{lang}`` files, read as it is; a one-line error
    naming what is not there."""
    needs = f"{{train,valid,test}}.{{{source_lang},{target_lang}}}, aligned line by line"
    if not data_dir:
        raise UsageError(
            f"{source_lang}->{target_lang}: only Multi30k en<->de is built in; give --data FOLDER with {needs}"
        )
    folder = Path(data_dir).expanduser()
    if not folder.is_dir():
        raise UsageError(f"--data {data_dir!r} is not a folder; give a folder holding {needs}")
    for split in SPLITS:
        for lang in (source_lang, target_lang):
            if not (folder / f"{split}.{lang}").is_file():
                raise DataError(
                    f"{folder / f'{split}.{lang}'} {missing(folder / f'{split}.{lang}')}; the folder needs {needs}"
                )
    return folder


class SubwordVocab:
    """A trained sentencepiece model: text ↔ ids, with the reserved ids above."""

    def __init__(self, model_file: Path):
        import sentencepiece as spm

        self.path = Path(model_file)
        self.sp = spm.SentencePieceProcessor(model_file=str(model_file))

    def __len__(self) -> int:
        return self.sp.get_piece_size()

    def encode(self, lines: list[str]) -> list[list[int]]:
        return self.sp.encode(lines)

    def decode(self, ids: list[int]) -> str:
        return self.sp.decode([i for i in ids if i > EOS])

    def pieces(self, line: str) -> list[str]:
        return self.sp.encode(line, out_type=str)

    @staticmethod
    def train(lines: list[str], prefix: Path, vocab_size: int, model_type: str) -> "SubwordVocab":
        import io

        import sentencepiece as spm

        prefix.parent.mkdir(parents=True, exist_ok=True)
        model = io.BytesIO()  # trained in memory, then written atomically (never through a planted link)
        try:
            spm.SentencePieceTrainer.train(
                sentence_iterator=iter(lines),
                model_writer=model,
                vocab_size=vocab_size,
                model_type=model_type,
                character_coverage=1.0,
                pad_id=PAD,
                unk_id=UNK,
                bos_id=BOS,
                eos_id=EOS,
                num_threads=1,
                input_sentence_size=0,
                shuffle_input_sentence=False,
                minloglevel=2,
            )
        except RuntimeError as exc:  # "Vocabulary size is too high (N > max)" or "... smaller than required_chars"
            text = str(exc).splitlines()[0]
            small = "smaller than required_chars" in text
            fix = (
                "raise --set vocab_size: it must hold at least every character of the training text"
                if small
                else "lower --set vocab_size: the training text has fewer distinct pieces"
            )
            raise UsageError(
                f"sentencepiece could not train a {vocab_size}-piece {model_type} model ({text}); {fix}"
            ) from None
        path = Path(f"{prefix}.model")
        try:
            write_bytes_atomic(path, model.getvalue())
        except OSError as exc:  # a full disk, a file-size limit
            raise TiedlmError(
                f"could not write {path} ({exc.strerror or exc}); free disk space (or raise the file-size limit) "
                "and start the run again"
            ) from None
        return SubwordVocab(path)


@dataclass
class ParallelCorpus:
    """Raw lines and subword ids of every split; ``source_vocab`` is ``target_vocab`` with a joint vocabulary."""

    source_vocab: SubwordVocab
    target_vocab: SubwordVocab
    text: dict[str, tuple[list[str], list[str]]]  # split -> (source lines, target lines)
    ids: dict[str, list[tuple[list[int], list[int]]]]  # split -> [(source ids, target ids)]
    folder: Path

    def batches(self, split: str, batch_tokens: int, shuffle_seed: int | None = None, max_length: int = 0):
        """Lists of pair indices whose padded size (pairs × longest side) stays within ``batch_tokens``.

        Pairs are sorted by length (little padding), cut into batches, and the batch order shuffled with
        ``shuffle_seed``; ``max_length`` drops pairs with a longer side.
        """
        pairs = self.ids[split]
        order = sorted(
            (i for i, (s, t) in enumerate(pairs) if not max_length or max(len(s), len(t)) + 1 <= max_length),
            key=lambda i: (len(pairs[i][1]), len(pairs[i][0])),
        )
        batches, current, longest = [], [], 0
        for i in order:
            n = max(len(pairs[i][0]), len(pairs[i][1])) + 1
            if current and max(longest, n) * (len(current) + 1) > batch_tokens:
                batches.append(current)
                current, longest = [], 0
            current.append(i)
            longest = max(longest, n)
        if current:
            batches.append(current)
        if shuffle_seed is not None:
            random.Random(shuffle_seed).shuffle(batches)
        return batches

    def tensors(self, split: str, index: list[int]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(source (B,S), target input <s> y (B,T), target output y </s> (B,T)), padded with PAD."""
        return collate([self.ids[split][i] for i in index])


def collate(pairs: list[tuple[list[int], list[int]]]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    pad = torch.nn.utils.rnn.pad_sequence
    src = pad([torch.tensor(s + [EOS]) for s, _ in pairs], batch_first=True, padding_value=PAD)
    tgt_in = pad([torch.tensor([BOS] + t) for _, t in pairs], batch_first=True, padding_value=PAD)
    tgt_out = pad([torch.tensor(t + [EOS]) for _, t in pairs], batch_first=True, padding_value=PAD)
    return src, tgt_in, tgt_out


def encode_source(vocab: SubwordVocab, lines: list[str]) -> torch.Tensor:
    """Source sentences -> (B,S) ids with </s>, padded."""
    return collate([(ids, []) for ids in vocab.encode(lines)])[0]


def load_parallel_corpus(cfg, run_dir: Path, train_vocab: bool) -> ParallelCorpus:
    """Read the splits; train the subword model(s) into ``run_dir`` (``train_vocab``) or load them from there."""
    folder = resolve_parallel_dir(cfg.data.data_dir, cfg.data.source_lang, cfg.data.target_lang, cfg.data.own_data)
    text = {
        s: (read_lines(folder / f"{s}.{cfg.data.source_lang}"), read_lines(folder / f"{s}.{cfg.data.target_lang}"))
        for s in SPLITS
    }
    for split, (src, tgt) in text.items():
        if len(src) != len(tgt):
            raise DataError(
                f"{folder}: {split}.{cfg.data.source_lang} has {len(src)} lines but {split}.{cfg.data.target_lang} "
                f"has {len(tgt)}; the two sides must be aligned line by line"
            )
    if cfg.data.max_pairs:
        text["train"] = (text["train"][0][: cfg.data.max_pairs], text["train"][1][: cfg.data.max_pairs])
    src_train, tgt_train = text["train"]
    models = RunDir(run_dir).subword_models(cfg.data.vocab == "joint", cfg.data.source_lang, cfg.data.target_lang)
    if train_vocab:
        sides = [src_train + tgt_train] if cfg.data.vocab == "joint" else [src_train, tgt_train]
        vocabs = [
            SubwordVocab.train(lines, model.with_suffix(""), cfg.data.vocab_size, cfg.data.subword_model)
            for lines, model in zip(sides, models)
        ]
    else:
        vocabs = [SubwordVocab(model) for model in models]
    source_vocab, target_vocab = vocabs[0], vocabs[-1]
    ids = {s: list(zip(source_vocab.encode(src), target_vocab.encode(tgt))) for s, (src, tgt) in text.items()}
    return ParallelCorpus(source_vocab, target_vocab, text, ids, folder)
