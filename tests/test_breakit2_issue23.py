"""Issue 23, the last break-it pass (a helper acting as a new user, after the seven leftovers were
fixed): each defect it found, on both dialects where the database is involved."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from db_helpers import count_rows as _count

ANN = {"instruction": "Say hi", "output_1": "Hello", "generator_1": "base", "output_2": "Hi there",
       "generator_2": "m", "annotator": "a", "preference": 1}


def _upgrade(run_cli, url):
    assert run_cli("--database-url", url, "db", "upgrade").exit_code == 0


def _ann_file(path: Path, body: str) -> Path:
    path.write_text("[\n" + body + "\n]\n", encoding="utf-8")
    return path


def test_alpaca_key_spelt_with_escapes_is_a_repeat(db_url, run_cli, tmp_path):
    """`"preference": 1, "pref\\u0065rence": 2` is one key given twice: the fast reader counted
    only the literal spelling and kept the last value. Now refused at FILE:LINE, for any field."""
    _upgrade(run_cli, db_url)
    base = json.dumps(ANN)[:-1]
    cases = {"preference": base + ', "pref\\u0065rence": 2}',
             "generator_2": base + ', "gener\\u0061tor_2": "evil"}'}
    for field, body in cases.items():
        f = _ann_file(tmp_path / f"{field}.json", body)
        r = run_cli("--database-url", db_url, "import", "alpaca-eval", f)
        assert r.exit_code == 2 and f"{f.name}:2: field '{field}' appears twice" in r.stderr, (field, r)
    outputs = _ann_file(tmp_path / "model_outputs.json",
                        '{"instruction": "i", "output": "ok", "generator": "g", "outp\\u0075t": "EVIL"}')
    r = run_cli("--database-url", db_url, "import", "alpaca-eval", outputs)
    assert r.exit_code == 2 and "field 'output' appears twice" in r.stderr, r
    assert _count(db_url, "pairwise_judgment") == 0 and _count(db_url, "response") == 0
    # an escaped character in a VALUE is no repeat: imported (through the careful reader)
    f = _ann_file(tmp_path / "ok.json", json.dumps(dict(ANN, output_2="H\\u0069 there"))[:-1] + "}")
    assert run_cli("--database-url", db_url, "import", "alpaca-eval", f).exit_code == 0


def test_alpaca_repeat_inside_the_message_is_refused_on_both_readers(db_url, run_cli, tmp_path):
    """A key given twice inside raw_completion.message (read: its content is the raw output) is
    refused whichever reader runs; one inside the token log-probabilities (never read) is read
    the same way by both (the result no longer depends on which reader ran)."""
    _upgrade(run_cli, db_url)
    msg = '"raw_completion": {"message": {"content": "1", "content": "2"}}'
    logprobs = '"raw_completion": {"text": "m", "logprobs": {"content": [{"token": "m", "token": "M"}]}}'
    base = json.dumps(ANN)[:-1]
    for careful in (False, True):  # a value equal to a field name sends the file to the careful reader
        extra = ', "dataset": "preference"' if careful else ""
        f = _ann_file(tmp_path / f"msg{careful}.json", base + extra + ", " + msg + "}")
        r = run_cli("--database-url", db_url, "import", "alpaca-eval", f)
        assert r.exit_code == 2 and f"msg{careful}.json:2: field 'content' appears twice" in r.stderr, (careful, r)
        f = _ann_file(tmp_path / f"lp{careful}.json", json.dumps(dict(ANN, instruction=f"I{careful}"))[:-1]
                      + extra + ", " + logprobs + "}")
        r = run_cli("--database-url", db_url, "import", "alpaca-eval", f)
        assert r.exit_code == 0, (careful, r)
    assert _count(db_url, "pairwise_judgment") == 2


def _llmbar(folder: Path, records: list[dict], ratings: dict[str, list] | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "dataset.json").write_text(json.dumps(records))
    for judge, results in (ratings or {}).items():
        (folder / f"ratings_{judge}.json").write_text(json.dumps([dict(r, results=x) for r, x in zip(records, results)]))
    return folder


def test_llmbar_literal_results_with_a_repeated_key_is_refused(db_url, run_cli, tmp_path):
    """`results` written as a Python-literal string with 'score_1' twice: ast.literal_eval kept
    the last score silently. Now FILE:LINE names the key; nothing is written."""
    _upgrade(run_cli, db_url)
    rec = {"input": "q", "output_1": "a", "output_2": "bb", "label": "1"}
    folder = _llmbar(tmp_path / "S", [rec], {"J": ["[{'score_1': ['6', 'stop'], 'score_1': ['9', 'stop'], "
                                                    "'score_2': ['1', 'stop']}]"]})
    r = run_cli("--database-url", db_url, "import", "llmbar", folder)
    assert r.exit_code == 2 and "ratings_J.json:1: field 'results' (a Python literal string): field 'score_1' " \
                                "appears twice" in r.stderr, r
    assert _count(db_url, "rating") == 0 and _count(db_url, "expert_label") == 0


def test_llmbar_swapped_twin_of_a_stored_pair(db_url, run_cli, tmp_path):
    """A pair stored by an earlier import, given again with its outputs swapped: with the other
    output labelled better it was stored as a second, contradicting gold label; with the same
    fact, as two more responses and a second label. Now refused, or counted and not stored."""
    _upgrade(run_cli, db_url)
    rec = {"input": "q", "output_1": "a", "output_2": "bb", "label": "1"}
    scores = [[{"score_1": ["7", "stop"], "score_2": ["3", "stop"]}]]
    assert run_cli("--database-url", db_url, "import", "llmbar", _llmbar(tmp_path / "A" / "S", [rec])).exit_code == 0
    swapped = {"input": "q", "output_1": "bb", "output_2": "a"}
    r = run_cli("--database-url", db_url, "import", "llmbar", _llmbar(tmp_path / "B" / "S", [dict(swapped, label="1")]))
    assert r.exit_code == 2 and "dataset.json:1: the same pair as an earlier import" in r.stderr \
        and "other output labelled better" in r.stderr, r
    r = run_cli("--database-url", db_url, "import", "llmbar", "--format", "json",
                _llmbar(tmp_path / "C" / "S", [dict(swapped, label="2")], {"J": scores}))
    assert r.exit_code == 0, r
    out = json.loads(r.stdout)
    assert out["added"]["response"] == 0 and out["added"]["expert_label"] == 0 and out["added"]["rating"] == 0, out
    assert sum(v["count"] for k, v in out["skipped"].items() if "same pair" in k or "repeats" in k) == 2, out
    assert _count(db_url, "expert_label") == 1 and _count(db_url, "response") == 2
    # the same pair in the same order again (a re-import, say, with a new judge's file) is not a twin
    r = run_cli("--database-url", db_url, "import", "llmbar", "--format", "json",
                _llmbar(tmp_path / "D" / "S", [rec], {"K": scores}))
    assert r.exit_code == 0 and json.loads(r.stdout)["added"]["rating"] == 2, r


def test_llmbar_protocol_folder_leftovers_and_nested_keys_are_reported(db_url, run_cli, data_dir, tmp_path):
    """Files in a protocol folder besides result.json/statistics.json (Statistics.json of
    another case, a backup) were passed over; unknown keys inside a result's last element were
    ignored. Now counted and warned; the real repository layout gives neither."""
    import shutil

    _upgrade(run_cli, db_url)
    src = data_dir / "llmbar_repo" / "Dataset" / "LLMBar" / "Natural"
    folder = tmp_path / "Natural"
    (folder / "evaluators" / "GPT-4").mkdir(parents=True)
    shutil.copy(src / "dataset.json", folder / "dataset.json")
    shutil.copytree(src / "evaluators" / "GPT-4" / "Vanilla", folder / "evaluators" / "GPT-4" / "Vanilla")
    vanilla = folder / "evaluators" / "GPT-4" / "Vanilla"
    (vanilla / "statistics.json").rename(vanilla / "Statistics.json")
    (vanilla / "result.json.bak").write_text("x")
    records = json.loads((vanilla / "result.json").read_text())
    records[1]["results"][-1]["swap = maybe"] = {"winner": "1"}
    records[2]["results"][-1]["swap = False"]["confidence"] = 0.9
    (vanilla / "result.json").write_text(json.dumps(records, indent=1))
    r = run_cli("--database-url", db_url, "import", "llmbar", "--format", "json", folder)
    assert r.exit_code == 0, r
    out = json.loads(r.stdout)
    (reason, entry), = [(k, v) for k, v in out["not_read"].items() if "not read in a protocol folder" in k]
    assert sorted(Path(w).name for w in entry["where"]) == ["Statistics.json", "result.json.bak"]
    warnings = "\n".join(out["warnings"])
    assert "(the last element of 'results'): field(s) this format does not have, not read: 'swap = maybe'" in warnings
    assert "'confidence' (1 record(s)" in warnings
    real = run_cli("--database-url", f"sqlite:///{tmp_path / 'real.db'}", "import", "llmbar", "--format", "json", src)
    assert real.exit_code == 0 and "does not have" not in real.stdout and "not read in a protocol" not in real.stdout


def test_serve_choice_links_name_the_right_judge(db_url, run_cli, tmp_path):
    """A judge NAMED `id:5` was linked as judge=id:5 from the choosers, which opens judge id 5,
    another judge. Now such names (and `name:`, digits) are linked by their own id."""
    pytest.importorskip("starlette")
    from starlette.testclient import TestClient

    from judgecal.web import create_app

    _upgrade(run_cli, db_url)
    names = ["plain", "j2", "j3", "j4", "j5", "id:1", "7"]
    rows = [{"task_family": "fam", "prompt": f"P{i}", "model": m, "response": m * (i + 1), "judge": j,
             "scale_min": 1, "scale_max": 10, "score": 3 + i % 3} for i in range(3) for m in ("a", "b") for j in names]
    f = tmp_path / "r.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert run_cli("--database-url", db_url, "import", "jsonl", "--kind", "ratings", f).exit_code == 0
    c = TestClient(create_app(db_url))
    options = c.get("/leaderboard?format=json").json()["options"]
    by_label = {o["label"]: o["url"] for o in options}
    for name in ("id:1", "7"):
        board = c.get(by_label[name]).json()
        assert board["judge"] == name, (name, by_label[name], board["judge"])
    assert by_label["plain"].endswith("judge=plain&format=json")


def test_not_identified_fit_shows_no_parameters_in_lists(tmp_path):
    """`fit --list`, the fit table and serve's calibration list showed gamma, p and the in-sample
    calibrated agreement of a fit its labels do not determine (the report said n.i.)."""
    from rich.console import Console

    from judgecal.report.tables import fits_table
    from judgecal.web.app import _environment, link, fmt

    row = {"id": 3, "task_family": "f", "judge": "J", "length_unit": "words", "l_ref": 120.0, "gamma": 0.256,
           "gamma_ci": [0.0, 0.991], "p": 1.0, "p_ci": None, "n": 100, "agreement_raw": 0.92,
           "agreement_calibrated": 0.925, "agreement_cv_raw": 0.91, "agreement_cv_calibrated": 0.9,
           "verbosity_win_rate_raw": 0.6, "verbosity_win_rate_calibrated": 0.55, "created_at": "2026-12-03T10:00:00",
           "identification": {"identified": False, "reasons": ["p at its bound"]}}
    console = Console(width=250, record=True)
    console.print(fits_table([row]))
    text = console.export_text()
    assert "0.256" not in text and "0.925" not in text and "n.i." in text
    assert "0.910 -> 0.900" in text  # the cross-validated figures stay
    html = _environment().get_template("calibrations.html.j2").render(
        fits=[dict(row, objective="agreement", selection={}, judge_ref="J")], carried={},
        carried_text=[], database="x", link=link, fmt=fmt, title="Calibrations", nav="calibration")
    assert "n.i." in html and "0.256" not in html


def test_serve_calibration_ids_out_of_range_are_bad_requests(db_url, run_cli, tmp_path):
    """`calibration=9223372036854775808` answered 500 (SQLite: OverflowError) or 503 (PostgreSQL:
    integer out of range): now 400 naming the range, on every page that takes one."""
    pytest.importorskip("starlette")
    from starlette.testclient import TestClient

    from judgecal.web import create_app

    _upgrade(run_cli, db_url)
    c = TestClient(create_app(db_url))
    for path in ("/leaderboard?judge=J&calibration=99999999999999999999", "/calibration?calibration=2147483648",
                 "/audit?family=f&judge=J&calibration=9223372036854775808"):
        r = c.get(path)
        assert r.status_code == 400 and "ids are at most 2147483647" in r.text, (path, r.status_code)


def test_alpaca_same_file_spelt_two_ways_is_read_once(db_url, run_cli, tmp_path):
    """`import alpaca-eval A.json /abs/A.json` read the file twice (its records counted as
    'already stored') without a note: now read once, with the warning."""
    _upgrade(run_cli, db_url)
    f = _ann_file(tmp_path / "a.json", json.dumps(ANN))
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        r = run_cli("--database-url", db_url, "import", "alpaca-eval", "--format", "json", "a.json", str(f))
    finally:
        os.chdir(cwd)
    assert r.exit_code == 0, r
    out = json.loads(r.stdout)
    assert any("1 file(s) given more than once" in w for w in out["warnings"]), out
    assert not any("already stored" in k for k in out["skipped"]), out["skipped"]


def test_serve_choosers_narrow_by_family_or_judge(db_url, run_cli, tmp_path):
    """`/calibration?family=F` was a 400 and `/leaderboard?family=F` listed every judge: a family
    or judge given now narrows the choice (one judge left: its board)."""
    pytest.importorskip("starlette")
    from starlette.testclient import TestClient

    from judgecal.web import create_app

    _upgrade(run_cli, db_url)
    rows = [{"task_family": fam, "prompt": f"P{i}", "model": m, "response": m * (i + 1), "judge": j,
             "scale_min": 1, "scale_max": 10, "score": 3 + i % 3}
            for fam, judges in (("f1", ("A", "B")), ("f2", ("C",))) for j in judges for i in range(3) for m in "ab"]
    f = tmp_path / "r.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert run_cli("--database-url", db_url, "import", "jsonl", "--kind", "ratings", f).exit_code == 0
    c = TestClient(create_app(db_url))
    assert [o["label"] for o in c.get("/leaderboard?family=f1&format=json").json()["options"]] == ["A", "B"]
    board = c.get("/leaderboard?family=f2&format=json").json()
    assert board["judge"] == "C", board.get("judge")
    listing = c.get("/calibration?family=f1&format=json")
    assert listing.status_code == 200 and listing.json()["calibrations"] == []


def test_small_inputs_said_not_dropped(db_url, run_cli, tmp_path):
    """An Auto-J scenario with spaces around it was trimmed without a word; a family ending in
    U+200B was a family apart from its visible name; `export leaderboard` of an empty board wrote
    a 2-byte file and dropped the board's note; `leaderboard --bootstrap 10` (and bootstrap=5
    on a page) gave 'CIs' of 10 resamples where report refuses them."""
    _upgrade(run_cli, db_url)
    autoj = tmp_path / "autoj.jsonl"
    autoj.write_text(json.dumps({"prompt": "p", "response 1": "x", "response 2": "yy", "label": 0,
                                 "scenario": "code "}) + "\n")
    r = run_cli("--database-url", db_url, "import", "autoj", autoj)
    assert r.exit_code == 0 and "1 record(s) give a scenario with white space or invisible characters around it" in r.stderr, r
    r = run_cli("--database-url", db_url, "import", "autoj", "--task-family", "x\u200b", autoj)
    assert r.exit_code == 2 and "invisible character" in r.stderr, r
    rated = tmp_path / "r.jsonl"
    rated.write_text("".join(json.dumps({"task_family": "f1", "prompt": f"P{i}", "model": "m", "response": "x" * (i + 1),
                                         "judge": "J", "scale_min": 1, "scale_max": 10, "score": 5}) + "\n"
                             for i in range(3)))
    assert run_cli("--database-url", db_url, "import", "jsonl", "--kind", "ratings", rated).exit_code == 0
    out = tmp_path / "board.csv"
    r = run_cli("--database-url", db_url, "export", "leaderboard", out, "--judge", "J", "--task-family", "autoj/code")
    assert r.exit_code == 0 and "note: judge 'J' has no scored rating in autoj/code" in r.stderr, r
    assert out.read_text().startswith("model"), out.read_text()
    r = run_cli("--database-url", db_url, "leaderboard", "--bootstrap", "10")
    assert r.exit_code == 2 and "10 resamples cannot give a 95% interval" in r.stderr, r


def test_created_at_reads_the_same_on_both_dialects(db_url, run_cli):
    """A calibration's created_at was '2026-12-03T18:09:59.946506' on SQLite and
    '...+00:00' on PostgreSQL (SQLite gives back a naive datetime): every view writes stored
    times through models.iso_utc, UTC with its offset on both."""
    import datetime as dt

    from sqlalchemy import select

    from judgecal.db import engine as eng
    from judgecal.db import models as m
    from judgecal.db.engine import session_scope

    _upgrade(run_cli, db_url)
    t = dt.datetime(2026, 12, 3, 18, 9, 59, 946506, tzinfo=dt.timezone.utc)
    with session_scope(eng.create(db_url)) as s:
        s.add(m.TaskFamily(name="f", created_at=t))
    with session_scope(eng.create(db_url)) as s:
        back = s.scalar(select(m.TaskFamily.created_at))
    assert m.iso_utc(back) == "2026-12-03T18:09:59.946506+00:00", (back, m.iso_utc(back))
    assert m.iso_utc(t.astimezone(dt.timezone(dt.timedelta(hours=2)))) == "2026-12-03T18:09:59.946506+00:00"
    assert m.iso_utc(None) is None


def test_third_pass_findings(db_url, run_cli, tmp_path):
    """The third break-it pass: an LLMBar pair stored with one label and given again IN THE SAME
    ORDER with the other label (another folder, same family) was stored beside it; invisible
    characters (Default_Ignorable: U+3164, U+2800, variation selectors...) at a family's ends,
    or in an Auto-J scenario or an LLMBar folder name, made a family apart from the one seen;
    an unknown family on a chooser page answered 200; an empty board's CSV had one column."""
    _upgrade(run_cli, db_url)
    rec = {"input": "q", "output_1": "a", "output_2": "bb", "label": "1"}
    assert run_cli("--database-url", db_url, "import", "llmbar", "--task-family", "F",
                   _llmbar(tmp_path / "one", [rec])).exit_code == 0
    r = run_cli("--database-url", db_url, "import", "llmbar", "--task-family", "F",
                _llmbar(tmp_path / "two", [dict(rec, label="2")]))
    assert r.exit_code == 2 and "the same pair as an earlier import" in r.stderr and "other output" in r.stderr, r
    assert _count(db_url, "expert_label") == 1
    # the same label from another folder: counted, nothing new
    r = run_cli("--database-url", db_url, "import", "llmbar", "--task-family", "F", _llmbar(tmp_path / "three", [rec]))
    assert r.exit_code == 0 and _count(db_url, "expert_label") == 1, r
    f = tmp_path / "r.jsonl"
    for ch in ("\u3164", "\u2800", "\ufe0f", "\u034f", "\U000e0100", "\u115f", "\uffa0", "\u17b4"):
        f.write_text(json.dumps({"task_family": "fam" + ch, "prompt": "p", "model": "m", "response": "r"}) + "\n")
        r = run_cli("--database-url", db_url, "import", "jsonl", "--kind", "responses", f)
        assert r.exit_code == 2 and "invisible character" in r.stderr, (hex(ord(ch)), r)
    autoj = tmp_path / "aj.jsonl"
    autoj.write_text(json.dumps({"prompt": "p", "response 1": "x", "response 2": "yy", "label": 0,
                                 "scenario": "\u200bcode"}) + "\n")
    r = run_cli("--database-url", db_url, "import", "autoj", "--format", "json", autoj)
    assert r.exit_code == 0 and "invisible characters around it" in r.stdout, r
    assert _count(db_url, "task_family") == 2  # F and autoj/code, no family with U+200B
    folder = _llmbar(tmp_path / "sets" / "Nat\u200b", [dict(rec, input="q2")])
    r = run_cli("--database-url", db_url, "import", "llmbar", folder)
    assert r.exit_code == 2 and "invisible character" in r.stderr and "rename the folder" in r.stderr, r
    pytest.importorskip("starlette")
    from starlette.testclient import TestClient

    from judgecal.views.leaderboard import ROW_COLUMNS
    from judgecal.web import create_app

    c = TestClient(create_app(db_url))
    for path in ("/leaderboard?family=nosuch", "/calibration?family=nosuch"):
        page = c.get(path)
        assert page.status_code == 404 and "no task family named &#39;nosuch&#39;" in page.text, (path, page.status_code)
    out = tmp_path / "board.csv"
    rated = tmp_path / "rated.jsonl"
    rated.write_text(json.dumps({"task_family": "F", "prompt": "q", "model": "llmbar/output_1", "response": "a",
                                 "judge": "J", "scale_min": 1, "scale_max": 10, "score": 5}) + "\n")
    assert run_cli("--database-url", db_url, "import", "jsonl", "--kind", "ratings", rated).exit_code == 0
    assert run_cli("--database-url", db_url, "export", "leaderboard", out, "--judge", "J",
                   "--task-family", "autoj/code").exit_code == 0
    empty_header = out.read_text().splitlines()[0].split(",")
    assert run_cli("--database-url", db_url, "export", "leaderboard", out, "--judge", "J").exit_code == 0
    full_header = out.read_text().splitlines()[0].split(",")
    assert empty_header == ROW_COLUMNS == full_header, (empty_header, full_header)


