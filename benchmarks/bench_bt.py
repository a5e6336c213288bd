"""Bradley-Terry board benchmark (issue 34: 1000 resamples over 26 models and 805 items in <= 3 s,
over 200 models in <= 20 s).

1. The real AlpacaEval annotations (../shared/data/alpaca_eval/results: 26 models, 805 items,
   20,119 soft verdicts of GPT-4-turbo): the maths alone (judgecal.calibrate.bt: merge the
   battles, fit, --bootstrap item resamples) on arrays read from the files, and the whole
   board (judgecal.views.btboard.build_bt_board: read the verdicts from a SQLite database the
   annotations were imported into, fit, bootstrap, rows) -- the import is not timed.
2. Synthetic: 200 models on 805 items, every model against the baseline on every item with a
   soft credit ("star", AlpacaEval's shape), and the same plus two random opponents per model
   and item with hard 0/1 outcomes ("mixed": 19,900 model pairs, many with a handful of battles,
   so that resamples lose directions of credit and the linked-graph check runs).

Best and median of --repeat runs each, with the load average.

    .venv/bin/python benchmarks/bench_bt.py [--bootstrap 1000] [--repeat 3] [--data ../shared/data]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from judgecal.calibrate import bt  # noqa: E402

BASELINE = "gpt4_1106_preview"


def alpaca_arrays(data: Path):
    rows = []
    for path in sorted((data / "alpaca_eval" / "results").glob("*/weighted_alpaca_eval_gpt4_turbo/annotations.json")):
        for r in json.loads(path.read_text(encoding="utf-8")):
            if r.get("preference") is not None and r["generator_1"] != r["generator_2"]:
                rows.append((path.parts[-3], r["generator_1"], float(r["preference"]) - 1.0, r["instruction"]))
    models = sorted({x for r in rows for x in r[:2]})
    code = {n: i for i, n in enumerate(models)}
    items = {t: i for i, t in enumerate(sorted({r[3] for r in rows}))}
    a = np.array([code[r[0]] for r in rows])
    b = np.array([code[r[1]] for r in rows])
    y = np.array([r[2] for r in rows])
    it = np.array([items[r[3]] for r in rows])
    return len(models), models.index(BASELINE), a, b, y, it, len(items)


def synthetic(m: int, n_items: int, extra: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    true = rng.normal(0, 1, m)
    A, B, It = [np.tile(np.arange(1, m), n_items)], [np.zeros((m - 1) * n_items, dtype=int)], [
        np.repeat(np.arange(n_items), m - 1)]
    for _ in range(extra):
        o = rng.integers(1, m, (n_items, m - 1))
        me = np.tile(np.arange(1, m), (n_items, 1))
        ok = o != me
        A.append(me[ok])
        B.append(o[ok])
        It.append(np.repeat(np.arange(n_items), m - 1).reshape(n_items, m - 1)[ok])
    a, b, it = np.concatenate(A), np.concatenate(B), np.concatenate(It)
    p = 1 / (1 + np.exp(-(true[a] - true[b])))
    y = np.clip(p + rng.normal(0, 0.15, a.size), 0, 1) if not extra else (rng.random(a.size) < p).astype(float)
    return m, 0, a, b, y, it, n_items


def time_maths(m, anchor, a, b, y, it, n_items, n_bootstrap: int) -> tuple[float, dict]:
    t0 = time.perf_counter()
    d = bt.make_design(a, b, y, np.ones(a.size), it, m, n_items)
    f = bt.fit_bt(d, anchor)
    boot = bt.bootstrap_bt(d, anchor, f, n_bootstrap, seed=0)
    dt = time.perf_counter() - t0
    return dt, {"rows": int(d.ia.size), "battles": int(a.size), "set_apart_resamples": boot.n_set_apart,
                "not_converged": boot.n_not_converged, "fit_steps": f.n_iter}


def report(label: str, times: list[float], info: dict) -> None:
    print(f"{label}: best {min(times):.2f} s, median {statistics.median(times):.2f} s over {len(times)} runs; {info}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data")
    args = ap.parse_args()
    print(f"load average at start: {os.getloadavg()}")
    if (args.data / "alpaca_eval" / "results").is_dir():
        arrays = alpaca_arrays(args.data)
        times, info = [], {}
        for _ in range(args.repeat):
            t, info = time_maths(*arrays, args.bootstrap)
            times.append(t)
        report(f"AlpacaEval maths (26 models, 805 items, {args.bootstrap} resamples)", times, info)
        from judgecal.views import importing
        from judgecal.views.btboard import build_bt_board

        with tempfile.TemporaryDirectory() as tmp:
            url = f"sqlite:///{Path(tmp) / 'bt.db'}"
            importing.import_alpaca_eval([args.data / "alpaca_eval" / "results"], [], None, url)
            times = []
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                board = build_bt_board(url=url, n_bootstrap=args.bootstrap, seed=0)
                times.append(time.perf_counter() - t0)
            report(f"AlpacaEval board from SQLite (read + fit + {args.bootstrap} resamples + rows)", times,
                   {"models": board["n_models"], "battles": board["n_battles"]})
    else:
        print(f"{args.data} absent: the real-data figures are skipped")
    for name, extra in (("star", 0), ("mixed", 2)):
        arrays = synthetic(200, 805, extra)
        times, info = [], {}
        for _ in range(args.repeat):
            t, info = time_maths(*arrays, args.bootstrap)
            times.append(t)
        report(f"synthetic {name} (200 models, 805 items, {args.bootstrap} resamples)", times, info)
    print(f"load average at end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
