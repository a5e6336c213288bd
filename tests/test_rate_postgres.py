"""``judgecal rate`` on PostgreSQL (a fresh database per test session): three concurrent
worker processes split the work with no duplicates, and a SIGKILLed worker's claims are taken
back by the next run."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

sys.path.insert(0, str(Path(__file__).resolve().parent))
from rate_helpers import NATURAL, PgDatabase, child_env, pg_available, rate_command  # noqa: E402
from stub_openai import StubServer  # noqa: E402

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.skipif(not NATURAL.is_dir(), reason=f"real data folder {NATURAL} is absent"),
    pytest.mark.skipif(not pg_available(), reason="PostgreSQL is not reachable on 127.0.0.1:5432"),
]
FAMILY = "llmbar/Natural"


@pytest.fixture(scope="module")
def pg():
    db = PgDatabase()
    try:
        yield db
    finally:
        db.drop()


@pytest.fixture()
def pg_url(pg):
    from judgecal.views import importing

    importing.import_llmbar(NATURAL, FAMILY, pg.url)  # idempotent: the second test adds nothing
    return pg.url


def _ratings(url, judge_id):
    eng = create_engine(url)
    with eng.connect() as conn:
        rows = conn.execute(text("SELECT response_id, sample_index, status, claimed_by, score FROM rating "
                                 "WHERE judge_id = :j"), {"j": judge_id}).all()
    eng.dispose()
    return rows


def _summary(stdout: str) -> dict:
    return json.loads(stdout[stdout.index("{"):])


@pytest.mark.slow
def test_three_concurrent_workers_no_duplicates(pg_url):
    with StubServer(latency=0.02) as s:
        opts = dict(judge="stub-workers", base_url=s.base_url, task_families=[FAMILY], concurrency=8, samples=2)
        procs = [subprocess.Popen(rate_command(pg_url, **opts), env=child_env(), stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for _ in range(3)]
        outs = [p.communicate(timeout=180) for p in procs]
        requests = s.requests
    assert all(p.returncode == 0 for p in procs), [o[1][-2000:] for o in outs]
    summaries = [_summary(o[0]) for o in outs]
    assert len({x["judge_id"] for x in summaries}) == 1
    rows = _ratings(pg_url, summaries[0]["judge_id"])
    keys = [(r.response_id, r.sample_index) for r in rows]
    assert len(keys) == len(set(keys)) == 400
    assert {r.status for r in rows} == {"ok"} and requests == 400  # every rating made exactly once
    done_by = [x["this_run"]["ok"] for x in summaries]
    assert sum(done_by) == 400
    workers = {r.claimed_by for r in rows}
    assert len(workers) >= 2, done_by  # the work was really split


@pytest.mark.slow
def test_sigkill_then_rerun_on_postgres(pg_url):
    with StubServer(latency=0.05) as s:
        opts = dict(judge="stub-kill", base_url=s.base_url, task_families=[FAMILY], concurrency=4, limit=120)
        proc = subprocess.Popen(rate_command(pg_url, **opts), env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        eng = create_engine(pg_url)
        q = text("SELECT count(*) FROM rating r JOIN judge j ON j.id = r.judge_id WHERE j.model = 'stub-kill' AND r.status = 'ok'")
        deadline, done = time.time() + 60, 0
        while time.time() < deadline and done < 30:
            time.sleep(0.2)
            with eng.connect() as conn:
                done = conn.scalar(q) or 0
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        eng.dispose()
        rerun = subprocess.run(rate_command(pg_url, **opts), env=child_env(), capture_output=True, text=True, timeout=120)
        assert rerun.returncode == 0, rerun.stderr[-2000:]
        summary = _summary(rerun.stdout)
        assert summary["released_stale"] > 0  # the dead worker's claims were taken back at once
        requests = s.requests
    rows = _ratings(pg_url, summary["judge_id"])
    keys = [(r.response_id, r.sample_index) for r in rows]
    assert len(keys) == len(set(keys)) == 120 and {r.status for r in rows} == {"ok"}
    assert 120 <= requests <= 120 + 2 * 4


def _rate_in_process(url, server, **kw):
    from judgecal.views.rate import run_rate

    kw.setdefault("concurrency", 8)
    return run_rate(base_url=server.base_url, database_url=url, progress=False, task_families=[FAMILY], **kw)


def test_pairwise_rows_on_postgres(pg_url):
    """The PostgreSQL claim (one UPDATE ... FROM ... RETURNING with both responses' texts) and
    write (one UPDATE ... FROM unnest(...)) in pairwise mode."""
    eng = create_engine(pg_url)
    with StubServer(answer="Assistant A is better.\n[[A]]") as s:  # one server: the judge's endpoint stays the same
        out = _rate_in_process(pg_url, s, judge="stub-pg-pairwise", pairwise=True, limit=10)
        requests = s.requests
        with eng.begin() as conn:
            rows = conn.execute(text("SELECT position, verdict, status, attempts, claimed_by, raw_output "
                                     "FROM pairwise_judgment WHERE judge_id = :j"), {"j": out["judge_id"]}).all()
            # the 'ab' rows back to pending: the second run renders only them, each must show a as A
            conn.execute(text("UPDATE pairwise_judgment SET status = 'pending', claimed_by = NULL "
                              "WHERE judge_id = :j AND position = 'ab'"), {"j": out["judge_id"]})
            pair_texts = conn.execute(text(
                "SELECT ra.text, rb.text FROM pairwise_judgment p JOIN response ra ON ra.id = p.response_a_id "
                "JOIN response rb ON rb.id = p.response_b_id WHERE p.judge_id = :j AND p.position = 'ab'"),
                {"j": out["judge_id"]}).all()
        again = _rate_in_process(pg_url, s, judge="stub-pg-pairwise", pairwise=True, limit=10)
        bodies = list(s.bodies)[requests:]
    eng.dispose()
    assert len(rows) == 20 and requests == 20 and out["this_run"] == {"ok": 20, "unparsed": 0, "failed": 0, "attempts": 20}
    # the stub always says "A": shown-first wins, so 'ab' -> a and 'ba' -> b
    assert {(r.position, r.verdict) for r in rows} == {("ab", "a"), ("ba", "b")}
    assert all(r.status == "ok" and r.attempts == 1 and r.claimed_by == out["worker"] and "[[A]]" in r.raw_output
               for r in rows)

    def shown(x: str, side: str) -> str:
        return x.split(f"<<<RESPONSE {side} START>>>")[1].split(f"<<<RESPONSE {side} END>>>")[0].strip()

    shown_pairs = sorted((shown(x, "A"), shown(x, "B")) for x in (b["messages"][-1]["content"] for b in bodies))
    assert again["judge_id"] == out["judge_id"] and again["this_run"]["ok"] == 10 and len(bodies) == 10
    assert shown_pairs == sorted((ta.strip(), tb.strip()) for ta, tb in pair_texts)


def test_failed_rows_with_null_columns_on_postgres(pg_url):
    """Failed rows (all-NULL score/latency/token columns in a batch) and ok rows written together."""
    with StubServer(script=["400"] * 5) as s:
        out = _rate_in_process(pg_url, s, judge="stub-pg-failed", limit=30, concurrency=4)
        requests = s.requests
    eng = create_engine(pg_url)
    with eng.connect() as conn:
        rows = conn.execute(text("SELECT status, error, score, raw_output, attempts, latency_s, prompt_tokens FROM rating "
                                 "WHERE judge_id = :j"), {"j": out["judge_id"]}).all()
    eng.dispose()
    failed = [r for r in rows if r.status == "failed"]
    ok = [r for r in rows if r.status == "ok"]
    assert len(rows) == 30 and requests == 30 == sum(r.attempts for r in rows)
    assert len(failed) == 5 and all("HTTP 400" in r.error and r.score is None and r.raw_output is None
                                    and r.latency_s is None for r in failed)
    assert len(ok) == 25 and all(r.score == 7.0 and r.error is None and r.latency_s > 0 for r in ok)


def test_pg_store_claims_once_and_writes_only_its_own_claims(pg_url):
    """_PgStore directly: a claim returns each pending row once (with its texts), and a write
    never touches a row that another worker holds or that is no longer 'running'."""
    import asyncio

    from sqlalchemy import true

    from judgecal.db import models as m
    from judgecal.db.engine import get_engine
    from judgecal.db.queue import PgStore as _PgStore, Plan as _Plan

    with StubServer() as s:
        out = _rate_in_process(pg_url, s, judge="stub-pg-store", limit=4)
    jid = out["judge_id"]
    eng = get_engine(pg_url)
    with eng.begin() as conn:
        ids = [r.id for r in conn.execute(text("SELECT id FROM rating WHERE judge_id = :j ORDER BY id"), {"j": jid})]
        conn.execute(text("UPDATE rating SET status = 'pending', claimed_by = NULL, score = NULL WHERE id = ANY(:ids)"),
                     {"ids": ids[:2]})
        conn.execute(text("UPDATE rating SET status = 'running', claimed_by = 'other:1:x', score = NULL WHERE id = :i"),
                     {"i": ids[2]})
        texts = dict(conn.execute(text("SELECT r.id, s.text FROM rating r JOIN response s ON s.id = r.response_id "
                                        "WHERE r.id = ANY(:ids)"), {"ids": ids}).all())
    plan = _Plan(table=m.Rating, judge_id=jid, scope=true(), pairwise=False, me="me:1:test")

    def result(i, score):
        return {"id": i, "status": "ok", "raw_output": f"Rating: [[{score}]]", "error": None, "attempts": 1,
                "latency_s": 0.5, "prompt_tokens": 3, "completion_tokens": 4, "updated_at": m.utcnow(),
                "score": float(score), "expected_score": None}

    async def go():
        store = await _PgStore.open(eng, plan)
        try:
            first = await store.claim(10)
            second = await store.claim(10)
            # ids[2] is another worker's, ids[3] is done: neither may change
            await store.write([result(i, 3) for i in ids])
            return first, second
        finally:
            await store.aclose()

    first, second = asyncio.run(go())
    with eng.connect() as conn:
        after = {r.id: (r.status, r.claimed_by, r.score) for r in conn.execute(
            text("SELECT id, status, claimed_by, score FROM rating WHERE id = ANY(:ids)"), {"ids": ids})}
    eng.dispose()
    assert sorted(r["id"] for r in first) == ids[:2] and second == []
    assert all(r["text"] == texts[r["id"]] for r in first)
    assert after[ids[0]] == after[ids[1]] == ("ok", "me:1:test", 3.0)
    assert after[ids[2]] == ("running", "other:1:x", None)
    assert after[ids[3]] == ("ok", out["worker"], 7.0)
