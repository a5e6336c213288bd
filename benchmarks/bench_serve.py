"""`judgecal serve` on a big shared PostgreSQL database (issue 21, item 4): each page's server
time (p50/p95 of N requests after one warm-up) and the serving process's peak RSS, against the
300 ms p95 goal.

The database (PostgreSQL at 127.0.0.1:5432, user postgres, trust auth; a fresh database
``judgecal_bench_serve`` made with createdb and migrated with ``judgecal db upgrade``) holds, at
the default size:

- 3 task families: ``bench/chat`` (60% of --items) and ``bench/code`` (40%), each item answered
  by every one of --models producing models (``model-000`` is the baseline); and a small
  labelled family ``bench/labelled`` (--labelled-items items, two answers each, a pairwise
  expert label per item and a concise/verbose pair), on which one calibration is stored with
  ``judgecal fit`` so that the calibration and audit pages have content; 40 more expert labels
  on ``bench/chat`` (so its audit has expert pairs);
- --ratings pointwise ratings (default 1,000,000) by two pointwise judges (``judge-A`` rates
  every answer, ``judge-B`` the rest of the count), 1-10, about 1% unparsed and 0.3% failed,
  created over October-November 2026, the score depending on the model and the answer length;
- --verdicts pairwise verdicts (default 1,000,000): ``pairjudge-X`` on every (item, model vs
  the baseline) pair in both orders shown ('ab', 'ba'; ``baseline_side`` 'b'), ``pairjudge-Y``
  the rest of the count; soft preference, about 1% unparsed;
- answers are short synthetic texts (word counts lognormal per model, 5-400 words) with their
  byte, character and word lengths; two stored multiple-choice runs.

Everything big is written with PostgreSQL COPY through psycopg (``cursor.copy``), then VACUUM
ANALYZE. The pages are then measured in a fresh subprocess (so its peak RSS is the serving
process's, not the builder's) through ``judgecal.web.app.create_app(url)`` and Starlette's
TestClient, in-process: the time of each ``client.get`` is the server's time (routing, the
views' queries and maths, rendering) with no network.

    .venv/bin/python benchmarks/bench_serve.py                 # build (1M + 1M), measure, drop
    .venv/bin/python benchmarks/bench_serve.py --keep          # keep the database (reused next time)
    .venv/bin/python benchmarks/bench_serve.py --ratings 20000 --verdicts 20000 --items 200 --models 20  # smoke
    .venv/bin/python benchmarks/bench_serve.py --keep --profile '/audit?family=bench/chat&judge=pairjudge-X'
    .venv/bin/python benchmarks/bench_serve.py --keep --warm   # with the warmer: first cycle, then one write

--keep: a database of that name that already holds the benchmark's data (same sizes, recorded
in a marker table of the benchmark's own, ``bench_serve_meta``) is reused instead of rebuilt; it
is left in place at the end. Without --keep the database is dropped at the end.
--profile PATH: instead of measuring, profile one request of PATH (after a warm-up) with
pyinstrument (cProfile when pyinstrument is missing) and print the hot spots.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
GOAL_MS = 300.0
HOST, PORT, USER = "127.0.0.1", "5432", "postgres"
BASELINE = "model-000"
FAMILIES = ("bench/chat", "bench/code")
LABELLED = "bench/labelled"
POINT_JUDGES = ("judge-A", "judge-B")
PAIR_JUDGES = ("pairjudge-X", "pairjudge-Y")
VOCAB = ("the of and to in a is that for it as with was on be by this are or an function value return list "
         "data model answer question first second result example because however therefore which when where "
         "code string number table error test case user input output step method class loop index key sort "
         "merge file read write open close print call time memory space fast slow small large simple clear").split()
T0 = dt.datetime(2026, 10, 1, tzinfo=dt.timezone.utc)


def db_url(name: str) -> str:
    return f"postgresql+psycopg://{USER}@{HOST}:{PORT}/{name}"


def psql(sql: str, db: str = "postgres") -> str:
    out = subprocess.run(["psql", "-h", HOST, "-p", PORT, "-U", USER, "-d", db, "-XAtqc", sql],
                         check=True, capture_output=True, text=True)
    return out.stdout.strip()


def pg_connect(name: str):
    import psycopg

    return psycopg.connect(host=HOST, port=PORT, user=USER, dbname=name)


# ---------------------------------------------------------------- building
def esc(s: str | None) -> str:
    """A value in COPY's text format (None: NULL)."""
    if s is None:
        return r"\N"
    return s.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")


