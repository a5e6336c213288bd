"""The win-rate leaderboard's inputs besides the database (--compare-to, --lc-weights) and its
honesty on degenerate data: every malformed file is a FILE:LINE error, a row left out is
named, an undefined correlation says why (strict JSON, no NaN, no Python warning), an LC win
rate that the data cannot identify is flagged, judges of the same name are told apart."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest

from judgecal.calibrate.winrate import rank_correlation
from judgecal.errors import InputError
from judgecal.views.winrates import parse_number, read_ranking, read_weights

MODELS = ("m1", "m2", "m3")


def _verdicts(path: Path, *, same_text: bool = False, params: dict | None = None, n_items: int = 40,
              family: str = "fam") -> Path:
    """Pairwise verdicts of three models against ``base``: m1 wins 3 in 4, m2 1 in 2, m3 1 in 4;
    the models' answers are shorter or longer than the baseline's (or all one short text)."""
    rows = []
    for i in range(n_items):
        for k, mm in enumerate(MODELS):
            pref_b = 1.0 if (i % 4) < 3 - k else 0.0  # P(model, on side a, preferred) below
            text = "same text" if same_text else f"{mm} answer {i} " + "x" * (5 + (i * 7 + k * 13) % 60)
            rec = {"task_family": family, "prompt": f"P{i}", "model_a": mm, "response_a": text, "model_b": "base",
                   "response_b": f"baseline answer {i} " + "y" * (20 + i % 17), "judge": "J",
                   "preference": pref_b, "baseline": "b"}
            if params:
                rec["judge_params"] = params
            rows.append(json.dumps(rec))
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


@pytest.fixture()
def board_db(tmp_path, run_cli):
    url = f"sqlite:///{tmp_path / 'wr.db'}"
    env = {"JUDGECAL_DATABASE_URL": url}
    assert run_cli("db", "upgrade", env=env).exit_code == 0
    r = run_cli("import", "jsonl", _verdicts(tmp_path / "v.jsonl"), "--kind", "verdicts", env=env)
    assert r.exit_code == 0, r
    return env


def _write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_bytes(text.encode("utf-8"))
    return p


@pytest.mark.parametrize("text, line, message", [
    ('model,score\n"m1,1\n', 2, "a quoted field is never closed"),
    ("model,score\nm1,1\nm2\n", 3, "row has 1 fields, the header has 2"),
    ("model,score\nm1,1\nm2,2,3\n", 3, "row has 3 fields, the header has 2"),
    ("model,score\nm1,10\nm2,5\nm1,20\n", 4, "model 'm1' appears twice (first on line 2)"),
    ("model,score\n", 2, "no data rows"),
    ("model,score\nm1,1_0\n", 2, "'1_0' is not a number"),
    ("model,score\nm1,NaN\n", 2, "'NaN' is not a number"),
    ("model,score\nm1,1e400\n", 2, "not a finite number"),
    ("model,score\n,3\n", 2, "empty model name"),
    ("model,model,score\nm1,a,3\n", 1, "column 'model' appears twice in the header row (columns 1 and 2)"),
])
def test_compare_to_malformed_is_file_line(tmp_path, text, line, message):
    p = _write(tmp_path, "r.csv", text)
    with pytest.raises(InputError) as exc:
        read_ranking(p)
    assert f"{p}:{line}:" in str(exc.value) and message in str(exc.value)


def test_compare_to_pandas_index_column_and_empty_cells(tmp_path):
    # AlpacaEval's leaderboard.csv: an unnamed index column of model names
    p = _write(tmp_path, "lb.csv", ",win_rate,mode\nm1,70.5,x\nm2,,x\nm3,.5,x\n")
    scores, no_score = read_ranking(p, "win_rate")
    assert scores == {"m1": 70.5, "m3": 0.5}
    assert no_score == {"m2": 3}


def test_parse_number_grammar():
    assert [parse_number(t) for t in ("12", "-0.5", ".5", "1e-05", " 3 ", "+2")] == [12, -0.5, 0.5, 1e-05, 3, 2]
    for bad in ("1_0", "nan", "inf", "0x1", "", "1.2.3", "1e"):
        with pytest.raises(ValueError):
            parse_number(bad)


def test_lc_weights_real_file_and_malformed(tmp_path, data_dir):
    real = data_dir / "alpaca_eval" / "length_controlled_v1_weights.csv"
    w = read_weights(real)
    lines = real.read_text(encoding="utf-8").splitlines()
    assert len(w) == len(lines) - 1
    first = lines[1].split(",")
    assert w[first[0]] == tuple(float(x) for x in first[1:4])
    dup = _write(tmp_path, "w.csv", "\n".join(lines[:3] + [lines[1].split(",")[0] + ",9,9,9"]) + "\n")
    with pytest.raises(InputError, match=rf"{dup}:4: model '{first[0]}' appears twice \(first on line 2\)"):
        read_weights(dup)
    huge = _write(tmp_path, "h.csv", lines[0] + "\nx,1e308,0,0\n")
    with pytest.raises(InputError, match=rf"{huge}:2: a weight of 1e\+308 is not a GLM weight"):
        read_weights(huge)
    short = _write(tmp_path, "s.csv", lines[0] + "\nx,1,2\n")
    with pytest.raises(InputError, match=rf"{short}:2: row has 3 fields, the header has 4"):
        read_weights(short)
    # issue 23: the header is checked: AlpacaEval's leaderboard.csv (which moved claude-2's LC from
    # 30.24 to 21.85) and any other header or column count are refused at line 1
    board = data_dir / "alpaca_eval" / "leaderboard.csv"
    with pytest.raises(InputError, match=rf"{board}:1: expected AlpacaEval's GLM weights header .*pass it to --compare-to"):
        read_weights(board)
    for head in ("foo,bar,baz,qux", lines[0] + ",extra", ",w_len,w_diff,w_bias"):
        other = _write(tmp_path, "o.csv", head + "\nx,1,2,3" + (",4" if head.endswith("extra") else "") + "\n")
        with pytest.raises(InputError, match=rf"{other}:1: expected AlpacaEval's GLM weights header"):
            read_weights(other)


def test_rank_correlation_constant_is_undefined_without_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rc = rank_correlation([1.0, 2.0, 3.0, 4.0], [5.0, 5.0, 5.0, 5.0], n_bootstrap=50)
    assert rc["spearman"] is None and rc["kendall"] is None
    assert rc["undefined"] == "every external score is the same (5)"
    assert rank_correlation([1, 2], [1, 2])["undefined"] == "2 models in common (3 or more are needed)"
    ok = rank_correlation([1, 2, 3], [1, 3, 2], n_bootstrap=0)
    assert ok["undefined"] is None and ok["spearman"] == pytest.approx(0.5)


def test_leaderboard_compare_to_constant_and_empty_cell(tmp_path, board_db, run_cli):
    const = _write(tmp_path, "c.csv", "model,score\nm1,1\nm2,1\nm3,1\n")
    r = run_cli("leaderboard", "--baseline", "base", "--bootstrap", "20", "--format", "json", "--compare-to", const,
                env=board_db)
    assert r.exit_code == 0, r
    assert "Warning" not in r.stderr
    board = json.loads(r.stdout, parse_constant=lambda c: pytest.fail(f"non-JSON constant {c}"))
    assert board["comparison"]["raw"]["spearman"] is None
    assert board["comparison"]["raw"]["undefined"] == "every external score is the same (1)"
    gap = _write(tmp_path, "g.csv", "model,score\nm1,3\nm2,\nm3,1\n")
    r = run_cli("leaderboard", "--baseline", "base", "--bootstrap", "0", "--compare-to", gap, env=board_db)
    assert r.exit_code == 0, r
    assert f"1 models of {gap} have an empty score cell and were left out of the correlations: m2 (line 3)" in r.stdout
    assert f"not in {gap}: base\n" in r.stdout  # m2 is in the file: not listed as unmatched
    r = run_cli("leaderboard", "--baseline", "base", "--bootstrap", "0", "--compare-to",
                _write(tmp_path, "u.csv", 'model,score\n"m1,3\n'), env=board_db)
    assert r.exit_code == 2 and "u.csv:2: a quoted field is never closed" in r.stderr


def test_csv_footer_lines_keep_their_own_prefix(board_db, run_cli):
    r = run_cli("leaderboard", "--baseline", "base", "--bootstrap", "0", "--format", "csv", env=board_db)
    assert r.exit_code == 0, r
    notes = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert notes and all(ln.startswith(("note: ", "left out: ")) for ln in notes), notes
    assert r.stdout.splitlines()[0].startswith("model,")


def test_lc_not_identified_when_every_answer_is_shorter(tmp_path, run_cli):
    url = f"sqlite:///{tmp_path / 'same.db'}"
    env = {"JUDGECAL_DATABASE_URL": url}
    run_cli("db", "upgrade", env=env)
    assert run_cli("import", "jsonl", _verdicts(tmp_path / "s.jsonl", same_text=True), "--kind", "verdicts",
                   env=env).exit_code == 0
    r = run_cli("leaderboard", "--baseline", "base", "--bootstrap", "0", "--format", "json", env=env)
    rows = {row["model"]: row for row in json.loads(r.stdout)["rows"]}
    for mm in MODELS:
        assert any(f.startswith("LC not identified: 0 of 40 answers longer than the baseline's") for f in rows[mm]["flags"]), rows[mm]
    # ordinary data: answers on both sides of the baseline's length, no such flag
    assert run_cli("import", "jsonl", _verdicts(tmp_path / "v.jsonl", family="other"), "--kind", "verdicts",
                   env=env).exit_code == 0
    r = run_cli("leaderboard", "--baseline", "base", "--bootstrap", "0", "--format", "json", "--task-family", "other",
                env=env)
    assert r.exit_code == 0, r
    assert not any("LC not identified" in f for row in json.loads(r.stdout)["rows"] for f in row["flags"])


def test_judges_of_one_name_are_told_apart(tmp_path, board_db, run_cli):
    r = run_cli("import", "jsonl", _verdicts(tmp_path / "v2.jsonl", params={"temperature": 1}), "--kind", "verdicts",
                env=board_db)
    assert r.exit_code == 0, r
    stats = json.loads(run_cli("stats", "--format", "json", env=board_db).stdout)
    fam = next(f for f in stats if f["task_family"] == "fam")
    assert set(fam["pairwise_verdicts"]) == {"J (id 1)", "J (id 2)"}
    n = 3 * 40
    assert fam["pairwise_verdicts"]["J (id 1)"] == {"ok": n} and fam["pairwise_verdicts"]["J (id 2)"] == {"ok": n}
    r = run_cli("leaderboard", "--baseline", "base", "--judge", "J", env=board_db)
    assert r.exit_code == 2
    assert "1 (model J, pairwise, endpoint import" in r.stderr and 'params {"temperature":1}' in r.stderr
    r = run_cli("leaderboard", "--baseline", "base", "--judge", "2", "--bootstrap", "0", "--format", "json", env=board_db)
    assert r.exit_code == 0, r
    assert np.isclose({row["model"]: row for row in json.loads(r.stdout)["rows"]}["m1"]["win_rate"], 75.0)


def test_only_unparsed_verdicts_are_counted_in_the_errors(tmp_path, run_cli):
    env = {"JUDGECAL_DATABASE_URL": f"sqlite:///{tmp_path / 'up.db'}"}
    run_cli("db", "upgrade", env=env)
    rows = [json.dumps({"task_family": "fam", "prompt": f"P{i}", "model_a": mm, "response_a": f"{mm} {i}",
                        "model_b": "base", "response_b": f"base {i}", "judge": "J", "baseline": "b"})
            for i in range(5) for mm in MODELS]  # no preference: stored as unparsed verdicts
    (tmp_path / "u.jsonl").write_text("\n".join(rows) + "\n", encoding="utf-8")
    assert run_cli("import", "jsonl", tmp_path / "u.jsonl", "--kind", "verdicts", env=env).exit_code == 0
    r = run_cli("leaderboard", "--baseline", "base", env=env)
    assert r.exit_code != 0 and "no usable verdicts of judge 'J' against baseline 'base' in fam (left out: 15 verdict unparsed)" in r.stderr
    r = run_cli("report", env=env)
    assert r.exit_code != 0 and "(stored, but none usable: 15 unparsed)" in r.stderr


def test_several_verdicts_per_answer_beside_left_out_ones(tmp_path, run_cli):
    """Two samples per (model, item), one of them unparsed for one item: the win rate averages
    each (model, item)'s usable verdicts (db.verdicts.baseline_verdicts reads the content keys
    with the verdicts; the rows it keeps are a subset of those it read)."""
    env = {"JUDGECAL_DATABASE_URL": f"sqlite:///{tmp_path / 'multi.db'}"}
    run_cli("db", "upgrade", env=env)
    rows = []
    for i in range(8):
        for k in (0, 1):
            rec = {"task_family": "fam", "prompt": f"P{i}", "model_a": "m1", "response_a": f"m1 answer {i}",
                   "model_b": "base", "response_b": f"baseline answer {i} longer", "judge": "J", "baseline": "b",
                   "sample_index": k, "preference": 1.0 if (i + k) % 4 else 0.0}
            if i == 0 and k == 1:
                rec.pop("preference")  # stored as unparsed: left out
            rows.append(json.dumps(rec))
    (tmp_path / "m.jsonl").write_text("\n".join(rows) + "\n", encoding="utf-8")
    assert run_cli("import", "jsonl", tmp_path / "m.jsonl", "--kind", "verdicts", env=env).exit_code == 0
    r = run_cli("leaderboard", "--baseline", "base", "--bootstrap", "0", "--format", "json", env=env)
    assert r.exit_code == 0, r
    out = json.loads(r.stdout)
    # per item: i=0 -> its one usable verdict 0.0; otherwise the mean of (i % 4 != 0) and ((i + 1) % 4 != 0)
    per_item = [0.0] + [((i % 4 != 0) + ((i + 1) % 4 != 0)) / 2 for i in range(1, 8)]
    m1 = next(row for row in out["rows"] if row["model"] == "m1")
    assert np.isclose(m1["win_rate"], 100 * sum(per_item) / 8) and m1["n_items"] == 8
    assert out["left_out"] == {"verdict unparsed": 1}
