"""``judgecal report``'s Bradley-Terry section (issue 34 item 6): where pairwise verdicts exist,
the style coefficients and the controlled board of ``judgecal bt --control both --length-unit
words`` in every format (JSON equal to ``judgecal bt --format json``; terminal, Markdown, HTML),
on the real AlpacaEval annotations (SQLite and PostgreSQL); no section without pairwise
verdicts; verdicts that name no baseline are anchored on the model with the most battles, said."""

from __future__ import annotations

import json

from judgecal.views import importing
from judgecal.views.bt_report import collect_bt

MODELS = ("alpaca-7b", "claude-2", "gpt-3.5-turbo-1106_verbose", "gpt-3.5-turbo-1106_concise")
JUDGE = "weighted_alpaca_eval_gpt4_turbo"


def test_the_section_is_the_bt_board_in_every_format(db_url, data_dir, run_cli, tmp_path):
    res = data_dir / "alpaca_eval" / "results"
    importing.import_alpaca_eval([res / n for n in MODELS], [], None, db_url)
    r = run_cli("--database-url", db_url, "report", "--format", "json", "--bootstrap", "20", "--seed", "1")
    assert r.exit_code == 0, r
    section = json.loads(r.stdout)["bradley_terry"]
    assert section["control"] == "both" and section["length_unit"] == "words" and section["notes"] == []
    bt = run_cli("--database-url", db_url, "bt", "--task-family", "alpaca_eval", "--judge", JUDGE, "--control", "both",
                 "--length-unit", "words", "--bootstrap", "20", "--seed", "1", "--format", "json")
    assert bt.exit_code == 0, bt
    assert section["boards"] == [json.loads(bt.stdout)]
    board = section["boards"][0]
    coefs = board["style"]["coefficients"]
    assert [c["feature"] for c in coefs] == ["length", "headers", "lists", "bold"]
    assert coefs[0]["coef_ci"][0] > 0.5  # the real judge rewards length (measured: +0.79 [+0.71, +0.87] on 26 models)
    verbose = next(x for x in board["rows"] if x["model"] == "gpt-3.5-turbo-1106_verbose")
    assert verbose["change"] == verbose["rank_uncontrolled"] - verbose["rank_controlled"]

    md = run_cli("--database-url", db_url, "report", "--format", "markdown", "--bootstrap", "20", "--seed", "1")
    assert md.exit_code == 0, md
    text = md.stdout[md.stdout.index("## Bradley-Terry boards with style control"):]
    assert "### Style coefficients (both), " in text and "| rank uncontrolled |" in text
    assert f"| length | {coefs[0]['coef']:.4f} | [{coefs[0]['coef_ci'][0]:.4f}, {coefs[0]['coef_ci'][1]:.4f}] |" in text
    table = run_cli("--database-url", db_url, "report", "--bootstrap", "20", "--seed", "1", "--wide")
    assert table.exit_code == 0 and "Bradley-Terry boards with style control" in table.stdout, table
    assert f"[{coefs[0]['coef_ci'][0]:.4f}, {coefs[0]['coef_ci'][1]:.4f}]" in table.stdout
    out = tmp_path / "rep"
    h = run_cli("--database-url", db_url, "report", "--format", "html", "--no-plots", "--bootstrap", "20", "--seed", "1",
                "--out", str(out))
    assert h.exit_code == 0, h
    page = (out / "report.html").read_text(encoding="utf-8")
    part = page[page.index('<section id="bradley-terry">'):]
    assert f'<td class="name">length</td><td class="num">{coefs[0]["coef"]:.4f}</td>' in part
    assert ">rank uncontrolled<" in part and ">gpt-3.5-turbo-1106_verbose<" in part
    assert json.loads((out / "report.json").read_text(encoding="utf-8"))["bradley_terry"] == section


