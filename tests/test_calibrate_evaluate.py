"""evaluate_pairwise / evaluate_pointwise on real LLMBar ratings and on planted data."""

import json
from pathlib import Path

import numpy as np
import pytest

from judgecal.calibrate.data import PairData, PointData, VerbosityData
from judgecal.calibrate.evaluate import (
    evaluate_pairwise,
    evaluate_pointwise,
    evaluate_verbosity_only,
    make_folds,
)
from judgecal.calibrate.penalty import polylog_penalty, token_entropy
from judgecal.errors import FitError

from judgecal.config import shared_data_dir  # noqa: E402
DATA = shared_data_dir()

METHODS = {"raw", "linear", "polylog", "lowess", "lc_glm"}


def llmbar_pairs(family="Natural", judge="ChatGPT"):
    import ast

    path = DATA / "llmbar" / family / f"ratings_{judge}.json"
    if not path.exists():
        pytest.skip(f"real data missing: {path} (../shared/data not present)")
    rows = []
    for i, rec in enumerate(json.loads(path.read_text())):
        res = rec["results"]
        res = ast.literal_eval(res) if isinstance(res, str) else res
        a, b = res[0]["score_1"][0], res[0]["score_2"][0]
        if a == "" or b == "":
            continue
        rows.append((i, float(a), float(b), len(rec["output_1"].split()), len(rec["output_2"].split()),
                     1.0 if int(rec["label"]) == 1 else 0.0,
                     token_entropy(rec["output_1"]), token_entropy(rec["output_2"])))
    a = np.array(rows)
    return PairData(a[:, 0].astype(int), a[:, 1], a[:, 2], a[:, 3], a[:, 4], a[:, 5], a[:, 6], a[:, 7])


@pytest.fixture(scope="module")
def natural_result():
    return evaluate_pairwise(llmbar_pairs(), scale=(0, 9), n_bootstrap=30, seed=0)


def test_pairwise_result_on_llmbar_natural(natural_result):
    r = natural_result
    json.dumps(r, allow_nan=False)  # plain JSON, no NaN
    assert r["kind"] == "pairwise" and r["fitted"] is True and r["n"] == 100 and r["n_items"] == 100
    assert set(r["methods"]) == METHODS
    raw = r["methods"]["raw"]
    assert raw["agreement"] == pytest.approx(0.685)  # the known LLMBar figure
    assert raw["agreement_cv"] == pytest.approx(0.685)  # raw has no parameter to fit
    lo, hi = raw["agreement_ci"]
    assert lo <= 0.685 <= hi
    params = r["params"]
    for key in ("gamma", "p", "l_ref", "bt_scale", "gamma_ci", "p_ci", "at_bound", "converged", "loss", "n"):
        assert key in params
    assert 1.0 <= params["p"] <= 1.5 and params["gamma"] >= 0
    assert r["l_ref"] == params["l_ref"] == 23.0  # median whitespace-word length
    assert r["methods"]["lc_glm"]["slope"] is None
    assert 0 <= r["expert_length_preference"] <= 1
    pts = r["points"]["labelled"]
    assert len(pts["score_raw"]) == len(pts["score_calibrated"]) == len(pts["length"]) == 200
    assert all(0 <= s <= 9 for s in pts["score_calibrated"])
    assert all(isinstance(w, str) for w in r["warnings"])
    for name, m in r["methods"].items():
        assert set(m) >= {"agreement", "agreement_cv", "agreement_ci", "verbosity_win_rate",
                          "verbosity_win_rate_ci", "length_preference", "slope"}, name


def test_seeded_results_are_reproducible(natural_result):
    again = evaluate_pairwise(llmbar_pairs(), scale=(0, 9), n_bootstrap=30, seed=0)
    assert again == natural_result


def test_bootstrap_zero_skips_every_ci():
    r = evaluate_pairwise(llmbar_pairs(), scale=(0, 9), n_bootstrap=0, folds=3)
    assert r["params"]["gamma_ci"] is None and r["params"]["p_ci"] is None
    assert all(m["agreement_ci"] is None for m in r["methods"].values())
    assert r["folds"] == 3


def test_folds_are_grouped_by_item_and_seeded():
    items = np.repeat(np.arange(20), 3)
    fold, k = make_folds(items, 5, seed=7)
    assert k == 5
    for it in range(20):
        assert len(set(fold[items == it])) == 1
    assert np.bincount(fold[::3]).tolist() == [4, 4, 4, 4, 4]
    np.testing.assert_array_equal(fold, make_folds(items, 5, seed=7)[0])
    assert make_folds(np.zeros(5), 5, 0)[1] == 1  # one item: no CV


