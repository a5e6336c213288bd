"""Auto-J and JudgeBench importers: names over the column size refused alike on SQLite and
PostgreSQL, conflicting duplicates refused, identical responses and repeats counted."""

from __future__ import annotations

import json

import pytest


def _autoj(tmp_path, rows):
    f = tmp_path / "autoj.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return f


def _row(label=0, scenario="writing", r1="first answer", r2="second answer", prompt="Write a haiku."):
    return {"prompt": prompt, "response 1": r1, "response 2": r2, "label": label, "scenario": scenario}


def test_autoj_long_family_refused_on_both_dialects(db_url, tmp_path, run_cli):
    assert run_cli("--database-url", db_url, "db", "upgrade").exit_code == 0
    f = _autoj(tmp_path, [_row(), _row(scenario="s" * 200, prompt="Other")])
    r = run_cli("--database-url", db_url, "import", "autoj", str(f))
    assert r.exit_code != 0 and f"{f}:2" in r.stderr and "200" in r.stderr and "Traceback" not in r.output
    assert run_cli("--database-url", db_url, "stats", "--format", "json").stdout.strip() == "[]"


def test_autoj_conflicting_duplicate_identical_responses_and_repeats(db_url, tmp_path, run_cli):
    assert run_cli("--database-url", db_url, "db", "upgrade").exit_code == 0
    f = _autoj(tmp_path, [_row(0), _row(1)])
    r = run_cli("--database-url", db_url, "import", "autoj", str(f))
    assert r.exit_code != 0 and f"{f}:2" in r.stderr and "line 1" in r.stderr
    f = _autoj(tmp_path, [_row(0), _row(0), _row(2, r1="same", r2="same", prompt="P2")])
    r = run_cli("--database-url", db_url, "import", "autoj", str(f), "--format", "json")
    assert r.exit_code == 0, r
    out = json.loads(r.stdout)
    assert out["added"]["expert_label"] == 1
    assert out["skipped"]["the same labelled pair repeated in the file (first kept)"]["count"] == 1
    assert out["skipped"]["the two responses are identical (no preference to learn from)"]["count"] == 1


def test_judgebench_long_model_name_refused(db_url, tmp_path, run_cli):
    assert run_cli("--database-url", db_url, "db", "upgrade").exit_code == 0
    rec = {"pair_id": "p1", "question": "q", "response_model": "m" * 201, "response_A": "a", "response_B": "b", "label": "A>B"}
    f = tmp_path / "jb.jsonl"
    f.write_text(json.dumps(rec) + "\n")
    r = run_cli("--database-url", db_url, "import", "judgebench", str(f))
    assert r.exit_code != 0 and f"{f}:1" in r.stderr and "response_model" in r.stderr and "Traceback" not in r.output


@pytest.mark.parametrize("kind", ["autoj", "judgebench"])
def test_long_task_family_option_refused(sqlite_url, tmp_path, run_cli, kind):
    assert run_cli("--database-url", sqlite_url, "db", "upgrade").exit_code == 0
    f = _autoj(tmp_path, [_row()])
    r = run_cli("--database-url", sqlite_url, "import", kind, str(f), "--task-family", "x" * 201)
    assert r.exit_code == 2 and "--task-family" in r.stderr and "Traceback" not in r.output


def test_winrate_csv_options_refuse_devices(sqlite_url, run_cli):
    for opt in (["--lc-weights", "/dev/zero"], ["--compare-to", "/dev/zero"]):
        r = run_cli("--database-url", sqlite_url, "leaderboard", "--baseline", "b", *opt)
        assert r.exit_code != 0 and "/dev/zero" in r.stderr and "regular file" in r.stderr, r
