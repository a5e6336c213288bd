"""Import of the whole LLMBar repository layout (../shared/data/llmbar_repo: 394 files, 62 MB,
37,816 pairwise verdicts, 4,564 ratings, 326 expert labels) into a fresh SQLite database (and
PostgreSQL when reachable), against ``json.loads`` of the same files in the same run. Goal
(issue 19): the import takes at most 10 s.

    .venv/bin/python benchmarks/bench_llmbar_import.py [--data ../shared/data] [--repeat 3]
        [--pg postgresql+psycopg://postgres@127.0.0.1:5432/postgres]

Prints the best and median of ``--repeat`` runs of each: json.loads alone (read + decode every
.json file), the import into SQLite (parse, checks, statistics.json parity, one transaction),
and the import into PostgreSQL.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from judgecal.views import importing


def json_loads_all(root: Path) -> tuple[float, int, int]:
    t0 = time.perf_counter()
    n = size = 0
    for f in sorted(root.rglob("*.json")):
        data = f.read_bytes()
        json.loads(data)
        n += 1
        size += len(data)
    return time.perf_counter() - t0, n, size


def import_once(root: Path, url: str) -> tuple[float, dict]:
    t0 = time.perf_counter()
    out = importing.import_llmbar(root, url=url)
    return time.perf_counter() - t0, out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=str(Path(__file__).resolve().parents[1] / ".." / "shared" / "data"))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--pg", default="postgresql+psycopg://postgres@127.0.0.1:5432/postgres")
    args = ap.parse_args()
    root = Path(args.data) / "llmbar_repo"
    loads, sqlite, pg = [], [], []
    files = size = 0
    result = None
    for k in range(args.repeat):
        dt, files, size = json_loads_all(root)
        loads.append(dt)
        with tempfile.TemporaryDirectory() as tmp:
            dt, result = import_once(root, f"sqlite:///{tmp}/bench.db")
            sqlite.append(dt)
        try:
            from sqlalchemy import create_engine

            admin = create_engine(args.pg, isolation_level="AUTOCOMMIT")
            name = f"judgecal_bench_{uuid.uuid4().hex[:8]}"
            with admin.connect() as c:
                c.exec_driver_sql(f'CREATE DATABASE "{name}"')
            try:
                dt, _ = import_once(root, args.pg.rsplit("/", 1)[0] + f"/{name}")
                pg.append(dt)
            finally:
                with admin.connect() as c:
                    c.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
                admin.dispose()
        except Exception as exc:  # noqa: BLE001 - PostgreSQL is optional here
            if k == 0:
                print(f"PostgreSQL skipped: {str(exc).splitlines()[0]}")
    added = result["added"]
    records = added["pairwise_judgment"] + added["rating"] + added["expert_label"]
    print(f"{files} files, {size / 1e6:.1f} MB; {added['pairwise_judgment']} verdicts + {added['rating']} ratings + "
          f"{added['expert_label']} labels = {records} judge/expert records; statistics.json: "
          f"{result['llmbar_statistics']['equal']} of {result['llmbar_statistics']['compared']} reproduced")

    def line(what, xs):
        best, med = min(xs), statistics.median(xs)
        return (f"{what:<26} best {best:6.2f} s, median {med:6.2f} s ({records / best:8.0f} records/s best; "
                f"{best / min(loads):5.1f} x json.loads)")
    print(line("json.loads of every file", loads))
    print(line("import, SQLite", sqlite))
    if pg:
        print(line("import, PostgreSQL", pg))
    print("goal: the import <= 10 s" + ("" if min(sqlite) <= 10 else "  NOT MET"))


if __name__ == "__main__":
    main()
