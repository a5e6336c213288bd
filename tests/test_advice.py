"""Issue 18: advice a team can publish on.

- "keep raw" is an answer of the nested selection, and the figure beside a recommendation is the
  recommended method's own out-of-sample figure;
- a fit that the labels do not determine (gamma at its bound, one item deciding the optimum,
  scores clipped) is "not identified" in every output and `check` fails on it;
- a transfer judges what would be applied (the recommended method and the polylog fit): "hurts"
  comes first and `check --calibration ID --task-family OTHER` fails on it;
- `check --min-verbosity-winrate`: a calibration that makes the shorter answer always win fails.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from judgecal.calibrate import metrics as M
from judgecal.calibrate.data import PairData
from judgecal.calibrate.evaluate import evaluate_pairwise
from judgecal.report.build import verdict


def _pairs(n=60, seed=0, bias=0.0, extreme=False):
    """n synthetic labelled pairs; ``bias``: how much the judge rewards length (score points per
    nat of length ratio) while the experts prefer on quality alone."""
    rng = np.random.default_rng(seed)
    la = rng.integers(20, 400, n).astype(float)
    lb = rng.integers(20, 400, n).astype(float)
    qa, qb = rng.normal(5, 1.5, n), rng.normal(5, 1.5, n)
    sa = np.clip(np.round(qa + bias * np.log(la / 100) + rng.normal(0, 0.5, n)), 0, 10)
    sb = np.clip(np.round(qb + bias * np.log(lb / 100) + rng.normal(0, 0.5, n)), 0, 10)
    out = np.where(qa > qb, 1.0, 0.0)
    return PairData(item_ids=[f"item{i:03d}" for i in range(n)], score_a=sa, score_b=sb, len_a=la, len_b=lb,
                    outcome=out)


# ----------------------------------------------------------------------------- keep raw
def test_nothing_beats_raw_keep_raw_with_the_reason_and_raws_own_figure():
    d = _pairs(60, seed=1, bias=0.0)
    ev = evaluate_pairwise(d, scale=(0, 10), n_bootstrap=200, seed=0)
    sel = ev["selection"]
    assert sel["decision"] == "keep raw" and sel["recommended"] == "raw"
    assert "does not clear zero" in sel["reason"] or "prefers the raw judge" in sel["reason"]
    raw_agreement = float(M.agreement_credit(M.order_credit(d.score_a, d.score_b),
                                             1 - M.order_credit(d.score_a, d.score_b), d.outcome).mean())
    # the figure shown for keep raw is raw's own agreement on the same rows
    assert sel["nested"] == pytest.approx(raw_agreement) and sel["raw"] == pytest.approx(raw_agreement)
    assert sel["candidate_chosen_in"] == sum(c == sel["candidate"] for c in sel["chosen_in_outer_folds"])


def test_a_real_length_bias_is_corrected_and_the_shown_figure_is_the_methods_own():
    d = _pairs(120, seed=2, bias=3.0)
    ev = evaluate_pairwise(d, scale=(0, 10), n_bootstrap=200, seed=0)
    sel = ev["selection"]
    assert sel["decision"] == "calibrate" and sel["recommended"] == sel["candidate"] != "raw"
    assert sel["nested_gain_ci"][0] > 0 and sel["procedure_gain_ci"][0] > 0
    # the nested figure is the candidate's own out-of-sample agreement, not the procedure's
    assert sel["nested"] == pytest.approx(sel["candidate_nested"])
    assert sel["nested"] - sel["raw"] == pytest.approx(sel["nested_gain"])


def test_without_a_confidence_interval_nothing_is_recommended():
    ev = evaluate_pairwise(_pairs(120, seed=2, bias=3.0), scale=(0, 10), n_bootstrap=0, seed=0)
    assert ev["selection"]["decision"] == "keep raw" and "no confidence interval" in ev["selection"]["reason"]


# ----------------------------------------------------------------------------- identification
def test_one_item_deciding_the_optimum_is_not_identified():
    rng = np.random.default_rng(1)
    n = 40
    la = rng.integers(20, 40, n).astype(float)
    lb = la + rng.integers(-2, 3, n)
    sa, sb = rng.integers(3, 8, n).astype(float), rng.integers(3, 8, n).astype(float)
    out = np.where(sa > sb, 1.0, np.where(sa < sb, 0.0, 0.5))
    la[0], lb[0], sa[0], sb[0], out[0] = 5, 2000, 2, 9, 1.0  # the only pair where length matters
    d = PairData(item_ids=[f"i{i:03d}" for i in range(n)], score_a=sa, score_b=sb, len_a=la, len_b=lb, outcome=out)
    ev = evaluate_pairwise(d, scale=(0, 10), n_bootstrap=100, seed=0, nested=False)
    ident = ev["identification"]
    assert ev["params"]["gamma"] > 0.1
    assert ident["identified"] is False and ident["influence"]["item"] == "i000"
    assert ident["influence"]["gamma_without"] == pytest.approx(0.0, abs=1e-6)
    assert [f["code"] for f in ev["flags"]] == ["not_identified"]
    v = verdict(ev)
    assert v["code"] in ("not identified", "hurts") and "one item decides the optimum" in v["text"]


def test_gamma_at_its_bound_is_not_identified_and_never_helps():
    d = _pairs(120, seed=2, bias=3.0)
    ev = evaluate_pairwise(d, scale=(0, 10), n_bootstrap=100, seed=0, nested=False, gamma_max=0.2)
    assert ev["params"]["at_bound"]["gamma"] == "upper"
    assert ev["identification"]["identified"] is False
    assert any("upper bound" in r for r in ev["identification"]["reasons"])
    assert verdict(ev)["code"] != "helps"


def test_a_well_determined_fit_is_identified():
    ev = evaluate_pairwise(_pairs(200, seed=3, bias=1.0), scale=(0, 10), n_bootstrap=200, seed=0, nested=False)
    ident = ev["identification"]
    assert ev["params"]["gamma"] > 0 and ident["identified"] is True, ident
    assert ev["flags"] == []


# ----------------------------------------------------------------------------- real data
@pytest.fixture()
def llmbar_words_db(tmp_path, data_dir, run_cli):
    url = f"sqlite:///{tmp_path / 'a.db'}"
    for fam in ("Natural", "Adversarial_Neighbor"):
        r = run_cli("--database-url", url, "import", "llmbar", str(data_dir / "llmbar" / fam))
        assert r.exit_code == 0, r.stderr
    return url


def _fit(run, url, fam, judge):
    r = run("--database-url", url, "fit", "--task-family", f"llmbar/{fam}", "--judge", judge, "--length-unit", "words",
            "--bootstrap", "200", "--seed", "0", "--format", "json")
    assert r.exit_code == 0, r.stderr
    return json.loads(r.stdout)


@pytest.mark.slow
def test_real_llmbar_keep_raw_not_identified_and_a_transfer_that_hurts(llmbar_words_db, run_cli, tmp_path):
    run, url = run_cli, llmbar_words_db
    nat = _fit(run, url, "Natural", "ChatGPT")
    # ChatGPT on Natural: no method beats raw out of sample (issue 18: LC GLM was recommended)
    assert nat["selection"]["decision"] == "keep raw" and nat["selection"]["recommended"] == "raw"
    adv = _fit(run, url, "Adversarial_Neighbor", "ChatGPT")
    sel = adv["selection"]
    assert sel["decision"] == "calibrate" and sel["nested_gain_ci"][0] > 0
    # the polylog fit clips about half the scores to the scale's ends: not identified
    assert adv["identification"]["identified"] is False
    assert "not_identified" in [f["code"] for f in adv["flags"]]
    base = ("--database-url", url)
    for fmt in ("table", "markdown", "json"):
        r = run(*base, "report", "--calibration", str(nat["id"]), "--calibration", str(adv["id"]), "--format", fmt)
        assert r.exit_code == 0, r.stderr
        text = r.stdout
        assert "keep raw" in text and "not identified" in text, fmt
    r = run(*base, "report", "--calibration", str(adv["id"]), "--out", str(tmp_path / "rep"), "--format", "json")
    html = (tmp_path / "rep" / "report.html").read_text()
    assert "not identified" in html
    # the gate refuses the unidentified fit by default, and says so
    r = run(*base, "check", "--calibration", str(adv["id"]), "--min-agreement-gain", "-1", "--max-verbosity-winrate", "1",
            "--publish", "calibrated")
    assert r.exit_code == 1 and "not identified" in r.stderr
    r = run(*base, "check", "--calibration", str(adv["id"]), "--min-agreement-gain", "-1", "--max-verbosity-winrate", "1",
            "--allow-unidentified", "--publish", "calibrated", "--format", "json")
    checks = {c["check"]: c for c in json.loads(r.stdout)["checks"]}
    assert checks["identified"]["ok"] is True and checks["identified"]["value"] is False
    # transfer Adversarial_Neighbor -> Natural: the recommended method is what is judged, it hurts, it comes first
    r = run(*base, "report", "--calibration", str(adv["id"]), "--task-family", "llmbar/Adversarial_Neighbor",
            "--task-family", "llmbar/Natural", "--bootstrap", "200", "--format", "json")
    entries = json.loads(r.stdout)["entries"]
    first = entries[0]
    assert first["kind"] == "transfer" and first["task_family"] == "llmbar/Natural"
    assert first["verdict"]["code"] == "hurts" and sel["recommended"] in first["verdict"]["text"]
    assert first["verdict"]["difference_ci"][1] < 0
    r = run(*base, "check", "--calibration", str(adv["id"]), "--task-family", "llmbar/Natural", "--allow-unidentified",
            "--min-agreement-gain", "-1", "--max-verbosity-winrate", "1")
    assert r.exit_code == 1 and "Transfer hurts" in r.stderr


@pytest.mark.slow
def test_quickstart_data_planted_bias_recovered_and_the_lower_verbosity_bound(tmp_path, run_cli):
    """The quickstart's own data: a judge that adds 0.9 * ln(words / 30) to the quality experts
    judge by. The fit recovers gamma near 0.9 (p = 1), is identified, brings the verbosity win-rate
    near one half, and recommends a calibration; `check --min-verbosity-winrate` above the
    calibrated figure fails (a calibration making the shorter answer win is refused the same way)."""
    from tests.test_quickstart import write_user_files

    write_user_files(tmp_path)
    url = f"sqlite:///{tmp_path / 'q.db'}"
    base = ("--database-url", url)
    for kind in ("ratings", "labels", "pairs"):
        r = run_cli(*base, "import", "jsonl", str(tmp_path / f"{kind}.jsonl"), "--kind", kind, "--task-family", "support")
        assert r.exit_code == 0, r.stderr
    r = run_cli(*base, "fit", "--task-family", "support", "--judge", "my-judge", "--length-unit", "words",
                "--bootstrap", "200", "--format", "json")
    assert r.exit_code == 0, r.stderr
    fit = json.loads(r.stdout)
    assert 0.6 < fit["gamma"] < 1.2 and fit["identification"]["identified"] is True
    assert fit["verbosity_win_rate_raw"] > 0.75 and 0.45 <= fit["verbosity_win_rate_calibrated"] <= 0.6
    assert fit["selection"]["decision"] == "calibrate"
    gate = ("check", "--judge", "my-judge", "--max-verbosity-winrate", "0.6", "--min-agreement-gain", "-0.05")
    r = run_cli(*base, *gate, "--format", "json")
    assert r.exit_code == 0, r.stdout
    vwr = fit["verbosity_win_rate_calibrated"]
    r = run_cli(*base, *gate, "--min-verbosity-winrate", f"{vwr + 0.01:.3f}")
    assert r.exit_code == 1 and "overcorrects" in r.stderr


# ----------------------------------------------------------------------------- break-it findings
def test_perfectly_separated_labels_are_not_identified():
    """Labels that the calibrated scores separate perfectly: the loss goes to ~0, a range of gamma
    fits equally and bootstrap refits never leave the optimum (zero-width CIs): not identified."""
    rng = np.random.default_rng(5)
    n = 40
    la, lb = rng.integers(20, 60, n).astype(float), rng.integers(200, 400, n).astype(float)
    sa, sb = rng.integers(4, 7, n).astype(float), rng.integers(6, 9, n).astype(float)
    d = PairData(item_ids=[f"s{i:03d}" for i in range(n)], score_a=sa, score_b=sb, len_a=la, len_b=lb,
                 outcome=np.ones(n))  # the shorter answer always wins, the judge always prefers the longer
    ev = evaluate_pairwise(d, scale=(0, 10), n_bootstrap=100, seed=0, nested=False)
    ident = ev["identification"]
    assert ident["identified"] is False
    assert any("separate the expert labels perfectly" in r for r in ident["reasons"]), ident["reasons"]
    assert verdict(ev)["code"] != "helps"


def _ev_helps(decision):
    """An evaluation whose polylog CV gain CI clears zero, with a nested decision."""
    return {"kind": "pairwise", "fitted": True,
            "methods": {"raw": {"agreement_cv": 0.7}, "polylog": {"agreement_cv": 0.8,
                                                                    "agreement_cv_gain_ci": [0.05, 0.15]}},
            "selection": {"decision": decision, "reason": "the selection procedure's gain does not clear zero"},
            "identification": {"identified": True, "reasons": []}}


def test_no_badge_the_nested_advice_does_not_back():
    assert verdict(_ev_helps("calibrate"))["code"] == "helps"
    v = verdict(_ev_helps("keep raw"))
    assert v["code"] == "no measurable effect" and "advises keep raw" in v["text"]


def test_a_transfer_carries_the_source_identification():
    ev = {"kind": "transfer", "fitted": True, "source_family": "A", "target_family": "B",
          "methods": {"raw": {"agreement": 0.7}, "polylog": {"agreement": 0.8, "gain_ci": [0.05, 0.15]}},
          "recommended": {"name": "raw", "decision": "keep raw", "reason": "r"},
          "identification": {"identified": False, "reasons": ["one item decides the optimum"]}}
    v = verdict(ev)
    assert v["code"] == "not identified" and "one item decides the optimum" in v["text"]
    ev["methods"]["polylog"]["gain_ci"] = [-0.2, -0.05]
    assert verdict(ev)["code"] == "hurts"  # a hurting transfer stays first and loud


def test_a_candidate_that_reverses_the_judge_is_not_recommended():
    """Issue 18 break-it: on LLMBar Adversarial_GPTInst the LC GLM wins the nested selection for
    ChatGPT (+40.8 points over raw) with theta -0.060: the judge's score counts against the
    answer it prefers, the gain is length alone. Keep raw, with that reason; on
    Adversarial_Neighbor (theta +0.103) the same method is recommended."""
    from test_calibrate_evaluate import llmbar_pairs

    from judgecal.calibrate.evaluate import evaluate_pairwise

    sel = evaluate_pairwise(llmbar_pairs("Adversarial_GPTInst", "ChatGPT"), scale=(0, 9), n_bootstrap=200,
                            seed=0)["selection"]
    assert sel["decision"] == "keep raw" and sel["recommended"] == "raw" and sel["reverses_judge"] is True
    assert sel["candidate"] == "lc_glm[length]" and sel["candidate_theta"] == pytest.approx(-0.0595, abs=5e-4)
    assert sel["reason"].startswith("lc_glm[length] gives the judge's score a negative weight (theta -0.060")
    assert sel["candidate_gain_ci"][0] > 0  # it would have passed the CI rule alone
    sel = evaluate_pairwise(llmbar_pairs("Adversarial_Neighbor", "ChatGPT"), scale=(0, 9), n_bootstrap=200,
                            seed=0)["selection"]
    assert sel["decision"] == "calibrate" and sel["reverses_judge"] is False
    assert sel["candidate_theta"] == pytest.approx(0.1032, abs=5e-4)
