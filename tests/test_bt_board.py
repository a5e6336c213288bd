"""``judgecal bt``: the Bradley-Terry board read from a real database (SQLite and PostgreSQL)
equals the fit of judgecal.calibrate.bt on the same battles read from the files; pairs beyond a
baseline, both orders, models set apart, verdicts left out, every output format, clear errors."""

from __future__ import annotations

import csv
import io
import json
import math

import numpy as np
import pytest

from judgecal.calibrate import bt
from judgecal.views import importing
from judgecal.views.btboard import build_bt_board

MODELS = ("alpaca-7b", "claude-2", "NullModel", "gpt4_gamed")
BASE = "gpt4_1106_preview"


def _from_files(data_dir):
    """The battles of MODELS against the baseline read straight from the annotations files."""
    rows = []
    for name in MODELS:
        path = data_dir / "alpaca_eval" / "results" / name / "weighted_alpaca_eval_gpt4_turbo" / "annotations.json"
        for r in json.loads(path.read_text(encoding="utf-8")):
            if r.get("preference") is not None:
                rows.append((name, float(r["preference"]) - 1.0, r["instruction"]))
    models = sorted(set(MODELS) | {BASE})
    items = {t: i for i, t in enumerate(sorted({r[2] for r in rows}))}
    a = np.array([models.index(r[0]) for r in rows])
    y = np.array([r[1] for r in rows])
    it = np.array([items[r[2]] for r in rows])
    d = bt.make_design(a, np.full(a.size, models.index(BASE)), y, np.ones(a.size), it, len(models), len(items))
    return models, bt.fit_bt(d, models.index(BASE))


def test_board_equals_the_fit_on_the_files(db_url, data_dir, run_cli):
    res = data_dir / "alpaca_eval" / "results"
    importing.import_alpaca_eval([res / n for n in MODELS], [], None, db_url)
    models, fit = _from_files(data_dir)
    board = build_bt_board(url=db_url, n_bootstrap=50, seed=1)
    assert board["baseline"] == BASE and board["n_models"] == 5 and board["n_pairs"] == 4
    got = {r["model"]: r for r in board["rows"]}
    ratings = bt.ratings(fit.coef)
    # NullModel, one fixed answer for everything, beats the baseline with this judge (the known exploit: 76.9%
    # in the fit): the gaming guard sets it apart (tests/test_bt_guards.py), its battles stay in the fit
    assert float(bt.win_rate(ratings[models.index("NullModel")], 1000.0)) > 0.7
    # gpt4_gamed's answers are truncated (a few characters): set apart too
    assert [x["model"] for x in board["set_apart"]] == ["NullModel", "gpt4_gamed"]
    for i, name in enumerate(models):
        if name in ("NullModel", "gpt4_gamed"):
            continue
        assert got[name]["rating"] == pytest.approx(ratings[i], abs=1e-9)
        lo, hi = got[name]["win_rate_ci"]
        assert lo <= got[name]["win_rate"] <= hi
    assert got[BASE]["rating"] == 1000.0 and got[BASE]["win_rate"] == 50.0
    assert board["rows"][0]["model"] == BASE and "NullModel" not in got
    assert [r["rank"] for r in board["rows"]] == [1, 2, 3]
    # the same board from the command line, every format
    r = run_cli("--database-url", db_url, "bt", "--bootstrap", "50", "--seed", "1", "--format", "json")
    assert r.exit_code == 0, r
    assert json.loads(r.stdout)["rows"] == json.loads(json.dumps(board["rows"]))
    r = run_cli("--database-url", db_url, "bt", "--bootstrap", "0", "--format", "csv")
    assert r.exit_code == 0, r
    rows = list(csv.DictReader(io.StringIO(r.stdout)))
    assert rows[1]["model"] == "claude-2" and float(rows[1]["rating"]) == pytest.approx(got["claude-2"]["rating"])
    r = run_cli("--database-url", db_url, "bt", "--bootstrap", "0", "--format", "markdown")
    assert r.exit_code == 0 and "| claude-2 |" in r.stdout and "Arena-Hard-Auto" in r.stdout, r
    r = run_cli("--database-url", db_url, "bt", "--bootstrap", "20", "--columns", "model,rating,win_rate")
    assert r.exit_code == 0 and "claude-2" in r.stdout, r
    # errors: one line, non-zero
    for args, says in ((("--baseline", "nobody"), "baseline 'nobody' has no usable verdict"),
                       (("--task-family", "nope"), "task family 'nope' does not exist"),
                       (("--format", "json", "--wide"), "--wide applies to"),
                       (("--bootstrap", "5"), "at least 20")):
        r = run_cli("--database-url", db_url, "bt", *args)
        assert r.exit_code != 0 and says in r.stderr and "Traceback" not in r.output, (args, r)


def _verdict(prompt, ma, mb, pref, position="ab", judge="j"):
    return {"prompt": prompt, "model_a": ma, "response_a": f"{ma} says {prompt}", "model_b": mb,
            "response_b": f"{mb} says {prompt}", "judge": judge, "preference": pref, "position": position,
            "task_family": "fam"}


def test_all_pairs_both_orders_set_apart_and_left_out(sqlite_url, tmp_path):
    recs = []
    # a cycle A > B > C > A, 2:1 each, judged in both orders: every rating equal
    for k, (x, z) in enumerate((("A", "B"), ("B", "C"), ("C", "A"))):
        for j, pref in enumerate((1.0, 1.0, 0.0)):
            p = f"q{k}{j}"
            recs.append(_verdict(p, x, z, pref, "ab"))
            recs.append(_verdict(p, x, z, pref, "ba"))  # the other order shown: another battle
    # D wins every battle (against A), E meets nobody else, A against itself is no battle
    recs += [_verdict("d1", "D", "A", 1.0), _verdict("d2", "A", "D", 0.0), _verdict("e1", "E", "F", 0.5),
             {**_verdict("s1", "A", "A", 0.5), "response_b": "A's second answer"}]
    recs.append({**_verdict("u1", "A", "B", None), "status": "unparsed", "raw_output": "?"})
    path = tmp_path / "v.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in recs), encoding="utf-8")
    importing.import_generic(path, "verdicts", "jsonl", None, sqlite_url)
    board = build_bt_board(url=sqlite_url, baseline="A", n_bootstrap=0)
    got = {r["model"]: r for r in board["rows"]}
    assert set(got) == {"A", "B", "C"}
    for name in "ABC":
        assert got[name]["rating"] == pytest.approx(1000.0, abs=1e-9)
        assert got[name]["n_battles"] == 12 and got[name]["n_opponents"] == 2
    assert [r["rank"] for r in board["rows"]] == [1, 1, 1]
    apart = {x["model"]: x["why"] for x in board["set_apart"]}
    assert apart["D"].startswith("won every battle") and apart["E"].startswith("no verdict links")
    assert set(apart) == {"D", "E", "F"}
    assert board["left_out"] == {"both answers are one model's": 1, "verdict unparsed": 1}
    assert board["n_pairs"] == 5 and board["n_battles"] == 18 + 3  # every usable verdict, set-apart ones too
    # no baseline named by the verdicts: --baseline is needed, and the message says so
    with pytest.raises(Exception, match="give --baseline MODEL"):
        build_bt_board(url=sqlite_url, n_bootstrap=0)
    # hard verdicts: the stored verdict column read as 1 / 0 / 0.5 gives the same cycle
    hard = build_bt_board(url=sqlite_url, baseline="B", outcome="verdict", n_bootstrap=0)
    assert all(math.isclose(r["rating"], 1000.0, abs_tol=1e-9) for r in hard["rows"])
