"""Style control against length-only out of sample (judgecal.calibrate.style_oos; issue 34 item 5):
known answers on hand-made battles, and the LLMBar figures of docs/results.md from the real
repository layout."""

from __future__ import annotations

import math

import numpy as np
import pytest

from judgecal.calibrate import stylecontrol as sc
from judgecal.calibrate.resample import make_folds
from judgecal.calibrate.style_oos import held_out_loglik, paired_gain, style_oos



def _raw(n, rng):
    la, lb = rng.integers(10, 200, n), rng.integers(10, 200, n)
    ca, cb = rng.integers(0, 6, (n, 3)), rng.integers(0, 6, (n, 3))
    return sc.raw_features(la, lb, ca, cb)


def test_none_is_the_training_folds_mean_credit():
    # two players, no covariate: the maximum-likelihood theta of a fold is logit(mean training credit),
    # so each held-out battle's log-likelihood is y log m + (1 - y) log(1 - m), m that mean
    y = np.array([1, 1, 0, 1, 0.5, 1, 0, 1, 1, 1, 0, 1], dtype=float)
    items = [f"i{k // 2}" for k in range(y.size)]  # two battles (orders) an item
    raw = _raw(y.size, np.random.default_rng(0))
    ll, why, dropped = held_out_loglik(y, raw, items, "none", folds=3, seed=4)
    assert why is None and dropped == {}
    fold, k = make_folds(items, 3, 4)
    assert k == 3
    want = np.empty(y.size)
    for f in range(k):
        m = y[fold != f].mean()
        t = fold == f
        want[t] = y[t] * math.log(m) + (1 - y[t]) * math.log(1 - m)
    assert np.allclose(ll, want, atol=1e-9, rtol=0)


def test_length_recovers_a_judge_that_rewards_length():
    # a judge that picks the longer answer whatever the expert says: length control predicts it
    # out of sample, the plain fit cannot; a Markdown column that plays no part gains nothing
    rng = np.random.default_rng(1)
    n_items = 300
    raw = _raw(2 * n_items, rng)
    raw[1::2] = raw[0::2]  # both orders of an item: the same answers
    p = 1 / (1 + np.exp(-(0.3 + 6.0 * raw[:, 0])))
    y = (rng.random(raw.shape[0]) < p).astype(float)
    items = [f"i{k // 2}" for k in range(raw.shape[0])]
    out = style_oos(y, raw, items, folds=5, seed=0, n_bootstrap=200)
    assert out["n_battles"] == 600 and out["n_items"] == 300 and out["folds"] == 5
    assert out["why"] == {}
    assert out["length_vs_none"]["above"] and out["length_vs_none"]["gain"] > 0.1
    assert out["beats_length_only"] is False and out["lists_beat_length_only"] is False
    assert abs(out["both_vs_length"]["gain"]) < 0.01


def test_lists_found_when_the_judge_rewards_lists():
    rng = np.random.default_rng(2)
    raw = _raw(800, rng)
    p = 1 / (1 + np.exp(-(2.0 * raw[:, 0] / raw[:, 0].std() + 2.0 * raw[:, 2] / raw[:, 2].std())))
    y = (rng.random(800) < p).astype(float)
    out = style_oos(y, raw, [f"i{k}" for k in range(800)], folds=5, seed=0, n_bootstrap=200)
    assert out["lists_beat_length_only"] is True and out["beats_length_only"] is True
    assert out["lists_vs_length"]["gain"] > 0.05


def test_separation_is_reported_not_scored():
    # bold in two answers only, both preferred: its coefficient has no finite maximum (separation)
    rng = np.random.default_rng(3)
    raw = _raw(200, rng)
    raw[:, 3] = 0.0
    raw[[5, 77], 3] = 0.2
    y = (rng.random(200) < 0.6).astype(float)
    y[[5, 77]] = 1.0
    out = style_oos(y, raw, [f"i{k}" for k in range(200)], folds=5, seed=0, n_bootstrap=50)
    assert out["loglik"]["both"] is None and out["both_vs_length"] is None and out["beats_length_only"] is None
    assert "no finite maximum" in out["why"]["both"]
    assert out["loglik"]["length"] is not None


