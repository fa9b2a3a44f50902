"""A whole training step captured once as a CUDA graph (per window length) and replayed for every window.

A small VD-LSTM step on a GPU is thousands of tiny kernels: per time step and layer one matmul and a
handful of element-wise ops forward, about twice that backward, then the loss, the clipping and the
update. Launched one by one from Python the GPU waits on the host; replayed from a CUDA graph
(``torch.cuda.CUDAGraph``) they run back to back. What is captured, for a window of ``train.bptt``
steps (the paper's fixed-length BPTT windows, Inan et al. 2017 §6.1):

    variational masks → forward → J (+ α·J_aug) → backward → global-norm clipping → SGD update

and the inputs (the window's ids, the carried state, the learning rate) are copied into the graph's
fixed buffers before each replay. The masks come from the CUDA generator, which a replay advances
like eager sampling would, so a run resumed from a checkpoint (which saves the CUDA RNG state)
replays the same masks as an uninterrupted one.

A non-finite loss or gradient norm is caught as in the eager loop: the graph keeps a copy of the
weights from before its update, and the step is undone from it (and the carried state is not
advanced) when the replay reports the step non-finite.

Used by :class:`~tiedlm.tasks.lm.task.LanguageModelTask` when :func:`unsupported_reason` finds nothing against it;
with fixed windows the last, shorter window of an epoch runs eagerly, and with the AWD-LSTM's variable
windows every length met gets a graph of its own (:class:`GraphedSteps`, one memory pool), so that weight
drop, AR/TAR and the NT-ASGD average (updated after each replay) all train from graphs.
``train.cuda_graph = "auto"`` (the default) captures every step an encoder declares capturable and a GPU has
replayed: the VD-LSTM with and without the augmented loss (``loss.target_grad``, the REAL presets; ``loss.aug_bias
= false``), and the AWD-LSTM family (DRILL and the other output layers, sparse layers, NT-ASGD, variable
windows). ``tiedlm selfcheck --device cuda`` replays all of them (docs/performance.md, "Training on a GPU"),
and the GPU tests of ``tests/test_cuda_graph.py`` check that
a replay draws the eager step's masks and that graphed runs resume bit for bit. The Transformer (its Adam step)
and DDP training stay eager.
"""

from __future__ import annotations

import math

import torch

from ...train.step import backward_and_clip, window_loss


def unsupported_reason(cfg, device: torch.device, distributed: bool) -> str | None:
    """Why this run's step is not captured (None: it is).

    An encoder whose capture no GPU has replayed yet (its config's ``cuda_graph = "unverified"``; none today) is
    captured only with ``train.cuda_graph = "on"`` ("auto" says so and trains eagerly)."""
    t, m = cfg.train, cfg.model
    if t.cuda_graph == "off":
        return "train.cuda_graph = 'off'"
    if device.type != "cuda":
        return "CUDA graphs need a CUDA device"
    if distributed:
        return "data-parallel training (DDP) runs eagerly"
    if t.precision == "fp16":
        return "train.precision = 'fp16' (its loss scaling runs eagerly)"
    capture = type(m.encoder).cuda_graph  # the encoder's own declaration (models/encoders/configs.py)
    if not capture:
        return f"model.encoder = {m.encoder.name!r}: {type(m.encoder).cuda_graph_reason}"
    if not type(t.optimizer).graph_capturable:
        return f"train.optimizer = {t.optimizer.name!r} (only SGD, with or without NT-ASGD's average, is captured)"
    if getattr(t.optimizer, "momentum", 0.0):
        return "train.optimizer.momentum > 0 (the captured update is plain SGD's)"
    if t.cuda_graph == "auto" and capture != "verified":
        return (
            f"model.encoder = {m.encoder.name!r}: its step is captured with train.cuda_graph = 'on'; 'auto' keeps "
            "it eager until a GPU has run the capture"
        )
    return None


