"""Terminal rendering of a report (rich): a summary table, then one compact table per entry.

Task family and judge names are user input: they go into rich ``Text`` objects (never parsed as
rich markup), so a name like ``[bold]x`` prints literally.
"""

from __future__ import annotations

from collections.abc import Mapping

from rich.console import Group
from rich.table import Table
from rich.text import Text

from judgecal.report.visible import visible

from judgecal.report.build import (
    SUMMARY_COLUMNS,
    TEXT_COLUMNS,
    entry_facts,
    entry_title,
    flag_lines,
    method_table,
    summary_rows,
)

VERDICT_STYLE = {"helps": "bold green", "hurts": "bold red", "no measurable effect": "bold yellow",
                 "undetermined": "bold", "not fitted": "bold", "not identified": "bold red"}


def _table(title: str, columns: list[str], rows: list[list[str]], caption: str | None = None) -> Table:
    table = Table(title=Text(visible(title), style="bold"), caption=None if caption is None else Text(visible(caption)),
                  caption_justify="left", title_justify="left")
    for i, col in enumerate(columns):
        table.add_column(Text(visible(col)), overflow="fold",
                         justify="left" if i == 0 or col in TEXT_COLUMNS else "right")
    for row in rows:
        table.add_row(*[Text(visible(c, keep_newlines=True)) for c in row])
    return table


def entry_renderable(entry: Mapping) -> Group:
    """One entry: its methods table (title: family · judge; caption: n, L_ref, gamma, p ...),
    the verdict, and its warnings one a line."""
    cols, rows = method_table(entry)
    table = _table(entry_title(entry), cols, rows, caption=" · ".join(entry_facts(entry)))
    v = entry["verdict"]
    parts: list = [table, Text.assemble(("verdict: ", "bold"), (v["text"], VERDICT_STYLE.get(v["code"], "")))]
    for line in flag_lines(entry):
        parts.append(Text.assemble(("flag ", "bold red"), line))
    for note in entry.get("notes") or []:
        parts.append(Text.assemble(("note: ", "bold cyan"), note))
    for w in entry["warnings"]:
        parts.append(Text.assemble(("warning: ", "yellow"), w))
    parts.append(Text(""))
    return Group(*parts)


def render_table(report: Mapping) -> Group:
    """The whole report as one rich renderable: ``Console().print(render_table(report))``.

    Args:
        report: the dict of :func:`judgecal.report.build.build_report`.
    Returns:
        a ``rich.console.Group``: the summary table (more than one entry), report-level
        warnings, then per entry a table (rows: methods; columns: agreement, agreement (CV),
        verbosity win-rate, length pref., slope; pointwise: Spearman/Kendall/MAE; 95%
        bootstrap CIs in brackets), the verdict and the warnings.
    """
    parts: list = []
    entries = report["entries"]
    pairwise = report.get("pairwise_judges") or []
    if pairwise:
        from judgecal.report.pairwise import COLUMNS as PW_COLUMNS, rows as pw_rows

        parts.append(_table("pairwise judges: position consistency and length preference", PW_COLUMNS, pw_rows(pairwise)))
        parts.append(Text(""))
        from judgecal.report.pairwise import LP_COLUMNS, length_position_rows

        lp_rows = length_position_rows(pairwise)
        if lp_rows:  # report --length-position
            parts.append(_table("pairwise judges: length and position together (out of sample)", LP_COLUMNS, lp_rows))
            parts.append(Text(""))
    if not entries:
        return Group(*(parts + [Text("no calibration to report")]))
    if len(entries) > 1:
        parts.append(_table("judgecal report: summary", SUMMARY_COLUMNS, summary_rows(report)))
        parts.append(Text(""))
    for w in report.get("warnings") or []:
        parts.append(Text.assemble(("warning: ", "yellow"), w))
    parts.extend(entry_renderable(e) for e in entries)
    return Group(*parts)
