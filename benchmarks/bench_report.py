"""Benchmark: `judgecal fit` and `judgecal report` over 1,000,000 synthetic ratings in SQLite.

Builds a SQLite database with 10 task families of 50,000 expert-labelled pairs each (100,000
responses and ratings per family; planted length terms as in bench_fit.py, lengths stored as
whitespace words), fits every family through the library (`judgecal.views.fitting.run_fit`, the
same code as `judgecal fit`, with --folds 5 --bootstrap 0), then times the `judgecal report
--out DIR` command (a subprocess: Python start-up, loading the 10 stored fits, the tables, the
JSON/Markdown and the HTML page with 20 PNG plots). Goal for the report: <= 15 s.

Run: .venv/bin/python benchmarks/bench_report.py [--ratings 1000000] [--families 10]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from sqlalchemy import select

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_fit import simulate  # noqa: E402

from judgecal.db import engine as eng  # noqa: E402
from judgecal.db import migrate  # noqa: E402
from judgecal.db import models as m  # noqa: E402
from judgecal.db import queries as q  # noqa: E402
from judgecal.views.fitting import run_fit  # noqa: E402


def build(url: str, n_ratings: int, families: int, seed: int) -> float:
    rng = np.random.default_rng(seed)
    n_pairs = n_ratings // families // 2
    engine = eng.create(url)
    migrate.upgrade(engine, "head")
    t0 = time.perf_counter()
    now = m.utcnow()
    with eng.session_scope(engine) as s:
        judge = q.get_or_create_judge(s, name="synthetic-judge", model="synthetic-judge", endpoint="bench",
                                      prompt_name="bench", prompt_sha256=q.sha256_text("bench"), mode="pointwise",
                                      params={}, scale_min=-20.0, scale_max=30.0)
        for f, (g, p, med) in enumerate(zip(np.linspace(0.2, 1.0, families), np.linspace(1.05, 1.45, families),
                                            np.geomspace(150, 600, families))):
            sa, sb, la, lb, y, _ = simulate(n_pairs, g, p, med, rng)
            fid = q.family_id(s, f"synthetic/{f}", create=True)
            q.insert_ignore(s, m.Item, [{"task_family_id": fid, "prompt": f"item {i}", "prompt_sha256": q.sha256_text(f"{f}/{i}"),
                                         "created_at": now} for i in range(n_pairs)])
            items = dict(s.execute(select(m.Item.prompt_sha256, m.Item.id).where(m.Item.task_family_id == fid)).all())
            resp = []
            for i in range(n_pairs):
                iid = items[q.sha256_text(f"{f}/{i}")]
                for side, length in (("a", la[i]), ("b", lb[i])):
                    w = max(1, int(round(length)))
                    resp.append({"item_id": iid, "model": f"model_{side}", "text": f"r{i}{side}", "text_sha256": q.sha256_text(f"{f}/{i}/{side}"),
                                 "n_bytes": w * 5, "n_chars": w * 5, "n_words": w, "created_at": now})
            q.insert_ignore(s, m.Response, resp)
            ids = q.response_ids(s, [(r["item_id"], r["model"], r["text_sha256"]) for r in resp])
            rid = [ids[(r["item_id"], r["model"], r["text_sha256"])] for r in resp]
            scores = np.empty(2 * n_pairs)
            scores[0::2], scores[1::2] = sa, sb
            q.insert_ignore(s, m.Rating, [{"response_id": r, "judge_id": judge.id, "sample_index": 0, "status": "ok",
                                           "score": float(v), "attempts": 1, "created_at": now} for r, v in zip(rid, scores)])
            pref = {1.0: "a", 0.0: "b", 0.5: "tie"}
            q.insert_ignore(s, m.ExpertLabel, [{"label_key": q.key_of("bench", rid[2 * i]), "kind": "pairwise",
                                                "response_a_id": rid[2 * i], "response_b_id": rid[2 * i + 1],
                                                "preference": pref[float(y[i])], "annotator": "sim", "source": "bench",
                                                "created_at": now} for i in range(n_pairs)])
    engine.dispose()
    return time.perf_counter() - t0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ratings", type=int, default=1_000_000)
    ap.add_argument("--families", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{tmp}/bench.db"
        dt = build(url, args.ratings, args.families, args.seed)
        print(f"built {args.ratings} ratings in {args.families} families in {dt:.1f} s")
        t0 = time.perf_counter()
        for f in range(args.families):
            t = time.perf_counter()
            row = run_fit(f"synthetic/{f}", "synthetic-judge", url=url, length_unit="words", folds=5, n_bootstrap=0, seed=0)
            print(f"  fit synthetic/{f}: gamma {row['gamma']:.3f} p {row['p']:.3f} (n {row['n']}) in {time.perf_counter() - t:.1f} s")
        print(f"judgecal fit (library, 5-fold CV, every baseline) for all families: {time.perf_counter() - t0:.1f} s")
        t0 = time.perf_counter()
        r = subprocess.run([sys.executable, "-m", "judgecal", "--database-url", url, "report", "--format", "json",
                            "--out", f"{tmp}/report"], capture_output=True, text=True)
        dt = time.perf_counter() - t0
        if r.returncode != 0:
            print(r.stderr[-2000:])
            return 1
        size = Path(f"{tmp}/report/report.html").stat().st_size
        print(f"judgecal report --out (JSON + Markdown + HTML with plots, {size / 1e6:.1f} MB): {dt:.1f} s (goal <= 15 s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
