"""One content, one import (issue 23 item 4), on SQLite and PostgreSQL: every importer records
the SHA-256 of each file it imports (table imported_file, migration 0005); the same content
under another name or through a symbolic link is counted as "already imported as <first
path>" and not stored twice; the same path with the same content reads as before; the same
path with other content reads as before and says so; a rolled-back import records nothing.
Real data slices from ../shared/data where the format has real data there."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

TABLES = ("task_family", "item", "response", "judge", "expert_label", "rating", "pairwise_judgment",
          "verbosity_pair", "imported_file")


def _counts(url: str) -> dict[str, int]:
    engine = create_engine(url)
    try:
        with engine.connect() as c:
            return {t: c.execute(text(f"SELECT COUNT(*) FROM {t}")).scalar_one() for t in TABLES}
    finally:
        engine.dispose()


def _rows(url: str, sql: str) -> list[tuple]:
    engine = create_engine(url)
    try:
        with engine.connect() as c:
            return [tuple(r) for r in c.execute(text(sql))]
    finally:
        engine.dispose()


def _json_import(run_cli, url, *args):
    r = run_cli("--database-url", url, "import", *map(str, args), "--format", "json")
    assert r.exit_code == 0, r
    return json.loads(r.stdout)


def _status(out: dict) -> dict[str, tuple]:
    return {f["file"]: (f["status"], f.get("already_imported_as")) for f in out["files"]}


def _nothing_added(out: dict) -> bool:
    return not any(out["added"].values())


def _copy_is_duplicate(run_cli, db_url: str, src: Path, dst: Path, *args: str) -> dict:
    """Copy ``src`` to ``dst``, import the copy with ``args`` (importer and options): asserts it is
    reported as a duplicate of ``src`` and that no row was added; returns the import's JSON."""
    before = _counts(db_url)
    shutil.copy(src, dst)
    out = _json_import(run_cli, db_url, *args[:1], dst, *args[1:])
    assert _nothing_added(out) and _status(out) == {str(dst): ("duplicate", str(src))}
    assert _counts(db_url) == before
    return out


