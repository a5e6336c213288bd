"""`judgecal leaderboard`: the score and win-rate leaderboards."""

from __future__ import annotations

from pathlib import Path

import click

from judgecal._cli.common import (CAL_OPT, FAMILIES_OPT, JUDGE_OPT, Ctx, Finite, _enough_resamples, command, emit_json,
                                 err, out, pass_ctx, refuse_idle_risk_k, summary_opts)


@command()
@FAMILIES_OPT
@JUDGE_OPT
@CAL_OPT
@click.option("--min-ratings", type=click.IntRange(0), default=30, show_default=True, help="Flag models with fewer rated responses.")
@click.option("--max-unparsed", type=Finite(0, 1), default=0.05, show_default=True, help="Flag models above this unparsed/failed share.")
@click.option("--bootstrap", "n_bootstrap", type=click.IntRange(0, 100000), default=1000, show_default=True,
              callback=lambda ctx, param, v: _enough_resamples(v),
              help="Bootstrap resamples of every CI on the board (0: no CIs; at least 20 otherwise).")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--mc-reference", type=int, default=None, metavar="RUN_ID",
              help="Flag acc and acc_norm moving in opposite directions against this multiple-choice run.")
@click.option("--calibration-from", default=None, metavar="FAMILY",
              help="Apply this family's newest calibration (or the one --calibration ID names) to the rated families without their own.")
@click.option("--baseline", default=None, metavar="MODEL",
              help="Win-rate mode: win rates against this model from pairwise verdicts (raw, LC, calibrated).")
@click.option("--length-unit", type=click.Choice(["chars", "words", "bytes", "tokens"]), default="chars", show_default=True,
              help="Win-rate mode: length unit of the calibrated column's penalty (LC always uses characters).")
@click.option("--tokenizer", default=None, metavar="NAME", help="Win-rate mode: tokenizer for --length-unit tokens.")
@click.option("--short-floor", type=Finite(0, 1, min_open=True), default=0.25, show_default=True,
              help="Win-rate mode: length ratio below which a shorter answer earns no further credit (gaming guard).")
@click.option("--p-bounds", nargs=2, type=Finite(min=0, min_open=True), default=(1.0, 1.5), show_default=True,
              metavar="P_MIN P_MAX", help="Win-rate mode: bounds of the penalty exponent p.")
@click.option("--signed", is_flag=True, help="Win-rate mode: allow gamma < 0 (a judge that prefers shorter answers).")
@click.option("--lc-weights", type=click.Path(path_type=Path), default=None, metavar="CSV",
              help="Win-rate mode: AlpacaEval GLM weights CSV replacing the packaged ones for the gamed baselines of the "
                   "alpaca-eval regulariser.")
@click.option("--lc-regulariser", type=click.Choice(["auto", "alpaca-eval", "verdicts", "none"]), default="auto",
              show_default=True,
              help="Win-rate mode: LC's gamed-baseline regulariser: the judge's verdicts on <baseline>_verbose/_concise, "
                   "AlpacaEval's published one (packaged; baseline gpt4_1106_preview on AlpacaEval's instructions), none; "
                   "auto: the verdicts when stored, else AlpacaEval's where it applies.")
@click.option("--joint", is_flag=True,
              help="Win-rate mode: estimate instruction difficulty and calibration strength from every model in the "
                   "database together (a model's LC and calibrated figures then depend on the other models).")
@click.option("--sort-by", type=click.Choice(["length_controlled_winrate", "win_rate", "calibrated_win_rate",
                                              "discrete_win_rate", "avg_length", "n_total", "model"]),
              default="length_controlled_winrate", show_default=True, help="Win-rate mode: row order (as AlpacaEval: LC).")
@click.option("--compare-to", type=click.Path(path_type=Path), default=None, metavar="CSV",
              help="Win-rate mode: external ranking (model, score columns): Spearman/Kendall of each column with it.")
@click.option("--compare-column", default=None, metavar="NAME", help="Score column of --compare-to (default: 'score').")
@click.option("--format", "fmt", type=click.Choice(["table", "json", "markdown", "csv", "alpaca-eval"]), default="table",
              show_default=True, help="alpaca-eval (win-rate mode): AlpacaEval's leaderboard CSV columns, then judgecal's.")
@click.option("--wide", is_flag=True, help="table, markdown: every column, whatever the terminal's width.")
@click.option("--columns", default=None, metavar="NAMES",
              help="table, markdown, csv: exactly these columns, comma-separated (headers or JSON keys, e.g. "
                   "model,raw,calibrated,flags); an unknown name lists the choices.")
@summary_opts(extra=" A calibration fitted on another summary is refused. Win-rate mode: the verdict's stored preference, "
                    "its expected preference P(a) + P(tie)/2, or that minus k sd from the model's side.")