def test_no_section_without_pairwise_verdicts_and_the_anchor_said(tmp_path, data_dir):
    url = f"sqlite:///{tmp_path / 'llmbar.db'}"
    importing.import_llmbar(data_dir / "llmbar" / "Natural", None, url)  # expert labels, no judge verdicts
    assert collect_bt(None, None, url, n_bootstrap=0) is None
    rows = [{"task_family": "tiny", "prompt": f"question {i}", "model_a": a, "model_b": b, "verdict": v,
             "judge": "tiny-judge", "response_a": f"answer {a} {i}" + (" **bold**" if a == "m1" else ""),
             "response_b": f"answer {b} {i}"}
            for i in range(12) for a, b, v in (("m1", "m2", "a" if i % 3 else "b"), ("m2", "m3", "a" if i % 4 else "tie"),
                                             ("m1", "m3", "a" if i % 2 else "b"))]
    path = tmp_path / "verdicts.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    importing.import_generic(path, "verdicts", "jsonl", None, url)
    section = collect_bt(None, None, url, n_bootstrap=0)
    (board,) = section["boards"]
    # 24 battles each for m1 and m3 and m2: the tie broken by name
    assert board["baseline"] == "m1" and board["notes"][0].startswith("baseline 'm1': the model with the most battles")
    assert collect_bt(["llmbar/Natural"], None, url, n_bootstrap=0) is None
    assert collect_bt(None, "nobody", url, n_bootstrap=0) is None


def test_a_fit_that_runs_off_prints_short():
    """Separation (LLMBar's two outputs, few battles) drives a coefficient far off: no overflow, no
    300-digit figure in a table (the team database's static report overflowed its boxes)."""
    from judgecal.calibrate.stylecontrol import meaning
    from judgecal.report.btboard import _cell

    assert meaning("length", 800.0).startswith("the length difference (a minus b) all but separates the verdicts")
    assert meaning("bold", 690.0).endswith("by 4.6e+299") and meaning("bold", 0.0).endswith("by 1.000")
    assert _cell("rating_ci", [-1.58e161, 1070.25]) == "[-1.58e+161, 1070.2]"
    assert _cell("odds_ratio_ci", [0.0, float("inf")]) == "[0.0000, inf]" and _cell("rating", None) == "-"


def test_a_report_of_calibration_ids_keeps_their_boards(tmp_path):
    """A report of calibration ids (``report --calibration N``, the web view's calibration page)
    shows the Bradley-Terry boards of those calibrations' families and judges only, not every
    board of the database (a team database's 175 boards made each calibration page cost a minute)."""
    from judgecal.db import models as m
    from judgecal.db.engine import get_engine, session_scope
    from judgecal.views.reporting import _calibration_scopes

    url = f"sqlite:///{tmp_path / 'two.db'}"
    rows = [{"task_family": fam, "prompt": f"question {i}", "model_a": a, "model_b": b,
             "verdict": "a" if (i + len(fam)) % 3 else "b", "judge": "tiny-judge",
             "response_a": f"answer {a} {i}" + " word" * (i % 4), "response_b": f"answer {b} {i}"}
            for fam in ("first", "second") for i in range(12) for a, b in (("m1", "m2"), ("m2", "m3"), ("m1", "m3"))]
    path = tmp_path / "verdicts.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    importing.import_generic(path, "verdicts", "jsonl", None, url)
    everything = collect_bt(None, None, url, n_bootstrap=0)
    assert [b["task_family"] for b in everything["boards"]] == ["first", "second"]
    engine = get_engine(url)
    with session_scope(engine) as s:
        (jid,) = s.query(m.Judge.id).filter(m.Judge.name == "tiny-judge").one()
    engine.dispose()
    narrowed = collect_bt(None, None, url, n_bootstrap=0, pairs={("second", jid)})
    assert [b["task_family"] for b in narrowed["boards"]] == ["second"]
    assert narrowed["boards"][0] == everything["boards"][1]  # the same board, only fewer of them
    assert collect_bt(None, None, url, n_bootstrap=0, pairs={("second", jid + 1)}) is None
    assert _calibration_scopes("latest", [], url) is None and _calibration_scopes(["latest"], [], url) is None