def test_a_judge_name_filed_under_another_is_said(db_url, run_cli, tmp_path):
    """Generic ratings by judge 'B' with the identity of the stored judge 'A' (same model,
    endpoint, prompt, scale, parameters) were filed under 'A' without a word: now a warning says
    so, in the next import and within one file alike."""
    _upgrade(run_cli, db_url)
    rec = {"task_family": "fz", "prompt": "p0", "model": "m1", "response": "r0", "judge": "A", "judge_model": "A",
           "scale_min": 0, "scale_max": 10, "score": 0}
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text(json.dumps(rec) + "\n")
    b.write_text(json.dumps(dict(rec, judge="B", prompt="p1", response="r1")) + "\n")
    assert run_cli("--database-url", db_url, "import", "jsonl", "--kind", "ratings", a).exit_code == 0
    r = run_cli("--database-url", db_url, "import", "jsonl", "--kind", "ratings", b)
    assert r.exit_code == 0 and "judge 'B' has the identity of the stored judge 'A'" in r.stderr, r
    both = tmp_path / "both.jsonl"
    both.write_text(json.dumps(dict(rec, task_family="g")) + "\n" + json.dumps(dict(rec, task_family="g", judge="B",
                                                                                   prompt="p1", response="r1")) + "\n")
    r = run_cli("--database-url", db_url, "import", "jsonl", "--kind", "ratings", both)
    assert r.exit_code == 0 and "judge 'B' has the identity of the stored judge 'A'" in r.stderr, r


