"""``judgecal rate`` hardening (issue 11) and pairwise rating against a baseline (issue 10),
on SQLite and PostgreSQL against the stub server: ``--pairwise --baseline``, soft
preferences, render errors as row failures, hostile templates refused at load time,
SIGTERM/Ctrl-C handing rows back to 'pending', an endpoint going down mid-run, and the one
meaning of ``--model-filter``."""

from __future__ import annotations

import json
import math
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import create_engine, select, text

sys.path.insert(0, str(Path(__file__).resolve().parent))
from rate_helpers import child_env, rate_command  # noqa: E402
from stub_openai import StubServer  # noqa: E402

from judgecal.db import models as m  # noqa: E402

FAMILY = "hard"
ITEMS = [f"Question {i}: what is {i} + {i}?" for i in range(6)]
MODELS = ("m1", "m2", "base")


def _responses(tmp_path: Path, *, missing_base: int = 5, n_items: int = 6) -> Path:
    """responses JSONL: m1, m2 and base answer each item; base does not answer item ``missing_base``."""
    rows = []
    for i, q in enumerate(ITEMS[:n_items]):
        for model in MODELS:
            if model == "base" and i == missing_base:
                continue
            rows.append({"task_family": FAMILY, "prompt": q, "model": model,
                         "response": f"{model} says {2 * i}" + (" (long)" * (model == "m2"))})
    path = tmp_path / "responses.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture()
def seeded(db_url, tmp_path):
    from judgecal.views import importing

    importing.import_generic(_responses(tmp_path), "responses", "jsonl", url=db_url)
    return db_url


def _rate(url, server, **kw):
    from judgecal.views.rate import run_rate

    kw.setdefault("concurrency", 4)
    return run_rate(judge="stub-judge", base_url=server.base_url, database_url=url, progress=False,
                    task_families=[FAMILY], **kw)


def _verdicts(url, judge_id):
    eng = create_engine(url)
    P, RA, RB = m.PairwiseJudgment, m.Response.__table__.alias("ra"), m.Response.__table__.alias("rb")
    q = (select(RA.c.model, RB.c.model, P.position, P.verdict, P.preference, P.baseline_side, P.status, P.source,
                RA.c.item_id, RB.c.item_id)
         .join(RA, RA.c.id == P.response_a_id).join(RB, RB.c.id == P.response_b_id).where(P.judge_id == judge_id))
    with eng.connect() as conn:
        rows = [tuple(r) for r in conn.execute(q)]
    eng.dispose()
    return rows


# ------------------------------------------------------------------ --pairwise --baseline
def test_baseline_pairs_both_orders_stub_always_a(seeded):
    """The stub always answers "A": every shown-first response wins, so 'ab' -> a (pref 1)
    and 'ba' -> b (pref 0): 100 % first-position preference and 100 % flips."""
    with StubServer(answer="Assistant A is better.\n[[A]]") as s:
        out = _rate(seeded, s, baseline="base")
        assert s.requests == 2 * 2 * 5  # m1, m2 x 5 items with a baseline answer x 2 orders
        again = _rate(seeded, s, baseline="base")  # a second run adds nothing and calls nothing
        assert s.requests == 20 and again["totals"]["ok"] == 20 and again["this_run"]["attempts"] == 0
    assert out["mode"] == "pairwise" and out["baseline"] == "base"
    assert out["skipped"] == {"no_baseline": 2, "items_with_several": 0}  # m1 and m2 on item 5
    assert out["this_run"] == {"ok": 20, "unparsed": 0, "failed": 0, "attempts": 20}
    rows = _verdicts(seeded, out["judge_id"])
    assert len(rows) == 20
    for ma, mb, pos, verdict, pref, side, status, source, item_a, item_b in rows:
        assert (mb, side, status, source) == ("base", "b", "ok", None) and ma in ("m1", "m2")
        assert item_a == item_b  # the SAME item
        assert (verdict, pref) == (("a", 1.0) if pos == "ab" else ("b", 0.0))
    # first position preferred in 20/20; the canonical verdict flips with the order in 10/10 pairs
    assert sum((pos == "ab") == (verdict == "a") for _, _, pos, verdict, *_ in rows) == 20
    pairs = {}
    for ma, _, pos, verdict, _, _, _, _, item, _ in rows:
        pairs.setdefault((ma, item), {})[pos] = verdict
    assert len(pairs) == 10 and all(v == {"ab": "a", "ba": "b"} for v in pairs.values())


