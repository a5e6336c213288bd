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
#: a style-controlled board's columns: the controlled fit first, the plain one beside it (at 80
#: characters the rank change stands for the uncontrolled rank, shown first when there is room)
COLS_CONTROLLED = [
    Col("rank", "rank_controlled", 0), Col("model", "model", 0, "name"), Col("rating", "rating", 0),
    Col("rating CI", "rating_ci", 1, priority=1), Col("win rate vs baseline", "win_rate", 0),
    Col("CI", "win_rate_ci", 1, priority=1), Col("rank uncontrolled", "rank_uncontrolled", 1, priority=0),
    Col("change", "change", 0), Col("rating uncontrolled", "rating_uncontrolled", 1, priority=2),
    Col("win rate uncontrolled", "win_rate_uncontrolled", 1, priority=2),
    Col("CI uncontrolled", "win_rate_uncontrolled_ci", 2), Col("rating CI uncontrolled", "rating_uncontrolled_ci", 2),
    Col("battles", "n_battles", 1, priority=3), Col("opponents", "n_opponents", 2), Col("items", "n_items", 2),
    Col("mean credit", "mean_credit", 2), Col("coef", "coef", 2), Col("coef uncontrolled", "coef_uncontrolled", 2),
    Col("flags", "flag_codes", 0, "text"),
]
#: the style coefficients' columns
COEF_COLS = [
    Col("feature", "feature", 0, "name"), Col("coef (log-odds per sd)", "coef", 0), Col("CI", "coef_ci", 0),
    Col("odds ratio", "odds_ratio", 0), Col("odds ratio CI", "odds_ratio_ci", 1, priority=1),
    Col("raw sd", "raw_sd", 1, priority=2), Col("meaning", "meaning", 1, "text", priority=3),
]


def cols_of(board: dict) -> list:
    """The columns of ``board``: :data:`COLS_CONTROLLED` for a style-controlled one."""
    return COLS_CONTROLLED if board.get("style") else COLS


def _num(x: float | None, digits: int) -> str:
    if x is None:  # a non-finite figure read back from strict JSON (the report's)
        return "-"
    if x == math.inf or x == -math.inf:
        return "inf" if x > 0 else "-inf"
    return f"{x:.{digits}f}" if abs(x) < 1e7 else f"{x:.3g}"  # a fit that runs off (separation): short


def _cell(key: str, value) -> str:
    if value is None:
        return "-"
    if key in ("coef_ci", "odds_ratio_ci"):
        return f"[{_num(value[0], 4)}, {_num(value[1], 4)}]"
    if key.endswith("_ci"):
        d = 1 if key.startswith("rating") else WIN_RATE_DECIMALS
        return f"[{_num(value[0], d)}, {_num(value[1], d)}]"
    if key.startswith("rating") and not key.startswith("rank"):
        return _num(value, 1)
    if key.startswith("win_rate"):
        return _num(value, WIN_RATE_DECIMALS)
    if key in ("mean_credit", "raw_sd", "odds_ratio") or key.startswith("coef"):
        return _num(value, 4)
    if key == "flag_codes":
        return ", ".join(value)
    if key == "change":
        return f"{value:+d}" if value else "0"
    return str(value)


def title(board: dict) -> str:
    """One line naming family, judge, baseline, outcome and the bootstrap."""
    boot = (f"{board['n_bootstrap']} item resamples (seed {board['seed']}), 95% CIs" if board["n_bootstrap"]
            else "no bootstrap")
    st = board.get("style")
    ctl = ""
    if st:
        unit = st["length_unit"] + (f" under {st['tokenizer']}" if st["tokenizer"] else "")
        ctl = f"; style control: {st['control']} (lengths in {unit}), uncontrolled beside it"
    return (f"Bradley-Terry: {board['task_family']}, judge {board['judge']}, baseline {board['baseline']} = 1000 "
            f"(win rate 50%); outcome {board['outcome']}; {board['n_battles']} battles, {board['n_pairs']} model pairs, "
            f"{board['n_items']} items; {boot}{ctl}")


