"""`judgecal export`: write ratings, labels, pairs, responses, verdicts, calibrations or a leaderboard."""

from __future__ import annotations

from pathlib import Path

import click

from judgecal._cli.common import Ctx, command, err, pass_ctx


@command("export")
@click.argument("kind", type=click.Choice(["ratings", "labels", "pairs", "responses", "verdicts", "calibrations", "leaderboard"]))
@click.argument("file", type=click.Path(path_type=Path, dir_okay=False))
@click.option("--format", "fmt", type=click.Choice(["jsonl", "csv"]), default=None,
              help="Output format (default: from the file extension, else jsonl).")
@click.option("--task-family", "families", multiple=True, metavar="NAME",
              help="Only these task families (every kind; default: all).")
@click.option("--judge", default=None, metavar="NAME|ID",
              help="Only this judge's rows: ratings, verdicts, calibrations; leaderboard: its judge (default: the only "
                   "one with ratings). Refused for responses, labels, pairs (no judge).")
@click.option("--calibration", default=None, metavar="ID|latest",
              help="leaderboard only: calibration to apply (default: latest).")
@pass_ctx
def export_cmd(ctx: Ctx, kind: str, file: Path, fmt: str | None, families, judge, calibration) -> None:
    """Write KIND to FILE (`-` for standard output). ratings, labels, pairs, responses,
    verdicts and calibrations use the generic import format (they round-trip through `judgecal
    import jsonl|csv --kind KIND`); the leaderboard is a report.
    Only a regular file is written (a symlink, FIFO or device is refused); CSV cells that a
    spreadsheet would run as a formula get a leading ' (taken off again on import)."""
    from judgecal.views.export import export

    fmt = fmt or ("csv" if file.suffix.lower() == ".csv" else "jsonl")
    notes: list[str] = []
    n = export(kind, fmt, file, ctx.url, families=families, judge=judge, calibration=calibration, notes=notes)
    for line in notes:  # the board's notes (why a model or a family is not on it), as `leaderboard` prints them
        err.print(line, markup=False, highlight=False)
    if str(file) == "-":
        err.print(f"wrote {n} {kind} rows to standard output", highlight=False)
    else:
        click.echo(f"wrote {n} {kind} rows to {file}")
