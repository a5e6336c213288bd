"""The stored results kept current without a manual step (docs/serve.md, "Results computed ahead").

Once a database has been refreshed (``judgecal db refresh`` stored results: the team opted
in), every command that can write content (every ``import ...``, ``rate``, ``fit``,
``lengths``, ``mc score``, and the boards that store token lengths they compute: ``report``,
``leaderboard``, ``bt``, ``publish``, ``check``) ends, when it moved the database's content
generation, by refreshing the stored results with the code of ``db refresh``
(:func:`judgecal.web.precompute.refresh_after_write`) and says so in one line on stderr.
``--no-refresh`` (or ``JUDGECAL_NO_REFRESH=1``) skips it, and the line says the results are
stale. A database never refreshed is never refreshed here, and a command that ends with an
error refreshes nothing. A failed or interrupted refresh is that one line: the command's own
write is committed and its exit status is unchanged."""

from __future__ import annotations

import functools
import signal
import threading

import click

from judgecal._cli.common import Ctx

#: the commands that can write content tables (by their path under ``judgecal``; a group: all its commands)
WRITERS = ("import", "rate", "fit", "lengths", "mc score", "report", "leaderboard", "bt", "publish", "check")

NO_REFRESH_HELP = ("Do not refresh the stored results (`judgecal db refresh`) after this command's writes; by default "
                   "a database refreshed once is refreshed again after every command that changed it "
                   "(env JUDGECAL_NO_REFRESH=1).")


def attach(root: click.Group) -> None:
    """Give every command of :data:`WRITERS` under ``root`` the ``--no-refresh`` option and the
    refresh after its writes (a command an import group gains later is covered too, as long as
    this runs after it is added)."""
    for path in WRITERS:
        cmd: click.Command = root
        for name in path.split():
            cmd = cmd.commands[name]  # type: ignore[union-attr]
        for leaf in _leaves(cmd):
            _wrap(leaf)


def _leaves(cmd: click.Command):
    if isinstance(cmd, click.Group):
        for sub in cmd.commands.values():
            yield from _leaves(sub)
    else:
        yield cmd


def _wrap(cmd: click.Command) -> None:
    if getattr(cmd.callback, "_refreshes", False):
        return
    cmd.params.append(click.Option(["--no-refresh"], is_flag=True, default=False, envvar="JUDGECAL_NO_REFRESH",
                                   help=NO_REFRESH_HELP))
    callback = cmd.callback

    @functools.wraps(callback)
    def run(*args, no_refresh: bool = False, **kwargs):
        from judgecal.db.derived import store_state

        url = click.get_current_context().find_object(Ctx).url
        before = store_state(url)
        if before is None or not before["rows"]:  # never refreshed: nothing more to pay
            return callback(*args, **kwargs)
        try:
            result = callback(*args, **kwargs)
        except (SystemExit, click.exceptions.Exit):  # its own exit status (check, rate): what it wrote is committed
            _after(url, before, no_refresh)
            raise
        _after(url, before, no_refresh)
        return result

    run._refreshes = True  # type: ignore[attr-defined]
    cmd.callback = run


def _after(url: str | None, before: dict, no_refresh: bool) -> None:
    """Refresh (or not) and print the one line; a Ctrl-C meanwhile stops the refresh only (the
    entry point holds Ctrl-C once an import has committed: here it interrupts again)."""
    from judgecal._cli.common import err
    from judgecal.progress import steps
    from judgecal.web.precompute import refresh_after_write

    source = click.get_current_context().get_parameter_source("no_refresh")
    how = "JUDGECAL_NO_REFRESH=1" if source == click.core.ParameterSource.ENVIRONMENT else "--no-refresh"
    in_main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, signal.default_int_handler) if in_main else None
    try:
        with steps(err, "refreshing the stored results") as step:
            line = refresh_after_write(url, before, skip=no_refresh, how_to_skip=how, step=step)
    finally:
        if in_main:
            signal.signal(signal.SIGINT, previous if previous is not None else signal.SIG_DFL)
    if line:
        from judgecal._cli.common import _line

        click.echo(f"note: {_line(line)}", err=True)
