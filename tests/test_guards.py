"""Issue 18 item 3, guards in every mode: empty answers, one answer repeated across items and
answers far below the reference length cannot gain from a calibration (score leaderboard, win-rate
leaderboard), are flagged in fit, report and both leaderboards in every output format, and
``check`` fails on them unless --allow-degenerate-answers.

Known answers for the short-side floor first (pure functions), then real data: LLMBar Natural and
Adversarial_Neighbor with GPT-4's real ratings, plus three degenerate models on the first 30
Natural items, imported through the generic JSONL formats (docs/data-formats.md):

* ``empty-model``: the empty answer, rated 0 (the issue's measured case);
* ``constant-model``: one polite sentence for every item, rated 2;
* ``truncated-model``: the first two words of the real ``output_2`` answer, rated 1 (our
  assumption of what a judge gives two words of a reply; GPT-4 never rated these texts).

Pairwise verdicts for the win-rate mode are derived from the same GPT-4 scores (each model
against ``llmbar/output_1``: 1 when its score is higher, 0 when lower, 0.5 on a tie).
"""

from __future__ import annotations

import json
import re
import math
import shutil

import numpy as np
import pytest

from judgecal.calibrate import guards
from judgecal.calibrate.fit import bt_loss_at, fit_pairwise
from judgecal.calibrate.penalty import DEFAULT_SHORT_FLOOR, calibrate, log_ratio, polylog_feature, polylog_penalty
from judgecal.calibrate.transfer import apply_stored
from judgecal.calibrate.winrate_penalty import DEFAULT_FLOOR, pair_penalty
from judgecal.errors import UsageError

LN4 = math.log(4)
CONST = "Thank you for your question. I am happy to help with that."
DEGENERATE = ("empty-model", "constant-model", "truncated-model")
FLAG_CODES = {"empty-model": "empty_answers", "constant-model": "constant_answers", "truncated-model": "far_short_answers"}
#: In the win-rate board (reference: the baseline's answer to the item) two words are "truncated".
WINRATE_FLAG_CODES = {**FLAG_CODES, "truncated-model": "truncated_answers"}
PAIRWISE_JUDGE = "GPT-4 (pairwise, from its scores)"


# ----------------------------------------------------------------------------- known answers
def test_the_worked_example_holds_with_and_without_the_floor():
    # DESIGN.md: raw 9.0, L 1200, L_ref 300, gamma 0.5, p 1.2 -> 8.26 (the long side has no floor)
    for floor in (None, 0.25):
        out = calibrate([9.0], [1200], 300, 0.5, 1.2, 0, 10, floor=floor)[0]
        assert out == pytest.approx(9.0 - 0.5 * LN4 ** 1.2, abs=1e-12)
        assert out == pytest.approx(8.26, abs=0.005)


def test_the_short_side_saturates_at_the_floor():
    cap = -0.5 * LN4 ** 1.2  # the credit of an answer at a quarter of L_ref: -0.7399
    pen = polylog_penalty([0, 1, 10, 75, 150, 300, 1200], 300, 0.5, 1.2, floor=0.25)
    np.testing.assert_allclose(pen, [cap, cap, cap, cap, -0.5 * math.log(2) ** 1.2, 0.0, -cap], rtol=0, atol=1e-12)
    assert cap == pytest.approx(-0.7399, abs=1e-4)
    # the seed formula as written (no floor): the credit grows without limit as L -> 0
    assert polylog_penalty([10], 300, 0.5, 1.2)[0] == pytest.approx(-0.5 * math.log(30) ** 1.2)
    assert polylog_penalty([0], 300, 0.5, 1.2)[0] == pytest.approx(-0.5 * math.log(300) ** 1.2)
    assert log_ratio([10], 300, 0.25)[0] == pytest.approx(-LN4)
    # one constant and one idea for both modes: the win-rate penalty is the same function
    assert DEFAULT_SHORT_FLOOR == DEFAULT_FLOOR == 0.25
    for lm in (0, 10, 75, 150, 300, 1200):
        assert pair_penalty([lm], [300], 1.2, floor=0.25)[0] == pytest.approx(polylog_feature([lm], 300, 1.2, 0.25)[0])
    for bad in (0, -0.5, 1.5, float("nan")):
        with pytest.raises(UsageError, match="floor"):
            calibrate([5.0], [10], 300, 0.5, 1.2, 0, 10, floor=bad)


