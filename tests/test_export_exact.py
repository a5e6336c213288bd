"""Exact data through export and import (issue 11): a hypothesis property test over arbitrary
Unicode text (U+2028, U+0085, CR LF, lone CR, formula-looking cells, quotes, empty strings) on
both formats and both dialects; re-importing an export adds nothing. Plus the readers' line
rules, CSV neutralisation, export targets that are not regular files, conflicting
duplicates, over-long names and hostile JSON."""

from __future__ import annotations

import itertools
import json
import os
import stat
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from judgecal.views import importing
from judgecal.errors import InputError, UsageError
from judgecal.views.export import export
from judgecal.importers import generic
from judgecal.importers.records import neutralise_cell, read_csv, read_jsonl, restore_cell

SPECIAL = ["\u2028", "\u2029", "\x85", "\r\n", "\r", "\n", "=1+2", "+x", "-1", "@SUM(A1)", "\tx", "'=x", "''+y", "'",
           '"', '""', ",", "", " ", "a\r\nb\rc\u2028d", "\ufeffbom", "é", "😀"]
TEXT = st.one_of(
    st.sampled_from(SPECIAL),
    st.text(alphabet=st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), max_size=30),
    st.lists(st.sampled_from(SPECIAL + ["a", "b"]), max_size=6).map("".join),
)
NAME = TEXT.filter(lambda t: t.strip() != "" and len(t) <= 200)
_counter = itertools.count()


def _record(fam, prompt, model, response, reference, judge, raw, score):
    rec = {"task_family": fam, "prompt": prompt, "model": model, "response": response, "judge": judge,
           "scale_min": 0, "scale_max": 10, "score": score, "raw_output": raw, "judge_params": {"t": 0}}
    if reference is not None:
        rec["reference"] = reference
    return rec


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                   HealthCheck.too_slow])
@given(data=st.lists(st.tuples(NAME, NAME, TEXT, st.one_of(st.none(), TEXT), NAME, TEXT,
                               st.floats(0, 10, allow_nan=False)), min_size=1, max_size=4))
@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_every_text_round_trips_byte_identical(db_url, tmp_path, fmt, data):
    fam = f"fam{next(_counter)}"
    records = []
    keys = set()
    for prompt, model, response, reference, judge, raw, score in data:
        if (prompt, model, response, judge) in keys:
            continue
        keys.add((prompt, model, response, judge))
        # one reference per item (the importer refuses two different ones for the same prompt)
        ref = next((r.get("reference") for r in records if r["prompt"] == prompt), reference)
        records.append(_record(fam, prompt, model, response, ref, judge, raw, score))
    src = tmp_path / f"in-{fam}.jsonl"
    src.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8", newline="")
    importing.import_generic(src, "ratings", "jsonl", url=db_url)

    out = tmp_path / f"out-{fam}.{fmt}"
    export("ratings", fmt, out, db_url)
    back = [row for _, row in (read_jsonl(out) if fmt == "jsonl" else read_csv(out)) if row["task_family"] == fam]
    assert len(back) == len(records)
    by_key = {(r["prompt"], r["model"], r["response"], r["judge"]): r for r in back}
    for rec in records:
        got = by_key[(rec["prompt"], rec["model"], rec["response"], rec["judge"])]
        for field in ("prompt", "model", "response", "judge", "raw_output", "reference"):
            assert got.get(field) == rec.get(field), field  # byte for byte, None stays None
        assert float(got["score"]) == rec["score"]
    # re-importing the export adds nothing at all
    again = importing.import_generic(out, "ratings", fmt, url=db_url)
    assert sum(again["added"].values()) == 0, again["added"]


def test_neutralise_and_restore_are_inverse():
    for value in SPECIAL + ["'Tis", "''", "'a", "=", "'''=x", "plain"]:
        cell = neutralise_cell(value)
        assert restore_cell(cell) == value
        assert not cell[:1] in ("=", "+", "-", "@", "\t", "\r")  # a spreadsheet sees text
    assert neutralise_cell("=HYPERLINK(1)") == "'=HYPERLINK(1)" and neutralise_cell("'Tis") == "'Tis"


