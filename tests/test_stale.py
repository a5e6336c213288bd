"""Fresh or stale (issue 18, item 6): a calibration records the fingerprint of the ratings,
labels, lengths and verbosity pairs it was fitted on; report, leaderboard and check say "stale"
(check fails) when they changed since, and "freshness unknown" for a calibration stored before
fingerprints existed."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import select, update

from judgecal.calibrate.fingerprint import fingerprint
from judgecal.db import models as m
from judgecal.db.engine import get_engine, session_scope

FAM = "llmbar/Natural"
FIT = ("fit", "--task-family", FAM, "--judge", "GPT-4", "--length-unit", "words", "--bootstrap", "20",
       "--folds", "2", "--no-nested", "--seed", "1", "--format", "json")


def test_fingerprint_is_order_free_and_sensitive():
    a = {"unit": "words", "ratings": [["f", "x", "m", "t", 0, "ok", 7.0], ["f", "y", "m", "t", 0, "ok", 3.0]]}
    b = {"ratings": [["f", "y", "m", "t", 0, "ok", 3], ["f", "x", "m", "t", 0, "ok", 7]], "unit": "words"}
    assert fingerprint(a) == fingerprint(b)  # record order and 3 vs 3.0 do not count
    c = {"unit": "words", "ratings": [["f", "x", "m", "t", 0, "ok", 7.0], ["f", "y", "m", "t", 0, "ok", 3.5]]}
    assert fingerprint(c) != fingerprint(a)
    d = {"unit": "words", "ratings": [["f", "m", "x", "t", 0, "ok", 7.0], ["f", "y", "m", "t", 0, "ok", 3.0]]}
    assert fingerprint(d) != fingerprint(a)  # a record's fields keep their positions
    assert fingerprint({**a, "unit": "chars"}) != fingerprint(a)
    assert fingerprint(a).startswith("fp1:")


def _sql(url, stmt):
    engine = get_engine(url)
    with session_scope(engine) as s:
        s.execute(stmt)
    engine.dispose()


def _a_rating(url, status="ok") -> int:
    """A rating of GPT-4 (the fitted judge) with this status."""
    engine = get_engine(url)
    with session_scope(engine) as s:
        rid = s.scalars(select(m.Rating.id).join(m.Judge, m.Judge.id == m.Rating.judge_id)
                        .where(m.Rating.status == status, m.Judge.name == "GPT-4").order_by(m.Rating.id)).first()
    engine.dispose()
    return rid


def _report(run_cli, url) -> dict:
    r = run_cli("--database-url", url, "report", "--task-family", FAM, "--format", "json", "--bootstrap", "20")
    assert r.exit_code == 0, r
    (entry,) = json.loads(r.stdout)["entries"]
    return entry


def _check(run_cli, url):
    return run_cli("--database-url", url, "check", "--task-family", FAM, "--judge", "GPT-4", "--min-agreement-gain", "-1",
                   "--max-verbosity-winrate", "1")


def _board(run_cli, url) -> dict:
    r = run_cli("--database-url", url, "leaderboard", "--task-family", FAM, "--judge", "GPT-4", "--format", "json",
                "--bootstrap", "20")
    assert r.exit_code == 0, r
    return json.loads(r.stdout)


@pytest.fixture()
def fitted(tmp_path, data_dir, run_cli):
    """Natural with GPT-4's ratings, one of them unparsed (as an empty score string is), fitted."""
    url = f"sqlite:///{tmp_path / 'stale.db'}"
    assert run_cli("--database-url", url, "import", "llmbar", data_dir / "llmbar" / "Natural").exit_code == 0
    rid = _a_rating(url)
    _sql(url, update(m.Rating).where(m.Rating.id == rid).values(status="unparsed", score=None, raw_output=""))
    r = run_cli("--database-url", url, *FIT)
    assert r.exit_code == 0, r
    return url, rid, json.loads(r.stdout)


def test_fresh_after_fit(fitted, run_cli):
    url, _, fit = fitted
    assert fit["fingerprint"].startswith("fp1:")
    e = _report(run_cli, url)
    assert e["stale"] is False and e["fingerprint"] == fit["fingerprint"]
    assert not any("stale" in w or "freshness unknown" in w for w in e["warnings"])
    r = run_cli("--database-url", url, "check", "--task-family", FAM, "--format", "json")
    checks = {c["check"]: c for c in json.loads(r.stdout)["checks"]}
    assert checks["stale"]["ok"] is True and checks["stale"]["value"] is False
    # LLMBar has no concise/verbose pairs: the verbosity thresholds are reported as not applied, never silent
    v = checks["verbosity_win_rate"]
    assert v["value"] is None and v["ok"] is True and "verbosity win-rate not measured" in v["message"]
    assert "--max-verbosity-winrate 0.55 and --min-verbosity-winrate 0.45 were not applied" in v["message"]
    b = _board(run_cli, url)
    assert b["stale"] == {FAM: False}
    assert not any("stale calibration" in f for row in b["rows"] for f in row["flags"])


