"""Issue 23 item 3, "no numbers from noise": a calibration the data do not identify gives no
calibrated value (the cell is empty, the reason is in every format); rank changes are computed
on the displayed precision; a fit at its bound is flagged in every format. Win-rate board on
SQLite and PostgreSQL; the score board's unidentified fits on real LLMBar data are in
tests/test_guards.py (``_unidentified_board``)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import numpy as np
import pytest

from judgecal.calibrate.identify import MIN_DECISIVE, winrate_identification
from judgecal.calibrate.ranking import rank_change, ranks, shown, shown_ranks
from judgecal.calibrate.winrate_penalty import GAMMA_MAX, fit_penalty


# ----------------------------------------------------------------------------- pure: ranks
def test_ranks_on_the_displayed_precision():
    # 50.0003 and 49.9996 are both shown as 50.00: one rank, whatever the noise below the last digit
    assert shown(50.0003, 2) == shown(49.9996, 2) == 50.0 and shown(50.005000001, 2) == 50.01
    assert ranks([50.0003, 50.0, 49.9996]).tolist() == [1, 2, 3]  # unrounded: three ranks
    assert ranks([50.0003, 50.0, 49.9996], 2).tolist() == [1, 1, 1]
    assert shown_ranks([60.4422, None, 60.4419, 59.52, float("nan")], 2) == [1, None, 1, 3, None]
    assert rank_change(3, 1) == 2 and rank_change(None, 1) is None and rank_change(2, None) is None


# ----------------------------------------------------------------------------- pure: identification
def _fit(pref, len_model, len_baseline, model=None):
    n = len(pref)
    model = np.zeros(n, dtype=int) if model is None else np.asarray(model)
    return fit_penalty(model, np.asarray(pref, dtype=float), np.asarray(len_model, dtype=float),
                       np.asarray(len_baseline, dtype=float), np.zeros(n), int(model.max()) + 1)


def test_winrate_identification_known_cases():
    rng = np.random.default_rng(0)
    lb = rng.integers(40, 60, 120).astype(float)
    lm = rng.integers(10, 200, 120).astype(float)
    model = np.repeat([0, 1, 2], 40)
    # a judge with a real length preference: identified, gamma near the planted 1.0
    z = 0.3 * (model - 1) + 1.0 * np.log(lm / lb)
    good = _fit((rng.random(120) < 1 / (1 + np.exp(-z))).astype(float), lm, lb, model)
    ident = winrate_identification(good)
    assert ident["identified"] is True and ident["reasons"] == [] and 0.3 < good.gamma < 2.0, ident
    assert ident["gamma_ci"][0] < good.gamma < ident["gamma_ci"][1]
    # all ties (the case: every answer one character longer than the baseline's)
    ties = winrate_identification(_fit(np.full(120, 0.5), lb + 1, lb, model))
    assert ties["identified"] is False
    assert ties["reasons"][0] == ("all 120 verdicts of the fit are ties: the judge never preferred a side, so its "
                                  "length preference cannot be estimated")
    # decisive verdicts, every answer exactly the baseline's length: the penalty is 0 everywhere
    y = (np.arange(120) % 3 == 0).astype(float)
    same = winrate_identification(_fit(y, lb, lb, model))
    assert same["identified"] is False and same["evidence"]["n_with_length"] == 0
    assert any(r.startswith("every answer has the baseline's length") for r in same["reasons"])
    # every answer twice the baseline's length: the penalty is one constant, confounded with theta
    double = winrate_identification(_fit(y, 2 * lb, lb, model))
    assert double["identified"] is False and double["evidence"]["information_share"] == 0
    assert any("does not vary within any model" in r for r in double["reasons"])
    # 10 verdicts that length decides completely: gamma at its upper bound, too few decisive verdicts
    base = 40 + np.arange(10.0)
    longer = np.arange(10) % 2 == 0
    bound_fit = _fit(np.where(longer, 0.999999, 0.000001), np.where(longer, base + 2, base - 2), base)
    bound = winrate_identification(bound_fit)
    assert bound_fit.at_bound["gamma"] and bound_fit.gamma == pytest.approx(GAMMA_MAX)
    assert bound["identified"] is False and len(bound["reasons"]) == 2
    assert bound["reasons"][0].startswith(f"only 10 of the fit's 10 verdicts are decisive (not ties), fewer than "
                                          f"{MIN_DECISIVE}")
    assert bound["reasons"][1] == "gamma 50 sits at its upper bound 50: the bound, not the verdicts, sets it"


# ----------------------------------------------------------------------------- the boards, both dialects
def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _rec(i, model, answer, baseline, pref):
    return {"task_family": "fam", "prompt": f"P{i}", "model_a": model, "response_a": answer, "model_b": "base",
            "response_b": baseline, "judge": "J", "preference": pref, "baseline": "b"}


def _tie_rows():
    """The issue's case: three models, 40 instructions, every verdict a tie, every answer the
    baseline's plus one character."""
    return [_rec(i, mm, f"baseline answer {i} " + "y" * (20 + i % 17) + "z", f"baseline answer {i} " + "y" * (20 + i % 17),
                 0.5) for i in range(40) for mm in ("m1", "m2", "m3")]


