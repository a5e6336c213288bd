"""Known-answer tests for the multiple-choice metrics and diagnostics (hand-computed values)."""

from __future__ import annotations

import math

import pytest

from judgecal.loglik import metrics as M


def test_lengths_non_ascii():
    assert M.n_chars("café") == 4
    assert M.n_bytes("café") == 5  # é is 2 bytes in UTF-8
    assert M.n_chars("−5 °C") == 5
    assert M.n_bytes("−5 °C") == 8  # U+2212 is 3 bytes, ° is 2


def test_item_predictions_each_metric_differs():
    # choices: "ab" (2 chars, 2 bytes), "éé" (2 chars, 4 bytes), "abcdef" (6 chars, 6 bytes)
    ll = [-4.0, -5.0, -9.0]
    chars = [2, 2, 6]
    nbytes = [2, 4, 6]
    ntok = [4, 1, 3]
    null = [-1.0, -4.5, -2.0]
    p = M.item_predictions(ll, chars, nbytes, ntok, null)
    assert p["acc"] == 0  # -4 is the largest ll
    # per char: -2.0, -2.5, -1.5  -> choice 2
    assert p["acc_norm"] == 2
    # per byte: -2.0, -1.25, -1.5 -> choice 1
    assert p["acc_bytes"] == 1
    # per token: -1.0, -5.0, -3.0 -> choice 0
    assert p["acc_per_token"] == 0
    # pmi: -3.0, -0.5, -7.0 -> choice 1
    assert p["acc_pmi"] == 1


def test_ties_go_to_first_choice_and_no_null():
    p = M.item_predictions([-2.0, -2.0], [1, 1], [1, 1], [1, 1], None)
    assert p["acc"] == 0 and p["acc_norm"] == 0
    assert p["acc_pmi"] is None


def test_mean_stderr_matches_lm_eval_formula():
    mean, se = M.mean_stderr([1, 0, 1, 1])
    # mean 0.75; sample var = (3*0.0625 + 0.5625)/3 = 0.25; se = 0.5/2
    assert mean == 0.75
    assert se == pytest.approx(0.25)
    from lm_eval.api.metrics import mean_stderr

    assert se == pytest.approx(mean_stderr([1, 0, 1, 1]))
    assert math.isnan(M.mean_stderr([1])[1])
    with pytest.raises(ValueError):
        M.mean_stderr([])


def test_aggregate():
    preds = [{"acc": 0, "acc_norm": 1, "acc_bytes": 1, "acc_per_token": 0, "acc_pmi": None},
             {"acc": 1, "acc_norm": 1, "acc_bytes": 0, "acc_per_token": 1, "acc_pmi": None}]
    agg = M.aggregate(preds, [0, 1])
    assert agg["acc"]["value"] == 1.0 and agg["acc"]["stderr"] == 0.0
    assert agg["acc_norm"]["value"] == 0.5
    assert agg["acc_norm"]["stderr"] == pytest.approx(0.5)  # std(ddof=1) of [0,1] = 0.7071, / sqrt(2)
    assert "acc_pmi" not in agg


def test_letter_key_and_lint():
    assert M.is_letter_key([[" A", " B"], ["C", "D"]])
    assert not M.is_letter_key([["A", "yes"]])
    lint = M.lint_choices([["a ", "b"], [" c", "d  e"]])
    assert lint == {"trailing_space": 1, "leading_space": 1, "doubled_space": 1, "inconsistent_leading_space": 1}
    d = M.diagnostics([["A", "B"]], {"acc": {"value": 0.5}, "acc_norm": {"value": 0.5}})
    assert d["letter_key"] and "acc_norm" not in d["headline"] and "acc" in d["headline"]
    assert "acc_norm == acc" in d["notes"][0] and d["duplicate_choices"] == 0
    d = M.diagnostics([["Paris", "Rome", "Paris"], ["yes", "no"], ["a b", "a  b"]], {"acc": {"value": 0.5}})
    assert d["duplicate_choices"] == 1 and any("same choice twice" in n for n in d["notes"])


def test_compare_runs_opposite_directions():
    a = {"acc": {"value": 0.50, "stderr": 0.03}, "acc_norm": {"value": 0.45, "stderr": 0.04}}
    b = {"acc": {"value": 0.55, "stderr": 0.04}, "acc_norm": {"value": 0.40, "stderr": 0.03}}
    c = M.compare_runs(a, b)
    assert c["deltas"]["acc"]["delta"] == pytest.approx(0.05)
    assert c["deltas"]["acc_norm"]["delta"] == pytest.approx(-0.05)
    assert c["deltas"]["acc"]["stderr"] == pytest.approx(0.05)  # sqrt(.03^2 + .04^2)
    assert c["opposite_directions"] and "not capability" in c["message"]
    same = M.compare_runs(a, {"acc": {"value": 0.6, "stderr": 0}, "acc_norm": {"value": 0.5, "stderr": 0}})
    assert not same["opposite_directions"] and same["message"] is None
