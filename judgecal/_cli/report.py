"""`judgecal report`: the calibration report."""

from __future__ import annotations

from pathlib import Path

import click

from judgecal._cli.common import (Ctx, _enough_resamples, command, err, out, pass_ctx, refuse_idle_risk_k,
                                 summary_opts)


@command()
@click.option("--task-family", "families", multiple=True, metavar="NAME", help="Task family (repeatable; default: all).")
@click.option("--judge", default=None, metavar="NAME|ID", help="Judge (default: every judge with a calibration).")
@click.option("--calibration", "calibrations", multiple=True, metavar="ID|latest",
              help="Calibration id(s) to report (repeatable; default: the newest per family and judge). With "
                   "--task-family OTHER, calibration ID is applied to OTHER's expert labels (a transfer evaluation).")
@click.option("--format", "fmt", type=click.Choice(["table", "json", "markdown", "html"]), default="table", show_default=True)
@click.option("--out", "out_dir", type=click.Path(path_type=str, file_okay=False), default=None,
              callback=lambda ctx, param, v: _named_folder(v),
              help="Write report.html, report.json and report.md into this folder (html needs it).")
@click.option("--no-plots", is_flag=True, help="Leave the PNG plots out of the HTML page.")
@click.option("--bootstrap", "n_bootstrap", type=click.IntRange(0, 100000), default=1000, show_default=True,
              callback=lambda ctx, param, v: _enough_resamples(v),
              help="Bootstrap resamples for every figure computed at report time (0: no CIs; at least 20 otherwise): transfer and verbosity-only entries, the pairwise section's CIs (position consistency, first-position preference, agreements, the judge comparison's paired gaps), the Bradley-Terry boards with style control and the HTML report's boards.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--length-position", is_flag=True,
              help="Pairwise judges: also length and position together (one order or both, raw or with a cross-validated "
                   "length calibration, against the experts; nested CV, about 2 s per judge and task family).")
@click.option("--wide", is_flag=True, help="table: every column of every table, whatever the terminal's width.")
@summary_opts(default=None, extra=" Default: each calibration as it was fitted; given, a calibration fitted on another "
                                  "summary is refused.")
@pass_ctx
def report(ctx: Ctx, families, judge, calibrations, fmt, out_dir, no_plots, n_bootstrap, seed, length_position, wide,
           summary, risk_k) -> None:
    """Verbosity win-rate and expert agreement before and after calibration, with baselines and CIs."""
    from judgecal.views import reporting

    refuse_idle_risk_k(summary)

    if wide and fmt != "table":
        raise click.UsageError(f"--wide applies to --format table ({fmt} holds every column)")
    if fmt == "html" and out_dir is None:
        raise click.UsageError("--format html needs --out DIR")
    cal = list(calibrations) or ["latest"]
    if len(cal) > 1 and "latest" in cal:
        raise click.BadParameter("'latest' cannot be combined with ids", param_hint="--calibration")
    if cal != ["latest"] and not all(c.isdigit() for c in cal):
        raise click.BadParameter(f"expected calibration ids or 'latest', got {', '.join(cal)}", param_hint="--calibration")
    formats = ("json", "markdown", "html") if out_dir is not None else ()
    from judgecal.progress import steps

    with steps(err, "report") as step:
        rep, entries, written = reporting.make_report(list(families), judge, cal, ctx.url, out_dir, formats,
                                                      plots=not no_plots, n_bootstrap=n_bootstrap, seed=seed,
                                                      length_position=length_position, step=step, summary=summary,
                                                      risk_k=risk_k)
    if fmt == "table":
        from judgecal.report.render_text import render_table

        out.print(render_table(rep, out.width, wide=wide))
    elif fmt in ("json", "markdown"):
        click.echo(reporting.render(rep, entries, fmt), nl=False)
    for kind, path in written.items():
        err.print(f"wrote {path}", highlight=False, markup=False)



def _named_folder(path: str | None) -> Path | None:
    """--out of report: a folder named (an empty value would write into the current folder)."""
    if path is not None and not path.strip():
        raise click.BadParameter("names no folder: give the folder to write the report into", param_hint="--out")
    return None if path is None else Path(path)
