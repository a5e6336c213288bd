"""Gaming guards of the Bradley-Terry board (issue 34 item 4): models with degenerate answers
(empty, constant, truncated: judgecal.calibrate.guards, the publish board's guards) are set
apart with their reason in every format, their battles kept in the fit of the others; a model
whose Markdown density is far outside the other models' (a "style-stuffed" model built from a
real model's AlpacaEval answers) is flagged and not lifted by style control. SQLite and
PostgreSQL."""

from __future__ import annotations

import csv
import io
import json
import math
import re

import numpy as np
import pytest

from judgecal.calibrate import bt
from judgecal.calibrate import stylecontrol as sc
from judgecal.calibrate.style import style_counts
from judgecal.views import importing
from judgecal.views.btboard import build_bt_board

BASE = "gpt4_1106_preview"
ANNOTATOR = "weighted_alpaca_eval_gpt4_turbo"


# ------------------------------------------------------------------ the rule, pure
def test_far_outside_rule_and_cap():
    lengths = np.array([10, 10, 20, 10, 10, 0, 10.0])
    counts = np.array([[1, 0, 0], [0, 2, 0], [2, 2, 0], [1, 1, 0], [1, 1, 1], [3, 3, 3], [9, 1, 0]])
    dens = sc.model_densities([0, 0, 1, 2, 3, 3, 4], lengths, counts, 6)
    assert np.allclose(dens[0], [0.05, 0.1, 0]) and np.allclose(dens[1], [0.1, 0.1, 0])
    assert np.allclose(dens[3], [0.05, 0.05, 0.05])  # the empty answer counts as density 0
    assert np.allclose(dens[4], [0.9, 0.1, 0]) and np.all(np.isnan(dens[5]))
    hits = sc.far_outside(dens, range(6), range(6))
    # model 4: headers 0.9 > 2 x 0.1 (model 1's); bold: model 3 is the only one using it (a feature no other
    # model uses: flagged, no share given); lists: nobody above twice the others'
    assert list(hits) == [3, 4] and [h["feature"] for h in hits[4]] == ["headers"]
    assert hits[4][0]["highest"] == pytest.approx(0.1) and hits[4][0]["threshold"] == pytest.approx(0.2)
    assert hits[4][0]["group"] == [4] and hits[3] == [{"feature": "bold", "density": pytest.approx(0.05), "highest": 0.0,
                                                      "threshold": 0.0, "low": pytest.approx(0.05), "group": [3]}]
    # the share floor: bold in both of model 3's answers is flagged under the 10% floor too; in 1 of 20 it is not
    share = sc.model_shares([0, 0, 1, 2, 3, 3, 4], counts, 6)
    assert np.allclose(share[3], [1.0, 1.0, 1.0]) and np.allclose(share[0], [0.5, 0.5, 0.0])
    assert list(sc.far_outside(dens, range(6), range(6), share)) == [3, 4]
    share[3, 2] = 0.05
    assert list(sc.far_outside(dens, range(6), range(6), share)) == [4]
    # at exactly twice the highest other: not flagged (strictly above); too few others: nothing read
    dens2 = np.array([[0.1, 0, 0], [0.05, 0, 0], [0.05, 0, 0], [0.2, 0, 0]])
    assert sc.far_outside(dens2, [3], range(4)) == {}
    assert sc.far_outside(dens[[0, 1, 4]], [2], range(3)) == {}
    assert np.array_equal(sc.no_lift([1.0, -2.0, np.nan], [0.5, -1.0, 0.0])[:2], [0.5, -2.0])
    # a column of one value repeated is constant, though its float mean is not exact (sd ~1e-17, not 0)
    x = np.full(90, (1 / 14) / (1 / 14 + 1))
    assert np.std(x, ddof=1) > 0
    raw = np.column_stack([np.linspace(-1, 1, 90), np.zeros(90), x, np.zeros(90)])
    assert sc.style_matrix(raw, "both")[2] == ["headers", "lists", "bold"]


