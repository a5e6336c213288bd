"""Style control of the Bradley-Terry board (issue 34 item 3): Arena-Hard-Auto's style covariates
(judgecal.calibrate.stylecontrol) against hand-computed values, the controlled fit against direct
reference fits with the same design matrix (statsmodels Logit and scipy on the same likelihood)
on a hand-made set with a known answer and on the real AlpacaEval annotations (26 models), and
``judgecal bt --control`` read from SQLite and PostgreSQL in every format."""

from __future__ import annotations

import csv
import io
import json
import math

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.special import expit, log_expit

from judgecal.calibrate import bt
from judgecal.calibrate import stylecontrol as sc
from judgecal.calibrate.style import style_counts

BASE = "gpt4_1106_preview"


# ------------------------------------------------------------------ the features
def test_raw_features_known_values():
    # a: 30 units, 3 headers, 6 list items, 0 bold; b: 10 units, 0 headers, 1 list item, 2 bold
    raw = sc.raw_features([30, 0, 5], [10, 0, 0], [[3, 6, 0], [0, 0, 0], [1, 0, 0]], [[0, 1, 2], [0, 0, 0], [0, 0, 0]])
    assert raw[0, 0] == pytest.approx(20 / 40)
    da, db = np.array([0.1, 0.2, 0.0]), np.array([0.0, 0.1, 0.2])
    assert np.allclose(raw[0, 1:], (da - db) / (da + db + 1), atol=1e-15)
    assert raw[0, 1] == pytest.approx(0.1 / 1.1) and raw[0, 3] == pytest.approx(-0.2 / 1.2)
    # two empty answers: no difference; an empty answer against a 5-unit one: length 1, densities 0 for it
    assert np.array_equal(raw[1], np.zeros(4))
    assert raw[2, 0] == 1.0 and raw[2, 1] == pytest.approx(0.2 / 1.2)
    with pytest.raises(ValueError):
        sc.raw_features([-1], [1], [[0, 0, 0]], [[0, 0, 0]])


def test_standardised_with_the_sample_sd_and_constant_columns_left_out():
    raw = np.array([[0.5, 0.0, 0.1, 0.0], [-0.5, 0.0, 0.3, 0.0], [0.0, 0.0, 0.2, 0.0]])
    Z, cols, left = sc.style_matrix(raw, "both")
    assert [c["feature"] for c in cols] == ["length", "lists"] and left == ["headers", "bold"]
    assert cols[0]["sd"] == pytest.approx(0.5) and cols[1]["sd"] == pytest.approx(0.1)  # n - 1 in the denominator
    assert np.allclose(Z, [[1, -1], [-1, 1], [0, 0]])
    Z, cols, left = sc.style_matrix(raw, "length")
    assert Z.shape == (3, 1) and not left
    with pytest.raises(ValueError):
        sc.style_matrix(raw, "none")
    assert sc.meaning("length", math.log(2)).endswith("by 2.000")


# ------------------------------------------------------------------ reference fits
def _reference(X, y, w=None):
    """The same likelihood maximised by scipy (trust-region Newton, exact Hessian) and by
    statsmodels' Logit (fractional outcomes as proportions: its likelihood is the same sum)."""
    w = np.ones(y.size) if w is None else w

    def nll(t):
        eta = X @ t
        return -np.sum(w * (y * log_expit(eta) + (1 - y) * log_expit(-eta)))

    def grad(t):
        return -X.T @ (w * (y - expit(X @ t)))

    def hess(t):
        p = expit(X @ t)
        return (X * (w * p * (1 - p))[:, None]).T @ X

    ref = minimize(nll, np.zeros(X.shape[1]), jac=grad, hess=hess, method="trust-exact", options={"gtol": 1e-10})
    assert np.max(np.abs(grad(ref.x))) < 1e-7, ref.message
    return ref.x


