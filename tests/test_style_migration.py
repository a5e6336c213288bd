"""Migration 0007 (response style counts) on SQLite and PostgreSQL: the backfill of stored answers,
up/down/up keeping 0006's generation triggers, and the counts written for answers imported
later (the bulk writer) and inserted through the ORM (the column defaults)."""

from __future__ import annotations

import json

from sqlalchemy import inspect, text
from sqlalchemy.orm import Session

from judgecal.calibrate.style import COLUMNS, style_counts
from judgecal.db import engine as eng
from judgecal.db import migrate
from judgecal.db import models as m
from judgecal.views import importing

TEXTS = ["# Title\n\n1. one\n2. two\n\n- **bold** item\n```\n# not counted\n```",
         "plain", "## h2\r\n* a\r\n* b\r\n__x__ and **y**", "```python\n- no\n```\n#hashtag"]


def _counts(c) -> dict[str, tuple]:
    cols = ", ".join(COLUMNS)
    return {t: tuple(rest) for t, *rest in c.execute(text(f"SELECT text, {cols} FROM response ORDER BY id"))}


def _triggers(c, dialect: str) -> int:
    if dialect == "sqlite":
        return c.execute(text("SELECT COUNT(*) FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'response'")).scalar()
    return c.execute(text("SELECT COUNT(*) FROM pg_trigger WHERE tgrelid = 'response'::regclass AND NOT tgisinternal")).scalar()


def test_backfill_up_down_up_and_new_rows(db_url, tmp_path):
    e = eng.create(db_url)
    try:
        migrate.upgrade(e, "0006")
        with e.begin() as c:
            c.execute(text("INSERT INTO task_family (id, name, created_at) VALUES (1, 'f', CURRENT_TIMESTAMP)"))
            c.execute(text("INSERT INTO item (id, task_family_id, prompt, prompt_sha256, created_at) "
                           "VALUES (1, 1, 'q', 'h', CURRENT_TIMESTAMP)"))
            for rid, t in enumerate(TEXTS, start=1):
                c.execute(text("INSERT INTO response (id, item_id, model, text, text_sha256, n_bytes, n_chars, n_words, "
                               "created_at) VALUES (:id, 1, :m, :t, :h, 1, 1, 1, CURRENT_TIMESTAMP)"),
                          {"id": rid, "m": f"m{rid}", "t": t, "h": f"h{rid}"})
            triggers = _triggers(c, e.dialect.name)
        assert triggers > 0
        migrate.upgrade(e, "head")
        with e.begin() as c:
            got = _counts(c)
        assert got == {t: tuple(style_counts(t)) for t in TEXTS}
        assert got[TEXTS[0]] == (1, 2, 1, 1) and got[TEXTS[2]] == (1, 0, 2, 2) and got[TEXTS[3]] == (0, 0, 0, 0)
        lost = migrate.downgrade(e, "0006")  # nothing lost: no --yes needed
        assert not lost
        with e.begin() as c:
            assert not {col["name"] for col in inspect(c).get_columns("response")} & set(COLUMNS)
            assert _triggers(c, e.dialect.name) == triggers  # 0006's triggers survive the downgrade
        migrate.upgrade(e, "head")
        with e.begin() as c:
            assert _counts(c) == got
            assert _triggers(c, e.dialect.name) == triggers + 1  # and 0008's (a changed model re-keys its ratings)
        # an ORM insert gets its counts from the column defaults
        with Session(e) as s, s.begin():
            s.add(m.Response(id=100, item_id=1, model="orm", text="- a\n- b\n**c**", text_sha256="o", n_bytes=1, n_chars=1,
                             n_words=1))
        with e.begin() as c:
            row = c.execute(text("SELECT " + ", ".join(COLUMNS) + " FROM response WHERE model = 'orm'")).one()
        assert tuple(row) == (0, 0, 2, 1)
    finally:
        e.dispose()
    # an import writes them (the bulk writer), the same as the definition
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps({"prompt": f"p{i}", "model": "x", "response": t, "task_family": "g"}) + "\n"
                            for i, t in enumerate(TEXTS)), encoding="utf-8")
    importing.import_generic(path, "responses", "jsonl", None, db_url)
    e = eng.create(db_url)
    try:
        with e.begin() as c:
            cols = ", ".join(COLUMNS)
            rows = c.execute(text(f"SELECT r.text, {cols} FROM response r JOIN item i ON i.id = r.item_id "
                                  "JOIN task_family f ON f.id = i.task_family_id WHERE f.name = 'g'")).all()
        assert {t: tuple(rest) for t, *rest in rows} == {t: tuple(style_counts(t)) for t in TEXTS}
    finally:
        e.dispose()


