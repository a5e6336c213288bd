"""One self-contained HTML page of a report (Jinja2, autoescape on, PNG plots as data: URIs).

The page loads nothing from anywhere: the CSS is inline, there is no script and no font file,
and the plots are PNG bytes embedded as ``data:image/png;base64,...``. Task family and judge
names are user input: Jinja2 autoescaping (forced on, whatever the template's file name) turns
``<script>`` into ``&lt;script&gt;``.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence

from judgecal import __version__
from judgecal.errors import InputError
from judgecal.report.build import (
    SUMMARY_COLUMNS,
    TEXT_COLUMNS,
    entry_facts,
    entry_title,
    method_table,
    summary_rows,
)
from judgecal.report.plots import MAX_POINTS, plot_score_distributions, plot_score_vs_length

TEMPLATE = "report.html.j2"
#: summary columns the page leaves out in a window narrower than 1180 px (CSS; each entry's
#: facts line has them), so that the verdict and warnings columns stay in view at 900 px
NARROW_HIDDEN = ("kind", "L_ref", "p")


def _environment():
    from jinja2 import Environment, PackageLoader, StrictUndefined

    from judgecal.report.visible import finalize_html

    env = Environment(loader=PackageLoader("judgecal.report", "templates"), autoescape=True,
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True, finalize=finalize_html)
    env.filters["wbr"] = break_points
    return env


def break_points(text) -> str:
    """``text`` escaped (Markup), with a line-break opportunity (``<wbr>``) after each ``/``, ``_`` and
    ``-``: a narrow table wraps ``llmbar/Adversarial_Neighbor`` at its parts, never inside a
    word or a number."""
    import re

    from markupsafe import Markup, escape

    from judgecal.report.visible import visible_html

    return Markup(re.sub(r"([/_-])(?=\w)", r"\1<wbr>", str(escape(visible_html(text)))))


def _b64(png: bytes | None) -> str | None:
    return None if png is None else base64.b64encode(png).decode("ascii")


def _board_views(boards: Mapping | None) -> dict:
    """The leaderboards as the shared partials take them: {"score": [(board, view)],
    "winrates": [(board, view)], "notes": [...]}; empty lists without boards."""
    from judgecal.report.boards_html import score_board_view, winrate_board_view

    boards = boards or {}
    return {"score": [(b, score_board_view(b)) for b in boards.get("score") or []],
            "winrates": [(b, winrate_board_view(b)) for b in boards.get("winrates") or []],
            "notes": list(boards.get("notes") or [])}


def _row_classes(entry: Mapping, rows: list[list[str]]) -> list[str]:
    names = list(entry["methods"])
    out = []
    for i, _ in enumerate(rows):
        name = names[i] if i < len(names) else "experts"
        out.append({"polylog": "calibration", "experts": "experts"}.get(name, ""))
    return out


from judgecal.report.pairwise import COLUMNS as PW_COLUMNS, rows as pw_rows  # noqa: E402
from judgecal.report.pairwise import COMPARISON_COLUMNS, comparison_rows  # noqa: E402
from judgecal.report.pairwise import LP_COLUMNS, length_position_rows  # noqa: E402
from judgecal.report.btreport import html_views as bt_html_views, intro as bt_intro  # noqa: E402


def render_html(report: Mapping, entries: Sequence[Mapping] | None = None, *, plots: bool = True,
                max_points: int = MAX_POINTS, seed: int = 0, boards: Mapping | None = None) -> str:
    """The report as one self-contained HTML page (str, UTF-8 when written).

    Args:
        report: the dict of :func:`judgecal.report.build.build_report`.
        entries: the entries the report was built from, same order (their evaluations hold the
            per-response ``points`` the plots need); None or ``plots=False``: no plots.
        max_points: scatter points drawn per plot (seeded subsample above it; see
            :mod:`judgecal.report.plots`). seed: the subsample's seed.
        boards: the leaderboards to show (:func:`judgecal.views.reporting.collect_boards`:
            "score", "winrates", "notes"), drawn with the partials ``judgecal serve``'s pages
            use (:mod:`judgecal.report.boards_html`); None: no leaderboard section.
    Returns:
        HTML text: a summary table of every entry, then a section per entry with its facts
        (n, L_ref, gamma, p with CIs), methods table, verdict, warnings and two PNG plots
        (score vs ln(length) with the penalty curve; score histograms before/after).
    Raises:
        InputError: ``entries`` given but not one per report entry.
    """
    rep_entries = report["entries"]
    if entries is not None and len(entries) != len(rep_entries):
        raise InputError(f"render_html: {len(entries)} entries for a report of {len(rep_entries)}; "
                         f"pass the entries the report was built from")
    tables, row_classes, pics = [], [], []
    for i, e in enumerate(rep_entries):
        cols, rows = method_table(e)
        tables.append((cols, rows))
        row_classes.append(_row_classes(e, rows))
        scatter = hist = None
        if plots and entries is not None:
            ev = entries[i].get("evaluation") or {}
            title = entry_title(e)
            scatter = _b64(plot_score_vs_length(ev, title=title, length_unit=e.get("length_unit"),
                                                max_points=max_points, seed=seed))
            hist = _b64(plot_score_distributions(ev, title=title))
        pics.append({"scatter": scatter, "hist": hist})
    template = _environment().get_template(TEMPLATE)
    return template.render(
        boards=_board_views(boards),
        narrow_hidden=NARROW_HIDDEN,
        report=report,
        titles=[entry_title(e) for e in rep_entries],
        facts=[entry_facts(e) for e in rep_entries],
        tables=tables,
        row_classes=row_classes,
        plots=pics,
        summary_columns=SUMMARY_COLUMNS,
        summary_rows=summary_rows(report),
        text_columns=TEXT_COLUMNS,
        version=__version__,
        pairwise_columns=PW_COLUMNS,
        pairwise_rows=pw_rows(report.get("pairwise_judges") or []),
        comparison_columns=COMPARISON_COLUMNS,
        comparison_rows=comparison_rows(report.get("pairwise_judges") or []),
        length_position_columns=LP_COLUMNS,
        length_position_rows=length_position_rows(report.get("pairwise_judges") or []),
        bt_section=report.get("bradley_terry"),
        bt_boards=bt_html_views(report.get("bradley_terry")),
        bt_intro=bt_intro(report["bradley_terry"]) if report.get("bradley_terry") else None,
    )
