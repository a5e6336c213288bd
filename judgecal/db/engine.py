"""Engine creation, session scope, URL masking and the schema-version guard.

Every command except ``judgecal db ...`` goes through :func:`get_engine`, which refuses a
database whose schema is behind this judgecal (one-line message naming ``judgecal db
upgrade``) and creates and migrates a brand-new default SQLite database on first use.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

from sqlalchemy import event, inspect
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import ArgumentError, OperationalError, SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy import create_engine

from judgecal import config
from judgecal.errors import DatabaseError, SchemaBehindError, UsageError


def mask_url(url: str | object) -> str:
    """The URL with any password replaced by ``***`` (safe for messages and logs)."""
    from judgecal.secrets import scrub

    try:
        return scrub(make_url(str(url)).render_as_string(hide_password=True))
    except ArgumentError:
        return "<unparseable database URL>"


def _sqlite_pragmas(dbapi_conn, _record) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA busy_timeout=30000")
    cur.execute("PRAGMA cache_size=-65536")  # 64 MiB page cache: bulk imports touch big indexes
    cur.execute("PRAGMA temp_store=MEMORY")
    cur.close()


def create(url: str | None = None) -> Engine:
    """A SQLAlchemy engine for ``url`` (default :func:`judgecal.config.default_database_url`).

    Raises UsageError for a URL SQLAlchemy cannot parse or whose driver is not installed.
    SQLite files get WAL, foreign keys and a 30 s busy timeout; their folder is created."""
    url = url or config.default_database_url()
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise UsageError(f"database URL {mask_url(url)!r} is not a valid SQLAlchemy URL") from None
    kwargs: dict = {}
    if parsed.get_backend_name() == "sqlite":
        if parsed.database and parsed.database != ":memory:":
            folder = Path(parsed.database).expanduser().parent
            if url == config.default_database_url() and not os.environ.get("JUDGECAL_DATABASE_URL"):
                folder.mkdir(parents=True, exist_ok=True)  # the default database's home
            elif not folder.is_dir():
                raise UsageError(f"database {mask_url(url)}: folder {folder} does not exist")
        kwargs["connect_args"] = {"timeout": 30}
    else:
        kwargs["pool_pre_ping"] = True
    try:
        engine = create_engine(parsed, **kwargs)
    except (ImportError, ArgumentError, SQLAlchemyError) as exc:
        raise UsageError(f"cannot use database {mask_url(url)}: {exc.__class__.__name__}: {exc}") from None
    if parsed.get_backend_name() == "sqlite":
        event.listen(engine, "connect", _sqlite_pragmas)
    return engine


def is_sqlite(engine: Engine) -> bool:
    """True when the engine talks to SQLite."""
    return engine.dialect.name == "sqlite"


def get_engine(url: str | None = None, *, check: bool = True) -> Engine:
    """The engine every workflow command uses.

    A database with no tables at all is migrated to head (first use). A database that is
    behind head raises :class:`SchemaBehindError` naming ``judgecal db upgrade``; an
    unreachable one raises :class:`DatabaseError` with the masked URL."""
    from judgecal.db import migrate

    engine = create(url)
    if not check:
        return engine
    try:
        with engine.connect() as conn:
            tables = set(inspect(conn).get_table_names())
            current = migrate.current_revision(conn)
    except (OperationalError, SQLAlchemyError) as exc:  # unreachable server, a file that is not a database
        raise DatabaseError(f"cannot use {mask_url(engine.url)}: {_first_line(exc)}") from None
    head = migrate.head_revision()
    if current == head:
        return engine
    if current is None and not tables:  # a brand-new, empty database
        migrate.upgrade(engine, "head")
        return engine
    if current is not None and not migrate.is_known(current):
        raise DatabaseError(
            f"database {mask_url(engine.url)} is at revision {current}, which this judgecal does not know "
            f"(written by a newer judgecal? this one's head is {head})"
        )
    raise SchemaBehindError(
        f"database {mask_url(engine.url)} is at revision {current or 'none'}, this judgecal needs {head}: "
        "run `judgecal db upgrade`"
    )


def _first_line(exc: BaseException) -> str:
    text = str(getattr(exc, "orig", None) or exc).strip()
    return text.splitlines()[0] if text else exc.__class__.__name__


@contextlib.contextmanager
def held_interrupts(held: list) -> Iterator[None]:
    """Hold Ctrl-C (SIGINT) while the block runs: a SIGINT that comes meanwhile is appended to
    ``held`` instead of interrupting. Only in the main thread (elsewhere Python delivers no
    signal anyway); the previous handler is restored on exit."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, lambda signum, frame: held.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous if previous is not None else signal.SIG_DFL)


@contextlib.contextmanager
def session_scope(engine: Engine, *, held: list | None = None) -> Iterator[Session]:
    """A session in one transaction: committed on success, rolled back on any exception.

    ``held``: a list; Ctrl-C during the commit is then held (:func:`held_interrupts`) and
    recorded in it rather than raised after a commit that completed (the caller reports the
    work as done, which it is)."""
    factory = sessionmaker(bind=engine, expire_on_commit=False)
    session = factory()
    try:
        yield session
        if held is None:
            session.commit()
        else:
            with held_interrupts(held):
                session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()
