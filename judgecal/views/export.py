"""``judgecal export``: ratings, labels, pairs, responses, verdicts and calibrations (in the
generic import format, so they round-trip through ``judgecal import jsonl|csv``) and the
leaderboard.

Guarantees (docs/data-formats.md):

- Streaming: rows go from the database cursor to the file one by one
  (:mod:`judgecal.db.exporting`), so memory stays bounded whatever the number of rows.
- Atomic: rows are written to a temporary file beside the target, then renamed over it; an
  error never leaves a half-written export. The path ``-`` writes to standard output, after
  every row has been read (through an unnamed temporary file), so an error still writes
  nothing.
- Only regular files: an existing target that is not a regular file (a symlink, a FIFO, a
  device such as ``/dev/full``, a folder) is refused with one line, never replaced.
- Exact text: every stored text comes back byte for byte through both formats (JSONL: JSON
  strings; CSV: RFC 4180 quoting, line ends inside a field kept as they are, the empty
  string written ``""`` and a missing value as an empty cell).
- CSV cells are neutralised for spreadsheets: a text cell starting with ``=``, ``+``,
  ``-``, ``@``, a tab or a carriage return gets a leading ``'``
  (:func:`judgecal.importers.records.neutralise_cell`); ``judgecal import csv`` takes it off
  again, and JSONL always holds the raw value.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any

from judgecal.db import exporting, queries
from judgecal.db.engine import get_engine, session_scope
from judgecal.errors import UsageError
from judgecal.importers.records import csv_line, neutralise_cell

ROUND_TRIP = exporting.KINDS
KINDS = (*ROUND_TRIP, "leaderboard")


def export(kind: str, fmt: str, path: Path, url: str | None = None, *, families: Iterable[str] = (),
           judge: str | None = None, calibration: str | None = None, notes: list[str] | None = None) -> int:
    """Write the ``kind`` rows to ``path`` as ``fmt`` (jsonl or csv); returns the row count.
    ``notes``: receives the leaderboard's notes and left-out counts (what ``judgecal
    leaderboard`` prints under its table: a board without rows says why). A CSV without rows
    still has its header (:data:`judgecal.views.leaderboard.ROW_COLUMNS`).

    ``families``: only these task families (every kind; unknown names raise NotFoundError).
    ``judge`` (name, model or id): only that judge's rows, for ratings, verdicts,
    calibrations and the leaderboard (its judge). ``calibration``: the leaderboard's
    calibration (default latest). Nothing is silently ignored: ``judge`` for a kind without a
    judge (responses, labels, pairs) and ``calibration`` for any kind but the leaderboard
    raise UsageError, as do an unknown kind or format, a missing folder, or a target that
    exists and is not a regular file."""
    if kind not in KINDS:
        raise UsageError(f"unknown export kind {kind!r} (expected one of {', '.join(KINDS)})")
    if fmt not in ("jsonl", "csv"):
        raise UsageError(f"--format must be jsonl or csv, got {fmt!r}")
    families = list(families or ())
    if judge is not None and kind in ROUND_TRIP and kind not in exporting.JUDGED:
        raise UsageError(f"--judge: {kind} have no judge (--judge selects the rows of ratings, verdicts, calibrations "
                         "and leaderboard)")
    if calibration is not None and kind != "leaderboard":
        raise UsageError(f"--calibration applies to the leaderboard export only, not to {kind}")
    path = Path(path)
    check_target(path)
    if kind in ROUND_TRIP:
        engine = get_engine(url)
        try:
            with session_scope(engine) as s:
                fam_ids = queries.family_ids(s, families) if families else None
                judge_id = queries.judge_by_name(s, str(judge)).id if judge is not None else None
                rows = ROUND_TRIP[kind](s, families=fam_ids, judge_id=judge_id)
                return write_rows(rows, path, fmt, columns=exporting.COLUMNS[kind])
        finally:
            engine.dispose()
    # the leaderboard: a report, not an import format
    from judgecal.views.leaderboard import build_leaderboard

    from judgecal.report.board import left_out_lines

    board = build_leaderboard(url=url, families=families, judge=judge,
                              calibration=calibration if calibration is not None else "latest")
    if notes is not None:
        notes.extend(left_out_lines(board))
    rows = board["rows"]
    if fmt == "csv":
        from judgecal.views.leaderboard import ROW_COLUMNS

        return write_rows(rows, path, fmt, columns=list(dict.fromkeys(k for r in rows for k in r)) or ROW_COLUMNS)
    return write_rows(rows, path, fmt)


def check_target(path: Path) -> None:
    """Refuse an export target that cannot be written as a regular file: a missing folder,
    or an existing path that is not a regular file (symlink, FIFO, device, socket, folder).
    ``-`` (standard output) is always fine."""
    if str(path) == "-":
        return
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise UsageError(f"{path}: cannot inspect the export target: {exc.strerror or exc}") from None
    if st is not None and not stat.S_ISREG(st.st_mode):
        what = ("a symbolic link" if stat.S_ISLNK(st.st_mode) else "a FIFO" if stat.S_ISFIFO(st.st_mode)
                else "a device" if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode)
                else "a folder" if stat.S_ISDIR(st.st_mode) else "a socket" if stat.S_ISSOCK(st.st_mode)
                else "not a regular file")
        raise UsageError(f"{path}: is {what}; export writes only regular files (or '-' for standard output)")
    if not path.parent.is_dir():
        raise UsageError(f"{path}: the folder {path.parent} does not exist")


def write_rows(rows: Iterable[dict], path: Path, fmt: str, columns: list[str] | None = None) -> int:
    """Write dict rows as JSONL or CSV to ``path`` (atomically; a new file gets the umask's
    permissions, an overwritten one keeps its own), or to standard output when ``path`` is
    ``-``; returns the number of rows. ``rows`` is consumed once, as it comes (a generator
    streams). CSV header: ``columns`` when given, else the union of the rows' keys (then the
    rows are read into memory first). Nested values are JSON text in CSV. Raises UsageError
    for a target :func:`check_target` refuses."""
    check_target(path)
    if fmt == "csv" and columns is None:
        rows = list(rows)
        columns = list(dict.fromkeys(k for row in rows for k in row))
    if str(path) == "-":
        with tempfile.TemporaryFile("w+", encoding="utf-8", newline="") as tmp:
            n = _dump(rows, tmp, fmt, columns)
            tmp.seek(0)
            out = sys.stdout
            if hasattr(out, "buffer"):
                out.flush()
                shutil.copyfileobj(tmp, _TextToBytes(out.buffer))
                out.buffer.flush()
            else:
                shutil.copyfileobj(tmp, out)
                out.flush()
        return n
    try:
        mode = path.stat().st_mode & 0o777  # overwriting: keep the file's permissions
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask  # a new file: what open() would give it
    fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            n = _dump(rows, f, fmt, columns)
        os.chmod(tmp_name, mode)  # mkstemp creates 0600
        check_target(path)  # still not a link or a device at the moment of the rename
        os.replace(tmp_name, path)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise
    return n


def csv_text(rows: list[dict]) -> str:
    """``rows`` as the CSV text :func:`write_rows` writes (header: the union of the keys in
    order; nested values as JSON, formula-looking cells neutralised): what a web page offers
    as a download of the same board."""
    import io

    columns = list(dict.fromkeys(k for row in rows for k in row)) or ["model"]
    buf = io.StringIO(newline="")
    _dump(rows, buf, "csv", columns)
    return buf.getvalue()


class _TextToBytes:
    """A write-only adapter: text in, UTF-8 bytes out (stdout's binary buffer, no newline
    translation)."""

    def __init__(self, raw: Any):
        self.raw = raw

    def write(self, text: str) -> int:
        return self.raw.write(text.encode("utf-8"))


def _dump(rows: Iterable[dict], f: IO[str], fmt: str, columns: list[str] | None) -> int:
    n = 0
    if fmt == "jsonl":
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False, default=str) + "\n")
            n += 1
        return n
    assert columns is not None
    f.write(csv_line(columns))
    for row in rows:
        f.write(csv_line([_cell(row.get(k)) for k in columns]))
        n += 1
    return n


def _cell(value) -> str | None:
    if value is None:
        return None
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    if isinstance(value, str):
        return neutralise_cell(value)
    if isinstance(value, float):
        return repr(value)
    return str(value)
