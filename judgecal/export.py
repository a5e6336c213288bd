"""``judgecal export``: ratings, labels, pairs, responses (in the generic import format, so
they round-trip through ``judgecal import jsonl|csv``), calibrations and the leaderboard.

Files are written atomically (a temporary file beside the target, then renamed): an error
never leaves a half-written export. The path ``-`` writes to standard output (after every row
has been read, so an error still writes nothing)."""

from __future__ import annotations

import csv
import json
import io
import os
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path

from judgecal.db import exporting
from judgecal.db.engine import get_engine, session_scope
from judgecal.errors import UsageError

ROUND_TRIP = {"responses": exporting.responses, "ratings": exporting.ratings, "labels": exporting.labels, "pairs": exporting.pairs}
KINDS = (*ROUND_TRIP, "calibrations", "leaderboard")


def export(kind: str, fmt: str, path: Path, url: str | None = None, **options) -> int:
    """Write the ``kind`` rows to ``path`` as ``fmt`` (jsonl or csv); returns the row count."""
    if kind not in KINDS:
        raise UsageError(f"unknown export kind {kind!r} (expected one of {', '.join(KINDS)})")
    if fmt not in ("jsonl", "csv"):
        raise UsageError(f"--format must be jsonl or csv, got {fmt!r}")
    if kind in ROUND_TRIP:
        engine = get_engine(url)
        with session_scope(engine) as s:
            rows = list(ROUND_TRIP[kind](s))
        engine.dispose()
    elif kind == "calibrations":
        from judgecal.fitting import list_fits

        rows = list_fits(url=url)
    else:
        from judgecal.leaderboard import build_leaderboard

        rows = build_leaderboard(url=url, **options)["rows"]
    write_rows(rows, Path(path), fmt)
    return len(rows)


def write_rows(rows: Iterable[dict], path: Path, fmt: str) -> None:
    """Write dict rows as JSONL or CSV (union of keys as header; nested values as JSON text)
    to ``path`` (atomically; a new file gets the umask's permissions, an overwritten one keeps
    its own), or to standard output when ``path`` is ``-``. Raises UsageError when the folder
    does not exist."""
    rows = list(rows)
    if str(path) == "-":
        buf = io.StringIO(newline="")
        _dump(rows, buf, fmt)
        sys.stdout.write(buf.getvalue())
        sys.stdout.flush()
        return
    if not path.parent.is_dir():
        raise UsageError(f"{path}: the folder {path.parent} does not exist")
    try:
        mode = path.stat().st_mode & 0o777  # overwriting: keep the file's permissions
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask  # a new file: what open() would give it
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            _dump(rows, f, fmt)
        os.chmod(tmp, mode)  # mkstemp creates 0600
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _dump(rows: list[dict], f, fmt: str) -> None:
    if fmt == "jsonl":
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False, default=str) + "\n")
        return
    header = list(dict.fromkeys(k for row in rows for k in row))
    writer = csv.DictWriter(f, fieldnames=header)
    writer.writeheader()
    for row in rows:
        writer.writerow({k: _cell(v) for k, v in row.items()})


def _cell(value):
    if value is None:
        return ""
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    return value
