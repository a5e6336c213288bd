"""``judgecal db ...``: upgrade, downgrade, current (no schema-version guard here)."""

from __future__ import annotations

from alembic.util.exc import CommandError

from judgecal.db import engine as eng
from judgecal.db import migrate
from judgecal.errors import DatabaseError, UsageError


def _unknown(url_masked: str, now: str, head: str) -> str:
    return (f"{url_masked}: at revision {now}, which this judgecal does not know (head {head}): the database was "
            "migrated by a newer judgecal; use that version, or upgrade judgecal")


def _run(url: str | None, fn, revision: str) -> str:
    if not revision.strip():  # Alembic ended in a bare AssertionError
        raise UsageError(f"cannot migrate to {revision!r}: name a revision (e.g. head, base, 0003)")
    engine = eng.create(url)
    lost: list = []
    try:
        now, head = migrate.current(engine)
        if now is not None and not migrate.is_known(now):
            raise DatabaseError(_unknown(eng.mask_url(engine.url), now, head))
        lost = fn(engine, revision) or []
        now, head = migrate.current(engine)
    except CommandError as exc:
        raise UsageError(f"cannot migrate to {revision!r}: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - connection errors, with the URL masked
        if isinstance(exc, (UsageError, DatabaseError)):
            raise
        raise DatabaseError(f"{eng.mask_url(engine.url)}: {eng._first_line(exc)}") from None
    finally:
        engine.dispose()
    done = "".join(f"lost: {c.line()}\n" for c in lost)
    return f"{done}{eng.mask_url(engine.url)}: at revision {now or 'base'} (head {head})"


def _upgrade(engine, revision: str) -> None:
    """Upgrade, refusing a ``revision`` below the database's (Alembic does nothing there, and the
    command exited 0: `db upgrade 0001` at 0005, `db upgrade base`), as `db downgrade` refuses
    one above it."""
    with engine.connect() as conn:
        now = migrate.current_revision(conn)
        try:
            below = bool(migrate.downgrade_steps(conn, revision)) if now is not None else False
        except CommandError:  # not reachable downwards: a revision above (or beside) the database's
            below = False
    if below:
        raise UsageError(f"cannot upgrade to {revision!r}: the database is at revision {now}, above it; `db upgrade` "
                         f"never goes down (`judgecal db downgrade {revision}` does, saying first what it would lose)")
    migrate.upgrade(engine, revision)


def upgrade(url: str | None, revision: str = "head") -> str:
    """Upgrade to ``revision``; returns a one-line status. A revision below the database's is
    refused (UsageError)."""
    return _run(url, _upgrade, revision)


def downgrade(url: str | None, revision: str, *, yes: bool = False) -> str:
    """Downgrade to ``revision``; returns a one-line status, after one ``lost: ...`` line per
    kind of row deleted or transformed. Refused (DataLossError, nothing changed) when rows
    would be lost and ``yes`` is not given."""
    return _run(url, lambda engine, rev: migrate.downgrade(engine, rev, yes=yes), revision)


def current(url: str | None) -> str:
    """The database's revision and the head, as one line: up to date, behind (run ``judgecal
    db upgrade``), or at a revision this judgecal does not know (a newer judgecal migrated
    it)."""
    engine = eng.create(url)
    try:
        now, head = migrate.current(engine)
    except Exception as exc:  # noqa: BLE001
        raise DatabaseError(f"{eng.mask_url(engine.url)}: {eng._first_line(exc)}") from None
    finally:
        engine.dispose()
    if now is not None and not migrate.is_known(now):
        return _unknown(eng.mask_url(engine.url), now, head)
    state = "up to date" if now == head else "behind: run `judgecal db upgrade`"
    return f"{eng.mask_url(engine.url)}: at revision {now or 'base'} (head {head}, {state})"