def _design_matrix(a, b, Z, m, anchor):
    X = np.zeros((a.size, m))
    X[np.arange(a.size), a] += 1.0
    X[np.arange(a.size), b] -= 1.0
    free = [i for i in range(m) if i != anchor]
    return np.hstack([X[:, free], Z]), free


def test_known_answer_two_cells():
    """Two models, one covariate at +1 or -1 (20 battles each): a saturated model, fitted
    exactly: logit(3/4) = theta + gamma, logit(1/2) = theta - gamma, so theta = gamma = ln(3)/2."""
    a = np.ones(40, dtype=int)
    b = np.zeros(40, dtype=int)
    z = np.repeat([1.0, -1.0], 20)[:, None]
    y = np.concatenate([np.repeat([1.0, 1.0, 1.0, 0.0], 5), np.repeat([1.0, 0.0], 10)])
    d = bt.make_design(a, b, y, np.ones(40), np.arange(40), 2, 40, features=z)
    f = bt.fit_bt(d, 0)
    assert f.converged
    assert f.coef[1] == pytest.approx(math.log(3) / 2, abs=1e-12)
    assert f.gamma[0] == pytest.approx(math.log(3) / 2, abs=1e-12)
    X, _ = _design_matrix(a, b, z, 2, 0)
    assert np.allclose(_reference(X, y), [f.coef[1], f.gamma[0]], atol=1e-9)
    sm = pytest.importorskip("statsmodels.api")
    res = sm.Logit(y, X).fit(method="newton", tol=1e-12, maxiter=100, disp=0)
    assert np.allclose(res.params, [f.coef[1], f.gamma[0]], atol=1e-8)
    # the bootstrap: seeded, each resample an ordinary fit of the items drawn
    boot = bt.bootstrap_bt(d, 0, f, 200, seed=4)
    from judgecal.calibrate.resample import resample_counts

    M = resample_counts(40, 200, np.random.default_rng(4))
    for r in (0, 99):
        g = bt.fit_bt(d, 0, weights_of_items=M[r])
        if g.converged and not g.set_apart:
            assert np.allclose(boot.gamma[r], g.gamma, atol=1e-8)
    lo, hi = bt.percentile_ci(boot.gamma[:, 0])
    assert lo < f.gamma[0] < hi


def _alpaca(data_dir, names=None):
    """Battles of every model's folder against the baseline from the annotations files: a =
    the folder's model (generator_2, its answer output_2), b = the baseline (output_1), credit
    preference - 1; the style differences in words (len(text.split())) and the Markdown counts
    of the texts (headers, ordered + unordered items, bold)."""
    root = data_dir / "alpaca_eval" / "results"
    rows = []
    for path in sorted(root.glob("*/weighted_alpaca_eval_gpt4_turbo/annotations.json")):
        if names is not None and path.parts[-3] not in names:
            continue
        for r in json.loads(path.read_text(encoding="utf-8")):
            if r.get("preference") is None or r["generator_1"] == r["generator_2"]:
                continue
            rows.append((path.parts[-3], r["generator_1"], float(r["preference"]) - 1.0, r["instruction"],
                         r["output_2"], r["output_1"]))
    models = sorted({x for r in rows for x in r[:2]})
    items = {t: i for i, t in enumerate(sorted({r[3] for r in rows}))}
    a = np.array([models.index(r[0]) for r in rows])
    b = np.array([models.index(r[1]) for r in rows])
    y = np.array([r[2] for r in rows])
    it = np.array([items[r[3]] for r in rows])

    def feats(t):
        c = style_counts(t)
        return [len(t.split()), c.md_headers, c.md_list_ordered + c.md_list_unordered, c.md_bold]

    fa = np.array([feats(r[4]) for r in rows], dtype=float)
    fb = np.array([feats(r[5]) for r in rows], dtype=float)
    raw = sc.raw_features(fa[:, 0], fb[:, 0], fa[:, 1:], fb[:, 1:])
    return models, a, b, y, it, len(items), raw


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_parity_on_the_real_annotations(data_dir):
    models, a, b, y, it, n_items, raw = _alpaca(data_dir)
    assert len(models) == 26 and a.size > 19000
    anchor = models.index(BASE)
    for control in ("length", "both"):
        Z, cols, left = sc.style_matrix(raw, control)
        assert not left and Z.shape[1] == (1 if control == "length" else 4)
        d = bt.make_design(a, b, y, np.ones(a.size), it, len(models), n_items, features=Z)
        f = bt.fit_bt(d, anchor)
        assert f.converged and not f.set_apart
        X, free = _design_matrix(a, b, Z, len(models), anchor)
        ours = np.concatenate([f.coef[free], f.gamma])
        ref = _reference(X, y)
        assert np.max(np.abs(ours - ref)) < 1e-6, np.max(np.abs(ours - ref))
        if control == "both":
            sm = pytest.importorskip("statsmodels.api")
            res = sm.Logit(y, X).fit(method="newton", tol=1e-12, maxiter=100, disp=0)
            assert np.max(np.abs(ours - res.params)) < 1e-6, np.max(np.abs(ours - res.params))
            # this judge rewards length: a longer answer than the baseline's raises its odds
            assert f.gamma[0] > 0.3
            # the uncontrolled fit differs: control moves the verbose variants down against the concise ones
            plain = bt.fit_bt(bt.make_design(a, b, y, np.ones(a.size), it, len(models), n_items), anchor)
            v, c = models.index("gpt-3.5-turbo-1106_verbose"), models.index("gpt-3.5-turbo-1106_concise")
            assert plain.coef[v] - plain.coef[c] > f.coef[v] - f.coef[c]


