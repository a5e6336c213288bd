"""Leaderboard and check renderers: rich table, Markdown, CSV rows."""

from __future__ import annotations

from rich.table import Table

from judgecal.report.tables import simple_table

COLUMNS = [
    ("model", "model"), ("n", "n_rated"), ("raw", "mean_raw"), ("raw CI", "mean_raw_ci"),
    ("calibrated", "mean_calibrated"), ("cal. CI", "mean_calibrated_ci"), ("rank raw", "rank_raw"),
    ("rank cal.", "rank_calibrated"), ("change", "rank_change"), ("mean length", "mean_length"),
    ("verbosity win-rate raw", "verbosity_win_rate"), ("verbosity win-rate cal.", "verbosity_win_rate_calibrated"),
    ("acc", "acc"), ("acc_norm", "acc_norm"),
    ("acc_bytes", "acc_bytes"), ("acc_norm-acc", "acc_norm_minus_acc"), ("flags", "flags"),
]


def _cell(key: str, value) -> str:
    if value is None:
        return "-"
    if key.endswith("_ci"):
        return f"[{value[0]:.2f}, {value[1]:.2f}]"
    if key == "rank_change":
        return f"{value:+d}" if value else "0"
    if key == "flags":
        return "; ".join(value) or "-"
    if isinstance(value, float):
        return f"{value:.1f}" if key == "mean_length" else f"{value:.3f}"
    return str(value)


def _title(board: dict) -> str:
    cals = ", ".join([f"{k}: #{v}" for k, v in board["calibrations"].items()]
                     + [f"{k}: #{v['id']} fitted on {v['fitted_on']}" for k, v in (board.get("calibrations_from") or {}).items()]) or "none"
    return f"leaderboard: judge {board['judge']} (calibrations {cals})"


def leaderboard_table(board: dict) -> Table:
    """The leaderboard as a rich Table."""
    rows = [[_cell(k, r.get(k)) for _, k in COLUMNS] for r in board["rows"]]
    return simple_table(_title(board), [c for c, _ in COLUMNS], rows)


def leaderboard_markdown(board: dict) -> str:
    """The leaderboard as a Markdown table. Every name (models, judge, families, flags) goes
    through :func:`judgecal.report.render_markdown.md_escape`: ``<``, ``>``, ``&`` become
    HTML entities and Markdown metacharacters are escaped, so a model called ``<script>`` or
    ``"><img onerror=...>`` is shown as text wherever the Markdown is rendered as HTML."""
    from judgecal.report.render_markdown import md_escape

    lines = [f"### {md_escape(_title(board))}", "", "| " + " | ".join(md_escape(c) for c, _ in COLUMNS) + " |",
             "|" + "---|" * len(COLUMNS)]
    for r in board["rows"]:
        lines.append("| " + " | ".join(md_escape(_cell(k, r.get(k))) for _, k in COLUMNS) + " |")
    foot = left_out_lines(board)
    if foot:
        lines += [""] + [f"- {md_escape(x)}" for x in foot]
    return "\n".join(lines) + "\n"


def left_out_lines(board: dict) -> list[str]:
    """'note: ...' for every note of the board (e.g. a calibration stored before the short-side
    floor), then 'left out: N <reason>' for every count in ``board['left_out']``."""
    return ([f"note: {n}" for n in board.get("notes") or []]
            + [f"left out: {n} {reason}" for reason, n in sorted((board.get("left_out") or {}).items())])


def check_table(result: dict) -> Table:
    """`judgecal check` results as a rich Table."""
    rows = [["PASS" if c["ok"] else "FAIL", c["task_family"], c["judge"], c["check"], c["message"]] for c in result["checks"]]
    return simple_table("judgecal check: " + ("all thresholds hold" if result["ok"] else "FAILED"),
                        ["", "task family", "judge", "check", "detail"], rows)
