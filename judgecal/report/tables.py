"""Small rich tables for the CLI's listings (stats, fits, runs)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

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
        table.add_row(*[Text(visible(_fmt(v))) for v in row])
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


#: short headers of the style features (``judgecal stats``)
STYLE_HEADERS = {"n_chars": "chars", "n_words": "words", "n_bytes": "bytes", "md_headers": "headers",
                 "md_list_ordered": "ordered items", "md_list_unordered": "unordered items", "md_bold": "bold"}


def style_table(stats: list[dict]) -> Table:
    """The ``judgecal stats`` style table: per task family and model, the mean / median of each
    answer feature (lengths, token lengths where stored, Markdown counts: docs/style.md)."""
    names: list[str] = []
    for fam in stats:
        for row in fam.get("answer_style") or []:
            names += [n for n in row["features"] if n not in names]
    order = [n for n in STYLE_HEADERS if n in names and n.startswith("n_")] + sorted(n for n in names if n.startswith("tokens["))
    order += [n for n in STYLE_HEADERS if n in names and n.startswith("md_")]
    rows = []
    for fam in stats:
        for i, row in enumerate(fam.get("answer_style") or []):
            cells = []
            for n in order:
                f = row["features"].get(n)
                cells.append("-" if not f or f["mean"] is None else f"{f['mean']:.1f} / {f['median']:g}")
            rows.append([fam["task_family"] if i == 0 else "", row["model"], row["answers"]] + cells)
    return simple_table("answer style per model: mean / median (Markdown counts outside code blocks, docs/style.md)",
                        ["task family", "model", "answers"] + [STYLE_HEADERS.get(n, n) for n in order], rows)


def _ci(ci) -> str:
    return f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else ""


def _pair(a, b, withheld: bool = False) -> str:
    f = lambda v: "-" if v is None else f"{v:.3f}"  # noqa: E731
    return f"{f(a)} -> {'n.i.' if withheld else f(b)}"


# ------------------------------------------------------------------ tables that fit the terminal
@dataclass(frozen=True)
class Col:
    """A column of a board table: ``header`` shown, ``key`` of the row dict, ``level`` 0 (always
    shown), 1 (shown when the terminal is wide enough) or 2 (only with ``--wide`` or
    ``--columns``); ``kind`` "num" (never wrapped: a number or a CI is never split), "name"
    (wrapped at spaces, hyphens kept whole up to 24 characters), "text" (wrapped at spaces) or
    "ci" (a figure followed by its CI and counts, ``0.880 [0.815, 0.935] (n=92)``: when
    narrower than the cell, the CI and the counts go on lines of their own, and a CI is broken
    after its comma only when the column is narrower than the CI: no number is ever split)."""

    header: str
    key: str
    level: int = 1
    kind: str = "num"
    priority: int = 0  # level-1 columns are offered the width in this order (then left to right)


def parse_columns(spec: str | None, cols: Sequence[Col]) -> list[Col] | None:
    """``--columns a,b,c`` to the columns it names (by header or key, case-insensitive), in the
    order given. Raises :class:`judgecal.errors.UsageError` naming the unknown one and the
    choices."""
    if spec is None:
        return None
    from judgecal.errors import UsageError

    by = {}
    for c in cols:
        by.setdefault(c.header.lower(), c)
        by.setdefault(c.key.lower(), c)
    picked = []
    for name in (x.strip() for x in spec.split(",")):
        if not name:
            continue
        c = by.get(name.lower())
        if c is None:
            raise UsageError(f"--columns: no column {name!r}; choose from: " + ", ".join(c.key for c in cols))
        if c not in picked:
            picked.append(c)
    if not picked:
        raise UsageError("--columns: name at least one column")
    return picked


def _longest_word(cells: Sequence[str]) -> int:
    return max((len(w) for c in cells for w in c.split()), default=1)


def _ci_parts(cell: str) -> list[str]:
    """A "ci" cell's parts: the figure, then each bracketed CI and parenthesised count."""
    return re.split(r" (?=[\[(])", cell)


def _parts_width(cells: Sequence[str]) -> int:
    """The width that holds every part of every "ci" cell on a line of its own."""
    return max((len(p) for c in cells for p in _ci_parts(c)), default=1)


def _widths(col: Col, cells: Sequence[str]) -> tuple[int, int]:
    """(least, most) characters the column's cells need: numbers never wrap (least = most);
    names may wrap down to 18 characters, text and figures with CIs down to their longest word."""
    head = max((len(w) for w in col.header.split()), default=1)
    longest = max((len(c) for c in cells), default=1)
    if col.kind == "num":
        return max(head, longest), max(head, longest)
    least = min(longest, 18) if col.kind == "name" else _longest_word(cells)
    return max(head, least), max(head, longest)


