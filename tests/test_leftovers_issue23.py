"""Issue 23: the seven cases the confirming break-it pass found and left open (stop 28's note),
each on both dialects: a key given twice in the JSON-array formats, an LLMBar pair given again
with its outputs swapped, serve's chooser pages dropping parameters, a ratings file of the wrong
case, fields a real-data format does not have, a family with surrounding spaces, and one
AlpacaEval file given twice."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from sqlalchemy import text

from db_helpers import count_rows as _count
from judgecal.db import engine as eng




def _upgrade(run_cli, db_url):
    r = run_cli("--database-url", db_url, "db", "upgrade")
    assert r.exit_code == 0, r


ANN = {"instruction": "i", "output_1": "base answer", "generator_1": "B", "output_2": "my answer",
       "generator_2": "M", "annotator": "A", "preference": 1.0}


def test_key_given_twice_in_json_array_formats_is_refused(db_url, run_cli, tmp_path):
    """LLMBar, PandaLM and AlpacaEval files are JSON arrays: a record giving one key twice was
    imported with the LAST value (the json module and msgspec both keep it), exit 0. Now
    FILE:LINE names the field and nothing is written, on the fast (msgspec) path too."""
    _upgrade(run_cli, db_url)
    s = tmp_path / "S"
    s.mkdir()
    (s / "dataset.json").write_text('[\n{"input": "q", "output_1": "x", "output_2": "y", "label": "1"},\n'
                                    '{"input": "q2", "output_1": "x", "output_2": "y", "label": "1", "label": "2"}\n]')
    r = run_cli("--database-url", db_url, "import", "llmbar", s)
    assert r.exit_code == 2 and "dataset.json:3: field 'label' appears twice" in r.stderr, r
    pandalm = tmp_path / "p.json"
    rec = {"idx": 1, "motivation_app": "m", "cmp_key": "a_b", "instruction": "i", "input": "", "response1": "x",
           "response2": "y", "annotator1": 1, "annotator2": 1, "annotator3": 2}
    pandalm.write_text("[" + json.dumps(rec)[:-1] + ', "annotator3": 1}]')
    r = run_cli("--database-url", db_url, "import", "pandalm", pandalm)
    assert r.exit_code == 2 and "p.json:1: field 'annotator3' appears twice" in r.stderr, r
    ae = tmp_path / "ae.json"
    ae.write_text("[\n" + json.dumps(ANN) + ",\n" + json.dumps(dict(ANN, instruction="j"))[:-1]
                  + ', "preference": 2.0}\n]')
    r = run_cli("--database-url", db_url, "import", "alpaca-eval", ae)
    assert r.exit_code == 2 and "ae.json:3: field 'preference' appears twice" in r.stderr, r
    # a nested duplicate (inside raw_completion) is found on the reference path
    ae.write_text("[" + json.dumps(dict(ANN, raw_completion={"text": "x"}))[:-2] + ', "text": "y"}}]')
    r = run_cli("--database-url", db_url, "import", "alpaca-eval", ae)
    assert r.exit_code == 2 and "field 'text' appears twice" in r.stderr, r
    for table in ("item", "response", "expert_label", "pairwise_judgment"):
        assert _count(db_url, table) == 0, table
    # a string VALUE equal to a field's name is no repeat: imported (through the reference path)
    ae.write_text(json.dumps([dict(ANN, output_2="preference")]))
    r = run_cli("--database-url", db_url, "import", "alpaca-eval", ae)
    assert r.exit_code == 0, r
    assert _count(db_url, "pairwise_judgment") == 1


def _llmbar_set(folder: Path, records: list[dict], judges: dict[str, list[tuple[str, str]]]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "dataset.json").write_text(json.dumps(records, indent=1))
    for judge, scores in judges.items():
        rows = [dict(r, results=[{"score_1": [s1, "stop"], "score_2": [s2, "stop"]}]) for r, (s1, s2) in
                zip(records, scores)]
        (folder / f"ratings_{judge}.json").write_text(json.dumps(rows, indent=1))


def test_llmbar_pair_given_again_swapped_is_one_pair(db_url, run_cli, tmp_path):
    """A dataset.json pair given again with output_1 and output_2 swapped (and the label
    swapped with them: the same fact) was stored as a second pair of two more responses (the
    position is the "model"). Now it is one pair: the repeat and the judge's records at its
    position are counted as not imported. A swap whose label names the other output better is
    refused at FILE:LINE naming the earlier line."""
    _upgrade(run_cli, db_url)
    recs = [{"input": "q1", "output_1": "short", "output_2": "a longer answer", "label": "1"},
            {"input": "q2", "output_1": "p", "output_2": "qq", "label": 2},
            {"input": "q1", "output_1": "a longer answer", "output_2": "short", "label": "2"}]
    _llmbar_set(tmp_path / "S", recs, {"J": [("7", "5"), ("3", "4"), ("5", "7")]})
    r = run_cli("--database-url", db_url, "import", "llmbar", "--format", "json", tmp_path / "S")
    assert r.exit_code == 0, r
    out = json.loads(r.stdout)
    assert out["added"]["expert_label"] == 2 and out["added"]["response"] == 4 and out["added"]["rating"] == 4, out
    skipped = {k: v for k, v in out["skipped"].items() if "repeat" in k or "same pair" in k}
    assert sum(v["count"] for v in skipped.values()) == 2, out["skipped"]
    where = [w for v in skipped.values() for w in v["where"]]
    assert any("dataset.json:" in w and "(line 2)" in w for w in where), where
    # the swapped twin naming the OTHER output better: a contradiction, refused
    recs[2]["label"] = "1"
    _llmbar_set(tmp_path / "T", recs, {})
    r = run_cli("--database-url", db_url, "import", "llmbar", "--task-family", "t", tmp_path / "T")
    assert r.exit_code == 2, r
    assert "dataset.json:" in r.stderr and "the same pair as line 2" in r.stderr and "swapped" in r.stderr, r.stderr
    assert _count(db_url, "expert_label") == 2


def test_llmbar_files_not_read_are_counted(db_url, run_cli, tmp_path):
    """`Ratings_J.json` (the wrong case) and any other entry of a set folder were skipped
    without a note: now each is counted as not imported, naming it."""
    _upgrade(run_cli, db_url)
    recs = [{"input": "q1", "output_1": "x", "output_2": "yy", "label": "1"}]
    _llmbar_set(tmp_path / "S", recs, {"J": [("7", "5")]})
    shutil.copy(tmp_path / "S" / "ratings_J.json", tmp_path / "S" / "Ratings_K.json")
    (tmp_path / "S" / "notes.txt").write_text("x")
    r = run_cli("--database-url", db_url, "import", "llmbar", "--format", "json", tmp_path / "S")
    assert r.exit_code == 0, r
    out = json.loads(r.stdout)
    (reason, entry), = [(k, v) for k, v in out["not_read"].items() if "not an LLMBar file" in k]
    assert entry["count"] == 2 and sorted(Path(w).name for w in entry["where"]) == ["Ratings_K.json", "notes.txt"]
    assert out["added"]["rating"] == 2  # ratings_J.json only
    judges = {row[0] for row in eng.create(db_url).connect().execute(text("SELECT name FROM judge"))}
    assert judges == {"J"}, judges


def test_fields_a_format_does_not_have_are_reported(db_url, run_cli, tmp_path):
    """Extra keys in LLMBar, PandaLM and AlpacaEval records (a misspelt field, say) got no
    word: now one warning per file names each, with its count and first line. The real files
    in ../shared/data carry none."""
    _upgrade(run_cli, db_url)
    recs = [{"input": "q1", "output_1": "x", "output_2": "yy", "label": "1", "lable": "2"}]
    _llmbar_set(tmp_path / "S", recs, {})
    r = run_cli("--database-url", db_url, "import", "llmbar", tmp_path / "S")
    assert r.exit_code == 0, r
    assert "dataset.json: field(s) this format does not have, not read: 'lable' (1 record(s), first at line 2)" \
        in r.stderr, r.stderr
    ae = tmp_path / "ae.json"
    ae.write_text(json.dumps([ANN, dict(ANN, instruction="j", preferance=2.0)], indent=1))
    r = run_cli("--database-url", db_url, "import", "alpaca-eval", "--format", "json", ae)
    assert r.exit_code == 0, r
    out = json.loads(r.stdout)
    assert any("'preferance' (1 record(s), first at line 11)" in w for w in out["warnings"]), out["warnings"]
    assert out["added"]["pairwise_judgment"] == 2
    pandalm = tmp_path / "p.json"
    rec = {"idx": 1, "motivation_app": "m", "cmp_key": "a_b", "instruction": "i", "input": "", "response1": "x",
           "response2": "y", "annotator1": 1, "annotator2": 1, "annotator3": 2, "annotator4": 0}
    pandalm.write_text(json.dumps([rec]))
    r = run_cli("--database-url", db_url, "import", "pandalm", pandalm)
    assert r.exit_code == 0 and "'annotator4' (1 record(s), first at line 1)" in r.stderr, r


def test_real_files_carry_no_unknown_field(tmp_path, run_cli, data_dir):
    """The shared real data gives no unknown-field warning (the known fields are the formats'
    own): LLMBar (both layouts' record shapes), PandaLM, AlpacaEval outputs and annotations."""
    url = f"sqlite:///{tmp_path / 'real.db'}"
    _upgrade(run_cli, url)
    runs = [("llmbar", data_dir / "llmbar" / "Natural"), ("pandalm", data_dir / "pandalm" / "testset-v1.json"),
            ("alpaca-eval", data_dir / "alpaca_eval" / "gpt4_1106_preview_concise.json"),
            ("alpaca-eval", data_dir / "alpaca_eval" / "results" / "alpaca-7b")]
    for fmt, path in runs:
        r = run_cli("--database-url", url, "import", fmt, path)
        assert r.exit_code == 0, (fmt, r)
        assert "does not have" not in r.stderr and "appears twice" not in r.stderr, (fmt, r.stderr)


def test_family_with_surrounding_spaces_is_refused(db_url, run_cli, tmp_path):
    """A family ' x ' (from --task-family or a record's task_family) was stored as given: a
    family apart from 'x' that no one would find. Now refused, naming it; nothing written."""
    _upgrade(run_cli, db_url)
    f = tmp_path / "r.jsonl"
    f.write_text(json.dumps({"prompt": "p", "model": "m", "response": "r"}) + "\n")
    r = run_cli("--database-url", db_url, "import", "jsonl", "--kind", "responses", "--task-family", " x ", f)
    assert r.exit_code == 2 and "--task-family ' x ' begins or ends with white space" in r.stderr, r
    f.write_text(json.dumps({"task_family": "x\t", "prompt": "p", "model": "m", "response": "r"}) + "\n")
    r = run_cli("--database-url", db_url, "import", "jsonl", "--kind", "responses", f)
    assert r.exit_code == 2 and "r.jsonl:1: field 'task_family' is 'x\\t': it begins or ends with white space" \
        in r.stderr, r
    assert _count(db_url, "task_family") == 0
    for fmt in ("pandalm", "alpaca-eval"):
        r = run_cli("--database-url", db_url, "import", fmt, "--task-family", "x ", f)
        assert r.exit_code == 2 and "begins or ends with white space" in r.stderr, (fmt, r)


def test_alpaca_eval_file_given_twice_is_noted(db_url, run_cli, tmp_path):
    """`import alpaca-eval A.json A.json` read A.json once without a word: now a warning
    names it (the records are stored once, as before)."""
    _upgrade(run_cli, db_url)
    ae = tmp_path / "ae.json"
    ae.write_text(json.dumps([ANN]))
    r = run_cli("--database-url", db_url, "import", "alpaca-eval", "--format", "json", ae, ae)
    assert r.exit_code == 0, r
    out = json.loads(r.stdout)
    assert any("1 file(s) given more than once" in w and str(ae) in w for w in out["warnings"]), out["warnings"]
    assert _count(db_url, "pairwise_judgment") == 1


def test_serve_chooser_pages_carry_parameters(db_url, run_cli, tmp_path):
    """`/calibration?seed=5` (the list of calibrations) and `/leaderboard?family=x&seed=3`
    without a judge (a chooser) dropped the parameters: every choice's link now carries them,
    the page says so, and format=json gives the choices as JSON."""
    pytest.importorskip("starlette")
    from starlette.testclient import TestClient

    from judgecal.web import create_app

    _upgrade(run_cli, db_url)
    rows = [{"task_family": "fam", "prompt": f"P{i}", "model": m, "response": m * (i + 1), "judge": j,
             "scale_min": 1, "scale_max": 10, "score": 3 + i % 3} for i in range(4) for m in ("a", "b")
            for j in ("J1", "J2")]
    f = tmp_path / "r.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert run_cli("--database-url", db_url, "import", "jsonl", "--kind", "ratings", f).exit_code == 0
    c = TestClient(create_app(db_url))
    r = c.get("/leaderboard?family=fam&seed=3&bootstrap=50")
    assert r.status_code == 200, r.text[-400:]
    assert "/leaderboard?family=fam&amp;seed=3&amp;bootstrap=50&amp;judge=J1" in r.text, r.text
    assert "Kept in every choice below" in r.text and "seed=3" in r.text
    r = c.get("/leaderboard?family=fam&seed=3&format=json")
    assert r.status_code == 200
    choices = r.json()
    assert [o["url"] for o in choices["options"]] == ["/leaderboard?family=fam&seed=3&judge=J1&format=json",
                                                      "/leaderboard?family=fam&seed=3&judge=J2&format=json"]
    # following the link gives the board with that seed
    board = c.get(choices["options"][0]["url"]).json()
    assert board["rows"] and c.get("/leaderboard?family=fam&seed=3&judge=J1&format=json").json() == board
    r = c.get("/audit?judge=J2&per_page=5")
    assert r.status_code == 200 and "/audit?per_page=5&amp;family=fam&amp;judge=J2" in r.text, r.text
    assert "judge=J1" not in r.text  # the judge given filters the choices
    r = c.get("/calibration?seed=5&format=json")
    assert r.status_code == 200 and r.json()["carried"] == {"seed": ["5"]}, r.text
    r = c.get("/calibration?seed=5")
    assert r.status_code == 200 and "Kept in every calibration" in r.text and "seed=5" in r.text