def test_csv_export_neutralises_and_jsonl_keeps_raw(tmp_path, db_url):
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps({"task_family": "f", "prompt": "=cmd|' /C calc'!A0", "model": "@evil",
                                "response": "-2+3"}) + "\n")
    importing.import_generic(path, "responses", "jsonl", url=db_url)
    export("responses", "csv", tmp_path / "o.csv", db_url)
    export("responses", "jsonl", tmp_path / "o.jsonl", db_url)
    lines = (tmp_path / "o.csv").read_bytes().decode().split("\r\n")
    assert lines[0] == "task_family,prompt,item_id,reference,model,response"
    assert lines[1] == "f,'=cmd|' /C calc'!A0,,,'@evil,'-2+3"
    assert json.loads((tmp_path / "o.jsonl").read_text())["prompt"] == "=cmd|' /C calc'!A0"


# ------------------------------------------------------------------ readers
def test_jsonl_is_split_on_newline_only(tmp_path):
    f = tmp_path / "a.jsonl"
    f.write_bytes('{"x": "a\u2028b\x85c\u2029d"}\r\n\n{"x": "2"}\n'.encode())
    assert list(read_jsonl(f)) == [(1, {"x": "a\u2028b\x85c\u2029d"}), (3, {"x": "2"})]


def test_csv_unterminated_quote_names_the_line_where_the_field_started(tmp_path, run_cli):
    f = tmp_path / "r.csv"
    f.write_text('task_family,prompt,model,response\nf,p1,m,"ok"\nf,"p2\nstill p2",m,"never closed\nf,p3,m,r3\nf,p4,m,r4\n')
    with pytest.raises(InputError, match=r"r\.csv:4: a quoted field is never closed"):
        list(read_csv(f))
    res = run_cli("--database-url", f"sqlite:///{tmp_path / 'x.db'}", "import", "csv", f, "--kind", "responses")
    assert res.exit_code == 2 and "r.csv:4: a quoted field is never closed" in res.stderr


def test_csv_repeated_column_and_text_after_quote(tmp_path):
    f = tmp_path / "r.csv"
    f.write_text("prompt,model,prompt\na,b,c\n")
    with pytest.raises(InputError, match=r"r\.csv:1: column 'prompt' appears twice"):
        list(read_csv(f))
    f.write_text('prompt,model\n"a"b,c\n')
    with pytest.raises(InputError, match=r"r\.csv:2: unexpected text"):
        list(read_csv(f))


def test_csv_crlf_inside_fields_and_line_numbers(tmp_path):
    f = tmp_path / "r.csv"
    f.write_bytes(b'a,b\r\n1,"x\r\ny"\r\n2,""\r\n3,\r\n')
    assert list(read_csv(f)) == [(2, {"a": "1", "b": "x\r\ny"}), (4, {"a": "2", "b": ""}), (5, {"a": "3", "b": None})]


@pytest.mark.parametrize("content,message", [
    ("[" * 100000 + "]" * 100000, "JSON nested too deeply"),
    ('{"x": ' + "1" * 5000 + "}", "invalid JSON value"),
])
def test_hostile_json_is_a_file_line_error(tmp_path, run_cli, content, message):
    f = tmp_path / "h.jsonl"
    f.write_text('{"task_family": "f", "prompt": "p", "model": "m", "response": "r"}\n' + content + "\n")
    res = run_cli("--database-url", f"sqlite:///{tmp_path / 'x.db'}", "import", "jsonl", f, "--kind", "responses")
    assert res.exit_code == 2 and f"h.jsonl:2: {message}" in res.stderr and "unexpected" not in res.stderr, res


