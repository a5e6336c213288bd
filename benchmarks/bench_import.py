"""Import throughput: 100 000 synthetic responses (with their lengths) through judgecal's
import path (JSONL file -> parse -> one transaction of bulk inserts), into SQLite and into
PostgreSQL. Prints rows/s for each and the ratio to a bare executemany of the same rows.

    .venv/bin/python benchmarks/bench_import.py [--n 100000] [--pg postgresql+psycopg://postgres@127.0.0.1:5432/postgres]
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
import uuid
from pathlib import Path

from sqlalchemy import create_engine, text

from judgecal.views import importing
from judgecal.db import engine as eng
from judgecal.db import migrate


def make_file(path: Path, n: int, seed: int = 0) -> None:
    rng = random.Random(seed)
    words = "the judge rewards length more than content in many long answers today".split()
    with path.open("w") as f:
        for i in range(n):
            body = " ".join(rng.choice(words) for _ in range(rng.randint(5, 120)))
            rec = {"task_family": f"fam{i % 10}", "prompt": f"question {i // 4}", "model": f"model{i % 4}", "response": body}
            f.write(json.dumps(rec) + "\n")


def bench(url: str, path: Path, n: int) -> tuple[float, int]:
    engine = eng.create(url)
    migrate.upgrade(engine, "head")
    engine.dispose()
    t0 = time.perf_counter()
    result = importing.import_generic(path, "responses", "jsonl", None, url)
    dt = time.perf_counter() - t0
    assert result["added"]["response"] == n, result
    return dt, sum(result["added"].values())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--pg", default="postgresql+psycopg://postgres@127.0.0.1:5432/postgres")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "responses.jsonl"
        make_file(path, args.n)
        dt, rows = bench(f"sqlite:///{tmp}/bench.db", path, args.n)
        print(f"SQLite:     {args.n} responses in {dt:6.2f} s = {args.n / dt:8.0f} responses/s, "
              f"{rows / dt:8.0f} rows/s ({rows} rows: responses + items + families; goal >= 20000 rows/s)")
        admin = create_engine(args.pg, isolation_level="AUTOCOMMIT")
        name = f"judgecal_bench_{uuid.uuid4().hex[:8]}"
        try:
            with admin.connect() as c:
                c.execute(text(f'CREATE DATABASE "{name}"'))
        except Exception as exc:  # noqa: BLE001
            print(f"PostgreSQL: skipped ({exc.__class__.__name__}: {str(exc).splitlines()[0]})")
            return
        try:
            dt, rows = bench(args.pg.rsplit("/", 1)[0] + f"/{name}", path, args.n)
            print(f"PostgreSQL: {args.n} responses in {dt:6.2f} s = {args.n / dt:8.0f} responses/s, {rows / dt:8.0f} rows/s")
        finally:
            with admin.connect() as c:
                c.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


if __name__ == "__main__":
    main()
