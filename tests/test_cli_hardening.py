"""Issue 11, CLI side: ``--judge ID`` wherever ``--judge`` is taken (two judges sharing a
name), names escaped in every Markdown output, CSV output neutralised, ``db current`` on a
database migrated by a newer judgecal. SQLite and PostgreSQL."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import create_engine, text

HOSTILE = ['<script>alert(1)</script>', '"><img src=x onerror=alert(1)>', "=HYPERLINK(\"http://x\")"]


def _seed(tmp_path, run_cli, url, judges=(("same", "m1"), ("same", "m2")), models=("a", "b")):
    rows = []
    for name, jmodel in judges:
        for i in range(40):
            for k, mo in enumerate(models):
                rows.append({"task_family": "f", "prompt": f"q{i}", "model": mo, "response": f"{k} " + "x" * (1 + i * (k == 0)),
                             "judge": name, "judge_model": jmodel, "scale_min": 1, "scale_max": 10, "score": 5 + (k == 0)})
    labels = [{"task_family": "f", "prompt": f"q{i}", "model_a": models[0], "response_a": "0 " + "x" * (1 + i),
               "model_b": models[1], "response_b": "1 x", "preference": "b"} for i in range(40)]
    (tmp_path / "r.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "l.jsonl").write_text("".join(json.dumps(r) + "\n" for r in labels))
    assert run_cli("--database-url", url, "import", "jsonl", tmp_path / "r.jsonl", "--kind", "ratings").exit_code == 0
    assert run_cli("--database-url", url, "import", "jsonl", tmp_path / "l.jsonl", "--kind", "labels").exit_code == 0


def test_judge_id_wherever_judge_is_taken(tmp_path, run_cli, db_url):
    _seed(tmp_path, run_cli, db_url)
    eng = create_engine(db_url)
    with eng.connect() as conn:
        first, second = [str(i) for (i,) in conn.execute(text("SELECT id FROM judge ORDER BY id"))]
    eng.dispose()
    base = ("--database-url", db_url)
    res = run_cli(*base, "leaderboard", "--judge", "same")
    assert res.exit_code == 2 and f"pass one of the ids (--judge id:N): {first} (model m1" in res.stderr
    fit = run_cli(*base, "fit", "--task-family", "f", "--judge", second, "--bootstrap", "10", "--folds", "2",
                  "--length-unit", "chars", "--format", "json")
    assert fit.exit_code == 0, fit
    for args in (("leaderboard", "--judge", second, "--format", "json"), ("report", "--judge", second, "--format", "json"),
                 ("check", "--judge", second), ("fit", "--list", "--judge", second),
                 ("export", "leaderboard", str(tmp_path / "lb.jsonl"), "--judge", second)):
        res = run_cli(*base, *args)
        assert res.exit_code in (0, 1) and "ambiguous" not in res.output and "error" not in res.stderr.lower(), (args, res)
    board = json.loads(run_cli(*base, "leaderboard", "--judge", second, "--format", "json").stdout)
    assert list(board["calibrations"]) == ["f"]  # the second judge's fit, found by id although the name is shared
    assert run_cli(*base, "leaderboard", "--judge", first, "--format", "json").exit_code == 0


def test_names_escaped_in_markdown_and_neutralised_in_csv(tmp_path, run_cli, db_url):
    _seed(tmp_path, run_cli, db_url, judges=(("<b>judge</b>", "m1"),), models=HOSTILE[:2])
    res = run_cli("--database-url", db_url, "leaderboard", "--format", "markdown")
    assert res.exit_code == 0, res
    out = res.stdout
    assert "<script>" not in out and "<img" not in out and "<b>" not in out
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in out and "&lt;b&gt;judge&lt;/b&gt;" in out
    csv_out = run_cli("--database-url", db_url, "leaderboard", "--format", "csv").stdout
    assert csv_out.splitlines()[0].startswith("model,")


def test_leaderboard_csv_neutralises_formula_names(tmp_path, run_cli):
    url = f"sqlite:///{tmp_path / 'x.db'}"
    _seed(tmp_path, run_cli, url, judges=(("j", "m1"),), models=("=cmd()", "+b"))
    res = run_cli("--database-url", url, "leaderboard", "--format", "csv")
    assert res.exit_code == 0, res
    names = [line.split(",")[0] for line in res.stdout.splitlines()[1:]]
    assert sorted(names) == ["'+b", "'=cmd()"]


def test_db_current_on_an_unknown_newer_revision(tmp_path, run_cli, db_url):
    assert run_cli("--database-url", db_url, "db", "upgrade").exit_code == 0
    eng = create_engine(db_url)
    with eng.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = '9999_future'"))
    eng.dispose()
    res = run_cli("--database-url", db_url, "db", "current")
    assert res.exit_code == 0 and "at revision 9999_future, which this judgecal does not know" in res.stdout
    assert "behind" not in res.stdout and "newer judgecal" in res.stdout
    for args in (("db", "upgrade"), ("db", "downgrade", "base")):
        res = run_cli("--database-url", db_url, *args)
        assert res.exit_code == 2 and "does not know" in res.stderr and "\n" not in res.stderr.strip(), res