# ------------------------------------------------------------------ the board from a database
MODELS = ("alpaca-7b", "claude-2", "NullModel", "gpt-3.5-turbo-1106_verbose", "gpt-3.5-turbo-1106_concise")


def test_controlled_board_from_the_database(db_url, data_dir, run_cli):
    from judgecal.views import importing
    from judgecal.views.btboard import build_bt_board

    importing.import_alpaca_eval([data_dir / "alpaca_eval" / "results" / n for n in MODELS], [], None, db_url)
    models, a, b, y, it, n_items, raw = _alpaca(data_dir, MODELS)
    models_all = list(models)
    Z, cols, _ = sc.style_matrix(raw, "both")
    f = bt.fit_bt(bt.make_design(a, b, y, np.ones(a.size), it, len(models), n_items, features=Z), models.index(BASE))
    board = build_bt_board(url=db_url, n_bootstrap=50, seed=1, control="both", length_unit="words")
    st = board["style"]
    assert [c["feature"] for c in st["coefficients"]] == ["length", "headers", "lists", "bold"]
    for c, g, col in zip(st["coefficients"], f.gamma, cols):
        assert c["coef"] == pytest.approx(g, abs=1e-8) and c["raw_sd"] == pytest.approx(col["sd"], rel=1e-12)
        assert c["coef_ci"][0] <= c["coef"] <= c["coef_ci"][1]
        assert c["odds_ratio"] == pytest.approx(math.exp(c["coef"]))
    got = {r["model"]: r for r in board["rows"]}
    # NullModel (constant answers) is set apart by the gaming guard (tests/test_bt_guards.py), its battles kept
    assert [x["model"] for x in board["set_apart"]] == ["NullModel"]
    models = [n for n in models if n != "NullModel"]
    for name in models:
        i = models_all.index(name)
        assert got[name]["rating"] == pytest.approx(float(bt.ratings(f.coef[i])), abs=1e-6)
        assert got[name]["change"] == got[name]["rank_uncontrolled"] - got[name]["rank_controlled"]
    assert got[BASE]["rating"] == 1000.0 and got[BASE]["win_rate"] == 50.0
    # the plain board beside it is today's board
    plain = {r["model"]: r for r in build_bt_board(url=db_url, n_bootstrap=0)["rows"]}
    for name in models:
        assert got[name]["rating_uncontrolled"] == pytest.approx(plain[name]["rating"], abs=1e-12)
        assert got[name]["rank_uncontrolled"] == plain[name]["rank"]
    assert [r["rank"] for r in board["rows"]] == sorted(r["rank"] for r in board["rows"])
    # the command line, every format
    r = run_cli("--database-url", db_url, "bt", "--control", "both", "--length-unit", "words", "--bootstrap", "50",
                "--seed", "1", "--format", "json")
    assert r.exit_code == 0, r
    out = json.loads(r.stdout)
    assert out["rows"] == json.loads(json.dumps(board["rows"])) and out["style"]["coefficients"][0]["feature"] == "length"
    r = run_cli("--database-url", db_url, "bt", "--control", "both", "--length-unit", "words", "--bootstrap", "0",
                "--format", "csv")
    assert r.exit_code == 0, r
    rows = list(csv.DictReader(io.StringIO(r.stdout)))
    assert {"rank_uncontrolled", "rank_controlled", "change"} <= set(rows[0])
    assert "length coef" in r.stderr
    r = run_cli("--database-url", db_url, "bt", "--control", "both", "--length-unit", "words", "--bootstrap", "20",
                "--format", "csv", "--coefficients")
    assert r.exit_code == 0, r
    coef = list(csv.DictReader(io.StringIO(r.stdout)))
    assert [c["feature"] for c in coef] == ["length", "headers", "lists", "bold"] and json.loads(coef[0]["coef_ci"])
    r = run_cli("--database-url", db_url, "bt", "--control", "markdown", "--length-unit", "words", "--bootstrap", "20",
                "--format", "markdown")
    assert r.exit_code == 0 and "rank uncontrolled" in r.stdout and "Style coefficients (markdown), " in r.stdout, r
    assert "| bold |" in r.stdout and "| length |" not in r.stdout
    r = run_cli("--database-url", db_url, "bt", "--control", "length", "--length-unit", "words", "--bootstrap", "20",
                "--wide")
    assert r.exit_code == 0 and "odds ratio" in r.stdout and "multiplies" in r.stdout, r
    for args, says in ((("--length-unit", "words"), "--length-unit applies to a style-controlled board"),
                       (("--coefficients",), "--coefficients applies to a style-controlled board"),
                       (("--control", "both", "--length-unit", "words", "--tokenizer", "smollm2"), "--tokenizer applies"),
                       (("--control", "both", "--coefficients", "--format", "json"), "JSON holds them")):
        r = run_cli("--database-url", db_url, "bt", *args)
        assert r.exit_code != 0 and says in r.stderr and "Traceback" not in r.output, (args, r)


