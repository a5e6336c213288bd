"""Renderers of the Bradley-Terry board (``judgecal bt``): rich table, Markdown (cells escaped
as every board's). Pure formatting."""

from __future__ import annotations

import math

from rich.table import Table

from judgecal.calibrate.ranking import WIN_RATE_DECIMALS
from judgecal.report.render_markdown import md_cell, md_escape
from judgecal.report.tables import Col, board_table, markdown_columns, parse_columns

#: the board's columns (level 0: always; 1: when the terminal is wide enough; 2: --wide)
COLS = [
    Col("rank", "rank", 1, priority=2), Col("model", "model", 0, "name"), Col("rating", "rating", 0),
    Col("rating CI", "rating_ci", 1, priority=1), Col("win rate vs baseline", "win_rate", 0),
    Col("CI", "win_rate_ci", 1, priority=1), Col("battles", "n_battles", 1, priority=3),
    Col("opponents", "n_opponents", 1, priority=3), Col("items", "n_items", 2),
    Col("mean credit", "mean_credit", 1, priority=4), Col("coef", "coef", 2),
]


def _num(x: float, digits: int) -> str:
    return "inf" if x == math.inf else "-inf" if x == -math.inf else f"{x:.{digits}f}"


def _cell(key: str, value) -> str:
    if value is None:
        return "-"
    if key.endswith("_ci"):
        d = 1 if key == "rating_ci" else WIN_RATE_DECIMALS
        return f"[{_num(value[0], d)}, {_num(value[1], d)}]"
    if key == "rating":
        return _num(value, 1)
    if key == "win_rate":
        return _num(value, WIN_RATE_DECIMALS)
    if key in ("mean_credit", "coef"):
        return f"{value:.4f}"
    return str(value)


def title(board: dict) -> str:
    """One line naming family, judge, baseline, outcome and the bootstrap."""
    boot = (f"{board['n_bootstrap']} item resamples (seed {board['seed']}), 95% CIs" if board["n_bootstrap"]
            else "no bootstrap")
    return (f"Bradley-Terry: {board['task_family']}, judge {board['judge']}, baseline {board['baseline']} = 1000 "
            f"(win rate 50%); outcome {board['outcome']}; {board['n_battles']} battles, {board['n_pairs']} model pairs, "
            f"{board['n_items']} items; {boot}")


def footer_lines(board: dict) -> list[str]:
    """Notes, models set apart and verdicts left out, one line each."""
    lines = [f"note: {n}" for n in board["notes"]]
    lines.append("note: rating = 1000 + 400 log10(odds against the baseline); win rate vs baseline = 1 / (1 + "
                 "10^((1000 - rating) / 400)) (Arena-Hard-Auto show_result.py)")
    for x in board["set_apart"]:
        lines.append(f"set apart: {x['model']} ({x['n_battles']} battles): {x['why']}")
    for reason, n in sorted(board["left_out"].items()):
        lines.append(f"left out: {n} verdicts: {reason}")
    return lines


def _cells(board: dict) -> list[list[str]]:
    return [[_cell(c.key, r.get(c.key)) for c in COLS] for r in board["rows"]]


def bt_tables(board: dict, width: int = 120, *, wide: bool = False,
              columns: str | None = None) -> tuple[list[Table], list[str]]:
    """The board as a rich Table that fits ``width`` and the lines naming columns left out."""
    table, notes = board_table(title(board), COLS, _cells(board), width, wide=wide, only=parse_columns(columns, COLS))
    return [table], notes


def bt_markdown(board: dict, *, columns: str | None = None) -> str:
    """The board as Markdown (at most 10 columns; every cell through :func:`md_escape`)."""
    from judgecal.report.board import column_lines

    cells = _cells(board)
    shown, hidden, empty = markdown_columns(COLS, cells, only=parse_columns(columns, COLS))
    row = lambda cs: "| " + " | ".join(md_cell(c) for c in cs) + " |"  # noqa: E731
    lines = [f"### {md_cell(title(board))}", "", row([COLS[i].header for i in shown]), "|" + "---|" * len(shown)]
    lines += [row([r[i] for i in shown]) for r in cells]
    foot = footer_lines(board) + column_lines(hidden, empty)
    if foot:
        lines += [""] + [f"- {md_escape(x)}" for x in foot]
    return "\n".join(lines) + "\n"
