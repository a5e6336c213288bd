"""`judgecal publish`: the board a team publishes from (the advice applied)."""

from __future__ import annotations

import click

from judgecal._cli.common import (FAMILIES_OPT, Ctx, Finite, _enough_resamples, command, emit_json, err, out, pass_ctx)


@command()
@FAMILIES_OPT
@click.option("--judge", default=None, metavar="NAME|ID", help="Judge (default: every judge with a calibration; with "
              "--baseline, the only judge with verdicts against it).")
@click.option("--baseline", default=None, metavar="MODEL",
              help="Publish win rates against MODEL from pairwise verdicts instead of mean scores.")
@click.option("--publish", "publish", type=click.Choice(["recommended", "raw", "calibrated", "lc"]), default="recommended",
              show_default=True,
              help="recommended: the column the advice backs (raw where it says keep raw); raw; calibrated; lc "
                   "(--baseline only: AlpacaEval 2.0's length-controlled win rate).")
@click.option("--min-ratings", type=click.IntRange(0), default=30, show_default=True,
              help="Score boards: models with fewer rated responses are set apart.")
@click.option("--max-unparsed", type=Finite(0, 1), default=0.05, show_default=True,
              help="Score boards: flag models above this unparsed/failed share.")
@click.option("--bootstrap", "n_bootstrap", type=click.IntRange(0, 100000), default=1000, show_default=True,
              callback=lambda ctx, param, v: _enough_resamples(v),
              help="Bootstrap resamples of every CI (0: no CIs; at least 20 otherwise).")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--format", "fmt", type=click.Choice(["table", "json", "markdown", "csv", "alpaca-eval"]), default="table",
              show_default=True, help="alpaca-eval (with --baseline): AlpacaEval's leaderboard CSV columns.")
@click.option("--wide", is_flag=True, help="table: every column, whatever the terminal's width.")
@pass_ctx
def publish(ctx: Ctx, families, judge, baseline, publish, min_ratings, max_unparsed, n_bootstrap, seed, fmt,
            wide) -> None:
    """The boards to publish: per task family and judge, the advice applied.

    The published column is the one the out-of-sample evidence backs (a calibration whose
    nested gain clears raw), raw where the advice is keep raw, with the advice in one line;
    models with empty, constant or truncated answers, the baseline and gamed baselines are set
    apart with their reason, not ranked. `judgecal check --publish` gates the same column."""
    if wide and fmt != "table":
        raise click.UsageError(f"--wide applies to --format table, not {fmt}")
    from click.core import ParameterSource

    score_only = [n for n in ("min_ratings", "max_unparsed")
                  if click.get_current_context().get_parameter_source(n) == ParameterSource.COMMANDLINE]
    if baseline is not None and score_only:  # never an option that changes nothing without a word
        raise click.UsageError(f"--{score_only[0].replace('_', '-')} applies to score boards, not to --baseline "
                               "(win rates)")
    if publish == "lc" and baseline is None:
        raise click.UsageError("--publish lc needs --baseline MODEL (a win-rate board)")
    if fmt == "alpaca-eval" and baseline is None:
        raise click.UsageError("--format alpaca-eval needs --baseline MODEL (AlpacaEval's format holds win rates)")
    from judgecal.progress import steps
    from judgecal.report import publish as render
    from judgecal.views.publish import build_publish

    with steps(err, f"publish board ({n_bootstrap} bootstrap resamples)"):
        result = build_publish(list(families), judge, ctx.url, publish=publish, baseline=baseline,
                               n_bootstrap=n_bootstrap, seed=seed, min_ratings=min_ratings, max_unparsed=max_unparsed)
    if fmt == "json":
        emit_json(result)
    elif fmt == "markdown":
        click.echo(render.publish_markdown(result), nl=False)
    elif fmt in ("csv", "alpaca-eval"):
        from judgecal._cli.leaderboard import _emit_csv

        _emit_csv(render.publish_csv_rows(result) if fmt == "csv" else render.alpaca_eval_rows(result))
        for b in result["boards"]:  # the advice and notes are part of what is published: said on stderr
            err.print(f"advice ({b['task_family']} / {b['judge']}): {b['advice']}", markup=False, highlight=False)
            if fmt == "alpaca-eval":  # AlpacaEval's columns hold ranked rows only: what was left out is said here
                for a in b["set_apart"]:
                    err.print(f"set apart, not in the file ({b['task_family']} / {b['judge']}): {a['model']}: {a['reason']}",
                              markup=False, highlight=False)
    else:
        for table, lines in render.publish_tables(result, out.width, wide=wide):
            out.print(table)
            for line in lines:
                click.echo(line)