def test_constant_column_left_out_and_counted():
    rng = np.random.default_rng(4)
    raw = _raw(100, rng)
    raw[:, 1] = 0.0  # no header anywhere
    y = (rng.random(100) < 0.5).astype(float)
    ll, why, dropped = held_out_loglik(y, raw, [f"i{k}" for k in range(100)], "both", folds=5, seed=0)
    assert why is None and dropped == {"headers": 5}


def test_paired_gain_known_answer():
    # item-level differences 1, 1, 1 (one battle each) and 0, 0 (two battles each): mean per battle 3/7;
    # every resample of a constant difference gives that constant
    d_new = np.array([1, 1, 1, 0, 0, 0, 0], dtype=float)
    items = ["a", "b", "c", "d", "d", "e", "e"]
    g = paired_gain(d_new, np.zeros(7), items, n_bootstrap=100, seed=0)
    assert g["gain"] == pytest.approx(3 / 7, abs=1e-12)
    g2 = paired_gain(np.full(7, 0.25), np.zeros(7), items, n_bootstrap=100, seed=0)
    assert g2["gain_ci"] == pytest.approx([0.25, 0.25], abs=1e-12) and g2["above"]


def test_llmbar_real_figures(tmp_path, repo):
    from click.testing import CliRunner

    from judgecal.cli import cli
    from judgecal.views.styleoos import style_oos_entries

    url = f"sqlite:///{tmp_path / 'r.db'}"
    r = CliRunner().invoke(cli, ["--database-url", url, "db", "upgrade"])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(cli, ["--database-url", url, "import", "llmbar", str(repo)])
    assert r.exit_code == 0, r.output
    out = {(e["task_family"], e["judge"]): e for e in style_oos_entries(families=["llmbar/Natural"],
                                                                        judges=["PaLM2/CoT", "LLaMA2/Vanilla", "GPT-4/CoT"], url=url)}
    e = out[("llmbar/Natural", "PaLM2/CoT")]
    # headers in 1 answer, bold in 3 of Natural's 200: the full control has no finite fit
    assert e["answers"] == {"n": 200, "headers": 1, "lists": 16, "bold": 3}
    assert e["n_battles"] == 198 and e["counts"]["pairs"] == 100
    assert e["loglik"]["both"] is None
    assert e["lists_beat_length_only"] is True
    assert e["lists_vs_length"]["gain"] == pytest.approx(0.0181, abs=5e-5)
    # GPT-4/CoT: two training folds are separated (bold's 3 answers); Newton reported convergence there with
    # coefficients of 11 and 15 log-odds per sd (inside the old +-30 guard), and scored the divergent fits
    g4 = out[("llmbar/Natural", "GPT-4/CoT")]
    assert g4["loglik"]["both"] is None and "separation" in g4["why"]["both"] and g4["both_vs_length"] is None
    assert g4["loglik"]["length"] is not None
    lv = out[("llmbar/Natural", "LLaMA2/Vanilla")]
    assert lv["length_vs_none"]["above"] and lv["length_vs_none"]["gain"] == pytest.approx(0.0909, abs=5e-5)
    assert lv["beats_length_only"] is False and lv["both_vs_length"]["gain"] == pytest.approx(-0.0337, abs=5e-5)
    # the board on the same battles: GPT-4/CoT's headers and bold have no finite coefficient (the 1 and 3
    # answers that have them all decide their battles); they are left out and named, not printed as a
    # coefficient of -8.4 with a CI of [-inf, inf] and ratings with a CI of [-5e18, 2e23] as before
    from judgecal.views.btboard import build_bt_board

    b = build_bt_board(["llmbar/Natural"], "GPT-4/CoT", "llmbar/output_2", url, control="both", n_bootstrap=100,
                       length_unit="words")
    # neither removal alone ends the separation (each feature separates on its own): column order, not
    # the size Newton left the coefficients at (which flipped the order under 1e-12 noise before)
    assert b["style"]["separated"] == ["headers", "bold"] and b["converged"]
    assert [c["feature"] for c in b["style"]["coefficients"]] == ["length", "lists"]
    assert all(math.isfinite(x) for c in b["style"]["coefficients"] for x in c["coef_ci"])
    assert all(math.isfinite(x) for r in b["rows"] for x in r["rating_ci"])
    assert any("left out of the control: headers, bold" in n for n in b["notes"])


