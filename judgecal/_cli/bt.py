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
@click.option("--control", type=click.Choice(["none", "length", "markdown", "both"]), default="none", show_default=True,
              help="Style control (Arena-Hard-Auto's): the length difference, the Markdown densities (headers, list "
                   "items, bold) or both as standardised covariates of the fit; the controlled board beside the plain "
                   "one with rank changes, and the style coefficients with CIs.")
@click.option("--length-unit", type=click.Choice(["tokens", "words", "chars", "bytes"]), default="tokens",
              show_default=True, help="--control: the length, and the unit of the Markdown densities (per token as "
                                      "Arena-Hard-Auto).")
@click.option("--tokenizer", default="smollm2", show_default=True, metavar="NAME",
              help="--control with --length-unit tokens: the tokenizer (lengths not stored yet are computed and stored, "
                   "as `judgecal lengths` does).")
@click.option("--coefficients", is_flag=True,
              help="--control: print the style coefficients' table alone (table, markdown, csv; JSON holds them under "
                   "'style').")
@click.option("--format", "fmt", type=click.Choice(["table", "json", "markdown", "csv"]), default="table",
              show_default=True)
@click.option("--wide", is_flag=True, help="table, markdown: every column, whatever the terminal's width.")
@click.option("--columns", default=None, metavar="NAMES",
              help="table, markdown, csv: exactly these columns, comma-separated (headers or JSON keys).")
@pass_ctx
def bt(ctx: Ctx, family, judge, baseline, outcome, n_bootstrap, seed, control, length_unit, tokenizer, coefficients, fmt,
       wide, columns) -> None:
    """Bradley-Terry ratings from pairwise verdicts over every model pair they cover.

    Maximum likelihood (ties and soft verdicts as fractional wins), on Arena-Hard-Auto's scale
    (baseline = 1000, 400 points per factor of 10 in the odds), the win rate against the
    baseline derived from the ratings as Arena-Hard-Auto's show_result.py prints it, bootstrap
    CIs over items. Models without a finite rating are set apart with the reason, and so are
    models whose answers are empty, constant or truncated (the publish board's guards; their
    battles stay in the fit of the others).

    With --control, the style-controlled board (Arena-Hard-Auto's style covariates: docs/style.md)
    with the plain one beside it, rank changes, and the style coefficients (how much the judge
    rewards each feature) with CIs. A model whose Markdown density is more than twice the highest of
    the other models' is flagged style-outside and not lifted by the control (its controlled
    rating at most its uncontrolled one)."""
    from judgecal._cli.leaderboard import _print_board
    from judgecal.progress import steps
    from judgecal.report import btboard
    from judgecal.views.btboard import build_bt_board

    if wide and fmt not in ("table", "markdown"):
        raise click.UsageError(f"--wide applies to --format table and markdown ({fmt} holds every column)")
    if columns is not None and fmt == "json":
        raise click.UsageError("--columns applies to --format table, markdown and csv, not json")
    given = {p for p in ("length_unit", "tokenizer") if click.get_current_context().get_parameter_source(p).name != "DEFAULT"}
    if control == "none" and (given or coefficients):
        opt = "--coefficients" if coefficients else "--" + sorted(given)[0].replace("_", "-")
        raise click.UsageError(f"{opt} applies to a style-controlled board: add --control length|markdown|both")
    if "tokenizer" in given and length_unit != "tokens":
        raise click.UsageError(f"--tokenizer applies to --length-unit tokens (not {length_unit})")
    if coefficients and fmt == "json":
        raise click.UsageError("--coefficients applies to --format table, markdown and csv (JSON holds them under 'style')")
    what = "" if control == "none" else f", style control {control}"
    with steps(err, f"Bradley-Terry board ({n_bootstrap} bootstrap resamples{what})"):
        board = build_bt_board([family] if family else [], judge, baseline, ctx.url, outcome=outcome, n_bootstrap=n_bootstrap,
                               seed=seed, control=control, length_unit=length_unit, tokenizer=tokenizer)
    if coefficients:
        _print_board({**board, "rows": btboard.coefficient_rows(board)}, fmt, btboard.coef_tables, btboard.coef_markdown,
                     btboard.footer_lines, btboard.COEF_COLS, wide=wide, columns=columns)  # the notes too
        return
    _print_board(board, fmt, btboard.bt_tables, btboard.bt_markdown, btboard.footer_lines, btboard.cols_of(board),
                 wide=wide, columns=columns)
