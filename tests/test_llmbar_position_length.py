"""Length and position together (issue 19 item 4) on the real LLMBar repository layout
(../shared/data/llmbar_repo): one order or both, raw or with a cross-validated length
calibration of the verdicts, against the experts, with the keep-raw rule of the nested
selection. One import per module (about 5 s) and one report per module (about 10 s)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

SETS = {"llmbar/Natural": "Natural", "llmbar/Adversarial_Neighbor": "Adversarial/Neighbor",
        "llmbar/Adversarial_GPTInst": "Adversarial/GPTInst"}


@pytest.fixture(scope="module")
def url(repo, tmp_path_factory) -> str:
    from judgecal.views import importing

    u = f"sqlite:///{tmp_path_factory.mktemp('llmbar_lp') / 'repo.db'}"
    importing.import_llmbar(repo, url=u)
    return u


@pytest.fixture(scope="module")
def gpt4(url) -> dict:
    """{family: pairwise-section entry} of GPT-4/Vanilla with length and position (report JSON)."""
    from click.testing import CliRunner

    from judgecal.cli import cli

    r = CliRunner().invoke(cli, ["--database-url", url, "report", "--judge", "GPT-4/Vanilla", "--length-position",
                                 "--format", "json"])
    assert r.exit_code == 0, r.output
    return {e["task_family"]: e for e in json.loads(r.stdout)["pairwise_judges"]}


def _records(repo: Path, family: str, judge: str = "GPT-4", protocol: str = "Vanilla") -> list[dict]:
    d = repo / "Dataset" / "LLMBar" / SETS[family]
    return json.loads((d / "evaluators" / judge / protocol / "result.json").read_text())


def test_orders_by_hand_from_the_repository_files(repo, gpt4):
    """Raw candidates equal LLMBar's own verdicts counted by hand from result.json: a first
    (swap = False), b first (swap = True), both orders (1 both right, 1/2 one right, 0 none)."""
    for family, e in gpt4.items():
        recs = _records(repo, family)
        ab = np.array([r["results"][-1]["swap = False"]["winner"] == str(r["label"]) for r in recs], dtype=float)
        ba = np.array([r["results"][-1]["swap = True"]["winner"] == str(r["label"]) for r in recs], dtype=float)
        lp = e["length_and_position"]
        assert lp["n_pairs"] == len(recs) and lp["n_left_out"] == 0 and lp["orders"] == ["ab", "ba", "combined"]
        c = lp["candidates"]
        assert c["raw"]["agreement"] == pytest.approx(ab.mean())
        assert c["raw[ba]"]["agreement"] == pytest.approx(ba.mean())
        assert c["raw[combined]"]["agreement"] == pytest.approx(((ab + ba) / 2).mean())
        assert c["raw[combined]"]["gain"] == pytest.approx(((ab + ba) / 2 - ab).mean())
        # the plain judge out of sample is the position section's "a first" agreement
        assert c["raw"]["agreement"] == e["expert_agreement"]["ab"]["agreement"]
        assert c["raw[combined]"]["agreement"] == pytest.approx(e["expert_agreement"]["combined"]["agreement"])
    nat = gpt4["llmbar/Natural"]["length_and_position"]["candidates"]
    assert (nat["raw"]["agreement"], nat["raw[ba]"]["agreement"], nat["raw[combined]"]["agreement"]) == \
        pytest.approx((0.95, 0.96, 0.955))  # statistics.json: 95 and 96 correct of 100


def test_shorter_answer_reference_by_hand(repo, gpt4):
    """The no-judge rule "the shorter answer is better" counted from dataset.json (characters):
    the experts prefer the shorter answer in most adversarial pairs, not in Natural's."""
    for family, e in gpt4.items():
        data = json.loads((repo / "Dataset" / "LLMBar" / SETS[family] / "dataset.json").read_text())
        credit = [0.5 if len(d["output_1"]) == len(d["output_2"]) else
                  float((len(d["output_1"]) < len(d["output_2"])) == (d["label"] == 1)) for d in data]
        assert e["length_and_position"]["shorter_answer"]["agreement"] == pytest.approx(np.mean(credit))
    assert gpt4["llmbar/Natural"]["length_and_position"]["shorter_answer"]["agreement"] == pytest.approx(0.435)
    assert gpt4["llmbar/Adversarial_Neighbor"]["length_and_position"]["shorter_answer"]["agreement"] == \
        pytest.approx(118 / 134)


def test_keep_raw_where_the_ci_contains_zero(gpt4):
    """Natural and GPTInst: a length calibration of both orders looks better, but the paired CI
    of its out-of-sample gain over the plain judge does not clear zero: keep raw."""
    for family in ("llmbar/Natural", "llmbar/Adversarial_GPTInst"):
        lp = gpt4[family]["length_and_position"]
        sel = lp["selection"]
        assert sel["decision"] == "keep raw" and sel["recommended"] == "raw", family
        assert sel["candidate"] != "raw" and sel["candidate_gain"] > 0
        lo = min(sel["procedure_gain_ci"][0], sel["candidate_gain_ci"][0])
        assert lo <= 0, (family, sel["procedure_gain_ci"], sel["candidate_gain_ci"])
        assert sel["nested"] == lp["candidates"]["raw"]["agreement"] and sel["nested_gain"] == 0.0
        assert not any(t["beats_both"] for t in lp["together"].values())
    sel = gpt4["llmbar/Natural"]["length_and_position"]["selection"]
    assert sel["candidate"] == "polylog[combined]" and sel["nested"] == 0.95
    assert sel["candidate_nested"] == gpt4["llmbar/Natural"]["length_and_position"]["candidates"][
        "polylog[combined]"]["agreement"] == 0.97