def test_stats_shows_style_per_model(db_url, tmp_path, run_cli):
    answers = {"x": ["# H\n- a\n- b", "**b** __c__", "plain"], "y": ["1. a\n2. b\n3. c"]}
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps({"prompt": f"p{i}", "model": mo, "response": t, "task_family": "fam"}) + "\n"
                            for mo, ts in answers.items() for i, t in enumerate(ts)), encoding="utf-8")
    importing.import_generic(path, "responses", "jsonl", None, db_url)
    assert run_cli("--database-url", db_url, "lengths", "--tokenizer", "words").exit_code == 0
    r = run_cli("--database-url", db_url, "stats", "--format", "json")
    assert r.exit_code == 0, r
    style = {row["model"]: row for row in json.loads(r.stdout)[0]["answer_style"]}
    fx = style["x"]["features"]
    assert style["x"]["answers"] == 3 and style["y"]["answers"] == 1
    assert fx["md_headers"] == {"mean": 1 / 3, "median": 0.0, "n": 3}
    assert fx["md_list_unordered"]["mean"] == 2 / 3 and fx["md_bold"] == {"mean": 2 / 3, "median": 0.0, "n": 3}
    assert fx["n_words"]["median"] == 2.0 and fx["tokens[words]"]["median"] == 2.0  # 6, 2 and 1 words
    assert style["y"]["features"]["md_list_ordered"] == {"mean": 3.0, "median": 3.0, "n": 1}
    r = run_cli("--database-url", db_url, "stats")
    assert r.exit_code == 0 and "answer style per model" in r.stdout and "0.3 / 0" in r.stdout, r


def test_judge_page_shows_style_per_model(sqlite_url, tmp_path, run_cli):
    from starlette.testclient import TestClient

    from judgecal.web import create_app

    recs = [{"prompt": f"p{i}", "model_a": "md", "response_a": f"# Head {i}\n- a\n- b\n**x**", "model_b": "plain",
             "response_b": f"plain answer {i}", "judge": "J", "preference": 0.9, "task_family": "fam"} for i in range(3)]
    path = tmp_path / "v.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in recs), encoding="utf-8")
    importing.import_generic(path, "verdicts", "jsonl", None, sqlite_url)
    r = run_cli("--database-url", sqlite_url, "judge", "J", "--bootstrap", "0", "--format", "json")
    assert r.exit_code == 0, r
    style = {x["model"]: x for x in json.loads(r.stdout)["families"][0]["answer_style"]}
    assert style["md"]["features"]["md_headers"] == {"mean": 1.0, "median": 1.0, "n": 3}
    assert style["md"]["features"]["md_list_unordered"]["median"] == 2.0
    assert style["plain"]["features"]["md_bold"] == {"mean": 0.0, "median": 0.0, "n": 3}
    r = run_cli("--database-url", sqlite_url, "judge", "J", "--bootstrap", "0")
    assert r.exit_code == 0 and "answer style per model" in r.stdout, r
    page = TestClient(create_app(sqlite_url)).get("/judge", params={"judge": "J", "bootstrap": "0"})
    assert page.status_code == 200 and "Answer style per model" in page.text
    row = page.text.split('<td class="name">md</td>', 1)[1].split("</tr>", 1)[0]
    assert "<td class=\"num\">1.0 / 1.0</td>" in row and "2.0 / 2.0" in row
