"""`judgecal db`: create and migrate the rating database (Alembic)."""

from __future__ import annotations

import click

from judgecal._cli.common import Ctx, group, pass_ctx, warn


def _migrate(run) -> None:
    """Run a migration and print its outcome with SIGINT and SIGTERM held from just before its
    commit until the outcome is printed (judgecal.views.dbadmin): once the commit has begun,
    the migration is reported as done, never as interrupted; a signal held meanwhile is named
    in a warning (exit 0)."""
    from judgecal.db.engine import SignalHold
    from judgecal.views import dbadmin

    with SignalHold() as hold:
        click.echo(run(hold))
        note = dbadmin.held_note(hold)
        if note:
            warn(note)


@group()
def db() -> None:
    """Create and migrate the rating database (Alembic)."""


@db.command("upgrade")
@click.argument("revision", default="head")
@pass_ctx
def db_upgrade(ctx: Ctx, revision: str) -> None:
    """Migrate the database up to REVISION (default: head).

    One transaction: a Ctrl-C before its commit changes nothing (exit 130, the revision the
    database is still at); once the commit has begun it completes and is reported."""
    from judgecal.views import dbadmin

    _migrate(lambda hold: dbadmin.upgrade(ctx.url, revision, hold=hold))


@db.command("downgrade")
@click.argument("revision")
@click.option("--yes", is_flag=True, help="Downgrade even when rows would be deleted or lose values (they are counted first).")
@pass_ctx
def db_downgrade(ctx: Ctx, revision: str, yes: bool) -> None:
    """Migrate the database down to REVISION (`base` removes every table).

    A downgrade that would delete rows, or drop values a later upgrade cannot bring back, says
    how many and which and changes nothing unless --yes is given (docs/database.md)."""
    from judgecal.views import dbadmin

    _migrate(lambda hold: dbadmin.downgrade(ctx.url, revision, yes=yes, hold=hold))


@db.command("current")
@pass_ctx
def db_current(ctx: Ctx) -> None:
    """Print the database's revision and the head revision."""
    from judgecal.views import dbadmin

    click.echo(dbadmin.current(ctx.url))


@db.command("refresh")
@pass_ctx
def db_refresh(ctx: Ctx) -> None:
    """Compute and store what the pages cannot compute quickly (docs/serve.md, "Results computed ahead").

    The report's pairwise-judge summary, every judge's page, every stored baseline's win-rate
    boards and the calibrations' reports are computed now and stored in the database, keyed by
    their parameters, judgecal's code and the database's content generation; `judgecal serve`
    (warmed or not) and the CLI read them back until the data changes (any insert, update or
    delete moves the generation: nothing stored is read after it). Once a database has been
    refreshed, every judgecal command that writes to it refreshes them again at its end
    (--no-refresh or JUDGECAL_NO_REFRESH=1 skips it); run this after writes by other clients."""
    from judgecal._cli.common import err
    from judgecal.progress import steps
    from judgecal.web.precompute import refresh

    with steps(err, "refresh") as step:
        out = refresh(ctx.url, step=step)
    if out["changed"]:
        click.echo(f"the database changed while the results were computed ({out['pages']} pages, {out['seconds']} s): "
                   "nothing stored; run `judgecal db refresh` again", err=True)
        raise SystemExit(1)
    click.echo(f"stored {out['stored']} results of {out['pages']} pages in {out['seconds']} s "
               f"(content generation {out['generation']})")