def test_far_outside_groups():
    """Two stuffed models hide each other from the one-model rule (each is within twice the other);
    as a group, far above the rest (more than FAR_OUTSIDE_GROUP times), both are flagged. A cluster
    of real heavy users with the real data's gap (9.7 times, AlpacaEval bold) is not; a tie is never
    split; the group is a minority of the reference models."""
    rest = [0.001, 0.002, 0.003, 0.004, 0.0045]
    dens = np.array([[x, 0, 0] for x in rest] + [[0.10, 0, 0], [0.11, 0, 0]])
    hits = sc.far_outside(dens, range(7), range(7))
    assert list(hits) == [5, 6] and hits[5][0]["group"] == [6, 5] and hits[6][0]["group"] == [6, 5]
    assert hits[5][0]["highest"] == pytest.approx(0.0045) and hits[5][0]["low"] == pytest.approx(0.10)
    assert hits[5][0]["threshold"] == pytest.approx(sc.FAR_OUTSIDE_GROUP * 0.0045)
    # the one-model rule alone would miss them: each is within twice the other
    assert 0.11 <= sc.FAR_OUTSIDE * 0.10
    # real clusters: AlpacaEval's bold users (FuseChat 0.0448, gemma 0.0266, gpt4_1106 0.0088 per word against
    # Mixtral's 0.0009): a gap of 9.7, under the group factor
    bold = np.array([[x, 0, 0] for x in [0.0001, 0.0002, 0.0003, 0.0004, 0.00091, 0.00879, 0.02657, 0.04476]])
    assert sc.far_outside(bold, range(8), range(8)) == {}
    # a group of half the reference models or more is the range itself, not outside it
    dens3 = np.array([[0.001, 0, 0], [0.001, 0, 0], [0.001, 0, 0], [0.5, 0, 0], [0.5, 0, 0], [0.5, 0, 0]])
    assert sc.far_outside(dens3, range(6), range(6)) == {}
    # ties at the cut go together: 0.5 x 2 and a third 0.5 would be split at k = 2, so k = 2 is skipped
    dens4 = np.array([[0.001, 0, 0]] * 4 + [[0.5, 0, 0]] * 3)
    got = sc.far_outside(dens4, range(7), range(7))
    assert list(got) == [4, 5, 6] and got[4][0]["group"] == [4, 5, 6]
    # two models using a feature no one else uses, in at least 10% of their answers
    dens5 = np.array([[0.0, 0, 0]] * 4 + [[0.02, 0, 0], [0.03, 0, 0]])
    share5 = np.array([[0.0, 0, 0]] * 4 + [[0.5, 0, 0], [0.05, 0, 0]])
    got = sc.far_outside(dens5, range(6), range(6), share5)
    assert list(got) == [4] and got[4][0]["highest"] == 0.0 and got[4][0]["group"] == [5, 4]


# ------------------------------------------------------------------ degenerate models on real data
GUARDED = ("alpaca-7b", "claude-2", "NullModel", "gpt4_gamed")


def _fit_on_files(data_dir, names):
    """The plain fit of ``names`` against the baseline from the annotation files (every battle)."""
    rows = []
    for name in names:
        path = data_dir / "alpaca_eval" / "results" / name / ANNOTATOR / "annotations.json"
        rows += [(name, float(r["preference"]) - 1.0, r["instruction"])
                 for r in json.loads(path.read_text(encoding="utf-8")) if r.get("preference") is not None]
    models = sorted(set(names) | {BASE})
    items = {t: i for i, t in enumerate(sorted({r[2] for r in rows}))}
    a = np.array([models.index(r[0]) for r in rows])
    d = bt.make_design(a, np.full(a.size, models.index(BASE)), np.array([r[1] for r in rows]), np.ones(a.size),
                       np.array([items[r[2]] for r in rows]), len(models), len(items))
    return models, bt.fit_bt(d, models.index(BASE))


