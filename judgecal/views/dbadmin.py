"""``judgecal db ...``: upgrade, downgrade, current (no schema-version guard here)."""

from __future__ import annotations

from alembic.util.exc import CommandError

from judgecal.db import engine as eng
from judgecal.db import migrate
from judgecal.errors import DatabaseError, Interrupted, UsageError, raised_by_interrupt


def _unknown(url_masked: str, now: str, head: str) -> str:
    return (f"{url_masked}: at revision {now}, which this judgecal does not know (head {head}): the database was "
            "migrated by a newer judgecal; use that version, or upgrade judgecal")


commits = 0
"""Migrations (``db upgrade`` / ``db downgrade``) this process has committed. Counted inside
the signal hold (:class:`judgecal.db.engine.SignalHold`: from just before the commit until the
caller has reported the outcome), so that :func:`judgecal.cli.main` treats a Ctrl-C that comes
after the hold as one that came after the commit (a warning, exit 0), as it does for imports."""


_UNREAD = object()  # the revision before the migration, not read yet


def _interrupted_message(engine, start) -> str:
    """What an interrupt before the commit left: the migration rolled back, the revision read
    again (``start``: the revision read before the migration, or :data:`_UNREAD`)."""
    masked = eng.mask_url(engine.url)
    try:
        engine.dispose()  # the interrupted connection goes: its transaction is rolled back (PostgreSQL: closed)
        now, head = migrate.current(engine)
    except Exception:  # noqa: BLE001 - the database cannot be read now: say what is known
        was = "" if start is _UNREAD else f" ({masked} was at revision {start or 'base'})"
        return (f"interrupted before the commit: the migration was rolled back, nothing changed{was}; the revision "
                "could not be read again just now: `judgecal db current` shows it")
    if start is not _UNREAD and now != start:  # (never expected: the hold starts before the commit) the state as it is, not as assumed
        return f"interrupted: {masked}: at revision {now or 'base'} (head {head}; it was at {start or 'base'})"
    return (f"interrupted before the commit: the migration was rolled back, nothing changed; {masked}: at revision "
            f"{now or 'base'} (head {head})")


def _run(url: str | None, fn, revision: str, hold: eng.SignalHold | None = None) -> str:
    """Run the migration ``fn(engine, revision, before_commit)``; the one-line status after the
    ``lost:`` lines. Interrupts: SIGINT and SIGTERM are held from just before the commit
    (``before_commit`` starts ``hold``) to the end of this function, or, when the caller gives
    ``hold``, until the caller closes it (after printing the outcome): a signal then cannot
    make a committed migration look interrupted, and the caller says it came late
    (:func:`held_note`). A Ctrl-C before the commit rolls the migration back: :class:`Interrupted`
    naming the revision the database is still at (read again)."""
    global commits
    if not revision.strip():  # Alembic ended in a bare AssertionError
        raise UsageError(f"cannot migrate to {revision!r}: name a revision (e.g. head, base, 0003)")
    own = hold is None
    if own:
        hold = eng.SignalHold()
    engine = eng.create(url)
    lost: list = []
    start = _UNREAD
    stopped = False
    try:
        try:
            now, head = migrate.current(engine)
            start = now
            if now is not None and not migrate.is_known(now):
                raise DatabaseError(_unknown(eng.mask_url(engine.url), now, head))
            lost = fn(engine, revision, hold.start) or []
            commits += 1  # committed (migrations/env.py started the hold just before the commit)
            hold.start()  # (already started: the rest, reading the revision and closing the engine, is held too)
            now, head = migrate.current(engine)
        except CommandError as exc:
            raise UsageError(f"cannot migrate to {revision!r}: {exc}") from None
        except KeyboardInterrupt:
            stopped = True
        except Exception as exc:  # noqa: BLE001 - connection errors, with the URL masked
            if isinstance(exc, (UsageError, DatabaseError)):
                raise
            if raised_by_interrupt(exc) and not hold.started:  # the driver failed while the Ctrl-C unwound
                stopped = True
            else:
                raise DatabaseError(f"{eng.mask_url(engine.url)}: {eng._first_line(exc)}") from None
        if stopped:  # before the commit (the hold was not started): rolled back
            hold.start()  # a second Ctrl-C while the revision is read again is held too
            message = _interrupted_message(engine, start)
    finally:
        engine.dispose()
        if own:
            hold.close()
    if stopped:
        raise Interrupted(message)
    done = "".join(f"lost: {c.line()}\n" for c in lost)
    return f"{done}{eng.mask_url(engine.url)}: at revision {now or 'base'} (head {head})"


def held_note(hold: eng.SignalHold) -> str | None:
    """The warning for signals ``hold`` held during a migration's commit (None when none came):
    the migration completed, the outcome printed is the database's."""
    if not hold.held:
        return None
    names = " and ".join(dict.fromkeys(hold.held))
    return (f"{names} came while the migration was being committed: the commit had begun and completed, so the "
            f"database is at the revision printed (and lost what the lost: lines say); the signal changed nothing")


def _upgrade(engine, revision: str, before_commit=None) -> None:
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
    migrate.upgrade(engine, revision, before_commit=before_commit)


def upgrade(url: str | None, revision: str = "head", *, hold: eng.SignalHold | None = None) -> str:
    """Upgrade to ``revision``; returns a one-line status. A revision below the database's is
    refused (UsageError). ``hold``: see :func:`_run` (Ctrl-C before the commit: Interrupted)."""
    return _run(url, _upgrade, revision, hold)


def downgrade(url: str | None, revision: str, *, yes: bool = False, hold: eng.SignalHold | None = None) -> str:
    """Downgrade to ``revision``; returns a one-line status, after one ``lost: ...`` line per
    kind of row deleted or transformed. Refused (DataLossError, nothing changed) when rows
    would be lost and ``yes`` is not given. ``hold``: see :func:`_run`."""
    return _run(url, lambda engine, rev, before_commit: migrate.downgrade(engine, rev, yes=yes,
                                                                         before_commit=before_commit), revision, hold)


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
