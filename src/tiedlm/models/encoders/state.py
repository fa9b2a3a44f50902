"""The recurrent state every encoder carries between windows, and its helpers."""

from __future__ import annotations

import torch

State = list[tuple[torch.Tensor, ...]]  # per layer: (h, c) for LSTMs; (memory,) for the Transformer


def detach_state(state: State) -> State:
    """The same state cut from the graph of earlier windows (truncated BPTT)."""
    return [tuple(t.detach() for t in s) for s in state]


def zero_state(layers, batch: int, like: torch.Tensor) -> State:
    """Zero (h, c) in fp32 for each layer of a stack, sized by each layer's ``hidden_size``."""
    return [(like.new_zeros(batch, layer.hidden_size, dtype=torch.float32),) * 2 for layer in layers]