class Copier:
    """Rows of one table, written through COPY ... FROM STDIN in text format, in chunks."""

    def __init__(self, cur, table: str, columns: tuple[str, ...], chunk: int = 20000):
        self.cm = cur.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN")
        self.copy = self.cm.__enter__()
        self.buf: list[str] = []
        self.chunk, self.n = chunk, 0

    def row(self, *values) -> None:
        self.buf.append("\t".join(r"\N" if v is None else (v if isinstance(v, str) else str(v)) for v in values))
        self.n += 1
        if len(self.buf) >= self.chunk:
            self.flush()

    def flush(self) -> None:
        if self.buf:
            self.copy.write(("\n".join(self.buf) + "\n").encode("utf-8"))
            self.buf = []

    def close(self) -> int:
        self.flush()
        self.cm.__exit__(None, None, None)
        return self.n


def ts(seconds: float) -> str:
    return (T0 + dt.timedelta(seconds=float(seconds))).isoformat()


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def lengths(text: str) -> tuple[int, int, int]:
    return len(text.encode("utf-8")), len(text), len(text.split())


def build(name: str, args) -> dict:
    """Create, migrate and fill database ``name``; returns the sizes written."""
    from sqlalchemy.orm import Session

    from judgecal.db import models as m
    from judgecal.db import queries as q
    from judgecal.db.engine import create

    t_start = time.perf_counter()
    subprocess.run(["createdb", "-h", HOST, "-p", PORT, "-U", USER, name], check=True)
    url = db_url(name)
    subprocess.run([str(ROOT / ".venv/bin/judgecal"), "--database-url", url, "db", "upgrade"], check=True,
                   capture_output=True)
    rng = np.random.default_rng(args.seed)
    now = T0.isoformat()

    # small tables through the ORM: families, judges
    engine = create(url)
    with Session(engine) as s:
        fam_ids = {}
        for fam in (*FAMILIES, LABELLED):
            row = m.TaskFamily(name=fam, description=f"benchmark family {fam}")
            s.add(row)
            s.flush()
            fam_ids[fam] = row.id
        judge_ids = {}
        for jname, mode in ((POINT_JUDGES[0], "pointwise"), (POINT_JUDGES[1], "pointwise"),
                            (PAIR_JUDGES[0], "pairwise"), (PAIR_JUDGES[1], "pairwise")):
            j = q.get_or_create_judge(s, name=jname, model=f"{jname}-model", endpoint="http://127.0.0.1:8000/v1",
                                      prompt_name=f"{mode}-prompt", prompt_sha256=sha(f"{mode} prompt of {jname}"),
                                      mode=mode, params={"temperature": 0.0}, scale_min=1.0, scale_max=10.0)
            judge_ids[jname] = j.id
        s.commit()
    engine.dispose()

    n_items, n_models = args.items, args.models
    models = [f"model-{k:03d}" for k in range(n_models)]
    skill = rng.normal(0, 1, n_models)
    skill[0] = 0.0
    verbosity = rng.lognormal(np.log(30), 0.5, n_models)
    conn = pg_connect(name)
    conn.autocommit = False
    cur = conn.cursor()
    item_fam = []  # family of each big item, by item index
    n_chat = int(round(0.6 * n_items))
    # ---- items
    cp = Copier(cur, "item", ("id", "task_family_id", "external_id", "prompt", "prompt_sha256", "reference", "source",
                              "created_at"))
    for i in range(n_items):
        fam = FAMILIES[0] if i < n_chat else FAMILIES[1]
        item_fam.append(fam)
        words = " ".join(rng.choice(VOCAB, int(rng.integers(8, 40))))
        prompt = f"Instruction {i}: {words}?"
        cp.row(i + 1, fam_ids[fam], f"{fam.split('/')[1]}-{i:05d}", esc(prompt), sha(prompt), None, "bench_serve", now)
    lab0 = n_items + 1
    for k in range(args.labelled_items):
        prompt = f"Labelled instruction {k}: " + " ".join(rng.choice(VOCAB, 15))
        cp.row(lab0 + k, fam_ids[LABELLED], f"labelled-{k:04d}", esc(prompt), sha(prompt), None, "bench_serve", now)
    cp.close()
    print(f"  items: {n_items + args.labelled_items} ({time.perf_counter() - t_start:.0f} s)", flush=True)

    # ---- responses: big items x models, response id = 1 + item * n_models + model
    cp = Copier(cur, "response", ("id", "item_id", "model", "text", "text_sha256", "n_bytes", "n_chars", "n_words",
                                  "created_at"))
    vocab = np.array(VOCAB)
    n_words = np.clip(rng.lognormal(np.log(np.tile(verbosity, n_items)), 0.45), 5, 400).astype(int)
    resp_words = n_words  # by response index
    pos = 0
    for i in range(n_items):
        idx = rng.integers(0, len(vocab), int(n_words[pos:pos + n_models].sum()))
        off = 0
        for k in range(n_models):
            w = int(n_words[pos])
            text = f"Answer of {models[k]} to item {i}. " + " ".join(vocab[idx[off:off + w]])
            off += w
            nb, nc, nw = lengths(text)
            cp.row(pos + 1, i + 1, models[k], esc(text), sha(text), nb, nc, nw, now)
            pos += 1
    n_big = pos
    # labelled family: two answers per item, a concise (model-001) and a verbose one (model-002)
    lab_resp = []  # (concise id, verbose id, concise words, verbose words)
    rid = n_big
    for k in range(args.labelled_items):
        wc, wv = int(rng.integers(10, 40)), int(rng.integers(60, 250))
        ids = []
        for model, w in (("model-001", wc), ("model-002", wv)):
            text = f"Labelled answer of {model} to item {k}. " + " ".join(rng.choice(vocab, w))
            rid += 1
            nb, nc, nw = lengths(text)
            cp.row(rid, lab0 + k, model, esc(text), sha(text), nb, nc, nw, now)
            ids.append((rid, nw))
        lab_resp.append((ids[0][0], ids[1][0], ids[0][1], ids[1][1]))
    n_resp = cp.close()
    print(f"  responses: {n_resp} ({time.perf_counter() - t_start:.0f} s)", flush=True)

    # ---- ratings: the labelled family by judge-A first, then judge-A on every big answer, then judge-B
    cp = Copier(cur, "rating", ("id", "response_id", "judge_id", "sample_index", "status", "raw_output", "score",
                                "error", "attempts", "latency_s", "prompt_tokens", "completion_tokens", "created_at",
                                "updated_at"))
    span = 61 * 86400.0
    rat_id = 0
    quality = {}  # labelled: the expert's view of each answer

    def rating(resp_id: int, judge: str, mean: float) -> None:
        nonlocal rat_id
        rat_id += 1
        u = rng.random()
        at = ts(rng.random() * span)
        lat = f"{rng.gamma(2.0, 0.6):.3f}"
        if u < 0.010:
            cp.row(rat_id, resp_id, judge_ids[judge], 0, "unparsed", "I would rate this answer highly.", None,
                   "no [[rating]] in the output", 1, lat, 400, 12, at, at)
        elif u < 0.013:
            cp.row(rat_id, resp_id, judge_ids[judge], 0, "failed", None, None, "HTTP 500 after 3 attempts", 3, lat,
                   None, None, at, at)
        else:
            score = int(min(10, max(1, round(mean + rng.normal(0, 1.2)))))
            cp.row(rat_id, resp_id, judge_ids[judge], 0, "ok", f"The answer is clear. Rating: [[{score}]]", float(score),
                   None, 1, lat, 400, 14, at, at)

    for c, v, wc, wv in lab_resp:
        qc, qv = rng.normal(0, 1), rng.normal(0, 1)
        quality[c], quality[v] = qc, qv
        for r, qual, w in ((c, qc, wc), (v, qv, wv)):
            if rat_id < args.ratings:
                rating(r, POINT_JUDGES[0], 5.5 + 1.2 * qual + 1.0 * math.log(w / 60))
    logw = np.log(resp_words / 30.0)
    for judge, bias in ((POINT_JUDGES[0], 0.9), (POINT_JUDGES[1], 0.4)):
        mean = 5.5 + np.tile(skill, n_items) + bias * logw
        for r in range(n_big):
            if rat_id >= args.ratings:
                break
            rating(r + 1, judge, float(mean[r]))
    n_rat = cp.close()
    print(f"  ratings: {n_rat} ({time.perf_counter() - t_start:.0f} s)", flush=True)

    # ---- pairwise verdicts: model answer (a) vs the baseline's (b), both orders, X then Y
    cp = Copier(cur, "pairwise_judgment", ("id", "response_a_id", "response_b_id", "judge_id", "sample_index",
                                           "position", "status", "raw_output", "verdict", "preference",
                                           "baseline_side", "source", "error", "attempts", "latency_s",
                                           "prompt_tokens", "completion_tokens", "created_at", "updated_at"))
    ver_id = 0
    done = False
    for judge, bias in ((PAIR_JUDGES[0], 0.6), (PAIR_JUDGES[1], 0.3)):
        jid = judge_ids[judge]
        for i in range(n_items):
            base = i * n_models
            for k in range(1, n_models):
                a, b = base + k, base
                z = skill[k] + bias * (logw[a] - logw[b]) + rng.normal(0, 1)
                for position in ("ab", "ba"):
                    if ver_id >= args.verdicts:
                        done = True
                        break
                    ver_id += 1
                    at = ts(rng.random() * span)
                    if rng.random() < 0.01:
                        cp.row(ver_id, a + 1, b + 1, jid, 0, position, "unparsed", "Both are fine.", None, None, "b",
                               None, "no (a) or (b) in the output", 1, "1.100", 600, 8, at, at)
                        continue
                    p = 1.0 / (1.0 + math.exp(-(z + rng.normal(0, 0.3) + (0.2 if position == "ab" else -0.2))))
                    verdict = "a" if p > 0.55 else "b" if p < 0.45 else "tie"
                    shown = verdict if position == "ab" or verdict == "tie" else {"a": "b", "b": "a"}[verdict]
                    cp.row(ver_id, a + 1, b + 1, jid, 0, position, "ok", f"Output ({shown})", verdict, f"{p:.6f}", "b",
                           None, None, 1, "1.100", 600, 8, at, at)
                if done:
                    break
            if done:
                break
        if done:
            break
    n_ver = cp.close()
    print(f"  verdicts: {n_ver} ({time.perf_counter() - t_start:.0f} s)", flush=True)

    # ---- expert labels and verbosity pairs
    cp = Copier(cur, "expert_label", ("id", "label_key", "kind", "response_a_id", "response_b_id", "preference",
                                      "annotator", "source", "created_at"))
    lid = 0
    for c, v, _, _ in lab_resp:
        lid += 1
        pref = "a" if quality[c] > quality[v] else "b"
        cp.row(lid, sha(f"pairwise {c} {v} expert bench"), "pairwise", c, v, pref, "expert", "bench_serve", now)
    for i in range(min(40, n_chat)):  # a few expert labels on the chat family: model-001 vs the baseline
        lid += 1
        a, b = i * n_models + 2, i * n_models + 1
        cp.row(lid, sha(f"pairwise {a} {b} expert bench"), "pairwise", a, b, "ab"[i % 2], "expert", "bench_serve", now)
    n_lab = cp.close()
    cp = Copier(cur, "verbosity_pair", ("id", "item_id", "concise_response_id", "verbose_response_id", "source",
                                        "created_at"))
    for k, (c, v, _, _) in enumerate(lab_resp):
        cp.row(k + 1, lab0 + k, c, v, "bench_serve", now)
    n_vp = cp.close()
    for table in ("item", "response", "rating", "pairwise_judgment", "expert_label", "verbosity_pair"):
        cur.execute(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), (SELECT max(id) FROM {table}))")
    cur.execute("CREATE TABLE bench_serve_meta (sizes text NOT NULL)")
    cur.execute("INSERT INTO bench_serve_meta VALUES (%s)", (sizes_key(args),))
    conn.commit()
    conn.autocommit = True
    t = time.perf_counter()
    cur.execute("VACUUM ANALYZE")
    conn.close()
    print(f"  vacuum analyze {time.perf_counter() - t:.0f} s", flush=True)

    # ---- two mc runs, as tests/serve_data.py stores them
    engine = create(url)
    with Session(engine) as s:
        for model, acc, norm in (("model-001", 0.55, 0.60), ("model-002", 0.60, 0.575)):
            s.add(m.McRun(model=model, task="copa", task_path="copa.jsonl", dataset_sha256="0" * 64, backend="hf",
                          n_items=40, settings={"prompt": "{query}", "null_context": "Answer:", "dtype": "float32"},
                          metrics={k: {"value": v, "stderr": 0.05, "n": 40}
                                   for k, v in (("acc", acc), ("acc_norm", norm), ("acc_bytes", norm))},
                          diagnostics={"headline": ["acc", "acc_norm"]}))
        s.commit()
    engine.dispose()

    # ---- one stored calibration of judge-A on the labelled family (the CLI's own fit)
    t = time.perf_counter()
    fit = subprocess.run([str(ROOT / ".venv/bin/judgecal"), "--database-url", url, "fit", "--task-family", LABELLED,
                          "--judge", POINT_JUDGES[0], "--length-unit", "words", "--bootstrap", "200", "--seed", "0",
                          "--format", "json"], capture_output=True, text=True)
    if fit.returncode != 0:
        raise SystemExit(f"judgecal fit failed: {fit.stderr.strip()[-2000:]}")
    print(f"  fit {time.perf_counter() - t:.0f} s", flush=True)
    size = psql(f"SELECT pg_size_pretty(pg_database_size('{name}'))")
    out = {"items": n_items + args.labelled_items, "responses": n_resp, "ratings": n_rat, "verdicts": n_ver,
           "expert_labels": n_lab, "verbosity_pairs": n_vp, "build_s": round(time.perf_counter() - t_start, 1),
           "size": size}
    return out


