"""Issue 23 break-it pass (a helper acting as a new user): each defect it found, on both dialects
where the database is involved."""

from __future__ import annotations

import re

import pytest
from sqlalchemy import event, inspect
from sqlalchemy.engine import Engine

from judgecal.db import engine as eng
from judgecal.db import migrate

from test_migration_roundtrip import _fill, _snapshot


class _InterruptAt:
    """Raise KeyboardInterrupt (as Ctrl-C does) just before the first statement matching ``pattern``."""

    def __init__(self, pattern: str):
        self.pattern, self.fired = re.compile(pattern, re.I), False

    def __call__(self, conn, cursor, statement, params, context, executemany):
        if not self.fired and self.pattern.search(statement):
            self.fired = True
            raise KeyboardInterrupt

    def __enter__(self):
        event.listen(Engine, "before_cursor_execute", self)
        return self

    def __exit__(self, *exc):
        event.remove(Engine, "before_cursor_execute", self)


def _tables(engine) -> set[str]:
    return set(inspect(engine).get_table_names())


@pytest.mark.parametrize("target, at", [
    ("0001", r"DELETE FROM pairwise_judgment"),            # after 0005 dropped imported_file, 0004 dropped columns
    ("0001", r"INSERT INTO _alembic_tmp_pairwise_judgment|ALTER TABLE pairwise_judgment DROP COLUMN baseline_side"),
    ("base", r'DROP TABLE "?response"?'),                  # half the tables dropped
    ("base", r"DELETE FROM alembic_version"),              # every table dropped, the stamp not yet
])
def test_interrupted_downgrade_changes_nothing(db_url, run_cli, target, at):
    """A Ctrl-C in the middle of `db downgrade --yes` rolls the whole run back, on SQLite too (its
    DDL used to run outside the transaction: imported_file dropped while the database stayed at
    0005), and says "interrupted", exit 130, not SQLAlchemy's "Can't reconnect until invalid
    transaction is rolled back"."""
    engine = eng.create(db_url)
    try:
        migrate.upgrade(engine, "head")
        _fill(engine)
        before, tables = _snapshot(engine), _tables(engine)
        with _InterruptAt(at) as hook:
            r = run_cli("--database-url", db_url, "db", "downgrade", target, "--yes")
        assert hook.fired, at
        assert r.exit_code == 130, r
        assert "error" not in r.stderr and "reconnect" not in r.stderr, r
        engine.dispose()
        assert migrate.current(engine)[0] == migrate.head_revision()
        assert _tables(engine) == tables
        assert _snapshot(engine) == before
        # and the same downgrade, not interrupted, then works
        r = run_cli("--database-url", db_url, "db", "downgrade", target, "--yes")
        assert r.exit_code == 0 and f"at revision {target}" in r.stdout, r
        r = run_cli("--database-url", db_url, "db", "upgrade")
        assert r.exit_code == 0, r
    finally:
        engine.dispose()


def test_interrupted_upgrade_changes_nothing(db_url, run_cli):
    """A Ctrl-C during `db upgrade` (0001 -> head) leaves the database at 0001 with 0001's tables:
    no imported_file table created behind the revision's back (a later upgrade then failed with
    'table imported_file already exists')."""
    engine = eng.create(db_url)
    try:
        migrate.upgrade(engine, "0001")
        tables = _tables(engine)
        with _InterruptAt(r"CREATE TABLE imported_file") as hook:
            r = run_cli("--database-url", db_url, "db", "upgrade")
        assert hook.fired and r.exit_code == 130, r
        engine.dispose()
        assert migrate.current(engine)[0] == "0001"
        assert _tables(engine) == tables and "imported_file" not in tables
        r = run_cli("--database-url", db_url, "db", "upgrade")
        assert r.exit_code == 0 and "at revision 0005" in r.stdout, r
    finally:
        engine.dispose()