def test_one_answer_with_a_header_is_no_fit():
    # a header in one answer only (as in LLMBar Natural): Newton's steps run the header coefficient up
    # until the likelihood is flat and report convergence there; that is a maximum at infinity, not a fit
    rng = np.random.default_rng(5)
    raw = _raw(200, rng)
    raw[:, 1] = 0.0
    raw[[10, 11], 1] = -0.02  # the item's two orders
    y = (rng.random(200) < 0.7).astype(float)
    y[[10, 11]] = 1.0
    ll, why, _ = held_out_loglik(y, raw, [f"i{k // 2}" for k in range(200)], "both", folds=5, seed=0)
    assert ll is None and "no finite maximum" in why
    ll, why, _ = held_out_loglik(y, raw, [f"i{k // 2}" for k in range(200)], "length+lists", folds=5, seed=0)
    assert why is None and np.all(np.isfinite(ll))


def test_separation_known_answers():
    from judgecal.calibrate.separation import separation

    # overlap: x = 1 won once and lost once; the MLE is finite (theta = 0, slope = 0): optimum 0
    X = np.array([[1, 1], [1, 1], [1, -1], [1, -1]], dtype=float)
    r = separation(X, np.ones(4), np.array([1, 0, 1, 0], dtype=float))
    assert not r["separated"] and r["optimum"] == 0.0
    # complete separation: x > 0 always won, x < 0 always lost; the direction (0, 1) raises every
    # row's likelihood: LP optimum sum |x| / n = 4 / 4 with d bounded by 1
    r = separation(X, np.ones(4), np.array([1, 1, 0, 0], dtype=float))
    assert r["separated"] and r["optimum"] == pytest.approx(1.0) and r["direction"][1] == pytest.approx(1.0)
    # quasi-complete: the one row with x != 0 was won, the x = 0 rows split: still no finite slope
    Xq = np.array([[1, 0], [1, 0], [1, 2]], dtype=float)
    assert separation(Xq, np.ones(3), np.array([1, 0, 1.0]))["separated"]
    # a tie (credit 0.5) on the x != 0 row pins the direction: X_r d = 0 there, so the data overlap
    assert not separation(Xq, np.ones(3), np.array([1, 0, 0.5]))["separated"]
    # a lost row at x = 2 makes the data overlap; with weight 0 it is left out and they are separated again
    X4 = np.array([[1, 0], [1, 0], [1, 2], [1, 2]], dtype=float)
    assert not separation(X4, np.ones(4), np.array([1, 0, 1, 0.0]))["separated"]
    assert separation(X4, np.array([1, 1, 1, 0.0]), np.array([1, 0, 1, 0.0]))["separated"]
    # an all-won set is separated along the intercept
    assert separation(np.ones((3, 1)), np.ones(3), np.ones(3))["separated"]
    with pytest.raises(ValueError, match="success weights"):
        separation(X, np.ones(4), np.array([2, 0, 0, 0.0]))
    with pytest.raises(ValueError, match="finite"):
        separation(np.array([[1, np.nan]]), np.ones(1), np.ones(1))
    with pytest.raises(ValueError, match=r"\(n, q\)"):
        separation(X, np.ones(3), np.ones(3))


