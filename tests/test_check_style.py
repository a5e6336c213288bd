"""``judgecal check --max-style-coefficient`` (issue 34 item 6): the gate on how much a pairwise
judge rewards style, on the real AlpacaEval annotations (GPT-4-turbo judge, five models against
gpt4_1106_preview): the rows equal the style coefficients of ``judgecal bt --control`` with the
same resamples and seed, a row fails exactly when its CI's lower bound is above the threshold,
the exit code follows, table and JSON carry the rows; refused in one line where the family has
no pairwise verdicts."""

from __future__ import annotations

import json

import pytest

from judgecal.views import importing
from judgecal.views.btboard import build_bt_board
from judgecal.views.check import run_check

MODELS = ("alpaca-7b", "claude-2", "gpt-3.5-turbo-1106_verbose", "gpt-3.5-turbo-1106_concise")
JUDGE = "weighted_alpaca_eval_gpt4_turbo"


@pytest.fixture()
def alpaca(db_url, data_dir):
    res = data_dir / "alpaca_eval" / "results"
    importing.import_alpaca_eval([res / n for n in MODELS], [], None, db_url)
    return db_url


def test_the_gate_reads_the_bt_coefficients(alpaca, run_cli):
    board = build_bt_board(url=alpaca, n_bootstrap=50, seed=2, control="both", length_unit="words")
    coefs = {c["feature"]: c for c in board["style"]["coefficients"]}
    assert list(coefs) == ["length", "headers", "lists", "bold"]
    # the real judge rewards length: its CI is well above zero (measured: +0.65 or more)
    assert coefs["length"]["coef_ci"][0] > 0.5
    # a threshold between the length coefficient's lower bound and the others': length fails alone
    others = max(c["coef_ci"][0] for f, c in coefs.items() if f != "length")
    threshold = round((coefs["length"]["coef_ci"][0] + others) / 2, 3)
    res = run_check(None, None, url=alpaca, max_style_coefficient=threshold, length_unit="words",
                    transfer_bootstrap=50, seed=2)
    rows = [c for c in res["checks"] if c["check"] == "style_coefficient"]
    assert res["checks"] == rows  # no calibration stored: the style rows alone
    assert [r["feature"] for r in rows] == ["length", "headers", "lists", "bold"]
    for r in rows:
        c = coefs[r["feature"]]
        assert r["value"] == c["coef"] and r["ci"] == c["coef_ci"] and r["threshold"] == threshold
        assert r["ok"] == (c["coef_ci"][0] <= threshold)
        assert r["task_family"] == "alpaca_eval" and r["judge"] == JUDGE
    assert [r["ok"] for r in rows] == [False, True, True, True] and not res["ok"]
    assert f"CI lower bound {coefs['length']['coef_ci'][0]:+.3f} > {threshold:+g}" in rows[0]["message"]
    assert "baseline gpt4_1106_preview" in rows[0]["message"]

    args = ("--database-url", alpaca, "check", "--length-unit", "words", "--bootstrap", "50", "--seed", "2")
    r = run_cli(*args, "--max-style-coefficient", str(threshold), "--format", "json")
    assert r.exit_code == 1, r
    out = json.loads(r.stdout)
    assert [(c["feature"], c["ok"], c["ci"]) for c in out["checks"]] == [(x["feature"], x["ok"], x["ci"]) for x in rows]
    r = run_cli(*args, "--max-style-coefficient", str(threshold))
    assert r.exit_code == 1 and "style_coefficient" in r.stdout and "FAIL" in r.stdout, r
    assert r.stderr.count("FAIL ") == 1 and "the judge rewards length beyond the threshold" in r.stderr
    # above every lower bound: passes; the length-only control gates length alone
    r = run_cli(*args, "--max-style-coefficient", "5", "--control", "length", "--format", "json")
    assert r.exit_code == 0, r
    out = json.loads(r.stdout)
    assert [c["feature"] for c in out["checks"]] == ["length"] and out["ok"]


def test_refused_without_pairwise_verdicts(tmp_path, data_dir, run_cli):
    url = f"sqlite:///{tmp_path / 'llmbar.db'}"
    importing.import_llmbar(data_dir / "llmbar" / "Natural", None, url)  # expert labels, no judge verdicts
    r = run_cli("--database-url", url, "check", "--task-family", "llmbar/Natural", "--max-style-coefficient", "0.2")
    assert r.exit_code == 2 and "Traceback" not in r.output, r
    assert r.stderr.strip().splitlines() == [
        "error: --max-style-coefficient: task family 'llmbar/Natural' has no pairwise verdicts (the style "
        "coefficients come from a Bradley-Terry fit of pairwise verdicts)"], r.stderr
    r = run_cli("--database-url", url, "check", "--max-style-coefficient", "0.2")
    assert r.exit_code == 2 and "this database holds no pairwise verdicts" in r.stderr, r
    for extra, says in ((("--control", "length"), "--control applies to --max-style-coefficient"),
                        (("--length-unit", "words"), "--length-unit applies to --max-style-coefficient"),
                        (("--max-style-coefficient", "0.2", "--length-unit", "words", "--tokenizer", "smollm2"),
                         "--tokenizer applies to --length-unit tokens")):
        r = run_cli("--database-url", url, "check", *extra)
        assert r.exit_code == 2 and says in r.stderr and "Traceback" not in r.output, (extra, r)


def test_a_family_with_nothing_to_control_for_does_not_stop_the_gate(alpaca, tmp_path, run_cli):
    # a break-it run: one family holding a single verdict stopped the whole gate with a usage error (rc 2),
    # so the AlpacaEval family that should fail was never gated
    one = tmp_path / "one.jsonl"
    one.write_text(json.dumps({"task_family": "tiny", "prompt": "q", "model_a": "x", "response_a": "plain",
                               "model_b": "y", "response_b": "plain too", "judge": "tiny judge", "verdict": "a",
                               "baseline": "b"}) + "\n", encoding="utf-8")
    r = run_cli("--database-url", alpaca, "import", "jsonl", str(one), "--kind", "verdicts", "--no-refresh")
    assert r.exit_code == 0, r.stderr
    res = run_check(None, None, url=alpaca, max_style_coefficient=0.5, length_unit="words", transfer_bootstrap=30,
                    seed=2)
    rows = [c for c in res["checks"] if c["check"] == "style_coefficient"]
    tiny = [c for c in rows if c["task_family"] == "tiny"]
    assert len(tiny) == 1 and tiny[0]["ok"] and tiny[0]["feature"] is None
    assert "not gated:" in tiny[0]["message"] and "nothing to control for" in tiny[0]["message"]
    assert any(not c["ok"] for c in rows if c["task_family"] == "alpaca_eval")  # the real judge's length still fails
    r = run_cli("--database-url", alpaca, "check", "--length-unit", "words", "--bootstrap", "30", "--seed", "2",
                "--max-style-coefficient", "0.5")
    assert r.exit_code == 1 and "not gated" in r.stdout + r.stderr, r
