"""One fact, one row (issue 23 item 4), on SQLite and PostgreSQL: a pair and its swapped twin
are one pair (agreeing: counted once; contradicting: a FILE:LINE error), in one file and
against the database; a reversed verbosity pair is refused; the same file content under
another name or through a symbolic link is recognised and counted, not stored twice."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest


def _jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _label(a: str, b: str, pref: str, **kw) -> dict:
    return {"task_family": "f", "prompt": "q", "model_a": a, "response_a": f"answer of {a}", "model_b": b,
            "response_b": f"answer of {b}", "preference": pref, **kw}


def _verdict(a: str, b: str, verdict: str, **kw) -> dict:
    return {"task_family": "f", "prompt": "q", "model_a": a, "response_a": f"answer of {a}", "model_b": b,
            "response_b": f"answer of {b}", "judge": "J", "verdict": verdict, **kw}


def _pair(c: str, v: str) -> dict:
    return {"task_family": "f", "prompt": "q", "concise_model": c, "concise": f"answer of {c}", "verbose_model": v,
            "verbose": f"answer of {v}"}


def _imp(run_cli, url, path, kind):
    return run_cli("--database-url", url, "import", "jsonl", str(path), "--kind", kind, "--format", "json")


def _n(url: str, table: str) -> int:
    """Rows of ``table`` (0 when the database was never created: a refused first import)."""
    from sqlalchemy import create_engine, inspect, text

    engine = create_engine(url)
    try:
        with engine.connect() as c:
            if table not in inspect(c).get_table_names():
                return 0
            return c.execute(text(f"SELECT COUNT(*) FROM {table}")).scalar_one()
    finally:
        engine.dispose()


# ------------------------------------------------------------------ inside one file (parser), both dialects
def test_swapped_label_in_one_file(tmp_path, db_url, run_cli):
    f = _jsonl(tmp_path / "l.jsonl", [_label("x", "y", "a"), _label("y", "x", "a")])
    r = _imp(run_cli, db_url, f, "labels")
    assert r.exit_code == 2, r
    assert f"{f}:2:" in r.stderr and "conflicts with line 1" in r.stderr and "sides swapped" in r.stderr
    assert _n(db_url, "expert_label") == _n(db_url, "response") == _n(db_url, "imported_file") == 0
    f = _jsonl(tmp_path / "l2.jsonl", [_label("x", "y", "a"), _label("y", "x", "b"), _label("x", "y", "tie", annotator="z")])
    r = _imp(run_cli, db_url, f, "labels")
    assert r.exit_code == 0, r
    out = json.loads(r.stdout)
    assert out["added"]["expert_label"] == 2  # the agreeing twin is one label
    assert any("repeat an earlier record" in w and "lines 2" in w for w in out["warnings"])
    assert _n(db_url, "expert_label") == 2


def test_swapped_verdicts_and_positions_in_one_file(tmp_path, db_url, run_cli):
    # (x, y, na) and (y, x, na) are one verdict: contradicting -> refused
    f = _jsonl(tmp_path / "v.jsonl", [_verdict("x", "y", "a"), _verdict("y", "x", "a")])
    r = _imp(run_cli, db_url, f, "verdicts")
    assert r.exit_code == 2 and f"{f}:2:" in r.stderr and "sides swapped" in r.stderr, r
    assert _n(db_url, "pairwise_judgment") == _n(db_url, "response") == 0
    # x shown first twice ((x, y, ab) and (y, x, ba)): one verdict; (y, x, ab) is another order shown: a fact of its own
    f = _jsonl(tmp_path / "v2.jsonl", [_verdict("x", "y", "a", position="ab"), _verdict("y", "x", "b", position="ba"),
                                       _verdict("y", "x", "a", position="ab")])
    r = _imp(run_cli, db_url, f, "verdicts")
    assert r.exit_code == 0, r
    assert json.loads(r.stdout)["added"]["pairwise_judgment"] == 2
    f = _jsonl(tmp_path / "v3.jsonl", [_verdict("x", "y", "a", position="ab"), _verdict("y", "x", "a", position="ba")])
    r = _imp(run_cli, db_url, f, "verdicts")
    assert r.exit_code == 2 and f"{f}:2:" in r.stderr, r
    assert _n(db_url, "pairwise_judgment") == 2 and _n(db_url, "imported_file") == 1


def test_reversed_verbosity_pair_in_one_file(tmp_path, db_url, run_cli):
    f = _jsonl(tmp_path / "p.jsonl", [_pair("short", "long"), _pair("long", "short")])
    r = _imp(run_cli, db_url, f, "pairs")
    assert r.exit_code == 2 and f"{f}:2:" in r.stderr and "roles swapped" in r.stderr, r
    assert _n(db_url, "verbosity_pair") == _n(db_url, "response") == 0


def test_autoj_swapped_pair(tmp_path, db_url, run_cli):
    rec = {"prompt": "q", "response 1": "one", "response 2": "two", "label": 0, "scenario": "s"}
    f = _jsonl(tmp_path / "autoj.jsonl", [rec, {**rec, "response 1": "two", "response 2": "one", "label": 0}])
    r = run_cli("--database-url", db_url, "import", "autoj", str(f))
    assert r.exit_code == 2 and f"{f}:2:" in r.stderr and "sides swapped" in r.stderr, r
    assert _n(db_url, "expert_label") == 0
    f = _jsonl(tmp_path / "autoj2.jsonl", [rec, {**rec, "response 1": "two", "response 2": "one", "label": 1}])
    r = run_cli("--database-url", db_url, "import", "autoj", str(f), "--format", "json")
    assert r.exit_code == 0, r
    assert json.loads(r.stdout)["added"]["expert_label"] == 1
    assert _n(db_url, "expert_label") == 1


# ------------------------------------------------------------------ against the database (both dialects)
def test_swapped_twins_against_the_database(tmp_path, db_url, run_cli):
    assert run_cli("--database-url", db_url, "db", "upgrade").exit_code == 0
    src = {"source": "s"}
    assert _imp(run_cli, db_url, _jsonl(tmp_path / "a.jsonl", [_label("x", "y", "a", **src)]), "labels").exit_code == 0
    f = _jsonl(tmp_path / "b.jsonl", [_label("y", "x", "a", **src)])
    r = _imp(run_cli, db_url, f, "labels")
    assert r.exit_code == 2 and f"{f}:1:" in r.stderr and "sides swapped" in r.stderr, r
    r = _imp(run_cli, db_url, _jsonl(tmp_path / "c.jsonl", [_label("y", "x", "b", **src)]), "labels")
    assert r.exit_code == 0 and json.loads(r.stdout)["added"]["expert_label"] == 0, r
    # verdicts
    assert _imp(run_cli, db_url, _jsonl(tmp_path / "v.jsonl", [_verdict("x", "y", "a")]), "verdicts").exit_code == 0
    f = _jsonl(tmp_path / "v2.jsonl", [_verdict("m", "n", "tie"), _verdict("y", "x", "a")])
    r = _imp(run_cli, db_url, f, "verdicts")
    assert r.exit_code == 2 and f"{f}:2:" in r.stderr and "sides swapped" in r.stderr, r
    r = _imp(run_cli, db_url, _jsonl(tmp_path / "v3.jsonl", [_verdict("m", "n", "tie"), _verdict("y", "x", "b")]),
             "verdicts")
    assert r.exit_code == 0, r
    out = json.loads(r.stdout)
    assert out["added"]["pairwise_judgment"] == 1  # m/n only: y/x is the stored x/y
    # verbosity pairs
    assert _imp(run_cli, db_url, _jsonl(tmp_path / "p.jsonl", [_pair("s", "l")]), "pairs").exit_code == 0
    f = _jsonl(tmp_path / "p2.jsonl", [_pair("s", "m"), _pair("l", "s")])
    r = _imp(run_cli, db_url, f, "pairs")
    assert r.exit_code == 2 and f"{f}:2:" in r.stderr and "other way round" in r.stderr, r


def test_swapped_twin_preference_within_float_rounding(tmp_path, db_url, run_cli):
    """A soft preference and its swapped twin written as a file writes them (0.574443 and
    0.425557) are one verdict, in one file and against the database, though 1 - 0.574443 is
    0.42555699999999996 in floats; a twin that really differs (0.4256) is still refused."""
    from judgecal.importers.records import same_swapped

    assert 1.0 - 0.574443 != 0.425557 and same_swapped(1.0 - 0.574443, 0.425557)
    assert not same_swapped(0.4256, 0.425557) and not same_swapped(True, 1.0) and same_swapped({"a": [0.3]}, {"a": [0.3]})
    f = _jsonl(tmp_path / "v.jsonl", [_verdict("x", "y", "a", preference=0.574443),
                                      _verdict("y", "x", "b", preference=0.425557)])
    r = _imp(run_cli, db_url, f, "verdicts")
    assert r.exit_code == 0, r
    out = json.loads(r.stdout)
    assert out["added"]["pairwise_judgment"] == 1 and any("repeat an earlier record" in w for w in out["warnings"])
    # against the database: the stored x/y verdict turned to this file's order
    r = _imp(run_cli, db_url, _jsonl(tmp_path / "v2.jsonl", [_verdict("y", "x", "b", preference=0.425557)]), "verdicts")
    assert r.exit_code == 0 and json.loads(r.stdout)["added"]["pairwise_judgment"] == 0, r
    f = _jsonl(tmp_path / "v3.jsonl", [_verdict("y", "x", "b", preference=0.4256)])
    r = _imp(run_cli, db_url, f, "verdicts")
    assert r.exit_code == 2 and f"{f}:1:" in r.stderr and "sides swapped" in r.stderr, r
    f = _jsonl(tmp_path / "v4.jsonl", [_verdict("p", "q", "a", preference=0.574443),
                                       _verdict("q", "p", "b", preference=0.4256)])
    r = _imp(run_cli, db_url, f, "verdicts")
    assert r.exit_code == 2 and f"{f}:2:" in r.stderr and "sides swapped" in r.stderr, r
    assert _n(db_url, "pairwise_judgment") == 1


def test_same_autoj_content_under_another_name(tmp_path, db_url, run_cli):
    recs = [{"prompt": f"q{i}", "response 1": f"one {i}", "response 2": f"two {i}", "label": i % 3, "scenario": "s"}
            for i in range(4)]
    f = _jsonl(tmp_path / "testdata_pairwise.jsonl", recs)
    copy = tmp_path / "copy_of_it.jsonl"
    shutil.copy(f, copy)
    assert run_cli("--database-url", db_url, "db", "upgrade").exit_code == 0
    r = run_cli("--database-url", db_url, "import", "autoj", str(f), "--format", "json")
    assert r.exit_code == 0 and json.loads(r.stdout)["added"]["expert_label"] == 4, r
    r = run_cli("--database-url", db_url, "import", "autoj", str(copy), "--format", "json")
    assert r.exit_code == 0, r
    out = json.loads(r.stdout)
    assert out["added"]["expert_label"] == 0
    assert [(x["status"], x["already_imported_as"]) for x in out["files"]] == [("duplicate", str(f))]
    # the same labels in a file that is not a byte copy (spaces changed): recognised by its labels
    spaced = tmp_path / "spaced.jsonl"
    spaced.write_text("".join(json.dumps(r, indent=None, separators=(", ", " : ")) + "\n" for r in recs))
    r = run_cli("--database-url", db_url, "import", "autoj", str(spaced), "--format", "json")
    assert r.exit_code == 0, r
    out = json.loads(r.stdout)
    assert out["added"]["expert_label"] == 0 and out["files"][0]["status"] == "new"
    reason = next(k for k in out["skipped"] if "already imported from autoj/testdata_pairwise.jsonl" in k)
    assert "4 labels" in out["skipped"][reason]["where"][0]
    # a file that adds one new label beside the copied ones is not a copy: all of its labels are stored
    lbl = _jsonl(tmp_path / "more.jsonl", recs + [{**recs[0], "prompt": "new"}])
    r = run_cli("--database-url", db_url, "import", "autoj", str(lbl), "--format", "json")
    assert r.exit_code == 0 and json.loads(r.stdout)["added"]["expert_label"] == 5, r


def test_symlinked_alpaca_eval_folder_imports_once(tmp_path, db_url, run_cli):
    res = tmp_path / "results"
    recs = [{"instruction": f"q{i}", "output_1": f"base {i}", "generator_1": "base", "output_2": f"model answer {i}",
             "generator_2": "m1", "annotator": "judgeX", "preference": 1.5} for i in range(3)]
    (res / "m1" / "judgeX").mkdir(parents=True)
    (res / "m1" / "judgeX" / "annotations.json").write_text(json.dumps(recs))
    os.symlink(res / "m1", res / "m1_link")
    (res / "m1_copy" / "judgeX").mkdir(parents=True)
    shutil.copy(res / "m1" / "judgeX" / "annotations.json", res / "m1_copy" / "judgeX" / "annotations.json")
    assert run_cli("--database-url", db_url, "db", "upgrade").exit_code == 0
    r = run_cli("--database-url", db_url, "import", "alpaca-eval", str(res), "--format", "json")
    assert r.exit_code == 0, r
    out = json.loads(r.stdout)
    assert out["added"]["pairwise_judgment"] == 3
    first = str(res / "m1" / "judgeX" / "annotations.json")
    assert all(x.get("earlier_in_this_import") for x in out["files"] if x["status"] == "duplicate")
    assert {x["file"]: (x["status"], x.get("already_imported_as")) for x in out["files"]} == {
        first: ("new", None),
        str(res / "m1_copy" / "judgeX" / "annotations.json"): ("duplicate", first),
        str(res / "m1_link" / "judgeX" / "annotations.json"): ("duplicate", first)}
    # the library's own parse (no database) still reads each content once, with a warning
    from judgecal.importers import alpaca_eval

    batch = alpaca_eval.parse([res], "alpaca_eval")
    assert len(batch.verdicts) == 3
    note = next(w for w in batch.warnings if "not imported: the same file or content" in w)
    assert note.startswith("2 file(s)") and "m1_link" in note and "m1_copy" in note


def test_swapped_twin_distribution_greedy_swaps_too(tmp_path, db_url, run_cli):
    """A distribution's ``greedy`` verdict is a side: the twin of greedy "a" on (x, y) is greedy
    "b" on (y, x) (a break-it finding: the check swapped ``probs`` only, so it refused the true
    twin and took a contradicting one as a repeat), in one file and against the database."""
    from judgecal.judge.distribution import swap

    assert swap({"probs": {"a": 0.6, "b": 0.3, "tie": 0.1}, "greedy": "a"}) == {
        "probs": {"b": 0.6, "a": 0.3, "tie": 0.1}, "greedy": "b"}
    assert swap({"probs": {"a": 0.5, "b": 0.5}, "greedy": "tie"})["greedy"] == "tie"

    def dist(pa, pb, greedy):
        return {"probs": {"a": pa, "b": pb, "tie": round(1 - pa - pb, 6)}, "outside": 0.0, "source": "top_logprobs",
                "k": 3, "greedy": greedy}

    one = _verdict("x", "y", "a", preference=0.65, distribution=dist(0.6, 0.3, "a"))
    twin = _verdict("y", "x", "b", preference=0.35, distribution=dist(0.3, 0.6, "b"))
    wrong = _verdict("y", "x", "b", preference=0.35, distribution=dist(0.3, 0.6, "a"))
    r = _imp(run_cli, db_url, _jsonl(tmp_path / "v.jsonl", [one, twin]), "verdicts")
    assert r.exit_code == 0 and json.loads(r.stdout)["added"]["pairwise_judgment"] == 1, r
    f = _jsonl(tmp_path / "w.jsonl", [{**one, "prompt": "q2"}, {**wrong, "prompt": "q2"}])
    r = _imp(run_cli, db_url, f, "verdicts")
    assert r.exit_code == 2 and f"{f}:2:" in r.stderr and "sides swapped" in r.stderr, r
    # against the database: the stored (x, y) verdict's twin counts as stored; the contradicting one is refused
    r = _imp(run_cli, db_url, _jsonl(tmp_path / "t.jsonl", [twin]), "verdicts")
    assert r.exit_code == 0 and json.loads(r.stdout)["added"]["pairwise_judgment"] == 0, r
    f = _jsonl(tmp_path / "t2.jsonl", [wrong])
    r = _imp(run_cli, db_url, f, "verdicts")
    assert r.exit_code == 2 and f"{f}:1:" in r.stderr and "sides swapped" in r.stderr, r
    assert _n(db_url, "pairwise_judgment") == 1
    # the refusal names the field that differs (here only the raw output), with both values
    f = _jsonl(tmp_path / "t3.jsonl", [{**twin, "raw_output": "Output (b)"}])
    r = _imp(run_cli, db_url, f, "verdicts")
    assert r.exit_code == 2 and f"{f}:1:" in r.stderr and "differs in raw_output (stored null, this file 'Output (b)')" \
        in r.stderr and "preference (" not in r.stderr, r
