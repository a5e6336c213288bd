"""Alembic environment for judgecal: one tree for SQLite (batch mode) and PostgreSQL.

judgecal builds the Alembic Config in code (judgecal/db/migrate.py) and passes the engine in
``config.attributes["engine"]``; there is no alembic.ini.

Every run (``db upgrade``, ``db downgrade``) is ONE transaction on both dialects: interrupted
(Ctrl-C, SIGTERM, a crash, a full disk) it changes nothing. PostgreSQL's DDL is transactional
as it comes; Python's sqlite3 module, left to itself, runs a DDL statement that comes before
any INSERT/UPDATE/DELETE outside a transaction (CREATE TABLE, DROP TABLE, batch mode's
``_alembic_tmp_`` tables), so an interrupted SQLite migration used to keep what it had dropped
or created while its revision stayed behind (a downgrade from 0005 interrupted mid-way: the
imported_file table gone, the database still at 0005). Here the sqlite3 connection is put in
autocommit mode and the transaction is opened with an explicit BEGIN, which SQLite honours for
DDL too.

Interrupts: the caller may pass ``config.attributes["before_commit"]``, a callable run once
every step has run and before the transaction commits (:mod:`judgecal.views.dbadmin` starts
holding SIGINT and SIGTERM there, so that a signal during or after the commit cannot make a
committed migration look interrupted)."""

from alembic import context

from judgecal.db.models import Base

config = context.config
target_metadata = Base.metadata


def _begin_sqlite(connection) -> None:
    """Open the SQLite transaction now, explicitly, so that DDL runs inside it."""
    dbapi = connection.connection.driver_connection
    saved = dbapi.isolation_level
    dbapi.isolation_level = None  # no transaction is open yet: this commits nothing
    try:
        connection.exec_driver_sql("BEGIN")
    finally:
        dbapi.isolation_level = saved  # sqlite3 opens no other transaction while this one is open


def run_migrations_online() -> None:
    engine = config.attributes["engine"]
    with engine.begin() as connection:  # commit at the end, rollback on any exception or interrupt
        sqlite = connection.dialect.name == "sqlite"
        if sqlite:
            _begin_sqlite(connection)
        context.configure(  # inside the transaction: alembic opens and commits none of its own
            connection=connection,
            target_metadata=target_metadata,
            render_as_batch=sqlite,
            compare_type=True,
            transactional_ddl=True,
        )
        context.run_migrations()
        before_commit = config.attributes.get("before_commit")
        if before_commit is not None:
            before_commit()


if context.is_offline_mode():  # pragma: no cover
    raise SystemExit("judgecal migrations run online only: use `judgecal db upgrade`")
run_migrations_online()