def test_neighbor_calibrate_and_together(gpt4):
    """Adversarial_Neighbor: the LC GLM on both orders is recommended (paired CI above zero);
    polylog on both orders beats both orders alone and a first + polylog (both CIs above zero)."""
    lp = gpt4["llmbar/Adversarial_Neighbor"]["length_and_position"]
    sel = lp["selection"]
    assert sel["decision"] == "calibrate" and sel["recommended"] == "lc_glm[combined]"
    assert sel["nested_gain_ci"][0] > 0 and sel["procedure_gain_ci"][0] > 0
    assert sel["nested"] == lp["candidates"]["lc_glm[combined]"]["agreement"] == pytest.approx(126 / 134)
    fit = lp["recommended_fit"]
    assert fit["name"] == "lc_glm[combined]" and fit["params"]["theta"] > 0 and fit["params"]["phi"] < 0
    assert fit["reverses_judge"] is False  # GPT-4's verdicts kept; the shorter answer favoured
    pl = lp["together"]["polylog"]
    assert pl["beats_both"] is True
    assert pl["vs_position_alone"]["against"] == "raw[combined]" and pl["vs_position_alone"]["gain_ci"][0] > 0
    assert pl["vs_length_alone"]["against"] == "polylog[ab]" and pl["vs_length_alone"]["gain_ci"][0] > 0
    assert pl["vs_position_alone"]["gain"] == pytest.approx(
        lp["candidates"]["polylog[combined]"]["agreement"] - lp["candidates"]["raw[combined]"]["agreement"])
    assert lp["together"]["lc_glm"]["beats_both"] is False  # no better than a first + LC GLM


def test_missing_orders_left_out_and_counted(url):
    """PaLM2/Vanilla on Natural: 2 of 100 labelled pairs lack a usable verdict in one order."""
    from judgecal.db import positions as pq
    from judgecal.db import queries as q
    from judgecal.db.engine import get_engine, session_scope
    from judgecal.views.pairwise_report import length_position_entry

    engine = get_engine(url)
    with session_scope(engine) as s:
        pairs = pq.labelled_verdict_pairs(s, q.family_id(s, "llmbar/Natural"), q.judge_by_name(s, "PaLM2/Vanilla").id)
    engine.dispose()
    lp = length_position_entry(pairs, n_bootstrap=0)
    assert (lp["n_pairs"], lp["n_left_out"]) == (98, 2)
    sel = lp["selection"]  # no CI: the evidence is missing, keep raw
    assert sel["decision"] == "keep raw" and ("no confidence interval" in sel["reason"] or sel["candidate"] == "raw")
    assert length_position_entry(pairs[:9]) is None  # fewer than 2 x 5 items


def test_report_formats_and_flag(url, gpt4, tmp_path):
    from click.testing import CliRunner

    from judgecal.cli import cli

    run = CliRunner().invoke
    base = ["--database-url", url, "report", "--judge", "GPT-4/Vanilla", "--task-family", "llmbar/Natural",
            "--bootstrap", "100"]
    r = run(cli, base + ["--format", "json"])
    assert r.exit_code == 0 and "length_and_position" not in json.loads(r.stdout)["pairwise_judges"][0]
    r = run(cli, base + ["--length-position", "--format", "markdown"])
    assert r.exit_code == 0, r.output
    assert "## Pairwise judges: length and position together" in r.stdout
    assert "| llmbar/Natural | GPT-4/Vanilla | 100 | 0.950 [" in r.stdout and "keep raw: " in r.stdout
    r = run(cli, base + ["--length-position", "--format", "table"], terminal_width=400)
    assert r.exit_code == 0 and "length and position together" in r.stdout
    r = run(cli, base + ["--length-position", "--format", "html", "--out", str(tmp_path), "--no-plots"])
    assert r.exit_code == 0, r.output
    html = (tmp_path / "report.html").read_text()
    assert "<h2>Pairwise judges: length and position together</h2>" in html and "both orders + LC GLM" in html
    assert json.loads((tmp_path / "report.json").read_text())["pairwise_judges"][0]["length_and_position"]["n_pairs"] == 100


def test_soft_average_is_a_candidate_only_where_it_differs():
    """Soft preferences: the soft average differs from the tie combination, so it is a candidate;
    hard verdicts: it is not (it would only repeat the tie combination)."""
    from judgecal.calibrate.position_length import length_and_position

    rng = np.random.default_rng(0)
    n = 30
    outcome = rng.integers(0, 2, n).astype(float)
    ab = np.clip(outcome * 0.6 + rng.uniform(0, 0.4, n), 0, 1)
    ba = np.clip(outcome * 0.2 + rng.uniform(0.3, 0.7, n), 0, 1)
    lens = rng.integers(10, 500, (2, n))
    soft = length_and_position(outcome, ab, ba, lens[0], lens[1], [f"i{k}" for k in range(n)], n_bootstrap=0, folds=2)
    assert soft["orders"] == ["ab", "ba", "combined", "soft"] and "lc_glm[soft]" in soft["candidates"]
    want = ((ab + ba) / 2 > 0.5) == (outcome == 1)  # no exact 0.5 averages here
    assert soft["candidates"]["raw[soft]"]["agreement"] == pytest.approx(want.mean())
    hard = length_and_position(outcome, np.round(ab), np.round(ba), lens[0], lens[1], [f"i{k}" for k in range(n)],
                               n_bootstrap=0, folds=2)
    assert hard["orders"] == ["ab", "ba", "combined"] and hard["selection"]["decision"] == "keep raw"