def _bound_rows():
    """10 verdicts of one model that length decides completely (answers 5% longer win, 5% shorter lose)."""
    return [_rec(i, "m1", "x" * (40 + i + (2 if i % 2 == 0 else -2)), "y" * (40 + i),
                 0.999999 if i % 2 == 0 else 0.000001) for i in range(10)]


def _noise_rows():
    """mA and mB: the same verdicts, mB's answer to P0 25 characters longer (of 2000): their
    calibrated win rates differ by about 3e-4 points; mC is another model of the pool."""
    rows = []
    for i in range(40):
        base = f"baseline answer {i} " + "y" * (20 + i % 17)
        for mm in ("mA", "mB", "mC"):
            if mm == "mC":
                rows.append(_rec(i, mm, f"{mm} {i} " + "x" * (5 + (i * 11) % 50), base, float(i % 2)))
                continue
            n = (2000 if i == 0 else 5 + (i * 7) % 60) + (25 if (mm == "mB" and i == 0) else 0)
            rows.append(_rec(i, mm, f"{mm} {i} " + "x" * n, base, 1.0 if (i * 7) % 60 > 25 else 0.0))
    return rows


def _db(run_cli, url, tmp_path, rows, bootstrap: int = 50) -> tuple:
    r = run_cli("--database-url", url, "import", "jsonl", str(_write(tmp_path / "v.jsonl", rows)), "--kind", "verdicts")
    assert r.exit_code == 0, r
    return ("--database-url", url, "leaderboard", "--baseline", "base", "--bootstrap", str(bootstrap))


def _run(run_cli, args, *extra):
    r = run_cli(*args, *extra)
    assert r.exit_code == 0 and "Traceback" not in r.stderr, r
    return r


def _table_rows(text: str) -> dict[str, list[str]]:
    """{model: [cells]} of a rich table's body rows."""
    out = {}
    for line in text.splitlines():
        if line.count("│") > 2:
            cells = [c.strip() for c in line.split("│")[1:-1]]
            if cells[0]:
                out[cells[0]] = cells
    return out


def _page(url: str, query: str) -> str:
    pytest.importorskip("starlette")
    pytest.importorskip("httpx")
    from starlette.testclient import TestClient

    from judgecal.web import create_app

    r = TestClient(create_app(url)).get(f"/winrates?{query}")
    assert r.status_code == 200, r.text[:500]
    return r.text


