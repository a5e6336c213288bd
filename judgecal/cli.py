"""The ``judgecal`` command line (Click). Parses options, calls the library, prints.

This module builds the root group :data:`cli` from the commands of :mod:`judgecal._cli` (one
module per command or command group) and holds the console entry point :func:`main`.

No SQL and no maths here. Every :class:`~judgecal.errors.JudgecalError` becomes one line on
stderr and a non-zero exit; unexpected errors too (set ``JUDGECAL_DEBUG=1`` for a traceback)."""

from __future__ import annotations

import os
import sys

import click

from judgecal import __version__
from judgecal._cli import (audit, bt, check, db, export, fit, imports, judge, leaderboard, mc, model, publish, rate,
                           report, serve, stats)
from judgecal._cli.common import Ctx, _line, err, warn
from judgecal.cliopts import CONTEXT_SETTINGS, StrictGroup
from judgecal.errors import Interrupted, JudgecalError, raised_by_interrupt
from judgecal.secrets import scrub

# names other code and tests take from here
from judgecal._cli.mc import FORWARDS  # noqa: F401
from judgecal._cli.serve import _loopback  # noqa: F401


@click.group(cls=StrictGroup, context_settings=CONTEXT_SETTINGS)
@click.version_option(__version__, prog_name="judgecal")
@click.option(
    "--database-url",
    envvar="JUDGECAL_DATABASE_URL",
    default=None,
    metavar="URL",
    help="SQLAlchemy URL of the rating database (env JUDGECAL_DATABASE_URL; default: SQLite under JUDGECAL_HOME).",
)
@click.pass_context
def cli(ctx: click.Context, database_url: str | None) -> None:
    """Calibrate LLM-judge scores against length bias; score multiple choice by log-likelihood."""
    ctx.obj = Ctx(database_url)


# the commands, in the order they were defined when they all lived in this module
for _command in (db.db, imports.import_, stats.stats, stats.lengths, model.model, rate.rate, fit.fit, report.report,
                 audit.audit, leaderboard.leaderboard, bt.bt, publish.publish, check.check, judge.judge, mc.mc, export.export_cmd, serve.serve):
    cli.add_command(_command)
del _command

# the stored results of a database refreshed once stay current after every command that writes (--no-refresh)
from judgecal._cli.autorefresh import attach as _attach_refresh  # noqa: E402

_attach_refresh(cli)


# ---------------------------------------------------------------- entry point
def _commits() -> int:
    """Imports and migrations this process has committed (judgecal.views.importing.commits,
    judgecal.views.dbadmin.commits; 0 while not loaded)."""
    return (getattr(sys.modules.get("judgecal.views.importing"), "commits", 0)
            + getattr(sys.modules.get("judgecal.views.dbadmin"), "commits", 0))


def main(argv: list[str] | None = None, *, sigint_after=None) -> None:
    """Console entry point: run the CLI, turning every error into one line and an exit status.

    Ctrl-C: "aborted", exit 130; but once an import of this run has committed (the import holds
    Ctrl-C from the end of its writing to its return), a Ctrl-C no longer interrupts: the import
    is reported as done, with a warning, exit 0. ``sigint_after``: the SIGINT disposition left
    in place on the way out (the console script gives SIG_IGN: the outcome is decided, and a
    Ctrl-C during the interpreter's shutdown must not end the process by SIGINT); default: the
    handler found on the way in."""
    import signal
    import threading

    if sys.stdout is None:  # started with standard output closed (`judgecal stats >&-`)
        err.print("error: standard output is closed; judgecal writes its results there (redirect it to a file "
                  "or /dev/null)", highlight=False, markup=False)
        sys.exit(2)
    before = _commits()
    late: list[int] = []  # Ctrl-C after an import of this run committed

    def on_sigint(signum, frame) -> None:
        if _commits() > before:
            late.append(signum)
            return
        raise KeyboardInterrupt

    in_main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, on_sigint) if in_main else None
    try:
        try:
            code = _run(argv, lambda: _commits() > before, late)
        except KeyboardInterrupt:  # a Ctrl-C while an error was being reported
            if in_main:
                signal.signal(signal.SIGINT, signal.SIG_IGN)
            err.print("aborted", highlight=False)
            code = 130
    finally:
        if in_main:
            after = sigint_after if sigint_after is not None else previous
            signal.signal(signal.SIGINT, after if after is not None else signal.SIG_DFL)
    sys.exit(code)


