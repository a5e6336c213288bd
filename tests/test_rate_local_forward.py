"""Integration (issue 22 item 2): ``rate --local smollm2`` reads the verdict distribution from one
forward pass of the real SmolLM2-135M-Instruct, and its stored rows equal ``rate`` through a
real ``transformers serve`` (temperature 0) of the same model on the same items wherever the
served judge wrote the same text as the local greedy text (issue 33 item 5: one reading of the
text on both paths; the off-scale case is tests/test_rate_local_offscale.py).

Kept small (the 4 responses of 2 short LLMBar Natural items, the two-shot
prompt whose answers read ``Rating: N``; one short pair for the pairwise path): the served path
costs a server start, a prefill and a few decoding steps per row on 2 CPU cores."""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

sys.path.insert(0, str(Path(__file__).resolve().parent))
from rate_helpers import REPO, child_env, rate_command  # noqa: E402

from judgecal import config  # noqa: E402
from judgecal.judge.server import LocalServer  # noqa: E402

MODEL_DIR = config.default_model_dir()
FAMILY = "llmbar/Natural"
# two short LLMBar Natural items (indexes in dataset.json) on which the local judge's greedy verdicts
# differ (10, 1, 2, 1 with the two-shot prompt; 10 is two tokens): agreeing there is more than both saying 1
ITEMS = (41, 56)
N = 2 * len(ITEMS)

pytestmark = [
    pytest.mark.model,
    pytest.mark.slow,
    pytest.mark.skipif(not (MODEL_DIR / "config.json").is_file(),
                       reason=f"model folder {MODEL_DIR} is absent: run `judgecal model pull`"),
]


def _ratings(url: str, judge_id: int) -> dict[int, tuple]:
    eng = create_engine(url)
    with eng.connect() as conn:
        rows = conn.execute(text("SELECT response_id, status, score, expected_score, distribution, raw_output, error "
                                 "FROM rating WHERE judge_id = :j"), {"j": judge_id}).all()
    eng.dispose()
    return {r[0]: (r[1], r[2], r[3], json.loads(r[4]) if isinstance(r[4], str) else r[4], r[5], r[6]) for r in rows}


