"""Decoding: greedy search and beam search with incremental (key/value-cached) decoder steps.

Hypotheses are ranked by log P(y|x) / |y|^α (α = ``length_penalty``; |y| counts ``</s>``). Beam search keeps
the ``beam`` best unfinished prefixes per sentence and the best finished hypothesis; a sentence stops when no
unfinished prefix can still beat it (a prefix's score only falls as it grows, so its best possible
normalised score is score / limit^α), or at its length limit, where the open prefixes are closed with ``</s>``.
"""

from __future__ import annotations

import functools

import torch

from .data import BOS, EOS, PAD
from .model import TransformerTranslator


def _labels_once(search):
    """Run ``search`` in eval mode with the label embeddings g_out(E) encoded once for the whole search: they do
    not change while decoding (``OutputLayer.labels_reused``)."""

    @functools.wraps(search)
    def run(model: TransformerTranslator, *args, **kwargs):
        model.eval()
        with model.output.labels_reused():
            return search(model, *args, **kwargs)

    return run


def _step(model: TransformerTranslator, tokens: torch.Tensor, t: int, memory, mask, cache: dict) -> torch.Tensor:
    """Log-probabilities (N, |V|) of the next token after feeding ``tokens`` (N,1) at position t."""
    h = model.decode(tokens, memory, mask, cache=cache, offset=t)[:, -1]
    logits, _ = model.output(h)
    return torch.log_softmax(logits.float(), dim=-1)


def _limits(source: torch.Tensor, ratio: float, cap: int = 0) -> torch.Tensor:
    """Longest hypothesis per sentence, ``</s>`` included: ratio · source length + 10 (at most ``cap``)."""
    limits = ((source != PAD).sum(1).float() * ratio + 10).long()
    return limits.clamp(max=cap) if cap else limits


@torch.inference_mode()
@_labels_once
def greedy_search(
    model: TransformerTranslator, source: torch.Tensor, max_ratio: float = 1.5, max_length: int = 0
) -> list[list[int]]:
    """The argmax token at every step, until ``</s>`` or the length limit."""
    memory, mask = model.encode(source)
    limits = _limits(source, max_ratio, max_length)
    n = source.size(0)
    tokens = torch.full((n, 1), BOS, dtype=torch.long, device=source.device)
    out = [[] for _ in range(n)]
    done = torch.zeros(n, dtype=torch.bool, device=source.device)
    cache: dict = {}
    for t in range(int(limits.max())):
        nxt = _step(model, tokens, t, memory, mask, cache).argmax(-1)
        nxt = torch.where(t + 1 >= limits, torch.full_like(nxt, EOS), nxt)  # forced </s> at the limit
        for i in torch.nonzero(~done).flatten().tolist():
            out[i].append(int(nxt[i]))
        done |= nxt == EOS
        if bool(done.all()):
            break
        tokens = nxt.unsqueeze(1)
    return [seq[:-1] if seq and seq[-1] == EOS else seq for seq in out]


@torch.inference_mode()
@_labels_once
def beam_search(
    model: TransformerTranslator,
    source: torch.Tensor,
    beam: int = 5,
    length_penalty: float = 1.0,
    max_ratio: float = 1.5,
    max_length: int = 0,
    return_scores: bool = False,
):
    """The best hypothesis per source sentence (ids without ``</s>``), and optionally its normalised score."""
    n, device = source.size(0), source.device
    memory, mask = model.encode(source)
    memory, mask = memory.repeat_interleave(beam, 0), mask.repeat_interleave(beam, 0)
    limits = _limits(source, max_ratio, max_length)  # (n,) max hypothesis length including </s>
    max_len = int(limits.max())

    def norm(score, length):
        return score / (length**length_penalty)

    scores = torch.full((n, beam), float("-inf"), device=device)
    scores[:, 0] = 0.0  # one live prefix (<s>) per sentence at the start
    prefixes = torch.full((n * beam, 0), BOS, dtype=torch.long, device=device)
    tokens = torch.full((n * beam, 1), BOS, dtype=torch.long, device=device)
    best_score = torch.full((n,), float("-inf"), device=device)
    best: list[list[int]] = [[] for _ in range(n)]
    done = torch.zeros(n, dtype=torch.bool, device=device)
    cache: dict = {}
    offsets = (torch.arange(n, device=device) * beam).unsqueeze(1)
    for t in range(max_len):
        logp = _step(model, tokens, t, memory, mask, cache).view(n, beam, -1)
        vocab = logp.size(-1)
        cand = scores.unsqueeze(-1) + logp  # (n, beam, |V|)
        # finished candidates: close with </s> (forced for every prefix at the sentence's limit)
        at_limit = (t + 1 >= limits).unsqueeze(1)
        eos = cand[..., EOS]  # closing each prefix with </s> now (forced at the limit)
        finished = norm(eos, t + 1)
        top_fin, which = finished.max(1)
        better = (top_fin > best_score) & ~done
        for i in torch.nonzero(better).flatten().tolist():
            best_score[i] = top_fin[i]
            best[i] = prefixes[i * beam + int(which[i])].tolist()
        done |= at_limit.squeeze(1)
        # a sentence is done when no open prefix can beat its best finished hypothesis
        cand[..., EOS] = float("-inf")
        top, idx = cand.view(n, -1).topk(beam, dim=1)  # (n, beam)
        bound = norm(top[:, 0], limits.float())  # the best an open prefix could still reach
        done |= best_score >= bound
        if bool(done.all()):
            break
        origin = (idx // vocab + offsets).flatten()  # (n*beam,) rows of the previous step
        nxt = (idx % vocab).flatten()
        scores = top
        prefixes = torch.cat([prefixes[origin], nxt.unsqueeze(1)], dim=1)
        tokens = nxt.unsqueeze(1)
        for name in [n for n in cache if n.startswith("self")]:  # cross-attention: the same per beam
            k, v = cache[name]
            cache[name] = (k[origin], v[origin])
    return (best, best_score.tolist()) if return_scores else best
