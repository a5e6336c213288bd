"""Position consistency and win rates from verdicts collected by `judgecal rate --pairwise
--baseline` against a stub judge that always answers "A" (SQLite and PostgreSQL)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from stub_openai import StubServer  # noqa: E402

ITEMS = [f"Question {i}: name {i} colours." for i in range(5)]


@pytest.fixture()
def rated(db_url, tmp_path):
    from judgecal.views import importing
    from judgecal.views.rate import run_rate

    rows = [{"task_family": "pw", "prompt": q, "model": model, "response": f"{model} answer {i}" + " more" * (3 if model == "m1" else 0)}
            for i, q in enumerate(ITEMS) for model in ("m1", "base")]
    f = tmp_path / "r.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    importing.import_generic(f, "responses", "jsonl", url=db_url)
    with StubServer(answer="Assistant A is better.\n[[A]]") as s:
        out = run_rate(judge="stub-judge", base_url=s.base_url, database_url=db_url, progress=False, task_families=["pw"],
                       baseline="base", concurrency=2)
    assert out["this_run"]["ok"] == 10
    return db_url


def test_report_position_consistency_always_a(rated, run_cli):
    from judgecal.views.pairwise_report import collect_pairwise

    sec = collect_pairwise(url=rated, n_bootstrap=100)
    assert len(sec) == 1
    e = sec[0]
    assert e["n_pairs"] == 5 and e["n_verdicts"] == 10
    assert e["consistent"] == 0.0 and e["flip_rate"] == 1.0 and e["first_position_preference"] == 1.0
    # m1's answers are longer; the judge prefers the longer one exactly when it is shown first: 5 of 10
    assert e["longer_preferred"] == 0.5
    r = run_cli("--database-url", rated, "report", "--format", "json")
    assert r.exit_code == 0, r
    assert json.loads(r.stdout)["pairwise_judges"][0]["flip_rate"] == 1.0
    r = run_cli("--database-url", rated, "report", "--format", "markdown")
    assert r.exit_code == 0 and "Pairwise judges" in r.stdout and "| pw | stub-judge |" in r.stdout


def test_win_rate_of_a_position_biased_judge_is_one_half(rated, run_cli):
    r = run_cli("--database-url", rated, "leaderboard", "--baseline", "base", "--bootstrap", "0", "--format", "json")
    assert r.exit_code == 0, r
    rows = {x["model"]: x for x in json.loads(r.stdout)["rows"]}
    # both orders averaged: (1 + 0) / 2 per instruction -> 50%
    assert rows["m1"]["win_rate"] == pytest.approx(50.0)
    assert rows["m1"]["n_items"] == 5
