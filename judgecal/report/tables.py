"""Small rich tables for the CLI's listings (stats, fits, runs)."""

from __future__ import annotations

from collections.abc import Sequence

from rich.table import Table
from rich.text import Text

from judgecal.report.visible import visible


def simple_table(title: str, columns: Sequence[str], rows: Sequence[Sequence[object]]) -> Table:
    """A rich Table with ``columns`` and stringified ``rows`` (floats to 3 decimals). Cells are
    plain text: brackets in names (``lc_glm[chars]``) are shown, never read as rich markup, and
    control or bidi characters as ``<U+XXXX>`` (:func:`judgecal.report.visible.visible`)."""
    table = Table(title=Text(visible(title), style="italic"), show_lines=False)
    for col in columns:
        table.add_column(Text(visible(col)), overflow="fold")
    for row in rows:
        table.add_row(*[Text(visible(_fmt(v), keep_newlines=True)) for v in row])
    return table


def _fmt(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def stats_table(stats: list[dict]) -> Table:
    """The ``judgecal stats`` table: one row per task family and judge."""
    rows = []
    for fam in stats:
        labels = ", ".join(f"{k} {v}" for k, v in sorted(fam["expert_labels"].items())) or "0"
        verdicts = fam.get("pairwise_verdicts") or {}
        judges = sorted(set(fam["ratings"]) | set(verdicts)) or ["-"]
        for i, judge in enumerate(judges):
            status = ", ".join(f"{k} {v}" for k, v in sorted(fam["ratings"].get(judge, {}).items())) or "-"
            pv = ", ".join(f"{k} {v}" for k, v in sorted(verdicts.get(judge, {}).items())) or "-"
            head = [fam["task_family"], fam["items"], fam["responses"], labels, fam["verbosity_pairs"]] if i == 0 else [""] * 5
            apart = (fam.get("judges_told_apart") or {}).get(judge)
            rows.append(head + [f"{judge}: {apart}" if apart else judge, status, pv])
    return simple_table(
        "judgecal stats",
        ["task family", "items", "responses", "expert labels", "verbosity pairs", "judge", "ratings", "pairwise verdicts"],
        rows,
    )


def _ci(ci) -> str:
    return f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else ""


def fits_table(rows: list[dict], title: str = "calibrations") -> Table:
    """One row per stored calibration: parameters and the headline figures before/after."""
    out = []
    for r in rows:
        out.append([
            r["id"], r["task_family"], r["judge"], f"{r['length_unit']}", f"{r['l_ref']:.1f}",
            f"{r['gamma']:.3f}{_ci(r.get('gamma_ci'))}", f"{r['p']:.3f}{_ci(r.get('p_ci'))}", r["n"],
            _pair(r.get("agreement_raw"), r.get("agreement_calibrated")),
            _pair(r.get("agreement_cv_raw"), r.get("agreement_cv_calibrated")),
            _pair(r.get("verbosity_win_rate_raw"), r.get("verbosity_win_rate_calibrated")),
            r["created_at"][:19],
        ])
    return simple_table(title, ["id", "task family", "judge", "unit", "L_ref", "gamma", "p", "n",
                                "agreement raw->cal", "agreement CV raw->cal", "verbosity win-rate raw->cal", "created"], out)


def _pair(a, b) -> str:
    f = lambda v: "-" if v is None else f"{v:.3f}"  # noqa: E731
    return f"{f(a)} -> {f(b)}"
