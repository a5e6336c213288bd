"""The files a win-rate board reads: AlpacaEval's length-controlled GLM weights
(:func:`read_weights`) and a published leaderboard to compare with (:func:`read_ranking`), each
CSV checked with FILE:LINE errors. Split out of :mod:`judgecal.views.winrates`, which re-exports
these names."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from judgecal.errors import InputError
from judgecal.importers.records import read_csv_cells

#: --lc-weights: a larger weight (logit units) is refused (AlpacaEval's published weights are below 10)
MAX_GLM_WEIGHT = 1000.0


def _table(path: Path) -> tuple[list[str], list[tuple[int, list[str | None]]]]:
    """The header (names stripped; a pandas index column's is empty) and the data records of
    a CSV file; a record with another number of fields than the header is an InputError
    naming FILE:LINE, so is a file without a header row."""
    records = list(read_csv_cells(path))
    if not records:
        raise InputError("empty CSV file (no header row)", source=str(path), line=1)
    (_, head), rows = records[0], records[1:]
    header = [(h or "").strip() for h in head]
    seen: dict[str, int] = {}
    for i, h in enumerate(header, start=1):
        if h and h in seen:
            raise InputError(f"column {h!r} appears twice in the header row (columns {seen[h]} and {i})",
                             source=str(path), line=records[0][0])
        seen.setdefault(h, i)
    for line, row in rows:
        if len(row) != len(header):
            raise InputError(f"row has {len(row)} fields, the header has {len(header)}", source=str(path), line=line)
    return header, rows


#: The weight columns of AlpacaEval's ``length_controlled_v1`` weights CSV, in its order
#: (pandas writes the model names in an unnamed first column).
GLM_WEIGHT_COLUMNS = ("np.tanh(std_delta_len)", "instruction_difficulty", "not_gamed_baseline.astype(float)")


def read_weights(path: Path) -> dict[str, tuple[float, float, float]]:
    """AlpacaEval's GLM weights CSV (``length_controlled_v1/baseline_<model>.csv``, written by
    pandas: an unnamed index column of model names, then w_len, w_diff, w_bias): {model:
    (w_len, w_diff, w_bias)}.

    Read as RFC 4180 CSV (:func:`judgecal.importers.records.read_csv_cells`). Raises InputError
    naming FILE:LINE for a ragged row, an empty model name, a weight that is not a finite
    number or a model given twice (naming the earlier line), or for a header that is not
    AlpacaEval's (:data:`GLM_WEIGHT_COLUMNS` after an unnamed model column: a leaderboard CSV or
    any other 4+-column file is refused at line 1) or no data rows; the file for one that is not a readable regular UTF-8 file."""
    header, rows = _table(path)
    names = [(h or "").strip() for h in header]
    if len(names) != 4 or names[1:] != list(GLM_WEIGHT_COLUMNS):
        raise InputError("expected AlpacaEval's GLM weights header ',"
                         + ",".join(GLM_WEIGHT_COLUMNS) + f"' (4 columns), got {','.join(names)!r}"
                         + (" (AlpacaEval's leaderboard.csv? pass it to --compare-to)" if "length_controlled_winrate" in names
                            else ""), source=str(path), line=1)
    if not rows:
        raise InputError("no data rows (expected one row of weights per model)", source=str(path), line=2)
    out: dict[str, tuple[float, float, float]] = {}
    first: dict[str, int] = {}
    for line, cells in rows:
        name = (cells[0] or "").strip()
        if not name:
            raise InputError("empty model name", source=str(path), line=line)
        if name in first:
            raise InputError(f"model {name!r} appears twice (first on line {first[name]})", source=str(path), line=line)
        try:
            values = tuple(parse_number(c) for c in cells[1:4])
        except ValueError:
            raise InputError(f"expected three numbers after the model name, got {', '.join(repr(c) for c in cells[1:4])}",
                             source=str(path), line=line) from None
        if not all(np.isfinite(values)):
            raise InputError("the three weights must be finite numbers", source=str(path), line=line)
        if max(abs(v) for v in values) > MAX_GLM_WEIGHT:
            raise InputError(f"a weight of {max(values, key=abs):g} is not a GLM weight of AlpacaEval's (at most "
                             f"{MAX_GLM_WEIGHT:g} in absolute value, logit units; the published ones are below 10)",
                             source=str(path), line=line)
        first[name] = line
        out[name] = values  # type: ignore[assignment]
    return out


def parse_number(text: str | None) -> float:
    """A number written in a CSV cell (an optional sign, digits with an optional fraction,
    an optional exponent: ``12``, ``-0.5``, ``.5``, ``1e-05``; surrounding spaces allowed), as a float. Raises ValueError
    for anything else (``1_0``, ``nan``, ``inf``, ``0x1``, empty)."""
    t = (text or "").strip()
    if not _NUMBER.fullmatch(t):
        raise ValueError(t)
    return float(t)


_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def read_ranking(path: Path, column: str | None = None) -> tuple[dict[str, float], dict[str, int]]:
    """An external ranking CSV: a model column (``model``, else the first column, which may be
    a pandas index column without a name) and a score column (``column``, else ``score``,
    else the only other numeric column).

    Returns ({model: score}, {model: line} of the rows whose score cell is empty: they are
    left out of the correlations and reported, never dropped silently). Read as RFC 4180 CSV
    (:func:`judgecal.importers.records.read_csv_cells`). Raises InputError naming FILE:LINE for
    a ragged row, a quote never closed, an empty model name, a score that is not a finite
    number, a model given twice (naming the earlier line), or a file without data rows; the
    file for a missing or ambiguous score column."""
    header, records = _table(path)
    if not records:
        raise InputError("no data rows (a header row, then one row per model)", source=str(path), line=2)
    mi = header.index("model") if "model" in header else 0
    rows = [(line, cells) for line, cells in records]
    if column is not None:
        if column not in header:
            raise InputError(f"no column {column!r} (columns: {', '.join(h for h in header[:12] if h)})", source=str(path))
        si = header.index(column)
    elif "score" in header:
        si = header.index("score")
    else:
        def numeric(i: int) -> bool:
            vals = [(cells[i] or "").strip() for _, cells in rows]
            try:
                return any(vals) and all(parse_number(v) == parse_number(v) for v in vals if v)
            except ValueError:
                return False

        others = [i for i in range(len(header)) if i != mi and numeric(i)]
        if len(others) != 1:
            raise InputError(f"{'several' if others else 'no'} numeric score columns "
                             f"({', '.join(header[i] or f'column {i + 1}' for i in others[:8])}): "
                             "name one with --compare-column", source=str(path))
        si = others[0]
    if si == mi:
        raise InputError(f"column {header[si]!r} is the model column: name the score column with --compare-column",
                         source=str(path))
    scol = header[si]
    out: dict[str, float] = {}
    first: dict[str, int] = {}
    no_score: dict[str, int] = {}
    for line, cells in rows:
        name, val = (cells[mi] or "").strip(), (cells[si] or "").strip()
        if not name:
            raise InputError("empty model name", source=str(path), line=line)
        if name in first:
            raise InputError(f"model {name!r} appears twice (first on line {first[name]})", source=str(path), line=line)
        first[name] = line
        if not val:
            no_score[name] = line
            continue
        try:
            score = parse_number(val)
        except ValueError:
            raise InputError(f"column {scol!r}: {val[:40]!r} is not a number", source=str(path), line=line) from None
        if not np.isfinite(score):
            raise InputError(f"column {scol!r}: {val!r} is not a finite number", source=str(path), line=line)
        out[name] = score
    return out, no_score
