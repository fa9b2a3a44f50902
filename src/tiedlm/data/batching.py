"""Batchify a token stream into parallel streams and cut it into BPTT windows."""

from __future__ import annotations

from typing import Iterator

import torch


def batchify(ids: torch.Tensor, batch_size: int) -> torch.Tensor:
    """Cut a 1-D id stream into ``batch_size`` contiguous streams: returns (steps, batch_size).

    The tail that does not fill a whole column is dropped (as in Zaremba et al. 2014);
    column j continues where column j-1 would have, so a hidden state can be carried
    from one window to the next.
    """
    steps = ids.numel() // batch_size
    if steps < 2:
        raise ValueError(f"a stream of {ids.numel()} tokens is too short for batch size {batch_size}")
    return ids[: steps * batch_size].view(batch_size, steps).t().contiguous()


def num_windows(data: torch.Tensor, bptt: int) -> int:
    return (data.size(0) - 1 + bptt - 1) // bptt


def fixed_window_lengths(steps: int, bptt: int) -> list[int]:
    """Windows of ``bptt`` steps covering ``steps`` time steps; the last one may be shorter."""
    return [min(bptt, steps - i) for i in range(0, steps, bptt)]


def bptt_windows(data: torch.Tensor, bptt: int, start: int = 0) -> Iterator[tuple[int, torch.Tensor, torch.Tensor]]:
    """Yield (window index, inputs, targets), inputs/targets of shape (<=bptt, batch); from window ``start``."""
    yield from scheduled_windows(data, fixed_window_lengths(data.size(0) - 1, bptt), start)


def variable_window_lengths(steps: int, bptt: int, seed: int, max_delta: int = 40) -> list[int]:
    """Window lengths covering ``steps`` time steps the AWD-LSTM way (Merity et al. 2017, §4.1).

    Each window: base = bptt with probability 0.95, else bptt/2; length ~ N(base, 5), at least 5 and at
    most bptt + max_delta. Drawn from a generator seeded by ``seed`` alone, so an interrupted epoch
    rebuilds the same schedule on resume.
    """
    gen = torch.Generator().manual_seed(seed)
    lengths, covered = [], 0
    while covered < steps:
        base = bptt if torch.rand((), generator=gen).item() < 0.95 else bptt / 2
        n = max(5, int(torch.normal(float(base), 5.0, (), generator=gen).item()))
        n = min(n, bptt + max_delta, steps - covered)
        lengths.append(n)
        covered += n
    return lengths


def scheduled_windows(
    data: torch.Tensor, lengths: list[int], start: int = 0
) -> Iterator[tuple[int, torch.Tensor, torch.Tensor]]:
    """Like :func:`bptt_windows` with the given window lengths (which must cover data.size(0) − 1 steps)."""
    i = sum(lengths[:start])
    for k in range(start, len(lengths)):
        n = lengths[k]
        yield k, data[i : i + n], data[i + 1 : i + 1 + n]
        i += n
