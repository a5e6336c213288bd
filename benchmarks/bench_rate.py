"""Benchmark of ``judgecal rate`` against a bare client loop.

A stub OpenAI-compatible server (tests/stub_openai.py, its own process) answers every call
after a fixed latency (default 50 ms). We time:

1. bare: N calls at concurrency C with ``openai.AsyncOpenAI`` + ``DefaultAioHttpClient`` through
   the SDK's generic ``post("/chat/completions", cast_to=object)`` (the client and call judgecal
   uses), an ``asyncio.Semaphore`` and nothing else; once per round also through the typed
   ``chat.completions.create``, for reference;
2. rate: ``judgecal.views.rate.run_rate`` on N real responses (AlpacaEval outputs from
   ../shared/data) end to end: work rows, claims, prompt rendering, calls, parsing, batched
   database writes; on SQLite and (when reachable) on PostgreSQL.

and print ratings/s and rate/bare. The load of a shared machine drifts by tens of per cent
within a minute, so the runs are interleaved in ``--rounds`` rounds (bare, rate on each
database in alternating order, bare again) and each rate run is divided by the mean of its
round's two bare runs; the median over rounds is the figure to quote. The 1-minute load
average before and after is printed.

    .venv/bin/python benchmarks/bench_rate.py [--n 2000] [--concurrency 64] [--latency 0.05] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
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


async def bare_loop(url: str, messages: list[list[dict]], concurrency: int, mode: str = "post") -> float:
    """Seconds for the calls through ``openai.AsyncOpenAI`` + aiohttp at ``concurrency``:
    ``mode="post"`` the SDK's generic ``post(..., cast_to=object)`` that judgecal's client uses,
    ``"create"`` the typed ``chat.completions.create``."""
    import openai

    client = openai.AsyncOpenAI(base_url=url, api_key="EMPTY", max_retries=0, http_client=openai.DefaultAioHttpClient())
    sem = asyncio.Semaphore(concurrency)

    async def one(msgs):
        async with sem:
            if mode == "create":
                r = await client.chat.completions.create(model="stub", messages=msgs, temperature=0.0, max_tokens=512)
                return r.choices[0].message.content
            r = await client.post("/chat/completions", cast_to=object,
                                  body={"model": "stub", "messages": msgs, "temperature": 0.0, "max_tokens": 512})
            return r["choices"][0]["message"]["content"]

    t0 = time.perf_counter()
    await asyncio.gather(*(one(m) for m in messages))
    elapsed = time.perf_counter() - t0
    await client.close()
    return elapsed


def prepare_db(url: str) -> None:
    from judgecal.views import importing

    files = [DATA / f"gpt4_1106_preview{s}.json" for s in ("", "_verbose", "_concise")]
    importing.import_alpaca_eval(files, [], "bench/alpaca_eval", url)


def bench_rate(url: str, base_url: str, n: int, concurrency: int, judge: str) -> dict:
    from judgecal.views.rate import run_rate

    t0 = time.perf_counter()
    out = run_rate(judge=judge, base_url=base_url, database_url=url, task_families=["bench/alpaca_eval"], limit=n,
                   concurrency=concurrency, progress=False)
    out["wall_s"] = time.perf_counter() - t0
    return out


def _median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--latency", type=float, default=0.05)
    ap.add_argument("--rounds", type=int, default=3,
                    help="interleaved rounds (bare, rate on each database, bare again); ratios are per round")
    ap.add_argument("--pg", default="postgresql+psycopg://postgres@127.0.0.1:5432/postgres")
    args = ap.parse_args()
    ideal = args.concurrency / args.latency
    load_before = os.getloadavg()
    stub, url = start_stub(args.latency)
    rows: list[dict] = []  # one per round: ratings/s of each run
    dbs: dict[str, str] = {}
    pg_db = None
    try:
        with tempfile.TemporaryDirectory() as tmp:
            msgs = messages_for(args.n)
            asyncio.run(bare_loop(url, msgs[:200], args.concurrency))  # warm-up
            dbs["sqlite"] = f"sqlite:///{tmp}/bench.db"
            prepare_db(dbs["sqlite"])
            try:
                from rate_helpers import PgDatabase, pg_available

                if pg_available():
                    pg_db = PgDatabase()
                    prepare_db(pg_db.url)
                    dbs["postgres"] = pg_db.url
            except ImportError:
                pass
            for k in range(args.rounds):
                # the load of a shared machine drifts: each rate run is compared with the bare
                # runs just before and after it, and the database order alternates by round
                order = list(dbs) if k % 2 == 0 else list(reversed(dbs))
                got = {"bare": args.n / asyncio.run(bare_loop(url, msgs, args.concurrency))}
                for name in order:
                    r = bench_rate(dbs[name], url, args.n, args.concurrency, f"bench-{name}-{k}")
                    assert r["this_run"]["ok"] == args.n, r
                    got[f"rate_{name}"] = r["ratings_per_s"]
                    got[f"rate_{name}_wall"] = args.n / r["wall_s"]
                got["bare_after"] = args.n / asyncio.run(bare_loop(url, msgs, args.concurrency))
                got["bare_create"] = args.n / asyncio.run(bare_loop(url, msgs, args.concurrency, "create"))
                got["bare_mean"] = (got["bare"] + got["bare_after"]) / 2
                rows.append(got)
    finally:
        stub.terminate()
        stub.wait(10)
        if pg_db is not None:
            pg_db.drop()
    load_after = os.getloadavg()
    print(f"{args.n} calls, concurrency {args.concurrency}, stub latency {args.latency * 1000:.0f} ms, "
          f"ideal {ideal:.0f}/s, {args.rounds} rounds; load average before {load_before[0]:.2f}, "
          f"after {load_after[0]:.2f} (1 min)")
    labels = [("bare_mean", "bare loop, post (judgecal's path)"), ("bare_create", "bare loop, chat.completions.create"), ("rate_sqlite", "judgecal rate, SQLite (calls)"),
              ("rate_sqlite_wall", "judgecal rate, SQLite (wall)"), ("rate_postgres", "judgecal rate, PostgreSQL (calls)"),
              ("rate_postgres_wall", "judgecal rate, PostgreSQL (wall)")]
    print(f"{'what':<36}" + "".join(f"{'round ' + str(k + 1):>16}" for k in range(len(rows))) + f"{'median':>16}")
    summary: dict[str, float] = {}
    for key, label in labels:
        if not rows or key not in rows[0]:
            continue
        ratios = [g[key] / g["bare_mean"] for g in rows]
        cells = "".join(f"{g[key]:>7.0f}/s {g[key] / g['bare_mean']:>6.0%}" for g in rows)
        med_v = _median([g[key] for g in rows])
        print(f"{label:<36}{cells}{med_v:>7.0f}/s {_median(ratios):>6.0%}   {med_v / ideal:.0%} of ideal")
        summary[key] = round(med_v, 1)
        summary[f"{key}_vs_bare"] = round(_median(ratios), 3)
        summary[f"{key}_of_ideal"] = round(med_v / ideal, 3)
    print(f"(each cell: ratings/s and the ratio to the mean of that round's bare runs, before and after; "
          f"ideal = concurrency / latency = {ideal:.0f}/s)")
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
