"""Small rich tables for the CLI's listings (stats, fits, runs)."""

from __future__ import annotations

from collections.abc import Sequence

from rich.table import Table


def simple_table(title: str, columns: Sequence[str], rows: Sequence[Sequence[object]]) -> Table:
    """A rich Table with ``columns`` and stringified ``rows`` (floats to 3 decimals)."""
    table = Table(title=title, show_lines=False)
    for col in columns:
        table.add_column(col, overflow="fold")
    for row in rows:
        table.add_row(*[_fmt(v) for v in row])
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
        judges = fam["ratings"] or {"-": {}}
        for i, (judge, counts) in enumerate(sorted(judges.items())):
            status = ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "-"
            head = [fam["task_family"], fam["items"], fam["responses"], labels, fam["verbosity_pairs"]] if i == 0 else [""] * 5
            rows.append(head + [judge, status])
    return simple_table(
        "judgecal stats",
        ["task family", "items", "responses", "expert labels", "verbosity pairs", "judge", "ratings"],
        rows,
    )