def test_retried_rating_makes_it_stale_and_a_refit_fresh(fitted, run_cli, tmp_path):
    url, rid, _ = fitted
    # what `rate --retry-failed` does: the unparsed rating becomes ok with a score
    _sql(url, update(m.Rating).where(m.Rating.id == rid).values(status="ok", score=7.0, raw_output="7"))
    e = _report(run_cli, url)
    assert e["stale"] is True
    assert e["warnings"][0].startswith("stale: ") and "refit with judgecal fit" in e["warnings"][0]
    r = _check(run_cli, url)
    assert r.exit_code == 1, r
    fails = [ln for ln in r.stderr.splitlines() if ln.startswith("FAIL")]
    assert any(": stale: " in ln and "refit with judgecal fit" in ln for ln in fails), r.stderr
    b = _board(run_cli, url)
    assert b["stale"] == {FAM: True}
    assert all("stale calibration" in row["flags"] for row in b["rows"])
    # every report format says it
    for fmt in ("table", "markdown"):
        r = run_cli("--database-url", url, "report", "--task-family", FAM, "--format", fmt, "--bootstrap", "20")
        assert r.exit_code == 0 and "stale: the ratings, labels or lengths" in r.stdout, r
    out = tmp_path / "rep"
    r = run_cli("--database-url", url, "report", "--task-family", FAM, "--format", "html", "--out", out, "--no-plots",
                "--bootstrap", "20")
    assert r.exit_code == 0, r
    assert "stale: the ratings, labels or lengths" in (out / "report.html").read_text()
    assert json.loads((out / "report.json").read_text())["entries"][0]["stale"] is True

    r = run_cli("--database-url", url, *FIT)  # refit: fresh again
    assert r.exit_code == 0, r
    e = _report(run_cli, url)
    assert e["stale"] is False
    r = _check(run_cli, url)
    assert not any(": stale: " in ln for ln in r.stderr.splitlines()), r.stderr


def test_changed_score_and_new_label_make_it_stale(fitted, run_cli, tmp_path, data_dir):
    url, _, fit = fitted
    rid = _a_rating(url)
    engine = get_engine(url)
    with session_scope(engine) as s:
        old = s.get(m.Rating, rid).score
    engine.dispose()
    _sql(url, update(m.Rating).where(m.Rating.id == rid).values(score=10.0 if old != 10.0 else 9.0))
    assert _report(run_cli, url)["stale"] is True
    _sql(url, update(m.Rating).where(m.Rating.id == rid).values(score=old))  # back as it was: fresh again
    assert _report(run_cli, url)["stale"] is False

    # a new expert label on responses already there (another annotator)
    data = json.loads((data_dir / "llmbar" / "Natural" / "dataset.json").read_text(encoding="utf-8"))[0]
    label = {"task_family": FAM, "prompt": data["input"], "model_a": "llmbar/output_1", "response_a": data["output_1"],
             "model_b": "llmbar/output_2", "response_b": data["output_2"], "preference": "tie", "annotator": "second"}
    f = tmp_path / "label.jsonl"
    f.write_text(json.dumps(label) + "\n", encoding="utf-8")
    r = run_cli("--database-url", url, "import", "jsonl", f, "--kind", "labels")
    assert r.exit_code == 0, r
    assert _report(run_cli, url)["stale"] is True
    assert _check(run_cli, url).exit_code == 1


def test_calibration_without_fingerprint_is_of_unknown_freshness(fitted, run_cli):
    url, _, fit = fitted
    engine = get_engine(url)
    with session_scope(engine) as s:
        row = s.get(m.Calibration, fit["id"])
        row.data = {k: v for k, v in (row.data or {}).items() if k != "fingerprint"}
    engine.dispose()
    e = _report(run_cli, url)
    assert e["stale"] is None and e["fingerprint"] is None
    assert e["warnings"][0].startswith("freshness unknown: ")
    r = _check(run_cli, url)
    assert r.exit_code == 1 and "freshness unknown" in r.stderr, r
    b = _board(run_cli, url)
    assert b["stale"] == {FAM: None}
    assert all("calibration freshness unknown" in row["flags"] for row in b["rows"])


def test_a_family_the_judge_never_rated_is_named_not_an_empty_board(fitted, run_cli, tmp_path):
    """Issue 18 break-it: a board over a family the judge has no rating in printed an empty table
    and exit 0 with no word."""
    url, _, _ = fitted
    src = tmp_path / "r.jsonl"
    src.write_text(json.dumps({"task_family": "unrated", "prompt": "q", "model": "m", "response": "an answer"}) + "\n")
    assert run_cli("--database-url", url, "import", "jsonl", "--kind", "responses", str(src)).exit_code == 0
    r = run_cli("--database-url", url, "leaderboard", "--judge", "GPT-4", "--task-family", "unrated", "--bootstrap", "0")
    assert r.exit_code == 0 and "note: judge 'GPT-4' has no scored rating in unrated (see `judgecal stats`)" in r.stdout
    b = json.loads(run_cli("--database-url", url, "leaderboard", "--judge", "GPT-4", "--task-family", "unrated",
                           "--bootstrap", "0", "--format", "json").stdout)
    assert b["notes"] == ["judge 'GPT-4' has no scored rating in unrated (see `judgecal stats`)"]
