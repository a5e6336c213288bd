"""Break-it follow-ups of issue 10 on the importers: a later import that changes a stored
value is refused (both dialects), AlpacaEval's model name comes from the records unless the
results/<model>/<annotator>/ layout holds, unreadable symlinks in a folder are named, huge
integers, --pair checks, an empty --task-family, the verdict scale, FILE:LINE for non-UTF-8
and truncated JSON, exact values in messages, strict numbers in CSV, blank lines counted."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

ANNOTATOR = "weighted_alpaca_eval_gpt4_turbo"


def _rec(i: int, **over) -> dict:
    r = {"instruction": f"question {i}", "output_1": f"base answer {i}", "generator_1": "base",
         "output_2": f"model answer {i}", "generator_2": "m", "annotator": ANNOTATOR, "preference": 1.25,
         "time_per_example": 0.5}
    r.update(over)
    return r


def _json(path: Path, records) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(records, indent=1))
    return path


def _jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def _rows(url: str, sql: str) -> list[tuple]:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return [tuple(r) for r in conn.execute(text(sql))]
    finally:
        engine.dispose()


def _verdicts(url: str) -> list[tuple]:
    return _rows(url, "SELECT r.model, p.preference, p.status FROM pairwise_judgment p "
                      "JOIN response r ON r.id = p.response_a_id ORDER BY p.id")


VERDICT = {"task_family": "f", "prompt": "p", "model_a": "x", "response_a": "ra", "model_b": "y", "response_b": "rb",
           "judge": "j", "preference": 0.7}


# ------------------------------------------------------------------ D4: a later import changing stored values
def test_alpaca_eval_reimport_same_values_is_counted_changed_values_refused(db_url, tmp_path, run_cli):
    f = _json(tmp_path / "a" / "annotations.json", [_rec(0), _rec(1), _rec(2)])
    assert run_cli("--database-url", db_url, "import", "alpaca-eval", f).exit_code == 0
    again = run_cli("--database-url", db_url, "import", "alpaca-eval", f)
    assert again.exit_code == 0, again
    assert "pairwise_judgment +0" in again.stdout
    assert "not imported: 3 records: already stored with the same values (pairwise_judgment rows not added again)" \
        in again.stdout
    before = _verdicts(db_url)
    g = _json(tmp_path / "b" / "annotations.json", [_rec(0), _rec(1, preference=2), _rec(2, preference=None)])
    r = run_cli("--database-url", db_url, "import", "alpaca-eval", g)
    assert r.exit_code == 2, r
    assert r.stderr.strip() == (
        f"error: {g}:12: this verdict is already stored with verdict 'b', preference 0.25 (imported from {f}); "
        "this file gives verdict 'a', preference 1.0 (judgecal stores AlpacaEval's preference minus 1: "
        "P(output_2 preferred)): an import never changes a stored value (remove the record, or import into "
        "another --task-family or database); nothing was imported")
    assert _verdicts(db_url) == before
    # the null one alone: refused too (status unparsed against a stored verdict)
    h = _json(tmp_path / "c" / "annotations.json", [_rec(0), _rec(1), _rec(2, preference=None)])
    r = run_cli("--database-url", db_url, "import", "alpaca-eval", h)
    assert r.exit_code == 2 and f"{h}:22: this verdict is already stored with status 'ok'" in r.stderr, r
    assert _verdicts(db_url) == before


def test_generic_verdict_rating_label_reimport_with_other_values_is_refused(db_url, tmp_path, run_cli):
    ok = _jsonl(tmp_path / "ok.jsonl", [VERDICT])
    changed = _jsonl(tmp_path / "changed.jsonl", [dict(VERDICT, prompt="other"), dict(VERDICT, preference=0.1)])
    assert run_cli("--database-url", db_url, "import", "jsonl", ok, "--kind", "verdicts").exit_code == 0
    same = run_cli("--database-url", db_url, "import", "jsonl", ok, "--kind", "verdicts")
    assert same.exit_code == 0 and "pairwise_judgment +0" in same.stdout and "1 records: already stored" in same.stdout
    r = run_cli("--database-url", db_url, "import", "jsonl", changed, "--kind", "verdicts")
    assert r.exit_code == 2
    assert r.stderr.strip() == (
        f"error: {changed}:2: this verdict is already stored with verdict 'a', preference 0.7 (imported from {ok}); "
        "this file gives verdict 'b', preference 0.1: an import never changes a stored value (remove the record, "
        "or import into another --task-family or database); nothing was imported")
    assert _rows(db_url, "SELECT preference FROM pairwise_judgment") == [(0.7,)]
    assert _rows(db_url, "SELECT count(*) FROM item") == [(1,)]  # the new item of line 1 rolled back too

    rating = {"task_family": "f", "prompt": "p", "model": "x", "response": "ra", "judge": "rj", "scale_min": 1,
              "scale_max": 10, "score": 7}
    a = _jsonl(tmp_path / "r1.jsonl", [rating])
    b = _jsonl(tmp_path / "r2.jsonl", [dict(rating, score=3)])
    assert run_cli("--database-url", db_url, "import", "jsonl", a, "--kind", "ratings").exit_code == 0
    assert run_cli("--database-url", db_url, "import", "jsonl", a, "--kind", "ratings").exit_code == 0
    r = run_cli("--database-url", db_url, "import", "jsonl", b, "--kind", "ratings")
    assert r.exit_code == 2
    assert r.stderr.strip().startswith(f"error: {b}:1: this rating is already stored with score 7.0; "
                                       "this file gives score 3.0: an import never changes a stored value")
    assert _rows(db_url, "SELECT score FROM rating") == [(7.0,)]

    label = {"task_family": "f", "prompt": "p", "model_a": "x", "response_a": "ra", "model_b": "y",
             "response_b": "rb", "preference": "a"}
    a = _jsonl(tmp_path / "l1.jsonl", [label])
    b = _jsonl(tmp_path / "l2.jsonl", [dict(label, preference="tie")])
    assert run_cli("--database-url", db_url, "import", "jsonl", a, "--kind", "labels").exit_code == 0
    r = run_cli("--database-url", db_url, "import", "jsonl", b, "--kind", "labels")
    assert r.exit_code == 2
    assert r.stderr.strip().startswith(f"error: {b}:1: this label is already stored with preference 'a'; "
                                       "this file gives preference 'tie'")
    assert _rows(db_url, "SELECT preference FROM expert_label") == [("a",)]


def test_task_family_count_is_what_was_inserted(db_url, tmp_path, run_cli):
    f = _jsonl(tmp_path / "ok.jsonl", [VERDICT])
    assert "task_family +1" in run_cli("--database-url", db_url, "import", "jsonl", f, "--kind", "verdicts").stdout
    g = _jsonl(tmp_path / "g.jsonl", [dict(VERDICT, prompt="q")])
    assert "task_family +0" in run_cli("--database-url", db_url, "import", "jsonl", g, "--kind", "verdicts").stdout


# ------------------------------------------------------------------ D5: the model's name
@pytest.mark.parametrize("where", ["single/annotations.json", "dir/claude-2/annotations.json",
                                   "claude-2/other_folder/annotations.json"])
def test_alpaca_eval_model_is_generator_2_outside_the_results_layout(tmp_path, run_cli, where):
    url = f"sqlite:///{tmp_path / 'x.db'}"
    f = _json(tmp_path / where, [_rec(0), _rec(1)])
    target = tmp_path / "dir" if where.startswith("dir/") else f
    r = run_cli("--database-url", url, "import", "alpaca-eval", target)
    assert r.exit_code == 0 and "leaderboard" not in r.output, r
    assert {m for m, _, _ in _verdicts(url)} == {"m"}


@pytest.mark.parametrize("annotator_folder", [ANNOTATOR, "my_judge"])
def test_alpaca_eval_results_layout_names_the_model(tmp_path, run_cli, annotator_folder):
    url = f"sqlite:///{tmp_path / 'x.db'}"
    ann = ANNOTATOR if annotator_folder == ANNOTATOR else "my_judge"
    f = _json(tmp_path / "results" / "claude-2" / annotator_folder / "annotations.json",
              [_rec(0, annotator=ann), _rec(1, annotator=ann)])
    r = run_cli("--database-url", url, "import", "alpaca-eval", tmp_path / "results")
    assert r.exit_code == 0, r
    assert {m for m, _, _ in _verdicts(url)} == {"claude-2"}
    assert f"{f}:2: generator_2 'm' differs from the results folder's model 'claude-2' in 2 records: stored as " \
           "'claude-2' (the name AlpacaEval's leaderboard uses)" in r.stderr


# ------------------------------------------------------------------ D6: symlinks, other depths
def test_folder_import_names_a_dangling_or_looping_symlink(tmp_path, run_cli):
    url = f"sqlite:///{tmp_path / 'x.db'}"
    _json(tmp_path / "results" / "a" / ANNOTATOR / "annotations.json", [_rec(0)])
    (tmp_path / "results" / "b" / ANNOTATOR).mkdir(parents=True)
    link = tmp_path / "results" / "b" / ANNOTATOR / "annotations.json"
    link.symlink_to("/nonexistent/annotations.json")
    r = run_cli("--database-url", url, "import", "alpaca-eval", tmp_path / "results")
    assert r.exit_code == 2
    assert r.stderr.strip() == f"error: {link}: a symbolic link to '/nonexistent/annotations.json', which does not exist"
    link.unlink()
    link.symlink_to(link.name)  # a link to itself: a loop
    r = run_cli("--database-url", url, "import", "alpaca-eval", tmp_path / "results")
    assert r.exit_code == 2
    assert r.stderr.strip() == f"error: {link}: a symbolic link in a loop (it leads back to itself): cannot be followed"
    r = run_cli("--database-url", url, "import", "alpaca-eval", link)
    assert r.exit_code == 2
    assert r.stderr.strip() == f"error: {link}: a symbolic link in a loop (it leads back to itself): cannot be followed"
    assert not _rows(url, "SELECT name FROM sqlite_master WHERE name = 'pairwise_judgment'") or not _verdicts(url)


def test_folder_import_reports_annotation_files_at_other_depths(tmp_path, run_cli):
    url = f"sqlite:///{tmp_path / 'x.db'}"
    _json(tmp_path / "results" / "a" / ANNOTATOR / "annotations.json", [_rec(0)])
    deep = _json(tmp_path / "results" / "x" / "a" / "b" / "annotations.json", [_rec(1)])
    r = run_cli("--database-url", url, "import", "alpaca-eval", tmp_path / "results")
    assert r.exit_code == 0, r
    assert (f"warning: {tmp_path / 'results'}: 1 file(s) named model_outputs.json or annotations.json at another depth "
            f"were not imported") in r.stderr and str(deep) in r.stderr
    assert len(_verdicts(url)) == 1


# ------------------------------------------------------------------ D7: huge integers
def test_huge_integers_are_file_line_errors(tmp_path, run_cli):
    url = f"sqlite:///{tmp_path / 'x.db'}"
    for field in ("preference", "time_per_example"):
        f = _json(tmp_path / f"{field}.json", [_rec(0), _rec(1, **{field: 10**400})])
        r = run_cli("--database-url", url, "import", "alpaca-eval", f)
        assert r.exit_code == 2
        assert r.stderr.strip() == (f"error: {f}:12: field {field!r} must be a finite number of reasonable size, "
                                    "got 10000000000000000000...(401 characters)")
    for field in ("preference", "latency_s", "sample_index", "attempts", "prompt_tokens"):
        f = _jsonl(tmp_path / f"{field}.jsonl", [dict(VERDICT, **{field: 10**400})])
        r = run_cli("--database-url", url, "import", "jsonl", f, "--kind", "verdicts")
        assert r.exit_code == 2
        assert r.stderr.strip() == (f"error: {f}:1: field {field!r} must be a finite number of reasonable size, "
                                    "got 10000000000000000000...(401 characters)")


# ------------------------------------------------------------------ D12: --pair
def test_pair_of_the_same_file_is_refused_and_the_annotations_file_is_named(tmp_path, run_cli):
    url = f"sqlite:///{tmp_path / 'x.db'}"
    outs = _json(tmp_path / "c.json", [{"instruction": "i", "output": "o", "generator": "g"}])
    r = run_cli("--database-url", url, "import", "alpaca-eval", "--pair", outs, outs)
    assert r.exit_code == 2
    assert r.stderr.strip() == (f"error: {outs}: --pair names the same file twice: a verbosity pair needs a concise "
                                "and a verbose model_outputs.json (two different files)")
    copy = _json(tmp_path / "copy.json", [{"instruction": "i", "output": "o", "generator": "g"}])
    r = run_cli("--database-url", url, "import", "alpaca-eval", "--pair", outs, copy)
    assert r.exit_code == 2 and "every response is the same" in r.stderr
    ann = _json(tmp_path / "annotations.json", [_rec(0)])
    r = run_cli("--database-url", url, "import", "alpaca-eval", "--pair", outs, ann)
    assert r.exit_code == 2
    assert r.stderr.strip() == f"error: {ann}: --pair takes two model_outputs.json files; this one holds annotations"


# ------------------------------------------------------------------ D13: empty --task-family
@pytest.mark.parametrize("command", ["alpaca-eval", "pandalm"])
def test_empty_task_family_is_refused(tmp_path, run_cli, command):
    f = _json(tmp_path / "x.json", [{"instruction": "i", "output": "o", "generator": "g"}])
    r = run_cli("--database-url", f"sqlite:///{tmp_path / 'x.db'}", "import", command, f, "--task-family", "")
    assert r.exit_code == 2
    assert r.stderr.strip() == "error: --task-family must be a non-empty name of at most 200 characters"


# ------------------------------------------------------------------ D14: verdict scale
def test_verdict_scale_min_not_below_scale_max_is_refused(tmp_path, run_cli):
    f = _jsonl(tmp_path / "s.jsonl", [dict(VERDICT, scale_min=1, scale_max=0)])
    r = run_cli("--database-url", f"sqlite:///{tmp_path / 'x.db'}", "import", "jsonl", f, "--kind", "verdicts")
    assert r.exit_code == 2
    assert r.stderr.strip() == f"error: {f}:1: scale_min 1.0 must be below scale_max 0.0 (defaults 0 and 1)"


# ------------------------------------------------------------------ D15, D16: FILE:LINE for bytes and truncation
def test_not_utf8_names_the_line_and_the_byte(tmp_path, run_cli):
    url = f"sqlite:///{tmp_path / 'x.db'}"
    data = json.dumps([_rec(0), _rec(1)], indent=1).encode()
    at = data.index(b"model answer 1")
    f = tmp_path / "annotations.json"
    f.write_bytes(data[:at] + b"\xff" + data[at + 1:])
    r = run_cli("--database-url", url, "import", "alpaca-eval", f)
    assert r.exit_code == 2
    line = data.count(b"\n", 0, at) + 1
    assert r.stderr.strip() == f"error: {f}:{line}: not UTF-8 text (invalid start byte at byte {at})"
    c = tmp_path / "v.csv"
    c.write_bytes(b"prompt,model,response\np,m,ok\np,m,\xe9t\xe9\n")
    r = run_cli("--database-url", url, "import", "csv", c, "--kind", "responses", "--task-family", "f")
    assert r.stderr.strip() == f"error: {c}:3: not UTF-8 text (invalid continuation byte at byte 33)"


def test_truncated_json_message_is_a_whole_sentence(tmp_path, run_cli):
    url = f"sqlite:///{tmp_path / 'x.db'}"
    f = tmp_path / "annotations.json"
    f.write_text('[\n {"instruction": "i", "output_1": "a long answer')
    r = run_cli("--database-url", url, "import", "alpaca-eval", f)
    assert r.exit_code == 2
    assert r.stderr.strip() == (f"error: {f}:2: invalid JSON: unterminated string starting at column 35 "
                                "(the file ends inside it)")
    g = tmp_path / "t.jsonl"
    g.write_text('{"prompt": "x\n')
    r = run_cli("--database-url", url, "import", "jsonl", g, "--kind", "responses", "--task-family", "f")
    assert r.stderr.strip() == f"error: {g}:1: invalid JSON: unterminated string starting at column 12 (the line ends inside it)"


# ------------------------------------------------------------------ D17: exact values, empty preference
def test_out_of_range_preference_shows_its_digits_and_empty_is_empty(tmp_path, run_cli):
    url = f"sqlite:///{tmp_path / 'x.db'}"
    f = _json(tmp_path / "annotations.json", [_rec(0), _rec(1, preference=2.0000000001)])
    r = run_cli("--database-url", url, "import", "alpaca-eval", f)
    assert r.stderr.strip() == (f"error: {f}:12: field 'preference' must be in [1, 2] (2 = output_2 preferred), "
                                "got 2.0000000001")
    g = _json(tmp_path / "b" / "annotations.json", [_rec(0), _rec(1, preference=""), _rec(2, preference=None)])
    r = run_cli("--database-url", url, "import", "alpaca-eval", g)
    assert r.exit_code == 0, r
    assert f"not imported: 1 records: empty preference (an unparsed verdict, left out of win rates) (first: {g}:12)" \
        in r.stdout
    assert f"not imported: 1 records: null preference (an unparsed verdict, left out of win rates) (first: {g}:22)" \
        in r.stdout


# ------------------------------------------------------------------ D20: strict numbers as text, blank lines
@pytest.mark.parametrize("column,cell,message", [
    ("preference", "1_0", "field 'preference' must be a number (JSON number syntax, e.g. 0.75 or 2), got '1_0'"),
    ("preference", "0x1", "field 'preference' must be a number (JSON number syntax, e.g. 0.75 or 2), got '0x1'"),
    ("sample_index", "1e3", "field 'sample_index' must be an integer (digits only), got '1e3'"),
    ("sample_index", "1_000", "field 'sample_index' must be a number (JSON number syntax, e.g. 0.75 or 2), got '1_000'"),
])
def test_csv_numbers_follow_json_syntax(tmp_path, run_cli, column, cell, message):
    row = dict(VERDICT, **{column: cell})
    f = tmp_path / "v.csv"
    f.write_text(",".join(row) + "\n" + ",".join(str(v) for v in row.values()) + "\n")
    r = run_cli("--database-url", f"sqlite:///{tmp_path / 'x.db'}", "import", "csv", f, "--kind", "verdicts")
    assert r.exit_code == 2
    assert r.stderr.strip() == f"error: {f}:2: {message}"


def test_csv_numbers_in_json_syntax_are_read(tmp_path, run_cli):
    url = f"sqlite:///{tmp_path / 'x.db'}"
    row = dict(VERDICT, preference=" 7.5e-1 ", sample_index="3")
    f = tmp_path / "v.csv"
    f.write_text(",".join(row) + "\n" + ",".join(str(v) for v in row.values()) + "\n")
    r = run_cli("--database-url", url, "import", "csv", f, "--kind", "verdicts")
    assert r.exit_code == 0, r
    assert _rows(url, "SELECT preference, sample_index FROM pairwise_judgment") == [(0.75, 3)]


def test_blank_lines_are_counted(tmp_path, run_cli):
    url = f"sqlite:///{tmp_path / 'x.db'}"
    f = tmp_path / "v.jsonl"
    f.write_text(json.dumps(VERDICT) + "\n\n  \n" + json.dumps(dict(VERDICT, prompt="q")) + "\n")
    r = run_cli("--database-url", url, "import", "jsonl", f, "--kind", "verdicts")
    assert r.exit_code == 0 and "pairwise_judgment +2" in r.stdout
    assert f"warning: {f}: 2 blank line(s) skipped (lines 2, 3)" in r.stderr
    g = tmp_path / "ok.jsonl"
    g.write_text(json.dumps(dict(VERDICT, prompt="z")) + "\n")
    assert "blank" not in run_cli("--database-url", url, "import", "jsonl", g, "--kind", "verdicts").output
    c = tmp_path / "v.csv"
    c.write_text("prompt,model,response\np,m,a\n,,\n\np,m,b\n")
    r = run_cli("--database-url", url, "import", "csv", c, "--kind", "responses", "--task-family", "f")
    assert r.exit_code == 0 and f"warning: {c}: 2 blank line(s) skipped (lines 3, 4)" in r.stderr