def test_degenerate_models_set_apart_in_every_format(db_url, data_dir, run_cli):
    importing.import_alpaca_eval([data_dir / "alpaca_eval" / "results" / n for n in GUARDED], [], None, db_url)
    board = build_bt_board(url=db_url, n_bootstrap=40, seed=1)
    apart = {x["model"]: x for x in board["set_apart"]}
    # NullModel answers every instruction with one text; gpt4_gamed's answers are a few characters
    assert set(apart) == {"NullModel", "gpt4_gamed"}
    assert apart["NullModel"]["codes"] == ["constant"] and "same answer to 100% of items (805 of 805" in apart["NullModel"]["why"]
    assert apart["gpt4_gamed"]["codes"] == ["truncated"] and "truncated answers: median 0.005" in apart["gpt4_gamed"]["why"]
    assert apart["NullModel"]["n_battles"] == 805
    # ranked: the others, ranks 1..3 without a gap; their ratings those of the fit with every battle (kept)
    assert [r["model"] for r in board["rows"]] == [BASE, "claude-2", "alpaca-7b"]
    assert [r["rank"] for r in board["rows"]] == [1, 2, 3]
    models, fit = _fit_on_files(data_dir, GUARDED)
    for r in board["rows"]:
        assert r["rating"] == pytest.approx(float(bt.ratings(fit.coef[models.index(r["model"])])), abs=1e-9)
    # before the guard NullModel came first at 76.9% (docs/style.md): its rating is still what the fit gives
    assert float(bt.win_rate(bt.ratings(fit.coef[models.index("NullModel")]), 1000.0)) > 0.7
    assert any("set apart for degenerate answers" in n and "NullModel, gpt4_gamed" in n for n in board["notes"])
    # every format says so
    r = run_cli("--database-url", db_url, "bt", "--bootstrap", "0", "--format", "json")
    assert r.exit_code == 0, r
    out = json.loads(r.stdout)
    assert {x["model"] for x in out["set_apart"]} == {"NullModel", "gpt4_gamed"}
    assert "NullModel" not in {x["model"] for x in out["rows"]}
    r = run_cli("--database-url", db_url, "bt", "--bootstrap", "0", "--format", "csv")
    assert r.exit_code == 0 and "NullModel" not in r.stdout, r
    assert "set apart: NullModel (805 battles): degenerate answers" in r.stderr
    r = run_cli("--database-url", db_url, "bt", "--bootstrap", "0", "--format", "markdown")
    assert r.exit_code == 0 and "| NullModel |" not in r.stdout and "- set apart: gpt4_gamed" in r.stdout, r
    r = run_cli("--database-url", db_url, "bt", "--bootstrap", "0")
    assert r.exit_code == 0 and "set apart: NullModel (805 battles)" in r.stdout, r
    # and under style control (words: no tokenizer needed)
    ctl = build_bt_board(url=db_url, n_bootstrap=0, control="both", length_unit="words")
    assert {x["model"] for x in ctl["set_apart"]} == {"NullModel", "gpt4_gamed"}
    assert [r["rank_uncontrolled"] for r in sorted(ctl["rows"], key=lambda r: r["rank_uncontrolled"])] == [1, 2, 3]


# ------------------------------------------------------------------ a style-stuffed model from real answers
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


def stuff(text: str) -> str:
    """The same answer with its Markdown stuffed: a header on top, a header over every paragraph
    (non-empty line), and every sentence a bold bullet. No word of the answer changes: only
    ``## Answer`` / ``### Point`` lines and the markers ``- **...**`` are added."""
    out = ["## Answer"]
    for line in (x.strip() for x in text.split("\n")):
        if line:
            out.append("### Point")
            out += [f"- **{s}**" for s in _SENTENCE.split(line) if s]
    return "\n".join(out)


def test_stuff_adds_markers_only():
    t = "First point. Second one!\n\nA third line"
    assert stuff(t) == "## Answer\n### Point\n- **First point.**\n- **Second one!**\n### Point\n- **A third line**"
    c = style_counts(stuff(t))
    assert (c.md_headers, c.md_list_unordered, c.md_bold) == (3, 3, 3)


ORIGINAL = "claude-2"
STUFFED = "claude-2_stuffed"
OTHERS = ("alpaca-7b", "claude-2", "gpt-3.5-turbo-1106", "gemma-7b-it", "NullModel")


def _stuffed_folder(data_dir, tmp_path, original=ORIGINAL):
    """results/<original>_stuffed/<annotator>/annotations.json (claude-2 by default): its annotations with its
    answer (output_2) stuffed and the judge's verdict copied: the judge never saw the stuffed
    text, so the copy is the verdict of a judge blind to the stuffing, and every rise of its
    rating under control could only come from the correction itself."""
    src = data_dir / "alpaca_eval" / "results" / original / ANNOTATOR / "annotations.json"
    rows = json.loads(src.read_text(encoding="utf-8"))
    for r in rows:
        assert r["generator_2"] == original
        r["generator_2"], r["output_2"] = original + "_stuffed", stuff(r["output_2"])
    dest = tmp_path / "results" / (original + "_stuffed") / ANNOTATOR
    dest.mkdir(parents=True)
    (dest / "annotations.json").write_text(json.dumps(rows), encoding="utf-8")
    return dest.parent


