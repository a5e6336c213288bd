"""Leaderboard and check renderers: rich table, Markdown, CSV rows."""

from __future__ import annotations

from rich.table import Table

from judgecal.calibrate.ranking import SCORE_DECIMALS
from judgecal.report.tables import Col, board_table, markdown_columns, parse_columns, simple_table

#: The score board's columns (level 0: always; 1: when the terminal is wide enough; 2: --wide)
COLS = [
    Col("model", "model", 0, "name"), Col("n", "n_rated", 1, priority=3), Col("raw", "mean_raw", 0),
    Col("raw CI", "mean_raw_ci", 1, priority=1), Col("calibrated", "mean_calibrated", 0),
    Col("cal. CI", "mean_calibrated_ci", 1, priority=1), Col("rank raw", "rank_raw", 1, priority=2),
    Col("rank cal.", "rank_calibrated", 0), Col("change", "rank_change", 1, priority=2),
    Col("mean length", "mean_length", 1, priority=3),
    Col("verbosity win-rate raw", "verbosity_win_rate", 1, priority=4),
    Col("verbosity win-rate cal.", "verbosity_win_rate_calibrated", 1, priority=4),
    Col("acc", "acc", 1, priority=2), Col("acc_norm", "acc_norm", 1, priority=2), Col("acc_bytes", "acc_bytes", 2),
    Col("acc_norm-acc", "acc_norm_minus_acc", 2), Col("bits/byte", "bits_per_byte", 2), Col("flags", "flag_codes", 0, "text"),
]
COLUMNS = [(c.header, c.key) for c in COLS]


def _cell(key: str, value) -> str:
    if value is None:
        return "-"
    if key.endswith("_ci"):
        return f"[{value[0]:.2f}, {value[1]:.2f}]"
    if key == "rank_change":
        return f"{value:+d}" if value else "0"
    if key == "flags":
        return "; ".join(value) or "-"
    if key == "flag_codes":
        return " ".join(value) or "-"
    if isinstance(value, float):  # means at the precision they are ranked on
        return f"{value:.1f}" if key == "mean_length" else f"{value:.{SCORE_DECIMALS}f}"
    return str(value)


def _title(board: dict) -> str:
    cals = ", ".join([f"{k}: #{v}" for k, v in board["calibrations"].items()]
                     + [f"{k}: #{v['id']} fitted on {v['fitted_on']}" for k, v in (board.get("calibrations_from") or {}).items()]) or "none"
    return f"leaderboard: judge {board['judge']} (calibrations {cals})"


def _cells(board: dict) -> list[list[str]]:
    return [[_cell(c.key, r.get(c.key)) for c in COLS] for r in board["rows"]]


def leaderboard_tables(board: dict, width: int = 120, *, wide: bool = False,
                       columns: str | None = None) -> tuple[list[Table], list[str]]:
    """The leaderboard as a one-table list of rich Tables that fits ``width`` characters (as
    :func:`judgecal.report.winboard.winboard_tables`), and the lines that say which columns it
    left out (:func:`judgecal.report.tables.board_table`); ``columns``: the ``--columns`` list
    (raises UsageError on an unknown name)."""
    table, notes = board_table(_title(board), COLS, _cells(board), width, wide=wide, only=parse_columns(columns, COLS))
    return [table], notes


def leaderboard_markdown(board: dict, *, columns: str | None = None) -> str:
    """The leaderboard as a Markdown table of at most 10 columns (flags as codes, their legend
    and the columns left out under it; ``columns``: the ``--columns`` list). Every name
    (models, judge, families, flags) goes through
    :func:`judgecal.report.render_markdown.md_escape`: ``<``, ``>``, ``&`` become HTML entities
    and Markdown metacharacters are escaped, so a model called ``<script>`` or
    ``"><img onerror=...>`` is shown as text wherever the Markdown is rendered as HTML."""
    from judgecal.report.render_markdown import md_cell, md_escape

    cells = _cells(board)
    shown, hidden, empty = markdown_columns(COLS, cells, only=parse_columns(columns, COLS))
    lines = [f"### {md_cell(_title(board))}", "", "| " + " | ".join(md_cell(COLS[i].header) for i in shown) + " |",
             "|" + "---|" * len(shown)]
    for row in cells:
        lines.append("| " + " | ".join(md_cell(row[i]) for i in shown) + " |")
    foot = legend_lines(board) + column_lines(hidden, empty) + left_out_lines(board)
    if foot:
        lines += [""] + [f"- {md_escape(x)}" for x in foot]
    return "\n".join(lines) + "\n"


def legend_lines(board: dict) -> list[str]:
    """'flags: code = meaning; ...' for the codes the board uses (empty list: none)."""
    legend = board.get("flag_legend") or {}
    return ["flags: " + "; ".join(f"{c} = {m}" for c, m in legend.items())] if legend else []


def column_lines(hidden: list[str], empty: list[str], how: str = "--columns picks, JSON and CSV hold all") -> list[str]:
    """The Markdown table's note on the columns it leaves out (``how``: where to find them)."""
    out = []
    if hidden:
        out.append(f"columns not shown (at most 10; {how}): {', '.join(hidden)}")
    if empty:
        out.append(f"columns without a value on this board: {', '.join(empty)}")
    return out


def left_out_lines(board: dict) -> list[str]:
    """'note: ...' for every note of the board (e.g. a calibration stored before the short-side
    floor), then 'left out: N <reason>' for every count in ``board['left_out']``."""
    return ([f"note: {n}" for n in board.get("notes") or []]
            + [f"left out: {n} {reason}" for reason, n in sorted((board.get("left_out") or {}).items())])


def check_table(result: dict) -> Table:
    """`judgecal check` results as a rich Table."""
    rows = [["PASS" if c["ok"] else "FAIL", c["task_family"], c["judge"], c["check"], c["message"]] for c in result["checks"]]
    return simple_table("judgecal check: " + ("all thresholds hold" if result["ok"] else "FAILED"),
                        ["", "task family", "judge", "check", "detail"], rows)
