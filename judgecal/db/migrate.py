"""Alembic, configured in code from the packaged ``migrations/`` folder (works from a wheel)."""

from __future__ import annotations

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.engine import Connection, Engine

from judgecal import config


def alembic_config(engine: Engine | None = None, before_commit=None) -> Config:
    """An Alembic Config pointing at the packaged migrations; ``engine`` is handed to env.py,
    and so is ``before_commit`` (a callable env.py runs after the last step, before the commit)."""
    cfg = Config()
    cfg.set_main_option("script_location", str(config.migrations_dir()))
    cfg.set_main_option("path_separator", "os")
    if engine is not None:
        cfg.attributes["engine"] = engine
    if before_commit is not None:
        cfg.attributes["before_commit"] = before_commit
    return cfg


def head_revision() -> str:
    """The single head revision of the migration tree."""
    heads = ScriptDirectory.from_config(alembic_config()).get_heads()
    if len(heads) != 1:  # pragma: no cover - guarded by a test
        raise RuntimeError(f"migration tree has {len(heads)} heads: {heads}")
    return heads[0]


def is_known(revision: str) -> bool:
    """True when ``revision`` is in this judgecal's migration tree."""
    try:
        return ScriptDirectory.from_config(alembic_config()).get_revision(revision) is not None
    except Exception:  # noqa: BLE001 - alembic raises several kinds for an unknown id
        return False


def current_revision(conn: Connection) -> str | None:
    """The revision stamped in the database, or None for a database never migrated."""
    return MigrationContext.configure(conn).get_current_revision()


def upgrade(engine: Engine, revision: str = "head", *, before_commit=None) -> None:
    """Migrate the database up to ``revision`` (one transaction). ``before_commit``: called
    once every step has run, just before the commit (migrations/env.py)."""
    command.upgrade(alembic_config(engine, before_commit), revision)


def downgrade_steps(conn: Connection, revision: str) -> list[str]:
    """The revisions a downgrade to ``revision`` undoes, newest first (``base``: every one;
    ``-N``: the last N). Alembic's CommandError for a target it cannot reach."""
    from alembic.script.revision import RevisionError
    from alembic.util.exc import CommandError

    now = current_revision(conn)
    if now is None:
        return []
    try:
        return [r.revision for r in ScriptDirectory.from_config(alembic_config()).iterate_revisions(now, revision)]
    except RevisionError as exc:
        raise CommandError(str(exc)) from None
    except AssertionError:  # Alembic asserts on a target it cannot resolve ('0004@head')
        raise CommandError("not a revision Alembic can resolve (e.g. head, base, 0003, -1)") from None


def downgrade_losses(engine: Engine, revision: str):
    """What a downgrade to ``revision`` would delete or transform, counted now
    (:class:`judgecal.db.migration_losses.Counted`, only those with rows)."""
    from judgecal.db import migration_losses

    with engine.connect() as conn:
        return migration_losses.count(conn, downgrade_steps(conn, revision))


def downgrade(engine: Engine, revision: str, *, yes: bool = False, before_commit=None):
    """Migrate the database down to ``revision`` (``base`` removes every table; one
    transaction; ``before_commit`` as in :func:`upgrade`).

    A downgrade that would delete rows or drop values a later upgrade cannot bring back is
    refused (:class:`judgecal.errors.DataLossError`, naming how many rows and what they lose;
    nothing changed) unless ``yes``. Returns what was lost (counted just before)."""
    from judgecal.errors import DataLossError

    losses = downgrade_losses(engine, revision)
    if losses and not yes:
        raise DataLossError(revision, losses)
    command.downgrade(alembic_config(engine, before_commit), revision)
    return losses


def current(engine: Engine) -> tuple[str | None, str]:
    """(the database's revision or None, the head revision)."""
    with engine.connect() as conn:
        return current_revision(conn), head_revision()