def test_local_greedy_scores_equal_the_served_ones(tmp_path, data_dir, run_cli):
    import subprocess

    from judgecal.views import importing

    url = f"sqlite:///{tmp_path / 'local.db'}"
    items = json.loads((data_dir / "llmbar" / "Natural" / "dataset.json").read_text(encoding="utf-8"))
    rows = [{"task_family": FAMILY, "prompt": items[i]["input"], "model": f"output_{k}", "response": items[i][f"output_{k}"]}
            for i in ITEMS for k in (1, 2)]
    path = tmp_path / "responses.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    importing.import_generic(path, "responses", "jsonl", url=url)
    t0 = time.perf_counter()
    with LocalServer(MODEL_DIR, log_path=tmp_path / "serve.log") as base_url:
        t1 = time.perf_counter()
        res = subprocess.run(rate_command(url, judge=str(MODEL_DIR), base_url=base_url, task_families=[FAMILY], limit=N,
                                          prompt="pointwise_fewshot_v1", concurrency=1, max_tokens=8, timeout=120),
                             env=child_env(), capture_output=True, text=True, timeout=600, cwd=REPO)
    t2 = time.perf_counter()
    print(f"server start {t1 - t0:.1f} s, served rating {t2 - t1:.1f} s")
    assert res.returncode == 0, res.stderr[-3000:]
    served = _ratings(url, json.loads(res.stdout[res.stdout.index("{"):])["judge_id"])

    r = run_cli("--database-url", url, "rate", "--local", "smollm2", "--task-family", FAMILY, "--limit", str(N),
                "--prompt", "pointwise_fewshot_v1", "--format", "json")
    assert r.exit_code == 0, r
    summary = json.loads(r.stdout[r.stdout.index("{"):])
    assert summary["endpoint"] == "judgecal-forward" and summary["this_run"] == {"ok": N, "unparsed": 0, "failed": 0,
                                                                                  "attempts": N}
    assert summary["local"]["verdict_prefix"] == "Rating: " and summary["local"]["closing"] == "<|im_end|>"
    local = _ratings(url, summary["judge_id"])
    assert set(local) == set(served) and len(local) == N

    compared = 0
    for rid, (status, score, expected, dist, raw, error) in local.items():
        assert status == "ok" and dist["source"] == "forward" and dist["prefix"] == "Rating: "
        probs = dist["probs"]
        assert list(probs) == [str(v) for v in range(1, 11)]
        assert math.isclose(sum(probs.values()), 1.0, abs_tol=1e-9) and 0.0 <= dist["outside"] < 1.0
        assert math.isclose(expected, sum(p * int(k) for k, p in probs.items()), rel_tol=1e-12)
        # the raw output is the greedy text (it was a description of the reading before issue 33 item 5)
        assert raw == f"Rating: {score:g}" and dist["greedy"] == f"{score:g}" and error is None
        s_status, s_score, _, _, s_raw, s_error = served[rid]
        if s_raw == raw:
            compared += 1
            assert (status, score, error) == (s_status, s_score, s_error), (rid, raw)
    print(f"compared {compared} of {N}: local {[local[k][1] for k in sorted(local)]}, "
          f"served {[served[k][1] for k in sorted(served)]}")
    assert compared >= N - 1, f"only {compared} served outputs wrote the local greedy text"

    # the same run again rates nothing (resumable, idempotent); the judge is the same row
    again = run_cli("--database-url", url, "rate", "--local", "smollm2", "--task-family", FAMILY, "--limit", str(N),
                    "--prompt", "pointwise_fewshot_v1", "--format", "json")
    out = json.loads(again.stdout[again.stdout.index("{"):])
    assert again.exit_code == 0 and out["judge_id"] == summary["judge_id"] and out["this_run"]["ok"] == 0


def test_local_pairwise_distribution_in_both_orders(tmp_path, run_cli):
    """One short labelled pair judged with pairwise_v1 by the forward path: both orders
    stored, P(a)/P(b)/P(tie) canonical and normalised, the verdict the one its greedy text gives, the
    preference P(a) + P(tie)/2."""
    rows = [{"task_family": "tiny", "prompt": "What is the capital of France?", "model_a": "good",
             "response_a": "Paris.", "model_b": "bad", "response_b": "Banana.", "preference": "a"}]
    path = tmp_path / "labels.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    url = f"sqlite:///{tmp_path / 'pw.db'}"
    assert run_cli("--database-url", url, "import", "jsonl", "--kind", "labels", str(path)).exit_code == 0
    r = run_cli("--database-url", url, "rate", "--local", "smollm2", "--pairwise", "--format", "json")
    assert r.exit_code == 0, r
    summary = json.loads(r.stdout[r.stdout.index("{"):])
    assert summary["this_run"]["ok"] == 2 and summary["local"]["verdict_prefix"] == "[["
    eng = create_engine(url)
    with eng.connect() as conn:
        got = conn.execute(text("SELECT position, verdict, preference, distribution, raw_output, status "
                                "FROM pairwise_judgment")).all()
    eng.dispose()
    assert sorted(g[0] for g in got) == ["ab", "ba"]
    for position, verdict, pref, dist, raw, status in got:
        dist = json.loads(dist) if isinstance(dist, str) else dist
        p = dist["probs"]
        assert set(p) == {"a", "b", "tie"} and math.isclose(sum(p.values()), 1.0, abs_tol=1e-9)
        assert math.isclose(pref, p["a"] + p["tie"] / 2, abs_tol=1e-12)
        assert status == "ok" and raw.startswith("[[") and verdict == dist["greedy"]  # the greedy text's verdict