@pytest.mark.timeout(300)
def test_all_tie_verdicts_give_no_calibrated_values_in_any_format(db_url, tmp_path, run_cli):
    args = _db(run_cli, db_url, tmp_path, _tie_rows())
    reason = "all 120 verdicts of the fit are ties"
    board = json.loads(_run(run_cli, args, "--format", "json").stdout)
    cal = board["calibration"]
    assert cal["identified"] is False and cal["identification"]["reasons"][0].startswith(reason)
    assert any(n.startswith("calibrated: not identified, no calibrated win rate is shown: " + reason) for n in board["notes"])
    assert len(board["rows"]) == 4
    for r in board["rows"]:  # before: 49.90 with CI [49.90, 49.90] for every model
        assert r["calibrated_win_rate"] is None and r["calibrated_win_rate_ci"] is None, r
        assert r["rank_calibrated"] is None and r["rank_change_calibrated"] is None and r["calibrated_strength"] is None
        assert "cal-unidentified" in r["flag_codes"] and any(reason in f for f in r["flags"])
        assert r["win_rate"] == 50.0
        if r["model"] != "base":  # every answer longer: LC is not identified either, and not shown
            assert "lc-unidentified" in r["flag_codes"]
            assert r["length_controlled_winrate"] is None and r["length_controlled_winrate_ci"] is None
            assert r["lc_standard_error"] is None and r["rank_lc"] is None and r["rank_change_lc"] is None
    # table: the calibrated and LC cells are empty, the reason under the table
    table = _run(run_cli, args, "--columns", "model,win rate,LC win rate,calibrated,flags").stdout
    cells = _table_rows(table)
    assert set(cells) == {"base", "m1", "m2", "m3"}
    for mm, row in cells.items():
        assert row[3] == "-" and "cal-unidentified" in row[4], row
        assert row[2] == ("50.00" if mm == "base" else "-"), row
    flat = " ".join(table.split())
    assert reason in flat and "calibrated: not identified (no values; the notes say why)" in flat
    assert "cal-unidentified = calibration not identified" in flat and "49.9" not in table
    # CSV: empty cells, the reason in the flags sentence of every row
    rows = list(csv.DictReader(io.StringIO(_run(run_cli, args, "--format", "csv").stdout)))
    assert len(rows) == 4 and all(r["calibrated_win_rate"] == "" and r["calibrated_win_rate_ci"] == "" for r in rows)
    assert all(reason in r["flags"] and "cal-unidentified" in r["flag_codes"] for r in rows)
    # AlpacaEval's CSV: empty cells, the code in its flags column, the reason on stderr
    res = _run(run_cli, args, "--format", "alpaca-eval")
    ae = list(csv.DictReader(io.StringIO(res.stdout)))
    assert all(r["calibrated_win_rate"] == "" and r["calibrated_ci_low"] == "" and "cal-unidentified" in r["flags"]
               for r in ae)
    assert reason in res.stderr
    # Markdown: empty cells (an escaped dash), the reason and the legend under the table
    md = _run(run_cli, args, "--format", "markdown").stdout
    body = [ln for ln in md.splitlines() if ln.startswith("| m") and not ln.startswith("| model")]
    assert len(body) == 3 and all("cal-unidentified" in ln and "49.9" not in ln for ln in body)
    assert reason in md and "cal-unidentified = calibration not identified" in md
    # the web page (the same board, the same cells and notes)
    html = _page(db_url, "baseline=base&family=fam&judge=J&bootstrap=50")
    assert reason in html and "cal-unidentified" in html and "49.9" not in html