class GraphedStep:
    """Forward, loss, backward, clipping and the SGD update of one (bptt, batch) window, as one CUDA graph.

    ``step(x, y, state, lr)`` returns ``(ce, aug, finite, new_state)``: the window's mean cross-entropy and
    augmented loss (0-dim device tensors; ``aug`` None without the augmented loss), whether the step was
    finite (a Python bool: a non-finite step has been undone), and the state to carry to the next window.
    """

    def __init__(
        self,
        model,
        loss_fn,
        cfg,
        x: torch.Tensor,
        y: torch.Tensor,
        state,
        precision: str,
        warmup: int = 2,
        pool=None,
        backup: list[torch.Tensor] | None = None,
    ):
        self.model, self.loss_fn, self.precision = model, loss_fn, precision
        self.clip = cfg.train.clip if cfg.train.clip > 0 else math.inf
        self.weight_decay = cfg.train.weight_decay
        self.ar, self.tar = cfg.loss.ar, cfg.loss.tar  # the AWD-LSTM's activation regularisers (0: none)
        self.time_scale = float(y.size(0)) if cfg.train.loss_reduction == "sum_over_time" else 1.0
        self.params = [p for p in model.parameters() if p.requires_grad]
        dev = x.device
        # the graph's fixed inputs
        self.x, self.y = x.clone(), y.clone()
        self.state = [tuple(t.detach().clone() for t in s) for s in state]
        self.lr = torch.zeros((), device=dev)
        self.backup = backup if backup is not None else [p.detach().clone() for p in self.params]
        # warm-up on a side stream (cuBLAS handles, autograd's lazy set-up) with lr 0; the weights, the
        # gradients and the RNG are put back afterwards, so the warm-up leaves no trace in training
        weights = [p.detach().clone() for p in self.params]
        rng = torch.cuda.get_rng_state(dev)
        side = torch.cuda.Stream(dev)
        side.wait_stream(torch.cuda.current_stream(dev))
        with torch.cuda.stream(side):
            for _ in range(warmup):
                self._step()
        torch.cuda.current_stream(dev).wait_stream(side)
        for p in self.params:
            p.grad = None  # so that the captured backward allocates the gradients in the graph's pool
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph, pool=pool):
            self.out = self._step()
        with torch.no_grad():
            for p, w in zip(self.params, weights):
                p.copy_(w)
        torch.cuda.set_rng_state(rng, dev)

    def _step(self):
        """The captured computation; everything stays on the device."""
        loss, ce, aug, new_state = window_loss(
            self.model,
            self.loss_fn,
            self.x,
            self.y,
            self.state,
            self.precision,
            ar=self.ar,
            tar=self.tar,
            time_scale=self.time_scale,
            cache_enabled=False,
        )
        for p in self.params:
            p.grad = None
        norm = backward_and_clip(loss, self.params, self.clip, foreach=True)  # the eager step's own
        grads = [p.grad for p in self.params]
        finite = torch.isfinite(loss) & torch.isfinite(norm)
        with torch.no_grad():
            torch._foreach_copy_(self.backup, self.params)
            if self.weight_decay:
                torch._foreach_add_(grads, self.params, alpha=self.weight_decay)
            torch._foreach_mul_(grads, self.lr)
            torch._foreach_sub_(self.params, grads)
            next_state = [tuple(t.detach().clone() for t in s) for s in new_state]
        return ce, aug, finite, next_state

    def step(self, x: torch.Tensor, y: torch.Tensor, state, lr: float):
        """Replay for this window (its ids, the carried ``state``, the learning rate)."""
        self.x.copy_(x)
        self.y.copy_(y)
        for mine, given in zip(self.state, state):
            for a, b in zip(mine, given):
                if a.data_ptr() != b.data_ptr():
                    a.copy_(b)
        self.lr.fill_(lr)
        self.graph.replay()
        ce, aug, finite, next_state = self.out
        if not bool(finite):  # undo the update; the state stays where it was
            with torch.no_grad():
                torch._foreach_copy_(self.params, self.backup)
            return ce, aug, False, self.state
        for mine, new in zip(self.state, next_state):
            for a, b in zip(mine, new):
                a.copy_(b)
        return ce, aug, True, self.state


class GraphedSteps:
    """One :class:`GraphedStep` per window length, captured when that length first comes, all in one memory pool.

    The AWD-LSTM's windows vary in length (``train.variable_bptt``), and a CUDA graph replays fixed shapes, so
    each length gets its own graph. They share one pool: they never run at the same time, and nothing a graph
    allocates is needed after its own replay (the step's outputs are read, and its state copied out, before the
    next replay), so a later capture may reuse what an earlier one freed. The weights, their backups, the
    inputs' and the state's buffers and the learning rate live outside the pool.
    """

    def __init__(self, model, loss_fn, cfg, precision: str):
        self.model, self.loss_fn, self.cfg, self.precision = model, loss_fn, cfg, precision
        self.by_length: dict[int, GraphedStep] = {}
        self.pool = None
        self.backup = None  # one copy of the weights from before an update, shared by every length's graph

    def step(self, x: torch.Tensor, y: torch.Tensor, state, lr: float):
        graph = self.by_length.get(y.size(0))
        if graph is None:
            if self.pool is None:
                self.pool = torch.cuda.graph_pool_handle()
            graph = GraphedStep(
                self.model, self.loss_fn, self.cfg, x, y, state, self.precision, pool=self.pool, backup=self.backup
            )
            self.backup = graph.backup
            self.by_length[y.size(0)] = graph
        return graph.step(x, y, state, lr)
