"""A page of the judge audit (:func:`judgecal.views.audit.judge_audit`) as a terminal table:
one line per pair, the columns that fit the width (:func:`judgecal.report.tables.board_table`),
and the lines to print above and under it."""

from __future__ import annotations

from rich.table import Table

from judgecal.report.tables import Col, board_table, choose_columns

#: characters of the instruction a line shows
PROMPT_CHARS = 60

#: the columns without ``model``; with it, "side" and the other answer's model replace "model a / model b"
#: (text columns get the width left over in this order: the models before the instruction)
COLS = [
    Col("#", "n", 0), Col("model a / model b", "models", 0, "text"), Col("instruction", "item", 0, "text"),
    Col("chars a/b", "chars", 1, priority=1), Col("decision", "decision", 0), Col("gold", "gold", 0),
    Col("kind", "kind", 1, priority=3), Col("calibrated", "calibrated_decision", 1, priority=4),
    Col("flags", "flags", 1, "text", priority=2),
]
MODEL_COLS = COLS[:1] + [Col("side", "model_side", 0), Col("other model", "other", 0, "text")] + COLS[2:]
#: decisions as a cell shows them
SHOWN = {None: "-", "inconsistent": "incons."}


def cut(text: str | None, n: int = PROMPT_CHARS) -> str:
    """``text`` on one line (runs of white space as one space), at most ``n`` characters
    ('...' ends a cut one)."""
    one = " ".join((text or "").split())
    return one if len(one) <= n else one[:n - 3].rstrip() + "..."


def _cells(a: dict) -> list[list[str]]:
    out = []
    start = (a["page"] - 1) * a["per_page"]
    for k, r in enumerate(a["rows"], start + 1):
        ca, cb = r["a"].get("n_chars"), r["b"].get("n_chars")
        ma, mb = r["a"].get("model", "-"), r["b"].get("model", "-")
        row = [str(k), f"{ma} / {mb}", cut(r["item"].get("prompt")),
               f"{'-' if ca is None else ca} / {'-' if cb is None else cb}",
               SHOWN.get(r["decision"], r["decision"]), r["gold"] or "-",
               r["kind"], SHOWN.get(r["calibrated_decision"], r["calibrated_decision"]), ",".join(r["flags"]) or "-"]
        if a["model"] is not None:  # (#, side, other model, instruction, ...)
            side = r["model_side"]
            row[1:2] = [side, {"a": mb, "b": ma}.get(side, a["model"])]
        out.append(row)
    return out


def title(a: dict) -> str:
    """'audit llmbar/Natural / judge GPT-4, model M, text "q", filter won: 131 pairs, page 1 of 6'."""
    parts = [f"audit {a['task_family']} / judge {a['judge']}"]
    if a["model"] is not None:
        parts.append(f"model {a['model']}")
    if a["q"] is not None:
        parts.append(f"text {a['q']!r}")
    if a["filter"] != "all":
        parts.append(f"filter {a['filter']}")
    return ", ".join(parts) + f": {a['total']} pairs, page {a['page']} of {a['pages']}"


def audit_table(a: dict, width: int = 120) -> tuple[Table, list[str], list[str]]:
    """(the table of the page's pairs at ``width`` characters, the lines to print above it: the
    calibration, the expert agreement and the counts per filter, the lines to print under it:
    what the table leaves out and where the texts are)."""
    cal = a["calibration"]
    head = [f"calibration #{cal['id']} ({cal['length_unit']}){', stale' if cal['stale'] else ''}" if cal
            else "no calibration applied"]
    if a["agreement"]:
        ag = a["agreement"]
        raw = "-" if ag["raw"] is None else f"{ag['raw']:.3f}"
        line = f"expert agreement over {ag['n']} expert pairs (the whole audit): raw {raw}"
        if ag["calibrated"] is not None:
            line += f", calibrated {ag['calibrated']:.3f}"
        head.append(line)
    head.append("pairs per filter" + (" (of the pairs kept by model/q)" if a["model"] is not None or a["q"] is not None
                                      else "") + ": " + ", ".join(f"{f} {n}" for f, n in a["counts"].items()))
    head += [f"left out: {n} {reason}" for reason, n in a["left_out"].items()]
    cols = MODEL_COLS if a["model"] is not None else COLS
    cells = _cells(a)
    table, notes = board_table(title(a), cols, cells, width)
    # one line a pair: the instruction and the model names are cut to their column ('…'), never wrapped
    shown, _, _, _ = choose_columns(cols, cells, width)
    for col, i in zip(table.columns, shown):
        if cols[i].key in ("item", "models", "other"):
            col.no_wrap, col.overflow = True, "ellipsis"
    side = "; side: which answer is the model's, other model: the other answer's" if a["model"] is not None else ""
    notes.append(f"{a['filter_text']}; decision: the judge's (a, b, tie, incons.: its verdicts in the two orders "
                 f"differ){side}; instructions cut to {PROMPT_CHARS} characters or the column: --format json (or "
                 "/audit in judgecal serve) holds the texts, ratings and verdicts")
    return table, head, notes