# ---- the fourth pass: rate, mc, prompt templates, tokenizer identity, serve


def test_endpoint_usage_and_logprobs_that_cannot_be_read():
    """An endpoint's usage of 10^30 tokens ended the run in 'unexpected OverflowError' (SQLite)
    or 'DataError' (PostgreSQL), a negative count was stored; a logprobs entry with a number as
    its token failed the rating ('internal error'), NaN or positive log-probabilities were used
    silently. Now: usage outside 0..2^31-1 is NULL; unreadable entries are left out and counted."""
    from judgecal.judge.client import _read_completion

    def answer(usage, content):
        return {"choices": [{"message": {"content": "Rating: [[7]]"}, "logprobs": {"content": content}}],
                "usage": usage}

    ok = [{"token": "[[", "logprob": -0.1, "top_logprobs": []},
          {"token": "7", "logprob": -0.5, "top_logprobs": [{"token": "7", "logprob": float("nan")},
                                                          {"token": "8", "logprob": 0.5},
                                                          {"token": "6", "logprob": -1.0}]}]
    res = _read_completion(answer({"prompt_tokens": 10**30, "completion_tokens": -1}, ok + [
        {"token": 5, "logprob": "x", "top_logprobs": None}]), 0.1, True)
    assert res.status == "ok" and res.prompt_tokens is None and res.completion_tokens is None
    assert res.logprobs_dropped == 3  # the NaN and the positive alternative, the entry with a number as token
    assert [a["token"] for a in res.logprobs[1]["top_logprobs"]] == ["6"]
    res = _read_completion(answer({"prompt_tokens": 2**31 - 1, "completion_tokens": 3}, ok), 0.1, True)
    assert (res.prompt_tokens, res.completion_tokens) == (2**31 - 1, 3)


