"""Pinned numbers of a few fixed-seed training steps of the Transformer LM, the translator and the tagger, so
that a refactor that changes their maths fails loudly (the LSTM language models are pinned in
``test_output_layers.py`` and ``test_end_to_end.py``). Regenerate a row with the helper named beside it,
only when a change of the maths is intended, and say so in the commit."""

import pytest
import torch
import torch.nn.functional as F

from tiedlm.losses import LanguageModelLoss
from tiedlm.models import OUTPUTS, LanguageModel
from tiedlm.models.config import ModelConfig
from tiedlm.models.encoders.state import detach_state
from tiedlm.tasks.tagging import BiLSTMTagger, TaggerConfig
from tiedlm.tasks.translation import TranslationConfig
from tiedlm.tasks.translation.config import translator_output
from tiedlm.tasks.translation.data import BOS, EOS, PAD
from tiedlm.tasks.translation.model import TransformerTranslator
from tiedlm.tasks.translation.task import translation_loss

from conftest import flat_config


def transformer_lm_steps(output: str, n: int = 4) -> list[float]:
    """Losses (CE + γτ·J_aug) of n SGD steps of a tiny Transformer LM with memory on fixed random tokens."""
    torch.manual_seed(1234)
    cfg = ModelConfig(
        embedding_size=12,
        output=OUTPUTS.config_for(output, depth=2, dropout=0.3),
        encoder={"name": "transformer", "hidden_size": 20, "layers": 2, "heads": 3, "dropout": 0.1, "memory": 4},
    )
    model = LanguageModel(cfg, 60)
    loss_fn = LanguageModelLoss(augmented=True, tau=5.0, gamma=0.5)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    data = torch.randint(0, 60, (6 * n + 1, 4))
    state, losses = model.init_state(4), []
    for k in range(n):
        x, y = data[6 * k : 6 * k + 6], data[6 * k + 1 : 6 * k + 7]
        logits, state = model(x, detach_state(state))
        loss, _, _ = loss_fn(logits, y, model.input_embeddings)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(round(loss.item(), 5))
    return losses


def translator_steps(output: str, n: int = 4) -> list[float]:
    """Label-smoothed losses of n Adam steps of a tiny translator on fixed random sentence pairs."""
    cfg = flat_config(
        TranslationConfig,
        dict(
            d_model=16,
            ffn_size=32,
            heads=2,
            encoder_layers=2,
            decoder_layers=2,
            dropout=0.1,
            output=translator_output(output, depth=2, dropout=0.3),
        ),
    )
    torch.manual_seed(7)
    model = TransformerTranslator(cfg, 20, 20).train()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    g = torch.Generator().manual_seed(11)
    losses = []
    for _ in range(n):
        source = torch.randint(4, 20, (3, 6), generator=g)
        source[:, -1] = EOS
        source[0, 4:] = PAD  # one shorter sentence: padding is masked
        words = torch.randint(4, 20, (3, 5), generator=g)
        target_in = torch.cat([torch.full((3, 1), BOS), words], 1)
        target_out = torch.cat([words, torch.full((3, 1), EOS)], 1)
        target_in[1, 4:], target_out[1, 4:] = PAD, PAD
        total, _, _ = translation_loss(model, cfg, source, target_in, target_out)
        opt.zero_grad()
        total.backward()
        opt.step()
        losses.append(round(total.item(), 5))
    return losses


def tagger_steps(density: float, n: int = 4) -> list[float]:
    """Cross-entropies of n Adam steps of a tiny BiLSTM tagger (dense or frequency-sparse embeddings)."""
    cfg = flat_config(
        TaggerConfig, dict(embedding_size=8, embedding_density=density, hidden_size=6, dropout=0.2, lr=1e-2)
    )
    torch.manual_seed(5)
    model = BiLSTMTagger(cfg, 40, 5).train()
    opt = torch.optim.Adam(model.parameters(), lr=cfg.train.lr)
    g = torch.Generator().manual_seed(13)
    losses = []
    for _ in range(n):
        ids, tags = torch.randint(1, 40, (4, 7), generator=g), torch.randint(0, 5, (4, 7), generator=g)
        lengths = torch.tensor([7, 5, 6, 3])
        tags[torch.arange(7) >= lengths[:, None]] = -100
        logits = model(ids, lengths)
        loss = F.cross_entropy(logits.flatten(0, 1), tags.flatten(), ignore_index=-100)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(round(loss.item(), 5))
    return losses


PINNED = {
    ("transformer-lm", "tied"): [4.08572, 4.09792, 4.1043, 4.0874],
    ("transformer-lm", "drill"): [4.16098, 4.11711, 4.15328, 4.14473],
    ("translator", "tied"): [3.11432, 3.34413, 3.00143, 2.92792],
    ("translator", "drill"): [3.01158, 3.32997, 3.26173, 3.23046],
    ("tagger", 1.0): [1.54268, 1.65707, 1.58499, 1.61859],
    ("tagger", 0.5): [1.59127, 1.64516, 1.60957, 1.64476],
}


@pytest.mark.parametrize("key", sorted(PINNED))
def test_pinned_losses(key):
    kind, arg = key
    got = {"transformer-lm": transformer_lm_steps, "translator": translator_steps, "tagger": tagger_steps}[kind](arg)
    assert got == pytest.approx(PINNED[key], abs=3e-5), got