def _slice(src: Path, dst: Path, n: int) -> Path:
    """The first ``n`` records of a real JSON array file, as a JSON file of its own."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.write_text(json.dumps(json.loads(src.read_text())[:n], indent=4))
    return dst


# ------------------------------------------------------------------ AlpacaEval
def test_alpaca_eval_symlinked_model_folder_is_not_a_second_model(tmp_path, db_url, run_cli, data_dir):
    real = data_dir / "alpaca_eval" / "results"
    res = tmp_path / "results"
    ann = "weighted_alpaca_eval_gpt4_turbo/annotations.json"
    _slice(real / "gpt4_gamed" / ann, res / "gpt4_gamed" / ann, 12)
    out = _json_import(run_cli, db_url, "alpaca-eval", res / "gpt4_gamed")
    assert out["added"]["pairwise_judgment"] == 12 and out["added"]["response"] == 24
    first = str(res / "gpt4_gamed" / ann)
    assert _status(out) == {first: ("new", None)}
    before = _counts(db_url)
    assert before["imported_file"] == 1
    (tmp_path / "elsewhere").mkdir()
    os.symlink(res / "gpt4_gamed", tmp_path / "elsewhere" / "gamed_link")
    link = tmp_path / "elsewhere" / "gamed_link"
    out = _json_import(run_cli, db_url, "alpaca-eval", link)
    assert _nothing_added(out), out
    assert _status(out) == {str(link / ann): ("duplicate", first)}
    assert _counts(db_url) == before
    assert _rows(db_url, "SELECT DISTINCT model FROM response ORDER BY model") == [("gpt4_1106_preview",), ("gpt4_gamed",)]
    # the table summary names the first path
    r = run_cli("--database-url", db_url, "import", "alpaca-eval", link)
    assert r.exit_code == 0, r
    assert "files: 1 read (content SHA-256): 0 new, 1 already imported as another file (not stored twice)" in r.stdout
    assert f"already imported as {first}: {link / ann} (the same content" in r.stdout
    # the same path again: read as before (its rows counted as already stored), nothing recorded twice
    out = _json_import(run_cli, db_url, "alpaca-eval", res / "gpt4_gamed")
    assert _status(out) == {first: ("again", None)} and _nothing_added(out)
    assert out["skipped"]["already stored with the same values (pairwise_judgment rows not added again)"]["count"] == 12
    assert _counts(db_url) == before


def test_alpaca_eval_duplicate_beside_new_files_in_parsing_processes(tmp_path, db_url, run_cli, data_dir):
    """A folder holding an already imported file's copy and new files, parsed by a worker process:
    the copy is left unparsed, the others are written (a worker's later batches name the baseline's
    answers without their texts: nothing may depend on the copy's batch)."""
    real = data_dir / "alpaca_eval" / "results"
    ann = "weighted_alpaca_eval_gpt4_turbo/annotations.json"
    a = tmp_path / "one" / "claude-2"
    _slice(real / "claude-2" / ann, a / ann, 10)
    out = _json_import(run_cli, db_url, "alpaca-eval", a)
    assert out["added"]["pairwise_judgment"] == 10
    res = tmp_path / "results"
    (res / "claude-2").mkdir(parents=True)
    shutil.copytree(a / "weighted_alpaca_eval_gpt4_turbo", res / "claude-2" / "weighted_alpaca_eval_gpt4_turbo")
    for model in ("phi-2", "vicuna-7b"):
        _slice(real / model / ann, res / model / ann, 10)
    before = _counts(db_url)
    out = _json_import(run_cli, db_url, "alpaca-eval", res, "--workers", "1")
    assert _status(out) == {str(res / "claude-2" / ann): ("duplicate", str(a / ann)),
                            str(res / "phi-2" / ann): ("new", None), str(res / "vicuna-7b" / ann): ("new", None)}
    assert out["added"]["pairwise_judgment"] == 20
    after = _counts(db_url)
    assert after["pairwise_judgment"] == before["pairwise_judgment"] + 20
    assert after["imported_file"] == before["imported_file"] + 2
    # the new files (a size no other file has: hashed by the parsing process, not read here) carry their true hash
    import hashlib

    def true(p: Path) -> tuple:
        return str(p), hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_size

    phi = res / "phi-2" / ann
    assert _rows(db_url, "SELECT path, sha256, n_bytes FROM imported_file ORDER BY id") == [
        true(a / ann), true(phi), true(res / "vicuna-7b" / ann)]
    assert {f["file"]: f["sha256"] for f in out["files"]}[str(phi)] == true(phi)[1]
    # the same path with other content (another size): read as before, said so, recorded with its new hash
    old = true(phi)[1]
    _slice(real / "phi-2" / ann, phi, 11)
    out = _json_import(run_cli, db_url, "alpaca-eval", phi)
    assert [(f["status"], f["before"]["sha256"], f["sha256"]) for f in out["files"]] == [("changed", old, true(phi)[1])]
    assert out["added"]["pairwise_judgment"] == 1
    assert any(w.startswith(f"{phi}: this path was imported before with other content") for w in out["warnings"])


def test_alpaca_eval_pair_file_already_imported_still_forms_pairs(tmp_path, db_url, run_cli, data_dir):
    real = data_dir / "alpaca_eval"
    concise = _slice(real / "gpt4_1106_preview_concise.json", tmp_path / "c.json", 5)
    verbose = _slice(real / "gpt4_1106_preview_verbose.json", tmp_path / "v.json", 5)
    out = _json_import(run_cli, db_url, "alpaca-eval", concise)
    assert out["added"]["response"] == 5
    copy = tmp_path / "copy" / "c.json"
    copy.parent.mkdir()
    shutil.copy(concise, copy)
    out = _json_import(run_cli, db_url, "alpaca-eval", "--pair", copy, verbose)
    assert _status(out) == {str(copy): ("duplicate", str(concise)), str(verbose): ("new", None)}
    assert out["added"]["verbosity_pair"] == 5 and out["added"]["response"] == 5  # the verbose answers only
    assert _counts(db_url)["response"] == 10


def test_alpaca_eval_pair_stored_the_other_way_round_names_file_line(tmp_path, db_url, run_cli, data_dir):
    real = data_dir / "alpaca_eval"
    concise = _slice(real / "gpt4_1106_preview_concise.json", tmp_path / "c.json", 3)
    verbose = _slice(real / "gpt4_1106_preview_verbose.json", tmp_path / "v.json", 3)
    assert _json_import(run_cli, db_url, "alpaca-eval", "--pair", concise, verbose)["added"]["verbosity_pair"] == 3
    before = _counts(db_url)
    r = run_cli("--database-url", db_url, "import", "alpaca-eval", "--pair", verbose, concise)
    assert r.exit_code == 2, r
    assert r.stderr.startswith(f"error: {verbose}:2: this verbosity pair is already stored with concise and verbose "
                               "the other way round (imported from alpaca_eval)"), r
    assert _counts(db_url) == before


# ------------------------------------------------------------------ LLMBar
def test_llmbar_set_folder_copied_under_another_name(tmp_path, db_url, run_cli, data_dir):
    src = data_dir / "llmbar" / "Natural"
    out = _json_import(run_cli, db_url, "llmbar", src)
    assert out["added"]["expert_label"] == 100 and out["added"]["rating"] == 400
    assert [f["status"] for f in out["files"]] == ["new"] * 3
    before = _counts(db_url)
    copy = tmp_path / "Natural_copy"
    shutil.copytree(src, copy)
    out = _json_import(run_cli, db_url, "llmbar", copy)
    assert _nothing_added(out), out
    assert _status(out) == {str(copy / n): ("duplicate", str(src / n))
                            for n in ("dataset.json", "ratings_ChatGPT.json", "ratings_GPT-4.json")}
    assert _counts(db_url) == before
    assert _rows(db_url, "SELECT name FROM task_family") == [("llmbar/Natural",)]  # no llmbar/Natural_copy
    # on purpose into another family: another import
    out = _json_import(run_cli, db_url, "llmbar", copy, "--task-family", "pooled")
    assert out["added"]["expert_label"] == 100 and [f["status"] for f in out["files"]] == ["new"] * 3


def test_llmbar_repository_set_after_the_shared_layout(db_url, run_cli, data_dir, repo):
    """The shared layout's dataset.json and ratings files are the repository's own bytes: they are
    recognised as already imported; the repository's other protocols (65 result files in all
    here) are new."""
    shared = data_dir / "llmbar" / "Natural"
    _json_import(run_cli, db_url, "llmbar", shared)
    before = _counts(db_url)
    set_dir = repo / "Dataset" / "LLMBar" / "Natural"
    out = _json_import(run_cli, db_url, "llmbar", set_dir)
    status = _status(out)
    assert {f: s for f, s in status.items() if s[0] == "duplicate"} == {
        str(set_dir / "dataset.json"): ("duplicate", str(shared / "dataset.json")),
        str(set_dir / "evaluators/ChatGPT/Rating/result.json"): ("duplicate", str(shared / "ratings_ChatGPT.json")),
        str(set_dir / "evaluators/GPT-4/Rating/result.json"): ("duplicate", str(shared / "ratings_GPT-4.json"))}
    assert len(status) == 66 and all(s == ("new", None) for f, s in status.items() if "duplicate" not in s)
    assert out["added"]["expert_label"] == 0 and out["added"]["response"] == 0
    after = _counts(db_url)
    assert after["imported_file"] == before["imported_file"] + 63
    assert after["rating"] > before["rating"] and after["pairwise_judgment"] > before["pairwise_judgment"]
    assert _rows(db_url, "SELECT name FROM task_family") == [("llmbar/Natural",)]


# ------------------------------------------------------------------ PandaLM
def test_pandalm_copy_and_changed_content(tmp_path, db_url, run_cli, data_dir):
    a = _slice(data_dir / "pandalm" / "testset-v1.json", tmp_path / "a.json", 20)
    out = _json_import(run_cli, db_url, "pandalm", a)
    assert out["added"]["expert_label"] == 60  # three annotators a record
    _copy_is_duplicate(run_cli, db_url, a, tmp_path / "b.json", "pandalm")
    before = _counts(db_url)
    # the same path with other content (five more records): read as before, and said so
    _slice(data_dir / "pandalm" / "testset-v1.json", a, 25)
    out = _json_import(run_cli, db_url, "pandalm", a)
    assert _status(out) == {str(a): ("changed", None)}
    assert out["files"][0]["before"]["sha256"] != out["files"][0]["sha256"]
    assert any(w.startswith(f"{a}: this path was imported before with other content") for w in out["warnings"])
    assert out["added"]["expert_label"] == 15
    assert _counts(db_url)["imported_file"] == before["imported_file"] + 1


# ------------------------------------------------------------------ JudgeBench
def _jb(pid: str, **kw) -> dict:
    return {"pair_id": pid, "original_id": "o", "source": "mmlu-pro-law", "question": f"q {pid}",
            "response_model": "gpt-4o", "response_A": f"A {pid}", "response_B": f"B {pid}", "label": "A>B", **kw}


def _jb_out(pid: str, s1: float, s2: float) -> dict:
    judgments = [{"judgment": {"judge_model": "rm", "scores": [s1, s2]}},
                 {"judgment": {"judge_model": "rm", "scores": [s2, s1]}}]
    return _jb(pid, judge_name="reward_model", judgments=judgments)


def _write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_judgebench_copy_symlink_and_conflict_at_file_line(tmp_path, db_url, run_cli):
    data = _write_jsonl(tmp_path / "data.jsonl", [_jb("p1"), _jb("p2")])
    out1 = _write_jsonl(tmp_path / "out1.jsonl", [_jb_out("p1", 1.0, 2.0), _jb_out("p2", 3.0, 0.5)])
    out = _json_import(run_cli, db_url, "judgebench", data, out1)
    assert out["added"]["expert_label"] == 2 and out["added"]["rating"] == 8
    before = _counts(db_url)
    copy = tmp_path / "copy.jsonl"
    shutil.copy(data, copy)
    os.symlink(out1, tmp_path / "link.jsonl")
    out = _json_import(run_cli, db_url, "judgebench", copy, tmp_path / "link.jsonl")
    assert _nothing_added(out)
    assert _status(out) == {str(copy): ("duplicate", str(data)), str(tmp_path / "link.jsonl"): ("duplicate", str(out1))}
    assert _counts(db_url) == before
    # a score stored with another value: the message names FILE:LINE (issue 23 item 6)
    out2 = _write_jsonl(tmp_path / "out2.jsonl", [_jb_out("p1", 1.0, 2.0), _jb_out("p2", 3.0, 0.75)])
    r = run_cli("--database-url", db_url, "import", "judgebench", out2)
    assert r.exit_code == 2, r
    assert r.stderr.startswith(f"error: {out2}:2: this rating is already stored with score 0.5, raw_output '0.5'; "
                               "this file gives score 0.75, raw_output '0.75': an import never changes"), r
    assert "Traceback" not in r.output
    assert _counts(db_url) == before  # nothing half-written, no hash recorded


# ------------------------------------------------------------------ Auto-J
def test_autoj_copy_not_stored_twice(tmp_path, db_url, run_cli):
    recs = [{"prompt": f"q{i}", "response 1": f"one {i}", "response 2": f"two {i}", "label": i % 3, "scenario": "s"}
            for i in range(5)]
    f = _write_jsonl(tmp_path / "testdata_pairwise.jsonl", recs)
    assert _json_import(run_cli, db_url, "autoj", f)["added"]["expert_label"] == 5
    _copy_is_duplicate(run_cli, db_url, f, tmp_path / "renamed.jsonl", "autoj")
    # a pair label stored with another value (the same file name: the label's source) names FILE:LINE
    (tmp_path / "v2").mkdir()
    g = _write_jsonl(tmp_path / "v2" / "testdata_pairwise.jsonl", [recs[0], {**recs[1], "label": 0}])
    r = run_cli("--database-url", db_url, "import", "autoj", g)
    assert r.exit_code == 2 and f"error: {g}:2: " in r.stderr, r


# ------------------------------------------------------------------ generic JSONL / CSV
def test_generic_same_path_copy_rollback(tmp_path, db_url, run_cli):
    row = {"task_family": "f", "prompt": "p", "model_a": "x", "response_a": "ra", "model_b": "y", "response_b": "rb",
           "preference": "a"}
    f = _write_jsonl(tmp_path / "l.jsonl", [row])
    out = _json_import(run_cli, db_url, "jsonl", f, "--kind", "labels")
    assert _status(out) == {str(f): ("new", None)} and out["added"]["expert_label"] == 1
    out = _json_import(run_cli, db_url, "jsonl", f, "--kind", "labels")
    assert _status(out) == {str(f): ("again", None)} and _nothing_added(out)
    # a rolled-back import records no hash: a conflicting label
    bad = _write_jsonl(tmp_path / "bad.jsonl", [{**row, "prompt": "new"}, {**row, "preference": "b"}])
    before = _counts(db_url)
    r = run_cli("--database-url", db_url, "import", "jsonl", bad, "--kind", "labels")
    assert r.exit_code == 2 and f"{bad}:2: this label is already stored with preference 'a'" in r.stderr, r
    assert _counts(db_url) == before
    # a copy under another name, then the same copy with --task-family (another import, another family)
    copy = tmp_path / "sub" / "l.jsonl"
    copy.parent.mkdir()
    shutil.copy(f, copy)
    out = _json_import(run_cli, db_url, "jsonl", copy, "--kind", "labels")
    assert _status(out) == {str(copy): ("duplicate", str(f))} and _nothing_added(out)
    csv = tmp_path / "l.csv"
    csv.write_text("task_family,prompt,model_a,response_a,model_b,response_b,preference\nf,p,x,ra,y,rb,a\n")
    out = _json_import(run_cli, db_url, "csv", csv, "--kind", "labels")
    assert _status(out) == {str(csv): ("new", None)}
    csv2 = tmp_path / "sub" / "l.csv"
    shutil.copy(csv, csv2)
    assert _status(_json_import(run_cli, db_url, "csv", csv2, "--kind", "labels")) == {str(csv2): ("duplicate", str(csv))}
    assert _rows(db_url, "SELECT importer, family_option, path FROM imported_file ORDER BY id") == [
        ("jsonl:labels", "", str(f)), ("csv:labels", "", str(csv))]


# ------------------------------------------------------------------ empty names (issue 23 item 6)
def test_blank_names_are_refused_or_filed_under_the_default_with_a_count(tmp_path, db_url, run_cli, data_dir):
    """A blank name is no name in every importer: refused at FILE:LINE where the name is needed,
    the documented default with a counted warning where the format has one; never a judge or
    model named '  '."""
    # AlpacaEval: an annotator of spaces is no annotator (the file's first named one, counted)
    recs = [{"instruction": f"q{i}", "output_1": f"b{i}", "generator_1": "base", "output_2": f"m{i}",
             "generator_2": "m1", "annotator": "judgeX" if i else "  ", "preference": 1.5} for i in range(3)]
    f = tmp_path / "ann.json"
    f.write_text(json.dumps(recs))
    out = _json_import(run_cli, db_url, "alpaca-eval", f)
    assert any("1 records without an annotator: filed under 'judgeX'" in w for w in out["warnings"]), out
    # PandaLM: a cmp_key naming a blank model: the two responses' own names
    rec = json.loads((data_dir / "pandalm" / "testset-v1.json").read_text())[0]
    p = tmp_path / "pandalm.json"
    p.write_text(json.dumps([{**rec, "cmp_key": "  _llama-7b"}]))
    assert _json_import(run_cli, db_url, "pandalm", p)["added"]["expert_label"] == 3
    assert _rows(db_url, "SELECT name FROM judge ORDER BY name") == [("judgeX",)]
    models = {m for (m,) in _rows(db_url, "SELECT DISTINCT model FROM response")}
    assert models == {"base", "m1", "pandalm/response1", "pandalm/response2"}
    # refused at FILE:LINE: a generic model, a JudgeBench response_model, an Auto-J scenario
    g = _write_jsonl(tmp_path / "r.jsonl", [{"task_family": "f", "prompt": "p", "model": "  ", "response": "r"}])
    r = run_cli("--database-url", db_url, "import", "jsonl", g, "--kind", "responses")
    assert r.exit_code == 2 and f"{g}:1: field 'model' is empty" in r.stderr, r
    j = _write_jsonl(tmp_path / "jb.jsonl", [_jb("p1", response_model=" ")])
    r = run_cli("--database-url", db_url, "import", "judgebench", j)
    assert r.exit_code == 2 and f"{j}:1: field 'response_model' is empty" in r.stderr, r
    a = _write_jsonl(tmp_path / "aj.jsonl", [{"prompt": "q", "response 1": "x", "response 2": "y", "label": 0,
                                              "scenario": " "}])
    r = run_cli("--database-url", db_url, "import", "autoj", a)
    assert r.exit_code == 2 and f"{a}:1: field 'scenario' is empty" in r.stderr, r
    # LLMBar: a ratings file without a judge name
    d = tmp_path / "set"
    d.mkdir()
    shutil.copy(data_dir / "llmbar" / "Natural" / "dataset.json", d / "dataset.json")
    shutil.copy(data_dir / "llmbar" / "Natural" / "ratings_GPT-4.json", d / "ratings_.json")
    r = run_cli("--database-url", db_url, "import", "llmbar", d)
    assert r.exit_code == 2 and f"{d / 'ratings_.json'}: the file name gives no judge name" in r.stderr, r
    assert _rows(db_url, "SELECT name FROM judge ORDER BY name") == [("judgeX",)]


def test_a_concurrent_import_of_the_same_content_is_refused_not_stored_twice(tmp_path, db_url):
    """Another import records the same content from another path between this import's look-up
    and its commit: this one is refused (InputError; its transaction then rolls back)."""
    from sqlalchemy.orm import Session

    from judgecal.db import engine as eng
    from judgecal.db import migrate
    from judgecal.db import models as m
    from judgecal.db.filebook import FileBook
    from judgecal.errors import InputError
    from judgecal.importers.records import file_digest

    f = _write_jsonl(tmp_path / "a.jsonl", [{"task_family": "f", "prompt": "p", "model": "m", "response": "r"}])
    engine = eng.create(db_url)
    try:
        migrate.upgrade(engine, "head")
        with Session(engine) as s:
            book = FileBook(s, "jsonl:responses", None)
            assert book.status(str(f)).status == "new"
            with Session(engine) as other, other.begin():  # the other import commits first
                other.add(m.ImportedFile(importer="jsonl:responses", family_option="", sha256=file_digest(f).sha256,
                                         path="/elsewhere/a.jsonl", n_bytes=f.stat().st_size, created_at=m.utcnow()))
            with pytest.raises(InputError, match="another import recorded the same content meanwhile, as "
                                                 "/elsewhere/a.jsonl: nothing was imported"):
                book.record([str(f)])
            s.rollback()
        assert _rows(db_url, "SELECT path FROM imported_file") == [("/elsewhere/a.jsonl",)]
    finally:
        engine.dispose()


def test_pandalm_label_stored_with_another_value_names_file_line(tmp_path, db_url, run_cli, data_dir):
    recs = json.loads((data_dir / "pandalm" / "testset-v1.json").read_text())[:3]
    a = tmp_path / "one" / "testset-v1.json"
    a.parent.mkdir()
    a.write_text(json.dumps(recs, indent=4))
    assert _json_import(run_cli, db_url, "pandalm", a)["added"]["expert_label"] == 9
    before = _counts(db_url)
    b = tmp_path / "two" / "testset-v1.json"  # the same file name: the same label source
    b.parent.mkdir()
    flipped = {"0": 1, "1": 2, "2": 0}[str(recs[2]["annotator2"])]
    b.write_text(json.dumps(recs[:2] + [{**recs[2], "annotator2": flipped}], indent=4))
    r = run_cli("--database-url", db_url, "import", "pandalm", b)
    line = next(i + 1 for i, t in enumerate(b.read_text().splitlines()) if t == "    {" and i > 2 and
                b.read_text().splitlines()[i + 1].strip().startswith('"idx": 2'))  # the third record's first line
    assert r.exit_code == 2 and r.stderr.startswith(f"error: {b}:{line}: this label is already stored with preference"), r
    assert _counts(db_url) == before