def test_baseline_soft_preference_from_logprobs(seeded):
    top = {"A": math.log(0.7), "B": math.log(0.2), "C": math.log(0.1)}
    with StubServer(answer="[[A]]", verdict_top=top) as s:
        out = _rate(seeded, s, baseline="base", model_filter="m1", logprobs=True)
    rows = _verdicts(seeded, out["judge_id"])
    assert len(rows) == 10 and {r[0] for r in rows} == {"m1"}
    for _, _, pos, verdict, pref, *_ in rows:
        # P(first preferred) = 0.7 + 0.1 / 2 = 0.75; response_a is first in 'ab', second in 'ba'
        assert pref == pytest.approx(0.75 if pos == "ab" else 0.25)


def test_plain_pairwise_sets_preference_and_keeps_apart_from_baseline_rows(seeded, tmp_path):
    from judgecal.views import importing

    lab = tmp_path / "labels.jsonl"
    lab.write_text(json.dumps({"task_family": FAMILY, "prompt": ITEMS[0], "model_a": "m1", "response_a": "m1 says 0",
                               "model_b": "m2", "response_b": "m2 says 0 (long)", "preference": "a"}) + "\n")
    importing.import_generic(lab, "labels", "jsonl", url=seeded)
    with StubServer(answer="[[C]]") as s:
        plain = _rate(seeded, s, pairwise=True)
        base = _rate(seeded, s, baseline="base", limit=1)
    assert plain["totals"]["ok"] == 2 and base["totals"]["ok"] == 2  # the scopes do not mix
    rows = _verdicts(seeded, plain["judge_id"])
    assert {(r[0], r[1], r[3], r[4], r[5]) for r in rows} == {("m1", "m2", "tie", 0.5, None), ("m1", "base", "tie", 0.5, "b")}


def test_baseline_unknown_model_is_a_usage_error(seeded):
    from judgecal.errors import UsageError

    with StubServer() as s, pytest.raises(UsageError, match="--baseline 'nobody'"):
        _rate(seeded, s, baseline="nobody")


# ------------------------------------------------------------------ templates
TEMPLATE = """---
name: {name}
mode: pointwise
scale_min: 1
scale_max: 10
verdict: "[[rating]]"
roles: [user]
---
{{% block user %}}{body}{{% endblock %}}
"""


def _template(tmp_path, body, name="t"):
    f = tmp_path / f"{name}.md"
    f.write_text(TEMPLATE.format(name=name, body=body), encoding="utf-8")
    return f


@pytest.mark.parametrize("body", [
    "{{ 1 / 0 }}",  # fails on every row
    "{% if '4' in response %}{{ 1 / 0 }}{% endif %}{{ question }} {{ response }}",  # on some rows
])
def test_render_error_is_the_rows_failure_and_the_run_ends(seeded, tmp_path, body):
    tmpl = _template(tmp_path, body)
    with StubServer() as s:
        proc = subprocess.run(rate_command(seeded, judge="stub-judge", base_url=s.base_url, task_family=FAMILY,
                                           prompt=str(tmpl)),
                              env=child_env(), capture_output=True, text=True, timeout=120)
    assert "Task exception was never retrieved" not in proc.stderr and "Traceback" not in proc.stderr
    assert proc.returncode == 1, proc.stderr
    summary = json.loads(proc.stdout[proc.stdout.index("{"):])
    r = summary["this_run"]
    assert r["ok"] + r["failed"] == 17 and summary["failed_by_cause"]["render"] == r["failed"] > 0
    assert "row(s) of this run failed" in proc.stderr
    eng = create_engine(seeded)
    with eng.connect() as conn:
        errors = [e for (e,) in conn.execute(text("SELECT error FROM rating WHERE status = 'failed'"))]
    eng.dispose()
    assert errors and all(e.startswith("cannot render the prompt: ") and "ZeroDivisionError" in e for e in errors)
    if "if" in body:  # only the rows whose response contains a 4 (items 2 and 7 -> "says 4"): m1, m2, base on item 2
        assert r["failed"] == 3 and r["ok"] == 14


