"""SQLite's own share of an AlpacaEval import (issue 20): the bulk inserts an import makes,
recorded once, then replayed into fresh databases, so that SQLite's work is measured apart
from the parsing and in several settings in the same process, alternating.

1. import FOLDER (default: the 26 shared annotations files) into a scratch database, recording
   every ``queries._sqlite_executemany`` call (table, columns, rows);
2. --repeat times, for each variant in turn: a fresh database at head, the recorded calls
   replayed in one transaction, then the commit (WAL checkpoint included) and the close.
   Prints best / median CPU seconds of the inserts per table, wall seconds of commit and
   close, and the database size.

Variants: ``multi`` (judgecal's: several rows per INSERT, 16 KiB pages), ``single`` (one row
per INSERT, as before issue 20's change), ``page4k`` (SQLite's default 4 KiB pages),
``fkoff`` (foreign keys not checked: for comparison only, judgecal keeps them on).

``--floor`` (issue 20: can any SQLite import of these files be as fast as ``json.loads``?)
measures instead, best of --repeat, each step on its own:

- ``json.loads`` of every file (read + decode, the issue's reference), in a fresh Python
  process, and in this process after the recording import (its garbage collector then walks
  the objects the import left: ``json.loads`` of files full of small objects is slower there);
- the whole import (``judgecal.views.importing.import_alpaca_eval``, parsing workers as
  picked, commit included) into a fresh database;
- judgecal's own inserts replayed (variant ``multi``, no parsing), commit included;
- the floor: the same rows (every table the import writes) into tables of the same columns
  with no index, constraint, key or foreign key, no parsing, no conversion, committed, in
  WAL (judgecal's journal: readers and rating workers go on while an import writes) and in
  a rollback journal (DELETE: the import would lock every reader out), 16 KiB pages.

    .venv/bin/python benchmarks/bench_import_sqlite.py [--folder DIR] [--repeat 5] [--variants multi,single,page4k] [--floor]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from judgecal.db import engine as eng
from judgecal.db import migrate
from judgecal.db import models as m
from judgecal.db import queries as q
from judgecal.views import importing


def record(folder: Path) -> list[tuple[str, list[str], list[tuple]]]:
    calls: list[tuple[str, list[str], list[tuple]]] = []
    orig = q._sqlite_executemany

    def rec(conn, table, cols, rows, chunk):
        calls.append((table.name, list(cols), list(rows)))
        return orig(conn, table, cols, rows, chunk)

    q._sqlite_executemany = rec
    try:
        with tempfile.TemporaryDirectory() as d:
            url = f"sqlite:///{d}/rec.db"
            importing.import_alpaca_eval([folder], [], None, url, workers=0)
    finally:
        q._sqlite_executemany = orig
    return calls


def replay(calls, variant: str) -> dict[str, float]:
    group, page = q._SQLITE_ROWS_PER_INSERT, eng.SQLITE_PAGE_SIZE
    q._SQLITE_ROWS_PER_INSERT = 1 if variant == "single" else group
    eng.SQLITE_PAGE_SIZE = 4096 if variant == "page4k" else page
    try:
        with tempfile.TemporaryDirectory() as d:
            url = f"sqlite:///{d}/b.db"
            e = eng.create(url)
            migrate.upgrade(e, "head")
            e.dispose()
            e = eng.create(url)
            out: dict[str, float] = {}
            with e.connect() as conn:
                if variant == "fkoff":
                    conn.connection.driver_connection.execute("PRAGMA foreign_keys=OFF")
                with conn.begin():
                    for name, cols, rows in calls:
                        t = time.process_time()
                        q._sqlite_executemany(conn, m.Base.metadata.tables[name], cols, rows, q.CHUNK)
                        out[name] = out.get(name, 0.0) + time.process_time() - t
                    t = time.perf_counter()
                out["commit"] = time.perf_counter() - t
                t = time.perf_counter()
            e.dispose()
            out["close"] = time.perf_counter() - t
            out["MB"] = os.path.getsize(f"{d}/b.db") / 1e6
            return out
    finally:
        q._SQLITE_ROWS_PER_INSERT, eng.SQLITE_PAGE_SIZE = group, page


_JSON_LOADS = """
import json, sys, time
files = sys.argv[1:]
t = time.perf_counter()
for f in files:
    with open(f, encoding="utf-8") as fh:
        json.loads(fh.read())
