"""Peak memory of ``judgecal export ratings``: 200 000 ratings (2 000 items x 10 models x 10
judges, ~1.6 kB of response text each) in a fresh SQLite database (and PostgreSQL with
--pg), exported to JSONL and CSV in a child process; prints its peak RSS (ru_maxrss) and
wall time.

    .venv/bin/python benchmarks/bench_export.py [--items 2000] [--pg postgresql+psycopg://postgres@127.0.0.1:5432/postgres]
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from sqlalchemy import create_engine, select, text

from judgecal.views import importing
from judgecal.db import models as m
from judgecal.db import queries as q
from judgecal.db.engine import get_engine, session_scope

WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "theta", "lambda", "sigma", "omega"]


def build(url: str, folder: Path, items: int, models: int = 10, judges: int = 10) -> int:
    rnd = random.Random(0)

    def words(n: int) -> str:
        return " ".join(rnd.choice(WORDS) for _ in range(n))

    src = folder / "responses.jsonl"
    with src.open("w") as f:
        for i in range(items):
            prompt = f"Item {i}: " + words(50)
            for k in range(models):
                f.write(json.dumps({"task_family": "bench", "prompt": prompt, "model": f"model{k}", "response": words(250)}) + "\n")
    importing.import_generic(src, "responses", "jsonl", url=url)
    engine = get_engine(url)
    with session_scope(engine) as s:
        rids = list(s.scalars(select(m.Response.id)))
        now = m.utcnow()
        for j in range(judges):
            jid = q.get_or_create_judge(s, model=f"judge{j}", endpoint="http://127.0.0.1:8000/v1", prompt_name="pointwise_v1",
                                        prompt_sha256="0" * 64, mode="pointwise", params={"temperature": 0.0, "max_tokens": 512},
                                        scale_min=1.0, scale_max=10.0, name=f"judge{j}").id
            q.insert_ignore(s, m.Rating, [{"response_id": r, "judge_id": jid, "sample_index": 0, "status": "ok",
                                           "score": float(rnd.randint(1, 10)), "raw_output": "Fine. " + words(30) + " [[7]]",
                                           "attempts": 1, "created_at": now, "updated_at": now} for r in rids])
        if engine.dialect.name == "sqlite":  # fold the WAL into the file, as any later session would find it
            s.commit()
            s.execute(text("PRAGMA wal_checkpoint(TRUNCATE)"))
    engine.dispose()
    return len(rids) * judges


def measure(url: str, out: Path, fmt: str) -> tuple[float, float]:
    """(peak RSS in MB of a child process that runs the export, wall seconds)."""
    code = ("from pathlib import Path; from judgecal.views.export import export; import resource, sys; "
            f"export('ratings', {fmt!r}, Path({str(out)!r}), {url!r}); "
            "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)")
    start = time.perf_counter()
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return int(res.stdout.strip().splitlines()[-1]) / 1024, time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--items", type=int, default=2000)
    ap.add_argument("--pg", default=None, help="admin URL of a PostgreSQL server (a scratch database is made and dropped)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        targets = [("sqlite", f"sqlite:///{folder / 'bench.db'}")]
        admin = None
        if args.pg:
            name = f"judgecal_bench_{uuid.uuid4().hex[:8]}"
            admin = create_engine(args.pg, isolation_level="AUTOCOMMIT")
            with admin.connect() as conn:
                conn.execute(text(f'CREATE DATABASE "{name}"'))
            targets.append(("postgresql", args.pg.rsplit("/", 1)[0] + f"/{name}"))
        try:
            for dialect, url in targets:
                n = build(url, folder, args.items)
                for fmt in ("jsonl", "csv"):
                    out = folder / f"ratings.{fmt}"
                    rss, wall = measure(url, out, fmt)
                    print(f"{dialect:10s} {fmt:5s} {n} ratings: peak RSS {rss:.0f} MB, {wall:.1f} s, "
                          f"file {out.stat().st_size / 1e6:.0f} MB")
                    out.unlink()
        finally:
            if admin is not None:
                with admin.connect() as conn:
                    conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
                admin.dispose()


if __name__ == "__main__":
    main()