def test_no_credit_rows_are_never_above_their_raw_score():
    raw = np.array([5.0, 5.0, 5.0, 5.0])
    length = np.array([0, 10, 150, 1200])
    out = calibrate(raw, length, 300, 0.5, 1.2, 0, 10, floor=0.25, no_credit=[True, True, True, True])
    np.testing.assert_allclose(out, [5.0, 5.0, 5.0, 5.0 - 0.5 * LN4 ** 1.2], atol=1e-12)  # the long one keeps its penalty
    mixed = calibrate(raw, length, 300, 0.5, 1.2, 0, 10, floor=0.25, no_credit=[True, False, False, False])
    np.testing.assert_allclose(mixed, [5.0, 5.0 + 0.5 * LN4 ** 1.2, 5.0 + 0.5 * math.log(2) ** 1.2,
                                       5.0 - 0.5 * LN4 ** 1.2], atol=1e-12)
    # a signed fit (gamma < 0 penalises short answers): no credit means no bonus for the long one either
    signed = calibrate([5.0, 5.0], [10, 1200], 300, -0.5, 1.2, 0, 10, signed=True, floor=0.25, no_credit=[True, True])
    np.testing.assert_allclose(signed, [5.0 - 0.5 * LN4 ** 1.2, 5.0], atol=1e-12)
    assert np.all(signed <= 5.0) and np.all(out <= raw)


def test_stored_calibrations_apply_their_own_floor():
    old = {"gamma": 0.5, "p": 1.2, "l_ref": 300.0}  # stored before the floor: keeps its unbounded short side
    new = dict(old, short_floor=0.25)
    assert apply_stored(old, (0, 10), [5.0], [10])[0] == pytest.approx(5.0 + 0.5 * math.log(30) ** 1.2)
    assert apply_stored(new, (0, 10), [5.0], [10])[0] == pytest.approx(5.0 + 0.5 * LN4 ** 1.2)
    assert apply_stored(new, (0, 10), [9.0], [1200])[0] == pytest.approx(8.26, abs=0.005)
    for params in (old, new):  # empty and repeated answers earn no credit, old rows included
        assert apply_stored(params, (0, 10), [5.0, 5.0], [0, 10], no_credit=[True, True]).tolist() == [5.0, 5.0]


def test_the_fit_optimises_the_floored_function():
    """Planted: the judge adds 0.8 * sign(r)|r| with r floored at ln(1/4); half the answers are far
    below L_ref. The floored fit recovers gamma, its loss is the loss of the floored function, and
    the unfloored seed formula fits these data worse."""
    rng = np.random.default_rng(0)
    n = 400
    qa, qb = rng.normal(5, 1, n), rng.normal(5, 1, n)
    la, lb = np.exp(rng.uniform(0, 7, n)), np.exp(rng.uniform(0, 7, n))  # L_ref = 100: many under 25
    sa = qa + polylog_penalty(la, 100.0, 0.8, 1.0, floor=0.25)
    sb = qb + polylog_penalty(lb, 100.0, 0.8, 1.0, floor=0.25)
    y = (qa > qb).astype(float)
    res = fit_pairwise(sa, sb, la, lb, y, l_ref=100.0, scale=(-np.inf, np.inf), p_bounds=(1.0, 1.0), floor=0.25)
    assert res.short_floor == 0.25 and res.gamma == pytest.approx(0.8, abs=0.15)
    assert res.loss == pytest.approx(bt_loss_at(sa, sb, la, lb, y, gamma=res.gamma, p=res.p, l_ref=100.0,
                                                bt_scale=res.bt_scale, floor=0.25), rel=1e-12)
    seed = fit_pairwise(sa, sb, la, lb, y, l_ref=100.0, scale=(-np.inf, np.inf), p_bounds=(1.0, 1.0))
    assert seed.short_floor is None and seed.loss > res.loss


