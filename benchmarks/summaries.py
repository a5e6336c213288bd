"""Benchmark (issue 22, item 4): greedy vs mean vs risk-averse rating summaries of the local judge.

The local SmolLM2-135M-Instruct judge (``rate --local``: the verdict distribution of each
response from one forward pass, prompt ``pointwise_fewshot_v1``, scale 1-10, float32, CPU) rates

- the shared LLMBar sets Natural, Adversarial_Neighbor and Adversarial_GPTInst (every item, both
  outputs; expert gold labels), and
- AlpacaEval's gpt4_1106_preview concise/verbose pairs (the same model's answers to the same
  instruction, prompted to be concise and to be verbose; the first ``--alpaca-items`` of the
  805 instructions by item id: the verbose answers are long and the CPU forward pass is slow),

then, for each LLMBar set and each summary (greedy, mean, risk-averse = mean - k sd, k = 1),
``judgecal fit`` with ``--summary`` (``--verbosity-family`` = the AlpacaEval pairs) and prints a
Markdown section: tie rate of the labelled pairs, expert agreement of the raw summary out of
sample (5-fold CV, the same folds as every calibration method) with its 95% CI, its paired gain
over greedy with the CI (the report's "keep raw unless the CI says otherwise" rule), the
verbosity win-rate, and the same figures after length calibration (the polylog seed formula,
cross-validated) and the nested selection's recommendation.

The distributions are cached: the rating database is ``--cache`` (default
``JUDGECAL_HOME/cache/summaries-smollm2.db``), rated once and reused by later runs (``rate`` is
resumable and idempotent: a second run rates nothing). Delete the file to rate again.
Two runs on one machine share that cache (several checkouts, one user): a run holds an exclusive
lock on ``<cache>.lock`` from its import to the end of its fits, so a second run waits (and says
so) instead of fitting while the first is still storing ratings; a ``rate`` that ends with rows
of the selection still claimed by another worker stops the script with that count.
Measured on this project's 2-core machine (2026-12-03, other jobs sharing the cores): the first
run rated for about 32 minutes (LLMBar Natural 107 s, Neighbor 404 s, GPTInst 293 s for 652
responses; the 200 AlpacaEval answers 1131 s, 0.18 answers/s: the verbose ones run to ~600
tokens); with the cache complete the whole script takes about 1.5 minutes (the three fits).

Run:  HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/summaries.py [--alpaca-items 100]
      [--cache PATH] [--collect-only] [--n-bootstrap 1000]
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

LLMBAR_SETS = ("Natural", "Adversarial_Neighbor", "Adversarial_GPTInst")
ALPACA_FAMILY = "summaries/alpaca_eval"
BASELINE = "gpt4_1106_preview"
PROMPT = "pointwise_fewshot_v1"
JUDGE = "smollm2-local"
SUMMARIES = ("greedy", "mean", "risk-averse")


def default_cache() -> Path:
    from judgecal.config import home

    return home() / "cache" / "summaries-smollm2.db"


def cli(url: str, *args, check: bool = True) -> subprocess.CompletedProcess:
    env = {**os.environ, "JUDGECAL_DATABASE_URL": url}
    proc = subprocess.run([sys.executable, "-m", "judgecal", *map(str, args)], cwd=REPO, env=env,
                          capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise SystemExit(f"judgecal {' '.join(map(str, args))} failed ({proc.returncode}): "
                         f"{(proc.stderr or proc.stdout).strip()[-400:]}")
    return proc


def collect(url: str, alpaca_items: int, log=print, data: Path | None = None) -> dict:
    """Import the data once and rate what is not rated yet (resumable). Returns seconds spent
    rating per family (a few seconds when the cache already held every rating)."""
    from judgecal.config import shared_data_dir

    data = data or shared_data_dir()
    cli(url, "db", "upgrade")
    fams = cli(url, "stats", "--format", "json", check=False).stdout
    have = fams if fams else ""
    for name in LLMBAR_SETS:
        if f"llmbar/{name}" not in have:
            cli(url, "import", "llmbar", data / "llmbar" / name)
    if ALPACA_FAMILY not in have:
        a = data / "alpaca_eval"
        cli(url, "import", "alpaca-eval", "--pair", a / f"{BASELINE}_concise.json", a / f"{BASELINE}_verbose.json", "--task-family", ALPACA_FAMILY)
    spent = {}
    jobs = [(f"llmbar/{s}", []) for s in LLMBAR_SETS] + [(ALPACA_FAMILY, ["--items", alpaca_items])]
    for fam, extra in jobs:
        t0 = time.perf_counter()
        out = cli(url, "rate", "--local", "smollm2", "--judge-name", JUDGE, "--prompt", PROMPT,
                  "--task-family", fam, *extra, "--format", "json")
        spent[fam] = time.perf_counter() - t0
        unfinished = unfinished_rows(out.stdout)
        totals = json.loads(out.stdout)["totals"]
        log(f"rated {fam}: {spent[fam]:.0f} s; rows " + ", ".join(f"{k} {v}" for k, v in totals.items()))
        if unfinished:
            raise SystemExit(f"judgecal rate --task-family {fam}: {unfinished} row(s) of the selection are not "
                             "finished (another worker holds them, or they are pending): the fits would leave them "
                             f"out; run again when that worker is done ({url})")
    return spent


def unfinished_rows(rate_json: str) -> int:
    """Rows of ``rate --format json``'s selection still 'pending' or 'running' (another worker's
    claims) after the run; raises SystemExit when the output is not rate's JSON summary."""
    try:
        totals = json.loads(rate_json)["totals"]
        return int(totals.get("pending", 0)) + int(totals.get("running", 0))
    except (ValueError, KeyError, TypeError) as e:
        raise SystemExit(f"judgecal rate gave no JSON summary ({e}): {rate_json.strip()[-300:]}")