@pytest.mark.parametrize("control", ["markdown", "both"])
def test_stuffed_model_flagged_and_not_lifted(db_url, data_dir, tmp_path, run_cli, control):
    folders = [data_dir / "alpaca_eval" / "results" / n for n in OTHERS] + [_stuffed_folder(data_dir, tmp_path)]
    importing.import_alpaca_eval(folders, [], None, db_url)
    board = build_bt_board(url=db_url, n_bootstrap=60, seed=3, control=control, length_unit="words")
    got = {r["model"]: r for r in board["rows"]}
    assert "NullModel" in {x["model"] for x in board["set_apart"]}
    # the stuffed model: flagged, with why; the real models: not
    assert got[STUFFED]["flag_codes"] == ["style-outside"]
    msg = got[STUFFED]["flags"][0]
    assert msg.startswith("Markdown density far above the other models': headers") and "times the highest" in msg
    assert "style control corrects within the range" in msg
    assert all(not r["flag_codes"] for name, r in got.items() if name != STUFFED)
    # not lifted: at most its uncontrolled rating, every resample too, and not above the original beyond its CI
    s, o = got[STUFFED], got[ORIGINAL]
    assert s["rating_uncontrolled"] == pytest.approx(o["rating_uncontrolled"], abs=1e-6)  # the same verdicts
    assert s["rating"] <= s["rating_uncontrolled"] + 1e-9
    assert s["rating"] <= o["rating_ci"][1] and s["rating_ci"][1] <= s["rating_uncontrolled_ci"][1] + 1e-9
    assert s["rank"] >= o["rank"]
    assert any("style-outside" in n and STUFFED in n for n in board["notes"])
    # its battles, far outside the styles seen, do not set the correction: the coefficients and the others'
    # controlled ratings are the fit on the other models' battles alone, read from the files (NullModel's kept);
    # kept, its copied verdicts would turn the header coefficient from +0.26 to -0.08 (markdown)
    from test_bt_style import _alpaca

    models, a, b, y, it, n_items, raw = _alpaca(data_dir, OTHERS)
    Z, cols, _ = sc.style_matrix(raw, control)
    f = bt.fit_bt(bt.make_design(a, b, y, np.ones(a.size), it, len(models), n_items, features=Z), models.index(BASE))
    assert [c["feature"] for c in board["style"]["coefficients"]] == [c["feature"] for c in cols]
    assert np.allclose([c["coef"] for c in board["style"]["coefficients"]], f.gamma, atol=1e-8)
    for i, name in enumerate(models):
        if name != "NullModel":
            assert got[name]["rating"] == pytest.approx(float(bt.ratings(f.coef[i])), abs=1e-6)
    if control == "markdown":
        assert {c["feature"]: c["coef"] for c in board["style"]["coefficients"]}["headers"] > 0.2
    # every format
    args = ("--database-url", db_url, "bt", "--control", control, "--length-unit", "words", "--bootstrap", "0")
    r = run_cli(*args, "--format", "json")
    assert r.exit_code == 0, r
    rows = {x["model"]: x for x in json.loads(r.stdout)["rows"]}
    assert rows[STUFFED]["flag_codes"] == ["style-outside"] and rows[STUFFED]["flags"][0].startswith("Markdown density")
    r = run_cli(*args, "--format", "csv")
    assert r.exit_code == 0, r
    rows = {x["model"]: x for x in csv.DictReader(io.StringIO(r.stdout))}
    assert json.loads(rows[STUFFED]["flag_codes"]) == ["style-outside"] and json.loads(rows[ORIGINAL]["flag_codes"]) == []
    assert f"flag style-outside: {STUFFED}: Markdown density" in r.stderr
    r = run_cli(*args, "--format", "markdown")
    assert r.exit_code == 0 and "style-outside" in r.stdout and "claude-2_stuffed: Markdown density" in r.stdout, r
    r = run_cli(*args)
    assert r.exit_code == 0 and f"flag style-outside: {STUFFED}" in r.stdout, r


