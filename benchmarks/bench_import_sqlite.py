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

    .venv/bin/python benchmarks/bench_import_sqlite.py [--folder DIR] [--repeat 5] [--variants multi,single,page4k]
"""

from __future__ import annotations

import argparse
import os
import statistics
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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--folder", default=None, help="AlpacaEval results folder (default: the shared one)")
    ap.add_argument("--data", default=os.environ.get("JUDGECAL_SHARED_DATA", "../shared/data"))
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--variants", default="multi,single,page4k")
    args = ap.parse_args()
    folder = Path(args.folder) if args.folder else Path(args.data) / "alpaca_eval" / "results"
    calls = record(folder)
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