@contextlib.contextmanager
def cache_lock(cache: Path, log=print):
    """Hold an exclusive lock on ``<cache>.lock`` (flock; released when the process ends, even
    killed) while a run imports, rates and fits the shared cache: a second run on the machine
    waits for the first (saying which process holds it) instead of fitting a cache that the
    first is still filling. Raises SystemExit with one line when the lock file cannot be made
    (exit 1) or when Ctrl-C ends the wait (exit 130)."""
    lock = cache.with_name(cache.name + ".lock")
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        fh = open(lock, "a+")
    except OSError as e:
        raise SystemExit(f"{lock}: cannot create the cache's lock file ({e.strerror or e}); "
                         "give --cache a writable place or set JUDGECAL_HOME")
    with fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.seek(0)
            holder = fh.read().strip() or "another process"
            log(f"waiting for {holder}, which holds {lock} (it is rating or fitting the same cache; "
                "Ctrl-C stops waiting)")
            t0 = time.perf_counter()
            try:
                fcntl.flock(fh, fcntl.LOCK_EX)
            except KeyboardInterrupt:
                print(f"interrupted while waiting for {lock}: nothing was rated or fitted", file=sys.stderr)
                raise SystemExit(130)
            log(f"got {lock} after {time.perf_counter() - t0:.0f} s")
        fh.seek(0)
        fh.truncate()
        fh.write(f"pid {os.getpid()} ({' '.join(sys.argv)[:200]})\n")
        fh.flush()
        try:
            yield
        finally:
            fh.truncate(0)
            fcntl.flock(fh, fcntl.LOCK_UN)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", type=Path, default=None, help="rating database (SQLite file); default "
                    "JUDGECAL_HOME/cache/summaries-smollm2.db")
    ap.add_argument("--alpaca-items", type=int, default=100)
    ap.add_argument("--n-bootstrap", type=int, default=1000)
    ap.add_argument("--collect-only", action="store_true")
    args = ap.parse_args(argv)
    cache = args.cache or default_cache()
    url = f"sqlite:///{cache}"
    log = lambda s: print(s, file=sys.stderr, flush=True)  # noqa: E731
    with cache_lock(cache, log):
        spent = collect(url, args.alpaca_items, log=log)
        if args.collect_only:
            print(json.dumps(spent))
            return
        rows = fits(url, args.n_bootstrap, args.alpaca_items)
    print(section(rows, spent, args.alpaca_items, args.n_bootstrap))


def run_all(data: Path | None = None, alpaca_items: int = 100, n_bootstrap: int = 1000, cache: Path | None = None,
            log=None) -> dict:
    """What benchmarks/results.py keeps (JSON): {"rows": {set: fit row}, "spent": {family: s},
    "alpaca_items", "n_bootstrap"}; rates into the cache only what it lacks."""
    cache = cache or default_cache()
    url = f"sqlite:///{cache}"
    log = log or (lambda s: print(s, file=sys.stderr, flush=True))
    with cache_lock(cache, log):
        spent = collect(url, alpaca_items, log=log, data=data)
        rows = fits(url, n_bootstrap, alpaca_items)
    return {"rows": rows, "spent": spent, "alpaca_items": alpaca_items, "n_bootstrap": n_bootstrap}


def pct(x, ci=None, signed=False) -> str:
    if x is None:
        return "n/a"
    f = "{:+.1f}" if signed else "{:.1f}"
    return f.format(100 * x) + (f" [{f.format(100 * ci[0])}, {f.format(100 * ci[1])}]" if ci else "")