def test_two_stuffed_models_do_not_hide_each_other(sqlite_url, data_dir, tmp_path):
    """Two stuffed models (claude-2's and gpt-3.5-turbo-1106's real answers, stuffed alike, their
    verdicts copied): each is within twice the other's header density, so the one-model rule
    alone flags neither and, kept in the fit, they set the header coefficient themselves (a
    break-it round measured lifts of 568 -> 939 and 593 -> 964). As a group far above the rest
    both are flagged, neither is lifted, and the coefficients are the fit without their battles."""
    second = "gpt-3.5-turbo-1106"
    folders = [data_dir / "alpaca_eval" / "results" / n for n in OTHERS] + [
        _stuffed_folder(data_dir, tmp_path / "one"), _stuffed_folder(data_dir, tmp_path / "two", second)]
    importing.import_alpaca_eval(folders, [], None, sqlite_url)
    board = build_bt_board(url=sqlite_url, n_bootstrap=30, seed=2, control="markdown", length_unit="words")
    got = {r["model"]: r for r in board["rows"]}
    pair = (STUFFED, second + "_stuffed")
    for name in pair:
        assert got[name]["flag_codes"] == ["style-outside"], got[name]
        other = pair[1] if name == pair[0] else pair[0]
        assert f"(with {other}): the group's lowest density is" in got[name]["flags"][0]
        assert got[name]["rating"] <= got[name]["rating_uncontrolled"] + 1e-9
        assert got[name]["rating_ci"][1] <= got[name]["rating_uncontrolled_ci"][1] + 1e-9
    assert all(not r["flag_codes"] for name, r in got.items() if name not in pair)
    # the coefficients and the other models' ratings: the fit on the real models' battles alone
    from test_bt_style import _alpaca

    models, a, b, y, it, n_items, raw = _alpaca(data_dir, OTHERS)
    Z, cols, _ = sc.style_matrix(raw, "markdown")
    f = bt.fit_bt(bt.make_design(a, b, y, np.ones(a.size), it, len(models), n_items, features=Z), models.index(BASE))
    assert np.allclose([c["coef"] for c in board["style"]["coefficients"]], f.gamma, atol=1e-8)
    assert {c["feature"]: c["coef"] for c in board["style"]["coefficients"]}["headers"] > 0.2
    for i, name in enumerate(models):
        if name != "NullModel":
            assert got[name]["rating"] == pytest.approx(float(bt.ratings(f.coef[i])), abs=1e-6)