def test_guards_known_answers():
    # model a: empty / whitespace answers; b: one text for 3 items; c: the same text twice only; d: far short
    model = ["a"] * 4 + ["b"] * 4 + ["c"] * 4 + ["d"] * 4
    item = [1, 2, 3, 4] * 4
    texts = ["", " \n ", "x y", "z w",  "same", "same", "same", "other",  "t", "t", "u", "v",  "k", "k l", "m", "n o p"]
    keys = [guards.text_key(t) for t in texts]
    words = [guards.n_words(t) for t in texts]
    length = [0, 0, 20, 20, 20, 20, 20, 20, 20, 20, 20, 20, 1, 2, 1, 3]
    nc = guards.no_credit(model, item, keys, words)
    assert nc.tolist() == [True, True, False, False, True, True, True, False] + [False] * 8
    flags = guards.model_flags(model, item, keys, words, length, 20.0, floor=0.25)
    assert {m: [f["code"] for f in fl] for m, fl in flags.items()} == {
        "a": ["empty_answers"], "b": ["constant_answers"], "c": ["constant_answers"], "d": ["far_short_answers"]}
    assert flags["a"][0]["message"] == "empty answers: 2 of 4 (no length credit)"
    assert flags["b"][0]["message"] == "same answer to 75% of items (3 of 4; no length credit)"
    assert flags["d"][0]["message"] == ("answers below the short-side floor: median 0.08 of L_ref "
                                        "(credit capped at 0.25 of L_ref)")
    fam = guards.family_flags(flags)
    assert [f["code"] for f in fam] == ["empty_answers", "constant_answers", "far_short_answers"]
    assert fam[1]["models"] == ["b", "c"] and fam[1]["message"].startswith("b: same answer to 75% of items")


# ----------------------------------------------------------------------------- real data
def _records(data_dir):
    nat = data_dir / "llmbar" / "Natural"
    dataset = json.loads((nat / "dataset.json").read_text())
    ratings = json.loads((nat / "ratings_GPT-4.json").read_text())
    judge = dict(judge="GPT-4", judge_model="GPT-4", judge_endpoint="import:llmbar", judge_prompt="llmbar/Rating",
                 scale_min=0, scale_max=10, task_family="llmbar/Natural")
    rat, ver = [], []
    for i, (rec, rr) in enumerate(zip(dataset, ratings)):
        s1, s2 = (float(rr["results"][0][k][0]) for k in ("score_1", "score_2"))
        models = [("llmbar/output_2", rec["output_2"], s2)]
        if i < 30:
            degenerate = [("empty-model", "", 0.0), ("constant-model", CONST, 2.0),
                          ("truncated-model", " ".join(rec["output_2"].split()[:2]), 1.0)]
            rat += [dict(judge, prompt=rec["input"], model=m, response=t, score=s) for m, t, s in degenerate]
            models += degenerate
        for m, t, s in models:
            ver.append(dict(prompt=rec["input"], model_a=m, response_a=t, model_b="llmbar/output_1",
                            response_b=rec["output_1"], judge=PAIRWISE_JUDGE, baseline="b",
                            task_family="llmbar/Natural", preference=1.0 if s > s1 else 0.0 if s < s1 else 0.5))
    return rat, ver


def _ok(r):
    assert r.exit_code == 0, (r.exit_code, r.stdout, r.stderr)
    return r


def _json(r):
    return json.loads(_ok(r).stdout)