def test_symlink_loop_under_import_llmbar_is_one_line(tmp_path, run_cli):
    d = tmp_path / "loop"
    d.mkdir()
    (d / "dataset.json").symlink_to(d / "dataset.json")
    res = run_cli("--database-url", f"sqlite:///{tmp_path / 'x.db'}", "import", "llmbar", d)
    assert res.exit_code == 2 and "\n" not in res.stderr.strip() and "dataset.json" in res.stderr
    assert "unexpected" not in res.stderr
    top = tmp_path / "selfloop"
    top.symlink_to(top)
    res = run_cli("--database-url", f"sqlite:///{tmp_path / 'x.db'}", "import", "llmbar", top)
    assert res.exit_code == 2 and "\n" not in res.stderr.strip() and "unexpected" not in res.stderr, res


# ------------------------------------------------------------------ duplicates, names
def _jsonl(tmp_path, rows, name="d.jsonl"):
    f = tmp_path / name
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return f


BASE = {"task_family": "f", "prompt": "p", "model": "m", "response": "r", "judge": "j", "scale_min": 0, "scale_max": 10}


@pytest.mark.parametrize("kind,first,second,what", [
    ("ratings", dict(BASE, score=2), dict(BASE, score=9), "rating conflicts with line 1"),
    ("labels", {"task_family": "f", "prompt": "p", "model_a": "a", "response_a": "x", "model_b": "b", "response_b": "y",
                "preference": "a"},
     {"task_family": "f", "prompt": "p", "model_a": "a", "response_a": "x", "model_b": "b", "response_b": "y",
      "preference": "b"}, "pairwise label conflicts with line 1"),
    ("responses", {"task_family": "f", "prompt": "p1", "item_id": "7", "model": "m", "response": "r"},
     {"task_family": "f", "prompt": "p2", "item_id": "7", "model": "m", "response": "r"}, "item_id '7' names another prompt"),
    ("responses", {"task_family": "f", "prompt": "p", "reference": "A", "model": "m", "response": "r"},
     {"task_family": "f", "prompt": "p", "reference": "B", "model": "n", "response": "r"}, "reference conflicts with line 1"),
])
def test_conflicting_duplicates_are_refused(tmp_path, kind, first, second, what):
    f = _jsonl(tmp_path, [first, {**first}, second])
    with pytest.raises(InputError, match=rf"d\.jsonl:3: .*{what}"):
        generic.parse(f, kind, fmt="jsonl")


def test_exact_duplicates_kept_once_with_a_warning(tmp_path, db_url):
    rec = dict(BASE, score=5)
    f = _jsonl(tmp_path, [rec, rec, dict(rec, sample_index=1), rec])
    out = importing.import_generic(f, "ratings", "jsonl", url=db_url)
    assert out["added"]["rating"] == 2
    assert any("2 record(s) repeat an earlier record exactly and were imported once (lines 2, 4)" in w
               for w in out["warnings"])


@pytest.mark.parametrize("field", ["model", "task_family", "item_id"])
def test_names_over_200_characters_refused_on_both_dialects(tmp_path, db_url, run_cli, field):
    rec = {"task_family": "f", "prompt": "p", "model": "m", "response": "r", field: "x" * 201}
    ok = _jsonl(tmp_path, [{**rec, field: "x" * 200}], "ok.jsonl")
    bad = _jsonl(tmp_path, [{**rec, field: "x" * 200}, rec], "bad.jsonl")
    assert run_cli("--database-url", db_url, "import", "jsonl", ok, "--kind", "responses").exit_code == 0
    for fmt, path in (("jsonl", bad),):
        res = run_cli("--database-url", db_url, "import", fmt, path, "--kind", "responses")
        assert res.exit_code == 2 and f"bad.jsonl:2: field {field!r} is 201 characters long; at most 200" in res.stderr


