"""Every method behind the common interface: known formulas and planted recoveries."""

import numpy as np
import pytest

from judgecal.calibrate.baselines import FitContext, LcGlm, Linear, Lowess, PolyLog, Raw
from judgecal.calibrate.data import PairData, PointData
from judgecal.calibrate.penalty import polylog_penalty
from judgecal.errors import FitError, InputError


def test_raw_is_identity_and_orders_pairs():
    d = PointData(np.arange(3), [1.0, 5.0, 3.0], [10, 20, 30], [1, 2, 3])
    f = Raw().fit(d, FitContext(l_ref=20.0, scale=(0, 9)))
    np.testing.assert_array_equal(f.calibrate(d.score, d.length), d.score)
    np.testing.assert_array_equal(f.predict_pair([1, 2, 2], [2, 2, 1], [1, 1, 1], [1, 1, 1]), [0, 0.5, 1])


def test_linear_and_polylog_apply_their_formulas_with_clip():
    rng = np.random.default_rng(0)
    length = np.exp(rng.uniform(3, 7, 200))
    score = rng.uniform(2, 8, 200)
    expert = score - 0.6 * (length - 300.0) / 300.0
    d = PointData(np.arange(200), score, length, expert)
    ctx = FitContext(l_ref=300.0, scale=(0, 10), expert_scale=(0, 10))
    lin = Linear().fit(d, ctx)
    assert lin.params["gamma"] == pytest.approx(0.6, abs=1e-5)
    new_s, new_l = np.array([5.0, 9.5, 5.0]), np.array([600.0, 0.0, 30000.0])
    np.testing.assert_allclose(lin.calibrate(new_s, new_l),
                               np.clip(new_s - 0.6 * (new_l - 300) / 300, 0, 10), atol=1e-4)
    # polylog is fitted with the short-side floor of the context (default 1/4): planted with the
    # floored penalty, it recovers gamma and p and applies the floored formula (L = 0 earns the
    # credit of L = 75, a quarter of L_ref)
    expert2 = score - polylog_penalty(length, 300.0, 0.4, 1.2, floor=0.25)
    poly = PolyLog().fit(PointData(np.arange(200), score, length, expert2), ctx)
    assert ctx.short_floor == 0.25 and poly.params["short_floor"] == 0.25
    assert (poly.params["gamma"], poly.params["p"]) == (pytest.approx(0.4, abs=1e-4), pytest.approx(1.2, abs=1e-4))
    np.testing.assert_allclose(poly.calibrate(new_s, new_l),
                               np.clip(new_s - polylog_penalty(new_l, 300, 0.4, 1.2, floor=0.25), 0, 10), atol=1e-3)
    assert poly.calibrate(np.array([5.0]), np.array([0.0]))[0] == pytest.approx(5.0 + 0.4 * np.log(4) ** 1.2, abs=1e-3)
    # without a floor (short_floor None): the seed formula as written, unbounded short side
    ctx0 = FitContext(l_ref=300.0, scale=(0, 10), expert_scale=(0, 10), short_floor=None)
    expert3 = score - polylog_penalty(length, 300.0, 0.4, 1.2)
    poly0 = PolyLog().fit(PointData(np.arange(200), score, length, expert3), ctx0)
    assert poly0.params["short_floor"] is None
    assert (poly0.params["gamma"], poly0.params["p"]) == (pytest.approx(0.4, abs=1e-4), pytest.approx(1.2, abs=1e-4))
    np.testing.assert_allclose(poly0.calibrate(new_s, new_l),
                               np.clip(new_s - polylog_penalty(new_l, 300, 0.4, 1.2), 0, 10), atol=1e-3)


def test_lowess_removes_a_log_linear_trend_and_keeps_the_mean():
    rng = np.random.default_rng(1)
    length = np.round(np.exp(rng.uniform(2, 7, 300)))
    score = 1.0 + 0.8 * np.log(length)  # exactly linear in ln L: LOWESS reproduces it
    d = PointData(np.arange(300), score, length, score)
    f = Lowess().fit(d, FitContext(l_ref=100.0, scale=(0, 10)))
    cal = f.calibrate(score, length)
    assert cal.mean() == pytest.approx(score.mean(), abs=1e-9)  # re-centred
    np.testing.assert_allclose(cal, score.mean(), atol=1e-6)  # trend removed
    # out of sample: interpolation inside the range, constant beyond its ends
    new_len = np.array([np.exp(4.5), np.exp(9.0)])
    out = f.calibrate(np.array([5.0, 5.0]), new_len)
    assert out[0] == pytest.approx(5.0 - (1.0 + 0.8 * 4.5) + score.mean(), abs=0.02)
    assert out[1] == pytest.approx(5.0 - (1.0 + 0.8 * np.log(length.max())) + score.mean(), abs=1e-6)


