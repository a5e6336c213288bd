"""Issue 22 item 3: rating summaries (greedy, mean, risk-averse) of stored judgment distributions.

Known answers on hand-made distributions; the out-of-sample comparison on arrays; fit / report /
check / both leaderboards with ``--summary`` on SQLite and PostgreSQL (ratings with distributions
imported through the generic format), the refusals (ratings without a distribution, a calibration
fitted on another summary); and one end-to-end run with the real local model on a small LLMBar
slice (``rate --local``)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from judgecal.calibrate.baselines import FitContext
from judgecal.calibrate.data import PairData
from judgecal.calibrate.summaries import (compare_summaries, label, moments, pair_summary, point_summary,
                                          rating_value, tie_rate)
from judgecal.errors import UsageError

# hand-made distribution on a 1-4 scale: mean = .2*1 + .5*3 + .3*4 = 2.9;
# variance = .2*1.9^2 + .5*.1^2 + .3*1.1^2 = .722 + .005 + .363 = 1.09
DIST = {"1": 0.2, "2": 0.0, "3": 0.5, "4": 0.3}


def test_point_summaries_known_answers():
    mu, sd = moments(DIST)
    assert mu == pytest.approx(2.9, abs=1e-12)
    assert sd == pytest.approx(math.sqrt(1.09), abs=1e-12)
    assert point_summary(DIST, "mean") == pytest.approx(2.9, abs=1e-12)
    assert point_summary(DIST, "risk-averse") == pytest.approx(2.9 - math.sqrt(1.09), abs=1e-12)  # 1.8560
    assert point_summary(DIST, "risk-averse", 1.5) == pytest.approx(2.9 - 1.5 * math.sqrt(1.09), abs=1e-12)  # 1.3340
    assert point_summary(DIST, "risk-averse", 2.0) == 1.0  # 0.812 is below the scale: floored at its lowest value
    # split between the ends of a 1-10 scale: mean 5.5, sd 4.5; mean - 1.5 sd = -1.25 is floored at the scale's 1
    assert point_summary({"1": 0.5, "10": 0.5}, "risk-averse", 1.5) == 1.0
    assert point_summary({"1": 0.5, "10": 0.5}, "risk-averse", 0.5) == pytest.approx(5.5 - 2.25)
    # a certain verdict has no spread: every summary is the verdict
    assert point_summary({"7": 1.0, "8": 0.0}, "risk-averse") == pytest.approx(7.0)
    with pytest.raises(ValueError):
        point_summary(DIST, "greedy")


def test_pair_summaries_known_answers():
    # credit X of a: 1 (p .6), 0.5 (tie, p .2), 0 (p .2): mean .7; var .6*.09 + .2*.04 + .2*.49 = .16, sd .4
    probs = {"a": 0.6, "b": 0.2, "tie": 0.2}
    assert pair_summary(probs, "mean") == pytest.approx(0.7)
    assert pair_summary(probs, "risk-averse") == pytest.approx(0.3)
    assert pair_summary(probs, "risk-averse", 0.5) == pytest.approx(0.5)
    assert pair_summary({"a": 0.1, "b": 0.9, "tie": 0.0}, "risk-averse") == 0.0  # clipped at 0


def test_rating_value_and_labels():
    assert rating_value(7.0, None, "greedy") == 7.0
    assert rating_value(7.0, None, "mean") is None  # never silently the greedy score
    assert rating_value(7.0, {"probs": DIST}, "mean") == pytest.approx(2.9)
    assert rating_value(1.0, {"probs": {"a": 0.6, "b": 0.2, "tie": 0.2}}, "mean", pairwise=True) == pytest.approx(0.7)
    assert label("risk-averse", 1.5) == "risk-averse (k=1.5)" and label("mean") == "mean"
    assert tie_rate([1, 2, 3, 3], [1, 3, 3, 2]) == 0.5


def _pairs(score_a, score_b, n):
    rng = np.random.default_rng(3)
    return PairData(item_ids=[f"i{k}" for k in range(n)], score_a=score_a, score_b=score_b,
                    len_a=rng.integers(20, 400, n), len_b=rng.integers(20, 400, n), outcome=np.ones(n))


def test_compare_summaries_recommends_a_summary_only_when_its_gain_clears_zero():
    n = 40
    # greedy ties every pair (agreement 1/2); the mean puts the expert's choice (a) higher in every pair
    greedy = _pairs(np.full(n, 5.0), np.full(n, 5.0), n)
    mean = _pairs(np.full(n, 5.4), np.full(n, 5.1), n)
    ctx = FitContext(l_ref=100.0, scale=(1.0, 10.0))
    out = compare_summaries({"greedy": greedy, "mean": mean, "risk-averse": greedy}, kind="pairwise", ctx=ctx,
                            folds=5, seed=0, n_bootstrap=200)
    g, m, r = (out["summaries"][k] for k in ("greedy", "mean", "risk-averse"))
    assert g["tie_rate"] == 1.0 and m["tie_rate"] == 0.0
    assert g["figure_cv"] == 0.5 and m["figure_cv"] == 1.0
    assert m["gain_cv"] == pytest.approx(0.5) and m["gain_cv_ci"] == [0.5, 0.5]
    assert r["gain_cv"] == 0.0 and r["gain_cv_ci"] == [0.0, 0.0]  # identical to greedy: no gain, not recommended
    assert out["recommended"] == "mean" and "CI above zero" in out["reason"]
    # the same but the mean equal to greedy: keep greedy
    out = compare_summaries({"greedy": greedy, "mean": greedy}, kind="pairwise", ctx=ctx, folds=5, seed=0, n_bootstrap=200)
    assert out["recommended"] == "greedy" and out["reason"].startswith("keep greedy")
    with pytest.raises(UsageError, match="same labelled rows"):
        compare_summaries({"greedy": greedy, "mean": _pairs(np.ones(n - 1), np.ones(n - 1), n - 1)}, kind="pairwise",
                          ctx=ctx)


# ----------------------------------------------------------------------------- through the CLI, both dialects
N_ITEMS = 24


def _dist(center: int) -> dict:
    """A distribution on 1-10 whose greedy verdict is 5 but whose mass leans towards ``center``."""
    p = {str(v): 0.0 for v in range(1, 11)}
    p["5"] = 0.5
    p[str(center)] = p[str(center)] + 0.3
    p["4"] += 0.2
    return {"probs": p, "outside": 0.01, "source": "forward"}


def _write_data(tmp_path, family="t/sum"):
    """Responses, ratings (judge 'dist' with distributions, judge 'plain' without) and expert
    labels: every pair is a greedy tie (5 and 5); the expert-preferred answer's distribution leans
    up (mean 5.3 + ...), the other's down."""
    ratings, labels = [], []
    for i in range(N_ITEMS):
        prompt = f"Question {i}: name a prime number above {10 * i}."
        good, bad = f"A prime above {10 * i} is" + " fine" * (i % 5 + 1), "I do not know" + " really" * (i % 7 + 3)
        for model, text, center in (("m_good", good, 9), ("m_bad", bad, 2)):
            for judge, dist in (("dist", _dist(center)), ("plain", None)):
                r = {"task_family": family, "prompt": prompt, "model": model, "response": text, "judge": judge,
                     "scale_min": 1, "scale_max": 10, "score": 5}
                if dist is not None:
                    r["distribution"] = dist
                ratings.append(r)
        labels.append({"task_family": family, "prompt": prompt, "model_a": "m_good", "response_a": good,
                       "model_b": "m_bad", "response_b": bad, "preference": "a"})
    tag = family.replace("/", "_")
    rp, lp = tmp_path / f"ratings_{tag}.jsonl", tmp_path / f"labels_{tag}.jsonl"
    rp.write_text("".join(json.dumps(r) + "\n" for r in ratings), encoding="utf-8")
    lp.write_text("".join(json.dumps(r) + "\n" for r in labels), encoding="utf-8")
    return rp, lp


