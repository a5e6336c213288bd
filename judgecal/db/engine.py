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


SQLITE_PAGE_SIZE = 16384  # bytes per page of a SQLite database judgecal creates


def _sqlite_pragmas(dbapi_conn, _record) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA foreign_keys=ON")
    # 16 KiB pages for a new database (a no-op on one that exists: its page size is fixed once
    # written, and in WAL mode): responses of a few KB pack with less slack and fewer overflow
    # pages, and the WAL frames an import writes and checkpoints are fewer (docs/performance.md)
    cur.execute(f"PRAGMA page_size={SQLITE_PAGE_SIZE}")
    cur.execute("PRAGMA journal_mode=WAL")
    _sqlite_read_pragmas(cur)
    cur.close()


def _sqlite_read_only_pragmas(dbapi_conn, _record) -> None:
    """A connection opened ``mode=ro`` (``judgecal serve``): no journal-mode change, which is a
    write and fails there."""
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA foreign_keys=ON")
    _sqlite_read_pragmas(cur)
    cur.close()


def _sqlite_read_pragmas(cur) -> None:
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA busy_timeout=30000")
    cur.execute("PRAGMA cache_size=-65536")  # 64 MiB page cache: bulk imports touch big indexes
    cur.execute("PRAGMA temp_store=MEMORY")


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
        path = sqlite_path(parsed)
        if path and path != ":memory:":
            folder = Path(path).expanduser().parent
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
        event.listen(engine, "connect", _sqlite_read_only_pragmas if _sqlite_read_only(parsed) else _sqlite_pragmas)
    return engine


def _sqlite_uri(parsed) -> bool:
    return str(parsed.query.get("uri", "")).lower() in ("true", "1") and (parsed.database or "").startswith("file:")


def _sqlite_read_only(parsed) -> bool:
    return _sqlite_uri(parsed) and parsed.query.get("mode") == "ro"


def sqlite_path(parsed) -> str | None:
    """The file path of a parsed SQLite URL: its database, or for a URI filename
    (``sqlite:///file:PATH?mode=ro&uri=true``) the PATH in it, percent-decoded."""
    from urllib.parse import unquote

    if not _sqlite_uri(parsed):
        return parsed.database
    return unquote(parsed.database[len("file:"):].split("?", 1)[0])


#: PostgreSQL: every transaction of a read-only connection is READ ONLY (a write fails)
PG_READ_ONLY_OPTION = "-c default_transaction_read_only=on"


def session_read_only(session: Session) -> bool:
    """True when ``session``'s database refuses writes as opened: SQLite opened ``mode=ro``
    (:func:`read_only_url`), PostgreSQL whose transaction is READ ONLY (``SHOW
    transaction_read_only``: the option of :func:`read_only_url`, or a role's or database's
    default). For a view that would write (token lengths not stored yet) to refuse with the
    command to run instead of failing on the driver's error."""
    bind = session.get_bind()
    name = bind.dialect.name
    if name == "sqlite":
        return _sqlite_read_only(bind.url)
    if name == "postgresql":
        from sqlalchemy import text

        return str(session.execute(text("SHOW transaction_read_only")).scalar()).lower() == "on"
    return False


def read_only_url(url: str | None = None) -> str:
    """The URL of the same database opened read-only at the database level (``judgecal
    serve``): SQLite as the URI filename ``file:PATH?mode=ro`` (PATH absolute; the file must
    exist), PostgreSQL with ``default_transaction_read_only=on`` in the connection options.
    Other backends, an in-memory SQLite database or a missing file: UsageError."""
    from urllib.parse import quote

    url = url or config.default_database_url()
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise UsageError(f"database URL {mask_url(url)!r} is not a valid SQLAlchemy URL") from None
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        path = sqlite_path(parsed)
        if not path or path == ":memory:":
            raise UsageError("an in-memory SQLite database holds nothing to serve: give the database file's URL")
        file = Path(path).expanduser().resolve()
        if not file.is_file():
            raise UsageError(f"database {mask_url(url)}: no database file at {file}")
        query = {k: v for k, v in parsed.query.items() if k not in ("mode", "uri")}
        query.update(mode="ro", uri="true")
        return parsed.set(database="file:" + quote(str(file)), query=query).render_as_string(hide_password=False)
    if backend == "postgresql":
        options = parsed.query.get("options")
        options = options if isinstance(options, str) else " ".join(options or ())
        if PG_READ_ONLY_OPTION not in options:
            options = f"{options} {PG_READ_ONLY_OPTION}".strip()
        return parsed.update_query_dict({"options": options}).render_as_string(hide_password=False)
    raise UsageError(f"database {mask_url(url)}: read-only access is implemented for SQLite and PostgreSQL, "
                     f"not {backend}")


def is_sqlite(engine: Engine) -> bool:
    """True when the engine talks to SQLite."""
    return engine.dialect.name == "sqlite"


#: engines kept for a process's lifetime (:func:`pin_engine`): url -> [engine, number of pins]
_PINNED: dict[str, list] = {}
# re-entrant: the app's finalizer (weakref.finalize -> unpin_engine) can run inside pin_engine or
# unpin_engine itself, when the cyclic garbage collector collects an old app while they allocate;
# a plain Lock then deadlocked the thread on itself (seen as a hung test under load)
_PIN_LOCK = threading.RLock()