def test_rate_stores_the_rating_beside_unreadable_logprobs(db_url, run_cli, tmp_path):
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from stub_openai import StubServer

    from judgecal.views.rate import notices, run_rate

    _upgrade(run_cli, db_url)
    f = tmp_path / "r.jsonl"
    f.write_text("".join(json.dumps({"task_family": "fam", "prompt": f"Q{i}", "model": "m", "response": f"A{i}"}) + "\n"
                         for i in range(3)))
    assert run_cli("--database-url", db_url, "import", "jsonl", "--kind", "responses", f).exit_code == 0
    with StubServer(verdict_top={"7": -0.5, "8": float("nan"), "6": 0.5}) as s:
        out = run_rate(judge="stub-judge", base_url=s.base_url, database_url=db_url, progress=False,
                       task_families=["fam"], concurrency=1, logprobs=True)
    assert out["this_run"]["ok"] == 3 and out["this_run"]["failed"] == 0, out["this_run"]
    assert out["logprobs"]["dropped"] == 6, out["logprobs"]
    assert any("left out of the distributions" in line for line in notices(out)), notices(out)
    assert out["logprobs"]["distributions"] == 3  # from the readable alternative alone, said in the notice


def test_ratings_until_the_last_day_is_a_page(db_url, run_cli):
    """`/ratings?until=9999-12-31` answered 500 (the day after it overflowed)."""
    pytest.importorskip("starlette")
    from starlette.testclient import TestClient

    from judgecal.web import create_app

    _upgrade(run_cli, db_url)
    assert TestClient(create_app(db_url)).get("/ratings?until=9999-12-31").status_code == 200