def test_token_lengths_are_filled_for_the_control(tmp_path, data_dir):
    """--length-unit tokens (Arena-Hard-Auto's unit) computes and stores the token lengths it needs
    with the real SmolLM2 tokenizer, then the densities are per token."""
    from sqlalchemy import func, select

    from judgecal.db import models as m
    from judgecal.db.engine import get_engine, session_scope
    from judgecal.tokens import canonical_name, counter
    from judgecal.views import importing
    from judgecal.views.btboard import build_bt_board

    url = f"sqlite:///{tmp_path / 't.db'}"
    importing.import_alpaca_eval([data_dir / "alpaca_eval" / "results" / "claude-2"], [], None, url)
    board = build_bt_board(url=url, n_bootstrap=0, control="length", tokenizer="smollm2")
    assert board["style"]["length_unit"] == "tokens" and board["style"]["tokenizer"] == "smollm2"
    engine = get_engine(url)
    with session_scope(engine) as s:
        n = s.scalar(select(func.count()).select_from(m.TokenLength).where(m.TokenLength.tokenizer == canonical_name("smollm2")))
    engine.dispose()
    assert n == 2 * 805
    models, a, b, y, it, n_items, _ = _alpaca(data_dir, ("claude-2",))
    rows = json.loads((data_dir / "alpaca_eval" / "results" / "claude-2" / "weighted_alpaca_eval_gpt4_turbo"
                       / "annotations.json").read_text(encoding="utf-8"))
    rows = [r for r in rows if r.get("preference") is not None]
    count = counter(canonical_name("smollm2"))
    la, lb = np.array(count([r["output_2"] for r in rows]), float), np.array(count([r["output_1"] for r in rows]), float)
    raw = sc.raw_features(la, lb, np.zeros((la.size, 3)), np.zeros((lb.size, 3)))
    Z, cols, _ = sc.style_matrix(raw, "length")
    f = bt.fit_bt(bt.make_design(a, b, y, np.ones(a.size), it, len(models), n_items, features=Z), models.index(BASE))
    assert board["style"]["coefficients"][0]["coef"] == pytest.approx(f.gamma[0], abs=1e-8)


