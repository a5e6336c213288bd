"""The fits: analytic gradients (scipy check_grad), known recoveries, errors, weights."""

import numpy as np
import pytest
from scipy.optimize import check_grad

from judgecal.calibrate import fit as F
from judgecal.calibrate.penalty import polylog_penalty
from judgecal.errors import FitError, UsageError


def _pairs(n=400, seed=0):
    rng = np.random.default_rng(seed)
    la = np.round(np.exp(rng.normal(5.0, 0.9, n)))
    lb = np.round(np.exp(rng.normal(5.0, 0.9, n)))
    la[:5] = 0.0  # L = 0 allowed
    lb[5:10] = 150.0  # r = 0 exactly for l_ref = 150
    sa, sb = rng.integers(0, 10, n).astype(float), rng.integers(0, 10, n).astype(float)
    y = rng.choice([0.0, 0.5, 1.0], n, p=[0.45, 0.1, 0.45])
    return sa, sb, la, lb, y


@pytest.mark.parametrize("theta", [(0.3, 1.2, 0.8), (1.5, 1.45, 0.2), (0.0, 1.0, 2.0)])
@pytest.mark.parametrize("mult", [False, True])
def test_bt_gradient_matches_finite_differences(theta, mult):
    sa, sb, la, lb, y = _pairs()
    rng = np.random.default_rng(1)
    ma = rng.uniform(0.5, 1.0, la.size) if mult else None
    fa, fb = F._Feature(la, 150.0, ma), F._Feature(lb, 150.0)
    w = rng.uniform(0, 2, la.size)
    w /= w.sum()
    f = lambda t: F.bt_objective(t, sa - sb, fa, fb, y, w)[0]  # noqa: E731
    g = lambda t: F.bt_objective(t, sa - sb, fa, fb, y, w)[1]  # noqa: E731
    err = check_grad(f, g, np.array(theta), epsilon=1e-7)
    assert err < 1e-5 * max(1.0, np.linalg.norm(g(np.array(theta))))


def test_ls_gradient_matches_finite_differences():
    sa, _, la, _, _ = _pairs()
    feat = F._Feature(la, 150.0)
    target = np.random.default_rng(2).uniform(0, 9, la.size)
    w = np.full(la.size, 1.0 / la.size)
    f = lambda t: F.ls_objective(t, sa, feat, target, w)[0]  # noqa: E731
    g = lambda t: F.ls_objective(t, sa, feat, target, w)[1]  # noqa: E731
    for theta in ([0.4, 1.1], [2.0, 1.5]):
        assert check_grad(f, g, np.array(theta), epsilon=1e-7) < 1e-5 * max(1.0, np.linalg.norm(g(theta)))


def test_pointwise_recovers_a_noise_free_penalty_exactly():
    rng = np.random.default_rng(3)
    length = np.exp(rng.uniform(3, 8, 300))
    score = rng.uniform(2, 8, 300)
    expert = score - polylog_penalty(length, 400.0, 0.8, 1.3)  # judge = expert + penalty
    # the planted expert scores leave [0, 10] at the extremes: exact recovery needs the unclipped fit
    res = F.fit_pointwise(score, length, expert, expert_scale=(0, 10), judge_scale=(0, 10),
                          l_ref=400.0, p_bounds=(1.0, 1.5), clip=False)
    assert res.gamma == pytest.approx(0.8, abs=1e-4)
    assert res.p == pytest.approx(1.3, abs=1e-4)
    assert res.loss < 1e-8 and res.converged and res.bt_scale is None
    assert res.at_bound == {"gamma": None, "p": None, "bt_scale": None}
    # expert on 1-5 mapped linearly onto the judge's 0-10: same answer
    res2 = F.fit_pointwise(score, length, 1 + expert * 0.4, expert_scale=(1, 5), judge_scale=(0, 10),
                           l_ref=400.0, clip=False)
    assert res2.gamma == pytest.approx(0.8, abs=1e-4) and res2.p == pytest.approx(1.3, abs=1e-4)


def test_pointwise_flags_a_bound_and_linear_penalty():
    rng = np.random.default_rng(4)
    length = np.exp(rng.uniform(3, 8, 200))
    score = rng.uniform(2, 8, 200)
    expert = score - polylog_penalty(length, 400.0, 0.5, 2.0)  # p = 2 outside [1, 1.5]
    res = F.fit_pointwise(score, length, expert, expert_scale=(0, 10), judge_scale=(0, 10), l_ref=400.0)
    assert res.at_bound["p"] == "upper" and res.p == 1.5
    lin = score - 0.7 * (length - 400.0) / 400.0
    res = F.fit_pointwise(score, length, lin, expert_scale=(0, 10), judge_scale=(0, 10), l_ref=400.0,
                          penalty="linear")
    assert res.gamma == pytest.approx(0.7, abs=1e-6) and res.p == 1.0


def test_weights_equal_repetition():
    sa, sb, la, lb, y = _pairs(60, seed=5)
    w = np.ones(60)
    w[:10] = 3.0
    rows = np.concatenate([np.arange(60), np.arange(10), np.arange(10)])
    r1 = F.fit_pairwise(sa, sb, la, lb, y, l_ref=150.0, scale=(0, 9), weights=w)
    r2 = F.fit_pairwise(sa[rows], sb[rows], la[rows], lb[rows], y[rows], l_ref=150.0, scale=(0, 9))
    assert r1.loss == pytest.approx(r2.loss, abs=1e-9)
    assert r1.bt_scale == pytest.approx(r2.bt_scale, abs=1e-4)
    assert r1.gamma == pytest.approx(r2.gamma, abs=1e-3)


