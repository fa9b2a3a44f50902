"""The update every trainer shares: nothing changes on a non-finite loss or gradient; a run stops after N in a row."""

import pytest
import torch

from tiedlm.errors import TiedlmError
from tiedlm.train.step import NonFiniteSteps, update


def _model():
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2)
    return model, torch.optim.SGD(model.parameters(), lr=0.1)


def test_update_steps_with_clipping_like_the_textbook():
    model, opt = _model()
    before = [p.detach().clone() for p in model.parameters()]
    loss = (model(torch.ones(4, 3)) ** 2).sum() * 100  # a large gradient, clipped to norm 1
    loss.backward()
    grads = [p.grad.clone() for p in model.parameters()]
    norm = torch.sqrt(sum((g**2).sum() for g in grads))
    model.zero_grad()
    assert update((model(torch.ones(4, 3)) ** 2).sum() * 100, model.parameters(), opt, clip=1.0)
    for p, b, g in zip(model.parameters(), before, grads):  # w - lr * g / |g|
        assert torch.allclose(p, b - 0.1 * g / norm, atol=1e-6)


@pytest.mark.parametrize("where", ["loss", "gradient"])
def test_update_makes_no_change_when_loss_or_gradient_is_not_finite(where):
    model, opt = _model()
    before = [p.detach().clone() for p in model.parameters()]
    out = model(torch.ones(4, 3)).sum()
    if where == "loss":
        loss = out * float("nan")
    else:  # a finite loss whose gradient is not: d sqrt(u)/du at u = 0 is inf, times du/dw = 0 gives nan
        loss = out + torch.sqrt(model.weight.sum() * 0)
        assert torch.isfinite(loss)
    assert not update(loss, model.parameters(), opt, clip=5.0)
    assert all(torch.equal(p, b) for p, b in zip(model.parameters(), before))


def test_non_finite_steps_warn_reset_and_stop_after_the_limit():
    warnings = []
    steps = NonFiniteSteps(3, lambda what: f"diverged: {what}; lower the lr", warnings.append)
    assert not steps(False, "at batch 1") and not steps(False, "at batch 2")
    assert steps(True, "at batch 3") and steps.in_a_row == 0  # a good step resets the count
    steps(False, "at batch 4")
    steps(False, "at batch 5")
    with pytest.raises(TiedlmError, match=r"diverged: 3 non-finite steps in a row \(at batch 6\); lower the lr"):
        steps(False, "at batch 6")
    assert warnings[0] == "warning: non-finite loss/gradient at batch 1; step skipped (1 in a row)"
