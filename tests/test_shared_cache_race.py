"""Two runs beside each other on one rating database (issue 35: three `.ci/run` side by side
shared benchmarks/summaries.py's cache, and a run fitted while another was still storing its
ratings). `rate` says when rows of its selection are still held by another worker, and the
benchmark holds a lock on the shared cache from import to fit and refuses to fit unfinished rows."""

from __future__ import annotations

import datetime as dt
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import create_engine, update

sys.path.insert(0, str(Path(__file__).parent))
from script_helpers import load_benchmark  # noqa: E402
from stub_openai import StubServer  # noqa: E402
from judgecal.db import models as m  # noqa: E402


def _summaries():
    return load_benchmark("summaries")


def test_rate_says_rows_another_worker_still_holds(db_url, tmp_path):
    from judgecal.views import importing
    from judgecal.views.rate import exit_status, notices, run_rate

    rows = [{"task_family": "race", "prompt": f"q{i}", "model": "m", "response": f"answer {i}"} for i in range(3)]
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    importing.import_generic(path, "responses", "jsonl", url=db_url)
    with StubServer(answer="Rating: [[6]]") as s:
        first = run_rate(judge="stub-judge", base_url=s.base_url, database_url=db_url, progress=False,
                         task_families=["race"], concurrency=1)
        assert first["totals"]["ok"] == 3 and not any(line.startswith("note:") for line in notices(first))
        # another worker of this host (a live process: this one, another token) has just claimed a row
        engine = create_engine(db_url)
        with engine.begin() as conn:
            rid = conn.execute(m.Rating.__table__.select().order_by(m.Rating.response_id).limit(1)).first().id
            conn.execute(update(m.Rating).where(m.Rating.id == rid).values(
                status="running", claimed_by=f"{socket.gethostname()[:120]}:{os.getpid()}:otherwrk",
                claimed_at=m.utcnow() - dt.timedelta(seconds=5)))
        engine.dispose()
        second = run_rate(judge="stub-judge", base_url=s.base_url, database_url=db_url, progress=False,
                          task_families=["race"], concurrency=1)
    assert second["totals"]["running"] == 1 and second["totals"]["ok"] == 2
    assert second["released_stale"] == 0 and sum(second["this_run"].values()) == 0
    notes = [line for line in notices(second) if line.startswith("note:")]
    assert len(notes) == 1 and notes[0].startswith("note: 1 row(s) of this selection are being rated by another worker")
    assert exit_status(second) == (0, None)  # not an error of this run: said, not failed


def test_benchmark_refuses_to_fit_unfinished_rows():
    mod = _summaries()
    assert mod.unfinished_rows(json.dumps({"totals": {"ok": 5, "running": 2, "pending": 1}})) == 3
    assert mod.unfinished_rows(json.dumps({"totals": {"ok": 5, "unparsed": 1, "failed": 1}})) == 0
    with pytest.raises(SystemExit, match="gave no JSON summary"):
        mod.unfinished_rows("judge 1: this run ok 3")


def test_second_run_waits_for_the_cache_lock(tmp_path):
    """A process that holds the cache's lock (as a first run does while it rates and fits) makes
    the second wait, say so, and get the lock only after the first has finished."""
    mod = _summaries()
    cache = tmp_path / "cache" / "summaries.db"
    cache.parent.mkdir()
    done = tmp_path / "first-run-done"
    holder = subprocess.Popen([sys.executable, "-c", (
        "import fcntl, sys, time\n"
        f"fh = open({str(cache) + '.lock'!r}, 'a')\n"
        "fcntl.flock(fh, fcntl.LOCK_EX)\n"
        "print('held', flush=True)\n"
        "time.sleep(0.5)\n"
        f"open({str(done)!r}, 'w').close()\n"
        "fcntl.flock(fh, fcntl.LOCK_UN)\n")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        said: list[str] = []
        with mod.cache_lock(cache, said.append):
            assert done.exists()  # the first run had finished before the second went on
        assert said[0].startswith("waiting for another run that holds") and said[1].startswith("got ")
        with mod.cache_lock(cache, said.append):  # free now: no wait, nothing said
            pass
        assert len(said) == 2
    finally:
        holder.wait(timeout=30)