@pytest.mark.parametrize("body,reason", [
    ("{{ cycler.__init__.__globals__.os.popen('id').read() }}", "uses 'cycler'"),
    ("{{ ''.__class__.__mro__ }}", "'__mro__'"),
    ("{{ question|attr('__class__') }}", "'__class__'"),
    ("{% include '/etc/passwd' %}", "include of '/etc/passwd'"),
    ("{% include '../secret.md' %}", "include of '../secret.md'"),
    ("{% include question %}", "computed name"),
    ("{{ environ }}{{ question }}", "uses 'environ'"),
    ("{{ range(9) }}", "uses 'range'"),
])
def test_hostile_template_refused_at_load_time(tmp_path, run_cli, body, reason):
    tmpl = _template(tmp_path, body)
    with StubServer() as s:
        res = run_cli("--database-url", f"sqlite:///{tmp_path / 'x.db'}", "rate", "--judge", "j", "--base-url", s.base_url,
                      "--prompt", str(tmpl))
        assert s.requests == 0
    assert res.exit_code == 2
    line = res.stderr.strip()
    assert "\n" not in line and line.startswith(f"error: {tmpl}:9: template refused") and reason in line


def test_include_inside_the_prompts_folder_is_hashed(tmp_path):
    from judgecal.judge.prompts import load_prompt

    (tmp_path / "part.txt").write_text("Be fair. {{ question }}", encoding="utf-8")
    tmpl = _template(tmp_path, "{% include 'part.txt' %} / {{ response }}")
    p = load_prompt(str(tmpl))
    assert p.render(question="Q", response="R") == [{"role": "user", "content": "Be fair. Q / R"}]
    (tmp_path / "part.txt").write_text("Be kind. {{ question }}", encoding="utf-8")
    assert load_prompt(str(tmpl)).sha256 != p.sha256  # editing the included file is a new prompt
    outside = tmp_path / "sub"
    outside.mkdir()
    (outside / "link.txt").symlink_to(Path("/etc/hostname"))
    sub = _template(outside, "{% include 'link.txt' %}")
    from judgecal.errors import InputError

    with pytest.raises(InputError, match="template refused"):
        load_prompt(str(sub))


# a template that stays under the sandbox's size and step limits but renders for ~1000 s
SLOW = "{% set s=question*7000 %}{% for a in s[:50000] %}{{ s|wordcount }}{% endfor %}{{ question }} {{ response }}"


