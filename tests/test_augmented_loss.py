import pytest
import torch
import torch.nn.functional as F

from tiedlm.losses import AugmentedLoss, LanguageModelLoss, fused


def _setup(N=6, V=11, d=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(N, V, generator=g, dtype=torch.double, requires_grad=True)
    emb = torch.randn(V, d, generator=g, dtype=torch.double, requires_grad=True)
    targets = torch.randint(0, V, (N,), generator=g)
    return logits, emb, targets


def test_gradient_is_yhat_minus_ytilde_over_tau():
    """Inan et al. eq. (3.4): dJ_aug/d(Wh) = (ŷ − ỹ)/τ (per token; the loss is a mean over N tokens)."""
    logits, emb, targets = _setup()
    tau = 3.0
    loss = AugmentedLoss(tau)(logits, targets, emb)
    (grad,) = torch.autograd.grad(loss, logits)
    y_hat = torch.softmax(logits / tau, -1)
    y_tilde = torch.softmax(emb[targets] @ emb.t() / tau, -1)
    torch.testing.assert_close(grad, (y_hat - y_tilde).detach() / tau / logits.size(0))


def test_kl_value_and_zero_at_match():
    logits, emb, targets = _setup()
    tau = 2.0
    aug = AugmentedLoss(tau)
    y_tilde = torch.softmax(emb[targets] @ emb.t() / tau, -1)
    y_hat = torch.softmax(logits / tau, -1)
    expected = (y_tilde * (y_tilde.log() - y_hat.log())).sum(-1).mean()
    torch.testing.assert_close(aug(logits, targets, emb), expected)
    matched = (emb[targets] @ emb.t()).detach()  # logits equal to L^T u give KL = 0
    assert aug(matched, targets, emb).abs().item() < 1e-12


def test_target_gradient_option():
    logits, emb, targets = _setup()
    loss = AugmentedLoss(5.0, target_grad=False)(logits, targets, emb)
    assert torch.autograd.grad(loss, emb, allow_unused=True)[0] is None
    loss = AugmentedLoss(5.0, target_grad=True)(logits, targets, emb)
    g = torch.autograd.grad(loss, emb)[0]
    assert g.abs().sum() > 0


@pytest.mark.parametrize("path", ["native", "python-distinct", "python-per-token"])
def test_gradient_through_target_matches_autograd(monkeypatch, path):
    """target_grad: the closed-form gradient into L through ỹ (fused.py docstring) equals autograd of
    J + γτ·KL(softmax(L[y*]Lᵀ/τ) ‖ softmax(z/τ)), for a tied model (z = h Lᵀ) with repeated targets."""
    if path == "native" and not fused.native.available():
        pytest.skip("the C++ kernels are not built here")
    if path != "native":
        monkeypatch.setattr(fused.native, "available", lambda: False)
        rows = fused.target_rows
        monkeypatch.setattr(fused, "target_rows", lambda t, distinct=None: rows(t, path == "python-distinct"))
    g = torch.Generator().manual_seed(5)
    n, v, d, tau, gamma = 29, 13, 6, 4.0, 0.65
    h = torch.randn(n, d, generator=g)
    emb0 = torch.randn(v, d, generator=g)
    targets = torch.randint(0, v, (n,), generator=g)
    assert targets.unique().numel() < n  # repeats: per-distinct-target rows sum several tokens

    ref_emb = emb0.clone().requires_grad_()
    z = h @ ref_emb.t()
    log_tgt = F.log_softmax(ref_emb[targets] @ ref_emb.t() / tau, -1)
    kl = F.kl_div(F.log_softmax(z / tau, -1), log_tgt, reduction="batchmean", log_target=True)
    (F.cross_entropy(z, targets) + gamma * tau * kl).backward()

    ours_emb = emb0.clone().requires_grad_()
    total, ce, aug = LanguageModelLoss(True, tau, gamma, target_grad=True)(h @ ours_emb.t(), targets, ours_emb)
    total.backward()
    torch.testing.assert_close(aug, kl.detach())
    torch.testing.assert_close(ours_emb.grad, ref_emb.grad, atol=1e-5, rtol=1e-4)
    fixed_emb = emb0.clone().requires_grad_()
    LanguageModelLoss(True, tau, gamma)(h @ fixed_emb.t(), targets, fixed_emb)[0].backward()
    assert (fixed_emb.grad - ours_emb.grad).abs().max() > 1e-3  # the target's gradient is really there


def test_total_loss_forms():
    logits, emb, targets = _setup(V=13)
    ce = F.cross_entropy(logits, targets)
    tau, gamma, beta = 4.0, 0.7, 0.3
    aug = AugmentedLoss(tau)(logits, targets, emb)
    total, _, _ = LanguageModelLoss(True, tau, gamma, "alpha")(logits, targets, emb)
    torch.testing.assert_close(total, ce + gamma * tau * aug)  # eq. (3.3), alpha = gamma * tau
    total, _, _ = LanguageModelLoss(True, tau, gamma, "beta", beta)(logits, targets, emb)
    torch.testing.assert_close(total, beta * aug * tau**2 * 13 + (1 - beta) * ce)  # eq. (6.1)
    total, ce2, aug2 = LanguageModelLoss(False)(logits, targets, emb)
    torch.testing.assert_close(total, ce)
    assert aug2 is None


def test_stable_for_large_logits():
    logits, emb, targets = _setup()
    big = (logits * 1e4).detach().requires_grad_()
    loss = AugmentedLoss(1.0)(big, targets, emb * 30)
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(big.grad).all()


def test_fused_fixed_target_matches_the_autograd_reference():
    # the fused path (ỹ per distinct target, closed-form backward) equals a plain autograd KL
    torch.manual_seed(3)
    n, v, d, tau = 40, 30, 6, 7.0
    emb = torch.randn(v, d, dtype=torch.float64)
    targets = torch.randint(0, 8, (n,))  # many repeated targets
    logits = torch.randn(n, v, dtype=torch.float64, requires_grad=True)
    fused = AugmentedLoss(tau)(logits, targets, emb)
    (g_fused,) = torch.autograd.grad(fused, logits)
    ref_logits = logits.detach().clone().requires_grad_(True)
    log_tgt = torch.log_softmax((emb[targets] @ emb.t()).double() / tau, -1)
    ref = (
        torch.nn.functional.kl_div(torch.log_softmax(ref_logits / tau, -1), log_tgt, reduction="sum", log_target=True)
        / n
    )
    (g_ref,) = torch.autograd.grad(ref, ref_logits)
    assert fused.item() == pytest.approx(ref.item(), rel=1e-6)
    assert torch.allclose(g_fused, g_ref, atol=1e-7)
    assert g_fused.dtype == logits.dtype


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_fused_loss_matches_autograd_across_chunks(monkeypatch, dtype):
    """The chunked J + J_aug pass gives the values and logit gradients of plain CE + KL in autograd."""
    from tiedlm.losses import fused

    monkeypatch.setattr(fused, "CHUNK_ELEMENTS", 3 * 13)  # 3 rows per chunk: 17 rows -> 6 chunks, last one short
    g = torch.Generator().manual_seed(3)
    logits = (torch.randn(17, 13, generator=g) * 3).to(dtype)
    emb = torch.randn(13, 5, generator=g)
    targets = torch.randint(0, 13, (17,), generator=g)
    tau, w_ce, w_aug = 2.5, 0.7, 1.9

    ref_in = logits.float().clone().requires_grad_()
    ref_ce = F.cross_entropy(ref_in, targets)
    tgt = torch.softmax(emb[targets] @ emb.t() / tau, -1)
    ref_aug = F.kl_div(F.log_softmax(ref_in / tau, -1), tgt, reduction="batchmean")
    (w_ce * ref_ce + w_aug * ref_aug).backward()

    ours_in = logits.clone().requires_grad_()
    ce, aug = fused.fused_lm_loss(ours_in, targets, emb, tau)
    (w_ce * ce + w_aug * aug).backward()
    torch.testing.assert_close(ce, ref_ce)
    torch.testing.assert_close(aug, ref_aug)
    assert ours_in.grad.dtype == dtype
    tol = {"atol": 1e-6, "rtol": 1e-5} if dtype == torch.float32 else {"atol": 2e-3, "rtol": 1e-2}
    torch.testing.assert_close(ours_in.grad.float(), ref_in.grad, **tol)

    only_ce_in = logits.clone().requires_grad_()
    ce, aug = fused.fused_lm_loss(only_ce_in, targets)
    ce.backward()
    assert aug.item() == 0
    ref_in.grad = None
    F.cross_entropy(ref_in, targets).backward()
    torch.testing.assert_close(only_ce_in.grad.float(), ref_in.grad, **tol)


@pytest.mark.parametrize("distinct", [True, False], ids=["distinct-rows", "per-token-rows"])
def test_python_path_with_per_token_targets_matches_autograd(monkeypatch, distinct):
    """The fused loss as a GPU runs it (one ỹ row per token, Python chunks, tensor-weighted backward), on the CPU."""
    monkeypatch.setattr(fused.native, "available", lambda: False)
    g = torch.Generator().manual_seed(4)
    logits = torch.randn(23, 11, generator=g) * 3
    emb = torch.randn(11, 4, generator=g)
    targets = torch.randint(0, 11, (23,), generator=g)
    tau, w_ce, w_aug = 3.0, 0.6, 1.7
    ref_in = logits.clone().requires_grad_()
    tgt = torch.softmax(emb[targets] @ emb.t() / tau, -1)
    ref = w_ce * F.cross_entropy(ref_in, targets) + w_aug * F.kl_div(
        F.log_softmax(ref_in / tau, -1), tgt, reduction="batchmean"
    )
    ref.backward()
    probs, inverse, neg_entropy = fused.augmented_targets(targets, emb, tau, distinct=distinct)
    assert probs.size(0) == (targets.unique().numel() if distinct else targets.numel())
    ours_in = logits.clone().requires_grad_()
    ce, aug = fused.FusedLMLoss.apply(ours_in, targets, True, probs, inverse, neg_entropy, tau)
    (w_ce * ce + w_aug * aug).backward()
    torch.testing.assert_close(w_ce * ce + w_aug * aug, ref.detach())
    torch.testing.assert_close(ours_in.grad, ref_in.grad, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("target_grad", [False, True])
def test_shifted_single_pass_equals_two_passes(target_grad):
    """The fused shift (one pass) gives what J on z plus J_aug on a separate z − b gives, gradients included."""
    g = torch.Generator().manual_seed(5)
    wh = torch.randn(40, 23, generator=g, requires_grad=True)
    b = torch.randn(23, generator=g, requires_grad=True)
    emb = torch.randn(23, 6, generator=g, requires_grad=True)
    targets = torch.randint(0, 23, (40,), generator=g)
    ce, aug = fused.fused_lm_loss(wh + b, targets, emb, 4.0, target_grad=target_grad, shift=b)
    ref_ce, _ = fused.fused_lm_loss(wh + b, targets)
    _, ref_aug = fused.fused_lm_loss(wh + b - b, targets, emb, 4.0, with_ce=False, target_grad=target_grad)
    torch.testing.assert_close((ce, aug), (ref_ce, ref_aug))
    params = (wh, b, emb) if target_grad else (wh, b)
    ours = torch.autograd.grad(ce + 2.5 * aug, params)
    ref = torch.autograd.grad(ref_ce + 2.5 * ref_aug, params)
    for a, r in zip(ours, ref):
        torch.testing.assert_close(a, r, atol=1e-6, rtol=1e-5)


def test_aug_bias_false_is_eq_3_1_as_printed():
    """aug_bias=False: ŷ = softmax(W h / τ) without b (eq. 3.1); J sees W h + b; b gets J's gradient only."""
    g = torch.Generator().manual_seed(1)
    wh = torch.randn(6, 11, generator=g, dtype=torch.double, requires_grad=True)
    b = torch.randn(11, generator=g, dtype=torch.double, requires_grad=True)
    emb = torch.randn(11, 4, generator=g, dtype=torch.double)
    targets = torch.randint(0, 11, (6,), generator=g)
    tau, gamma = 3.0, 0.5
    total, ce, aug = LanguageModelLoss(True, tau, gamma, aug_bias=False)(wh + b, targets, emb, b)
    y_tilde = torch.softmax(emb[targets] @ emb.t() / tau, -1)
    kl = (y_tilde * (y_tilde.log() - torch.log_softmax(wh / tau, -1))).sum(-1).mean()
    ref_ce = F.cross_entropy(wh + b, targets)
    torch.testing.assert_close(aug, kl.detach())
    torch.testing.assert_close(ce, ref_ce.detach())
    gw, gb = torch.autograd.grad(total, (wh, b))
    rw, rb = torch.autograd.grad(ref_ce + gamma * tau * kl, (wh, b), retain_graph=True)
    torch.testing.assert_close(gw, rw)
    torch.testing.assert_close(gb, rb)
    torch.testing.assert_close(gb, torch.autograd.grad(ref_ce, b)[0])  # no gradient into b from J_aug
    # the default (aug_bias=True) tempers the whole logits W h + b: a different J_aug
    _, _, aug_with_b = LanguageModelLoss(True, tau, gamma)(wh + b, targets, emb, b)
    assert not torch.allclose(aug_with_b, aug)
