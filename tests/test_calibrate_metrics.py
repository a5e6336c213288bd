"""Known answers of every metric, by hand and on real LLMBar judge ratings."""

import ast
import json
import math
from pathlib import Path

import numpy as np
import pytest

from judgecal.calibrate import metrics as M

from judgecal.config import shared_data_dir  # noqa: E402
DATA = shared_data_dir()


def test_verbosity_win_rate():
    assert M.verbosity_win_rate([1, 2, 3, 4], [2, 2, 1, 5]) == 0.625
    assert M.verbosity_win_rate([1, 2], [1, 2]) == 0.5
    assert M.verbosity_win_rate([1, 2], [3, 0], weights=[3, 1]) == 0.75
    assert math.isnan(M.verbosity_win_rate([], []))


def test_expert_agreement_tie_rules():
    a, b = [5, 3, 4, 4, 2], [3, 5, 4, 1, 2]
    outcome = [1, 1, 0, 0.5, 0.5]
    # agree 1, reversed 0, judge tie on a decisive pair 0.5, expert tie judged 0.5, both tie 1
    np.testing.assert_allclose(M.agreement_credit(a, b, outcome), [1, 0, 0.5, 0.5, 1])
    assert M.expert_agreement(a, b, outcome) == pytest.approx(0.6)
    assert M.expert_agreement(a, b, outcome, weights=[2, 0, 0, 0, 0]) == 1.0
    assert M.pair_agreement([0.9, 0.2, 0.5], [1, 1, 0]) == pytest.approx(0.5)


def test_length_preference():
    a, b = [5, 3, 4, 4], [3, 5, 4, 1]
    la, lb = [100, 10, 50, 20], [10, 100, 20, 20]
    assert M.length_preference(a, b, la, lb) == pytest.approx(2.5 / 3)
    assert M.expert_length_preference([1, 0, 0, 1], la, lb) == pytest.approx(2 / 3)
    assert math.isnan(M.length_preference([1], [2], [5], [5]))


def test_score_length_slope():
    assert M.score_length_slope([1, 3, 5], [1, math.e, math.e**2]) == pytest.approx(2.0)
    assert M.score_length_slope([0, 4], [0, math.e**2]) == pytest.approx(2.0)  # L = 0 -> 1
    assert math.isnan(M.score_length_slope([1, 2, 3], [7, 7, 7]))


def test_pointwise_metrics():
    assert M.spearman([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(0.8)
    assert M.kendall_tau([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(4 / 6)
    assert M.mae([1, 2, 3], [2, 2, 5]) == pytest.approx(1.0)
    assert math.isnan(M.spearman([1, 1, 1], [1, 2, 3]))


def load_llmbar_ratings(family: str, judge: str):
    """(score_1, score_2, outcome) of one LLMBar ratings file; unparsed ('') pairs dropped."""
    path = DATA / "llmbar" / family / f"ratings_{judge}.json"
    if not path.exists():
        pytest.skip(f"real data missing: {path} (../shared/data not present)")
    s1, s2, y = [], [], []
    for rec in json.loads(path.read_text()):
        res = rec["results"]
        res = ast.literal_eval(res) if isinstance(res, str) else res
        a, b = res[0]["score_1"][0], res[0]["score_2"][0]
        if a == "" or b == "":
            continue
        s1.append(float(a))
        s2.append(float(b))
        y.append(1.0 if int(rec["label"]) == 1 else 0.0)
    return np.array(s1), np.array(s2), np.array(y)


@pytest.mark.parametrize("family,judge,n,expected", [
    ("Natural", "GPT-4", 100, 0.920),
    ("Natural", "ChatGPT", 100, 0.685),
    ("Adversarial_Neighbor", "ChatGPT", 134, 0.410),
])
def test_expert_agreement_on_llmbar(family, judge, n, expected):
    s1, s2, y = load_llmbar_ratings(family, judge)
    assert len(y) == n
    assert M.expert_agreement(s1, s2, y) == pytest.approx(expected, abs=5e-4)
