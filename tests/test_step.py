"""The update every trainer shares: nothing changes on a non-finite loss or gradient; a run stops after N in a row."""

import pytest
import torch

from tiedlm.errors import TiedlmError
from tiedlm.train.step import NonFiniteSteps, scaled_update, update


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


def test_fp16_loss_scaling_overflows_halve_the_scale_and_the_window_is_computed_again():
    """fp16 with dynamic loss scaling: at a scale whose scaled gradient overflows fp16 (2^40 here) the scale halves
    and the window runs again until it fits; the update made is the textbook one (w - lr * g, g of the fp32 loss,
    unscaled) within fp16's rounding, and one update is made however many overflows came first."""
    model, opt = _model()
    before = [p.detach().clone() for p in model.parameters()]
    x = torch.linspace(-1, 1, 12).reshape(4, 3)
    (model(x) ** 2).sum().backward()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    calls = []

    def window():
        calls.append(1)
        with torch.autocast("cpu", dtype=torch.float16):
            out = model(x)
        assert out.dtype == torch.float16  # the matmul ran in fp16
        return ((out.float() ** 2).sum(),)

    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**40)
    made, _ = scaled_update(window, list(model.parameters()), opt, 0.0, scaler)
    assert made and len(calls) > 1 and scaler.get_scale() == 2.0 ** (41 - len(calls))
    assert any((g.abs() > 0.1).any() for g in grads)
    for p, b, g in zip(model.parameters(), before, grads):
        assert torch.allclose(p, b - 0.1 * g, atol=1e-3)


def test_fp16_loss_scaling_makes_no_update_where_the_gradient_is_not_finite_at_any_scale():
    """A gradient that is not finite whatever the scale (not an overflow of the scaling) makes no update; the scale
    comes down below 1 and stops there."""
    model, opt = _model()
    before = [p.detach().clone() for p in model.parameters()]

    def window():
        return (model(torch.ones(4, 3)).sum() + torch.sqrt(model.weight.sum() * 0),)

    scaler = torch.amp.GradScaler("cpu", init_scale=4.0)
    made, _ = scaled_update(window, list(model.parameters()), opt, 5.0, scaler)
    assert not made and scaler.get_scale() == 0.5
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