@pytest.mark.parametrize("with_covariate", [False, True])
def test_bootstrap_resamples_that_come_apart(with_covariate):
    """Model 1 beats the anchor on every item but the last: each resample that misses the last
    item leaves it with wins only (+inf there, counted in n_set_apart, the others refitted
    without it); every other resample equals an ordinary fit of the items drawn -- with and
    without a covariate column (the bootstrap's per-chunk weights, the refit of a resample whose
    graph came apart)."""
    from judgecal.calibrate.resample import resample_counts

    n_items = 12
    rng = np.random.default_rng(7)
    a = np.array([1] * n_items + [2] * n_items)
    b = np.zeros(2 * n_items, dtype=int)
    y = np.concatenate([[1.0] * (n_items - 1) + [0.0], rng.uniform(0.2, 0.8, n_items)])
    it = np.tile(np.arange(n_items), 2)
    z = rng.normal(0, 1, (2 * n_items, 1)) if with_covariate else None
    d = bt.make_design(a, b, y, np.ones(a.size), it, 3, n_items, features=z)
    f = bt.fit_bt(d, 0)
    assert f.converged and not f.set_apart
    boot = bt.bootstrap_bt(d, 0, f, 200, seed=2, chunk=16)
    M = resample_counts(n_items, 200, np.random.default_rng(2))
    apart = M[:, -1] == 0
    assert 30 < apart.sum() < 120 and boot.n_set_apart == int(apart.sum()) and boot.n_not_converged == 0
    assert np.all(boot.coef[apart, 1] == math.inf) and np.all(np.isfinite(boot.coef[apart, 2]))
    for r in np.flatnonzero(apart)[:5]:  # the rest refitted without model 1
        sel = a == 2
        g = bt.fit_bt(bt.make_design(a[sel], b[sel], y[sel], np.ones(sel.sum()), it[sel], 3, n_items,
                                     features=None if z is None else z[sel]), 0, weights_of_items=M[r])
        assert boot.coef[r, 2] == pytest.approx(g.coef[2], abs=1e-7)
    for r in np.flatnonzero(~apart)[:20]:
        g = bt.fit_bt(d, 0, weights_of_items=M[r])
        assert g.converged and not g.set_apart
        assert np.allclose(boot.coef[r], g.coef, atol=1e-7)
        if with_covariate:
            assert np.allclose(boot.gamma[r], g.gamma, atol=1e-7)


# ------------------------------------------------------------------ separation
def _separated_battles(seed=3):
    """Models 1 and 2 against the baseline 0 on 120 items; bold differs in 3 battles only, all won by the
    side with more bold (separation: the bold coefficient has no finite maximum)."""
    rng = np.random.default_rng(seed)
    n = 240
    a = np.repeat([1, 2], 120)
    b = np.zeros(n, dtype=np.int64)
    it = np.tile(np.arange(120), 2)
    raw = np.zeros((n, 4))
    raw[:, 0] = rng.uniform(-0.5, 0.5, n)
    raw[:, 2] = rng.uniform(-0.2, 0.2, n)
    y = (rng.random(n) < expit(0.3 + 1.5 * raw[:, 0])).astype(float)
    raw[[5, 17, 130], 3] = [0.05, 0.04, 0.06]
    y[[5, 17, 130]] = 1.0
    return a, b, it, y, raw


