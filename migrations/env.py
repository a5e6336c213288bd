"""Alembic environment for judgecal: one tree for SQLite (batch mode) and PostgreSQL.

judgecal builds the Alembic Config in code (judgecal/db/migrate.py) and passes the engine in
``config.attributes["engine"]``; there is no alembic.ini."""

from alembic import context

from judgecal.db.models import Base

config = context.config
target_metadata = Base.metadata


def run_migrations_online() -> None:
    engine = config.attributes["engine"]
    with engine.begin() as connection:
        context.configure(
            connection=connection,
            target_metadata=target_metadata,
            render_as_batch=connection.dialect.name == "sqlite",
            compare_type=True,
        )
        context.run_migrations()


if context.is_offline_mode():  # pragma: no cover
    raise SystemExit("judgecal migrations run online only: use `judgecal db upgrade`")
run_migrations_online()
