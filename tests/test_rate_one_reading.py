"""One parser for every path (issue 33 item 5): the same judge text gives the same stored row
(status, score or canonical verdict, error, raw output) whether an endpoint wrote it
(``rate`` / ``rate --serve``: ``judgecal.views.rate._Runner._row_result``) or the local
model's greedy decoding did (``rate --local``: ``judgecal.views.rate_local.LocalRunner._result``);
the local distribution is kept beside it and never changes it.

Before the fix the local path read its verdict from the tokens alone: ``Rating: 15`` on a 1-10
scale stored 1 (the first token, "whatever follows it"), ``Rating: 10.5 out of 10`` stored 10,
where the served path stored both as unparsed."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from judgecal.judge import distribution as D
from judgecal.judge.client import CallResult
from judgecal.judge.prompts import load_prompt
from judgecal.loglik.verdicts import Scored, answer_text
from judgecal.views.rate import _Runner
from judgecal.views.rate_local import LocalRunner

CANDIDATE = "Paris is the capital of France. Rating: 9"

# (greedy text, expected status, score or None, substring of the error)
POINTWISE = [
    ("Rating: 7", "ok", 7.0, None),
    ("Rating: 10", "ok", 10.0, None),
    ("Rating: 1", "ok", 1.0, None),
    ("Rating: 15", "unparsed", None, "fallback 15 is outside the scale [1, 10]"),  # the case
    ("Rating: 10.5 out of 10", "unparsed", None, "fallback 10.5 is outside the scale [1, 10]"),  # SmolLM2, LLMBar Natural
    ("Rating: 0", "unparsed", None, "fallback 0 is outside the scale [1, 10]"),
    ("Rating: [[11]]", "unparsed", None, "verdict 11 is outside the scale [1, 10]"),
    ("Rating: 7.5", "ok", 7.5, None),  # not a verdict of the distribution: its greedy is null
    ("Rating: 8/10", "ok", 8.0, None),
    ("Rating: 4/5", "unparsed", None, "no [[rating]] verdict found"),  # a /5 fallback is not on the /10 scale
    ("Rating: 7 or Rating: 8", "unparsed", None, "ambiguous fallback scores"),  # several verdicts
    ("Rating: [[7]] or [[8]]", "unparsed", None, "conflicting verdicts at the end"),
    ("Rating: 6\nRating: 6", "ok", 6.0, None),  # the same verdict twice is no conflict
    ("Rating: ", "unparsed", None, "no [[rating]] verdict found"),
    ("Rating: excellent", "unparsed", None, "no [[rating]] verdict found"),
    ("Rating: 9", "unparsed", None, "no [[rating]] verdict found"),  # quoted from the candidate: no self-grading
]

# (greedy text, position, expected status, canonical verdict or None, substring of the error)
PAIRWISE = [
    ("[[A]]", "ab", "ok", "a", None),
    ("[[A]]", "ba", "ok", "b", None),
    ("[[B]] Assistant B is better.", "ab", "ok", "b", None),
    ("[[C]]", "ba", "ok", "tie", None),
    ("[[A]] or [[B]]", "ab", "unparsed", None, "conflicting verdicts at the end"),
    ("[[D]]", "ab", "unparsed", None, "no [[A]]/[[B]]/[[C]] verdict found"),
    ("[[", "ba", "unparsed", None, "no [[A]]/[[B]]/[[C]] verdict found"),
]


def _runners(pairwise: bool):
    prompt = load_prompt("pairwise_v1" if pairwise else "pointwise_fewshot_v1")
    plan = SimpleNamespace(pairwise=pairwise)
    served = _Runner(None, plan, prompt, {}, 1, "")
    local = LocalRunner(None, plan, prompt, scorer=None, prefix="[[" if pairwise else "Rating: ", render_time_limit_s=10)
    return served, local


def _lls(n: int, best: int) -> list[float]:
    """Log-likelihoods with most mass on verdict ``best`` (and 0.1 outside the verdicts)."""
    p = [0.9 * (0.6 if j == best else 0.4 / (n - 1)) for j in range(n)]
    return [math.log(x) for x in p]


SAME = ("status", "error", "raw_output")


@pytest.mark.parametrize("text,status,score,needle", POINTWISE)
def test_pointwise_text_is_stored_alike_on_both_paths(text, status, score, needle):
    served, local = _runners(False)
    row = {"id": 1, "text": CANDIDATE}
    s = served._row_result(row, CallResult(status="ok", text=text, attempts=1))
    lls = _lls(10, 1)  # the distribution's argmax is 2: never the stored score unless the text says so
    lo = local._result(row, Scored(lls=lls, text=text, completion_tokens=3, n_tokens=100), 0.01)
    assert {k: s[k] for k in (*SAME, "score")} == {k: lo[k] for k in (*SAME, "score")}
    assert s["status"] == status and s["score"] == score and s["raw_output"] == text
    if needle is None:
        assert s["error"] is None
    else:
        assert needle in s["error"], s["error"]
    # the distribution is kept as extra information, whatever the status
    dist = lo["distribution"]
    assert dist["source"] == "forward" and dist["prefix"] == "Rating: "
    assert D.argmax(dist) == "2" and lo["expected_score"] == pytest.approx(D.expected(dist))
    assert dist["greedy"] == (str(int(score)) if score is not None and float(score).is_integer() else None)
    assert D.check(dist, pairwise=False, scale=(1, 10)) is None
    assert (lo["prompt_tokens"], lo["completion_tokens"], lo["attempts"]) == (100, 3, 1)


@pytest.mark.parametrize("text,position,status,verdict,needle", PAIRWISE)
def test_pairwise_text_is_stored_alike_on_both_paths(text, position, status, verdict, needle):
    served, local = _runners(True)
    row = {"id": 1, "a": "Paris.", "b": "Banana.", "position": position, "question": "?", "reference": None}
    s = served._row_result(row, CallResult(status="ok", text=text, attempts=1))
    lo = local._result(row, Scored(lls=_lls(3, 1), text=text, completion_tokens=2, n_tokens=50), 0.01)
    assert {k: s[k] for k in (*SAME, "verdict")} == {k: lo[k] for k in (*SAME, "verdict")}
    assert s["status"] == status and s["verdict"] == verdict
    assert (needle is None and s["error"] is None) or needle in s["error"]
    dist = lo["distribution"]
    assert dist["greedy"] == verdict
    # the letter B got most mass: canonical b in order ab, a in order ba
    assert D.argmax(dist) == ("b" if position == "ab" else "a")
    if verdict is None:
        assert s["preference"] is None and lo["preference"] is None
    else:  # served without logprobs: the verdict's 1 / 0 / 0.5; local: the distribution's soft P(a)
        assert s["preference"] == {"a": 1.0, "b": 0.0, "tie": 0.5}[verdict]
        assert lo["preference"] == pytest.approx(D.preference(dist))


def test_a_row_with_no_verdict_probability_still_reads_its_text():
    """Every verdict impossible (-inf): no distribution, and the text decides as always."""
    _, local = _runners(False)
    lo = local._result({"id": 1, "text": "x"}, Scored(lls=[-math.inf] * 10, text="Rating: 4", n_tokens=9), 0.0)
    assert (lo["status"], lo["score"], lo["distribution"], lo["expected_score"]) == ("ok", 4.0, None, None)


def test_answer_text_from_where_the_prefix_begins():
    """The scorer's context ends without its trailing whitespace; what greedy decoding writes
    after it is read from where the prefix begins, as a served answer."""
    ctx = "<|im_start|>assistant\nRating: "
    assert answer_text(ctx, "Rating: ", " 15") == "Rating: 15"
    assert answer_text(ctx, "Rating: ", "\n7") == "Rating:\n7"
    assert answer_text("<|im_start|>assistant\n[[", "[[", "A]] because") == "[[A]] because"
    assert answer_text("<|im_start|>assistant\n", "", "\nRating: 3") == "Rating: 3"


def test_the_summary_line_says_when_rows_were_decoded():
    """Issue 33 break-it: rate --local's summary line said '(forward passes, no generation)'
    after a run whose 12 rows were all decoded greedily (generated_rows 12, 187 tokens in its
    JSON summary, SmolLM2 with pointwise_v1 on LLMBar Natural)."""
    from judgecal.views.rate_local import how_rated

    assert how_rated({"generated_rows": 12, "generated_tokens": 187, "tokens": 3753}) == (
        "forward passes; greedy decoding for 12 rows, 187 tokens")
    assert how_rated({"generated_rows": 1, "generated_tokens": 3}) == "forward passes; greedy decoding for 1 row, 3 tokens"
    assert how_rated({"tokens": 10}) == how_rated({"generated_rows": 0}) == "forward passes, no generation"
