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
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import create_engine, update

sys.path.insert(0, str(Path(__file__).parent))
from script_helpers import load_benchmark  # noqa: E402
from stub_openai import StubServer  # noqa: E402
from judgecal.db import models as m  # noqa: E402


def _summaries():
    return load_benchmark("summaries")


def _import_answers(db_url: str, path: Path, indices) -> None:
    """Import one answer of model 'm' per index to prompt f'q{i}' (task family 'race')."""
    from judgecal.views import importing

    rows = [{"task_family": "race", "prompt": f"q{i}", "model": "m", "response": f"answer {i}"} for i in indices]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    importing.import_generic(path, "responses", "jsonl", url=db_url)


def _claim_first_row(db_url: str, pid: int, age_s: float) -> None:
    """Another worker of this host (process ``pid``) claimed the first rating row ``age_s`` ago."""
    engine = create_engine(db_url)
    with engine.begin() as conn:
        rid = conn.execute(m.Rating.__table__.select().order_by(m.Rating.response_id).limit(1)).first().id
        conn.execute(update(m.Rating).where(m.Rating.id == rid).values(
            status="running", claimed_by=f"{socket.gethostname()[:120]}:{pid}:otherwrk",
            claimed_at=m.utcnow() - dt.timedelta(seconds=age_s)))
    engine.dispose()


def test_rate_says_rows_another_worker_still_holds(db_url, tmp_path):
    from judgecal.views.rate import exit_status, notices, run_rate

    _import_answers(db_url, tmp_path / "r.jsonl", range(3))
    with StubServer(answer="Rating: [[6]]") as s:
        first = run_rate(judge="stub-judge", base_url=s.base_url, database_url=db_url, progress=False,
                         task_families=["race"], concurrency=1)
        assert first["totals"]["ok"] == 3 and not any(line.startswith("note:") for line in notices(first))
        # another worker of this host (a live process: this one, another token) has just claimed a row
        _claim_first_row(db_url, os.getpid(), age_s=5)
        second = run_rate(judge="stub-judge", base_url=s.base_url, database_url=db_url, progress=False,
                          task_families=["race"], concurrency=1)
    assert second["totals"]["running"] == 1 and second["totals"]["ok"] == 2
    assert second["released_stale"] == 0 and sum(second["this_run"].values()) == 0
    notes = [line for line in notices(second) if line.startswith("note:")]
    assert len(notes) == 1 and notes[0].startswith("note: 1 row(s) of this selection are being rated by another worker (a "
                                                   "live process of this host, or a claim of another host younger than "
                                                   f"the lease of {second['lease_s']:g} s)")
    assert exit_status(second) == (0, None)  # not an error of this run: said, not failed


def test_a_worker_that_dies_during_the_run_is_taken_back_and_said(db_url, tmp_path):
    """helper-27: the rows of a worker of this host that died while this run went on were
    reported as "being rated by another worker" (nobody was): they are taken back at the end of
    the run, and the note says they are pending and to run again."""
    from judgecal.views.rate import exit_status, notices, run_rate

    _import_answers(db_url, tmp_path / "r.jsonl", range(3))
    # the other worker: a child process this test owns, alive when the run starts
    other = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        with StubServer(answer="Rating: [[6]]", latency=0.3) as s:
            first = run_rate(judge="stub-judge", base_url=s.base_url, database_url=db_url, progress=False,
                             task_families=["race"], concurrency=1)
            assert first["totals"]["ok"] == 3
            _claim_first_row(db_url, other.pid, age_s=0)
            _import_answers(db_url, tmp_path / "new.jsonl", [9])  # one more answer: this run's own work
            n0 = s.requests

            def kill_when_called():
                deadline = time.monotonic() + 300
                while s.requests <= n0 and time.monotonic() < deadline:  # this run's call reached the endpoint
                    time.sleep(0.01)
                other.kill()
                other.wait(timeout=30)

            killer = threading.Thread(target=kill_when_called, daemon=True)
            killer.start()
            second = run_rate(judge="stub-judge", base_url=s.base_url, database_url=db_url, progress=False,
                              task_families=["race"], concurrency=1)
            killer.join(timeout=30)
    finally:
        if other.poll() is None:
            other.kill()
        other.wait(timeout=30)
    assert second["released_stale"] == 0 and second["this_run"]["ok"] == 1
    assert second["released_after"] == 1 and second["totals"] == {**second["totals"], "ok": 3, "pending": 1, "running": 0}
    notes = [line for line in notices(second) if line.startswith("note:")]
    assert notes == [notes[0]] and notes[0].startswith(
        "note: 1 row(s) of this selection are still pending (claimed by a worker of this host that died during this "
        "run): they are not rated, so a fit or report run now leaves them out; run the same command again to rate them")
    assert exit_status(second) == (0, None)


def test_pending_note_names_each_cause():
    from judgecal.views.rate import notices

    def note(pending, dead):
        lines = notices({"totals": {"pending": pending}, "released_after": dead, "interrupted": None})
        return lines[0][:lines[0].index("): ")]

    assert note(3, 0) == ("note: 3 row(s) of this selection are still pending (handed back by another worker after "
                          "this run took its last batch")
    assert note(3, 1) == ("note: 3 row(s) of this selection are still pending (1 claimed by a worker of this host that "
                          "died during this run, the rest handed back by another worker after this run took its last batch")
    assert notices({"totals": {"pending": 3, "running": 2}, "interrupted": "SIGINT"}) == []


def test_benchmark_refuses_to_fit_unfinished_rows():
    mod = _summaries()
    assert mod.unfinished_rows(json.dumps({"totals": {"ok": 5, "running": 2, "pending": 1}})) == 3
    assert mod.unfinished_rows(json.dumps({"totals": {"ok": 5, "unparsed": 1, "failed": 1}})) == 0
    with pytest.raises(SystemExit, match="gave no JSON summary"):
        mod.unfinished_rows("judge 1: this run ok 3")


def test_second_run_waits_for_the_cache_lock(tmp_path):
    """A run that holds the cache's lock (a child process this test owns, in the benchmark's own
    cache_lock, as a first run holds it while it rates and fits) makes the second wait, say
    which process it waits for, and go on only after the first has finished."""
    mod = _summaries()
    cache = tmp_path / "cache" / "summaries.db"
    done = tmp_path / "first-run-done"
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time\n"
        f"sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
        "from script_helpers import load_benchmark\n"
        "mod = load_benchmark('summaries')\n"
        f"with mod.cache_lock(__import__('pathlib').Path({str(cache)!r}), print):\n"
        "    print('held', flush=True)\n"
        "    time.sleep(0.5)\n"
        f"    open({str(done)!r}, 'w').close()\n")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        said: list[str] = []
        with mod.cache_lock(cache, said.append):
            assert done.exists()  # the first run had finished before the second went on
            assert (cache.parent / "summaries.db.lock").read_text().startswith(f"pid {os.getpid()} ")
        assert said[0].startswith(f"waiting for pid {holder.pid} (") and said[1].startswith("got ")
        with mod.cache_lock(cache, said.append):  # free now: no wait, nothing said
            pass
        assert len(said) == 2
    finally:
        holder.wait(timeout=30)


def test_cache_lock_that_cannot_be_made_is_one_line(tmp_path):
    mod = _summaries()
    blocker = tmp_path / "home"
    blocker.write_text("a file where the cache's folder should be")
    with pytest.raises(SystemExit) as e:
        with mod.cache_lock(blocker / "cache" / "summaries.db"):
            pass
    assert str(e.value).startswith(f"{blocker}/cache/summaries.db.lock: cannot create the cache's lock file (")
