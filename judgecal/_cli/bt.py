"""`judgecal bt`: the Bradley-Terry board from pairwise verdicts."""

from __future__ import annotations

import click

from judgecal._cli.common import Ctx, _enough_resamples, command, err, pass_ctx


@command()
@click.option("--task-family", "family", default=None, metavar="NAME",
              help="Task family (default: the only one with pairwise verdicts).")
@click.option("--judge", default=None, metavar="NAME|ID",
              help="Judge (default: the only judge with pairwise verdicts in the family).")
@click.option("--baseline", default=None, metavar="MODEL",
              help="Model anchored at rating 1000 (win rate 50%) (default: the one model the verdicts name as baseline).")
@click.option("--outcome", type=click.Choice(["preference", "verdict"]), default="preference", show_default=True,
              help="A battle's credit: the stored soft preference P(a preferred) (tie 0.5), or the verdict a/b/tie as "
                   "1/0/0.5 (Arena-Hard-Auto's count of hard verdicts).")
@click.option("--bootstrap", "n_bootstrap", type=click.IntRange(0, 100000), default=1000, show_default=True,
              callback=lambda ctx, param, v: _enough_resamples(v),
              help="Item resamples of the CIs (0: no CIs; at least 20 otherwise).")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--format", "fmt", type=click.Choice(["table", "json", "markdown", "csv"]), default="table",
              show_default=True)
@click.option("--wide", is_flag=True, help="table, markdown: every column, whatever the terminal's width.")
@click.option("--columns", default=None, metavar="NAMES",
              help="table, markdown, csv: exactly these columns, comma-separated (headers or JSON keys).")
@pass_ctx
def bt(ctx: Ctx, family, judge, baseline, outcome, n_bootstrap, seed, fmt, wide, columns) -> None:
    """Bradley-Terry ratings from pairwise verdicts over every model pair they cover.

    Maximum likelihood (ties and soft verdicts as fractional wins), on Arena-Hard-Auto's scale
    (baseline = 1000, 400 points per factor of 10 in the odds), the win rate against the
    baseline derived from the ratings as Arena-Hard-Auto's show_result.py prints it, bootstrap
    CIs over items. Models without a finite rating are set apart with the reason."""
    from judgecal._cli.leaderboard import _print_board
    from judgecal.progress import steps
    from judgecal.report import btboard
    from judgecal.views.btboard import build_bt_board

    if wide and fmt not in ("table", "markdown"):
        raise click.UsageError(f"--wide applies to --format table and markdown ({fmt} holds every column)")
    if columns is not None and fmt == "json":
        raise click.UsageError("--columns applies to --format table, markdown and csv, not json")
    with steps(err, f"Bradley-Terry board ({n_bootstrap} bootstrap resamples)"):
        board = build_bt_board([family] if family else [], judge, baseline, ctx.url, outcome=outcome, n_bootstrap=n_bootstrap,
                               seed=seed)
    _print_board(board, fmt, btboard.bt_tables, btboard.bt_markdown, btboard.footer_lines, btboard.COLS,
                 wide=wide, columns=columns)