@pytest.fixture(scope="module")
def guard_db(tmp_path_factory, data_dir):
    """LLMBar Natural + Adversarial_Neighbor, the degenerate models and verdicts; one fit: GPT-4 on
    Adversarial_Neighbor (gamma ~3.9, the donor of the strong-calibration case). Returns (url, fit)."""
    from judgecal.cli import main

    tmp = tmp_path_factory.mktemp("guards")
    url = f"sqlite:///{tmp / 'guards.db'}"
    rat, ver = _records(data_dir)
    (tmp / "ratings.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rat))
    (tmp / "verdicts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ver))
    cmds = [["import", "llmbar", str(data_dir / "llmbar" / f)] for f in ("Natural", "Adversarial_Neighbor")]
    cmds += [["import", "jsonl", str(tmp / "ratings.jsonl"), "--kind", "ratings"],
             ["import", "jsonl", str(tmp / "verdicts.jsonl"), "--kind", "verdicts"]]
    for c in cmds:
        try:
            main(["--database-url", url, *c])
        except SystemExit as exc:
            assert exc.code == 0, c
    return url


@pytest.fixture(scope="module")
def donor(guard_db, run_cli_module):
    return _json(run_cli_module("--database-url", guard_db, "fit", "--task-family", "llmbar/Adversarial_Neighbor",
                                "--judge", "GPT-4", "--length-unit", "words", "--bootstrap", "0", "--no-nested",
                                "--format", "json"))


@pytest.fixture(scope="module")
def natural_db(guard_db, tmp_path_factory, run_cli_module):
    """A copy of guard_db with GPT-4 fitted on Natural itself (its degenerate models included)."""
    path = tmp_path_factory.mktemp("natural") / "natural.db"
    shutil.copy(guard_db.removeprefix("sqlite:///"), path)
    url = f"sqlite:///{path}"
    fit = _json(run_cli_module("--database-url", url, "fit", "--task-family", "llmbar/Natural", "--judge", "GPT-4",
                               "--length-unit", "words", "--bootstrap", "20", "--no-nested", "--format", "json"))
    return url, fit


@pytest.fixture(scope="module")
def run_cli_module():
    from tests.conftest import CliResult  # noqa: F401  (the same runner as the run_cli fixture)
    from click.testing import CliRunner

    from judgecal.cli import main

    def run(*args):
        runner = CliRunner()
        with runner.isolation() as streams:
            code = 0
            try:
                main([str(a) for a in args])
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            out, err = streams[0].getvalue().decode(), streams[1].getvalue().decode()
        return CliResult(code, out, err)

    return run


def _flag_cells(text: str, md: bool = False) -> dict[str, list[str]]:
    """{model: flag codes} read off a rendered board: a rich table's rows (first cell the model,
    last the flags) or a Markdown table's rows of the test's "-model" models."""
    bar = "|" if md else "│"
    rows = [line for line in text.splitlines()
            if ((line.startswith("| ") and "-model" in line) if md else line.count("│") > 2)]
    return {line.split(bar)[1].strip(): line.split(bar)[-2].split() for line in rows if line.split(bar)[1].strip()}


def _rows(board):
    return {r["model"]: r for r in board["rows"]}


def _board_args(url, *extra):
    return ("--database-url", url, "leaderboard", "--judge", "GPT-4", "--task-family", "llmbar/Natural",
            "--bootstrap", "0", *extra)


def _unidentified_board(run_cli, url, calibration="latest", calibration_from=None):
    """The score board of a calibration that is NOT identified (both real fits here clip too
    many scores): the CLI shows no calibrated value for it (issue 23 item 3, asserted here); the
    guards are read off the library's board with show_unidentified=True."""
    from judgecal.views.leaderboard import build_leaderboard

    extra = (("--calibration", calibration) if calibration != "latest" else ()) + (
        ("--calibration-from", calibration_from) if calibration_from else ())
    cli = _json(run_cli(*_board_args(url, *extra, "--format", "json")))
    assert all(r["mean_calibrated"] is None and r["rank_calibrated"] is None and "unident" in r["flag_codes"]
               for r in cli["rows"] if r["mean_raw"] is not None)
    assert any("is not identified, so no calibrated value is shown" in n for n in cli["notes"])
    return build_leaderboard(["llmbar/Natural"], "GPT-4", calibration, url, n_bootstrap=0,
                             calibration_from=calibration_from, show_unidentified=True)


def test_the_issue_case_a_strong_calibration_no_longer_lifts_empty_or_constant_answers(guard_db, donor, run_cli):
    """The measured case: GPT-4's Adversarial_Neighbor fit (gamma ~3.9, L_ref 31 words) applied to
    Natural. Without the guards the empty model (raw 0.0) would be calibrated to 10.0 and ranked
    first; now empty and constant answers keep their raw score and rank."""
    assert donor["gamma"] > 3 and donor["short_floor"] == 0.25
    board = _unidentified_board(run_cli, guard_db, calibration_from="llmbar/Adversarial_Neighbor")
    rows = _rows(board)
    params = {"gamma": donor["gamma"], "p": donor["p"], "l_ref": donor["l_ref"]}  # the pre-guard function
    unguarded = apply_stored(params, (0, 10), np.zeros(30), np.zeros(30))
    assert unguarded.tolist() == [10.0] * 30  # 0 -> 10, above every real model's calibrated mean
    assert max(r["mean_calibrated"] for r in board["rows"]) < 10.0
    for m in ("empty-model", "constant-model"):
        assert rows[m]["mean_calibrated"] <= rows[m]["mean_raw"] + 1e-12, m
        assert rows[m]["mean_raw"] == pytest.approx({"empty-model": 0.0, "constant-model": 2.0}[m])
    assert rows["empty-model"]["rank_calibrated"] == rows["empty-model"]["rank_raw"] == 5
    # a model whose answers are far below the family's L_ref gains nothing in the score board (the
    # floor would have capped it at gamma * ln(4)^p, 5.4 points here: still a lift; issue 18 asks none)
    lift = rows["truncated-model"]["mean_calibrated"] - rows["truncated-model"]["mean_raw"]
    assert lift <= 1e-12 and donor["gamma"] * LN4 ** donor["p"] > 5
    for m in DEGENERATE:
        codes = [f["code"] for f in rows[m]["degenerate_answers"]]
        assert codes == [FLAG_CODES[m]], (m, codes)
    for m in ("llmbar/output_1", "llmbar/output_2"):
        assert rows[m]["degenerate_answers"] == []


def test_score_leaderboard_own_fit_lifts_none_and_flags_them_in_every_format(natural_db, run_cli):
    url, fit = natural_db
    assert fit["short_floor"] == 0.25 and fit["gamma"] > 0
    own = ("--calibration", str(fit["id"]))
    board = _unidentified_board(run_cli, url, str(fit["id"]))
    rows = _rows(board)
    cap = fit["gamma"] * LN4 ** fit["p"]
    for m in DEGENERATE:
        r = rows[m]
        assert r["rank_change"] <= 0, (m, r["rank_raw"], r["rank_calibrated"])  # rank not improved
        assert r["mean_calibrated"] - r["mean_raw"] <= 1e-12, m  # no gain at all (far short included)
    assert cap > 0
    assert rows["empty-model"]["mean_calibrated"] == 0.0 and rows["constant-model"]["mean_calibrated"] == 2.0
    messages = {m: [f["message"] for f in rows[m]["degenerate_answers"]] for m in DEGENERATE}
    assert all(len(v) == 1 for v in messages.values()), messages
    assert messages["empty-model"] == ["empty answers: 30 of 30 (no length credit)"]
    assert messages["constant-model"] == ["same answer to 100% of items (30 of 30; no length credit)"]
    for m in DEGENERATE:
        assert messages[m][0] in rows[m]["flags"]
    table = _ok(run_cli(*_board_args(url, *own))).stdout
    md = _ok(run_cli(*_board_args(url, *own, "--format", "markdown"))).stdout
    csv_out = _ok(run_cli(*_board_args(url, *own, "--format", "csv"))).stdout
    from judgecal.report.render_markdown import md_escape
    from judgecal.views.leaderboard import FLAG_LEGEND

    short = {"empty_answers": "empty", "constant_answers": "constant", "far_short_answers": "far-short"}
    table_flags, md_flags = _flag_cells(table), _flag_cells(md, md=True)
    legend = " ".join(table.split())
    for m in DEGENERATE:
        msg, code = messages[m][0], short[FLAG_CODES[m]]
        assert code in table_flags[m] and code in md_flags[m], (m, table_flags.get(m), md_flags.get(m))
        assert f"{code} = {FLAG_LEGEND[code]}" in legend and md_escape(f"{code} = {FLAG_LEGEND[code]}") in md, code
        assert msg in csv_out, m  # CSV and JSON keep the whole sentence


def test_fit_and_report_flag_them_in_every_format(natural_db, run_cli, tmp_path):
    url, fit = natural_db
    codes = {f["code"]: f for f in fit["flags"]}
    for m, code in FLAG_CODES.items():
        assert code in codes and codes[code]["models"] == [m], (code, codes.get(code))
    expected = [codes[c]["message"] for c in FLAG_CODES.values()]
    assert expected[0] == "empty-model: empty answers: 30 of 30 (no length credit)"
    # fit as a table: one 'flag CODE: message' line each (stderr, with the warnings)
    again = _ok(run_cli("--database-url", url, "fit", "--task-family", "llmbar/Natural", "--judge", "GPT-4",
                        "--length-unit", "words", "--bootstrap", "0", "--no-nested", "--folds", "2"))
    for code, msg in zip(FLAG_CODES.values(), expected):
        assert f"flag {code}: {msg}" in " ".join(again.stderr.split()), code
    base = ("--database-url", url, "report", "--calibration", str(fit["id"]), "--bootstrap", "0")
    rep = _json(run_cli(*base, "--format", "json"))
    assert [f["message"] for f in rep["entries"][0]["flags"] if f["code"] in FLAG_CODES.values()] == expected
    table = " ".join(_ok(run_cli(*base)).stdout.split())
    md = _ok(run_cli(*base, "--format", "markdown")).stdout
    _ok(run_cli(*base, "--format", "html", "--out", tmp_path / "rep", "--no-plots"))
    html = (tmp_path / "rep" / "report.html").read_text()
    from html import escape

    from judgecal.report.render_markdown import md_escape

    for code, msg in zip(FLAG_CODES.values(), expected):
        assert f"{code}: {msg}" in table, code
        assert md_escape(msg) in md and "Flags:" in md, code
        assert escape(msg, quote=False) in html or escape(msg) in html, code


def test_check_fails_on_degenerate_answers_unless_allowed(natural_db, run_cli):
    url, fit = natural_db
    base = ("--database-url", url, "check", "--calibration", str(fit["id"]), "--min-agreement-gain", "-1",
            "--max-verbosity-winrate", "1", "--publish", "calibrated")
    strict = run_cli(*base, "--format", "json")
    assert strict.exit_code == 1
    checks = {c["check"]: c for c in json.loads(strict.stdout)["checks"]}
    deg = checks["degenerate_answers"]
    assert deg["ok"] is False and sorted(deg["value"]) == sorted(FLAG_CODES.values())
    for f in fit["flags"]:
        if f["code"] in FLAG_CODES.values():
            assert f["message"] in deg["message"]
    table = run_cli(*base)
    assert table.exit_code == 1 and "FAIL" in table.stderr and "degenerate answers" in table.stderr
    allowed = run_cli(*base, "--allow-degenerate-answers", "--format", "json")
    res = json.loads(allowed.stdout)
    checks = {c["check"]: c for c in res["checks"]}
    assert checks["degenerate_answers"]["ok"] is True and "allowed by --allow-degenerate-answers" in checks[
        "degenerate_answers"]["message"]
    others = [c["check"] for c in res["checks"] if not c["ok"]]
    assert allowed.exit_code == (1 if others else 0), others


@pytest.mark.parametrize("unit", ["chars", "words"])
def test_win_rate_mode_lifts_none_and_flags_them_in_every_format(guard_db, run_cli, unit):
    args = ("--database-url", guard_db, "leaderboard", "--judge", PAIRWISE_JUDGE, "--baseline", "llmbar/output_1",
            "--length-unit", unit, "--bootstrap", "0")
    board = _json(run_cli(*args, "--format", "json"))
    assert board["calibration"]["converged"] is True and board["calibration"]["short_floor"] == 0.25
    rows = _rows(board)
    for m in DEGENERATE:
        r = rows[m]
        assert r["rank_calibrated"] >= r["rank_raw"], (m, r)  # rank not improved
        # no gain at all (two-word answers are truncated: median 0.054 of the baseline's length, at or
        # below the floor squared): the calibrated rate is the raw one (to the fit's rounding)
        assert r["calibrated_win_rate"] <= r["win_rate"] + 0.01, (m, r)
    assert any("empty or repeated verbatim" in n for n in board["notes"])
    assert any("gain nothing from the calibration" in n and "truncated-model" in n for n in board["notes"])
    wanted = {"empty-model": "empty answers: 30 of 30 (no length credit)",
              "constant-model": "same answer to 100% of items (30 of 30; no length credit)",
              "truncated-model": next(f for f in rows["truncated-model"]["flags"] if f.startswith("truncated"))}
    # two words against the baseline's answer: 0.052 of its characters, 0.054 of its words
    assert re.fullmatch(r"truncated answers: median 0\.05[24] of the baseline's length, at or below 0\.0625 "
                        r"\(the floor squared; no gain from the calibration\)", wanted["truncated-model"])
    for m, msg in wanted.items():
        assert msg in rows[m]["flags"], (m, rows[m]["flags"])
    assert not [f for f in rows["llmbar/output_2"]["flags"] if "length credit" in f or "short-side floor" in f]
    table = _ok(run_cli(*args)).stdout
    md = _ok(run_cli(*args, "--format", "markdown")).stdout
    csv_out = _ok(run_cli(*args, "--format", "csv")).stdout
    from judgecal.report.render_markdown import md_escape
    from judgecal.views.winrates import FLAG_LEGEND

    short = {"empty-model": "empty", "constant-model": "constant", "truncated-model": "truncated"}
    table_flags, md_flags = _flag_cells(table), _flag_cells(md, md=True)
    legend = " ".join(table.split())
    for m, msg in wanted.items():
        code = short[m]
        assert code in table_flags[m] and code in md_flags[m], (m, table_flags.get(m), md_flags.get(m))
        assert f"{code} = {FLAG_LEGEND[code]}" in legend and md_escape(f"{code} = {FLAG_LEGEND[code]}") in md, code
        assert msg in csv_out, msg  # CSV and JSON keep the whole sentence


def test_a_calibration_stored_before_the_floor_is_applied_as_fitted_and_explained(natural_db, run_cli, tmp_path):
    """An old row (no short_floor, no degenerate-answer scan): the leaderboard applies its unbounded
    short side and says so; empty and repeated answers still earn no credit; check fails on it
    (it never looked for degenerate answers) unless allowed."""
    from sqlalchemy import create_engine
    from sqlalchemy.orm import Session

    from judgecal.db import models as m

    url, fit = natural_db
    path = tmp_path / "old.db"
    shutil.copy(url.removeprefix("sqlite:///"), path)
    old_url = f"sqlite:///{path}"
    engine = create_engine(old_url)
    with Session(engine) as s:
        row = s.get(m.Calibration, fit["id"])
        row.params = {k: v for k, v in row.params.items() if k != "short_floor"}
        row.data = {k: v for k, v in row.data.items() if k != "degenerate_answers"}
        s.commit()
    engine.dispose()
    own = ("--calibration", str(fit["id"]))
    board = _unidentified_board(run_cli, old_url, str(fit["id"]))
    assert any(f"calibration {fit['id']} (llmbar/Natural) was fitted before judgecal had the short-side floor" in n
               for n in board["notes"])
    rows = _rows(board)
    assert rows["empty-model"]["mean_calibrated"] == 0.0 and rows["constant-model"]["mean_calibrated"] == 2.0
    # the old function's short side is unbounded, but a far-short model gains nothing in the score board
    lift = rows["truncated-model"]["mean_calibrated"] - rows["truncated-model"]["mean_raw"]
    assert lift <= 1e-12
    assert "no gain from the calibration" in rows["truncated-model"]["degenerate_answers"][0]["message"]
    table = _ok(run_cli(*_board_args(old_url, *own))).stdout
    assert "note: calibration" in table and "short-side floor" in table
    base = ("--database-url", old_url, "check", "--calibration", str(fit["id"]), "--min-agreement-gain", "-1",
            "--max-verbosity-winrate", "1", "--publish", "calibrated", "--format", "json")
    for allow, ok in ((False, False), (True, True)):
        res = run_cli(*base, *(["--allow-degenerate-answers"] if allow else []))
        c = {c["check"]: c for c in json.loads(res.stdout)["checks"]}["degenerate_answers"]
        assert c["ok"] is ok
        # the stored flags remain: the fit found them, so they are listed even on the old row
        assert "empty-model" in c["message"]


def test_template_answers_are_one_answer_in_the_score_mode(tmp_path):
    """Issue 18 break-it: 'Here is my answer to request {i}: ...' escaped the byte-for-byte
    repeated-answer guard and rose from rank 3 to rank 1. Its template (digits, case, spacing
    normalised) is one answer: no length credit, flagged constant, read that way from the
    database by answer_keys."""
    from judgecal.calibrate.guards import model_flags, no_credit, template_key
    from judgecal.db.guarddata import answer_keys
    from judgecal.db.engine import get_engine, session_scope
    from judgecal.views import importing

    texts = [f"Here is my answer to request {i}: I believe  the best approach is to think carefully." for i in range(30)]
    assert len({template_key(t) for t in texts}) == 1
    # case and spacing fold; a short answer's number is the answer (issue 35): "Answer 12" is not "answer 7"
    assert template_key("Answer 12") == template_key("answer  12") != template_key("answer seven")
    assert template_key("Answer 12") != template_key("answer 7")
    keys = [template_key(t) for t in texts] + [template_key(f"a real answer about topic {c}") for c in "abcdefghij"]
    model = ["tmpl"] * 30 + ["real"] * 10
    item = list(range(30)) + list(range(10))
    words = [len(t.split()) for t in texts] + [5] * 10
    assert no_credit(model, item, keys, words).tolist() == [True] * 30 + [False] * 10
    flags = model_flags(model, item, keys, words)
    assert [f["code"] for f in flags["tmpl"]] == ["constant_answers"] and "real" not in flags
    url = f"sqlite:///{tmp_path / 't.db'}"
    src = tmp_path / "r.jsonl"
    src.write_text("\n".join(json.dumps({"task_family": "t", "prompt": f"q{i}", "model": "tmpl", "response": t})
                             for i, t in enumerate(texts)) + "\n")
    importing.import_generic(src, "responses", "jsonl", url=url)
    engine = get_engine(url)
    with session_scope(engine) as s:
        from sqlalchemy import select

        from judgecal.db import models as m

        got = answer_keys(s, list(s.scalars(select(m.Response.id))))
    engine.dispose()
    assert {k[2] for k in got.values()} == {template_key(texts[0])} and len(got) == 30


def test_a_transfer_checks_the_targets_answers(guard_db, donor, run_cli_module, tmp_path):
    """Issue 33 item 4: a calibration from Adversarial_Neighbor applied to Natural, whose empty,
    constant and truncated models the source never saw: flagged in table, JSON, Markdown and
    HTML, and check fails on them unless allowed."""
    base = ("--database-url", guard_db)
    tr = ("--calibration", str(donor["id"]), "--task-family", "llmbar/Natural", "--bootstrap", "0")
    rep = _json(run_cli_module(*base, "report", *tr, "--format", "json"))
    (entry,) = [e for e in rep["entries"] if e["task_family"] == "llmbar/Natural"]
    flags = {f["code"]: f["message"] for f in entry["flags"]}
    assert {"empty_answers", "constant_answers"} <= set(flags)
    assert flags["empty_answers"].startswith("llmbar/Natural (the target): empty-model: empty answers")
    assert "constant-model" in flags["constant_answers"]
    for fmt in ("table", "markdown"):
        text = _ok(run_cli_module(*base, "report", *tr, "--format", fmt)).stdout
        assert "llmbar/Natural (the target): " in text and "empty-model" in text and "constant-model" in text, fmt
    out = tmp_path / "rep"
    _ok(run_cli_module(*base, "report", *tr, "--out", str(out), "--no-plots"))
    html = (out / "report.html").read_text()
    assert "llmbar/Natural (the target): " in html and "empty-model" in html
    gate = ("check", "--calibration", str(donor["id"]), "--task-family", "llmbar/Natural", "--publish", "calibrated",
            "--allow-unidentified", "--min-agreement-gain", "-1", "--max-verbosity-winrate", "1", "--format", "json")
    res = run_cli_module(*base, *gate)
    deg = [c for c in json.loads(res.stdout)["checks"] if c["check"] == "degenerate_answers"
           and c["task_family"] == "llmbar/Natural"]
    assert res.exit_code == 1 and len(deg) == 1 and not deg[0]["ok"] and "empty-model" in deg[0]["message"]
    allowed = run_cli_module(*base, *gate, "--allow-degenerate-answers")
    deg = [c for c in json.loads(allowed.stdout)["checks"] if c["check"] == "degenerate_answers"
           and c["task_family"] == "llmbar/Natural"]
    assert deg[0]["ok"] and "allowed by --allow-degenerate-answers" in deg[0]["message"]