def sizes_key(args) -> str:
    return json.dumps({k: getattr(args, k) for k in ("ratings", "verdicts", "items", "models", "labelled_items",
                                                     "seed")}, sort_keys=True)


def existing(name: str, args) -> bool:
    if psql(f"SELECT 1 FROM pg_database WHERE datname = '{name}'") != "1":
        return False
    try:
        return psql("SELECT sizes FROM bench_serve_meta", name) == sizes_key(args)
    except subprocess.CalledProcessError:
        return False


def drop(name: str) -> None:
    subprocess.run(["dropdb", "-h", HOST, "-p", PORT, "-U", USER, "--if-exists", "--force", name], check=True)


# ---------------------------------------------------------------- measuring (in a fresh process)
def pages(args) -> list[tuple[str, str]]:
    """(label, path) of every page measured."""
    chat = FAMILIES[0]
    return [
        ("overview", "/"),
        ("leaderboard (judge list)", "/leaderboard"),
        ("leaderboard", f"/leaderboard?judge={POINT_JUDGES[0]}"),
        ("win rates", f"/winrates?baseline={BASELINE}&family={chat}&judge={PAIR_JUDGES[0]}"),
        ("calibration list", "/calibration"),
        ("calibration report", f"/calibration?family={LABELLED}&judge={POINT_JUDGES[0]}"),
        ("audit, pairwise judge, big family", f"/audit?family={chat}&judge={PAIR_JUDGES[0]}"),
        ("audit, pointwise judge, big family", f"/audit?family={chat}&judge={POINT_JUDGES[0]}"),
        ("audit, calibrated, labelled family", f"/audit?family={LABELLED}&judge={POINT_JUDGES[0]}&filter=flips"),
        # filters and pages nobody opened before: cut from the audit's pair index where it is kept
        ("audit, pairwise judge, big family, ties, page 3", f"/audit?family={chat}&judge={PAIR_JUDGES[0]}&filter=ties&page=3"),
        ("audit, pointwise judge, big family, disagree", f"/audit?family={chat}&judge={POINT_JUDGES[0]}&filter=disagree"),
        ("audit, pairwise judge, code family, inconsistent", f"/audit?family={FAMILIES[1]}&judge={PAIR_JUDGES[0]}"
                                                              f"&filter=inconsistent"),
        ("ratings, no filter", "/ratings"),
        ("ratings, family+judge+status+score", f"/ratings?family={chat}&judge={POINT_JUDGES[0]}&status=ok&score_min=8"),
        ("ratings, model+dates, page 3", f"/ratings?model=model-{min(42, args.models - 1):03d}&since=2026-10-10"
                                         f"&until=2026-10-20&page=3"),
        ("mc runs", "/mc"),
    ]


def rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure(url: str, args) -> None:
    """Run in a fresh process: every page, one warm-up then --requests timed requests."""
    from urllib.parse import quote

    from starlette.testclient import TestClient

    from judgecal.web.app import create_app

    t = time.perf_counter()
    app = create_app(url, cache_mb=args.cache_mb, warm=args.warm)
    client = TestClient(app)
    startup = time.perf_counter() - t
    results = [{"startup_s": round(startup, 2), "rss_mib_after_startup": round(rss_mib(), 1)}]
    if args.warm:  # judgecal.web.warm: the lifespan starts the warmer; its first cycle computes the entry pages
        client.__enter__()
        t = time.perf_counter()
        ok = app.state.warmer.wait_warm(args.warm_timeout)
        results[0].update(first_cycle_s=round(time.perf_counter() - t, 1), first_cycle_done=ok,
                          pages_computed_ahead=app.state.warmer.computed, rss_mib_after_first_cycle=round(rss_mib(), 1))
        print(json.dumps(results[0]), file=sys.stderr, flush=True)
    for label, path in pages(args):
        if args.only and not any(o in label for o in args.only):
            continue
        path = quote(path, safe="/?&=")
        t = time.perf_counter()
        r = client.get(path)
        warm = time.perf_counter() - t
        first_cache = r.headers.get("x-judgecal-cache")
        if r.status_code != 200:
            raise SystemExit(f"{path}: HTTP {r.status_code}: {r.text[-500:]}")
        n = args.requests
        if args.max_page_s and warm * n > args.max_page_s:
            n = max(3, int(args.max_page_s / max(warm, 1e-3)))
        times, hits = [], 0
        for _ in range(n):
            t = time.perf_counter()
            r = client.get(path)
            times.append((time.perf_counter() - t) * 1000)
            assert r.status_code == 200, (path, r.status_code)
            hits += r.headers.get("x-judgecal-cache") == "hit"
        times.sort()
        p95 = times[min(len(times) - 1, math.ceil(0.95 * len(times)) - 1)]
        results.append({"page": label, "path": path, "n": n, "warmup_ms": round(warm * 1000, 1),
                        "p50_ms": round(statistics.median(times), 1), "p95_ms": round(p95, 1),
                        "max_ms": round(times[-1], 1), "bytes": len(r.content), "rss_mib": round(rss_mib(), 1),
                        "first": first_cache, "hits": hits})
        print(json.dumps(results[-1]), file=sys.stderr, flush=True)
    if args.warm:  # a write by another process: each page's first request after it, and the refresh
        import psycopg

        with psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://"), autocommit=True) as conn:
            conn.execute("INSERT INTO task_family (name, created_at) VALUES ('bench/touch', now())")
            conn.execute("DELETE FROM task_family WHERE name = 'bench/touch'")
        time.sleep(1.5)  # PostgreSQL publishes its counters (the data version) within about a second
        t_write = time.perf_counter()
        for r0 in results[1:]:
            t = time.perf_counter()
            r = client.get(r0["path"])
            r0["after_write_ms"] = round((time.perf_counter() - t) * 1000, 1)
            r0["after_write"] = r.headers.get("x-judgecal-cache")
            print(json.dumps({"page": r0["page"], "after_write_ms": r0["after_write_ms"],
                              "after_write": r0["after_write"]}), file=sys.stderr, flush=True)
        ok = app.state.warmer.wait_warm(args.warm_timeout)
        results[0].update(refresh_s=round(time.perf_counter() - t_write, 1), refresh_done=ok,
                          peak_rss_mib=round(rss_mib(), 1))
        client.__exit__(None, None, None)
    print(json.dumps(results))