def coef_title(board: dict) -> str:
    """One line naming the style coefficients' board (family, judge: a report holds many), scale and source."""
    st = board["style"]
    return (f"Style coefficients ({st['control']}), {board['task_family']}, judge {board['judge']}: {st['scale']}; "
            "exp(coef) = odds ratio; "
            f"{board['n_bootstrap']} item resamples, 95% CIs")


def footer_lines(board: dict) -> list[str]:
    """Notes, models set apart and verdicts left out, one line each."""
    lines = [f"note: {n}" for n in board["notes"]]
    lines.append("note: rating = 1000 + 400 log10(odds against the baseline); win rate vs baseline = 1 / (1 + "
                 "10^((1000 - rating) / 400)) (Arena-Hard-Auto show_result.py)")
    for x in board["set_apart"]:
        lines.append(f"set apart: {x['model']} ({x['n_battles']} battles): {x['why']}")
    for r in board["rows"]:
        for c, msg in zip(r.get("flag_codes") or [], r.get("flags") or []):
            lines.append(f"flag {c}: {r['model']}: {msg}")
    for reason, n in sorted(board["left_out"].items()):
        lines.append(f"left out: {n} verdicts: {reason}")
    st = board.get("style")
    if st:
        lines.append("note: style control as Arena-Hard-Auto (show_result.py): " + "; ".join(
            f"{c['feature']} coef {c['coef']:+.4f}" for c in st["coefficients"])
            + " (log-odds per sd; CIs: --coefficients or --format json); rank change = rank uncontrolled - rank "
              "controlled (positive: moved up under control)")
    return lines


def _cells(board: dict, cols=None, rows=None) -> list[list[str]]:
    cols = cols_of(board) if cols is None else cols
    return [[_cell(c.key, r.get(c.key)) for c in cols] for r in (board["rows"] if rows is None else rows)]


def coefficient_rows(board: dict) -> list[dict]:
    """The style coefficients as rows (:data:`COEF_COLS` keys and the raw mean); [] on a plain board."""
    st = board.get("style")
    return [dict(c) for c in st["coefficients"]] if st else []


def bt_tables(board: dict, width: int = 120, *, wide: bool = False,
              columns: str | None = None) -> tuple[list[Table], list[str]]:
    """The board as a rich Table that fits ``width`` (and, style-controlled, the coefficients'
    table under it) and the lines naming columns left out."""
    cols = cols_of(board)
    table, notes = board_table(title(board), cols, _cells(board), width, wide=wide, only=parse_columns(columns, cols))
    out = [table]
    if board.get("style") and columns is None:
        ct, cn = board_table(coef_title(board), COEF_COLS, _cells(board, COEF_COLS, coefficient_rows(board)), width,
                             wide=wide)
        out.append(ct)
        notes = notes + cn
    return out, notes


def coef_tables(board: dict, width: int = 120, *, wide: bool = False,
                columns: str | None = None) -> tuple[list[Table], list[str]]:
    """The style coefficients alone as a rich Table (``judgecal bt --coefficients``)."""
    table, notes = board_table(coef_title(board), COEF_COLS, _cells(board, COEF_COLS, coefficient_rows(board)), width,
                               wide=wide, only=parse_columns(columns, COEF_COLS))
    return [table], notes


def _md_table(heading: str, cols, cells, columns) -> tuple[list[str], list[str], list[str]]:
    shown, hidden, empty = markdown_columns(cols, cells, only=parse_columns(columns, cols))
    row = lambda cs: "| " + " | ".join(md_cell(c) for c in cs) + " |"  # noqa: E731
    lines = [f"### {md_cell(heading)}", "", row([cols[i].header for i in shown]), "|" + "---|" * len(shown)]
    lines += [row([r[i] for i in shown]) for r in cells]
    return lines, hidden, empty