def _fit(run_cli, url, *extra):
    return run_cli("--database-url", url, "fit", "--task-family", "t/sum", "--length-unit", "words", "--bootstrap", "100",
                   "--folds", "3", "--no-nested", *extra)


def test_summaries_through_fit_report_check_and_boards(db_url, tmp_path, run_cli):
    rp, lp = _write_data(tmp_path)
    for kind, path in (("ratings", rp), ("labels", lp)):
        r = run_cli("--database-url", db_url, "import", "jsonl", str(path), "--kind", kind)
        assert r.exit_code == 0, r
    # greedy fit of the distribution judge: the comparison runs and recommends the mean
    r = _fit(run_cli, db_url, "--judge", "dist", "--format", "json")
    assert r.exit_code == 0, r
    row = json.loads(r.stdout)
    comp = row["summaries"]
    assert row["summary"] == "greedy" and comp["available"] is True
    assert comp["summaries"]["greedy"]["tie_rate"] == 1.0 and comp["summaries"]["greedy"]["figure_cv"] == 0.5
    assert comp["summaries"]["mean"]["tie_rate"] == 0.0 and comp["summaries"]["mean"]["figure_cv"] == 1.0
    # risk-averse: both answers have the same spread here, so it orders them as the mean does
    assert comp["summaries"]["risk-averse"]["figure_cv"] == 1.0
    assert comp["recommended"] in ("mean", "risk-averse") and comp["summaries"]["mean"]["gain_cv_ci"][0] > 0
    greedy_id = row["id"]
    # a mean fit is stored with its summary
    r = _fit(run_cli, db_url, "--judge", "dist", "--summary", "mean")
    assert r.exit_code == 0, r
    assert "fitted on the mean summary" in r.stdout and "rating summaries out of sample" in r.stdout
    assert "ties 100.0%" in r.stdout and "ties 0.0%" in r.stdout
    # the report names the summary, the tie rates and the out-of-sample figures in Markdown and JSON
    r = run_cli("--database-url", db_url, "report", "--judge", "dist", "--format", "markdown")
    assert r.exit_code == 0, r
    assert "rating summaries out of sample (3-fold CV, 24 labelled pairs" in r.stdout
    assert "greedy: ties 100.0%, raw 50.0%" in r.stdout and "rating summary recommended:" in r.stdout
    rep = json.loads(run_cli("--database-url", db_url, "report", "--judge", "dist", "--format", "json").stdout)
    assert rep["entries"][0]["rating_summary"] == "mean"
    # report --summary greedy refuses the newest (mean) calibration; an explicit greedy id is fine
    r = run_cli("--database-url", db_url, "report", "--judge", "dist", "--summary", "greedy")
    assert r.exit_code != 0 and "fitted on the mean rating summary, not greedy" in r.output
    assert "Traceback" not in r.output
    # boards and check: the newest calibration was fitted on the mean, so greedy is refused
    for cmd in (("leaderboard", "--judge", "dist"), ("check", "--judge", "dist")):
        r = run_cli("--database-url", db_url, *cmd)
        assert r.exit_code == 2 and "was fitted on the mean rating summary, not greedy: pass --summary mean" in r.output, r
        assert "Traceback" not in r.output
    r = run_cli("--database-url", db_url, "leaderboard", "--judge", "dist", "--summary", "mean", "--format", "json",
                "--bootstrap", "0", "--min-ratings", "0")
    assert r.exit_code == 0, r
    board = json.loads(r.stdout)
    assert board["summary"] == "mean" and any(n.startswith("rating summary: mean") for n in board["notes"])
    means = {row["model"]: row["mean_raw"] for row in board["rows"]}
    # good: .5*5 + .3*9 + .2*4 = 6.0; bad: .5*5 + .3*2 + .2*4 = 3.9 (greedy: both 5)
    assert means == {"m_good": pytest.approx(6.0), "m_bad": pytest.approx(3.9)}
    r = run_cli("--database-url", db_url, "leaderboard", "--judge", "dist", "--calibration", str(greedy_id),
                "--format", "json", "--bootstrap", "0")
    assert r.exit_code == 0, r
    assert {row["model"]: row["mean_raw"] for row in json.loads(r.stdout)["rows"]} == {"m_good": 5.0, "m_bad": 5.0}
    r = run_cli("--database-url", db_url, "check", "--judge", "dist", "--summary", "mean", "--format", "json")
    assert r.exit_code in (0, 1), r
    checks = [c for c in json.loads(r.stdout)["checks"] if c["check"] == "rating_summary"]
    assert checks and "fitted on the mean summary" in checks[0]["message"]
    # risk-averse with another k than the fit's is refused too
    r = run_cli("--database-url", db_url, "leaderboard", "--judge", "dist", "--summary", "risk-averse", "--risk-k", "2")
    assert r.exit_code == 2 and "risk-averse (k=2)" in r.output


