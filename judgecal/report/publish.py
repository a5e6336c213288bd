"""The publish board (:func:`judgecal.views.publish.build_publish`) as terminal tables,
Markdown, CSV rows and AlpacaEval's leaderboard CSV columns."""

from __future__ import annotations

from rich.table import Table

from judgecal.calibrate.ranking import SCORE_DECIMALS, WIN_RATE_DECIMALS
from judgecal.report.tables import Col, board_table, markdown_columns

COLS = [
    Col("rank", "rank", 0), Col("model", "model", 0, "name"), Col("published", "score", 0),
    Col("95% CI", "score_ci", 1, priority=1), Col("raw", "raw", 1, priority=2), Col("calibrated", "calibrated", 1, priority=3),
    Col("LC", "lc", 1, priority=3), Col("n", "n", 1, priority=4), Col("mean length", "mean_length", 1, priority=5),
    Col("flags", "flags", 1, "text", priority=6),
]
APART_COLS = [Col("model", "model", 0, "name"), Col("value", "score", 0), Col("raw", "raw", 1, priority=1),
              Col("set apart because", "reason", 0, "text")]


def _decimals(board: dict) -> int:
    return WIN_RATE_DECIMALS if board["kind"] == "winrate" else SCORE_DECIMALS


def cell(board: dict, key: str, value) -> str:
    """A board value as shown: numbers at the precision they are ranked on, a CI as [lo, hi],
    flags joined by '; ', None as '-'."""
    d = _decimals(board)
    if value is None:
        return "-"
    if key.endswith("_ci"):
        return f"[{value[0]:.{d}f}, {value[1]:.{d}f}]"
    if key == "flags":
        return " ".join(value) or "-"
    if key == "mean_length":
        return f"{value:.0f}"
    if isinstance(value, float):
        return f"{value:.{d}f}"
    return str(value)


def title(board: dict) -> str:
    """'llmbar/Natural / judge GPT-4: published raw' (win rates: 'against BASELINE'); where
    judges share the name (``judge_ref`` is ``id:N``) the judge reads 'GPT-4 (id:N)'."""
    against = f" against {board['baseline']}" if board.get("baseline") else ""
    ref = board.get("judge_ref") or ""
    judge = f"{board['judge']} ({ref})" if ref.startswith("id:") and ref != board["judge"] else board["judge"]
    return f"{board['task_family']} / judge {judge}{against}: published {board['published']}"


def publish_tables(result: dict, width: int = 120, *, wide: bool = False) -> list[tuple[Table, list[str]]]:
    """Per board: the ranked table and the set-apart table (when any) that fit ``width``
    characters, each with the lines to print under it (the advice first, then what was
    left out and the board's notes): [(table, lines)]."""
    out = []
    for b in result["boards"]:
        cells = [[cell(b, c.key, r.get(c.key)) for c in COLS] for r in b["rows"]]
        table, notes = board_table(title(b), COLS, cells, width, wide=wide)
        lines = [f"advice: {b['advice']}"] + notes + _legend_lines(b)
        out.append((table, lines))
        if b["set_apart"]:
            cells = [[cell(b, c.key, a.get(c.key)) for c in APART_COLS] for a in b["set_apart"]]
            t2, n2 = board_table(f"{b['task_family']}: set apart, not ranked ({len(b['set_apart'])})", APART_COLS, cells,
                                 width, wide=wide)
            out.append((t2, n2 + [f"note: {n}" for n in b["notes"]]))
        else:
            lines += [f"note: {n}" for n in b["notes"]]
    return out


def _legend_lines(board: dict) -> list[str]:
    legend = board.get("flag_legend") or {}
    return ["flags: " + "; ".join(f"{c} = {m}" for c, m in legend.items())] if legend else []


def publish_markdown(result: dict) -> str:
    """The boards as Markdown (names escaped by :func:`judgecal.report.render_markdown.md_cell`)."""
    from judgecal.report.render_markdown import md_cell, md_escape

    lines: list[str] = []
    for b in result["boards"]:
        cells = [[cell(b, c.key, r.get(c.key)) for c in COLS] for r in b["rows"]]
        shown, hidden, empty = markdown_columns(COLS, cells)
        lines += [f"### {md_cell(title(b))}", "", f"Advice: {md_escape(b['advice'])}", "",
                  "| " + " | ".join(md_cell(COLS[i].header) for i in shown) + " |", "|" + "---|" * len(shown)]
        lines += ["| " + " | ".join(md_cell(row[i]) for i in shown) + " |" for row in cells]
        if b["set_apart"]:
            lines += ["", f"Set apart, not ranked ({len(b['set_apart'])}):", ""]
            lines += [f"- {md_escape(a['model'])}: {md_escape(a['reason'])}" for a in b["set_apart"]]
        foot = ([f"columns without a value on this board: {', '.join(empty)}"] if empty else []) + \
               ([f"columns not shown (JSON and CSV hold all): {', '.join(hidden)}"] if hidden else []) + \
               _legend_lines(b) + [f"note: {n}" for n in b["notes"]]
        if foot:
            lines += [""] + [f"- {md_escape(x)}" for x in foot]
        lines.append("")
    return "\n".join(lines)


CSV_FIELDS = ("task_family", "judge", "baseline", "published", "rank", "model", "score", "score_ci_low", "score_ci_high",
              "raw", "calibrated", "lc", "n", "mean_length", "set_apart", "reason", "advice")


def publish_csv_rows(result: dict) -> list[dict]:
    """One dict per model of every board (:data:`CSV_FIELDS`): the ranked rows, then those set
    apart (``set_apart`` true, ``reason``); full precision."""
    out = []
    for b in result["boards"]:
        base = {"task_family": b["task_family"], "judge": b["judge"], "baseline": b.get("baseline"),
                "published": b["published"], "advice": b["advice"]}
        for r in b["rows"]:
            ci = r.get("score_ci") or (None, None)
            out.append({**base, "rank": r["rank"], "model": r["model"], "score": r["score"], "score_ci_low": ci[0],
                        "score_ci_high": ci[1], "raw": r["raw"], "calibrated": r["calibrated"], "lc": r["lc"],
                        "n": r["n"], "mean_length": r["mean_length"], "set_apart": False, "reason": None})
        for a in b["set_apart"]:
            out.append({**base, "rank": None, "model": a["model"], "score": a["score"], "score_ci_low": None,
                        "score_ci_high": None, "raw": a["raw"], "calibrated": None, "lc": None, "n": None,
                        "mean_length": None, "set_apart": True, "reason": a["reason"]})
    return [{k: row.get(k) for k in CSV_FIELDS} for row in out]


def alpaca_eval_rows(result: dict) -> list[dict]:
    """A win-rate board in AlpacaEval's leaderboard CSV columns (``name`` as the index column,
    ``win_rate``, ``standard_error`` absent: judgecal's CI columns instead,
    ``length_controlled_winrate``, ``n_total``, ``avg_length``), ranked rows only, in published
    order; a score board is refused (UsageError: AlpacaEval's format holds win rates)."""
    from judgecal.errors import UsageError

    rows = []
    for b in result["boards"]:
        if b["kind"] != "winrate":
            raise UsageError("--format alpaca-eval holds win rates: give --baseline MODEL")
        for r in b["rows"]:
            rows.append({"": r["model"], "win_rate": r["raw"], "length_controlled_winrate": r["lc"],
                         "calibrated_win_rate": r["calibrated"], "published": b["published"], "n_total": r["n"],
                         "avg_length": r["mean_length"]})
    return rows
