"""A distribution imported through `import jsonl|csv` obeys rate's in-scale rule (issue 35
item 7): a rating or verdict given as ok whose distribution puts less than MIN_IN_SCALE (1%) of
its probability on the scale is stored unparsed, as `rate --logprobs` stores it, and counted in
the import's summary with its reason (JSON and text)."""

from __future__ import annotations

import json

import pytest

from judgecal.importers.generic import OFF_SCALE
from judgecal.judge.distribution import MIN_IN_SCALE

BASE = {"task_family": "f", "prompt": "Say something.", "judge": "j", "scale_min": 1, "scale_max": 5}


def _dist(outside: float) -> dict:
    return {"probs": {"1": 0.0, "2": 0.0, "3": 0.25, "4": 0.75, "5": 0.0}, "outside": outside, "source": "top_logprobs",
            "k": 5}


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_threshold_is_rates():
    assert MIN_IN_SCALE == 0.01 and "less than 0.01" in OFF_SCALE


def test_ratings_below_the_threshold_are_stored_unparsed(sqlite_url, tmp_path, run_cli):
    rows = [
        {**BASE, "model": "m1", "response": "one", "score": 4, "raw_output": "[[4]]", "distribution": _dist(0.995)},
        {**BASE, "model": "m2", "response": "two", "score": 3, "distribution": _dist(0.99)},  # 0.01 on the scale: kept
        {**BASE, "model": "m3", "response": "three", "status": "unparsed", "distribution": _dist(0.999)},
        {**BASE, "model": "m4", "response": "four", "score": 5},
        {**BASE, "model": "m5", "response": "five", "score": 2, "error": "note", "distribution": _dist(1.0)},
    ]
    f = _write(tmp_path / "r.jsonl", rows)
    r = run_cli("--database-url", sqlite_url, "import", "jsonl", f, "--kind", "ratings", "--format", "json")
    assert r.exit_code == 0, r.stderr
    res = json.loads(r.stdout)
    assert res["added"]["rating"] == 5
    assert res["stored_unparsed"] == {OFF_SCALE: {"count": 2, "where": [f"{f}:1", f"{f}:5"]}}
    out = tmp_path / "out.jsonl"
    assert run_cli("--database-url", sqlite_url, "export", "ratings", out).exit_code == 0
    got = {x["model"]: x for x in map(json.loads, out.read_text().splitlines())}
    assert [(got[k]["status"], got[k]["score"]) for k in ("m1", "m2", "m3", "m4", "m5")] == [
        ("unparsed", None), ("ok", 3.0), ("unparsed", None), ("ok", 5.0), ("unparsed", None)]
    assert got["m1"]["error"].startswith("only 0.005 of the judge's probability is on a verdict of the scale")
    assert got["m5"]["error"].startswith("note; only 0 of the judge's probability")
    assert got["m1"]["expected_score"] == 3.75 and got["m1"]["distribution"]["outside"] == 0.995  # kept, as rate keeps them
    assert got["m2"]["error"] is None
    # the same file again: nothing added, nothing counted unparsed twice (every row already stored)
    r = run_cli("--database-url", sqlite_url, "import", "jsonl", f, "--kind", "ratings")
    assert r.exit_code == 0 and "rating +0" in r.stdout
    assert f"stored unparsed: 2 records: {OFF_SCALE} (first: {f}:1, {f}:5)" in r.stdout, r.stdout
    # the export imports back unchanged (its rows say unparsed already)
    r = run_cli("--database-url", f"sqlite:///{tmp_path / 'b.db'}", "import", "jsonl", out, "--kind", "ratings",
                "--format", "json")
    assert r.exit_code == 0 and json.loads(r.stdout)["stored_unparsed"] == {}


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_a_verdict_below_the_threshold_is_stored_unparsed(sqlite_url, tmp_path, run_cli, fmt):
    pair = {"task_family": "f", "prompt": "p", "model_a": "m", "response_a": "a", "model_b": "n", "response_b": "b",
            "judge": "pj"}
    rows = [{**pair, "position": "ab", "verdict": "a", "preference": 0.7,
             "distribution": {"probs": {"a": 0.6, "b": 0.2, "tie": 0.2}, "outside": 0.9995, "source": "top_logprobs"}},
            {**pair, "position": "ba", "verdict": "a", "preference": 0.7,
             "distribution": {"probs": {"a": 0.6, "b": 0.2, "tie": 0.2}, "outside": 0.5, "source": "top_logprobs"}}]
    if fmt == "jsonl":
        f = _write(tmp_path / "v.jsonl", rows)
    else:
        cols = list(rows[0])
        f = tmp_path / "v.csv"
        f.write_text(",".join(cols) + "\n" + "".join(
            ",".join('"' + (json.dumps(r[c]) if isinstance(r[c], dict) else str(r[c])).replace('"', '""') + '"'
                     for c in cols) + "\n" for r in rows), encoding="utf-8")
    r = run_cli("--database-url", sqlite_url, "import", fmt, f, "--kind", "verdicts", "--format", "json")
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["stored_unparsed"] == {OFF_SCALE: {"count": 1, "where": [f"{f}:{1 if fmt == 'jsonl' else 2}"]}}
    out = tmp_path / "out.jsonl"
    assert run_cli("--database-url", sqlite_url, "export", "verdicts", out).exit_code == 0
    got = {x["position"]: x for x in map(json.loads, out.read_text().splitlines())}
    assert (got["ab"]["status"], got["ab"]["verdict"], got["ab"]["preference"]) == ("unparsed", None, None)
    assert got["ab"]["error"].startswith("only 0.0005 of the judge's probability")
    assert (got["ba"]["status"], got["ba"]["verdict"], got["ba"]["preference"]) == ("ok", "a", 0.7)