def test_serve_links_names_holding_control_characters(db_url, run_cli, tmp_path):
    """A judge or model name with a newline (an import accepts it) was linked as judge=... or
    model=..., which the pages then refused ('holds a control character'): a judge is now
    linked by its id, a model name may hold control characters in the model filter."""
    pytest.importorskip("starlette")
    from starlette.testclient import TestClient

    from judgecal.web import create_app

    _upgrade(run_cli, db_url)
    judge, model = "J1\n| injected |", "m\nb"
    rows = [{"task_family": "fam", "prompt": f"P{i}", "model": model, "response": f"r{i}", "judge": judge,
             "scale_min": 1, "scale_max": 10, "score": 5} for i in range(3)]
    f = tmp_path / "r.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert run_cli("--database-url", db_url, "import", "jsonl", "--kind", "ratings", f).exit_code == 0
    c = TestClient(create_app(db_url))
    overview = c.get("/").text
    import re

    links = set(re.findall(r'href="(/(?:leaderboard|audit|ratings)\?[^"]*)"', overview))
    assert links, overview[:500]
    for href in links:
        r = c.get(href.replace("&amp;", "&"))
        assert r.status_code == 200, (href, r.status_code)
    from urllib.parse import quote

    page = c.get(f"/ratings?model={quote(model)}")
    assert page.status_code == 200 and "3 rating" in page.text, page.text[-600:]


