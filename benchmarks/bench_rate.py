"""Benchmark of ``judgecal rate`` against a bare client loop.

A stub OpenAI-compatible server (tests/stub_openai.py, its own process) answers every call
after a fixed latency (default 50 ms). We time:

1. bare: N calls at concurrency C with ``openai.AsyncOpenAI`` + ``DefaultAioHttpClient`` (the
   client judgecal uses), an ``asyncio.Semaphore`` and nothing else;
2. rate: ``judgecal.rate.run_rate`` on N real responses (AlpacaEval outputs from
   ../shared/data) end to end: work rows, claims, prompt rendering, calls, parsing, batched
   database writes; on SQLite and (when reachable) on PostgreSQL.

and print ratings/s, rate/bare and the share of the ideal C / latency.

    .venv/bin/python benchmarks/bench_rate.py [--n 2000] [--concurrency 64] [--latency 0.05]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
from judgecal.config import shared_data_dir  # noqa: E402
DATA = shared_data_dir() / "alpaca_eval"
sys.path.insert(0, str(REPO / "tests"))


def start_stub(latency: float) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, str(REPO / "tests" / "stub_openai.py"), "--latency", str(latency)],
                            stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()  # type: ignore[union-attr]
    port = int(line.split()[1])
    return proc, f"http://127.0.0.1:{port}/v1"


def messages_for(n: int) -> list[list[dict]]:
    from judgecal.judge.prompts import load_prompt

    prompt = load_prompt("pointwise_v1")
    rows = json.loads((DATA / "gpt4_1106_preview.json").read_text())
    rows += json.loads((DATA / "gpt4_1106_preview_verbose.json").read_text())
    rows += json.loads((DATA / "gpt4_1106_preview_concise.json").read_text())
    return [prompt.render(question=r["instruction"], response=r["output"]) for r in rows[:n]]


async def bare_loop(url: str, messages: list[list[dict]], concurrency: int) -> float:
    import openai

    client = openai.AsyncOpenAI(base_url=url, api_key="EMPTY", max_retries=0, http_client=openai.DefaultAioHttpClient())
    sem = asyncio.Semaphore(concurrency)

    async def one(msgs):
        async with sem:
            r = await client.chat.completions.create(model="stub", messages=msgs, temperature=0.0, max_tokens=512)
            return r.choices[0].message.content

    t0 = time.perf_counter()
    await asyncio.gather(*(one(m) for m in messages))
    elapsed = time.perf_counter() - t0
    await client.close()
    return elapsed


def prepare_db(url: str) -> None:
    from judgecal import importing

    files = [DATA / f"gpt4_1106_preview{s}.json" for s in ("", "_verbose", "_concise")]
    importing.import_alpaca_eval(files, [], "bench/alpaca_eval", url)


def bench_rate(url: str, base_url: str, n: int, concurrency: int, judge: str) -> dict:
    from judgecal.rate import run_rate

    t0 = time.perf_counter()
    out = run_rate(judge=judge, base_url=base_url, database_url=url, task_families=["bench/alpaca_eval"], limit=n,
                   concurrency=concurrency, progress=False)
    out["wall_s"] = time.perf_counter() - t0
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--latency", type=float, default=0.05)
    ap.add_argument("--pg", default="postgresql+psycopg://postgres@127.0.0.1:5432/postgres")
    args = ap.parse_args()
    ideal = args.concurrency / args.latency
    stub, url = start_stub(args.latency)
    results = {}
    try:
        msgs = messages_for(args.n)
        asyncio.run(bare_loop(url, msgs[:200], args.concurrency))  # warm-up
        bare_s = asyncio.run(bare_loop(url, msgs, args.concurrency))
        results["bare"] = args.n / bare_s
        with tempfile.TemporaryDirectory() as tmp:
            sqlite_url = f"sqlite:///{tmp}/bench.db"
            prepare_db(sqlite_url)
            r = bench_rate(sqlite_url, url, args.n, args.concurrency, "bench-sqlite")
            assert r["this_run"]["ok"] == args.n, r
            results["rate_sqlite"] = r["ratings_per_s"]
            results["rate_sqlite_wall"] = args.n / r["wall_s"]
        try:
            from rate_helpers import PgDatabase, pg_available

            if pg_available():
                db = PgDatabase()
                try:
                    prepare_db(db.url)
                    r = bench_rate(db.url, url, args.n, args.concurrency, "bench-pg")
                    assert r["this_run"]["ok"] == args.n, r
                    results["rate_postgres"] = r["ratings_per_s"]
                    results["rate_postgres_wall"] = args.n / r["wall_s"]
                finally:
                    db.drop()
        except ImportError:
            pass
    finally:
        stub.terminate()
        stub.wait(10)
    print(f"{args.n} calls, concurrency {args.concurrency}, stub latency {args.latency * 1000:.0f} ms, "
          f"ideal {ideal:.0f}/s")
    print(f"{'what':<34}{'ratings/s':>10}{'vs bare':>9}{'vs ideal':>10}")
    for key, label in [("bare", "bare AsyncOpenAI+aiohttp loop"), ("rate_sqlite", "judgecal rate, SQLite (calls)"),
                       ("rate_sqlite_wall", "judgecal rate, SQLite (wall)"), ("rate_postgres", "judgecal rate, PostgreSQL (calls)"),
                       ("rate_postgres_wall", "judgecal rate, PostgreSQL (wall)")]:
        if key in results:
            v = results[key]
            print(f"{label:<34}{v:>10.0f}{v / results['bare']:>9.0%}{v / ideal:>10.0%}")
    print(json.dumps({k: round(v, 1) for k, v in results.items()}))


if __name__ == "__main__":
    main()