def test_render_over_its_time_limit_fails_the_row(seeded, tmp_path):
    tmpl = _template(tmp_path, SLOW)
    with StubServer() as s:
        start = time.time()
        summary = _rate(seeded, s, prompt=str(tmpl), render_time_limit_s=0.2, limit=3)
        assert time.time() - start < 20 and s.requests == 0
    assert summary["this_run"] == {"ok": 0, "unparsed": 0, "failed": 3, "attempts": 0}
    assert summary["failed_by_cause"]["render"] == 3
    eng = create_engine(seeded)
    with eng.connect() as conn:
        errors = [e for (e,) in conn.execute(text("SELECT error FROM rating"))]
    eng.dispose()
    assert errors == [f"cannot render the prompt: {tmpl}: the template went over a limit: the template took longer "
                      "than 0.2 s to render"] * 3


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_during_a_slow_render_hands_rows_back(seeded, tmp_path, sig):
    """The render holds the event loop; the signal still stops it at once (not after the
    render's 10 s time limit), and every claimed row goes back to 'pending'."""
    tmpl = _template(tmp_path, SLOW)
    with StubServer() as s:
        proc = subprocess.Popen(rate_command(seeded, judge="stub-judge", base_url=s.base_url, task_family=FAMILY,
                                             prompt=str(tmpl), concurrency=2),
                                env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        eng = create_engine(seeded)
        end = time.time() + 60
        while time.time() < end and not (_states(seeded).get("running")):
            time.sleep(0.1)
        eng.dispose()
        time.sleep(0.5)  # inside the first render now
        sent = time.time()
        proc.send_signal(sig)
        out, errtext = proc.communicate(timeout=60)
        took = time.time() - sent
        assert s.requests == 0
    assert proc.returncode == 128 + sig, errtext
    assert took < 9, took  # under the render's 10 s time limit: the signal, not the limit, stopped it
    summary = json.loads(out[out.index("{"):])
    assert summary["interrupted"] == sig.name and summary["this_run"]["failed"] == 0
    assert summary["handed_back"] == 17 and "Traceback" not in errtext
    assert _states(seeded) == {"pending": 17}


# ------------------------------------------------------------------ signals
def _wait_ok(url, n, deadline=60.0):
    eng = create_engine(url)
    end = time.time() + deadline
    done = 0
    while time.time() < end and done < n:
        time.sleep(0.1)
        with eng.connect() as conn:
            done = conn.scalar(text("SELECT count(*) FROM rating WHERE status = 'ok'")) or 0
    eng.dispose()
    return done


def _states(url):
    eng = create_engine(url)
    with eng.connect() as conn:
        out = dict(conn.execute(text("SELECT status, count(*) FROM rating GROUP BY status")).all())
    eng.dispose()
    return out


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_hands_queued_rows_back_to_pending(seeded, sig):
    with StubServer(latency=0.3) as s:
        opts = dict(judge="stub-judge", base_url=s.base_url, task_family=FAMILY, concurrency=2, samples=3)
        proc = subprocess.Popen(rate_command(seeded, **opts), env=child_env(), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        assert _wait_ok(seeded, 4) >= 4
        proc.send_signal(sig)
        out, errtext = proc.communicate(timeout=30)
        assert proc.returncode == 128 + sig, errtext
        summary = json.loads(out[out.index("{"):])
        assert summary["interrupted"] == sig.name and summary["this_run"]["failed"] == 0
        assert f"interrupted by {sig.name}" in errtext and "Traceback" not in errtext
        states = _states(seeded)
        assert "failed" not in states and "running" not in states, states
        assert states["pending"] > 0 and states["ok"] + states["pending"] == 51
        # the next plain run finishes them: nothing failed, nothing rated twice
        rerun = subprocess.run(rate_command(seeded, **opts), env=child_env(), capture_output=True, text=True, timeout=120)
        assert rerun.returncode == 0, rerun.stderr
        again = json.loads(rerun.stdout[rerun.stdout.index("{"):])
        assert again["this_run"]["ok"] == states["pending"] and again["released_stale"] == 0
    assert _states(seeded) == {"ok": 51}


# ------------------------------------------------------------------ endpoint down mid-run
def test_endpoint_down_mid_run_pauses_then_resumes(seeded):
    first = StubServer(latency=0.05).start()
    port, url = first.port, first.base_url
    second = None
    try:
        from judgecal.views.rate import run_rate
        import threading

        result = {}

        def go():
            result["out"] = run_rate(judge="stub-judge", base_url=url, database_url=seeded, progress=False,
                                     task_families=[FAMILY], concurrency=2, samples=3, max_outage_s=60)

        t = threading.Thread(target=go)
        t.start()
        assert _wait_ok(seeded, 6) >= 6
        first.stop()
        first = None
        time.sleep(3)  # down for 3 s: without the pause every remaining row failed within ~2 s
        second = StubServer(port=port).start()
        t.join(120)
        out = result["out"]
    finally:
        for srv in (first, second):
            if srv is not None:
                srv.stop()
    assert out["this_run"]["failed"] == 0 and out["totals"] == {"pending": 0, "running": 0, "ok": 51, "unparsed": 0, "failed": 0}
    assert out["outage"]["pauses"] >= 1 and 0 < out["outage"]["paused_s"] <= 60 and not out["outage"]["gave_up"]


def test_endpoint_gone_for_good_fails_rows_after_the_bound_and_exits_1(seeded):
    s = StubServer().start()
    url = s.base_url
    s.stop()  # nothing listens there any more
    start = time.time()
    proc = subprocess.run(rate_command(seeded, judge="stub-judge", base_url=url, task_family=FAMILY, max_outage=2,
                                       limit=4),
                          env=child_env(), capture_output=True, text=True, timeout=120)
    assert time.time() - start < 60
    assert proc.returncode == 1, proc.stderr
    summary = json.loads(proc.stdout[proc.stdout.index("{"):])
    assert summary["this_run"]["failed"] == 4 and summary["failed_by_cause"]["endpoint"] == 4
    assert summary["outage"]["gave_up"] and summary["outage"]["paused_s"] == pytest.approx(2, abs=0.01)
    assert "endpoint stayed unreachable" in proc.stderr


# ------------------------------------------------------------------ --model-filter
@pytest.mark.parametrize("pattern,expected", [
    ("a_*", {"a_b"}),          # '_' is literal, and case matters (SQLite's LIKE would also match A_B)
    ("A*", {"A_B"}),
    ("a\\*", {"a\\b"}),        # a backslash is literal, not an escape
    ("a%*", {"a%b"}),
    ("a?*", {"a?b"}),
    ("a[*", {"a[b"}),
    ("*b", {"a_b", "axb", "a\\b", "a%b", "a?b", "a[b"}),
    ("axb", {"axb"}),
    ("a_b", {"a_b"}),
])
def test_model_filter_one_meaning_on_both_dialects(db_url, tmp_path, pattern, expected):
    from judgecal.views import importing
    from judgecal.db import queue
    from judgecal.db.engine import get_engine, session_scope

    models = ["a_b", "A_B", "axb", "a\\b", "a%b", "a?b", "a[b"]
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps({"task_family": "f", "prompt": "p", "model": mo, "response": "r"}) + "\n"
                            for mo in models), encoding="utf-8")
    importing.import_generic(path, "responses", "jsonl", url=db_url)
    eng = get_engine(db_url)
    with session_scope(eng) as s:
        sel = queue.response_selection(s, [], pattern)
        got = set(s.scalars(select(m.Response.model).where(m.Response.id.in_(sel))))
    eng.dispose()
    assert got == expected


@pytest.mark.parametrize("opts,message", [
    (("--model-filter", ""), "error: --model-filter '': an empty filter matches no model name"),
    (("--model-filter", "  "), "error: --model-filter '  ': an empty filter matches no model name"),
    (("--judge", " "), "error: Invalid value for '--judge': ' ' is empty: it names nothing"),
])
def test_empty_filter_or_judge_is_refused(tmp_path, run_cli, opts, message):
    with StubServer() as s:
        args = ["--database-url", f"sqlite:///{tmp_path / 'x.db'}", "rate", "--base-url", s.base_url]
        res = run_cli(*args, *(("--judge", "j") if opts[0] != "--judge" else ()), *opts)
        assert s.requests == 0
    assert res.exit_code == 2 and res.stderr.startswith(message) and res.stderr.count("\n") == 1, res.stderr
