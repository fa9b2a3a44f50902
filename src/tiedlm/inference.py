"""Querying a trained model: next-word tables (Inan et al. Table 3) and sampling."""

from __future__ import annotations

import torch

from .data.vocab import EOS, UNK
from .errors import UsageError


def encode_prompt(vocab, text: str, allow_empty: bool = False) -> tuple[list[int], list[str]]:
    """Ids of the whitespace tokens of ``text`` (lower-cased only if the exact word is unknown);
    unknown words map to ``<unk>``. Returns (ids, the words that were unknown)."""
    words = text.split()
    if not words and not allow_empty:
        raise UsageError('the phrase is empty; give at least one word, e.g. "the company said"')
    ids, unknown = [], []
    for w in words:
        if w not in vocab and w.lower() in vocab:
            w = w.lower()
        if w not in vocab:
            if vocab.unk_id is None:
                raise UsageError(f"word {w!r} is not in the vocabulary, which has no {UNK}")
            unknown.append(w)
            w = UNK
        ids.append(vocab.index[w])
    return ids, unknown


@torch.inference_mode()
def condition(model, ids: list[int], eos_id: int | None):
    """Feed ``<eos>`` (a sentence start) and then ``ids``; return the next-word logits and the state."""
    device = model.embedding.weight.device
    seq = ([eos_id] if eos_id is not None else []) + ids
    x = torch.tensor(seq, dtype=torch.long, device=device).view(-1, 1)
    logits, state = model(x, model.init_state(1))
    return logits[-1, 0].float(), state


def next_word_table(model, vocab, text: str, top: int = 10) -> dict:
    """Top-``top`` next words with probabilities after ``text``."""
    ids, unknown = encode_prompt(vocab, text)
    logits, _ = condition(model, ids, vocab.index.get(EOS))
    probs = torch.softmax(logits, dim=-1)
    p, i = probs.topk(min(top, probs.numel()))
    return {
        "phrase": text,
        "unknown": unknown,
        "predictions": [{"word": vocab.words[j], "prob": float(q)} for q, j in zip(p.tolist(), i.tolist())],
    }


@torch.inference_mode()
def generate(model, vocab, words: int = 50, temperature: float = 1.0, seed: int = 0, prompt: str = "") -> dict:
    """Sample ``words`` tokens after ``prompt`` (or a sentence start) at ``temperature``."""
    if temperature <= 0:
        raise UsageError(f"--temperature {temperature} must be > 0 (e.g. 1.0; lower is more conservative)")
    if words < 1:
        raise UsageError(f"--words {words} must be >= 1")
    ids, unknown = encode_prompt(vocab, prompt, allow_empty=True)
    gen = torch.Generator(device="cpu").manual_seed(seed)
    logits, state = condition(model, ids, vocab.index.get(EOS))
    device = model.embedding.weight.device
    out = []
    for _ in range(words):
        probs = torch.softmax(logits / temperature, dim=-1).cpu()
        nxt = int(torch.multinomial(probs, 1, generator=gen))
        out.append(nxt)
        logits, state = model(torch.tensor([[nxt]], device=device), state)
        logits = logits[-1, 0].float()
    tokens = [vocab.words[i] for i in out]
    lines: list[list[str]] = [[]]
    for t in tokens:  # one line per sentence: no space before or after a line break, at the start included
        if t == EOS:
            lines.append([])
        else:
            lines[-1].append(t)
    text = "\n".join(" ".join(line) for line in lines)
    return {
        "prompt": prompt,
        "unknown": unknown,
        "tokens": tokens,
        "text": text,
        "seed": seed,
        "temperature": temperature,
    }
