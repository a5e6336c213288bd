"""The report's Bradley-Terry section (``report["bradley_terry"]``,
:func:`judgecal.views.bt_report.collect_bt`) in the terminal, Markdown and HTML reports: per
task family and judge, the style coefficients with CIs and the controlled board beside the
uncontrolled one, as ``judgecal bt --control both`` prints them (:mod:`judgecal.report.btboard`).
Pure formatting."""

from __future__ import annotations

from collections.abc import Mapping

from judgecal.report import btboard

HEADING = "Bradley-Terry boards with style control"


def intro(section: Mapping) -> str:
    """One paragraph: what the section shows and how it was computed."""
    return (f"Per task family and judge with pairwise verdicts: `judgecal bt --control {section['control']} "
            f"--length-unit {section['length_unit']}`'s board (Arena-Hard-Auto's style covariates, docs/style.md): "
            "the style coefficients (log-odds per sd of each feature's standardised difference: how much the judge "
            "rewards it) with 95% bootstrap CIs, then the controlled board beside the uncontrolled one, rank change = "
            "rank uncontrolled - rank controlled (positive: moved up under control).")


def text_parts(section: Mapping | None, width: int = 120, wide: bool = False) -> list:
    """The section as rich renderables (a heading, per board its two tables and footer lines,
    the boards not built); [] without a section."""
    from rich.text import Text

    if not section:
        return []
    parts: list = [Text(""), Text(HEADING, style="bold"), Text(intro(section).replace("`", ""))]
    for board in section["boards"]:
        tables, notes = btboard.bt_tables(board, width, wide=wide)
        parts.append(Text(""))
        parts += tables
        parts += [Text(line) for line in notes + btboard.footer_lines(board)]
    parts += [Text(f"note: {n}") for n in section["notes"]]
    return parts


def markdown_lines(section: Mapping | None) -> list[str]:
    """The section as Markdown lines (``## ...``, then per board :func:`judgecal.report.btboard.bt_markdown`)."""
    if not section:
        return []
    from judgecal.report.render_markdown import md_escape

    out = [f"## {HEADING}", "", intro(section), ""]
    for board in section["boards"]:
        out += [btboard.bt_markdown(board).rstrip("\n"), ""]
    out += [f"- {md_escape('note: ' + n)}" for n in section["notes"]]
    return out


def html_views(section: Mapping | None) -> list[dict]:
    """Per board the page view of :func:`judgecal.report.btboard.web_view` (no evidence links: the
    static report has no audit pages); [] without a section."""
    if not section:
        return []
    return [{"board": b, "view": btboard.web_view(b)} for b in section["boards"]]
