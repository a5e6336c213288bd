"""`judgecal serve`: the read-only web view."""

from __future__ import annotations

import click

from judgecal._cli.common import Ctx, command, err, pass_ctx


def _loopback(host: str) -> bool:
    import ipaddress

    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:  # a host name: it may resolve to any interface
        return False


@command()
@click.option("--host", default="127.0.0.1", show_default=True, metavar="ADDRESS",
              help="Address to listen on; one that is not a loopback address needs --token.")
@click.option("--port", default=8765, show_default=True, type=click.IntRange(1, 65535), help="Port to listen on.")
@click.option("--token", envvar="JUDGECAL_SERVE_TOKEN", default=None, metavar="TOKEN",
              help="Require this token on every request (?token=, Authorization: Bearer, or the cookie set after the "
                   "first good one); env JUDGECAL_SERVE_TOKEN. At least 16 characters.")
@click.option("--cache-mb", default=64, show_default=True, type=click.IntRange(0, 65536), metavar="MIB",
              help="Keep computed pages (at most this many MiB, and 4x as much for the audits' and ratings list's "
                   "indexes) until the database changes; 0: compute every request.")
@click.option("--warm/--no-warm", default=True, show_default=True,
              help="Compute the entry pages (and those read) ahead, again after each change of the database; while "
                   "a page is computed again its previous copy is served with a banner saying so (never to "
                   "format=json or fresh=1). Needs --cache-mb above 0.")
@pass_ctx
def serve(ctx: Ctx, host: str, port: int, token: str | None, cache_mb: int, warm: bool) -> None:
    """A read-only web view of the database: overview, score and win-rate leaderboards,
    calibrations, the judge audit, ratings and multiple-choice runs (docs/serve.md).

    The database is opened read-only (SQLite mode=ro, PostgreSQL read-only transactions);
    every page shows what the CLI shows, from the same functions. Ctrl-C stops it."""
    if token is not None and len(token) < 16:
        raise click.BadParameter("must be at least 16 characters (e.g. `openssl rand -hex 16`)", param_hint="--token")
    if not _loopback(host) and token is None:
        raise click.UsageError(f"--host {host} is not a loopback address: anyone who can reach it could read the "
                               "database; give --token (or JUDGECAL_SERVE_TOKEN), or serve on 127.0.0.1")
    import socket

    import uvicorn

    from judgecal.web import create_app

    from click.core import ParameterSource

    cctx = click.get_current_context()
    if warm and cache_mb == 0 and cctx.get_parameter_source("warm") == ParameterSource.COMMANDLINE:
        raise click.UsageError("--warm keeps the pages it computes in the page cache: it needs --cache-mb above 0")
    app = create_app(ctx.url, token=token, cache_mb=cache_mb, warm=warm and cache_mb > 0)
    try:  # a port in use (or an address not here) is one line, before uvicorn starts
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((host.strip("[]"), port))
    except OSError as exc:
        raise click.ClickException(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    shown = f"[{host}]" if ":" in host else host
    err.print(f"judgecal serve: http://{shown}:{port}/ (read-only: {app.state.database_shown}"
              + ("; token required" if token else "") + "); Ctrl-C stops it", markup=False, highlight=False)
    uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False, server_header=False)