def test_mc_task_keys_given_twice_are_refused(tmp_path, run_cli):
    """A judgecal JSONL task line `{"gold": 0, "gold": 1}` and a YAML task config giving
    `doc_to_target` twice were read with the last value (acc 0 instead of 0.667), silently."""
    from judgecal.errors import InputError
    from judgecal.loglik.tasks import check_yaml_keys, load_task

    task = tmp_path / "t.jsonl"
    task.write_text('{"query": "2+2=", "choices": ["4", "5"], "gold": 0, "gold": 1}\n')
    with pytest.raises(InputError, match="t.jsonl:1: field 'gold' appears twice"):
        load_task(task)
    cfg = tmp_path / "t.yaml"
    cfg.write_text("task: t\ndoc_to_target: a\ndoc_to_target: 1\n")
    with pytest.raises(InputError, match=r"t.yaml:3: invalid YAML: key 'doc_to_target' appears twice"):
        check_yaml_keys(cfg)
    cfg.write_text("task: t\ndoc_to_target: !function utils.target\n")
    check_yaml_keys(cfg)  # tags are no repeat


def test_prompt_front_matter_is_read_whole(tmp_path):
    """Front matter giving a key twice (the last won), a misspelt key (ignored), a boolean
    scale (read as 0/1) and a block the roles do not name (never sent) were all accepted."""
    from judgecal.errors import InputError
    from judgecal.judge.prompts import load_prompt, resolve

    base = resolve("pointwise_v1").read_text(encoding="utf-8")
    cases = {
        "repeat": (base.replace("scale_max: 10\n", "scale_max: 10\nscale_max: 5\n"), "appears twice"),
        "misspelt": (base.replace("scale_max: 10\n", "scale_max: 10\nscael_max: 5\n"), "'scael_max' is not one"),
        "boolean": (base.replace("scale_min: 1\n", "scale_min: false\n").replace("scale_max: 10\n", "scale_max: true\n"),
                    "must be numbers"),
        "unsent": (base.replace("roles: [system, user]", "roles: [user]"), "block system %} is not in 'roles'"),
    }
    for i, written in enumerate(("012", "1:30", "0xA", "1_0", ".inf", "100000000000000000000")):
        cases[f"scale{i}"] = (base.replace("scale_max: 10\n", f"scale_max: {written}\n"),
                              "front matter field 'scale_max' is")
    for name, (text, needle) in cases.items():
        path = tmp_path / f"{name}.md"
        path.write_text(text, encoding="utf-8")
        with pytest.raises(InputError, match=needle.replace("[", r"\[")):
            load_prompt(path)