@pass_ctx
@click.pass_context
def leaderboard(cctx: click.Context, ctx: Ctx, families, judge, calibration, min_ratings, max_unparsed, n_bootstrap, seed,
                mc_reference, calibration_from, baseline, length_unit, tokenizer, short_floor, p_bounds, signed, lc_weights,
                lc_regulariser, joint, sort_by, compare_to, compare_column, fmt, wide, columns, summary, risk_k) -> None:
    """Per producing model: raw and calibrated mean score with CIs, rank changes, lengths, flags.

    With --baseline MODEL: win rates against MODEL from pairwise verdicts: raw (AlpacaEval's
    definition), length-controlled (AlpacaEval 2.0's GLM, by default with AlpacaEval's packaged
    regulariser and instruction difficulty) and calibrated (the seed's penalty, its strength
    from the gamed baselines), with bootstrap CIs, ranks and verbosity spreads; a model's
    figures do not depend on the other models unless --joint."""
    refuse_idle_risk_k(summary)
    from click.core import ParameterSource

    given = {n for n in cctx.params if cctx.get_parameter_source(n) == ParameterSource.COMMANDLINE}
    if wide and fmt not in ("table", "markdown"):
        raise click.UsageError(f"--wide applies to --format table and markdown ({fmt} holds every column)")
    if columns is not None and fmt in ("json", "alpaca-eval"):
        raise click.UsageError(f"--columns applies to --format table, markdown and csv, not {fmt}")
    shape = {"wide": wide, "columns": columns}
    score_only = {"calibration", "min_ratings", "max_unparsed", "mc_reference", "calibration_from"}
    winrate_only = {"length_unit", "tokenizer", "short_floor", "p_bounds", "signed", "lc_weights", "compare_to", "compare_column",
                    "lc_regulariser", "joint", "sort_by"}
    if baseline is not None:
        bad = sorted(given & score_only)
        if bad:
            raise click.UsageError(f"--{bad[0].replace('_', '-')} applies to the score leaderboard, not to --baseline (win-rate mode)")
        from judgecal.report import winboard
        from judgecal.views.winrates import build_winrate_board

        from judgecal.progress import steps

        with steps(err, f"win rates vs {baseline} (raw, LC, calibrated; {n_bootstrap} bootstrap resamples)"):
            board = build_winrate_board(baseline, list(families), judge, ctx.url, length_unit=length_unit,
                                        tokenizer=tokenizer, n_bootstrap=n_bootstrap, seed=seed, short_floor=short_floor,
                                        p_bounds=tuple(p_bounds), signed=signed, lc_weights=lc_weights,
                                        compare_to=compare_to, compare_column=compare_column,
                                        lc_regulariser=lc_regulariser, joint=joint, sort_by=sort_by, summary=summary,
                                        risk_k=risk_k)
        if fmt == "alpaca-eval":
            click.echo(winboard.alpaca_eval_csv(board), nl=False)
            for line in winboard.footer_lines(board):
                err.print(line, markup=False, highlight=False)
            return
        _print_board(board, fmt, winboard.winboard_tables, winboard.winboard_markdown, winboard.footer_lines,
                     winboard.COLS, **shape)
        return
    bad = sorted(given & winrate_only)
    if bad:
        raise click.UsageError(f"--{bad[0].replace('_', '-')} needs --baseline MODEL (win-rate mode)")
    if fmt == "alpaca-eval":
        raise click.UsageError("--format alpaca-eval needs --baseline MODEL (win-rate mode)")
    from judgecal.views.leaderboard import build_leaderboard
    from judgecal.report import board as render

    from judgecal.progress import steps

    with steps(err, f"leaderboard ({n_bootstrap} bootstrap resamples)"):
        board = build_leaderboard(list(families), judge, calibration, ctx.url, min_ratings=min_ratings,
                                  max_unparsed=max_unparsed, n_bootstrap=n_bootstrap, seed=seed,
                                  mc_reference=mc_reference, calibration_from=calibration_from, summary=summary,
                                  risk_k=risk_k)
    _print_board(board, fmt, render.leaderboard_tables, render.leaderboard_markdown,
                 lambda b: render.legend_lines(b) + render.left_out_lines(b), render.COLS, **shape)


def _print_board(board: dict, fmt: str, tables, markdown, footer, cols, *, wide: bool = False,
                 columns: str | None = None) -> None:
    """A leaderboard in ``fmt``; the footer lines (notes, flag legend, rows left out) follow the
    table, sit in the Markdown and JSON themselves, and go to stderr with CSV. The table fits
    the terminal (columns that do not fit are named under it); ``wide``/``columns`` as the
    options say."""
    from judgecal.report.tables import parse_columns

    if fmt == "json":
        emit_json(board)
    elif fmt == "markdown":
        click.echo(markdown(board, columns=",".join(c.key for c in cols) if wide else columns))
    elif fmt == "csv":
        picked = parse_columns(columns, cols)
        rows = board["rows"] if picked is None else [{c.key: r.get(c.key) for c in picked} for r in board["rows"]]
        _emit_csv(rows)
        for line in footer(board):  # already prefixed (note: / left out:)
            err.print(line, markup=False, highlight=False)
    else:
        shown, notes = tables(board, out.width, wide=wide, columns=columns)
        for t in shown:
            out.print(t)
        for line in notes + footer(board):
            click.echo(line)


def _emit_csv(rows: list[dict]) -> None:
    """Rows as CSV on stdout (lists and dicts as JSON text; formula-looking cells neutralised
    as `judgecal export` does)."""
    from judgecal.views.export import write_rows

    write_rows(rows, Path("-"), "csv", columns=list(dict.fromkeys(k for r in rows for k in r)) or ["model"])