def test_default_l_ref_is_the_median_length():
    sa, sb, la, lb, y = _pairs(50, seed=6)
    res = F.fit_pairwise(sa, sb, la, lb, y, scale=(0, 9))
    assert res.l_ref == float(np.median(np.concatenate([la, lb])))
    assert res.n == 50 and isinstance(res.to_dict(), dict)


def test_too_few_pairs_and_all_ties_raise_fit_error():
    sa, sb, la, lb, y = _pairs(9)
    with pytest.raises(FitError, match="too few"):
        F.fit_pairwise(sa, sb, la, lb, y, scale=(0, 9))
    sa, sb, la, lb, _ = _pairs(20)
    with pytest.raises(FitError, match="tie"):
        F.fit_pairwise(sa, sb, la, lb, np.full(20, 0.5), scale=(0, 9))
    with pytest.raises(FitError, match="too few"):
        F.fit_pointwise(sa[:5], la[:5], sb[:5], expert_scale=(0, 9), judge_scale=(0, 9))


def test_bad_inputs_raise_usage_error():
    sa, sb, la, lb, y = _pairs(20)
    with pytest.raises(UsageError, match="outcome"):
        F.fit_pairwise(sa, sb, la, lb, y + 0.2, scale=(0, 9))
    with pytest.raises(UsageError, match="p bounds"):
        F.fit_pairwise(sa, sb, la, lb, y, scale=(0, 9), p_bounds=(1.5, 1.0))
    with pytest.raises(UsageError, match="len_b"):
        F.fit_pairwise(sa, sb, la, lb[:5], y, scale=(0, 9))


def test_equal_lengths_make_the_penalty_unidentifiable():
    sa, sb, _, _, y = _pairs(30, seed=8)
    lengths = np.linspace(10, 400, 30)  # lengths vary across pairs, never within one
    with pytest.raises(FitError, match="same length"):
        F.fit_pairwise(sa, sb, lengths, lengths, y, scale=(0, 9))
    with pytest.raises(FitError, match="reference length"):
        F.fit_pointwise(sa, np.full(30, 7.0), sb, expert_scale=(0, 9), judge_scale=(0, 9))


@pytest.mark.parametrize("theta", [(0.3, 1.2, 0.8), (2.5, 1.45, 0.4), (-1.0, 1.1, 1.0)])
def test_clipped_bt_gradient_matches_finite_differences(theta):
    """The clip inside the objective: away from the kinks the (sub)gradient is the gradient."""
    sa, sb, la, lb, y = _pairs()
    sa, sb = sa + 0.37, sb + 0.29  # scores off the integer grid: no calibrated score sits on a scale end
    fa, fb = F._Feature(la, 150.0), F._Feature(lb, 150.0)
    w = np.full(la.size, 1.0 / la.size)
    kw = dict(score_a=sa, score_b=sb, clip=(0.0, 9.0))
    f = lambda t: F.bt_objective(t, sa - sb, fa, fb, y, w, **kw)[0]  # noqa: E731
    g = lambda t: F.bt_objective(t, sa - sb, fa, fb, y, w, **kw)[1]  # noqa: E731
    assert check_grad(f, g, np.array(theta), epsilon=1e-7) < 1e-5 * max(1.0, np.linalg.norm(g(np.array(theta))))


def test_the_fit_reports_the_loss_of_the_clipped_function():
    sa, sb, la, lb, y = _pairs(200, seed=9)
    res = F.fit_pairwise(sa, sb, la, lb, y, l_ref=150.0, scale=(0, 9))
    at = F.bt_loss_at(sa, sb, la, lb, y, gamma=res.gamma, p=res.p, l_ref=150.0, bt_scale=res.bt_scale, clip=(0, 9))
    assert res.loss == pytest.approx(at, rel=1e-12)
    unclipped = F.fit_pairwise(sa, sb, la, lb, y, l_ref=150.0, scale=(0, 9), clip=False)
    clipped_at_unclipped = F.bt_loss_at(sa, sb, la, lb, y, gamma=unclipped.gamma, p=unclipped.p, l_ref=150.0,
                                        bt_scale=unclipped.bt_scale, clip=(0, 9))
    assert res.loss <= clipped_at_unclipped + 1e-9  # the clipped fit is the better fit of the reported function


def test_signed_fit_recovers_a_negative_gamma_and_default_stays_non_negative():
    rng = np.random.default_rng(11)
    length = np.exp(rng.uniform(3, 8, 300))
    score = rng.uniform(3, 7, 300)
    expert = score - polylog_penalty(length, 400.0, -0.6, 1.2, signed=True)  # the judge favours short answers
    res = F.fit_pointwise(score, length, expert, expert_scale=(0, 10), judge_scale=(0, 10), l_ref=400.0, signed=True)
    assert res.gamma == pytest.approx(-0.6, abs=1e-3) and res.p == pytest.approx(1.2, abs=1e-3)
    plain = F.fit_pointwise(score, length, expert, expert_scale=(0, 10), judge_scale=(0, 10), l_ref=400.0)
    assert plain.gamma == 0.0 and plain.at_bound["gamma"] == "lower"
    with pytest.raises(UsageError, match="signed"):
        polylog_penalty(length, 400.0, -0.6, 1.2)
