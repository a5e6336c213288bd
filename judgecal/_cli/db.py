"""`judgecal db`: create and migrate the rating database (Alembic)."""

from __future__ import annotations

import click

from judgecal._cli.common import Ctx, group, pass_ctx


@group()
def db() -> None:
    """Create and migrate the rating database (Alembic)."""


@db.command("upgrade")
@click.argument("revision", default="head")
@pass_ctx
def db_upgrade(ctx: Ctx, revision: str) -> None:
    """Migrate the database up to REVISION (default: head)."""
    from judgecal.views import dbadmin

    click.echo(dbadmin.upgrade(ctx.url, revision))


@db.command("downgrade")
@click.argument("revision")
@click.option("--yes", is_flag=True, help="Downgrade even when rows would be deleted or lose values (they are counted first).")
@pass_ctx
def db_downgrade(ctx: Ctx, revision: str, yes: bool) -> None:
    """Migrate the database down to REVISION (`base` removes every table).

    A downgrade that would delete rows, or drop values a later upgrade cannot bring back, says
    how many and which and changes nothing unless --yes is given (docs/database.md)."""
    from judgecal.views import dbadmin

    click.echo(dbadmin.downgrade(ctx.url, revision, yes=yes))


@db.command("current")
@pass_ctx
def db_current(ctx: Ctx) -> None:
    """Print the database's revision and the head revision."""
    from judgecal.views import dbadmin

    click.echo(dbadmin.current(ctx.url))