def profile(url: str, path: str) -> None:
    """One request of ``path`` under a profiler, after a warm-up. The page's endpoint is called in
    this thread (TestClient would run it in a worker thread, out of the profiler's sight)."""
    from urllib.parse import quote, urlsplit

    from starlette.requests import Request

    from judgecal.web.app import create_app

    app = create_app(url)
    parts = urlsplit(quote(path, safe="/?&="))
    endpoint = next(r.endpoint for r in app.routes if getattr(r, "path", None) == parts.path)

    def call():
        scope = {"type": "http", "method": "GET", "path": parts.path, "query_string": parts.query.encode(),
                 "headers": [], "app": app}
        return endpoint(Request(scope))

    call()
    try:
        from pyinstrument import Profiler
    except ImportError:
        import cProfile
        import pstats

        pr = cProfile.Profile()
        pr.enable()
        call()
        pr.disable()
        pstats.Stats(pr).sort_stats("cumulative").print_stats(40)
        return
    prof = Profiler(interval=0.001)
    prof.start()
    r = call()
    prof.stop()
    print(f"{path}: HTTP {r.status_code}")
    print(prof.output_text(unicode=False, color=False, show_all=False))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ratings", type=int, default=1_000_000)
    ap.add_argument("--verdicts", type=int, default=1_000_000)
    ap.add_argument("--items", type=int, default=5000, help="items of the two big families (60%% chat, 40%% code)")
    ap.add_argument("--models", type=int, default=100, help="producing models (model-000 is the baseline)")
    ap.add_argument("--labelled-items", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--requests", type=int, default=20, help="timed requests per page (after one warm-up)")
    ap.add_argument("--max-page-s", type=float, default=0,
                    help="cap one page's timed requests at about this many seconds (at least 3 requests; 0: no cap)")
    ap.add_argument("--only", action="append", metavar="TEXT",
                    help="measure only the pages whose label holds TEXT (repeatable; default: every page)")
    ap.add_argument("--cache-mb", type=int, default=64,
                    help="the app's page cache (judgecal serve --cache-mb; 0: every request computes its page). "
                         "With the cache the warm-up is the cold figure (the page computed) and the timed "
                         "requests are cache hits unless the database changed")
    ap.add_argument("--database", default="judgecal_bench_serve")
    ap.add_argument("--keep", action="store_true", help="reuse the built database and keep it at the end")
    ap.add_argument("--profile", metavar="PATH", help="profile one request of PATH instead of measuring")
    ap.add_argument("--warm", action="store_true",
                    help="serve with the warmer (judgecal.web.warm): wait for its first cycle, measure, then write "
                         "once and measure each page's first request after the write and the refresh")
    ap.add_argument("--warm-timeout", type=float, default=900.0, help="seconds to wait for a warm cycle")
    ap.add_argument("--measure", metavar="URL", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.measure:
        return measure(args.measure, args)
    if args.items * args.models * 2 < args.ratings or args.items * (args.models - 1) * 4 < args.verdicts:
        raise SystemExit("--items x --models too small for --ratings / --verdicts")
    name = args.database
    url = db_url(name)
    print(f"uptime: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}", flush=True)
    if args.keep and existing(name, args):
        print(f"reusing database {name}", flush=True)
        built = None
    else:
        drop(name)
        print(f"building database {name}", flush=True)
        built = build(name, args)
        print(f"built: {json.dumps(built)}", flush=True)
    try:
        if args.profile:
            return profile(url, args.profile)
        print(f"uptime: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}", flush=True)
        cmd = [sys.executable, __file__, "--measure", url, "--requests", str(args.requests),
               "--max-page-s", str(args.max_page_s), "--models", str(args.models), "--cache-mb", str(args.cache_mb)]
        cmd += [x for o in args.only or () for x in ("--only", o)]
        cmd += ["--warm", "--warm-timeout", str(args.warm_timeout)] if args.warm else []
        out = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, check=True, cwd=ROOT)
        res = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"uptime: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")
        head = res[0]
        print(f"\napp start (create_app + imports): {head['startup_s']} s, RSS {head['rss_mib_after_startup']} MiB")
        print(f"page cache: {args.cache_mb} MiB" + (" (off)" if not args.cache_mb else
                                                       "; cold = the first request (the page computed)"))
        print(f"{'page':38} {'n':>3} {'cold ms':>9} {'p50 ms':>9} {'p95 ms':>9} {'hits':>5} {'peak RSS':>9}  "
              f"goal {GOAL_MS:.0f} ms p95 / cold")
        for r in res[1:]:
            ok = "met" if r["p95_ms"] <= GOAL_MS else "NOT met"
            cold = "met" if r["warmup_ms"] <= GOAL_MS else "NOT met"
            print(f"{r['page']:38} {r['n']:>3} {r['warmup_ms']:>9.1f} {r['p50_ms']:>9.1f} {r['p95_ms']:>9.1f} "
                  f"{r['hits']:>5} {r['rss_mib']:>7.0f} MiB  {ok} / {cold}   {r['path']}")
        print(f"peak RSS of the serving process: {max(r['rss_mib'] for r in res[1:]):.0f} MiB")
        if args.warm:
            print(f"\nwarmer: first cycle {head.get('first_cycle_s')} s ({head.get('pages_computed_ahead')} pages, "
                  f"done: {head.get('first_cycle_done')}); after one write: each page's first request (header), "
                  f"then the refresh took {head.get('refresh_s')} s (done: {head.get('refresh_done')}); peak RSS "
                  f"{head.get('peak_rss_mib')} MiB")
            for r in res[1:]:
                ok = "met" if r["after_write_ms"] <= GOAL_MS else "NOT met"
                print(f"{r['page']:38} after write {r['after_write_ms']:>9.1f} ms  {r['after_write']:>6}  {ok}")
    finally:
        if not args.keep:
            drop(name)
            print(f"dropped database {name}")


if __name__ == "__main__":
    main()
