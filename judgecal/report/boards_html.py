"""What an HTML page shows of a leaderboard: the cells, headers, SVG chart, legend and notes of
a score board (:func:`judgecal.views.leaderboard.build_leaderboard`) or a win-rate board
(:func:`judgecal.views.winrates.build_winrate_board`). One formatting for both HTML faces:
``judgecal serve``'s ``/leaderboard`` and ``/winrates`` pages and the static
``judgecal report`` page render these with the same Jinja2 partials
(``judgecal/report/templates/partials/``), so that a cell reads the same in the terminal
table, the web page and the report. Pure formatting: every text is escaped by the template
(autoescape) and by :func:`judgecal.report.svg.interval_chart`."""

from __future__ import annotations

from collections.abc import Callable

from judgecal.report import board as score
from judgecal.report import winboard
from judgecal.report.svg import interval_chart

#: A header's sort link: key -> URL or None (no link). The static report has none.
Href = Callable[[str], "str | None"]
#: A model's evidence link: model name -> URL of its items (the audit filtered to the model) or None.
Evidence = Callable[[str], "str | None"]


def score_chart(board: dict, rows: list[dict] | None = None) -> str | None:
    """The score board's dot-and-interval chart (raw and calibrated mean with their 95% CIs,
    one row per rated model, in ``rows``' order), or None without a rated model."""
    rows = board["rows"] if rows is None else rows
    return interval_chart(
        [{"label": r["model"], "values": {"raw": (r["mean_raw"], r["mean_raw_ci"]),
                                          "cal": (r["mean_calibrated"], r["mean_calibrated_ci"])}}
         for r in rows if r["mean_raw"] is not None],
        [("raw", "raw mean", "s-raw"), ("cal", "calibrated mean", "s-cal")],
        title=f"mean judge score per model (judge {board['judge']}), 95% bootstrap CI", axis="mean judge score")


def winrate_chart(board: dict) -> str | None:
    """The win-rate board's chart: raw, length-controlled and calibrated win rate (%) with
    their 95% CIs per model, in the board's order; None without a figure."""
    baseline = board["baseline"]
    return interval_chart(
        [{"label": r["model"], "values": {"raw": (r.get("win_rate"), r.get("win_rate_ci")),
                                          "lc": (r.get("length_controlled_winrate"),
                                                 r.get("length_controlled_winrate_ci")),
                                          "cal": (r.get("calibrated_win_rate"), r.get("calibrated_win_rate_ci"))}}
         for r in board["rows"]],
        [("raw", "win rate", "s-raw"), ("lc", "length-controlled", "s-lc"), ("cal", "calibrated", "s-cal")],
        title=f"win rate against {baseline} (%), 95% bootstrap CI", axis=f"win rate against {baseline} (%)")


#: columns a page always shows, even when no row has a value in them
_KEEP = frozenset({"model", "flags", "flag_codes"})


def _without_empty(heads: list[tuple], cells: list[list[str]]) -> tuple[list[tuple], list[list[str]], list[str]]:
    """``heads`` and ``cells`` without the columns where every row reads "-" (no value: acc
    columns on a board without a multiple-choice run, say), and the labels left out (the
    page names them: nothing is dropped without a word). A board without rows keeps them all."""
    if not cells:
        return heads, cells, []
    keep = [i for i, h in enumerate(heads) if h[1] in _KEEP or any(row[i] != "-" for row in cells)]
    dropped = [h[0] for i, h in enumerate(heads) if i not in set(keep)]
    return [heads[i] for i in keep], [[row[i] for i in keep] for row in cells], dropped


def score_board_view(board: dict, rows: list[dict] | None = None, href: Href | None = None,
                     evidence: Evidence | None = None) -> dict:
    """The score board for a page: {"heads": [(label, key, sort URL or None)], "cells": rows of
    the CLI table's strings, "empty": the labels of the columns left out because no row has a
    value there (:func:`_without_empty`), "chart": SVG or None, "legend": {flag code: meaning}, "footer":
    notes and left-out counts, "links": per row the URL of the model's evidence or None}.
    ``rows``: the board's rows in the order shown (default: the board's); ``href``: the sort
    link of a column key (None: no links); ``evidence``: the evidence link of a model."""
    rows = board["rows"] if rows is None else rows
    heads, cells, empty = _without_empty([(label, key, href(key) if href else None) for label, key in score.COLUMNS],
                                         [[score._cell(k, r.get(k)) for _, k in score.COLUMNS] for r in rows])
    return {"heads": heads, "cells": cells, "empty": empty,
            "chart": score_chart(board, rows), "legend": dict(board.get("flag_legend") or {}),
            "footer": score.left_out_lines(board), "links": [evidence(r["model"]) if evidence else None for r in rows]}


def winrate_board_view(board: dict, href: Href | None = None, evidence: Evidence | None = None) -> dict:
    """The win-rate board for a page: heads, cells (the CLI table's strings, in the board's
    order; columns without any value left out and named in "empty"), chart, "caption" (:func:`judgecal.report.winboard.title`), the verbosity spreads
    ("spread_heads", "spreads") and "footer" (notes with the flag legend, left-out counts,
    the external-ranking comparison), "links" (per row the model's evidence URL or None:
    ``evidence``)."""
    heads, cells, empty = _without_empty(
        [(label, key, href(key) if href else None) for label, key in winboard.COLUMNS],
        [[winboard._cell(k, r.get(k)) for _, k in winboard.COLUMNS] for r in board["rows"]])
    return {"heads": heads, "cells": cells, "empty": empty,
            "chart": winrate_chart(board), "caption": winboard.title(board),
            "spread_heads": [c for c, _ in winboard.SPREAD_COLUMNS],
            "spreads": [[winboard._cell(k, s.get(k)) for _, k in winboard.SPREAD_COLUMNS]
                        for s in board["verbosity_spreads"]],
            "footer": winboard.footer_lines(board),
            "links": [evidence(r["model"]) if evidence else None for r in board["rows"]]}
