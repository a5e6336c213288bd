"""Known answers for the win-rate maths (judgecal.calibrate.winrate, glm_lc, winrate_penalty)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import kendalltau, spearmanr

from judgecal.calibrate import glm_lc
from judgecal.calibrate.winrate import (
    discrete_win_rate,
    length_preference,
    position_consistency,
    rank_correlation,
    win_rate,
)
from judgecal.calibrate.winrate_penalty import fit_penalty, implied_verbosity_win_rate, pair_penalty
from judgecal.errors import UsageError


def test_win_rate_by_hand_ties_soft_and_missing():
    # AlpacaEval preferences 2, 1, 1.5 (tie), 1.75 (soft) and a null -> p - 1 = 1, 0, .5, .75, nan
    pref = [1.0, 0.0, 0.5, 0.75, float("nan")]
    assert win_rate(pref) == pytest.approx(100 * (1 + 0 + 0.5 + 0.75) / 4)  # 56.25: the null is left out
    assert discrete_win_rate(pref) == pytest.approx(100 * (1 + 0 + 0.5 + 1) / 4)  # 62.5: 0.75 rounds to a win
    assert math.isnan(win_rate([float("nan")]))


def test_position_consistency_of_a_judge_that_always_answers_A():
    # the judge says "A" (the first shown) whatever the order: P(a) = 1 in 'ab', P(a) = 0 in 'ba'
    pc = position_consistency([1.0] * 10, [0.0] * 10, n_bootstrap=200)
    assert pc["n_pairs"] == 10
    assert pc["consistent"] == 0.0 and pc["flip_rate"] == 1.0
    assert pc["first_position_preference"] == 1.0
    # a perfectly consistent judge that prefers a: no flips, no position preference
    pc = position_consistency([1.0, 0.0], [1.0, 0.0], n_bootstrap=0)
    assert pc["consistent"] == 1.0 and pc["first_position_preference"] == 0.5
    # by hand: pairs (ab=.9, ba=.8) consistent, (ab=.9, ba=.2) flips -> 1/2; first = ((.9+.2)/2 + (.9+.8)/2)/2
    pc = position_consistency([0.9, 0.9], [0.8, 0.2], n_bootstrap=0)
    assert pc["consistent"] == 0.5
    assert pc["first_position_preference"] == pytest.approx(((0.9 + 0.2) / 2 + (0.9 + 0.8) / 2) / 2)


def test_length_preference_by_hand():
    lp = length_preference([1.0, 0.0, 0.5, 1.0], [100, 100, 50, 10], [10, 10, 5, 10])
    # decided, unequal lengths: rows 0 (a longer, a preferred) and 1 (a longer, b preferred) -> 1/2
    assert lp == {"n": 2, "longer_preferred": 0.5}


def test_pair_penalty_seed_worked_example_and_floor():
    # DESIGN.md: L = 1200, L_ref = 300, gamma = 0.5, p = 1.2 -> penalty 0.74
    assert 0.5 * pair_penalty([1200], [300], 1.2)[0] == pytest.approx(0.5 * math.log(4) ** 1.2)
    assert 0.5 * pair_penalty([1200], [300], 1.2)[0] == pytest.approx(0.74, abs=0.005)
    # the short side saturates at the floor: 10 vs 1000 counts as 1/4 of the baseline's length
    assert pair_penalty([10], [1000], 1.0, floor=0.25)[0] == pytest.approx(-math.log(4))
    assert pair_penalty([10], [1000], 1.0, floor=1e-9)[0] == pytest.approx(math.log(10 / 1000))
    with pytest.raises(UsageError):
        pair_penalty([1], [1], 1.0, floor=0.0)


def test_rank_correlation_matches_scipy():
    a = [5.0, 3.0, 4.0, 1.0, 2.0, 2.0]
    b = [50.0, 20.0, 40.0, 30.0, 10.0, 11.0]
    rc = rank_correlation(a, b, n_bootstrap=300)
    assert rc["spearman"] == pytest.approx(spearmanr(a, b).statistic)
    assert rc["kendall"] == pytest.approx(kendalltau(a, b).statistic)
    assert rc["spearman_ci"][0] <= rc["spearman"] <= rc["spearman_ci"][1]
    assert rank_correlation([1, 2], [1, 2])["spearman"] is None


def test_std_delta_len_by_hand():
    t = glm_lc.std_delta_len([100, 200, 300], [300, 200, 100])
    d = np.array([200.0, 0.0, -200.0])
    assert np.allclose(t, np.tanh(d / d.std(ddof=1)))


def test_lc_glm_recovers_planted_weights_and_zero_length_prediction():
    rng = np.random.default_rng(0)
    n = 4000
    t = np.tanh(rng.normal(size=n))
    d = rng.normal(size=n)
    w = (-1.5, 0.8, -1.0)
    p = 1 / (1 + np.exp(-(w[0] * t + w[1] * d + w[2])))
    fit = glm_lc.fit_lc(p, t, d, cv=False)  # soft labels equal to the model's own probabilities
    assert (fit.w_len, fit.w_diff, fit.w_bias) == pytest.approx(w, abs=1e-3)
    assert fit.lc_win_rate == pytest.approx(100 * np.mean(1 / (1 + np.exp(-(w[1] * d + w[2])))), abs=1e-3)
    cvfit = glm_lc.fit_lc(p, t, d)
    assert cvfit.C in glm_lc.C_GRID
    assert cvfit.w_len == pytest.approx(w[0], abs=0.05)


def test_penalty_fit_recovers_a_planted_length_bias():
    rng = np.random.default_rng(1)
    M, N = 4, 600
    model = np.repeat(np.arange(M), N)
    lb = rng.uniform(200, 2000, M * N)
    lm = lb * np.exp(rng.normal(0, 0.6, M * N))
    theta = np.array([-1.0, 0.0, 0.5, -2.0])
    gamma = 0.8
    pen = pair_penalty(lm, lb, 1.0, floor=1e-9)
    y = 1 / (1 + np.exp(-(theta[model] + gamma * pen)))
    fit = fit_penalty(model, y, lm, lb, np.zeros(M * N), M, p_bounds=(1.0, 1.5), floor=1e-9)
    assert fit.gamma == pytest.approx(gamma, abs=1e-3)
    assert fit.p == pytest.approx(1.0, abs=1e-3)
    assert fit.theta == pytest.approx(theta, abs=1e-2)
    # calibrated preference = the model's strength at equal length
    assert fit.p_cal[:N] == pytest.approx(1 / (1 + np.exp(1.0)), abs=1e-2)


def test_implied_verbosity_win_rate_by_hand():
    # logit(.8) - logit(.5) = ln 4 -> 0.8 ; same predictions -> 50
    assert implied_verbosity_win_rate([0.8], [0.5]) == pytest.approx(80.0)
    assert implied_verbosity_win_rate([0.3, 0.6], [0.3, 0.6]) == pytest.approx(50.0)


def test_batched_lc_equals_one_model_fits_and_each_model_alone():
    """glm_lc.fit_lc_many (every model, fold and C at once) gives each model the fit it gets
    alone, and the same as the one-model solver at a fixed C (to the latter's tolerance)."""
    rng = np.random.default_rng(3)
    gd = rng.normal(size=300)
    gt = np.tanh(rng.normal(size=300))
    gamed = [(1 / (1 + np.exp(-(-1.6 * gt + 0.8 * gd))), gt, gd)]
    models = []
    for k, n in enumerate((400, 250, 8)):
        t, d = np.tanh(rng.normal(size=n)), rng.normal(size=n)
        p = 1 / (1 + np.exp(-(-1.0 * t + 0.7 * d + 0.3 * k - 0.5)))
        models.append((np.where(rng.random(n) < 0.02, np.nan, p), t, d))
    many = glm_lc.fit_lc_many(models, gamed)
    for i, m in enumerate(models):
        alone = glm_lc.fit_lc_many([m], gamed)[0]
        assert (many[i].w_len, many[i].w_diff, many[i].w_bias, many[i].C) == pytest.approx(
            (alone.w_len, alone.w_diff, alone.w_bias, alone.C), abs=1e-6)
        one = glm_lc.fit_lc(*m, gamed=gamed)
        assert many[i].lc_win_rate == pytest.approx(one.lc_win_rate, abs=0.3)
    assert many[2].C is None  # fewer than 2 * folds verdicts: no cross-validation, as fit_lc


def test_difficulty_from_weights_recovers_planted_difficulty():
    rng = np.random.default_rng(4)
    N, M = 60, 40
    d = rng.normal(0, 1.5, N)
    W = np.stack([rng.uniform(-2, -1, M), rng.uniform(0.5, 1.2, M), rng.normal(0, 1, M)], 1)
    item, model = np.tile(np.arange(N), M), np.repeat(np.arange(M), N)
    t = np.tanh(rng.normal(size=N * M))
    pref = 1 / (1 + np.exp(-(W[model, 0] * t + W[model, 1] * d[item] + W[model, 2])))
    est = glm_lc.difficulty_from_weights(item, model, pref, t, W, N)
    assert est == pytest.approx(d, abs=0.03)  # the small ridge shrinks the extremes a little


def test_poisson_bootstrap_weights_depend_on_the_instruction_only():
    from judgecal.calibrate.winrate import bootstrap_means, item_weights

    a = item_weights(["x", "y", "z"], 200, seed=1)
    b = item_weights(["z", "x"], 200, seed=1)
    assert np.array_equal(a[:, 0], b[:, 1]) and np.array_equal(a[:, 2], b[:, 0])
    assert not np.array_equal(a, item_weights(["x", "y", "z"], 200, seed=2))
    ci = bootstrap_means(np.array([[0.0], [1.0], [0.5]]), a)[0]
    assert 0 <= ci[0] < 50 < ci[1] <= 100