def test_lc_glm_recovers_a_planted_glm_and_drops_its_length_term():
    rng = np.random.default_rng(2)
    n = 20_000
    sa, sb = rng.integers(0, 10, n).astype(float), rng.integers(0, 10, n).astype(float)
    la, lb = rng.uniform(10, 500, n), rng.uniform(10, 500, n)
    sd = np.std(la - lb)
    z = 0.9 * (sa - sb) - 1.2 * np.tanh((la - lb) / sd)
    y = (rng.random(n) < 1 / (1 + np.exp(-z))).astype(float)
    d = PairData(np.arange(n), sa, sb, la, lb, y)
    f = LcGlm().fit(d, FitContext(l_ref=200.0, scale=(0, 9)))
    assert f.params["theta"] == pytest.approx(0.9, abs=0.05)
    assert f.params["phi"] == pytest.approx(-1.2, abs=0.1)
    assert f.calibrate(sa, la) is None
    p_lc = f.predict_pair(sa, sb, la, lb, length_term=False)  # AlpacaEval: term removed
    np.testing.assert_array_equal(np.sign(p_lc - 0.5), np.sign(sa - sb))
    p_full = f.predict_pair(sa[:1], sb[:1], la[:1], lb[:1])
    assert p_full[0] == pytest.approx(1 / (1 + np.exp(-(f.params["theta"] * (sa[0] - sb[0])
                                                         + f.params["phi"] * np.tanh((la[0] - lb[0]) / f.params["sd"])))))
    with pytest.raises(FitError):
        LcGlm().fit(d.take(np.arange(5)), FitContext(l_ref=200.0, scale=(0, 9)))


def test_data_containers_name_the_bad_field():
    with pytest.raises(InputError, match="outcome"):
        PairData([1, 2], [1, 2], [2, 1], [5, 5], [5, 5], [1.0, 2.0])
    with pytest.raises(InputError, match="len_a"):
        PairData([1, 2], [1, 2], [2, 1], [-5, 5], [5, 5], [1.0, 0.0])
    with pytest.raises(InputError, match="score_b"):
        PairData([1, 2], [1, 2], [2, float("nan")], [5, 5], [5, 5], [1.0, 0.0])
    with pytest.raises(InputError, match="expert"):
        PointData([1, 2], [1, 2], [3, 4], [1])


def test_batch_refits_equal_one_by_one_lbfgsb_refits():
    from judgecal.calibrate.resample import resample_counts

    rng = np.random.default_rng(4)
    n = 120
    la, lb = np.exp(rng.normal(4, 1, n)), np.exp(rng.normal(4, 1, n))
    qa, qb = rng.uniform(0, 9, n), rng.uniform(0, 9, n)
    sa, sb = np.round(qa + 0.3 * np.log(la)), np.round(qb + 0.3 * np.log(lb))
    y = (rng.random(n) < 1 / (1 + np.exp(-(qa - qb)))).astype(float)
    d = PairData(np.arange(n), sa, sb, la, lb, y)
    ctx = FitContext(l_ref=float(np.median(np.r_[la, lb])), scale=(0, 12))
    W = resample_counts(n, 6, np.random.default_rng(0))
    for method in (Linear(), LcGlm()):
        full = method.fit(d, ctx)
        batch = method.fit_batch(d, ctx, W, start=full)
        for b in range(len(W)):
            one = method.fit(d, ctx, start=full, weights=W[b])
            if method.name == "lc_glm":  # batch keeps the full-data sd: compare on it
                one = method._fit(d, ctx, full, W[b], full.params["sd"])
            for key in ("gamma", "bt_scale", "theta", "phi"):
                if key in one.params:
                    assert batch[b].params[key] == pytest.approx(one.params[key], rel=1e-4, abs=1e-6)
    # pointwise linear: closed form equals the L-BFGS-B least squares
    pd_ = PointData(np.arange(n), sa, la, np.clip(qa, 0, 9))
    pctx = FitContext(l_ref=ctx.l_ref, scale=(0, 12), expert_scale=(0, 12))
    full = Linear().fit(pd_, pctx)
    batch = Linear().fit_batch(pd_, pctx, W, start=full)
    for b in range(len(W)):
        one = Linear().fit(pd_, pctx, weights=W[b])
        assert batch[b].params["gamma"] == pytest.approx(one.params["gamma"], rel=1e-4, abs=1e-6)


def test_weighted_spearman_equals_spearman_on_repeated_rows():
    from scipy.stats import spearmanr

    from judgecal.calibrate.metrics import weighted_spearman

    rng = np.random.default_rng(5)
    x, y = rng.integers(0, 5, 40).astype(float), rng.integers(0, 7, 40).astype(float)  # ties
    w = rng.integers(0, 4, 40).astype(float)
    rows = np.repeat(np.arange(40), w.astype(int))
    assert weighted_spearman(x, y, w) == pytest.approx(spearmanr(x[rows], y[rows]).statistic, abs=1e-12)