def test_a_feature_only_one_model_uses_is_flagged(sqlite_url, tmp_path):
    """S alone writes list items, at a varying number (5 to 8 per answer; A, B, C and D none), and
    this judge gives S less credit the more items it writes: the list coefficient then rests on
    S's own answers alone, comes out negative, and the correction would lift S above its
    uncontrolled rating. The feature no other model uses flags S (\"no other model uses\") and
    caps it; the others are not flagged."""
    vocab = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet"]
    recs = []
    for k in range(40):
        words = [vocab[(k + j) % 10] for j in range(9)] + [vocab[k % 10] + vocab[k // 10]]
        prompt = f"question {' '.join(words[:3])} {k}"
        base = " ".join(words)
        for name, pref in (("B", 0.6), ("C", 0.5), ("D", 0.4)):
            recs.append({"prompt": prompt, "model_a": name, "response_a": f"{name} {base} " + "x" * (k % 3),
                         "model_b": "A", "response_b": "A " + base, "judge": "j", "task_family": "fam",
                         "preference": pref + 0.05 * (k % 3 - 1)})
        n = 5 + k % 4
        recs.append({"prompt": prompt, "model_a": "S", "response_a": "S " + _answer(words, n), "model_b": "A",
                     "response_b": "A " + base, "judge": "j", "task_family": "fam", "preference": 0.75 - 0.15 * (n - 5)})
    path = tmp_path / "v.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in recs), encoding="utf-8")
    importing.import_generic(path, "verdicts", "jsonl", None, sqlite_url)
    board = build_bt_board(url=sqlite_url, baseline="A", n_bootstrap=20, seed=0, control="markdown",
                           length_unit="words")
    got = {r["model"]: r for r in board["rows"]}
    s = got["S"]
    assert s["flag_codes"] == ["style-outside"] and "lists" in s["flags"][0], s
    assert "a feature no other model uses" in s["flags"][0] and "capped there" in s["flags"][0]
    fit_value = float(re.search(r"the controlled fit gave ([\d.]+)", s["flags"][0]).group(1))
    assert fit_value > s["rating_uncontrolled"] + 20  # the lift the guard refuses
    assert s["rating"] == s["rating_uncontrolled"]
    assert all(not got[m]["flag_codes"] for m in "ABCD")


def _answer(words: list[str], n_items: int) -> str:
    return " ".join(words) + "".join(f"\n- point {w}" for w in words[:n_items])


def test_cap_where_control_would_lift(sqlite_url, tmp_path):
    """A judge that dislikes list items (hand-made soft verdicts: the more list items model B, C
    or D writes against baseline A, the lower its credit) gives the list coefficient a negative
    sign; S writes far more list items than anyone and loses at a steady rate, so the fit's
    correction (minus a negative coefficient times S's large covariate) would lift S above its
    uncontrolled rating. The guard flags S and caps its controlled rating at the uncontrolled one."""
    vocab = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo",
             "lima", "mike", "november", "oscar", "papa", "quebec", "romeo", "sierra", "tango"]
    recs = []
    for k in range(40):
        words = [vocab[(k + j) % 20] for j in range(10)] + [vocab[k % 20] + vocab[k // 20]]
        prompt = f"question {' '.join(words[:3])} {k}"
        base = _answer(words, 0)
        for name, shift in (("B", 0.0), ("C", 0.1), ("D", -0.1)):
            n = k % 4
            recs.append({"prompt": prompt, "model_a": name, "response_a": f"{name} " + _answer(words, n),
                         "model_b": "A", "response_b": "A " + base, "judge": "j", "task_family": "fam",
                         "preference": 0.65 + shift - 0.1 * n})
        recs.append({"prompt": prompt, "model_a": "S", "response_a": "S " + _answer(words, 10), "model_b": "A",
                     "response_b": "A " + base, "judge": "j", "task_family": "fam", "preference": 0.3})
    path = tmp_path / "v.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in recs), encoding="utf-8")
    importing.import_generic(path, "verdicts", "jsonl", None, sqlite_url)
    board = build_bt_board(url=sqlite_url, baseline="A", n_bootstrap=40, seed=0, control="markdown",
                           length_unit="words")
    lists = {c["feature"]: c["coef"] for c in board["style"]["coefficients"]}["lists"]
    assert lists < -0.2
    got = {r["model"]: r for r in board["rows"]}
    s = got["S"]
    assert s["flag_codes"] == ["style-outside"] and "lists" in s["flags"][0] and "capped there" in s["flags"][0]
    fit_value = float(re.search(r"the controlled fit gave ([\d.]+)", s["flags"][0]).group(1))
    assert fit_value > s["rating_uncontrolled"] + 50  # the lift the guard refuses
    assert s["rating"] == s["rating_uncontrolled"] and s["coef"] == s["coef_uncontrolled"]
    assert s["win_rate"] == pytest.approx(30.0, abs=1e-6)  # its credit, 0.3 on every battle
    assert s["rating_ci"][1] <= s["rating_uncontrolled_ci"][1] + 1e-9
    assert all(not got[m]["flag_codes"] for m in "ABCD")
    assert math.isfinite(s["rating"])


def test_flagged_battles_kept_when_the_others_cannot_be_fitted_alone(sqlite_url, tmp_path):
    """B, C and D write one list item in every answer of the same length (A none): without S's
    battles no style column varies, so the coefficients cannot be fitted on the other battles;
    S's battles are then kept in the controlled fit (a note says why), S still flagged and capped."""
    vocab = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet"]
    recs = []
    for k in range(30):
        words = [vocab[(k + j) % 10] for j in range(9)] + [vocab[k % 10] + vocab[k // 10]]
        prompt = f"question {' '.join(words[:3])} {k}"
        for name, pref in (("B", 0.6), ("C", 0.5), ("D", 0.4), ("S", 0.3 + 0.02 * (k % 5))):
            n = 8 + k % 3 if name == "S" else 1
            recs.append({"prompt": prompt, "model_a": name, "response_a": f"{name} " + _answer(words, n),
                         "model_b": "A", "response_b": "A " + _answer(words, 0), "judge": "j", "task_family": "fam",
                         "preference": pref})
    path = tmp_path / "v.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in recs), encoding="utf-8")
    importing.import_generic(path, "verdicts", "jsonl", None, sqlite_url)
    board = build_bt_board(url=sqlite_url, baseline="A", n_bootstrap=0, control="markdown", length_unit="words")
    got = {r["model"]: r for r in board["rows"]}
    assert got["S"]["flag_codes"] == ["style-outside"] and got["S"]["rating"] <= got["S"]["rating_uncontrolled"]
    assert any("battles are kept in the controlled fit: without them no style column varies" in n
               for n in board["notes"])
    assert [c["feature"] for c in board["style"]["coefficients"]] == ["lists"]