def test_separated_fold_is_no_fit_wherever_newton_stops():
    # LLMBar Adversarial_GPTInst's shape: bold in three answers whose battles the judge all gave the
    # expert; Newton "converges" with a bold coefficient near 9 once the probabilities round to 1 (and on
    # another machine's rounding it did not, or stopped elsewhere): separation decides, not the coefficient
    rng = np.random.default_rng(11)
    raw = _raw(300, rng)
    raw[:, 3] = 0.0
    raw[[3, 40, 41, 200], 3] = [0.9, 0.5, 0.5, 1.4]
    y = (rng.random(300) < 0.6).astype(float)
    y[[3, 40, 41, 200]] = 1.0
    ll, why, _ = held_out_loglik(y, raw, [f"i{k}" for k in range(300)], "both", folds=5, seed=0)
    assert ll is None and "separation" in why
    # half of them lost instead (and two more bold answers, one lost): the data overlap in every training
    # fold, the fit is finite and scored
    raw[[100, 150], 3] = [0.7, 1.1]
    y[[40, 200, 100, 150]] = [0.0, 0.0, 0.0, 1.0]
    ll, why, _ = held_out_loglik(y, raw, [f"i{k}" for k in range(300)], "both", folds=5, seed=0)
    assert why is None and np.all(np.isfinite(ll))


def test_separation_is_scale_free_and_reads_credits_as_linked_does():
    from judgecal.calibrate.separation import separation

    # a won row whose entries are 1e-7 of the others' still separates (its probability goes to 1)
    X = np.array([[1, 1], [1, 1], [1e-7, 0]])
    assert separation(X, np.ones(3), np.array([1, 0, 1.0]))["separated"]
    # wins at (1, 0) and (0, 1), a loss at (eps, eps): the data overlap however small eps is
    for eps in (1e-8, 1e-9, 1e-13):
        assert not separation(np.array([[1, 0], [0, 1], [eps, eps]]), np.ones(3), np.array([1, 1, 0.0]))["separated"]
    # a row of tiny weight is still a loss when its credit is 0 (both rows lost: separated along x)
    assert separation(np.ones((2, 1)), np.array([1e-13, 1.0]), np.zeros(2))["separated"]
    # a credit of 1e-13 is a split row (bt.linked counts any credit above 0 as a win of a): not separated
    assert not separation(np.array([[1.0], [-1.0]]), np.ones(2), np.array([1e-13, 0.0]))["separated"]
    # a column 0 on every row is no direction; a credit past its bound by the last bit is that bound
    r = separation(np.array([[1, 0], [-1, 0]]), np.ones(2), np.array([1.0, 1.0]))
    assert not r["separated"]
    assert separation(np.array([[1.0], [1.0]]), np.ones(2), np.array([1.0 + 1e-15, 1.0]))["separated"]