def test_name_limits_equal_the_database_columns():
    from judgecal.db import models as m
    from judgecal.importers.records import JUDGE_NAME_MAX, NAME_MAX, SOURCE_MAX

    assert m.Response.__table__.c.model.type.length == m.TaskFamily.__table__.c.name.type.length == NAME_MAX
    assert m.Item.__table__.c.external_id.type.length == m.ExpertLabel.__table__.c.annotator.type.length == NAME_MAX
    assert m.Judge.__table__.c.name.type.length == m.Judge.__table__.c.prompt_name.type.length == JUDGE_NAME_MAX
    assert m.Judge.__table__.c.endpoint.type.length == m.ExpertLabel.__table__.c.source.type.length == SOURCE_MAX


# ------------------------------------------------------------------ export targets
def test_export_refuses_what_is_not_a_regular_file(tmp_path, run_cli):
    url = f"sqlite:///{tmp_path / 'x.db'}"
    f = _jsonl(tmp_path, [{"task_family": "f", "prompt": "p", "model": "m", "response": "r"}])
    assert run_cli("--database-url", url, "import", "jsonl", f, "--kind", "responses").exit_code == 0
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    target = tmp_path / "target.jsonl"
    target.write_text("keep me")
    link = tmp_path / "link.jsonl"
    link.symlink_to(target)
    for path, what in ((fifo, "a FIFO"), (link, "a symbolic link"), (Path("/dev/null"), "a device")):
        res = run_cli("--database-url", url, "export", "responses", path)
        assert res.exit_code == 2 and f"is {what}; export writes only regular files" in res.stderr, res
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and link.is_symlink() and target.read_text() == "keep me"
    with pytest.raises(UsageError, match="a device"):
        export("responses", "jsonl", Path("/dev/full"), url)
    with pytest.raises(UsageError, match="a folder"):
        export("responses", "jsonl", tmp_path, url)
    assert run_cli("--database-url", url, "export", "responses", target).exit_code == 0
    assert json.loads(target.read_text())["model"] == "m"


def test_verdicts_export_round_trips(tmp_path, db_url):
    rows = [{"task_family": "f", "prompt": "p\u2028q", "model_a": "m", "response_a": "a\r\nx", "model_b": "base",
             "response_b": "=b", "judge": "j", "preference": 0.75, "position": pos, "baseline": "b",
             "judge_params": {"temperature": 0.0}, "source": "orig.json", "latency_s": 0.5}
            for pos in ("ab", "ba")]
    f = _jsonl(tmp_path, rows)
    importing.import_generic(f, "verdicts", "jsonl", url=db_url)
    for fmt in ("jsonl", "csv"):
        out = tmp_path / f"v.{fmt}"
        assert export("verdicts", fmt, out, db_url) == 2
        back = [r for _, r in (read_jsonl(out) if fmt == "jsonl" else read_csv(out))]
        assert [(r["prompt"], r["response_a"], r["response_b"], r["position"], float(r["preference"]), r["baseline"],
                 r["verdict"], r["source"]) for r in back] == [
            ("p\u2028q", "a\r\nx", "=b", pos, 0.75, "b", "a", "orig.json") for pos in ("ab", "ba")]
        again = importing.import_generic(out, "verdicts", fmt, url=db_url)
        assert sum(again["added"].values()) == 0, again


def test_pandalm_over_long_model_name_is_a_file_line_error(tmp_path):
    from judgecal.importers import pandalm

    rec = {"idx": 1, "cmp_key": "a_" + "b" * 201, "instruction": "i", "input": "", "response1": "x", "response2": "y",
           "annotator1": 0, "annotator2": 1, "annotator3": 2}
    f = tmp_path / "p.json"
    f.write_text(json.dumps([dict(rec, cmp_key="a_b"), rec], indent=0))
    with pytest.raises(InputError, match=r"p\.json:\d+: field 'cmp_key' names a model of 201 characters"):
        pandalm.parse(f, "pandalm")