def fits(url: str, n_bootstrap: int, alpaca_items: int) -> dict:
    """{LLMBar set: fit row (JSON)} of the greedy fit of each set on a copy of the cache (the
    cache itself is left as rated). Only the ratings of the first ``alpaca_items`` AlpacaEval
    items (by id, as ``rate --items`` picks them) are kept in the copy, so the figures are the
    same whatever else the cache holds (a cache rated with a larger ``--alpaca-items``)."""
    import shutil
    import sqlite3
    import tempfile

    src = Path(url.removeprefix("sqlite:///"))
    tmp = Path(tempfile.mkdtemp(prefix="judgecal-summaries-")) / "fit.db"
    with sqlite3.connect(src) as a, sqlite3.connect(tmp) as b:  # a consistent copy, also while a rating job writes
        a.backup(b)
    with sqlite3.connect(tmp) as conn:
        conn.execute(
            "DELETE FROM rating WHERE response_id IN (SELECT r.id FROM response r JOIN item i ON i.id = r.item_id "
            "JOIN task_family f ON f.id = i.task_family_id WHERE f.name = ? AND i.id NOT IN (SELECT i2.id FROM item "
            "i2 WHERE i2.task_family_id = f.id ORDER BY i2.id LIMIT ?))", (ALPACA_FAMILY, alpaca_items))
    turl = f"sqlite:///{tmp}"
    out = {}
    for name in LLMBAR_SETS:
        proc = cli(turl, "fit", "--task-family", f"llmbar/{name}", "--judge", JUDGE, "--verbosity-family", ALPACA_FAMILY,
                   "--bootstrap", n_bootstrap, "--no-nested", "--format", "json")
        out[name] = json.loads(proc.stdout)
    shutil.rmtree(tmp.parent, ignore_errors=True)
    return out


def section(rows: dict, spent: dict, alpaca_items: int, n_bootstrap: int, heading: str = "##") -> str:
    """The Markdown section (heading, the table, the recommendations, how it was made) from the
    fit rows of :func:`fits`."""
    from judgecal.calibrate.summaries import label

    lines = [f"{heading} Rating summaries of the local judge: greedy vs mean vs risk-averse (issue 22)", "",
             f"SmolLM2-135M-Instruct as a pointwise judge (`rate --local smollm2 --prompt {PROMPT}`: each response's "
             "verdict distribution over 1-10 from one forward pass) on every LLMBar Natural, Adversarial_Neighbor and "
             f"Adversarial_GPTInst pair, and on the concise/verbose answers of the first {alpaca_items} AlpacaEval "
             "instructions (gpt4_1106_preview prompted to be concise / verbose). Summaries: greedy (the verdict greedy "
             "decoding writes), mean (expected score), risk-averse (mean - 1 sd, Wang, Zhang & Choi 2025). Expert "
             "agreement (ties count 1/2) out of sample: the fit's 5-fold item-grouped CV, raw and after the polylog "
             "length calibration fitted on the other folds; gains are paired differences from greedy with 95% "
             f"bootstrap CIs over items ({n_bootstrap} resamples). The verbosity win-rate is the share of "
             "AlpacaEval pairs where the verbose answer scores higher (ties 1/2), raw and with the set's calibration "
             "(fitted on all its pairs) applied. Ties: share of pairs with equal scores.", "",
             "| set | summary | ties | agreement raw (CV, %) | gain vs greedy (points) | agreement calibrated (CV, %) | gain vs greedy (points) | "
             "verbosity win-rate raw | calibrated | verbosity ties |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    recs = []
    for name, row in rows.items():
        comp = row.get("summaries") or {}
        if not comp.get("available"):
            lines.append(f"| {name} | not compared: {comp.get('reason')} |||||||||")
            continue
        for sname, r in comp["summaries"].items():
            g = sname == "greedy"
            lines.append(
                f"| {name} | {label(sname, comp['risk_k'])} | {pct(r['tie_rate'])}% | {pct(r['figure_cv'], r['figure_cv_ci'])} | "
                f"{'(reference)' if g else pct(r['gain_cv'], r['gain_cv_ci'], True)} | "
                f"{pct(r['calibrated_cv'], r['calibrated_cv_ci'])} | "
                f"{'(reference)' if g else pct(r['calibrated_gain_cv'], r['calibrated_gain_cv_ci'], True)} | "
                f"{pct(r['verbosity_win_rate'])}% | {pct(r['verbosity_win_rate_calibrated'])}% | "
                f"{pct(r['verbosity_tie_rate'])}% |")
        recs.append(f"- {name} ({comp['n']} pairs): recommended summary **{label(comp['recommended'], comp['risk_k'])}**: "
                    f"{comp['reason']}")
        cal_wins = [f"{label(k, comp['risk_k'])} {pct(r['calibrated_gain_cv'], r['calibrated_gain_cv_ci'], True)} points"
                    for k, r in comp["summaries"].items()
                    if k != "greedy" and r.get("calibrated_gain_cv_ci") and r["calibrated_gain_cv_ci"][0] > 0]
        if cal_wins:
            recs.append(f"  - after the length calibration, the paired gain over calibrated greedy clears zero for "
                        f"{', '.join(cal_wins)} (the rule above judges the raw summaries; a calibrated mean is a "
                        f"length calibration on another score, compare it with the calibration methods of the fit)")
    lines += ["", *recs, ""]
    lines.append(f"Command: `HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/summaries.py --alpaca-items {alpaca_items}` "
                 "(also the last section of `make results`). The local model's distributions are cached in "
                 "`JUDGECAL_HOME/cache/summaries-smollm2.db` and reused: a later run rates nothing and refits only; "
                 "delete the file to rate again.")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        raise SystemExit("interrupted: the ratings stored so far stay in the cache (rate is resumable: run again to "
                         "go on); nothing was fitted")
