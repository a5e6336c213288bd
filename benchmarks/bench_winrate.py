"""Win-rate benchmark on the real AlpacaEval annotations (../shared/data/alpaca_eval):

1. import every shared annotations.json (26 models, ~20k verdicts) into a fresh SQLite database
   through judgecal's import path; prints verdicts/s, and the share of the time spent in
   Python's own JSON decoder on the same files (a reference measured in the same run);
2. the win-rate leaderboard with all three columns (raw, LC, calibrated) and N bootstrap
   resamples over the shared models; prints seconds, and the LC/raw parity with AlpacaEval's
   published leaderboard.csv (median and max |LC - published|).

    .venv/bin/python benchmarks/bench_winrate.py [--bootstrap 1000] [--data ../shared/data]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np

from judgecal import importing
from judgecal.db import engine as eng
from judgecal.db import migrate
from judgecal.winrates import build_winrate_board


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", type=int, default=1000)
    ap.add_argument("--data", default=os.environ.get("JUDGECAL_SHARED_DATA", "../shared/data"))
    args = ap.parse_args()
    ae = Path(args.data) / "alpaca_eval"
    files = sorted((ae / "results").glob("*/*/annotations.json"))
    t = time.perf_counter()
    for f in files:
        json.loads(f.read_text(encoding="utf-8"))
    t_json = time.perf_counter() - t
    with tempfile.TemporaryDirectory() as d:
        url = f"sqlite:///{d}/bench.db"
        e = eng.create(url)
        migrate.upgrade(e, "head")
        e.dispose()
        t = time.perf_counter()
        res = importing.import_alpaca_eval([ae / "results"], [], None, url)
        t_imp = time.perf_counter() - t
        n = res["added"]["pairwise_judgment"]
        print(f"import: {len(files)} files, {n} verdicts in {t_imp:.2f} s = {n / t_imp:,.0f} verdicts/s "
              f"(json.loads of the same files alone: {t_json:.2f} s, {t_json / t_imp:.0%} of the import)")
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
