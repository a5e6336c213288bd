"""Alembic, configured in code from the packaged ``migrations/`` folder (works from a wheel)."""

from __future__ import annotations

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.engine import Connection, Engine

from judgecal import config


def alembic_config(engine: Engine | None = None) -> Config:
    """An Alembic Config pointing at the packaged migrations; ``engine`` is handed to env.py."""
    cfg = Config()
    cfg.set_main_option("script_location", str(config.migrations_dir()))
    cfg.set_main_option("path_separator", "os")
    if engine is not None:
        cfg.attributes["engine"] = engine
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


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Migrate the database up to ``revision``."""
    command.upgrade(alembic_config(engine), revision)


def downgrade(engine: Engine, revision: str) -> None:
    """Migrate the database down to ``revision`` (``base`` removes every table)."""
    command.downgrade(alembic_config(engine), revision)


def current(engine: Engine) -> tuple[str | None, str]:
    """(the database's revision or None, the head revision)."""
    with engine.connect() as conn:
        return current_revision(conn), head_revision()