print(time.perf_counter() - t)
"""


def json_loads_fresh(files: list[Path]) -> float:
    """Seconds ``json.loads`` takes to read and decode ``files`` in a fresh Python process."""
    out = subprocess.run([sys.executable, "-c", _JSON_LOADS, *map(str, files)], check=True, capture_output=True,
                         text=True)
    return float(out.stdout)


def json_loads_here(files: list[Path]) -> float:
    t = time.perf_counter()
    for f in files:
        with open(f, encoding="utf-8") as fh:
            json.loads(fh.read())
    return time.perf_counter() - t


def _plain(v):
    """A value as sqlite3 binds it without SQLAlchemy (as the JSON and DateTime columns store it)."""
    if isinstance(v, dt.datetime):
        return v.isoformat(" ")
    return json.dumps(v) if isinstance(v, (dict, list)) else v


def bare(calls, journal: str) -> float:
    """Wall seconds to write the recorded rows into tables of the same columns with no index,
    constraint or key, plain executemany, committed and closed (16 KiB pages)."""
    tables: dict[str, list[str]] = {}
    rows_of: list[tuple[str, list[str], list[tuple]]] = []
    for name, cols, rows in calls:
        tables.setdefault(name, [])
        for c in cols:
            if c not in tables[name]:
                tables[name].append(c)
        rows_of.append((name, cols, [tuple(map(_plain, r)) for r in rows]))
    with tempfile.TemporaryDirectory() as d:
        conn = sqlite3.connect(f"{d}/bare.db", isolation_level=None)
        conn.execute("PRAGMA page_size=16384")
        conn.execute(f"PRAGMA journal_mode={journal}")
        conn.execute("PRAGMA synchronous=NORMAL")
        for name, cols in tables.items():
            conn.execute(f"CREATE TABLE {name} ({', '.join(cols)})")
        t = time.perf_counter()
        conn.execute("BEGIN")
        for name, cols, rows in rows_of:
            conn.executemany(f"INSERT INTO {name} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})", rows)
        conn.execute("COMMIT")
        conn.close()
        return time.perf_counter() - t


def timed_import(folder: Path, workers: int | None = None) -> tuple[float, dict]:
    """(wall seconds, the import's result) of importing ``folder`` (AlpacaEval files) into a
    fresh SQLite database at head, commit included; ``workers`` as ``import_alpaca_eval``."""
    with tempfile.TemporaryDirectory() as d:
        url = f"sqlite:///{d}/imp.db"
        e = eng.create(url)
        migrate.upgrade(e, "head")
        e.dispose()
        t = time.perf_counter()
        res = importing.import_alpaca_eval([folder], [], None, url, workers=workers)
        return time.perf_counter() - t, res


def replay_total(calls) -> float:
    r = replay(calls, "multi")
    return sum(v for k, v in r.items() if k != "MB")


def floor(folder: Path, calls, repeat: int) -> None:
    files = sorted(folder.glob("*/*/annotations.json"))
    size = sum(f.stat().st_size for f in files)
    steps = {
        "json.loads, fresh process (the reference)": lambda: json_loads_fresh(files),
        "json.loads, this process after an import": lambda: json_loads_here(files),
        "judgecal import (parse + write + commit)": lambda: timed_import(folder)[0],
        "judgecal's inserts replayed + commit (no parse)": lambda: replay_total(calls),
        "floor: same rows, bare tables, WAL + commit": lambda: bare(calls, "WAL"),
        "floor: same rows, bare tables, DELETE journal + commit": lambda: bare(calls, "DELETE"),
    }
    times: dict[str, list[float]] = {k: [] for k in steps}
    for _ in range(repeat):
        for k, fn in steps.items():
            times[k].append(fn())
    ref = min(times["json.loads, fresh process (the reference)"])
    print(f"{folder}: {len(files)} files, {size / 1e6:.0f} MB, {sum(len(r) for _, _, r in calls):,} rows; "
          f"best / median of {repeat}, seconds (x the reference, best):")
    for k, ts in times.items():
        print(f"  {k:58} {min(ts):7.3f} / {statistics.median(ts):7.3f}  {min(ts) / ref:5.2f}x")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--folder", default=None, help="AlpacaEval results folder (default: the shared one)")
    ap.add_argument("--data", default=os.environ.get("JUDGECAL_SHARED_DATA", "../shared/data"))
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--variants", default="multi,single,page4k")
    ap.add_argument("--floor", action="store_true", help="json.loads against the import, its inserts and bare tables")
    args = ap.parse_args()
    folder = Path(args.folder) if args.folder else Path(args.data) / "alpaca_eval" / "results"
    calls = record(folder)
    if args.floor:
        floor(folder, calls, args.repeat)
        return
    print(f"{folder}: {sum(len(r) for _, _, r in calls):,} rows in {len(calls)} bulk inserts")
    variants = args.variants.split(",")
    res: dict[str, list[dict[str, float]]] = {v: [] for v in variants}
    for _ in range(args.repeat):
        for v in variants:
            res[v].append(replay(calls, v))
    for v in variants:
        runs = res[v]
        shown = [k for k in runs[0] if k in ("response", "pairwise_judgment", "commit", "close")]
        cpu = [sum(r[k] for k in r if k not in ("commit", "close", "MB")) for r in runs]
        print(f"{v:8} inserts {min(cpu):.3f} / {statistics.median(cpu):.3f} s CPU (" + ", ".join(
            f"{k} {min(r[k] for r in runs):.3f} / {statistics.median(r[k] for r in runs):.3f}" for k in shown)
            + f"); database {runs[0]['MB']:.1f} MB")


if __name__ == "__main__":
    main()