def test_a_separated_style_column_is_left_out_not_reported():
    from types import SimpleNamespace

    from judgecal.views.btboard import _controlled_fit

    a, b, it, y, raw = _separated_battles()
    data = SimpleNamespace(items=list(range(120)))
    # the plain Newton fit with bold runs the bold coefficient off (what the board printed before)
    Z, cols, _ = sc.style_matrix(raw, "both")
    fit = bt.fit_bt(bt.make_design(a, b, y, np.ones(a.size), it, 3, 120, features=Z), 0)
    assert [c["feature"] for c in cols] == ["length", "lists", "bold"]
    # Newton "converges" with bold at 7.3 per sd: its 3 battles stand 8 sd out, 58 log-odds each, where the
    # likelihood is flat in float arithmetic; the coefficient alone looks finite, its share of the log-odds does not
    assert fit.converged and 5 < fit.gamma[2] < sc.MAX_COEF
    assert list(sc.separated(fit.gamma, Z)) == [False, False, True]
    assert np.max(np.abs(Z[:, 2])) * fit.gamma[2] > sc.MAX_COEF
    cols, constant, collinear, separated, fit_c, boot_c = _controlled_fit(
        a, b, y, it, raw, "both", np.ones(a.size, dtype=bool), ["base", "m1", "m2"], data, 0, 100, 0)
    assert constant == ["headers"] and separated == ["bold"] and collinear == []
    assert [c["feature"] for c in cols] == ["length", "lists"] and fit_c.converged
    # the fit left equals the fit without the bold column
    ref = bt.fit_bt(bt.make_design(a, b, y, np.ones(a.size), it, 3, 120, features=Z[:, :2]), 0)
    assert np.allclose(fit_c.gamma, ref.gamma, atol=1e-9) and np.allclose(fit_c.coef, ref.coef, atol=1e-9)
    assert 0.2 < fit_c.gamma[0] < 0.9  # the length effect put in: 1.5 per raw unit x sd 0.29 = 0.43 per sd
    assert np.all(np.isfinite(boot_c.gamma)) and boot_c.n_style_separated == 0


def test_a_column_the_models_ratings_explain_is_not_a_coefficient():
    # a break-it run: one model's answers alone carry headers, lists and bold, at a fixed density (and
    # always together): the design is rank-deficient (statsmodels: "The design matrix is rank-deficient"),
    # the fit printed headers = lists = bold = -0.684 with CIs and lifted that model from 313.8 to 931.3
    from types import SimpleNamespace

    from judgecal.views.btboard import _controlled_fit

    rng = np.random.default_rng(5)
    n = 300
    a = np.repeat([1, 2, 3], 100)
    b = np.zeros(n, dtype=np.int64)
    it = np.tile(np.arange(100), 3)
    raw = np.zeros((n, 4))
    raw[:, 0] = rng.uniform(-0.5, 0.5, n)
    raw[a == 3, 1:] = [0.2, 0.3, 0.1]  # model 3's answers: the same Markdown density in every battle
    y = (rng.random(n) < expit(np.where(a == 3, -0.8, 0.2) + 1.2 * raw[:, 0])).astype(float)
    Z, cols, _ = sc.style_matrix(raw, "both")
    assert list(sc.collinear(a, b, 4, 0, Z)) == [False, True, True, True]
    data = SimpleNamespace(items=list(range(100)))
    cols, constant, collinear, separated, fit_c, boot_c = _controlled_fit(
        a, b, y, it, raw, "both", np.ones(n, dtype=bool), ["base", "m1", "m2", "m3"], data, 0, 50, 0)
    assert collinear == ["headers", "lists", "bold"] and [c["feature"] for c in cols] == ["length"]
    ref = bt.fit_bt(bt.make_design(a, b, y, np.ones(n), it, 4, 100, features=Z[:, :1]), 0)
    assert np.allclose(fit_c.coef, ref.coef, atol=1e-9)  # the fit left is the length-only fit
    with pytest.raises(Exception, match="no style column of --control markdown is identified apart from the models' "
                                        "ratings"):
        _controlled_fit(a, b, y, it, raw, "markdown", np.ones(n, dtype=bool), ["base", "m1", "m2", "m3"], data, 0, 0, 0)
    # a column that varies within models is kept, though correlated with them
    raw2 = raw.copy()
    raw2[a == 3, 3] = rng.uniform(0.05, 0.15, 100)
    Z2, _, _ = sc.style_matrix(raw2, "both")
    assert list(sc.collinear(a, b, 4, 0, Z2)) == [False, True, True, False]