_AFTER_IMPORT = ("Ctrl-C came after the import was committed: the import completed (everything counted above "
                 "was imported); the interrupt changed nothing")
_AFTER_MIGRATION = ("Ctrl-C came after the migration was committed: the migration completed (the database is at the "
                    "revision printed above); the interrupt changed nothing")


def _after_commit() -> str:
    """The warning for a Ctrl-C after this process committed: a migration's or an import's."""
    return _AFTER_MIGRATION if getattr(sys.modules.get("judgecal.views.dbadmin"), "commits", 0) else _AFTER_IMPORT


def _run(argv: list[str] | None, committed, late: list) -> int:
    stdout = sys.stdout
    try:
        cli.main(args=argv, prog_name="judgecal", standalone_mode=False)
    except SystemExit:
        if sys.stdout is stdout:  # the command's own exit status (check, rate)
            raise
        # a write to a closed pipe (`judgecal leaderboard | head -1`): Click answers the EPIPE with exit 1,
        # silently, after wrapping sys.stdout; the reader took what it wanted, which is no failure
        from judgecal._cli.common import stdout_closed

        stdout_closed()
        return 0
    except (click.exceptions.Abort, KeyboardInterrupt) as exc:
        if committed():  # (a Ctrl-C handler other than main's raised it)
            warn(_after_commit())
            return 0
        err.print("aborted" if isinstance(exc, click.exceptions.Abort) else "interrupted", highlight=False)
        return 130
    except Exception as exc:  # noqa: BLE001 - an error raised while a Ctrl-C unwound is the Ctrl-C
        if isinstance(exc, Interrupted) or not raised_by_interrupt(exc):  # (Interrupted says what the Ctrl-C left)
            return _failed(exc)
        if committed():
            warn(_after_commit())
            return 0
        err.print("interrupted", highlight=False)
        return 130
    if late:
        warn(_after_commit())
    return 0


def _failed(exc: Exception) -> int:
    """One line on stderr for ``exc``; the exit status."""
    try:
        raise exc
    except click.ClickException as exc:
        err.print(f"error: {_line(exc.format_message())}", highlight=False, markup=False)
        return exc.exit_code
    except Interrupted as exc:  # the user's Ctrl-C, with what it left: no "error:"
        err.print(_line(str(exc)), highlight=False, markup=False)
        return exc.exit_code
    except JudgecalError as exc:
        err.print(f"error: {_line(str(exc))}", highlight=False, markup=False)
        return exc.exit_code
    except OSError as exc:  # unwritable output folder, missing file, full disk...
        where = f"{exc.filename}: " if getattr(exc, "filename", None) else ""
        err.print(f"error: {_line(where + (exc.strerror or str(exc)))}", highlight=False, markup=False)
        return 2
    except Exception as exc:  # noqa: BLE001 - never a traceback for users
        if os.environ.get("JUDGECAL_DEBUG"):
            raise
        msg = scrub(f"{exc.__class__.__name__}: {exc}".splitlines()[0])
        err.print(f"error: unexpected {_line(msg)} (set JUDGECAL_DEBUG=1 for a traceback)", highlight=False, markup=False)
        return 1


# every command's --help ends with a worked example (judgecal/cliexamples.py; a test keeps them complete)
from judgecal.cliexamples import attach as _attach_examples  # noqa: E402

_attach_examples(cli)
