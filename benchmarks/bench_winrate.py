"""Win-rate benchmark on the real AlpacaEval annotations (../shared/data/alpaca_eval):

1. import every shared annotations.json (26 models, 20,119 verdicts, 95 MB) into a fresh SQLite
   database through judgecal's import path, --repeat times: with the automatic number of parsing
   workers (judgecal.importers.parallel) and, as the reference in the same run, with the files
   parsed in the importing process alone (workers=0); prints the best and median verdicts/s of
   each, their ratio, and the time Python's own json.loads takes on the same files;
2. the win-rate leaderboard with all three columns (raw, LC, calibrated) and N bootstrap
   resamples over the shared models; prints seconds, and the LC/raw parity with AlpacaEval's
   published leaderboard.csv (median and max |LC - published|).

    .venv/bin/python benchmarks/bench_winrate.py [--bootstrap 1000] [--repeat 7] [--data ../shared/data]
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

from judgecal import importing
from judgecal.db import engine as eng
from judgecal.db import migrate
from judgecal.importers.parallel import auto_workers
from judgecal.winrates import build_winrate_board


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=7, help="imports per mode (best and median reported)")
    ap.add_argument("--data", default=os.environ.get("JUDGECAL_SHARED_DATA", "../shared/data"))
    args = ap.parse_args()
    ae = Path(args.data) / "alpaca_eval"
    files = sorted((ae / "results").glob("*/*/annotations.json"))
    auto = auto_workers(files)
    times: dict[int, list[float]] = {auto: [], 0: []}
    n = 0
    for _ in range(args.repeat):
        for workers in times:
            with tempfile.TemporaryDirectory() as d:
                url = f"sqlite:///{d}/bench.db"
                e = eng.create(url)
                migrate.upgrade(e, "head")
                e.dispose()
                t = time.perf_counter()
                res = importing.import_alpaca_eval([ae / "results"], [], None, url, workers=workers)
                times[workers].append(time.perf_counter() - t)
                n = res["added"]["pairwise_judgment"]
    t = time.perf_counter()
    for f in files:
        json.loads(f.read_text(encoding="utf-8"))
    t_json = time.perf_counter() - t
    best = {w: min(ts) for w, ts in times.items()}
    median = {w: statistics.median(ts) for w, ts in times.items()}
    print(f"import: {len(files)} files, {n} verdicts, best / median of {args.repeat} runs each (fresh database, "
          f"commit included):")
    for w, label in ((auto, f"{auto} parsing worker(s) + the importing process"), (0, "the importing process alone")):
        print(f"  {label}: {best[w]:.3f} / {median[w]:.3f} s = {n / best[w]:,.0f} / {n / median[w]:,.0f} verdicts/s")
    print(f"  ratio (median): {median[0] / median[auto]:.2f}x the importing process alone; Python's json.loads of the "
          f"same files alone: {t_json:.2f} s ({n / t_json:,.0f} verdicts/s)")
    with tempfile.TemporaryDirectory() as d:
        url = f"sqlite:///{d}/bench.db"
        importing.import_alpaca_eval([ae / "results"], [], None, url)
        importing.import_alpaca_eval([ae / "gpt4_1106_preview_concise.json", ae / "gpt4_1106_preview_verbose.json"], [], None, url)
        t = time.perf_counter()
        board = build_winrate_board("gpt4_1106_preview", url=url, n_bootstrap=args.bootstrap,
                                    lc_weights=ae / "length_controlled_v1_weights.csv")
        t_board = time.perf_counter() - t
    with open(ae / "leaderboard.csv", newline="") as fh:
        pub = {r[""]: r for r in csv.DictReader(fh)}
    rows = [r for r in board["rows"] if r["model"] in pub and r["model"] != "gpt4_1106_preview"]
    lc = [abs(r["lc_win_rate"] - float(pub[r["model"]]["length_controlled_winrate"])) for r in rows]
    raw = [abs(r["win_rate"] - float(pub[r["model"]]["win_rate"])) for r in rows]
    print(f"leaderboard: {len(board['rows'])} models, raw + LC + calibrated, {args.bootstrap} bootstrap resamples: {t_board:.2f} s")
    print(f"parity ({len(rows)} shared models): raw max |diff| {max(raw):.4f} points; LC median |diff| {np.median(lc):.2f}, "
          f"max {max(lc):.2f} points")


if __name__ == "__main__":
    main()