def test_a_changed_tokenizer_folder_is_another_tokenizer(tmp_path):
    """`lengths --tokenizer hf:<folder>` keyed lengths by the folder's path: after its
    tokenizer files changed, the old lengths stayed under the same name beside new ones."""
    from judgecal import tokens

    folder = tmp_path / "tok"
    folder.mkdir()
    (folder / "tokenizer.json").write_text('{"version": "1.0"}')
    before = tokens.canonical_name(f"hf:{folder}")
    (folder / "tokenizer.json").write_text('{"version": "1.0", "changed": true}')
    after = tokens.canonical_name(f"hf:{folder}")
    assert before.startswith(f"hf:{folder.resolve()}#") and before != after


def test_mc_task_fields_other_than_the_format_are_refused(tmp_path):
    """A JSONL task line with `context`, `gold_2` or `Gold` beside query/choices/gold had them
    passed over without a word; the format has these three fields only."""
    from judgecal.errors import InputError
    from judgecal.loglik.tasks import load_task

    task = tmp_path / "t.jsonl"
    task.write_text('{"query": "Sky is", "choices": ["blue", "green"], "gold": 0}\n'
                    '{"query": "Grass is", "choices": ["blue", "green"], "gold": 1, "Gold": 0}\n')
    with pytest.raises(InputError, match="t.jsonl:2: field 'Gold' is not one of query, choices, gold"):
        load_task(task)


