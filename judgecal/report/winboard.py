"""Renderers of the win-rate leaderboard (``judgecal leaderboard --baseline``): rich table,
Markdown (names HTML-escaped, pipes escaped), AlpacaEval's leaderboard CSV. Pure formatting."""

from __future__ import annotations

from rich.table import Table

from judgecal.calibrate.ranking import WIN_RATE_DECIMALS
from judgecal.importers.records import csv_line, neutralise_cell
from judgecal.report.render_markdown import md_cell, md_escape
from judgecal.report.tables import Col, board_table, markdown_columns, parse_columns

#: The win-rate board's columns (level 0: always; 1: when the terminal is wide enough; 2: --wide)
COLS = [
    Col("model", "model", 0, "name"), Col("n", "n_items", 1, priority=3), Col("win rate", "win_rate", 0),
    Col("CI", "win_rate_ci", 1, priority=1), Col("LC win rate", "length_controlled_winrate", 0),
    Col("LC CI", "length_controlled_winrate_ci", 1, priority=1), Col("calibrated", "calibrated_win_rate", 0),
    Col("cal. CI", "calibrated_win_rate_ci", 1, priority=1), Col("rank raw", "rank_raw", 1, priority=4),
    Col("rank LC", "rank_lc", 1, priority=2), Col("rank cal.", "rank_calibrated", 1, priority=4),
    Col("change cal.", "rank_change_calibrated", 1, priority=4), Col("avg length", "avg_length", 1, priority=3),
    Col("flags", "flag_codes", 0, "text"),
]
COLUMNS = [(c.header, c.key) for c in COLS]
#: ``--format alpaca-eval``: AlpacaEval's leaderboard columns (same names and meanings, in its
#: order, the model in an unnamed first column), then judgecal's additions
ALPACA_EVAL_COLUMNS = ["win_rate", "standard_error", "n_wins", "n_wins_base", "n_draws", "n_total", "discrete_win_rate",
                       "mode", "avg_length", "length_controlled_winrate", "lc_standard_error"]
EXTRA_COLUMNS = ["calibrated_win_rate", "win_rate_ci_low", "win_rate_ci_high", "lc_ci_low", "lc_ci_high",
                 "calibrated_ci_low", "calibrated_ci_high", "rank_raw", "rank_lc", "rank_calibrated", "rank_change_lc",
                 "rank_change_calibrated", "n_missing", "flags"]
SPREAD_COLS = [
    Col("family", "family", 1, "name"), Col("longer", "longer", 0, "name"), Col("shorter", "shorter", 0, "name"),
    Col("items", "n_common_items", 1), Col("spread raw", "spread_raw", 0), Col("spread LC", "spread_lc", 0),
    Col("spread cal.", "spread_calibrated", 0), Col("verbosity WR raw", "implied_verbosity_win_rate_raw", 1),
    Col("verbosity WR LC", "implied_verbosity_win_rate_lc", 1),
    Col("verbosity WR cal.", "implied_verbosity_win_rate_calibrated", 1),
]
SPREAD_COLUMNS = [(c.header, c.key) for c in SPREAD_COLS]


def _cell(key: str, value) -> str:
    if value is None:
        return "-"
    if key.endswith("_ci"):
        return f"[{value[0]:.1f}, {value[1]:.1f}]"
    if key.startswith("rank_change"):
        return f"{value:+d}" if value else "0"
    if key in ("flags", "flag_codes"):
        return ("; " if key == "flags" else " ").join(value) or "-"
    if isinstance(value, float):  # win rates at the precision they are ranked on
        return f"{value:.0f}" if key == "avg_length" else f"{value:.{WIN_RATE_DECIMALS}f}"
    return str(value)


def title(board: dict) -> str:
    """One line naming family, judge, baseline, unit and the fitted penalty."""
    c = board["calibration"]
    reg = board["lc"]["regulariser_source"]
    if reg == "alpaca-eval":  # AlpacaEval's, its GLM weights packaged or from --lc-weights FILE
        reg = (f"AlpacaEval (GLM weights from {board['lc']['weights_file']})" if board["lc"].get("weights_file")
               else "AlpacaEval (packaged)")
    fit = (f"gamma {c['gamma']:.3f}, p {c['p']:.2f}" if c.get("identified", True)
           else "not identified (no values; the notes say why)")
    return (f"win rates vs {board['baseline']}: {board['task_family']}, judge {board['judge']}; LC regulariser: "
            f"{reg}; calibrated: "
            f"{fit}, length in {board['length_unit']}, L_ref = baseline's answer, "
            f"short-side floor {c['short_floor']:g}; sorted by {board['sort_by']}")


def _footer(board: dict) -> list[str]:
    lines = [f"note: {n}" for n in board["notes"]]
    lines.append(f"note: LC difficulty: {board['lc']['difficulty']}; calibration strength from {board['calibration']['strength_from']}")
    if board.get("flag_legend"):
        lines.append("note: flags: " + "; ".join(f"{c} = {m}" for c, m in board["flag_legend"].items()))
    for reason, n in sorted(board["left_out"].items()):
        lines.append(f"left out: {n} verdicts: {reason}")
    cmp_ = board.get("comparison")
    if cmp_:
        for col in ("raw", "lc", "calibrated"):
            c = cmp_[col]
            if c["spearman"] is None:
                lines.append(f"vs {cmp_['file']}: {col}: no correlation: {c.get('undefined') or 'fewer than 3 matched models'}")
                continue
            ci = lambda v: f" [{v[0]:.3f}, {v[1]:.3f}]" if v else ""  # noqa: E731
            lines.append(f"vs {cmp_['file']} ({c['n_models']} models): {col}: Spearman {c['spearman']:.3f}{ci(c['spearman_ci'])}, "
                         f"Kendall {c['kendall']:.3f}{ci(c['kendall_ci'])}"
                         + (f" ({len(c['left_out'])} models without a {col} value left out: {', '.join(c['left_out'])})"
                            if c.get("left_out") else ""))
        if cmp_["unmatched_here"]:
            lines.append(f"not in {cmp_['file']}: {', '.join(cmp_['unmatched_here'])}")
        if cmp_["unmatched_there"]:
            lines.append(f"in {cmp_['file']} but not here: {len(cmp_['unmatched_there'])} models")
    return lines