def test_transfer_reads_the_summary_the_calibration_was_fitted_on(db_url, tmp_path, run_cli):
    """A calibration fitted on the mean of t/sum applied to t/other (same construction): the
    target is read as means (raw agreement 1.0: the means order every pair as the expert does),
    not as greedy scores (0.5: every pair a tie), in check and in the report; a greedy fit's
    transfer reads greedy scores; a mean fit's transfer to a family without distributions is
    refused with the count."""
    for fam in ("t/sum", "t/other"):
        for kind, path in zip(("ratings", "labels"), _write_data(tmp_path, fam)):
            assert run_cli("--database-url", db_url, "import", "jsonl", str(path), "--kind", kind).exit_code == 0
    r = _fit(run_cli, db_url, "--judge", "dist", "--summary", "mean", "--format", "json")
    assert r.exit_code == 0, r
    mean_id = json.loads(r.stdout)["id"]
    r = run_cli("--database-url", db_url, "report", "--calibration", str(mean_id), "--task-family", "t/other",
                "--summary", "mean", "--bootstrap", "100", "--format", "json")
    assert r.exit_code == 0, r
    (entry,) = [e for e in json.loads(r.stdout)["entries"] if e["kind"] == "transfer"]
    assert entry["rating_summary"] == "mean" and entry["source_family"] == "t/sum" and entry["n"] == 24
    assert entry["methods"]["raw"]["agreement"] == 1.0  # greedy scores would tie every pair: 0.5
    assert "rating summary: this calibration is fitted on the mean summary" in entry["notes"]
    r = run_cli("--database-url", db_url, "report", "--calibration", str(mean_id), "--task-family", "t/other",
                "--summary", "mean", "--bootstrap", "100", "--format", "markdown")
    assert r.exit_code == 0 and "fitted on the mean summary" in r.stdout, r
    r = run_cli("--database-url", db_url, "check", "--calibration", str(mean_id), "--task-family", "t/sum",
                "--task-family", "t/other", "--summary", "mean", "--format", "json")
    assert r.exit_code in (0, 1), r
    (tr,) = [c for c in json.loads(r.stdout)["checks"] if c["check"] == "transfer"]
    assert tr["task_family"] == "t/other" and "Traceback" not in r.output
    # the same through the view: the target's raw agreement under the mean, and under greedy for a greedy fit
    from judgecal.views.fitting import load_calibrations, transfer_evaluation

    def transfer(cid):
        ((row, _, _),) = load_calibrations(None, None, [cid], db_url)
        return transfer_evaluation(row, "t/sum", "dist", "t/other", n_bootstrap=100, url=db_url)

    ev = transfer(mean_id)
    assert ev["summary"] == "mean" and ev["methods"]["raw"]["agreement"] == 1.0
    greedy_id = json.loads(_fit(run_cli, db_url, "--judge", "dist", "--format", "json").stdout)["id"]
    ev = transfer(greedy_id)
    assert ev["summary"] == "greedy" and ev["methods"]["raw"]["agreement"] == 0.5
    # a target whose ratings have no distribution: the plain judge's fit on the mean is refused at the fit
    # already; a mean fit applied to a family the dist judge rated without distributions is refused
    rows = [json.loads(x) for x in (tmp_path / "ratings_t_other.jsonl").read_text().splitlines()]
    for x in rows:
        x["task_family"] = "t/nodist"
        x.pop("distribution", None)
    lab = [json.loads(x) for x in (tmp_path / "labels_t_other.jsonl").read_text().splitlines()]
    for x in lab:
        x["task_family"] = "t/nodist"
    (tmp_path / "nd_r.jsonl").write_text("".join(json.dumps(x) + "\n" for x in rows))
    (tmp_path / "nd_l.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lab))
    for kind, name in (("ratings", "nd_r.jsonl"), ("labels", "nd_l.jsonl")):
        assert run_cli("--database-url", db_url, "import", "jsonl", str(tmp_path / name), "--kind", kind).exit_code == 0
    r = run_cli("--database-url", db_url, "check", "--calibration", str(mean_id), "--task-family", "t/sum",
                "--task-family", "t/nodist", "--summary", "mean")
    assert r.exit_code == 2 and "--summary mean: 48 of 48 ok ratings of judge 'dist' in 't/nodist'" in r.output, r
    assert "Traceback" not in r.output


def test_summary_refused_without_distributions(db_url, tmp_path, run_cli):
    rp, lp = _write_data(tmp_path)
    for kind, path in (("ratings", rp), ("labels", lp)):
        assert run_cli("--database-url", db_url, "import", "jsonl", str(path), "--kind", kind).exit_code == 0
    msg = "--summary mean: 48 of 48 ok ratings"
    r = _fit(run_cli, db_url, "--judge", "plain", "--summary", "mean")
    assert r.exit_code == 2 and msg in r.output and "have no stored distribution" in r.output, r
    r = run_cli("--database-url", db_url, "leaderboard", "--judge", "plain", "--summary", "risk-averse")
    assert r.exit_code == 2 and "--summary risk-averse: 48 of 48 ok ratings of judge 'plain'" in r.output, r
    assert "Traceback" not in r.output
    # greedy needs none; the comparison is not run and says nothing of distributions it never had
    r = _fit(run_cli, db_url, "--judge", "plain", "--format", "json")
    assert r.exit_code == 0, r
    comp = json.loads(r.stdout)["summaries"]
    assert comp["available"] is False and comp["n_without_distribution"] == 48 and comp["n_ok"] == 48
    # the win-rate board refuses verdicts without a distribution (none stored here: no verdict at all)
    r = run_cli("--database-url", db_url, "leaderboard", "--baseline", "m_bad", "--judge", "plain", "--summary", "mean")
    assert r.exit_code != 0 and "Traceback" not in r.output


def test_winrate_board_summaries(db_url, tmp_path, run_cli):
    """Pairwise verdicts with a distribution: the model's credit under each summary. Every verdict
    gives the model (side a) P .6, the baseline P .3, a tie P .1: stored preference = mean credit
    .6 + .1/2 = .65; risk-averse: sd of the credit = sqrt(.6*.35^2 + .1*.15^2 + .3*.65^2) = .45,
    so .65 - .45 = .20."""
    rows = []
    for i in range(30):
        prompt = f"Task {i}: say something about the number {i}."
        for sample, dist in ((0, {"probs": {"a": 0.6, "b": 0.3, "tie": 0.1}, "outside": 0.0, "source": "forward"}),):
            rows.append({"task_family": "t/wr", "prompt": prompt, "model_a": "m1", "response_a": f"Answer {i} " + "x " * (i + 1),
                         "model_b": "base", "response_b": f"Base {i}", "judge": "pj", "preference": 0.65,
                         "position": "ab", "baseline": "b", "sample_index": sample, "distribution": dist})
    # a second judge without distributions (as AlpacaEval's annotations are imported)
    rows += [{**r, "judge": "plain", "distribution": None} for r in rows]
    for r in rows:
        if r["distribution"] is None:
            del r["distribution"]
    path = tmp_path / "verdicts.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    r = run_cli("--database-url", db_url, "import", "jsonl", str(path), "--kind", "verdicts")
    assert r.exit_code == 0, r
    rates = {}
    for summary in ("greedy", "mean", "risk-averse"):
        r = run_cli("--database-url", db_url, "leaderboard", "--baseline", "base", "--judge", "pj", "--summary", summary,
                    "--bootstrap", "0", "--format", "json")
        assert r.exit_code == 0, r
        board = json.loads(r.stdout)
        rates[summary] = {row["model"]: row["win_rate"] for row in board["rows"]}["m1"]
        assert board["summary"] == label(summary)
        assert any(n.startswith("rating summary:") for n in board["notes"]) == (summary != "greedy")
    assert rates["greedy"] == pytest.approx(rates["mean"]) and rates["risk-averse"] == pytest.approx(rates["mean"] * 0.2 / 0.65)
    r = run_cli("--database-url", db_url, "leaderboard", "--baseline", "base", "--judge", "plain", "--summary", "mean")
    assert r.exit_code == 2 and "--summary mean: 30 of 30 ok verdicts (pairwise verdicts) of judge 'plain'" in r.output, r
    assert "Traceback" not in r.output


LOCAL_MODEL = __import__("judgecal.config", fromlist=["default_model_dir"]).default_model_dir()


@pytest.mark.model
@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.skipif(not (LOCAL_MODEL / "config.json").is_file(), reason=f"model folder {LOCAL_MODEL} is absent: run `make model`")
def test_local_model_end_to_end(db_url, data_dir, run_cli):
    """The real SmolLM2-135M judge (rate --local) on the first 10 LLMBar Natural items: fit,
    report and the score board accept --summary and print out-of-sample figures and tie rates."""
    r = run_cli("--database-url", db_url, "import", "llmbar", str(data_dir / "llmbar" / "Natural"))
    assert r.exit_code == 0, r
    r = run_cli("--database-url", db_url, "rate", "--local", "smollm2", "--judge-name", "local", "--task-family",
                "llmbar/Natural", "--items", "10", "--prompt", "pointwise_fewshot_v1", "--format", "json")
    assert r.exit_code == 0, r
    r = run_cli("--database-url", db_url, "fit", "--task-family", "llmbar/Natural", "--judge", "local", "--summary", "mean",
                "--length-unit", "words", "--folds", "2", "--bootstrap", "50", "--no-nested", "--format", "json")
    assert r.exit_code == 0, r
    row = json.loads(r.stdout)
    comp = row["summaries"]
    assert row["summary"] == "mean" and comp["available"] and comp["n"] == 10 and comp["folds"] == 2
    g, m = comp["summaries"]["greedy"], comp["summaries"]["mean"]
    assert 0.0 <= g["tie_rate"] <= 1.0 and m["tie_rate"] <= g["tie_rate"]  # a mean ties no more often than greedy
    assert g["figure_cv"] is not None and m["gain_cv"] == pytest.approx(m["figure_cv"] - g["figure_cv"])
    r = run_cli("--database-url", db_url, "report", "--judge", "local", "--format", "markdown")
    assert r.exit_code == 0, r
    assert "rating summaries out of sample (2-fold CV, 10 labelled pairs" in r.stdout and "greedy: ties" in r.stdout
    r = run_cli("--database-url", db_url, "leaderboard", "--judge", "local", "--summary", "mean", "--bootstrap", "0",
                "--min-ratings", "0", "--format", "json")
    assert r.exit_code == 0, r
    assert any(n.startswith("rating summary: mean") for n in json.loads(r.stdout)["notes"])
    r = run_cli("--database-url", db_url, "leaderboard", "--judge", "local", "--bootstrap", "0")
    assert r.exit_code == 2 and "fitted on the mean rating summary, not greedy" in r.output