def test_sixth_pass_reinterpretations(db_url, run_cli, tmp_path):
    """The sixth pass: JSON given as text in judge_params / distribution kept a repeated key's
    last value; an LLMBar score '1_0' or '1e1' was read as 10 by float(); a prompt named 012 was
    stored as '10'; the web stripped model= and judge= values and showed another model's rows."""
    _upgrade(run_cli, db_url)
    base = {"task_family": "f", "prompt": "q", "model": "m", "response": "r", "judge": "J", "scale_min": 1,
            "scale_max": 3, "score": 2}
    f = tmp_path / "r.jsonl"
    for field, text in (("judge_params", '{"temperature": 0.0, "temperature": 1.0}'),
                        ("distribution", '{"probs": {"1": 0.2, "2": 0.3, "2": 0.8}, "outside": 0}')):
        f.write_text(json.dumps(dict(base, **{field: text})) + "\n")
        r = run_cli("--database-url", db_url, "import", "jsonl", "--kind", "ratings", f)
        assert r.exit_code == 2 and f"field '{field}' (JSON text): field" in r.stderr and "appears twice" in r.stderr, r
    rec = {"input": "i", "output_1": "x", "output_2": "yy", "label": "1"}
    folder = _llmbar(tmp_path / "S", [rec], {"JX": [[{"score_1": ["1_0", "stop"], "score_2": ["3", "stop"]}]]})
    assert run_cli("--database-url", db_url, "import", "llmbar", folder).exit_code == 0
    from sqlalchemy import text as sql

    from judgecal.db import engine as eng

    with eng.create(db_url).connect() as conn:
        rows = sorted(conn.execute(sql("SELECT status, score, raw_output FROM rating")).all(), key=lambda r: r[2])
    assert [tuple(r) for r in rows] == [("unparsed", None, "1_0"), ("ok", 3.0, "3")], rows
    from judgecal.errors import InputError
    from judgecal.judge.prompts import load_prompt, resolve

    prompt = tmp_path / "p.md"
    for written in ("012", "yes", '" pv "'):
        prompt.write_text(resolve("pointwise_v1").read_text().replace("name: pointwise_v1", f"name: {written}"))
        with pytest.raises(InputError, match="front matter field 'name' must be text"):
            load_prompt(prompt)
    pytest.importorskip("starlette")
    from urllib.parse import quote

    from starlette.testclient import TestClient

    from judgecal.web import create_app

    rows = [dict(base, task_family="g", model=m, prompt=f"p{k}", response=f"r{k}{m}", score=s)
            for m, s in (("x", 1), ("x ", 3)) for k in range(2)]
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert run_cli("--database-url", db_url, "import", "jsonl", "--kind", "ratings", f).exit_code == 0
    c = TestClient(create_app(db_url))
    import re

    for model, score in (("x ", "3.00"), ("x", "1.00")):  # each model's own two rows, not the other's
        page = c.get(f"/ratings?family=g&model={quote(model)}")
        assert page.status_code == 200, page.status_code
        body = re.findall(r"<tbody>.*?</tbody>", page.text, re.S)[0]
        assert re.findall(r'<td class="name">(x ?)</td>', body) == [model, model], body
        assert re.findall(r'<td class="num">(\d\.\d\d)</td>', body) == [score, score], body


def test_risk_k_without_a_risk_averse_summary_is_refused(run_cli, sqlite_url):
    """`leaderboard --risk-k 3`, `report --risk-k 7` and `check --risk-k 2` without `--summary
    risk-averse` changed nothing, without a word (the last pass): now refused before any work."""
    _upgrade(run_cli, sqlite_url)
    for args in (("leaderboard", "--risk-k", "3"), ("leaderboard", "--baseline", "b", "--risk-k", "2"),
                 ("report", "--risk-k", "7"), ("check", "--risk-k", "2"),
                 ("leaderboard", "--summary", "mean", "--risk-k", "3")):
        r = run_cli("--database-url", sqlite_url, *args)
        assert r.exit_code == 2 and "--risk-k is the k of --summary risk-averse" in r.stderr, (args, r)