def _cells(board: dict) -> list[list[str]]:
    return [[_cell(c.key, r.get(c.key)) for c in COLS] for r in board["rows"]]


def winboard_tables(board: dict, width: int = 120, *, wide: bool = False,
                    columns: str | None = None) -> tuple[list[Table], list[str]]:
    """The board (and the verbosity spreads, when any) as rich Tables that fit ``width``
    characters, and the lines that say which columns were left out
    (:func:`judgecal.report.tables.board_table`; ``columns``: the ``--columns`` list)."""
    table, notes = board_table(title(board), COLS, _cells(board), width, wide=wide, only=parse_columns(columns, COLS))
    out = [table]
    if board["verbosity_spreads"]:
        spreads, more = board_table("verbosity families: longer minus shorter variant (points); implied verbosity win-rate (%)",
                                    SPREAD_COLS, [[_cell(c.key, s.get(c.key)) for c in SPREAD_COLS]
                                                  for s in board["verbosity_spreads"]], width, wide=wide)
        out.append(spreads)
        notes += [f"verbosity families: {n}" for n in more]
    return out, notes


def footer_lines(board: dict) -> list[str]:
    """Notes, left-out counts and the external-ranking comparison, one line each."""
    return _footer(board)


def _md_row(cells: list[str]) -> str:
    return "| " + " | ".join(md_cell(c) for c in cells) + " |"


def winboard_markdown(board: dict, *, columns: str | None = None) -> str:
    """The board as Markdown of at most 10 columns (flags as codes with their legend, the
    columns left out named under it; ``columns``: the ``--columns`` list): every cell through
    :func:`md_escape` (HTML entities, Markdown emphasis, pipes and links neutralised: the page
    may be rendered)."""
    from judgecal.report.board import column_lines

    cells = _cells(board)
    shown, hidden, empty = markdown_columns(COLS, cells, only=parse_columns(columns, COLS))
    lines = [f"### {md_cell(title(board))}", "", _md_row([COLS[i].header for i in shown]), "|" + "---|" * len(shown)]
    lines += [_md_row([row[i] for i in shown]) for row in cells]
    if board["verbosity_spreads"]:
        lines += ["", "#### verbosity families", "", _md_row([c for c, _ in SPREAD_COLUMNS]), "|" + "---|" * len(SPREAD_COLUMNS)]
        lines += [_md_row([_cell(k, s.get(k)) for _, k in SPREAD_COLUMNS]) for s in board["verbosity_spreads"]]
    foot = _footer(board) + column_lines(hidden, empty)
    if foot:
        lines += [""] + [f"- {md_escape(x)}" for x in foot]
    return "\n".join(lines) + "\n"


def _ci_cells(ci) -> tuple:
    return (None, None) if not ci else (ci[0], ci[1])


def alpaca_eval_rows(board: dict) -> list[dict]:
    """The board's rows as ``--format alpaca-eval`` records: AlpacaEval's columns with its
    meanings (:data:`ALPACA_EVAL_COLUMNS`), then judgecal's (:data:`EXTRA_COLUMNS`; CIs as
    low/high columns, flags as space-separated codes of ``board["flag_legend"]``)."""
    out = []
    for r in board["rows"]:
        rec = {"": r["model"], **{k: r.get(k) for k in ALPACA_EVAL_COLUMNS}, "calibrated_win_rate": r.get("calibrated_win_rate")}
        rec["win_rate_ci_low"], rec["win_rate_ci_high"] = _ci_cells(r.get("win_rate_ci"))
        rec["lc_ci_low"], rec["lc_ci_high"] = _ci_cells(r.get("length_controlled_winrate_ci"))
        rec["calibrated_ci_low"], rec["calibrated_ci_high"] = _ci_cells(r.get("calibrated_win_rate_ci"))
        for k in ("rank_raw", "rank_lc", "rank_calibrated", "rank_change_lc", "rank_change_calibrated", "n_missing"):
            rec[k] = r.get(k)
        rec["flags"] = " ".join(r.get("flag_codes") or []) or None
        out.append(rec)
    return out


def _csv_cell(value) -> str | None:
    if value is None:
        return None
    if isinstance(value, float):
        return "" if value != value else repr(value)
    if isinstance(value, str):
        return neutralise_cell(value)
    return str(value)


def alpaca_eval_csv(board: dict) -> str:
    """``--format alpaca-eval``: AlpacaEval's leaderboard CSV (the header ``,win_rate,...``,
    one line per model, LF line ends and full-precision floats as pandas writes them), so that
    ``diff`` against AlpacaEval's ``leaderboard.csv`` shows only real differences; judgecal's
    columns follow AlpacaEval's."""
    cols = [""] + ALPACA_EVAL_COLUMNS + EXTRA_COLUMNS
    lines = [",".join(cols[1:]).join([",", ""]) + "\n"]
    for rec in alpaca_eval_rows(board):
        lines.append(csv_line([_csv_cell(rec[c]) for c in cols])[:-2] + "\n")
    return "".join(lines)
