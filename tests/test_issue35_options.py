"""Issue 35 item 6: options honoured or refused, never dropped.

- ``rate --judge-name`` for a judge already stored under another name was ignored while the
  run's summary printed the name given (not the one stored): now refused with the stored name,
  nothing rated; the summary prints the stored name.
- ``fit --l-ref 1e300`` (or 10000 on answers of a few hundred words) said "every labelled pair
  compares two responses of the same length": now the message says that L_ref lies outside the
  answers' lengths and the feature is flat; a non-finite or non-positive L_ref is refused by
  the library too (the CLI refused it already)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from stub_openai import StubServer

from judgecal.calibrate.fit import fit_pairwise, fit_pointwise
from judgecal.errors import FitError, UsageError


def _jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


# ------------------------------------------------------------------ rate --judge-name
def test_judge_name_of_a_stored_judge_is_refused_and_the_summary_shows_the_stored_name(tmp_path, db_url, run_cli):
    from sqlalchemy import select

    from judgecal.db import models as m
    from judgecal.db.engine import get_engine, session_scope
    from judgecal.views import importing

    responses = [{"task_family": "f", "prompt": f"q{i}", "model": "m", "response": f"answer {i}"} for i in range(3)]
    importing.import_generic(_jsonl(tmp_path / "r.jsonl", responses), "responses", "jsonl", url=db_url)
    more = [{"task_family": "f", "prompt": f"q{i}", "model": "m2", "response": f"other {i}"} for i in range(2)]
    with StubServer() as s:
        base = ("--database-url", db_url, "rate", "--judge", "stub-judge", "--base-url", s.base_url)
        first = run_cli(*base, "--judge-name", "First name", "--format", "json")
        assert first.exit_code == 0, first
        assert json.loads(first.stdout)["judge_name"] == "First name"
        importing.import_generic(_jsonl(tmp_path / "r2.jsonl", more), "responses", "jsonl", url=db_url)
        # the same judge (same model, endpoint, prompt, parameters) under another name: refused, nothing rated
        r = run_cli(*base, "--judge-name", "Other name")
        assert r.exit_code == 2, r
        assert "--judge-name 'Other name'" in r.stderr and "stored under the name 'First name'" in r.stderr, r
        assert "drop --judge-name, or give --judge-name 'First name'" in r.stderr
        # no name given: the stored name is printed (table and JSON), the new responses rated
        r = run_cli(*base)
        assert r.exit_code == 0, r
        assert "(First name, pointwise_v1)" in r.stdout and "this run ok 2" in r.stdout, r
        same = run_cli(*base, "--judge-name", "First name", "--format", "json")
        assert same.exit_code == 0 and json.loads(same.stdout)["judge_name"] == "First name"
    engine = get_engine(db_url)
    with session_scope(engine) as ss:
        names = ss.scalars(select(m.Judge.name)).all()
        n_ratings = len(ss.scalars(select(m.Rating.id)).all())
    engine.dispose()
    assert names == ["First name"] and n_ratings == 5


# ------------------------------------------------------------------ fit --l-ref
def _pairs(n=40, seed=0):
    rng = np.random.default_rng(seed)
    la, lb = rng.integers(10, 500, n).astype(float), rng.integers(10, 500, n).astype(float)
    sa, sb = rng.integers(1, 11, n).astype(float), rng.integers(1, 11, n).astype(float)
    y = (la < lb).astype(float)
    return sa, sb, la, lb, y


@pytest.mark.parametrize("l_ref", [1e4, 1e300])
def test_l_ref_far_above_the_lengths_says_so(l_ref):
    sa, sb, la, lb, y = _pairs()
    with pytest.raises(FitError) as exc:
        fit_pairwise(sa, sb, la, lb, y, scale=(1, 10), l_ref=l_ref, floor=0.25)
    msg = str(exc.value)
    assert "same length" not in msg
    assert f"L_ref {l_ref:.6g} lies outside the labelled answers' lengths" in msg
    assert "shorter than the short-side floor (0.25 x L_ref)" in msg and "give an --l-ref within" in msg
    # pointwise alike: one feature value for every answer is a shift, not a length term
    with pytest.raises(FitError, match="lies outside the labelled answers' lengths"):
        fit_pointwise(sa, la, sb, expert_scale=(1, 10), judge_scale=(1, 10), l_ref=l_ref, floor=0.25)


def test_l_ref_that_makes_the_linear_feature_overflow_says_so():
    sa, sb, la, lb, y = _pairs()
    with pytest.raises(FitError, match="lies outside the labelled answers' lengths.*not a finite number"):
        fit_pairwise(sa, sb, la, lb, y, scale=(1, 10), l_ref=1e-320, penalty="linear")


def test_same_lengths_keep_their_message():
    sa, sb, la, _, y = _pairs()
    with pytest.raises(FitError, match="every labelled pair compares two responses of the same length"):
        fit_pairwise(sa, sb, la, la.copy(), y, scale=(1, 10), l_ref=1e300, floor=0.25)


@pytest.mark.parametrize("l_ref", [math.nan, math.inf, -math.inf, 0.0, -3.0])
def test_l_ref_not_positive_finite_is_refused_by_the_library(l_ref):
    sa, sb, la, lb, y = _pairs()
    with pytest.raises(UsageError, match="L_ref must be a positive finite length"):
        fit_pairwise(sa, sb, la, lb, y, scale=(1, 10), l_ref=l_ref)
    with pytest.raises(UsageError, match="L_ref must be a positive finite length"):
        fit_pointwise(sa, la, sb, expert_scale=(1, 10), judge_scale=(1, 10), l_ref=l_ref)


def test_fit_l_ref_on_real_data(tmp_path, data_dir, run_cli):
    from judgecal.views import importing

    url = f"sqlite:///{tmp_path / 'f.db'}"
    importing.import_llmbar(data_dir / "llmbar" / "Natural", None, url)
    base = ("--database-url", url, "fit", "--task-family", "llmbar/Natural", "--judge", "GPT-4", "--bootstrap", "0")
    for value in ("10000", "1e300"):
        r = run_cli(*base, "--l-ref", value)
        assert r.exit_code != 0, r
        assert "same length" not in r.stderr and "lies outside the labelled answers' lengths" in r.stderr, r
    for value in ("nan", "inf", "0", "-1"):
        r = run_cli(*base, "--l-ref", value)
        assert r.exit_code == 2 and "--l-ref" in r.stderr, r
