"""`judgecal serve` cold: the first request of every page and JSON form of the team's database
(issue 32, item 5), with no page computed ahead (no warmer) and no page cache, against the 300 ms
goal (p95 over the pages).

The database is the team fixture of the tests (tests/serve_data.py ``build_team``: everything
`make demo` imports, LLMBar's repository layout with ~65 judges, a second judge named GPT-4, long
and bidi model names), built into a temporary SQLite file (about 20 s), or the one --url names.
After the build (or with --refresh on a given database) ``judgecal db refresh`` stores what the
pages cannot compute quickly (judgecal.db.derived); --no-refresh measures without it (every
figure computed at request time, as a database written by an older judgecal, or written since
its last refresh, is served). Each page is requested --repeat times through Starlette's
TestClient, each time in a fresh app (``create_app(url, cache_mb=0)``: nothing kept between
requests; the modules are imported once, before the clock, as a running server has them): the
time of ``client.get`` is the server's (routing, queries, maths, rendering), no network. --crawl
adds every link of the overview (every judge's page, every audit, every ratings filter...).

    .venv/bin/python benchmarks/bench_serve_cold.py                 # build, refresh, measure, print
    .venv/bin/python benchmarks/bench_serve_cold.py --url sqlite:////tmp/team/judgecal.db --repeat 3 --crawl
"""

from __future__ import annotations

import argparse
import html
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BASE = "gpt4_1106_preview"
AE = "family=alpaca_eval&judge=weighted_alpaca_eval_gpt4_turbo"
#: every page and its JSON form (and the publish downloads); the choice pages too
PAGES = [
    "/", "/leaderboard", "/leaderboard?format=json", "/leaderboard?judge=GPT-4", "/leaderboard?judge=GPT-4&format=json",
    "/leaderboard?judge=id:2", "/leaderboard?judge=id:2&format=json",
    "/leaderboard?judge=GPT-4&family=llmbar/Natural", "/leaderboard?judge=GPT-4&family=llmbar/Natural&format=json",
    "/winrates", "/winrates?format=json", f"/winrates?baseline={BASE}", f"/winrates?baseline={BASE}&format=json",
    f"/winrates?baseline={BASE}&joint=1", f"/winrates?baseline={BASE}&joint=1&format=json",
    "/publish", "/publish?format=json", "/publish?family=llmbar/Natural&judge=GPT-4",
    "/publish?family=llmbar/Natural&judge=GPT-4&format=json", "/publish?family=llmbar/Natural&judge=GPT-4&format=csv",
    f"/publish?baseline={BASE}", f"/publish?baseline={BASE}&format=json", f"/publish?baseline={BASE}&format=alpaca-eval",
    "/judge", "/judge?format=json", "/judge?judge=GPT-4/Vanilla", "/judge?judge=GPT-4/Vanilla&format=json",
    "/judge?judge=id:2", "/judge?judge=id:2&format=json",
    "/calibration", "/calibration?format=json",
    "/calibration?calibration=3", "/calibration?calibration=3&format=json",  # the report, with the pairwise summary
    "/calibration?calibration=2", "/calibration?family=llmbar/Natural&judge=GPT-4",
    "/calibration?family=llmbar/Natural&judge=GPT-4&format=json",
    "/audit", "/audit?format=json", "/audit?family=llmbar/Natural&judge=GPT-4",
    "/audit?family=llmbar/Natural&judge=GPT-4&format=json", f"/audit?{AE}", f"/audit?{AE}&format=json",
    f"/audit?{AE}&model=claude-2&filter=won_longer", f"/audit?{AE}&q=python&page=2",
    "/ratings", "/ratings?judge=id:2&status=ok", "/mc", "/mc?format=json",
]


def overview_links(url: str) -> list[str]:
    """Every link of the overview page (what a reader reaches in one click from /)."""
    from starlette.testclient import TestClient

    from judgecal.web.app import create_app

    text = TestClient(create_app(url, cache_mb=0)).get("/").text
    return sorted({html.unescape(h) for h in re.findall(r'href="(/[^"]*)"', text) if not h.startswith("/static")})


def refresh(url: str) -> None:
    from judgecal.web.precompute import refresh as run

    t = time.perf_counter()
    out = run(url)
    print(f"judgecal db refresh: {out['stored']} results of {out['pages']} pages in {time.perf_counter() - t:.1f} s "
          f"(load average {os.getloadavg()[0]:.1f})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", default=None, help="an existing team database (default: build one)")
    ap.add_argument("--data", default=str(REPO.parent / "shared" / "data"))
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--refresh", action="store_true", help="run `judgecal db refresh` on --url first")
    ap.add_argument("--no-refresh", action="store_true", help="measure without stored results (not even after a build)")
    ap.add_argument("--crawl", action="store_true", help="also every link of the overview")
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
        args.refresh = not args.no_refresh
    if args.refresh and not args.no_refresh:
        refresh(url)
    from starlette.testclient import TestClient

    from judgecal.web.app import create_app

    TestClient(create_app(url, cache_mb=0)).get("/mc")  # imports, as a running server has them
    pages = list(PAGES)
    if args.crawl:
        pages += [p for p in overview_links(url) if p not in pages]
    load0 = os.getloadavg()
    rows = []
    for path in pages:
        times, status = [], None
        for _ in range(args.repeat):
            client = TestClient(create_app(url, cache_mb=0))
            t = time.perf_counter()
            r = client.get(path)
            times.append(1000 * (time.perf_counter() - t))
            status = r.status_code
        rows.append((path, status, min(times), max(times)))
    load1 = os.getloadavg()
    print(f"{'page':<90} {'status':>6} {'best ms':>8} {'worst ms':>9}  (goal: 300 ms)")
    for path, status, lo, hi in rows:
        shown = path if len(path) <= 90 else path[:87] + "..."
        print(f"{shown:<90} {status:>6} {lo:>8.0f} {hi:>9.0f}  {'ok' if hi <= 300 else 'OVER'}")
    worst = sorted(r[3] for r in rows)
    p95 = worst[min(len(worst) - 1, int(round(0.95 * (len(worst) - 1))))]
    over = sum(1 for r in rows if r[3] > 300)
    print(f"{len(rows) - over} of {len(rows)} pages within 300 ms cold (each page's worst of {args.repeat}); "
          f"over the pages: p50 {statistics.median(worst):.0f} ms, p95 {p95:.0f} ms, max {worst[-1]:.0f} ms; "
          f"load average {load0[0]:.1f} before, {load1[0]:.1f} after")


if __name__ == "__main__":
    main()