def choose_columns(cols: Sequence[Col], cells: Sequence[Sequence[str]], width: int, *, wide: bool = False,
                   only: Sequence[Col] | None = None) -> tuple[list[int], list[str], list[str], dict[int, int]]:
    """Which columns to show at a terminal ``width`` (characters), and how wide.

    Returns (indices of the shown columns, headers hidden for want of width or by level,
    headers left out because every cell is "-", {index: width} of the shown columns).
    Level-0 columns are always shown; level-1 columns are added in order while the table
    (least cell widths + 3 per column + 1) fits, in ``priority`` order; level-2 only with ``wide``. ``only``
    (``--columns``) shows exactly those columns, empty or not. Width left over goes to the
    name column, then to the columns of figures with CIs (up to a CI on a line of its own),
    then to text columns, then to those figures again, up to their longest cell."""
    if only is not None:
        keep = [cols.index(c) for c in only]
        empty = []
    else:
        empty = [i for i, _ in enumerate(cols) if cells and all(row[i] in ("-", "") for row in cells) and cols[i].level != 0]
        keep = [i for i in range(len(cols)) if i not in empty]
    need = {i: _widths(cols[i], [row[i] for row in cells]) for i in keep}
    shown = [i for i in keep if only is not None or cols[i].level == 0]
    total = 1 + sum(need[i][0] + 3 for i in shown)
    hidden = []
    for i in sorted(keep, key=lambda j: (cols[j].priority, j)):
        if i in shown:
            continue
        if wide or (cols[i].level == 1 and total + need[i][0] + 3 <= width):
            shown.append(i)
            total += need[i][0] + 3
        else:
            hidden.append(cols[i].header)
    if only is None:  # --columns keeps the order asked for
        shown.sort()
    size = {i: need[i][0] for i in shown}
    slack = max(0, width - total)
    # the name whole first (a name folds mid-word), then each figure's CI onto a line of its own, then text,
    # then whole figures on one line
    for kind, top in (("name", None), ("ci", _parts_width), ("text", None), ("ci", None)):
        for i in shown:
            if cols[i].kind == kind:
                most = need[i][1] if top is None else max(size[i], top([row[i] for row in cells]))
                extra = min(slack, most - size[i])
                size[i] += extra
                slack -= extra
    return shown, hidden, [cols[i].header for i in empty], size


#: where the columns a board table leaves out can be had (the boards' options)
BOARD_HINT = "--wide shows them, --columns NAMES picks; JSON and CSV hold every column"


def ci_lines(cell: str, width: int) -> str:
    """A "ci" cell laid out in ``width`` characters: whole when it fits; else the figure, its
    bracketed CI and its parenthesised counts each start a line (packed while they fit), and
    a part still wider than ``width`` is broken at its spaces only. No word (no number) is
    ever split, so ``width`` must be at least the cell's longest word (:func:`choose_columns`
    sees to it)."""
    if len(cell) <= width or "\n" in cell:
        return cell
    lines: list[str] = []
    for part in _ci_parts(cell):
        for piece in ([part] if len(part) <= width else part.split(" ")):
            if lines and len(lines[-1]) + 1 + len(piece) <= width:
                lines[-1] += " " + piece
            else:
                lines.append(piece)
    return "\n".join(lines)


def board_table(title: str, cols: Sequence[Col], cells: Sequence[Sequence[str]], width: int, *, wide: bool = False,
                only: Sequence[Col] | None = None, hint: str = BOARD_HINT) -> tuple[Table, list[str]]:
    """A rich Table of the columns that fit ``width`` (:func:`choose_columns`), numbers never
    wrapped, and the lines that say what was left out (to print under it: nothing hidden
    silently; ``hint``: where the left-out columns can be had). ``cells``: rows of display
    strings, one per column of ``cols``; control and bidi characters are shown as
    ``<U+XXXX>`` (:func:`judgecal.report.visible.visible`) before the widths are measured."""
    cells = [[visible(c) for c in row] for row in cells]
    shown, hidden, empty, size = choose_columns(cols, cells, width, wide=wide, only=only)
    table = Table(title=Text(visible(title), style="italic"), title_justify="left", show_lines=False)
    for i in shown:
        c = cols[i]
        # a number column is as wide as its longest cell: it never wraps (its header may, at spaces)
        table.add_column(Text(visible(c.header)), justify="right" if c.kind in ("num", "ci") else "left",
                         overflow="fold", width=size[i])
    for row in cells:
        table.add_row(*[Text(ci_lines(row[i], size[i]) if cols[i].kind == "ci" else row[i]) for i in shown])
    notes = []
    if hidden:
        notes.append(f"columns not shown at {width} characters: {', '.join(hidden)} ({hint})")
    if empty:
        notes.append(f"columns without a value on this board: {', '.join(empty)}")
    return table, notes


