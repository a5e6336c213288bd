"""`judgecal serve` cold: the first request of every page and JSON form of the team's database
(issue 32, item 5), with no page computed ahead (no warmer) and no page cache, against the 300 ms
goal.

The database is the team fixture of the tests (tests/serve_data.py ``build_team``: everything
`make demo` imports, LLMBar's repository layout with ~65 judges, a second judge named GPT-4, long
and bidi model names), built into a temporary SQLite file (about 20 s), or the one --url names.
Each page is requested --repeat times through Starlette's TestClient, each time in a fresh app
(``create_app(url, cache_mb=0)``: nothing kept between requests; the modules are imported once,
before the clock, as a running server has them): the time of ``client.get`` is the server's
(routing, queries, maths, rendering), no network.

    .venv/bin/python benchmarks/bench_serve_cold.py                 # build, measure, print
    .venv/bin/python benchmarks/bench_serve_cold.py --url sqlite:////tmp/team/judgecal.db --repeat 3
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PAGES = [
    "/", "/leaderboard", "/leaderboard?judge=GPT-4", "/leaderboard?judge=GPT-4&family=llmbar/Natural",
    "/leaderboard?judge=GPT-4&family=llmbar/Natural&format=json",
    "/winrates", "/winrates?baseline=gpt4_1106_preview", "/winrates?baseline=gpt4_1106_preview&format=json",
    "/winrates?baseline=gpt4_1106_preview&joint=1",
    "/publish?family=llmbar/Natural&judge=GPT-4", "/publish?baseline=gpt4_1106_preview",
    "/judge", "/judge?judge=GPT-4/Vanilla", "/calibration", "/calibration?family=llmbar/Natural&judge=GPT-4",
    "/audit", "/audit?family=llmbar/Natural&judge=GPT-4",
    "/audit?family=alpaca_eval&judge=weighted_alpaca_eval_gpt4_turbo",
    "/audit?family=alpaca_eval&judge=weighted_alpaca_eval_gpt4_turbo&model=claude-2&filter=won_longer",
    "/ratings", "/ratings?judge=id:2&status=ok", "/mc",
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", default=None, help="an existing team database (default: build one)")
    ap.add_argument("--data", default=str(REPO.parent / "shared" / "data"))
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    sys.path.insert(0, str(REPO / "tests"))
    url = args.url
    if url is None:
        import serve_data

        tmp = Path(tempfile.mkdtemp(prefix="bench_cold_"))
        url = f"sqlite:///{tmp / 'team.db'}"
        t = time.perf_counter()
        serve_data.build_team(url, Path(args.data), tmp / "out")
        print(f"built the team database in {time.perf_counter() - t:.1f} s: {url}")
    from starlette.testclient import TestClient

    from judgecal.web.app import create_app

    TestClient(create_app(url, cache_mb=0)).get("/mc")  # imports, as a running server has them
    rows = []
    for path in PAGES:
        times, status = [], None
        for _ in range(args.repeat):
            client = TestClient(create_app(url, cache_mb=0))
            t = time.perf_counter()
            r = client.get(path)
            times.append(1000 * (time.perf_counter() - t))
            status = r.status_code
        rows.append((path, status, min(times), max(times)))
    print(f"{'page':<85} {'status':>6} {'best ms':>9} {'worst ms':>9}  (goal: 300 ms)")
    for path, status, lo, hi in rows:
        print(f"{path:<85} {status:>6} {lo:>9.0f} {hi:>9.0f}  {'ok' if hi <= 300 else 'OVER'}")
    over = sum(1 for r in rows if r[3] > 300)
    print(f"{len(rows) - over} of {len(rows)} pages within 300 ms cold")


if __name__ == "__main__":
    main()
