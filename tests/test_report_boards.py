"""`judgecal report --format html` shows the leaderboards: the score board of each judge with
ratings and the win-rate board against each baseline with pairwise verdicts, built by the
functions `judgecal leaderboard` calls (the same figures as its --format json) and drawn with
the partials `judgecal serve`'s pages include. Hostile names stay text; the page stays
self-contained. SQLite and PostgreSQL."""

from __future__ import annotations

import json
import re

import pytest

import serve_data as sd
from judgecal.report.board import COLUMNS as SCORE_COLUMNS, _cell as score_cell
from judgecal.report.winboard import COLUMNS as WIN_COLUMNS, _cell as win_cell

AE_JUDGE = "weighted_alpaca_eval_gpt4_turbo"


def _fill(url: str, data_dir, work, *, llmbar: bool = True) -> None:
    """LLMBar Natural (GPT-4 and ChatGPT ratings, a GPT-4 fit) when ``llmbar``, three models'
    real AlpacaEval annotations, and the hostile family of tests/serve_data.py."""
    from judgecal.db import engine as eng
    from judgecal.db import migrate
    from judgecal.views import fitting, importing

    e = eng.create(url)
    migrate.upgrade(e, "head")
    e.dispose()
    res = data_dir / "alpaca_eval" / "results"
    importing.import_alpaca_eval([res / name for name in sd.ALPACA_MODELS], [], None, url)
    if not llmbar:
        return
    importing.import_llmbar(data_dir / "llmbar" / "Natural", None, url)
    work.mkdir(parents=True, exist_ok=True)
    for kind, recs in sd.hostile_records().items():
        path = work / f"hostile_{kind}.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in recs), encoding="utf-8")
        importing.import_generic(path, kind, "jsonl", sd.HOSTILE_FAMILY, url)
    fitting.run_fit("llmbar/Natural", "GPT-4", url=url, length_unit="words", n_bootstrap=10, folds=3, seed=0,
                    nested=False)


_TD = re.compile(r'<td[^>]*>([^<]*)(?:<span class="ci">([^<]*)</span>)?</td>')


def _shown(row_html: str) -> list[str]:
    """A board row's cells as the page shows them: each value, then its 95% CI when the cell
    carries one under the value (a CI column is drawn inside its value's cell)."""
    return [x for value, ci in _TD.findall(row_html) for x in ((value, ci) if ci else (value,))]


def _expected(columns, rows: list[dict], cell) -> list[list[str]]:
    """The CLI table's strings of ``rows`` as the page lays them out: a column where every row
    reads "-" is left out (the page names it), a CI that reads "-" is not drawn."""
    table = [[cell(k, r.get(k)) for _, k in columns] for r in rows]
    keys = [k for _, k in columns]
    keep = [i for i, k in enumerate(keys)
            if k in ("model", "flags", "flag_codes") or any(row[i] != "-" for row in table)]
    return [[row[i] for i in keep if not (keys[i].endswith("_ci") and row[i] == "-")] for row in table]


def _section(html: str, start: str) -> str:
    """The report's HTML from the heading ``start`` to the end of its <section>."""
    i = html.index(start)
    return html[i:html.index("</section>", i)]


def _report(run_cli, url: str, out, *extra: str) -> str:
    r = run_cli("--database-url", url, "report", "--format", "html", "--out", str(out), "--bootstrap", "50",
                "--no-plots", *extra)
    assert r.exit_code == 0, r.output
    assert "Traceback" not in r.output
    return (out / "report.html").read_text(encoding="utf-8")