def test_verbosity_pairs_and_the_no_label_case():
    v = VerbosityData([5, 6, 7, 7], [8, 6, 9, 6], [50, 60, 40, 30], [500, 600, 400, 300])
    r = evaluate_pairwise(None, verbosity_pairs=v, n_bootstrap=50)
    assert r["fitted"] is False and "no expert labels" in r["no_fit_reason"]
    assert r["params"] is None
    assert r["methods"]["raw"]["verbosity_win_rate"] == pytest.approx(0.625)
    json.dumps(r, allow_nan=False)
    with pytest.raises(FitError):
        evaluate_pairwise(None)
    with pytest.raises(FitError):
        evaluate_verbosity_only(None)


def _planted_pairs(n=600, gamma=1.0, p=1.2, seed=0):
    rng = np.random.default_rng(seed)
    la, lb = np.exp(rng.normal(5, 0.9, n)), np.exp(rng.normal(5, 0.9, n))
    l_ref = float(np.median(np.concatenate([la, lb])))
    qa, qb = rng.uniform(1, 8, n), rng.uniform(1, 8, n)
    sa = np.clip(qa + polylog_penalty(la, l_ref, gamma, p) + rng.normal(0, 0.3, n), 0, 10)
    sb = np.clip(qb + polylog_penalty(lb, l_ref, gamma, p) + rng.normal(0, 0.3, n), 0, 10)
    y = (rng.random(n) < 1 / (1 + np.exp(-2 * (qa - qb)))).astype(float)
    return PairData(np.arange(n) // 2, sa, sb, la, lb, y), l_ref


def test_calibration_helps_on_planted_length_bias_with_verbosity_pairs():
    d, l_ref = _planted_pairs()
    rng = np.random.default_rng(9)
    q = rng.uniform(2, 7, 200)  # same content, verbose is 9x longer: judge inflates it
    lc, lv = np.full(200, l_ref / 3), np.full(200, l_ref * 3)
    v = VerbosityData(q + polylog_penalty(lc, l_ref, 1.0, 1.2) + rng.normal(0, 0.3, 200),
                      q + polylog_penalty(lv, l_ref, 1.0, 1.2) + rng.normal(0, 0.3, 200), lc, lv)
    r = evaluate_pairwise(d, scale=(0, 10), n_bootstrap=20, verbosity_pairs=v, seed=1)
    m = r["methods"]
    assert m["raw"]["verbosity_win_rate"] > 0.9
    assert abs(m["polylog"]["verbosity_win_rate"] - 0.5) < 0.15
    assert m["polylog"]["agreement_cv"] > m["raw"]["agreement_cv"]
    assert r["params"]["gamma_ci"][0] <= r["params"]["gamma"] <= r["params"]["gamma_ci"][1]
    assert len(r["points"]["verbosity"]["score_raw"]) == 400
    assert m["polylog"]["n_bootstrap"] == 20


def test_density_exemption_runs_and_is_recorded():
    r = evaluate_pairwise(llmbar_pairs(), scale=(0, 9), n_bootstrap=0, density=True)
    assert r["density"] is True
    assert set(r["params"]["density"]) == {"h_ref", "w"} and r["params"]["density"]["w"] == 0.5


def test_pointwise_evaluation_on_planted_data():
    rng = np.random.default_rng(3)
    n = 200
    length = np.exp(rng.normal(5, 0.9, n))
    expert = rng.uniform(1, 5, n)  # experts on 1-5, judge on 0-10
    judge_q = (expert - 1) * 2.5
    score = np.clip(judge_q + polylog_penalty(length, float(np.median(length)), 1.0, 1.3)
                    + rng.normal(0, 0.3, n), 0, 10)
    d = PointData(np.arange(n) // 2, score, length, expert)
    r = evaluate_pointwise(d, expert_scale=(1, 5), scale=(0, 10), n_bootstrap=20)
    json.dumps(r, allow_nan=False)
    m = r["methods"]
    assert set(m) == {"raw", "linear", "polylog", "lowess"}
    assert m["polylog"]["spearman_cv"] > m["raw"]["spearman_cv"]
    assert m["polylog"]["mae_cv"] < m["raw"]["mae_cv"]
    assert r["params"]["gamma"] == pytest.approx(1.0, abs=0.2)


def test_resample_helpers_match_repeated_rows():
    from judgecal.calibrate.metrics import score_length_slope
    from judgecal.calibrate.resample import resample_counts, weighted_means, weighted_slopes

    W = resample_counts(30, 5, np.random.default_rng(0))
    assert W.shape == (5, 30) and np.all(W.sum(axis=1) == 30)
    rng = np.random.default_rng(1)
    s, length = rng.uniform(0, 9, 30), rng.uniform(1, 500, 30)
    slopes = weighted_slopes(np.tile(s, (5, 1)), np.log(length), W)
    means = weighted_means(np.tile(s, (5, 1)), W)
    for b in range(5):
        rows = np.repeat(np.arange(30), W[b].astype(int))
        assert slopes[b] == pytest.approx(score_length_slope(s[rows], length[rows]), rel=1e-10)
        assert means[b] == pytest.approx(s[rows].mean(), rel=1e-12)
