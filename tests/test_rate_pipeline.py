"""``judgecal rate`` end to end on SQLite against the stub server, with the real LLMBar
Natural data (100 items, 200 responses): resumption, faults, retry-failed, pairwise, secrets,
SIGKILL mid-run."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import create_engine, func, select, text

sys.path.insert(0, str(Path(__file__).resolve().parent))
from rate_helpers import NATURAL, child_env, rate_command  # noqa: E402
from stub_openai import StubServer  # noqa: E402

from judgecal.db import models as m  # noqa: E402

pytestmark = pytest.mark.skipif(not NATURAL.is_dir(), reason=f"real data folder {NATURAL} is absent")
FAMILY = "llmbar/Natural"


@pytest.fixture()
def db_url(tmp_path):
    from judgecal.views import importing

    url = f"sqlite:///{tmp_path / 'rate.db'}"
    importing.import_llmbar(NATURAL, FAMILY, url)
    return url


def _rows(url, table, judge_id):
    eng = create_engine(url)
    with eng.connect() as conn:
        rows = [dict(r._mapping) for r in conn.execute(select(table).where(table.judge_id == judge_id))]
    eng.dispose()
    return rows


def _rate(url, server, **kw):
    from judgecal.views.rate import run_rate

    kw.setdefault("concurrency", 8)
    return run_rate(judge="stub-judge", base_url=server.base_url, database_url=url, progress=False,
                    task_families=[FAMILY], **kw)


def test_rates_every_response_once_and_resumes(db_url):
    with StubServer() as s:
        first = _rate(db_url, s, limit=50)
        assert first["this_run"] == {"ok": 50, "unparsed": 0, "failed": 0, "attempts": 50}
        again = _rate(db_url, s, limit=50)  # nothing left to do
        assert again["this_run"]["attempts"] == 0 and s.requests == 50
        full = _rate(db_url, s)  # the other 150 responses
        assert full["this_run"]["ok"] == 150 and s.requests == 200
    assert first["judge_id"] == full["judge_id"]
    rows = _rows(db_url, m.Rating, full["judge_id"])
    assert len(rows) == 200 and len({r["response_id"] for r in rows}) == 200
    assert {r["status"] for r in rows} == {"ok"} and {r["score"] for r in rows} == {7.0}
    assert all(r["raw_output"].endswith("[[7]]") and r["attempts"] == 1 and r["latency_s"] > 0 for r in rows)
    assert full["totals"]["ok"] == 200


def test_samples_model_filter_and_judge_identity(db_url):
    eng = create_engine(db_url)
    with eng.connect() as conn:
        model = conn.scalar(select(m.Response.model).order_by(m.Response.id).limit(1))
        n_model = conn.scalar(select(func.count()).select_from(m.Response).where(m.Response.model == model))
    eng.dispose()
    with StubServer() as s:
        out = _rate(db_url, s, model_filter=model, samples=2)
        other_temp = _rate(db_url, s, model_filter=model, temperature=0.7, limit=3)
    assert out["this_run"]["ok"] == 2 * n_model
    rows = _rows(db_url, m.Rating, out["judge_id"])
    assert sorted({r["sample_index"] for r in rows}) == [0, 1] and len(rows) == 2 * n_model
    assert other_temp["judge_id"] != out["judge_id"] and other_temp["this_run"]["ok"] == 3


def test_faults_every_rating_ends_ok_or_failed_with_reason(db_url):
    script = ["500", "429", "hang", "malformed", "empty", "503", "close"] * 6
    # the timeout is far above a loaded machine's normal answer time, so that only the scripted
    # faults (and the hangs, which outlast it) cost extra attempts: the bounds below are exact
    with StubServer(script=script, hang_s=6, retry_after=0.05) as s:
        out = _rate(db_url, s, timeout=2.5, max_attempts=3, concurrency=16)
        requests = s.requests
    rows = _rows(db_url, m.Rating, out["judge_id"])
    assert len(rows) == 200
    assert {r["status"] for r in rows} <= {"ok", "failed"}
    assert all(r["error"] for r in rows if r["status"] == "failed")
    assert all(r["score"] == 7.0 for r in rows if r["status"] == "ok")
    assert sum(r["attempts"] for r in rows) == requests == out["this_run"]["attempts"]
    assert 200 + len(script) // 3 <= requests <= 200 + len(script)  # every fault costs one more attempt at most once each


def test_unparsed_kept_raw_then_retry_failed(db_url):
    with StubServer(answer="I think this answer is quite good overall.") as s:
        out = _rate(db_url, s, limit=20)
        rows = _rows(db_url, m.Rating, out["judge_id"])
        assert out["this_run"]["unparsed"] == 20
        assert all(r["status"] == "unparsed" and r["score"] is None and r["raw_output"].startswith("I think")
                   and "no [[rating]]" in r["error"] for r in rows)
        s.answer = "Better. Rating: [[6]]"
        plain = _rate(db_url, s, limit=20)  # unparsed rows are done: nothing to do without --retry-failed
        assert plain["this_run"]["attempts"] == 0
        retried = _rate(db_url, s, limit=20, retry_failed=True)
    assert retried["judge_id"] == out["judge_id"] and retried["reset_failed"] == 20
    rows = _rows(db_url, m.Rating, out["judge_id"])
    assert len(rows) == 20 and {(r["status"], r["score"], r["error"]) for r in rows} == {("ok", 6.0, None)}


def test_retry_failed_honours_limit(db_url):
    """--retry-failed --limit N resets only the rows of the first N responses (pairs)."""
    with StubServer(answer="No verdict here.") as s:
        out = _rate(db_url, s, limit=20)
        pw = _rate(db_url, s, limit=6, pairwise=True)
        s.answer = "Fine. Rating: [[5]]"
        retried = _rate(db_url, s, limit=5, retry_failed=True)
        s.answer = "Fine. [[A]]"
        pw_retried = _rate(db_url, s, limit=2, pairwise=True, retry_failed=True)
    assert out["this_run"]["unparsed"] == 20 and pw["this_run"]["unparsed"] == 12
    assert retried["reset_failed"] == 5 and retried["this_run"]["ok"] == 5
    rows = sorted(_rows(db_url, m.Rating, out["judge_id"]), key=lambda r: r["response_id"])
    assert [r["status"] for r in rows] == ["ok"] * 5 + ["unparsed"] * 15
    assert pw_retried["reset_failed"] == 4 and pw_retried["this_run"]["ok"] == 4  # 2 pairs x 2 orders
    assert sorted(r["status"] for r in _rows(db_url, m.PairwiseJudgment, pw["judge_id"])) == ["ok"] * 4 + ["unparsed"] * 8


def test_pairwise_both_orders_canonical_verdicts(db_url):
    with StubServer(answer="Assistant A is better.\n[[A]]") as s:
        out = _rate(db_url, s, pairwise=True, limit=10)
    rows = _rows(db_url, m.PairwiseJudgment, out["judge_id"])
    assert len(rows) == 20 and out["mode"] == "pairwise"
    # the stub always says "A": shown-first wins, so 'ab' -> a and 'ba' -> b (position bias is visible)
    assert {(r["position"], r["verdict"]) for r in rows} == {("ab", "a"), ("ba", "b")}


def test_secret_in_no_row_or_summary(db_url, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-SECRET")
    with StubServer(script=["echoauth"] * 5, answer="Fine. Rating: [[8]]") as s:
        out = _rate(db_url, s, limit=10, concurrency=1)
        assert "Bearer sk-test-SECRET" in s.auth
    assert "SECRET" not in json.dumps(out)
    eng = create_engine(db_url)
    with eng.connect() as conn:
        for table in ("rating", "judge", "pairwise_judgment"):
            for row in conn.execute(text(f"SELECT * FROM {table}")):
                assert "SECRET" not in json.dumps(list(row), default=str)
    eng.dispose()
    rows = _rows(db_url, m.Rating, out["judge_id"])
    assert sum(r["status"] == "failed" for r in rows) == 5 and any("***" in (r["error"] or "") for r in rows)


@pytest.mark.slow
def test_sigkill_mid_run_then_rerun_exactly_once(db_url):
    """A `judgecal rate` process killed with SIGKILL mid-run, then run again: exactly one
    rating per (response, judge, sample), none missing; the dead claims are taken back."""
    with StubServer(latency=0.05) as s:
        opts = dict(judge="stub-judge", base_url=s.base_url, task_families=[FAMILY], concurrency=4, samples=2)
        proc = subprocess.Popen(rate_command(db_url, **opts), env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.time() + 60
        eng = create_engine(db_url)
        done = 0
        while time.time() < deadline and done < 60:
            time.sleep(0.2)
            with eng.connect() as conn:
                done = conn.scalar(text("SELECT count(*) FROM rating r JOIN judge j ON j.id = r.judge_id "
                                        "WHERE j.model = 'stub-judge' AND r.status = 'ok'")) or 0
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        with eng.connect() as conn:
            states = dict(conn.execute(text("SELECT status, count(*) FROM rating r JOIN judge j ON j.id = r.judge_id "
                                            "WHERE j.model = 'stub-judge' GROUP BY status")).all())
        assert 60 <= states.get("ok", 0) < 400, states  # killed mid-run
        assert states.get("running", 0) > 0, states  # it died holding claims
        requests_before = s.requests
        rerun = subprocess.run(rate_command(db_url, **opts), env=child_env(), capture_output=True, text=True, timeout=120)
        assert rerun.returncode == 0, rerun.stderr
        summary = json.loads(rerun.stdout[rerun.stdout.index("{"):])
        eng.dispose()
    rows = _rows(db_url, m.Rating, summary["judge_id"])
    keys = [(r["response_id"], r["sample_index"]) for r in rows]
    assert len(keys) == len(set(keys)) == 400
    assert {r["status"] for r in rows} == {"ok"}
    # calls lost at the kill: at most the claimed-but-unwritten ones (a claim batch is 2 x concurrency)
    # calls lost at the kill: the 4 in flight and the results of at most one write
    assert 400 <= s.requests <= 400 + 2 * 4 and requests_before < 400
