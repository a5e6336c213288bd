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
