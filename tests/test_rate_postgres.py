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
    from judgecal import importing

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
