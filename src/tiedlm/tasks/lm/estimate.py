"""The language model's answer to ``reproduce --dry-run``: an estimate of a run's wall time on this machine."""

from __future__ import annotations

import functools

import torch

from ...train import timing


def lm_training_step(cfg, vocab_size: int, threads: int):
    """One language-model training step as the task takes it (forward and loss of one window with the state
    carried over, backward, an SGD update), on ``threads`` threads in the run's precision (bf16 where it is
    "auto" and the CPU has bf16): ``step(x) -> tokens`` for a (bptt, batch) window of ids ``x``, which is its
    own target (timing needs no real text)."""
    from ...losses import LanguageModelLoss
    from ...models import LanguageModel
    from ...models.encoders.state import detach_state
    from ...runtime import resolve_precision, set_threads
    from ...train.step import window_loss

    set_threads(threads)
    torch.manual_seed(0)
    model = LanguageModel(cfg.model, vocab_size).train()
    loss_fn = LanguageModelLoss.from_config(cfg.loss)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    precision = resolve_precision(cfg.train.precision, torch.device("cpu"))
    carried = [model.init_state(cfg.train.batch_size)]

    def step(x):  # the task's own forward and loss of one window, the state carried over (a Transformer's memory)
        loss, _, _, state = window_loss(model, loss_fn, x, x, carried[0], precision)
        carried[0] = detach_state(state)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return x.numel()

    return step


def estimate_seconds(cfg, threads: int, steps: int = 2, sizes: tuple[int, int] | None = None) -> float:
    """Wall-time estimate of a whole run on this machine (:func:`tiedlm.train.timing.estimate`): ``steps`` timed
    training steps (:func:`lm_training_step`) of the run's model on random ids, its corpus's training tokens and
    its epochs (NT-ASGD's finetune stage included). ``sizes``: (|V|, training tokens) instead of the corpus's."""
    vocab_size, train_tokens = sizes or corpus_size(cfg.data.name)
    step = lm_training_step(cfg, vocab_size, threads)
    t = cfg.train
    batches = (torch.randint(0, vocab_size, (t.bptt, t.batch_size)) for _ in range(steps + 1))
    return timing.estimate(step, batches, train_tokens, t.total_epochs, steps)


@functools.cache
def corpus_size(name: str) -> tuple[int, int]:
    """(|V|, training tokens) of a language-model corpus, read once per name."""
    from ...data import load_corpus

    corpus = load_corpus(name)
    return len(corpus.vocab), corpus.train.numel()
