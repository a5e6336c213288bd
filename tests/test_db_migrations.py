"""Migrations on both dialects: empty -> head, head -> base -> head, models == migrations, one head."""

from __future__ import annotations

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import inspect

from judgecal.db import engine as eng
from judgecal.db import migrate
from judgecal.db.models import Base
from judgecal.errors import SchemaBehindError


def test_one_head():
    heads = ScriptDirectory.from_config(migrate.alembic_config()).get_heads()
    assert len(heads) == 1


def test_upgrade_downgrade_and_no_diff(db_url):
    engine = eng.create(db_url)
    try:
        migrate.upgrade(engine, "head")
        tables = set(inspect(engine).get_table_names())
        assert set(Base.metadata.tables) <= tables
        with engine.connect() as conn:
            diff = compare_metadata(MigrationContext.configure(conn, opts={"compare_type": True}), Base.metadata)
        assert diff == []
        migrate.downgrade(engine, "base")
        assert set(inspect(engine).get_table_names()) - {"alembic_version"} == set()
        migrate.upgrade(engine, "head")
        assert migrate.current(engine)[0] == migrate.head_revision()
    finally:
        engine.dispose()


def test_new_database_is_created_on_first_use(home):
    engine = eng.get_engine()
    assert str(engine.url).endswith("judgecal.db")
    assert (home / "judgecal.db").exists()
    assert migrate.current(engine)[0] == migrate.head_revision()


def test_behind_database_is_refused(sqlite_url, monkeypatch, run_cli):
    engine = eng.create(sqlite_url)
    migrate.upgrade(engine, "head")
    monkeypatch.setattr(migrate, "head_revision", lambda: "9999_future")
    with pytest.raises(SchemaBehindError, match="judgecal db upgrade"):
        eng.get_engine(sqlite_url)
    result = run_cli("--database-url", sqlite_url, "stats")
    assert result.exit_code == 2
    assert "judgecal db upgrade" in result.stderr
    assert "Traceback" not in result.output


def test_db_commands_through_cli(db_url, run_cli):
    r = run_cli("--database-url", db_url, "db", "upgrade")
    assert r.exit_code == 0, r
    head = migrate.head_revision()
    assert f"at revision {head}" in r.stdout
    r = run_cli("--database-url", db_url, "db", "downgrade", "base")
    assert r.exit_code == 0 and "at revision base" in r.stdout, r
    r = run_cli("--database-url", db_url, "db", "current")
    assert "behind" in r.stdout
    r = run_cli("--database-url", db_url, "db", "upgrade")
    assert r.exit_code == 0
    r = run_cli("--database-url", db_url, "db", "downgrade", "nonsense")
    assert r.exit_code == 2 and "nonsense" in r.stderr and "Traceback" not in r.output


def test_password_is_masked(run_cli):
    r = run_cli("--database-url", "postgresql+psycopg://alice:hunter2secret@127.0.0.1:1/nope", "stats")
    assert r.exit_code != 0
    assert "hunter2secret" not in r.output
    assert "***" in r.stderr


def test_password_in_query_is_masked(run_cli):
    r = run_cli("--database-url", "postgresql+psycopg://alice@127.0.0.1:1/db?password=S3cretPW", "stats")
    assert r.exit_code == 2 and "S3cretPW" not in r.output and "password=***" in r.stderr


def test_corrupt_sqlite_file_is_one_line(tmp_path, run_cli):
    f = tmp_path / "x.db"
    f.write_text("this is not a database\n")
    r = run_cli("--database-url", f"sqlite:///{f}", "stats")
    assert r.exit_code == 2 and "file is not a database" in r.stderr and "Traceback" not in r.output


def test_downgraded_database_is_refused_not_silently_migrated(sqlite_url, run_cli):
    assert run_cli("--database-url", sqlite_url, "db", "upgrade").exit_code == 0
    assert run_cli("--database-url", sqlite_url, "db", "downgrade", "base").exit_code == 0
    r = run_cli("--database-url", sqlite_url, "stats")
    assert r.exit_code == 2 and "judgecal db upgrade" in r.stderr
    assert "at revision base" in run_cli("--database-url", sqlite_url, "db", "current").stdout


def test_unknown_revision_and_missing_folder(sqlite_url, tmp_path, run_cli):
    from sqlalchemy import text

    engine = eng.create(sqlite_url)
    migrate.upgrade(engine, "head")
    with engine.begin() as c:
        c.execute(text("UPDATE alembic_version SET version_num = 'ffff_future'"))
    engine.dispose()
    r = run_cli("--database-url", sqlite_url, "stats")
    assert r.exit_code == 2 and "does not know" in r.stderr and "newer judgecal" in r.stderr
    r = run_cli("--database-url", f"sqlite:///{tmp_path / 'no' / 'such' / 'x.db'}", "stats")
    assert r.exit_code == 2 and "does not exist" in r.stderr
    assert not (tmp_path / "no").exists()