def test_board_drops_the_column_the_data_name_not_newtons_largest():
    # only headers separates (every battle with a header was won); bold's 4 battles, inside those, go both
    # ways: removing headers alone leaves data that overlap, so bold stays (before: bold's run-off
    # coefficient was larger where Newton stopped, and both were dropped)
    import types

    from judgecal.views import btboard as bb

    rng = np.random.default_rng(25)
    n = 150
    raw = np.column_stack([rng.normal(size=n), np.zeros(n), rng.normal(size=n), np.zeros(n)])
    H = rng.choice(n, 40, replace=False)
    raw[H, 1] = rng.uniform(0.5, 1, 40)
    raw[H[:4], 3] = rng.uniform(0.05, 0.3, 4) * np.array([1, -1, 1, -1])
    y = (rng.random(n) < 0.5).astype(float)
    y[H] = 1.0
    a, b = np.ones(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
    cols, _, _, dropped, fit, _ = bb._controlled_fit(a, b, y, np.arange(n), raw, "both", np.ones(n, dtype=bool),
                                                     ["m0", "m1"], types.SimpleNamespace(items=range(n)), 0, 0, 0)
    assert dropped == ["headers"] and [c["feature"] for c in cols] == ["length", "lists", "bold"]
    assert fit.converged and np.all(np.abs(fit.gamma) < 5)
    # the same with 1e-12 relative noise on the features: the same columns (Newton stops elsewhere)
    raw2 = raw * (1 + 1e-12 * np.random.default_rng(1).standard_normal(raw.shape))
    assert bb._controlled_fit(a, b, y, np.arange(n), raw2, "both", np.ones(n, dtype=bool), ["m0", "m1"],
                              types.SimpleNamespace(items=range(n)), 0, 0, 0)[3] == ["headers"]


def _set_apart_and_coinciding():
    """(a, b, y, raw (n, 4), m): model 3 wins or loses every battle (set apart); on the other battles
    lists == length, so a direction (lists - length) changes no fitted probability; headers and bold each
    separate (5 battles each, all won by the side with more)."""
    rng = np.random.default_rng(5)
    n, m = 300, 4
    a = rng.integers(0, m, n)
    b = (a + rng.integers(1, m, n)) % m
    y = (rng.random(n) < 0.5).astype(float)
    y[a == 3], y[b == 3] = 1.0, 0.0
    r3 = np.flatnonzero((a == 3) | (b == 3))
    rest = np.flatnonzero((a != 3) & (b != 3))
    length = rng.normal(size=n)
    lists = length.copy()
    lists[r3] = rng.normal(size=r3.size)
    headers, bold = np.zeros(n), np.zeros(n)
    H = rng.choice(rest, 5, replace=False)
    headers[H] = np.where(y[H] > 0, 1.0, -1.0)
    B = rng.choice(np.setdiff1d(rest, H), 5, replace=False)
    bold[B] = np.where(y[B] > 0, 1.0, -1.0)
    return a, b, y, np.column_stack([length, headers, lists, bold]), m


def test_involved_ignores_columns_that_coincide_on_the_rows_used():
    from judgecal.calibrate import bt
    from judgecal.calibrate.separation import bt_rows, covariate_to_drop, involved

    a, b, y, raw, m = _set_apart_and_coinciding()
    n = y.size
    d = bt.make_design(a, b, y, np.ones(n), np.arange(n), m, n, features=raw)
    X, W, S, k = bt_rows(d, 0)
    p = X.shape[1] - k
    assert [j - p for j in involved(X, W, S, range(p, p + k))] == [1, 3]
    assert covariate_to_drop(d, 0) == 1  # headers (neither removal alone ends it: the first involved)
    with pytest.raises(ValueError, match="not a column"):
        involved(X, W, S, [X.shape[1]])


def test_board_collinear_on_the_rows_the_fit_uses():
    # the board on the same battles (both orders, so the columns' means are 0): lists equals length on the
    # battles the fit uses, so it is collinear there (not a separated column, and not one chosen by where
    # Newton's run-off in the null direction stopped: before, length or lists by row order and noise)
    import types

    from judgecal.views import btboard as bb

    a, b, y, raw, m = _set_apart_and_coinciding()
    a, b, y, raw = np.r_[a, b], np.r_[b, a], np.r_[y, 1 - y], np.r_[raw, -raw]
    n = y.size
    seen = set()
    for t in range(4):
        p = np.random.default_rng(t).permutation(n)
        r = raw[p] * (1 + 1e-12 * np.random.default_rng(50 + t).standard_normal(raw.shape)) if t % 2 else raw[p]
        cols, _, collinear, separated, fit, _ = bb._controlled_fit(
            a[p], b[p], y[p], np.arange(n)[p], r, "both", np.ones(n, dtype=bool), [f"m{i}" for i in range(m)],
            types.SimpleNamespace(items=range(n)), 0, 0, 0)
        seen.add((tuple(collinear), tuple(separated), tuple(c["feature"] for c in cols)))
    assert seen == {(("lists",), ("headers", "bold"), ("length",))}
