"""Win-rate benchmark on the real AlpacaEval annotations (../shared/data/alpaca_eval):

1. import every shared annotations.json (26 models, 20,119 verdicts, 95 MB) into a fresh SQLite
   database through judgecal's import path, --repeat times: with the automatic number of parsing
   workers (judgecal.importers.parallel) and, as the reference in the same run, with the files
   parsed in the importing process alone (workers=0); prints the best and median verdicts/s of
   each, their ratio, and the time Python's own json.loads takes on the same files (read +
   decode, in a fresh Python process, best of --repeat: in this process, after the imports,
   the garbage collector walks what they left and json.loads of these files full of small
   objects is 1.3-1.7x slower: a reference that flattered the import until 2026-12-04);
2. the win-rate leaderboard with all three columns (raw, LC, calibrated) and N bootstrap
   resamples over the shared models, with nothing but the annotations imported; prints seconds,
   and the LC/raw parity with AlpacaEval's published leaderboard.csv (median and max
   |LC - published|);
3. --synthetic N (default 200) synthetic models on AlpacaEval's 805 instructions (the real
   baseline answers; answers of random length, soft verdicts drawn from a logistic model with a
   length effect), written as AlpacaEval annotation files: import vs json.loads of the same
   files (fresh process, as above), then the leaderboard (raw, LC, calibrated, N bootstrap
   resamples).

``benchmarks/bench_import_sqlite.py --floor`` sets these against what SQLite alone needs for
the same rows.

    .venv/bin/python benchmarks/bench_winrate.py [--bootstrap 1000] [--repeat 7] [--synthetic 200] [--data ../shared/data]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from bench_import_sqlite import json_loads_fresh, timed_import  # benchmarks/, this script's folder
from judgecal.views import importing
from judgecal.db import engine as eng
from judgecal.db import migrate
from judgecal.importers.parallel import auto_workers
from judgecal.views.winrates import build_winrate_board


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=7, help="imports per mode (best and median reported)")
    ap.add_argument("--data", default=os.environ.get("JUDGECAL_SHARED_DATA", "../shared/data"))
    ap.add_argument("--synthetic", type=int, default=200, help="synthetic models (0: skip)")
    args = ap.parse_args()
    ae = Path(args.data) / "alpaca_eval"
    files = sorted((ae / "results").glob("*/*/annotations.json"))
    auto = auto_workers(files)
    times: dict[int, list[float]] = {auto: [], 0: []}
    n = 0
    for _ in range(args.repeat):
        for workers in times:
            seconds, res = timed_import(ae / "results", workers)
            times[workers].append(seconds)
            n = res["added"]["pairwise_judgment"]
    t_json = min(json_loads_fresh(files) for _ in range(args.repeat))
    best = {w: min(ts) for w, ts in times.items()}
    median = {w: statistics.median(ts) for w, ts in times.items()}
    print(f"import: {len(files)} files, {n} verdicts, best / median of {args.repeat} runs each (fresh database, "
          f"commit included):")
    for w, label in ((auto, f"{auto} parsing worker(s) + the importing process"), (0, "the importing process alone")):
        print(f"  {label}: {best[w]:.3f} / {median[w]:.3f} s = {n / best[w]:,.0f} / {n / median[w]:,.0f} verdicts/s")
    print(f"  ratio (median): {median[0] / median[auto]:.2f}x the importing process alone; Python's json.loads of the "
          f"same files alone (fresh process, best of {args.repeat}): {t_json:.3f} s ({n / t_json:,.0f} verdicts/s): the import "
          f"(best) {best[auto] / t_json:.2f}x json.loads")
    with tempfile.TemporaryDirectory() as d:
        url = f"sqlite:///{d}/bench.db"
        importing.import_alpaca_eval([ae / "results"], [], None, url)
        t = time.perf_counter()
        board = build_winrate_board("gpt4_1106_preview", url=url, n_bootstrap=args.bootstrap)
        t_board = time.perf_counter() - t
    with open(ae / "leaderboard.csv", newline="") as fh:
        pub = {r[""]: r for r in csv.DictReader(fh)}
    rows = [r for r in board["rows"] if r["model"] in pub and r["model"] != "gpt4_1106_preview"]
    lc = [abs(r["length_controlled_winrate"] - float(pub[r["model"]]["length_controlled_winrate"])) for r in rows]
    raw = [abs(r["win_rate"] - float(pub[r["model"]]["win_rate"])) for r in rows]
    print(f"leaderboard: {len(board['rows'])} models, raw + LC + calibrated, {args.bootstrap} bootstrap resamples: {t_board:.2f} s")
    print(f"parity ({len(rows)} shared models): raw max |diff| {max(raw):.4f} points; LC median |diff| {np.median(lc):.2f}, "
          f"max {max(lc):.2f} points")
    if args.synthetic:
        synthetic(ae, args.synthetic, args.bootstrap)


def synthetic(ae: Path, n_models: int, n_bootstrap: int) -> None:
    base = json.loads((ae / "gpt4_1106_preview.json").read_text(encoding="utf-8"))
    rng = np.random.default_rng(0)
    words = "the of and to in a is that for it as with was on be by this are or an".split()
    with tempfile.TemporaryDirectory() as d:
        res = Path(d) / "results"
        for k in range(n_models):
            name = f"synthetic-{k:03d}"
            skill, verbosity = rng.normal(-1, 1), rng.lognormal(-0.5, 0.6)
            recs = []
            for r in base:
                n_w = max(1, int(rng.lognormal(np.log(verbosity * len(r["output"]) / 5), 0.4)))
                out = " ".join(rng.choice(words, n_w))
                z = skill + 0.8 * np.tanh((len(out) - len(r["output"])) / 1500) + rng.normal(0, 1)
                recs.append({"instruction": r["instruction"], "output_1": r["output"], "generator_1": "gpt4_1106_preview",
                             "dataset": r["dataset"], "output_2": out, "generator_2": name,
                             "annotator": "weighted_alpaca_eval_gpt4_turbo",
                             "preference": f"{1 + 1 / (1 + np.exp(-z)):.10f}", "raw_completion": None})
            f = res / name / "weighted_alpaca_eval_gpt4_turbo" / "annotations.json"
            f.parent.mkdir(parents=True)
            f.write_text(json.dumps(recs))
        files = sorted(res.glob("*/*/annotations.json"))
        size = sum(f.stat().st_size for f in files)
        t_json = min(json_loads_fresh(files) for _ in range(3))
        url = f"sqlite:///{d}/bench.db"
        e = eng.create(url)
        migrate.upgrade(e, "head")
        e.dispose()
        t = time.perf_counter()
        res_ = importing.import_alpaca_eval([res], [], None, url)
        t_import = time.perf_counter() - t
        n = res_["added"]["pairwise_judgment"]
        print(f"synthetic: {n_models} models, {n} verdicts, {size / 1e6:.0f} MB: import {t_import:.2f} s ({n / t_import:,.0f} "
              f"verdicts/s); json.loads of the same files (fresh process, best of 3) {t_json:.2f} s ({n / t_json:,.0f}/s): "
              f"{t_import / t_json:.2f}x json.loads")
        t = time.perf_counter()
        board = build_winrate_board("gpt4_1106_preview", url=url, n_bootstrap=n_bootstrap)
        print(f"synthetic leaderboard: {len(board['rows'])} rows, raw + LC + calibrated, {n_bootstrap} bootstrap resamples: "
              f"{time.perf_counter() - t:.2f} s")


if __name__ == "__main__":
    main()
