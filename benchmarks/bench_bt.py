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

With ``--control length|markdown|both``, the style-controlled fit (judgecal.calibrate.stylecontrol:
Arena-Hard-Auto's covariates, every battle its own design row): on the real annotations the
features come from the answers' texts in the files (words and the Markdown counts) for the maths,
and from the database (tokens under smollm2, filled by an untimed first call) for the board, which
then fits both the plain and the controlled board. The synthetic sets are skipped under
--control (every battle its own design row: the bootstrap's resamples x battles matrices of 480k
battles would not fit in memory).

Best and median of --repeat runs each, with the load average.

    .venv/bin/python benchmarks/bench_bt.py [--bootstrap 1000] [--repeat 3] [--data ../shared/data] [--control both]
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
from judgecal.calibrate import stylecontrol as sc  # noqa: E402
from judgecal.calibrate.style import style_counts  # noqa: E402

BASELINE = "gpt4_1106_preview"


def alpaca_arrays(data: Path):
    rows = []
    for path in sorted((data / "alpaca_eval" / "results").glob("*/weighted_alpaca_eval_gpt4_turbo/annotations.json")):
        for r in json.loads(path.read_text(encoding="utf-8")):
            if r.get("preference") is not None and r["generator_1"] != r["generator_2"]:
                rows.append((path.parts[-3], r["generator_1"], float(r["preference"]) - 1.0, r["instruction"],
                             r["output_2"], r["output_1"]))
    models = sorted({x for r in rows for x in r[:2]})
    code = {n: i for i, n in enumerate(models)}
    items = {t: i for i, t in enumerate(sorted({r[3] for r in rows}))}
    a = np.array([code[r[0]] for r in rows])
    b = np.array([code[r[1]] for r in rows])
    y = np.array([r[2] for r in rows])
    it = np.array([items[r[3]] for r in rows])

    def feats(t):
        c = style_counts(t)
        return [len(t.split()), c.md_headers, c.md_list_ordered + c.md_list_unordered, c.md_bold]

    fa = np.array([feats(r[4]) for r in rows], dtype=float)
    fb = np.array([feats(r[5]) for r in rows], dtype=float)
    raw = sc.raw_features(fa[:, 0], fb[:, 0], fa[:, 1:], fb[:, 1:])
    return len(models), models.index(BASELINE), a, b, y, it, len(items), raw


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
    return m, 0, a, b, y, it, n_items, None


def time_maths(m, anchor, a, b, y, it, n_items, raw, n_bootstrap: int, control: str = "none") -> tuple[float, dict]:
    t0 = time.perf_counter()
    Z = sc.style_matrix(raw, control)[0] if control != "none" else None
    d = bt.make_design(a, b, y, np.ones(a.size), it, m, n_items, features=Z)
    f = bt.fit_bt(d, anchor)
    boot = bt.bootstrap_bt(d, anchor, f, n_bootstrap, seed=0)
    dt = time.perf_counter() - t0
    return dt, {"rows": int(d.ia.size), "battles": int(a.size), "covariates": d.k, "set_apart_resamples": boot.n_set_apart,
                "not_converged": boot.n_not_converged, "fit_steps": f.n_iter}


def report(label: str, times: list[float], info: dict) -> None:
    print(f"{label}: best {min(times):.2f} s, median {statistics.median(times):.2f} s over {len(times)} runs; {info}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data")
    ap.add_argument("--control", choices=sorted(sc.CONTROLS), default="none")
    args = ap.parse_args()
    ctl = "" if args.control == "none" else f", --control {args.control}"
    print(f"load average at start: {os.getloadavg()}")
    if (args.data / "alpaca_eval" / "results").is_dir():
        arrays = alpaca_arrays(args.data)
        times, info = [], {}
        for _ in range(args.repeat):
            t, info = time_maths(*arrays, args.bootstrap, args.control)
            times.append(t)
        report(f"AlpacaEval maths (26 models, 805 items, {args.bootstrap} resamples{ctl})", times, info)
        from judgecal.views import importing
        from judgecal.views.btboard import build_bt_board

        with tempfile.TemporaryDirectory() as tmp:
            url = f"sqlite:///{Path(tmp) / 'bt.db'}"
            importing.import_alpaca_eval([args.data / "alpaca_eval" / "results"], [], None, url)
            if args.control != "none":  # untimed: store the token lengths the control reads
                build_bt_board(url=url, n_bootstrap=0, control=args.control)
            times = []
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                board = build_bt_board(url=url, n_bootstrap=args.bootstrap, seed=0, control=args.control)
                times.append(time.perf_counter() - t0)
            what = "" if args.control == "none" else f" plain + style-controlled ({args.control}, tokens)"
            report(f"AlpacaEval board from SQLite (read + fit{what} + {args.bootstrap} resamples + rows)", times,
                   {"models": board["n_models"], "battles": board["n_battles"]})
    else:
        print(f"{args.data} absent: the real-data figures are skipped")
    if args.control != "none":
        # every battle is its own design row under control, and the bootstrap holds a (resamples x rows) matrix of
        # weights and one of credits: 1000 x 480k battles of the synthetic sets would take 7.7 GB
        print("synthetic sets skipped under --control (the bootstrap's weight matrices grow with resamples x battles)")
        print(f"load average at end: {os.getloadavg()}")
        return
    for name, extra in (("star", 0), ("mixed", 2)):
        arrays = synthetic(200, 805, extra)
        times, info = [], {}
        for _ in range(args.repeat):
            t, info = time_maths(*arrays, args.bootstrap, args.control)
            times.append(t)
        report(f"synthetic {name} (200 models, 805 items, {args.bootstrap} resamples{ctl})", times, info)
    print(f"load average at end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