@pytest.mark.timeout(300)
def test_a_fit_at_its_bound_is_flagged_in_every_format(db_url, tmp_path, run_cli):
    args = _db(run_cli, db_url, tmp_path, _bound_rows())
    why = "gamma 50 sits at its upper bound 50"
    board = json.loads(_run(run_cli, args, "--format", "json").stdout)
    assert board["calibration"]["at_bound"] == {"gamma": True, "p": True}
    m1 = {r["model"]: r for r in board["rows"]}["m1"]
    assert m1["flag_codes"] == ["few", "cal-unidentified", "bound"] and m1["calibrated_win_rate"] is None
    assert any(f.startswith("calibration fit at a bound: " + why) for f in m1["flags"])
    assert "bound" in board["flag_legend"]
    table = _run(run_cli, args, "--columns", "model,calibrated,flags").stdout
    assert _table_rows(table)["m1"][1:] == ["-", "few cal-unidentified bound"]
    flat = " ".join(table.split())
    assert why in flat and "bound = a parameter of the calibration fit sits at its bound" in flat
    md = _run(run_cli, args, "--format", "markdown").stdout
    assert "few cal-unidentified bound |" in md and why in md and "bound = a parameter of the calibration fit" in md
    rows = {r["model"]: r for r in csv.DictReader(io.StringIO(_run(run_cli, args, "--format", "csv").stdout))}
    assert json.loads(rows["m1"]["flag_codes"]) == ["few", "cal-unidentified", "bound"] and why in rows["m1"]["flags"]
    ae = {r[""]: r for r in csv.DictReader(io.StringIO(_run(run_cli, args, "--format", "alpaca-eval").stdout))}
    assert ae["m1"]["flags"] == "few cal-unidentified bound"
    html = _page(db_url, "baseline=base&family=fam&judge=J&bootstrap=50")
    assert "few cal-unidentified bound" in html and why in html


@pytest.mark.timeout(300)
def test_noise_below_the_shown_digits_makes_no_rank_change(db_url, tmp_path, run_cli):
    args = _db(run_cli, db_url, tmp_path, _noise_rows(), bootstrap=0)
    board = json.loads(_run(run_cli, args, "--format", "json").stdout)
    assert board["calibration"]["identified"] is True and board["rank_decimals"] == 2
    rows = {r["model"]: r for r in board["rows"]}
    a, b = rows["mA"], rows["mB"]
    diff = a["calibrated_win_rate"] - b["calibrated_win_rate"]
    assert 1e-4 < diff < 1e-3, diff  # a real difference, of fitting size, below the second decimal
    assert f"{a['calibrated_win_rate']:.2f}" == f"{b['calibrated_win_rate']:.2f}" == "60.44"
    assert a["win_rate"] == b["win_rate"] and a["rank_raw"] == b["rank_raw"] == 1
    # before: mB rank 2, "change cal. -1"; now one rank, no change
    assert a["rank_calibrated"] == b["rank_calibrated"] == 1
    assert a["rank_change_calibrated"] == b["rank_change_calibrated"] == 0
    # a difference that is shown still moves a rank: mC (59.52) below both, the baseline (50.00) last
    assert rows["mC"]["rank_calibrated"] == 3 and rows["base"]["rank_calibrated"] == 4
    assert rows["base"]["rank_raw"] == rows["mC"]["rank_raw"] == 3 and rows["base"]["rank_change_calibrated"] == -1
    table = _table_rows(_run(run_cli, args, "--columns", "model,calibrated,rank cal.,change cal.").stdout)
    assert table["mA"][1:] == table["mB"][1:] == ["60.44", "1", "0"]


def test_score_board_ranks_on_the_displayed_means(db_url, tmp_path, run_cli):
    """Two models whose mean judge scores differ by 3e-4 (5.0000 and 5.0003, both shown 5.000)
    share a rank on the score board."""
    rows = [{"task_family": "fam", "prompt": f"Q{i}", "model": mm, "response": f"{mm} answer {i}", "judge": "J",
             "score": s, "scale_min": 0, "scale_max": 10}
            for mm, scores in (("a", [5.0, 5.0]), ("b", [5.0006, 5.0]), ("c", [4.0, 4.0])) for i, s in enumerate(scores)]
    r = run_cli("--database-url", db_url, "import", "jsonl", str(_write(tmp_path / "r.jsonl", rows)), "--kind", "ratings")
    assert r.exit_code == 0, r
    board = json.loads(_run(run_cli, ("--database-url", db_url, "leaderboard", "--bootstrap", "0", "--format", "json")).stdout)
    by = {r["model"]: r for r in board["rows"]}
    assert by["b"]["mean_raw"] - by["a"]["mean_raw"] == pytest.approx(3e-4)
    assert by["a"]["rank_raw"] == by["b"]["rank_raw"] == 1 and by["c"]["rank_raw"] == 3
    assert by["a"]["rank_change"] == by["b"]["rank_change"] == 0