def pin_engine(url: str) -> Engine:
    """One checked engine for ``url`` kept until :func:`unpin_engine`: while pinned,
    :func:`get_engine` with this exact URL returns it at once (no new connection pool, no
    schema check, SQLAlchemy's statement cache kept). ``judgecal serve`` pins its read-only URL
    for the app's lifetime: each page calls several view functions, and each made and checked
    its own engine (20-65 ms on PostgreSQL). Pins are counted: two apps on one URL share it.
    Raises what :func:`get_engine` raises."""
    with _PIN_LOCK:
        pinned = _PINNED.get(url)
        if pinned is None:
            pinned = _PINNED[url] = [get_engine(url), 0]
        pinned[1] += 1
        return pinned[0]


def unpin_engine(url: str) -> None:
    """Drop one pin of ``url`` (:func:`pin_engine`); the last one disposes of the engine."""
    with _PIN_LOCK:
        pinned = _PINNED.get(url)
        if pinned is None:
            return
        pinned[1] -= 1
        if pinned[1] <= 0:
            del _PINNED[url]
            pinned[0].dispose()


def data_version(engine: Engine) -> tuple:
    """A value that changes when a transaction that wrote to this database commits
    (``judgecal serve`` keys its page cache on it; equal values mean the same data).

    PostgreSQL: the database's tuples inserted, updated and deleted (``pg_stat_database``:
    every table, the catalogs included, so DDL counts too; reads leave them alone; another
    database of the same server does not move them). PostgreSQL publishes these counters
    when the writing session goes idle, at most once a second per session: a commit shows
    within about a second (up to 10 s under lock contention on the statistics), and a page may
    lag a write by that much. With ``track_counts`` off (the counters stay 0) the whole
    server's ``pg_current_snapshot()`` is used instead, which moves with every write
    transaction of any database (a cache miss, never a stale page). SQLite: size and
    modification time (ns) of the database file and its ``-wal`` and ``-journal`` files (an
    empty or missing WAL or journal reads the same: a reader may create an empty ``-wal``): a
    commit appends to the WAL (or rewrites the file), a checkpoint rewrites the file. Other
    dialects: a fresh object each call (nothing cached). Raises SQLAlchemy's errors when the
    server cannot be reached."""
    from sqlalchemy import text

    if engine.dialect.name == "postgresql":
        with engine.connect() as conn:
            row = conn.execute(text(
                "SELECT tup_inserted, tup_updated, tup_deleted, current_setting('track_counts') FROM pg_stat_database "
                "WHERE datname = current_database()")).one()
            if row[3] == "on":
                return ("pg", int(row[0]), int(row[1]), int(row[2]))
            return ("pg-snapshot", conn.execute(text("SELECT pg_current_snapshot()::text")).scalar_one())
    if engine.dialect.name == "sqlite":
        path = sqlite_path(engine.url)
        if not path or path == ":memory:":
            return (object(),)
        out: list = ["sqlite"]
        for suffix in ("", "-wal", "-journal"):
            try:
                st = os.stat(path + suffix)
            except FileNotFoundError:
                st = None
            if suffix and (st is None or st.st_size == 0):  # an empty WAL or journal holds no data: as if absent
                out.append((suffix, 0))  # (a reader may create an empty -wal: that is no change)
            else:
                out.append((suffix, st.st_size, st.st_mtime_ns) if st is not None else (suffix, None))
        return tuple(out)
    return (object(),)


def get_engine(url: str | None = None, *, check: bool = True) -> Engine:
    """The engine every workflow command uses.

    A database with no tables at all is migrated to head (first use). A database that is
    behind head raises :class:`SchemaBehindError` naming ``judgecal db upgrade``; an
    unreachable one raises :class:`DatabaseError` with the masked URL. A URL pinned with
    :func:`pin_engine` gets its pinned engine (checked when it was pinned)."""
    from judgecal.db import migrate

    if url is not None and url in _PINNED:
        return _PINNED[url][0]
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


class SignalHold:
    """Holds Ctrl-C (SIGINT) and SIGTERM from :meth:`start` until :meth:`close` (or the end of
    its ``with`` block): a signal that comes meanwhile is recorded in ``held`` (its name,
    'SIGINT' or 'SIGTERM') instead of interrupting or ending the process. For work that must
    not be reported as interrupted once its commit has begun (a migration: :mod:`judgecal.views.dbadmin`):
    the commit completes, the outcome is reported, and the caller says that the signal came
    late. :meth:`start` is idempotent; only the main thread installs handlers (elsewhere Python
    delivers no signal anyway). The previous handlers are restored on close."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self) -> None:
        self.held: list[str] = []
        self._previous: dict[int, object] = {}
        self.started = False

    def _on_signal(self, signum, frame) -> None:
        self.held.append(signal.Signals(signum).name)

    def start(self) -> None:
        """Hold the signals from now on (nothing when already started or not in the main thread)."""
        if self.started:
            return
        self.started = True
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in self.SIGNALS:
            self._previous[sig] = signal.signal(sig, self._on_signal)

    def close(self) -> None:
        """Put the handlers found at :meth:`start` back (signals held stay in ``held``)."""
        previous, self._previous = self._previous, {}
        for sig, handler in previous.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)

    def __enter__(self) -> "SignalHold":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


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
