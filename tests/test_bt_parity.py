"""Bradley-Terry scores (judgecal.calibrate.bt) against known answers and against direct
reference fits written here: scipy.optimize on the per-battle log-likelihood, and Arena-Hard-Auto's
recipe (logistic regression without penalty on its +-ln 10 design, then anchored at 1000) by
statsmodels, on the real AlpacaEval annotations (GPT-4-turbo's soft verdicts, 26 models)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.special import expit, log_expit

from judgecal.calibrate import bt

BASELINE = "gpt4_1106_preview"


def _fit(a, b, y, n_models, anchor=0, w=None, item=None):
    a, b, y = np.asarray(a), np.asarray(b), np.asarray(y, dtype=float)
    w = np.ones(a.size) if w is None else np.asarray(w, dtype=float)
    item = np.arange(a.size) if item is None else np.asarray(item)
    d = bt.make_design(a, b, y, w, item, n_models, int(item.max()) + 1)
    return d, bt.fit_bt(d, anchor)


# ------------------------------------------------------------------ known answers
def test_two_models_three_wins_in_four():
    _, f = _fit([1, 1, 1, 1], [0, 0, 0, 0], [1, 1, 1, 0], 2)
    assert f.converged
    assert f.coef[1] == pytest.approx(math.log(3), abs=1e-12)  # logit(3/4)
    r = bt.ratings(f.coef)
    assert r[0] == 1000.0 and r[1] == pytest.approx(1000 + 400 * math.log10(3), abs=1e-9)  # 1190.85
    assert bt.win_rate(r[1], r[0]) == pytest.approx(0.75, abs=1e-12)
    assert bt.win_rate(r[0], r[0]) == 0.5


def test_ties_count_half_and_sides_do_not_matter():
    # a win, two ties, a loss: even; the same battles written from the other side: the same fit
    _, f = _fit([1, 1, 1, 1], [0, 0, 0, 0], [1, 0.5, 0.5, 0], 2)
    assert abs(f.coef[1]) < 1e-12
    _, g = _fit([0, 1, 0, 1], [1, 0, 1, 0], [0, 0.5, 0.5, 0], 2)  # model 1 wins 1 (as b), 2 ties, loses 1 (as a)
    assert abs(g.coef[1]) < 1e-12
    # a tie is half a win: 1 win + 1 tie of 2 battles is 3/4 of the credit
    _, h = _fit([1, 1], [0, 0], [1, 0.5], 2)
    assert h.coef[1] == pytest.approx(math.log(3), abs=1e-12)


def test_weights_repeat_battles():
    # weight 3 on a win (Arena-Hard's A>>B counted three times) equals three battles
    _, f = _fit([1, 1], [0, 0], [1, 0], 2, w=[3, 1])
    _, g = _fit([1, 1, 1, 1], [0, 0, 0, 0], [1, 1, 1, 0], 2)
    assert f.coef[1] == pytest.approx(g.coef[1], abs=1e-12)


def test_cycle_is_even_and_anchor_moves_only_the_origin():
    # A beats B 2:1, B beats C 2:1, C beats A 2:1: every model equal
    a = [0, 0, 0, 1, 1, 1, 2, 2, 2]
    b = [1, 1, 1, 2, 2, 2, 0, 0, 0]
    y = [1, 1, 0] * 3
    _, f = _fit(a, b, y, 3)
    assert np.max(np.abs(f.coef)) < 1e-12
    # a chain with a known answer: B vs A 3:1 and C vs B 3:1 (no A-C battles): C at 2 ln 3 over A
    _, g = _fit([1] * 4 + [2] * 4, [0] * 4 + [1] * 4, [1, 1, 1, 0] * 2, 3)
    assert g.coef[2] == pytest.approx(2 * math.log(3), abs=1e-12)
    _, h = _fit([1] * 4 + [2] * 4, [0] * 4 + [1] * 4, [1, 1, 1, 0] * 2, 3, anchor=1)
    assert np.allclose(h.coef, g.coef - g.coef[1], atol=1e-12)


def test_models_without_a_finite_score_are_set_apart():
    # model 2 wins every battle, model 3 loses every one, model 4 has no battle linking it
    a = [1, 1, 1, 2, 2, 3, 3, 4]
    b = [0, 0, 0, 0, 1, 0, 1, 5]
    y = [1, 1, 0, 1, 1, 0, 0, 1]
    d, f = _fit(a, b, y, 6)
    assert f.set_apart == {2: "above", 3: "below", 4: "unlinked", 5: "unlinked"}
    assert f.coef[2] == math.inf and f.coef[3] == -math.inf and np.isnan(f.coef[4])
    assert f.coef[1] == pytest.approx(math.log(2), abs=1e-12)  # only the battles within the linked models
    assert bt.win_rate(bt.ratings(f.coef)[2], 1000.0) == 1.0


def test_bootstrap_is_seeded_and_resamples_items():
    rng = np.random.default_rng(3)
    n_items, m = 60, 4
    a = np.repeat(np.arange(1, m), n_items)
    b = np.zeros(a.size, dtype=int)
    item = np.tile(np.arange(n_items), m - 1)
    y = rng.random(a.size)
    d, f = _fit(a, b, y, m, item=item)
    b1 = bt.bootstrap_bt(d, 0, f, 200, seed=5)
    b2 = bt.bootstrap_bt(d, 0, f, 200, seed=5)
    assert np.array_equal(b1.coef, b2.coef) and b1.n_not_converged == 0
    # each resample equals a plain fit on the items drawn (multiplicities of resample_counts)
    from judgecal.calibrate.resample import resample_counts

    M = resample_counts(n_items, 200, np.random.default_rng(5))
    for r in (0, 17, 199):
        g = bt.fit_bt(d, 0, weights_of_items=M[r])
        assert np.allclose(b1.coef[r], g.coef, atol=1e-8)
    ci = bt.percentile_ci(b1.coef[:, 1])
    assert ci[0] < f.coef[1] < ci[1]


# ------------------------------------------------------------------ the real annotations
def _alpaca_battles(data_dir):
    """(model names, a, b, y, item codes): each annotation is one battle of the folder's model
    (generator_2; NullModel's file calls it 'example') against the baseline generator_1, credit
    P(model preferred) = preference - 1; the baseline's own file (itself on both sides) and null
    preferences are left out."""
    root = data_dir / "alpaca_eval" / "results"
    rows = []
    for path in sorted(root.glob("*/weighted_alpaca_eval_gpt4_turbo/annotations.json")):
        for r in json.loads(path.read_text(encoding="utf-8")):
            if r.get("preference") is None or r["generator_1"] == r["generator_2"]:
                continue
            rows.append((path.parts[-3], r["generator_1"], float(r["preference"]) - 1.0, r["instruction"]))
    models = sorted({x for r in rows for x in r[:2]})
    code = {n: i for i, n in enumerate(models)}
    items = {t: i for i, t in enumerate(sorted({r[3] for r in rows}))}
    a = np.array([code[r[0]] for r in rows])
    b = np.array([code[r[1]] for r in rows])
    y = np.array([r[2] for r in rows])
    it = np.array([items[r[3]] for r in rows])
    return models, a, b, y, it


@pytest.fixture(scope="module")
def alpaca(data_dir):
    models, a, b, y, it = _alpaca_battles(data_dir)
    anchor = models.index(BASELINE)
    d = bt.make_design(a, b, y, np.ones(a.size), it, len(models), int(it.max()) + 1)
    return models, a, b, y, it, anchor, d, bt.fit_bt(d, anchor)


def test_real_data_shape(alpaca):
    models, a, b, y, it, anchor, d, f = alpaca
    assert len(models) == 26 and a.size > 19000 and 0 < y.mean() < 1
    assert f.converged and not f.set_apart


def test_parity_with_scipy_on_the_battles(alpaca):
    """The per-battle log-likelihood (no merging), the anchor's coefficient fixed at 0,
    maximised by scipy's trust-region Newton method with its exact Hessian."""
    models, a, b, y, it, anchor, d, f = alpaca
    m = len(models)
    free = [i for i in range(m) if i != anchor]
    X = np.zeros((a.size, m))
    X[np.arange(a.size), a] += 1.0
    X[np.arange(a.size), b] -= 1.0
    X = X[:, free]

    def nll(t):
        eta = X @ t
        return -np.sum(y * log_expit(eta) + (1 - y) * log_expit(-eta))

    def grad(t):
        return -X.T @ (y - expit(X @ t))

    def hess(t):
        p = expit(X @ t)
        return (X * (p * (1 - p))[:, None]).T @ X

    ref = minimize(nll, np.zeros(m - 1), jac=grad, hess=hess, method="trust-exact", options={"gtol": 1e-9})
    # at the optimum to rounding: a gradient of 1e-9 moves no coefficient by more than ~1e-10 here
    # (the Hessian's smallest eigenvalue is of the order of 10)
    assert np.max(np.abs(grad(ref.x))) < 1e-8, ref.message
    assert np.linalg.eigvalsh(hess(ref.x))[0] > 1
    diff = np.max(np.abs(f.coef[free] - ref.x))
    assert diff < 1e-6, diff
    rd = np.max(np.abs(bt.ratings(f.coef)[free] - bt.ratings(np.insert(ref.x, anchor, 0.0))[free]))
    assert rd < 1e-6, rd


@pytest.mark.filterwarnings("ignore:The design matrix is rank-deficient")  # by design: a shift leaves L unchanged
def test_parity_with_arena_hard_recipe_statsmodels(alpaca):
    """Arena-Hard-Auto's compute_mle_elo: a logistic regression without penalty or intercept on
    X[a] = +ln 10, X[b] = -ln 10 over every model (shift-invariant: the minimum-norm solution),
    rating 400 beta + 1000, then shifted so that the baseline sits at 1000. statsmodels' GLM
    (binomial, soft outcomes as proportions) fits it."""
    sm = pytest.importorskip("statsmodels.api")
    models, a, b, y, it, anchor, d, f = alpaca
    m = len(models)
    X = np.zeros((a.size, m))
    X[np.arange(a.size), a] = math.log(10)
    X[np.arange(a.size), b] = -math.log(10)
    res = sm.GLM(y, X, family=sm.families.Binomial()).fit(method="newton", tol=1e-13, maxiter=200)
    elo = 400 * res.params + 1000
    elo += 1000 - elo[anchor]
    diff = np.max(np.abs(bt.ratings(f.coef) - elo))
    assert diff < 1e-6, diff
    # show_result.py's win rate against the baseline from the ratings (predict_win_rate)
    wr_ref = 1 / (1 + 10 ** ((elo[anchor] - elo) / 400))
    assert np.max(np.abs(bt.win_rate(bt.ratings(f.coef), 1000.0) - wr_ref)) < 1e-9
    # every model here battles only the baseline: the win rate is the logit-mean credit, not the mean;
    # the known answer of a star design: each model's own two-model fit
    for i in (models.index("alpaca-7b"), models.index("claude-2")):
        sel = a == i
        own = bt.fit_bt(bt.make_design(a[sel], b[sel], y[sel], np.ones(sel.sum()), it[sel], m, int(it.max()) + 1), anchor)
        assert own.coef[i] == pytest.approx(f.coef[i], abs=1e-9)