def bt_markdown(board: dict, *, columns: str | None = None) -> str:
    """The board as Markdown (at most 10 columns; every cell through :func:`md_escape`), the
    style coefficients' table under a style-controlled one."""
    from judgecal.report.board import column_lines

    cols = cols_of(board)
    lines, hidden, empty = _md_table(title(board), cols, _cells(board), columns)
    if board.get("style") and columns is None:
        more, h2, e2 = _md_table(coef_title(board), COEF_COLS, _cells(board, COEF_COLS, coefficient_rows(board)), None)
        lines += [""] + more
        hidden, empty = hidden + h2, empty + e2
    foot = footer_lines(board) + column_lines(hidden, empty)
    if foot:
        lines += [""] + [f"- {md_escape(x)}" for x in foot]
    return "\n".join(lines) + "\n"


def coef_markdown(board: dict, *, columns: str | None = None) -> str:
    """The style coefficients alone as Markdown (``judgecal bt --coefficients``)."""
    lines, _, _ = _md_table(coef_title(board), COEF_COLS, _cells(board, COEF_COLS, coefficient_rows(board)), columns)
    return "\n".join(lines) + "\n"


#: the web page's board columns (``judgecal serve``'s /bt): a value's CI right after it (shown under it)
WEB_COLS = [("rank", "rank"), ("model", "model"), ("rating", "rating"), ("rating CI", "rating_ci"),
            ("win rate vs baseline", "win_rate"), ("CI", "win_rate_ci"), ("battles", "n_battles"),
            ("opponents", "n_opponents"), ("mean credit", "mean_credit")]
WEB_COLS_CONTROLLED = [
    ("rank", "rank_controlled"), ("model", "model"), ("rating", "rating"), ("rating CI", "rating_ci"),
    ("win rate vs baseline", "win_rate"), ("CI", "win_rate_ci"), ("rank uncontrolled", "rank_uncontrolled"),
    ("change", "change"), ("rating uncontrolled", "rating_uncontrolled"), ("CI", "rating_uncontrolled_ci"),
    ("win rate uncontrolled", "win_rate_uncontrolled"), ("CI", "win_rate_uncontrolled_ci"), ("battles", "n_battles"),
    ("flags", "flag_codes")]


def web_view(board: dict, evidence=None) -> dict:
    """The board for a page (the shape of :func:`judgecal.report.boards_html.winrate_board_view`,
    which the board partial reads): "heads" [(label, key, None)], "cells" (this module's cell
    strings; a ``*_ci`` column right after its value), "links" (per row ``evidence(model)`` or
    None), "caption" (:func:`title`), "footer" (:func:`footer_lines`), "coef_heads" / "coef_cells"
    (the style coefficients, [] on a plain board), "coef_caption", "apart" [(model, battles, why,
    link)]; "empty", "chart", "spreads", "spread_heads" empty."""
    cols = WEB_COLS_CONTROLLED if board.get("style") else WEB_COLS
    coef = coefficient_rows(board)
    return {"heads": [(label, key, None) for label, key in cols],
            "cells": [[_cell(k, r.get(k)) for _, k in cols] for r in board["rows"]],
            "links": [evidence(r["model"]) if evidence else None for r in board["rows"]],
            "caption": title(board), "footer": footer_lines(board), "empty": [], "chart": None, "spreads": [],
            "spread_heads": [],
            "coef_heads": [c.header for c in COEF_COLS], "coef_keys": [c.key for c in COEF_COLS],
            "coef_cells": [[_cell(c.key, r.get(c.key)) for c in COEF_COLS] for r in coef],
            "coef_caption": coef_title(board) if coef else None,
            "apart": [(x["model"], x["n_battles"], x["why"], evidence(x["model"]) if evidence else None)
                      for x in board["set_apart"]]}