@pytest.mark.timeout(600)
def test_report_shows_the_cli_leaderboards(db_url, data_dir, tmp_path, run_cli):
    _fill(db_url, data_dir, tmp_path / "files")
    html = _report(run_cli, db_url, tmp_path / "out")
    assert 'id="leaderboards"' in html
    # the win-rate board: the CLI's figures, in the CLI's order, with the flag legend
    cli = run_cli("--database-url", db_url, "leaderboard", "--baseline", sd.BASELINE, "--task-family", "alpaca_eval",
                  "--judge", AE_JUDGE, "--bootstrap", "50", "--format", "json")
    assert cli.exit_code == 0, cli.output
    board = json.loads(cli.stdout)
    win = _section(html, f"<h3>Win rates against {sd.BASELINE}")
    body = win.split("<tbody>", 1)[1].split("</tbody>", 1)[0]
    rows = re.findall(r"<tr>(.*?)</tr>", body, re.S)
    assert [re.findall(r'<td class="name">([^<]+)</td>', r)[0] for r in rows] == [r["model"] for r in board["rows"]]
    assert {sd.BASELINE, *sd.ALPACA_MODELS} <= {r["model"] for r in board["rows"]}
    assert [_shown(row) for row in rows] == _expected(WIN_COLUMNS, board["rows"], win_cell)
    for r, row in zip(board["rows"], rows):
        cells = _shown(row)
        assert f"{r['win_rate']:.2f}" in cells and f"{r['rank_lc']}" in cells
        if r["length_controlled_winrate"] is not None:
            assert f"{r['length_controlled_winrate']:.2f}" in cells
        if r.get("length_controlled_winrate_ci"):
            lo, hi = r["length_controlled_winrate_ci"]
            assert f"[{lo:.1f}, {hi:.1f}]" in cells
        assert (" ".join(r["flag_codes"]) or "-") == cells[-1]
    assert board["flag_legend"] and all(f"{c} = " in win for c in board["flag_legend"])
    assert "<svg" in win and "win rate against gpt4_1106_preview (%)" in win
    # the score board of GPT-4: the CLI's means and CIs, and the calibration it applied
    cli = run_cli("--database-url", db_url, "leaderboard", "--judge", "GPT-4", "--bootstrap", "50", "--format", "json")
    assert cli.exit_code == 0, cli.output
    sb = json.loads(cli.stdout)
    score = _section(html, '<h3>Score leaderboard <span class="sub">judge GPT-4</span>')
    rated = [r for r in sb["rows"] if r["mean_raw"] is not None]
    assert len(rated) == 2
    body = score.split("<tbody>", 1)[1].split("</tbody>", 1)[0]
    shown = [_shown(row) for row in re.findall(r"<tr>(.*?)</tr>", body, re.S)]
    # every cell of every row: the CLI's figures as the CLI's table writes them
    assert shown == _expected(SCORE_COLUMNS, sb["rows"], score_cell)
    assert "No value on this board, not shown: " in score and "acc_norm" in score  # no MC run: named, not dropped
    for r in rated:
        assert f">{r['mean_raw']:.3f}<" in score
        lo, hi = r["mean_raw_ci"]
        assert f"[{lo:.2f}, {hi:.2f}]" in score
    (fam, cid), = sb["calibrations"].items()
    assert f"#{cid} ({fam}" in score
    assert html.count("<h3>Score leaderboard") == 3  # GPT-4, ChatGPT and the hostile judge


def test_report_boards_hostile_names_are_text(db_url, data_dir, tmp_path, run_cli):
    """The hostile judge's score board in the report: model and judge names (table, chart,
    heading) are escaped text; no script, no injected image, nothing loaded from anywhere."""
    _fill(db_url, data_dir, tmp_path / "files")
    html = _report(run_cli, db_url, tmp_path / "out", "--judge", sd.HOSTILE_JUDGE)
    score = _section(html, "<h3>Score leaderboard")
    assert "judge &lt;script&gt;alert(1)&lt;/script&gt;" in score
    assert "model &lt;script&gt;alert(1)&lt;/script&gt;" in score
    assert "model &#34;&gt;&lt;img src=x onerror=alert(1)&gt;" in score
    svg = score.split("<svg", 1)[1].split("</svg>", 1)[0]
    assert "model &lt;script&gt;" in svg
    assert "<script" not in html and "<img src=x" not in html and "onerror=alert(1)>" not in html
    assert not re.findall(r"<[a-z]+[^>]*\son[a-z]+=", html)  # no event-handler attribute anywhere
    for ref in re.findall(r'\b(?:src|href)\s*=\s*"([^"]*)"', html):
        assert ref.startswith(("data:image/png;base64,", "#")), ref
    assert "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "https://" not in html
    assert "Win rates against" not in html  # --judge: only the hostile judge's boards


def test_alpaca_eval_only_report_shows_the_win_rates(db_url, data_dir, tmp_path, run_cli):
    """The real AlpacaEval annotations alone (no calibration, no ratings): the page's summary
    says why there is no calibration entry and points at the win-rate board below it."""
    _fill(db_url, data_dir, tmp_path / "files", llmbar=False)
    html = _report(run_cli, db_url, tmp_path / "out")
    assert "No calibration to report: no stored calibration and no rated concise/verbose pairs" in html
    assert '<a href="#leaderboards">leaderboards</a>' in html
    win = _section(html, f"<h3>Win rates against {sd.BASELINE}")
    for model in sd.ALPACA_MODELS:
        assert f'<td class="name">{model}</td>' in win  # the static report links nowhere
    assert '<th class="num">LC win rate<span class="ci">95% CI</span></th>' in win
    assert '<th class="num">calibrated<span class="ci">95% CI</span></th>' in win
    assert "flags: " in win or "note: flags:" in win
    assert "Score leaderboard" not in html  # no judge with ratings: no score board
