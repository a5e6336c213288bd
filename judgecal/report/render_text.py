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

from judgecal.report.tables import board_table
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


def _fitted_widths(columns: list[str], rows: list[list[str]], width: int) -> list[int]:
    """Column widths (characters) for a table at ``width``: each column at least its longest
    word (the first, a name, at least min(longest cell, 24)), then the width left over shared
    out up to each column's longest cell, so that no number and no word is split."""
    def words(i):
        return max([len(w) for r in rows for w in r[i].split()] + [len(w) for w in columns[i].split()] + [1])

    def longest(i):
        return max([len(line) for r in rows for line in r[i].splitlines() or [""]] + [len(columns[i]) // 2, 1])

    n = len(columns)
    size = [max(words(i), min(longest(i), 24)) if i == 0 else words(i) for i in range(n)]
    slack = width - (1 + 3 * n + sum(size))
    if slack < 0 and n:  # the name column gives way first, down to its longest word
        give = min(-slack, size[0] - words(0))
        size[0] -= give
        slack += give
    while slack > 0:
        grow = [i for i in range(n) if size[i] < longest(i)]
        if not grow:
            break
        step = max(1, slack // len(grow))
        for i in grow:
            add = min(step, longest(i) - size[i], slack)
            size[i] += add
            slack -= add
            if slack <= 0:
                break
    return size


def _table(title: str, columns: list[str], rows: list[list[str]], caption: str | None = None,
           width: int = 120) -> Table:
    # user text made visible first (a newline in a name is <U+000A>, not a second line that reads
    # as another row); the newlines added below for the layout are the only ones kept
    rows = [[visible(c) for c in r] for r in rows]
    sizes = _fitted_widths(columns, rows, width)
    if any(sizes[i] < max(len(r[i]) for r in rows) for i in range(1, len(columns)) if rows):
        # too narrow for "value [low, high]" on one line: the CI goes under the value, whole
        rows = [[c if i == 0 else c.replace(" [", "\n[", 1) for i, c in enumerate(r)] for r in rows]
        sizes = _fitted_widths(columns, rows, width)
    table = Table(title=Text(visible(title), style="bold"), caption=None if caption is None else Text(visible(caption)),
                  caption_justify="left", title_justify="left")
    for i, col in enumerate(columns):
        table.add_column(Text(visible(col)), overflow="fold", width=sizes[i],
                         justify="left" if i == 0 or col in TEXT_COLUMNS else "right")
    for row in rows:
        table.add_row(*[Text(c) for c in row])
    return table


def _per_family(title: str, columns: list[str], rows: list[list[str]], width: int) -> list:
    """One table per task family (rows whose first cell is the family, kept in order), the
    family in the title instead of a column, each followed by a blank line."""
    parts: list = []
    families = list(dict.fromkeys(r[0] for r in rows))
    for fam in families:
        parts.append(_table(f"{title}: {fam}", columns[1:], [r[1:] for r in rows if r[0] == fam], width=width))
        parts.append(Text(""))
    return parts


def entry_renderable(entry: Mapping, width: int = 120) -> Group:
    """One entry: its methods table (title: family · judge; caption: n, L_ref, gamma, p ...),
    the verdict, and its warnings one a line; the table fits ``width`` characters."""
    cols, rows = method_table(entry)
    table = _table(entry_title(entry), cols, rows, caption=" · ".join(entry_facts(entry)), width=width)
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


def render_table(report: Mapping, width: int = 120, *, wide: bool = False) -> Group:
    """The whole report as one rich renderable: ``Console().print(render_table(report))``.

    Args:
        report: the dict of :func:`judgecal.report.build.build_report`.
        width: the terminal's width in characters: the summary shows the columns that fit
            (those left out are named under it) and every table's cells wrap at spaces only.
        wide: every summary column, whatever the width.
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

        parts += _per_family("pairwise judges: position consistency and length preference", PW_COLUMNS,
                             pw_rows(pairwise), width)
        from judgecal.report.pairwise import COMPARISON_COLUMNS, comparison_rows

        parts += _per_family("pairwise judges: judge comparison (agreement with the experts, paired CIs against "
                             "the best)", COMPARISON_COLUMNS, comparison_rows(pairwise), width)
        from judgecal.report.pairwise import LP_COLUMNS, length_position_rows

        lp_rows = length_position_rows(pairwise)
        if lp_rows:  # report --length-position
            parts.append(_table("pairwise judges: length and position together (out of sample)", LP_COLUMNS, lp_rows,
                                width=width))
            parts.append(Text(""))
    if not entries:
        return Group(*(parts + [Text("no calibration to report")]))
    if len(entries) > 1:
        table, notes = board_table("judgecal report: summary", SUMMARY_COLS, summary_rows(report), width, wide=wide)
        parts.append(table)
        parts += [Text(n) for n in notes]
        parts.append(Text(""))
    for w in report.get("warnings") or []:
        parts.append(Text.assemble(("warning: ", "yellow"), w))
    parts.extend(entry_renderable(e, width) for e in entries)
    return Group(*parts)