def test_resamples_that_run_off_count_as_infinite():
    from types import SimpleNamespace

    from judgecal.views.btboard import _controlled_fit

    a, b, it, y, raw = _separated_battles()
    raw[:, 3] = 0.0
    raw[[5, 6], 1] = [0.1, 0.1]  # headers in two battles of two items, both won (separation of headers)
    raw[[7], 1] = [-0.1]
    y[[5, 6]], y[7] = 1.0, 0.0
    data = SimpleNamespace(items=list(range(120)))
    cols, constant, collinear, separated, fit_c, boot_c = _controlled_fit(
        a, b, y, it, raw, "both", np.ones(a.size, dtype=bool), ["base", "m1", "m2"], data, 0, 200, 0)
    assert separated == ["headers"] and constant == ["bold"] and collinear == []
    ci = bt.percentile_ci(boot_c.gamma[:, 0])
    assert all(math.isfinite(x) for x in ci)


def test_percentile_ci_with_infinite_values():
    assert bt.percentile_ci([1, 2, 3, 4]) == pytest.approx([1.075, 3.925])
    # 10 of 200 at -inf: the 2.5% point (index 4.975) lies among them
    assert bt.percentile_ci([-math.inf] * 10 + list(range(190))) == pytest.approx([-math.inf, 184.025])
    # 3 of 205 at -inf, 5 at +inf: both points among the finite values, numpy's interpolation there
    assert bt.percentile_ci([-math.inf] * 3 + list(range(197)) + [math.inf] * 5) == pytest.approx([2.1, 195.9])
    # an infinite neighbour makes the bound infinite (not -2.4e307 interpolated from a clipped value)
    assert bt.percentile_ci([-math.inf] * 5 + list(range(195)))[0] == -math.inf
    assert bt.percentile_ci([math.nan]) is None
    # 97.5% of 41 values lies exactly on index 39 (t = 0): the bound is v[39], not numpy's
    # v[39] + (inf - v[39]) * 0 = NaN (seen: a style coefficient's CI in the team's HTML report)
    assert bt.percentile_ci(list(range(40)) + [math.inf]) == pytest.approx([1.0, 39.0])
    assert bt.percentile_ci([0.0] * 40 + [math.inf]) == [0.0, 0.0]


def test_run_off_rules_known_answers():
    Z = np.array([[1.0, 0.5], [-1.0, 2.0], [0.2, -0.1]])
    # per-sd bound: 16.8 log-odds per sd is no fit even where its share of every battle stays small
    assert list(sc.separated(np.array([16.8, 0.3]), Z)) == [True, False]
    assert list(sc.separated(np.array([0.8, 0.3]), Z)) == [False, False]
    # joint share: with gamma (9, 9) the battles reach 13.5, 9, 0.9 log-odds (none past 15); with (-6, 6)
    # battle 2 reaches 6 + 12 = 18: the column with the larger share of it (the second, 12) is left out
    assert list(sc.run_off(np.array([9.0, 9.0]), Z)) == [False, False]
    assert list(sc.run_off(np.array([-6.0, 6.0]), Z)) == [False, True]
