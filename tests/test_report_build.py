"""build_report, the verdict, report warnings, and the text and Markdown renderers.

Real data: LLMBar Natural with the real GPT-4 and ChatGPT ratings (word lengths); the raw
expert agreement 0.920 / 0.685 is a fact of the files and must reach every format.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from rich.console import Console

from judgecal.calibrate.data import PointData, VerbosityData
from judgecal.calibrate.evaluate import evaluate_pairwise, evaluate_pointwise, evaluate_verbosity_only
from judgecal.errors import InputError
from judgecal.report.build import (
    build_report,
    fmt_signed,
    fmt_value,
    method_table,
    report_json,
    verdict,
)
from judgecal.report.render_markdown import md_escape, render_markdown
from judgecal.report.render_text import render_table

from test_calibrate_evaluate import llmbar_pairs

N_BOOT = 40


def entry(family, judge, evaluation, cid=1):
    return {"task_family": family, "judge": judge, "calibration_id": cid,
            "created_at": "2025-06-01T12:00:00", "length_unit": "words", "tokenizer": None,
            "evaluation": evaluation}


@pytest.fixture(scope="module")
def natural_entries():
    return [entry("llmbar/Natural", judge, evaluate_pairwise(llmbar_pairs("Natural", judge),
                                                             scale=(0, 9), n_bootstrap=N_BOOT, seed=0), i)
            for i, judge in enumerate(("GPT-4", "ChatGPT"), start=1)]


@pytest.fixture(scope="module")
def natural_report(natural_entries):
    return build_report(natural_entries)


def planted_pointwise(n_items=40, seed=3):
    """Two responses per item; judge = expert mapped to 0-10 + 0.8 ln(L / 120) + noise."""
    rng = np.random.default_rng(seed)
    n = 2 * n_items
    length = rng.lognormal(np.log(120), 0.7, n).round()
    expert = rng.integers(1, 6, n).astype(float)
    judge = np.clip(np.round((expert - 1) * 2.5 + 0.8 * np.log(length / 120) + rng.normal(0, 0.7, n)), 0, 10)
    return PointData(np.repeat(np.arange(n_items), 2), judge, length, expert)


# ----------------------------------------------------------------------------- formatting
def test_formatting_known_answers():
    assert fmt_value(0.92, [0.875, 0.96]) == "0.920 [0.875, 0.960]"
    assert fmt_value(0.685) == "0.685"
    assert fmt_value(None) == "-" and fmt_value(float("nan")) == "-"
    assert fmt_signed(-0.01346, [-0.121, 0.1008]) == "-0.013 [-0.121, +0.101]"
    assert fmt_signed(0.0) == "+0.000"


# ----------------------------------------------------------------------------- real data
def test_report_from_real_llmbar_natural(natural_report, natural_entries):
    rep = natural_report
    text = report_json(rep)
    back = json.loads(text)  # plain JSON, no NaN (allow_nan=False inside report_json)
    assert back == rep and back["schema"] == "judgecal.report/1" and back["n_entries"] == 2
    gpt4, chatgpt = back["entries"]
    assert (gpt4["judge"], chatgpt["judge"]) == ("GPT-4", "ChatGPT")
    assert gpt4["methods"]["raw"]["agreement"] == pytest.approx(0.920)
    assert chatgpt["methods"]["raw"]["agreement"] == pytest.approx(0.685)
    assert chatgpt["methods"]["raw"]["agreement_cv"] == pytest.approx(0.685)  # raw: nothing to fit
    assert list(gpt4["methods"]) == ["raw", "linear", "lowess", "lc_glm", "polylog"]
    assert '"points"' not in text and '"score_raw"' not in text  # per-response data stays out of the report
    for e, src in zip(back["entries"], natural_entries):
        ev = src["evaluation"]
        assert e["n"] == 100 and e["n_items"] == 100 and e["l_ref"] == 23.0
        assert e["params"]["gamma"] == ev["params"]["gamma"]
        assert e["params"]["gamma_ci"] == ev["params"]["gamma_ci"]
        assert e["params"]["p"] == ev["params"]["p"]
        assert e["expert_length_preference"] == ev["expert_length_preference"]
        withheld = (ev.get("identification") or {}).get("identified") is False
        for name, m in e["methods"].items():
            for key in ("agreement", "agreement_cv", "agreement_ci", "length_preference", "slope"):
                if withheld and name == "polylog" and "_cv" not in key:  # not identified: in-sample withheld
                    assert m[key] is None and m["withheld"].startswith("in-sample figures withheld: not identified")
                else:
                    assert m[key] == ev["methods"][name][key], (name, key)
        assert e["methods"]["lc_glm"]["slope"] is None
        assert e["calibration_id"] in (1, 2) and e["length_unit"] == "words"


def test_verdict_on_real_data_is_the_cv_difference(natural_report):
    for e in natural_report["entries"]:
        v, m = e["verdict"], e["methods"]
        assert v["metric"] == "agreement_cv"
        assert v["raw"] == m["raw"]["agreement_cv"] and v["calibrated"] == m["polylog"]["agreement_cv"]
        assert v["difference"] == pytest.approx(m["polylog"]["agreement_cv"] - m["raw"]["agreement_cv"])
        # the evaluation gives a paired bootstrap CI of the out-of-fold gain: the verdict reads it
        lo, hi = m["polylog"]["agreement_cv_gain_ci"]
        expected = "helps" if lo > 0 else "hurts" if hi < 0 else "no measurable effect"
        if e.get("identification") and e["identification"]["identified"] is False and expected != "hurts":
            expected = "not identified"  # issue 18: never a badge on a fit the labels do not determine
        assert v["code"] == expected
        assert m["polylog"]["agreement_cv_gain"] == pytest.approx(v["difference"])
        assert f"{v['raw']:.3f} raw vs {v['calibrated']:.3f} calibrated" in v["text"]


def test_warnings_are_kept_once_and_scale_overflow_is_flagged(natural_report, natural_entries):
    for e, src in zip(natural_report["entries"], natural_entries):
        for w in src["evaluation"]["warnings"]:
            assert e["warnings"].count(w) == 1
        assert len(e["warnings"]) == len(set(e["warnings"]))
        bound = [w for w in e["warnings"] if "polylog" in w and "bound" in w]
        assert len(bound) == sum(1 for v in src["evaluation"]["params"]["at_bound"].values() if v)
    # the real ChatGPT file holds exactly one score of 10, outside the 0-9 scale we declare
    gpt4, chatgpt = natural_report["entries"]
    assert any(w.startswith("1 raw judge score(s) lie outside the declared scale [0, 9]")
               for w in chatgpt["warnings"])
    assert not any("outside the declared scale" in w for w in gpt4["warnings"])


def test_text_table(natural_report):
    con = Console(record=True, width=220)
    con.print(render_table(natural_report))
    out = con.export_text()
    assert "judgecal report: summary" in out
    assert "0.920 [" in out and "0.685 [" in out
    for head in ("agreement (CV)", "verbosity win-rate", "length pref.", "slope", "raw (no calibration)",
                 "calibration (polylog, fitted)", "experts (gold labels)"):
        assert head in out
    assert "verdict:" in out and "warning: polylog:" in out


def test_markdown(natural_report):
    md = render_markdown(natural_report)
    assert md.startswith("# judgecal report\n") and md.endswith("\n")
    assert "## llmbar/Natural · GPT-4" in md and "## llmbar/Natural · ChatGPT" in md
    raw_rows = [line for line in md.splitlines() if line.startswith("| raw (no calibration) |")]
    assert raw_rows[0].startswith("| raw (no calibration) | 0.920 [") and raw_rows[1].startswith(
        "| raw (no calibration) | 0.685 [")
    # summary: the cross-validated agreements
    # the summary keeps at most 10 columns and names those left out (kind, L_ref, p, best (CV))
    head = next(line for line in md.splitlines() if line.startswith("| task family |"))
    assert head.count("|") - 1 <= 10 and "| n | gamma | raw (CV) |" in head
    assert "- columns not shown (at most 10; the JSON report holds all): kind, L_ref, p, best (CV)" in md
    gpt4 = natural_report["entries"][0]
    assert gpt4["identification"]["identified"] is False  # one item decides gamma on Natural (docs/results.md)
    assert "| llmbar/Natural | GPT-4 | 100 | n.i. |" in md  # gamma withheld, not a number from noise
    assert "| calibration (polylog, fitted) | not identified |" in md
    tables = [line for line in md.splitlines() if line.startswith("| method |")]
    assert len(tables) == 2 and tables[0].count("|") == 7  # 6 columns
    assert "**Verdict (" in md


# ----------------------------------------------------------------------------- escaping
def test_user_text_is_escaped_in_text_and_markdown(natural_entries):
    e = dict(natural_entries[0], task_family="fam|<script>alert(1)</script> [x](http://e.vil)",
             judge="[bold red]judge[/]")
    rep = build_report([e])
    md = render_markdown(rep)
    assert "<script>" not in md and "&lt;script&gt;alert(1)&lt;/script&gt;" in md
    assert "fam\\|&lt;" in md and "\\[x\\](http" in md  # no link can form (issue 23: brackets escaped)
    con = Console(record=True, width=220)
    con.print(render_table(rep))
    assert "[bold red]judge[/]" in con.export_text()  # printed literally, not as rich markup
    assert md_escape("a\nb | `c` *d* #e") == "a b \\| \\`c\\` \\*d\\* \\#e"


# ----------------------------------------------------------------------------- verdict rules
def _ev(raw_cv, cal_cv, raw_ci=None, cal_ci=None, gain_ci=None, kind="pairwise"):
    metric = "spearman_cv" if kind == "pointwise" else "agreement_cv"
    cal = {metric: cal_cv, metric + "_ci": cal_ci}
    if gain_ci is not None:
        cal[metric + "_gain_ci"] = gain_ci
    return {"kind": kind, "fitted": True, "methods": {"raw": {metric: raw_cv, metric + "_ci": raw_ci},
                                                      "polylog": cal}}


def test_verdict_rules_by_hand():
    v = verdict(_ev(0.60, 0.75, [0.55, 0.65], [0.70, 0.80]))
    assert v["code"] == "helps" and v["difference"] == pytest.approx(0.15)
    assert "+15.0 points" in v["text"] and v["rule"].startswith("non-overlapping")
    assert verdict(_ev(0.75, 0.60, [0.70, 0.80], [0.55, 0.65]))["code"] == "hurts"
    assert verdict(_ev(0.60, 0.64, [0.55, 0.66], [0.58, 0.70]))["code"] == "no measurable effect"
    # a paired CI of the difference takes precedence over the two marginal CIs
    v = verdict(_ev(0.60, 0.64, [0.55, 0.66], [0.58, 0.70], gain_ci=[0.01, 0.07]))
    assert v["code"] == "helps" and v["difference_ci"] == [0.01, 0.07] and "[+1.0, +7.0] points" in v["text"]
    assert verdict(_ev(0.60, 0.58, gain_ci=[-0.05, -0.001]))["code"] == "hurts"
    assert verdict(_ev(0.60, 0.70))["code"] == "undetermined"  # no CI at all
    assert verdict(_ev(None, 0.70, [0.5, 0.7], [0.6, 0.8]))["code"] == "undetermined"  # no CV
    v = verdict({"kind": "pairwise", "fitted": False, "no_fit_reason": "too few labels: 3 < 10"})
    assert v["code"] == "not fitted" and "too few labels: 3 < 10" in v["text"]
    v = verdict(_ev(0.40, 0.52, kind="pointwise", gain_ci=[0.02, 0.2]))
    assert v["code"] == "helps" and "+0.120" in v["text"] and "Spearman" in v["text"]


def test_cv_gap_warning_added_once():
    ev = _ev(0.60, 0.75, [0.55, 0.65], [0.70, 0.80])
    ev["methods"]["raw"]["agreement"], ev["methods"]["polylog"]["agreement"] = 0.60, 0.78
    ev.update(n=200, warnings=["calibrated (polylog) and raw expert agreement differ by +18.0 points "
                               "in-sample: check the cross-validated figure"])
    w = build_report([entry("f", "j", ev)])["entries"][0]["warnings"]
    assert sum("differ by" in x for x in w) == 2  # the evaluation's in-sample one + ours (CV)
    assert "calibrated (polylog) and raw expert agreement differ by +15.0 points out of sample (cross-validated)" in w


# ----------------------------------------------------------------------------- other kinds
def test_verbosity_only_entry_known_answer():
    # 9 ties at 7 and one verbose win: win-rate (9 * 0.5 + 1) / 10 = 0.55; 95% of scores are 7
    v = VerbosityData([7.0] * 9 + [6.0], [7.0] * 10, [50.0] * 10, [200.0] * 10)
    ev = evaluate_verbosity_only(v, n_bootstrap=50, seed=0)
    rep = build_report([entry("alpaca_eval", "smollm2", ev)])
    e = rep["entries"][0]
    assert e["kind"] == "verbosity_only" and e["fitted"] is False and e["params"] is None
    assert e["methods"]["raw"]["verbosity_win_rate"] == pytest.approx(0.55)
    assert e["verdict"]["code"] == "not fitted"
    assert e["warnings"][0] == "no expert labels: a calibration cannot be fitted"
    assert any(w.startswith("95% of the judge scores are 7: the judge output is near constant")
               for w in e["warnings"])
    cols, rows = method_table(e)
    assert cols == ["method", "verbosity win-rate", "slope (verbosity pairs)"]
    assert rows[0][1].startswith("0.550 [")
    assert "| raw (no calibration) | 0.550 [" in render_markdown(rep)


def test_pointwise_entry_columns():
    ev = evaluate_pointwise(planted_pointwise(), expert_scale=(1, 5), scale=(0, 10), n_bootstrap=20, seed=0)
    rep = build_report([entry("planted", "j", ev)])
    e = rep["entries"][0]
    cols, rows = method_table(e)
    assert cols[:4] == ["method", "Spearman", "Spearman (CV)", "Kendall"] and "MAE (CV)" in cols
    assert [r[0] for r in rows] == [e["methods"][m]["label"] for m in ("raw", "linear", "lowess", "polylog")]
    raw = ev["methods"]["raw"]
    assert rows[0][1] == fmt_signed(raw["spearman"], raw["spearman_ci"])
    assert rows[0][5] == fmt_value(raw["mae"], raw["mae_ci"])
    assert e["verdict"]["metric"] == "spearman_cv"
    assert e["verdict"]["code"] == "undetermined"  # no CI of a CV Spearman in the evaluation
    json.loads(report_json(rep))


def test_bad_entries_raise_input_error():
    with pytest.raises(InputError, match="report entry 0: missing field 'evaluation'"):
        build_report([{"task_family": "f", "judge": "j"}])
    with pytest.raises(InputError, match="report entry 1: field 'evaluation' is not an evaluation"):
        build_report([entry("f", "j", _ev(0.6, 0.7)), entry("f", "j", {"kind": "nope"})])
    with pytest.raises(InputError, match="length_unit"):
        build_report([dict(entry("f", "j", _ev(0.6, 0.7)), length_unit="lines")])
    with pytest.raises(InputError, match="list of dicts"):
        build_report({"task_family": "f"})
    rep = build_report([entry("f", "j", _ev(0.6, 0.7)), entry("f", "j", _ev(0.6, 0.7))])
    assert rep["warnings"] == ["2 entries for task family 'f' and judge 'j'"]


def test_not_identified_comes_before_undetermined_and_gamma_zero_is_explained():
    """Issue 18 break-it: a 10-pair fit has no cross-validated figure AND is not identified:
    the verdict says "not identified" (check refuses it), not "undetermined". A stored gamma of 0
    that "hurts" out of sample says why applying it changes nothing."""
    from judgecal.report.build import verdict

    ev = _ev(None, None)
    ev["identification"] = {"identified": False, "reasons": ["gamma's 95% CI has zero width"]}
    v = verdict(ev)
    assert v["code"] == "not identified" and v["text"].startswith("Not identified: gamma's 95% CI has zero width.")
    assert verdict(_ev(None, None))["code"] == "undetermined"
    ev = _ev(0.685, 0.640, gain_ci=(-0.085, -0.005))
    ev["params"] = {"gamma": 0.0}
    v = verdict(ev)
    assert v["code"] == "hurts" and "The fit on all the data has gamma = 0: applied as stored it changes no score" in v["text"]
    ev["params"] = {"gamma": 0.4}
    assert "gamma = 0" not in verdict(ev)["text"]


def test_a_fit_not_identified_shows_no_in_sample_calibrated_figure(natural_entries):
    """Issue 23 item 3 (break-it): the report's methods table showed the in-sample agreement of
    "calibration (polylog, fitted)" and the summary its gamma for a fit whose labels do not
    determine gamma and p. Now those are withheld with the reason in JSON, text and Markdown;
    the cross-validated figures (the procedure out of sample) stay; an identified fit keeps all."""
    import copy

    from judgecal.report.build import entry_facts, summary_rows

    ents = copy.deepcopy(natural_entries)
    ents[0]["evaluation"]["identification"] = {"identified": False, "reasons": ["gamma at its bound (2.0)"]}
    ents[1]["evaluation"]["identification"] = {"identified": True, "reasons": []}
    rep = build_report(ents)
    bad, good = rep["entries"]
    pol, src = bad["methods"]["polylog"], ents[0]["evaluation"]["methods"]["polylog"]
    assert pol["withheld"] == "in-sample figures withheld: not identified: gamma at its bound (2.0)"
    assert pol["agreement"] is None and pol["agreement_ci"] is None and pol["slope"] is None
    assert pol["agreement_cv"] == src["agreement_cv"] and pol["agreement_cv"] is not None
    assert bad["methods"]["raw"]["agreement"] is not None and bad["methods"]["linear"]["agreement"] is not None
    assert good["methods"]["polylog"]["agreement"] is not None and "withheld" not in good["methods"]["polylog"]
    assert bad["params"]["gamma"] == ents[0]["evaluation"]["params"]["gamma"]  # JSON keeps it for diagnosis
    cols, rows = method_table(bad)
    (prow,) = [r for r in rows if r[0] == "calibration (polylog, fitted)"]
    assert prow[1] == "not identified" and prow[2] == fmt_value(src["agreement_cv"], src["agreement_cv_ci"])
    facts = entry_facts(bad)
    assert "gamma, p: not identified (withheld: the labels do not determine them)" in facts
    assert not any(f.startswith("gamma = ") for f in facts) and any(f.startswith("gamma = ") for f in entry_facts(good))
    srow_bad, srow_good = summary_rows(rep)
    assert srow_bad[5:7] == ["n.i.", "n.i."] and srow_good[5] not in ("n.i.", "-")
    md = render_markdown(rep)
    assert "| calibration (polylog, fitted) | not identified |" in md
    json.loads(report_json(rep))  # still valid JSON (no NaN)
