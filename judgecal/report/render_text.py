"""Terminal rendering of a report (rich): the summary first, one compact table per entry, then the
pairwise judges' tables; every table fits the terminal's width (:mod:`judgecal.report.tables`).

Task family and judge names are user input: they go into rich ``Text`` objects (never parsed as
rich markup), so a name like ``[bold]x`` prints literally.
"""

from __future__ import annotations

from collections.abc import Mapping

from rich.console import Group
from rich.text import Text

from judgecal.report.visible import visible

from judgecal.report.tables import Col, board_table
from judgecal.report.build import (
    SUMMARY_COLS,
    TEXT_COLUMNS,
    entry_facts,
    entry_title,
    flag_lines,
    method_table,
    summary_rows,
)

VERDICT_STYLE = {"helps": "bold green", "hurts": "bold red", "no measurable effect": "bold yellow",
                 "undetermined": "bold", "not fitted": "bold", "not identified": "bold red"}


#: where the columns a report table leaves out can be had
REPORT_HINT = "--wide shows them; --format json holds every column"
#: the per-entry tables' headline columns, always shown (the others while the width allows)
HEADLINE = frozenset({"agreement (CV)", "Spearman (CV)", "agreement on target", "verbosity win-rate"})


def method_cols(columns: list[str]) -> list[Col]:
    """The :class:`Col` of a methods table's headers (:func:`judgecal.report.build.method_table`):
    the method (always shown), the headline figure (:data:`HEADLINE`, always shown),
    then the other figures in their order while the width allows; figures with their CIs
    ("ci": the CI goes under its value when narrow, a number is never split)."""
    cols = [Col(columns[0], "method", 0, "text")]  # "raw (no calibration)": wraps at spaces, like text
    for i, head in enumerate(columns[1:], 1):
        kind = "name" if head == "fitted on" else "text" if head in TEXT_COLUMNS else "ci"
        cols.append(Col(head, head, 0 if head in HEADLINE else 1, kind, priority=i))
    return cols


def _board(title: str, cols: list[Col], rows: list[list[str]], width: int, wide: bool) -> list:
    """A table that fits ``width`` (:func:`judgecal.report.tables.board_table`), the columns it
    left out named under it."""
    table, notes = board_table(title, cols, rows, width, wide=wide, hint=REPORT_HINT)
    return [table] + [Text(n) for n in notes]


def _per_family(title: str, cols: list[Col], rows: list[list[str]], width: int, wide: bool) -> list:
    """One table per task family (rows whose first cell is the family, kept in order), the
    family in the title instead of a column, each followed by a blank line."""
    parts: list = []
    families = list(dict.fromkeys(r[0] for r in rows))
    for fam in families:
        parts += _board(f"{title}: {fam}", cols[1:], [r[1:] for r in rows if r[0] == fam], width, wide)
        parts.append(Text(""))
    return parts


def entry_renderable(entry: Mapping, width: int = 120, *, wide: bool = False) -> Group:
    """One entry: its methods table (title: family · judge), the columns it left out, its facts
    (n, L_ref, gamma, p ...), the verdict, and its warnings one a line; the table fits ``width``
    characters (``wide``: every column)."""
    cols, rows = method_table(entry)
    v = entry["verdict"]
    parts: list = _board(entry_title(entry), method_cols(cols), rows, width, wide)
    parts.append(Text(visible(" · ".join(entry_facts(entry)))))
    parts.append(Text.assemble(("verdict: ", "bold"), (v["text"], VERDICT_STYLE.get(v["code"], ""))))
    for line in flag_lines(entry):
        parts.append(Text.assemble(("flag ", "bold red"), line))
    for note in entry.get("notes") or []:
        parts.append(Text.assemble(("note: ", "bold cyan"), note))
    for w in entry["warnings"]:
        parts.append(Text.assemble(("warning: ", "yellow"), w))
    parts.append(Text(""))
    return Group(*parts)


def render_table(report: Mapping, width: int = 120, *, wide: bool = False) -> Group:
    """The whole report as one rich renderable: ``Console().print(render_table(report))``.

    Args:
        report: the dict of :func:`judgecal.report.build.build_report`.
        width: the terminal's width in characters: every table shows the columns that fit
            (those left out are named under it); no number, CI bound or timestamp is split.
        wide: every column of every table, whatever the width.
    Returns:
        a ``rich.console.Group``, in the order of the HTML page: the summary first (more
        than one entry: one row per entry with its recommendation and verdict; none: "no
        calibration to report"), report-level warnings, then per entry a table (rows:
        methods; columns: agreement, agreement (CV), verbosity win-rate, length pref., slope;
        pointwise: Spearman/Kendall/MAE; 95% bootstrap CIs in brackets), its facts, the
        verdict, notes and warnings; last the pairwise judges (position bias, the judge
        comparison, length and position), one table per task family.
    """
    parts: list = []
    entries = report["entries"]
    if not entries:
        parts += [Text("no calibration to report"), Text("")]
    elif len(entries) > 1:
        parts += _board("judgecal report: summary", SUMMARY_COLS, summary_rows(report), width, wide)
        parts.append(Text(""))
    for w in report.get("warnings") or []:
        parts.append(Text.assemble(("warning: ", "yellow"), w))
    parts.extend(entry_renderable(e, width, wide=wide) for e in entries)
    pairwise = report.get("pairwise_judges") or []
    if pairwise:
        from judgecal.report.pairwise import COLS, COMPARISON_COLS, LP_COLS, comparison_rows, length_position_rows
        from judgecal.report.pairwise import rows as pw_rows

        parts += _per_family("pairwise judges: position consistency and length preference", COLS, pw_rows(pairwise),
                             width, wide)
        parts += _per_family("pairwise judges: judge comparison (agreement with the experts, paired CIs against "
                             "the best)", COMPARISON_COLS, comparison_rows(pairwise), width, wide)
        # report --length-position
        parts += _per_family("pairwise judges: length and position together (out of sample)", LP_COLS,
                             length_position_rows(pairwise), width, wide)
    from judgecal.report.btreport import text_parts

    parts += text_parts(report.get("bradley_terry"), width, wide)  # the style-controlled boards (docs/style.md)
    return Group(*parts)
