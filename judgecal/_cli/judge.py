"""`judgecal judge`: one judge's page (position bias, length preference, comparison, calibrations)."""

from __future__ import annotations

import click
from click.core import ParameterSource

from judgecal._cli.common import FMT_OPT, Ctx, _enough_resamples, command, emit_json, out, pass_ctx


@command("judge")
@click.argument("judge", metavar="JUDGE")
@click.option("--bootstrap", "n_bootstrap", type=click.IntRange(0, 100000), default=1000, show_default=True,
              callback=lambda ctx, param, v: _enough_resamples(v), help="Bootstrap resamples of every CI (0: none).")
@click.option("--seed", type=click.IntRange(0, 2**31 - 1), default=0, show_default=True,
              help="Seed of the bootstrap resamples (needs --bootstrap above 0).")
@FMT_OPT
@pass_ctx
def judge(ctx: Ctx, judge: str, n_bootstrap: int, seed: int, fmt: str) -> None:
    """One judge, per task family: position bias (consistency, flip rate, first-position
    preference with CIs), its preference for the longer answer against the experts' by
    length-ratio bin, every judge of the family ranked by expert agreement on the same pairs,
    and its calibrations with their advice. JUDGE: a name, model or id (id:N)."""
    from judgecal.report.judge import judge_tables
    from judgecal.views.judge import judge_profile

    if n_bootstrap == 0 and click.get_current_context().get_parameter_source("seed") == ParameterSource.COMMANDLINE:
        raise click.UsageError("--seed seeds the bootstrap resamples: it has no effect with --bootstrap 0")
    prof = judge_profile(judge, ctx.url, n_bootstrap=n_bootstrap, seed=seed)
    if fmt == "json":
        emit_json(prof)
        return
    for item in judge_tables(prof, out.width):
        if isinstance(item, str):
            click.echo(item)
        else:
            out.print(item)
