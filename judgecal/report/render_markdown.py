"""Markdown rendering of a report (GitHub-flavoured pipe tables, model-card friendly).

User text (task family, judge, warnings) is escaped for Markdown tables and inline text:
``|`` and the Markdown/HTML metacharacters are backslash-escaped or entity-encoded, newlines
become spaces, so a name cannot break a table or inject HTML into a rendered model card.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from judgecal.report.visible import visible
from judgecal.report.build import (
    SUMMARY_COLS,
    SUMMARY_COLUMNS,
    TEXT_COLUMNS,
    entry_facts,
    entry_title,
    method_table,
    summary_rows,
)


def md_escape(text: str) -> str:
    """Escape ``text`` for a Markdown table cell, heading, list item or inline text, so that
    a CommonMark (or GitHub) renderer shows it literally (tests/test_messages.py renders it
    with markdown-it-py).

    One line (runs of whitespace, newlines included, become one space); invisible and control
    characters shown as ``<U+XXXX>`` (:func:`judgecal.report.visible.visible`); ``&``, ``<``,
    ``>`` become HTML entities (no raw HTML, no autolink); ``\\``, ``|``, backtick, ``*``,
    ``~``, ``#`` are backslash-escaped; ``_`` too, except inside a word (``gpt4_1106`` cannot
    open emphasis and stays readable); ``[`` unless a number follows (``[0.875, 0.960]`` stays
    readable) and ``]`` before ``(``, ``[`` or ``:``, so no link, image or reference
    definition can form; a leading ``-``, ``+``, ``=`` or ``1.`` / ``1)`` cannot start a list.
    """
    text = visible(" ".join(str(text).split()))
    text = text.replace("\\", "\\\\")
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    for ch in "|`*#~":
        text = text.replace(ch, "\\" + ch)
    out = []
    n = len(text)
    for i, ch in enumerate(text):
        if ch == "_":
            inside = 0 < i < n - 1 and text[i - 1].isalnum() and text[i + 1].isalnum()
            out.append("_" if inside else "\\_")
        elif ch == "[":
            nxt = text[i + 1:i + 2]
            out.append("[" if nxt.isdigit() or (nxt in "-+" and text[i + 2:i + 3].isdigit()) else "\\[")
        elif ch == "]" and text[i + 1:i + 2] in ("(", "[", ":"):
            out.append("\\]")
        else:
            out.append(ch)
    text = "".join(out)
    head = _LIST_START.match(text)
    if head:  # "1. x", "- x", "+ x", "= x" at a line's start
        k = head.end() - 1
        text = text[:k] + "\\" + text[k:]
    return text


_LIST_START = re.compile(r"^(?:\d{1,9}[.)]|[-+=])(?=\s|$)")


def md_cell(text) -> str:
    """One table cell: :func:`md_escape` of the text with every control character shown first,
    newline and tab included (``<U+000A>``), as the terminal tables show them: a cell holds a
    name or a figure, never layout, so ``a\nb`` must not read as ``a b`` (issue 23 item 6)."""
    return md_escape(visible(str(text)))


def md_table(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A pipe table; text columns left-aligned, figures right-aligned; cells escaped (:func:`md_cell`)."""
    head = "| " + " | ".join(md_cell(c) for c in columns) + " |"
    align = "|" + "|".join(":---" if i == 0 or c in TEXT_COLUMNS else "---:"
                           for i, c in enumerate(columns)) + "|"
    body = ["| " + " | ".join(md_cell(c) for c in row) + " |" for row in rows]
    return "\n".join([head, align, *body])


def render_markdown(report: Mapping) -> str:
    """The report as Markdown text.

    Args:
        report: the dict of :func:`judgecal.report.build.build_report`.
    Returns:
        ``# judgecal report``, first a summary table of every entry (its recommendation and
        verdict), then per entry a ``##`` section: its facts (n, L_ref, gamma, p with 95%
        CIs ...), the methods table (figures to 3 decimals, 95% bootstrap CIs in brackets), the
        verdict and the warnings; last the pairwise judges' tables (the HTML page's order).
        Ends with "\\n".
    """
    out = ["# judgecal report", ""]
    entries = report["entries"]
    if not entries:
        out += ["No calibration to report.", ""]
    else:
        out += _entries_markdown(report)
    pairwise = report.get("pairwise_judges") or []
    if pairwise:
        from judgecal.report.pairwise import COLUMNS as PW_COLUMNS, rows as pw_rows

        out += ["## Pairwise judges: position consistency and length preference", "",
                md_table(PW_COLUMNS, pw_rows(pairwise)), ""]
        from judgecal.report.pairwise import COMPARISON_COLUMNS, comparison_rows

        cmp_rows = comparison_rows(pairwise)
        if cmp_rows:
            out += ["## Pairwise judges: judge comparison", "",
                    "Per task family, agreement with the experts from both orders combined (a tie when they "
                    "disagree) on the pairs every judge of the family judged; the gap to the family's best judge in "
                    "points with a paired 95% bootstrap CI (the same pair resamples for every judge). See "
                    "docs/report.md.", "", md_table(COMPARISON_COLUMNS, cmp_rows), ""]
        from judgecal.report.pairwise import LP_COLUMNS, length_position_rows

        lp_rows = length_position_rows(pairwise)
        if lp_rows:  # report --length-position
            out += ["## Pairwise judges: length and position together", "",
                    "Out-of-sample agreement with the experts (item-grouped 5-fold cross-validation), the paired gain "
                    "over the plain judge (a shown first, raw) in points with its 95% CI; recommendation: nested "
                    "selection, keep raw unless the gain's CI clears zero. See docs/report.md.", "",
                    md_table(LP_COLUMNS, lp_rows), ""]
    from judgecal.report.btreport import markdown_lines

    out += markdown_lines(report.get("bradley_terry"))  # the style-controlled boards (docs/style.md)
    return "\n".join(out).rstrip("\n") + "\n"


def _entries_markdown(report: Mapping) -> list[str]:
    """The summary table (first: what to act on), the report's warnings, then a section per entry."""
    out = ["Expert agreement, verbosity win-rate and length preference are shares in [0, 1]; "
           "slope is score units per nat of length; [a, b] is a 95% bootstrap interval; "
           "(CV) = out of sample, K-fold cross-validation by item. See docs/report.md.", ""]
    from judgecal.report.board import column_lines
    from judgecal.report.tables import markdown_columns

    srows = summary_rows(report)
    shown, hidden, empty = markdown_columns(SUMMARY_COLS, srows)
    out += [md_table([SUMMARY_COLUMNS[i] for i in shown], [[r[i] for i in shown] for r in srows]), ""]
    out += [f"- {md_escape(x)}" for x in column_lines(hidden, empty, "the JSON report holds all")]
    if hidden or empty:
        out.append("")
    for w in report.get("warnings") or []:
        out.append(f"> **Warning:** {md_escape(w)}")
    if report.get("warnings"):
        out.append("")
    for e in report["entries"]:
        out += [f"## {md_cell(entry_title(e))}", ""]
        out += [md_escape(" · ".join(entry_facts(e))), ""]
        cols, rows = method_table(e)
        out += [md_table(cols, rows), ""]
        out += [f"**Verdict ({md_escape(e['verdict']['code'])}):** {md_escape(e['verdict']['text'])}", ""]
        if e.get("flags"):
            out += ["Flags:", ""]
            out += [f"- **{md_escape(f['code'])}:** {md_escape(f['message'])}" for f in e["flags"]]
            out.append("")
        if e.get("notes"):
            out += ["What to act on:", ""]
            out += [f"- {md_escape(n)}" for n in e["notes"]]
            out.append("")
        if e["warnings"]:
            out += ["Warnings:", ""]
            out += [f"- {md_escape(w)}" for w in e["warnings"]]
            out.append("")
    return out