def markdown_columns(cols: Sequence[Col], cells: Sequence[Sequence[str]], *, limit: int = 10,
                     only: Sequence[Col] | None = None) -> tuple[list[int], list[str], list[str]]:
    """The columns of a Markdown table: level 0, then level 1 in order, at most ``limit``
    (all-dash columns left out); returns (indices, hidden headers, empty headers) as
    :func:`choose_columns`."""
    if only is not None:
        return [cols.index(c) for c in only], [], []
    empty = [i for i, _ in enumerate(cols) if cells and all(row[i] in ("-", "") for row in cells) and cols[i].level != 0]
    cand = [i for i in range(len(cols)) if i not in empty]
    shown = [i for i in cand if cols[i].level == 0]
    for i in sorted(cand, key=lambda j: (cols[j].priority, j)):
        if cols[i].level == 1 and len(shown) < limit:
            shown.append(i)
    shown.sort()
    hidden = [cols[i].header for i in cand if i not in shown]
    return shown, hidden, [cols[i].header for i in empty]


# ------------------------------------------------------------------ stored calibrations
#: The columns of ``fit --list`` and of a fit's table (:func:`fit_list_table`; level 0 always
#: shown, 1 while the terminal is wide enough, in priority order: see :class:`Col`)
FIT_COLS = [
    Col("id", "id", 0), Col("task family", "task_family", 0, "name"), Col("judge", "judge", 0, "name"),
    Col("unit", "length_unit", 1, priority=4), Col("L_ref", "l_ref", 1, priority=3),
    Col("gamma", "gamma", 1, "ci", priority=1), Col("p", "p", 1, "ci", priority=2), Col("n", "n", 1, priority=3),
    Col("agreement raw->cal", "agreement", 1, priority=2), Col("agreement CV raw->cal", "agreement_cv", 0),
    Col("verbosity win-rate raw->cal", "verbosity_win_rate", 1, priority=2), Col("created", "created_at", 1, priority=1),
]
#: where the columns ``fit --list`` leaves out can be had
FIT_HINT = "--format json holds every column; a wider terminal shows more"


def fit_cells(rows: list[dict]) -> list[list[str]]:
    """Display strings of stored calibrations, one row each, columns :data:`FIT_COLS`. A fit
    whose labels do not determine it (``identification.identified`` False) shows "n.i." for
    gamma, p and its in-sample calibrated figures, as the report does; the cross-validated
    figures, which measure the procedure out of sample, stay."""
    out = []
    for r in rows:
        ni = (r.get("identification") or {}).get("identified") is False
        out.append([
            str(r["id"]), r["task_family"], r["judge"], f"{r['length_unit']}", f"{r['l_ref']:.1f}",
            "n.i." if ni else f"{r['gamma']:.3f}{_ci(r.get('gamma_ci'))}",
            "n.i." if ni else f"{r['p']:.3f}{_ci(r.get('p_ci'))}", str(r["n"]),
            _pair(r.get("agreement_raw"), r.get("agreement_calibrated"), ni),
            _pair(r.get("agreement_cv_raw"), r.get("agreement_cv_calibrated")),
            _pair(r.get("verbosity_win_rate_raw"), r.get("verbosity_win_rate_calibrated"), ni),
            r["created_at"][:19],
        ])
    return out


def fit_list_table(rows: list[dict], width: int = 120, *, title: str = "calibrations",
                   wide: bool = False) -> tuple[Table, list[str]]:
    """Stored calibrations (``fit --list``, a new fit) as a table that fits ``width``
    characters (:func:`board_table`: columns that do not fit are named in the lines returned,
    to print under it; never a number or a timestamp split); ``wide``: every column."""
    return board_table(title, FIT_COLS, fit_cells(rows), width, wide=wide, hint=FIT_HINT)


def fits_table(rows: list[dict], title: str = "calibrations") -> Table:
    """Every column of :func:`fit_list_table`, whatever the width (for a caller that has no
    terminal width to fit)."""
    return fit_list_table(rows, title=title, wide=True)[0]
