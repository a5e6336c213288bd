"""Small database helpers shared by the tests."""

from __future__ import annotations

from sqlalchemy import text

from judgecal.db import engine as eng


def count_rows(db_url: str, table: str) -> int:
    """``SELECT count(*)`` of ``table`` in the database at ``db_url`` (a fresh engine, disposed)."""
    engine = eng.create(db_url)
    try:
        with engine.connect() as conn:
            return conn.execute(text(f"SELECT count(*) FROM {table}")).scalar_one()
    finally:
        engine.dispose()


def import_ratings(url: str, folder, family: str, judge: str, n: int, *, model: str = "model-x",
                   raw_output: bool = False) -> None:
    """Import ``n`` ratings by ``judge`` of ``model``'s answers to n questions of ``family``
    (generic JSONL through judgecal.views.importing): scores 1-10 cycling, or, with
    ``raw_output``, the judge's text ``Rating: [[s]]`` for judgecal to parse."""
    import json

    from judgecal.views import importing

    recs = [{"prompt": f"Question {i}?", "model": model, "response": f"Answer {i} " + "word " * i,
             "judge": judge, "scale_min": 1, "scale_max": 10}
            | ({"raw_output": f"Rating: [[{1 + i % 10}]]"} if raw_output else {"score": 1 + i % 10}) for i in range(n)]
    path = folder / f"{judge}-{model}.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in recs), encoding="utf-8")
    importing.import_generic(path, "ratings", "jsonl", family, url)
