"""``judgecal serve``'s Bradley-Terry page (``/bt``, issue 34 item 6): the page's JSON equals
``judgecal bt --format json`` with the same options, the page shows the style coefficients with
their CIs, the controlled board beside the uncontrolled one with rank changes and the flags, its
stated defaults (bootstrap, seed, length unit), the downloads equal the CLI's CSV and Markdown,
each model links to its evidence, the overview and the win-rate board link it, a choice the data
leaves open is a page of links, and bad parameters are one line (tests/serve_data.py's database:
LLMBar Natural, AlpacaEval annotations of alpaca-7b, claude-2 and NullModel against
gpt4_1106_preview; and a database with a second pairwise judge for the choice pages)."""

from __future__ import annotations

import csv
import html
import io
import json
import re

import pytest

import serve_data as sd

pytest.importorskip("starlette")
from starlette.testclient import TestClient  # noqa: E402

from judgecal.web import create_app  # noqa: E402
from judgecal.web.pages.bt import DEFAULT_BOOTSTRAP, DEFAULT_SEED, DEFAULT_UNIT  # noqa: E402

AE = "weighted_alpaca_eval_gpt4_turbo"
#: the AlpacaEval board (the database holds a second pairwise judge: without these, a choice page)
Q = f"family=alpaca_eval&judge={AE}"
QA = Q.replace("&", "&amp;")


@pytest.fixture(scope="module")
def demo(tmp_path_factory, data_dir):
    return sd.demo_db(tmp_path_factory, data_dir)


@pytest.fixture(scope="module")
def client(demo):
    return TestClient(create_app(demo["url"], cache_mb=0))


def _error(page: str) -> str:
    found = re.search(r'<p class="error-message">(.*?)</p>', page, re.S)
    return html.unescape(found.group(1)) if found else ""


def test_the_page_is_the_cli_board(client, demo, run_cli):
    web = client.get(f"/bt?{Q}&bootstrap=40&seed=3&format=json")
    assert web.status_code == 200 and web.headers["content-type"].startswith("application/json")
    cli = run_cli("--database-url", demo["url"], "bt", "--task-family", "alpaca_eval", "--judge", AE, "--control", "both",
                  "--length-unit", DEFAULT_UNIT,
                  "--bootstrap", "40", "--seed", "3", "--format", "json")
    assert cli.exit_code == 0, cli
    assert web.json() == json.loads(cli.stdout)
    board = web.json()
    assert board["baseline"] == sd.BASELINE and board["judge_ref"] == AE and board["task_family"] == "alpaca_eval"
    assert [c["feature"] for c in board["style"]["coefficients"]] == ["length", "headers", "lists", "bold"]
    # NullModel (one fixed answer for everything) is set apart by the gaming guard
    assert [x["model"] for x in board["set_apart"]] == ["NullModel"]
    assert {r["model"] for r in board["rows"]} == {sd.BASELINE, "alpaca-7b", "claude-2"}

    page = client.get(f"/bt?{Q}&bootstrap=40&seed=3")
    assert page.status_code == 200, _error(page.text)
    text = page.text
    # the coefficients with their CIs, as the CLI's table prints them
    for c in board["style"]["coefficients"]:
        assert f'<td class="name">{c["feature"]}</td><td class="num">{c["coef"]:.4f}</td>' in text
        assert f'<td class="num">[{c["coef_ci"][0]:.4f}, {c["coef_ci"][1]:.4f}]</td>' in text
    # the controlled board beside the uncontrolled one, rank changes, flags column, CIs under the values
    for head in ("rank uncontrolled", "change", "rating uncontrolled", "win rate uncontrolled", "flags"):
        assert f">{head}<" in text, head
    claude = next(r for r in board["rows"] if r["model"] == "claude-2")
    row = text[text.index(">claude-2</a>"):]
    row = row[:row.index("</tr>")]
    assert f'{claude["rating"]:.1f}<span class="ci">[{claude["rating_ci"][0]:.1f}, {claude["rating_ci"][1]:.1f}]' in row
    assert f'<td class="num">{claude["rank_uncontrolled"]}</td>' in row
    assert f'{claude["rating_uncontrolled"]:.1f}<span class="ci">' in row
    # the row links to its evidence (the audit of the model, as the win-rate board's rows do)
    assert f'href="/audit?family=alpaca_eval&amp;judge={AE}&amp;model=claude-2"' in text
    assert 'href="/audit?family=alpaca_eval&amp;judge=' + AE + '&amp;model=NullModel"' in text  # set apart, linked too
    assert client.get(f"/audit?family=alpaca_eval&judge={AE}&model=claude-2").status_code == 200
    assert "Set apart, not ranked (1)" in text
    # the page states its bootstrap, seed and length unit (the defaults, and what it used)
    assert "40 item resamples (seed 3), 95% CIs" in text and "lengths in chars" in text
    default = client.get(f"/bt?{Q}").text
    assert (f"{DEFAULT_BOOTSTRAP} item resamples (seed {DEFAULT_SEED}), 95% CIs" in default
            and f"This page's defaults: {DEFAULT_BOOTSTRAP} bootstrap resamples, seed {DEFAULT_SEED}, lengths in "
                f"{DEFAULT_UNIT}" in default)


def test_plain_board_and_downloads(client, demo, run_cli):
    plain = client.get(f"/bt?{Q}&control=none&bootstrap=0")
    assert plain.status_code == 200 and "Style coefficients" not in plain.text and "rank uncontrolled" not in plain.text
    assert "coefficients CSV" not in plain.text and f'href="/bt?{QA}&amp;control=none&amp;bootstrap=0&amp;format=csv"' in plain.text
    page = client.get(f"/bt?{Q}&bootstrap=20").text
    for label, fmt_ in (("CSV", "format=csv"), ("coefficients CSV", "format=csv&amp;coefficients=1"),
                        ("Markdown", "format=markdown"), ("JSON", "format=json")):
        assert f'<a href="/bt?{QA}&amp;bootstrap=20&amp;{fmt_}">{label}</a>' in page, label
    args = ("--database-url", demo["url"], "bt", "--task-family", "alpaca_eval", "--judge", AE, "--control", "both",
            "--length-unit", "chars", "--bootstrap", "20")
    got = client.get(f"/bt?{Q}&bootstrap=20&format=csv")
    assert got.status_code == 200 and got.headers["content-type"].startswith("text/csv")
    assert 'filename="bt-alpaca_eval-both.csv"' in got.headers["content-disposition"]
    cli = run_cli(*args, "--format", "csv")
    assert cli.exit_code == 0 and got.text.replace("\r\n", "\n") == cli.stdout.replace("\r\n", "\n")
    rows = list(csv.DictReader(io.StringIO(got.text)))
    assert [r["model"] for r in rows][0] == sd.BASELINE and {"rank_controlled", "change", "flag_codes"} <= set(rows[0])
    coef = client.get(f"/bt?{Q}&bootstrap=20&format=csv&coefficients=1")
    cli = run_cli(*args, "--format", "csv", "--coefficients")
    assert coef.status_code == 200 and coef.text.replace("\r\n", "\n") == cli.stdout.replace("\r\n", "\n")
    assert [r["feature"] for r in csv.DictReader(io.StringIO(coef.text))] == ["length", "headers", "lists", "bold"]
    md = client.get(f"/bt?{Q}&bootstrap=20&format=markdown")
    cli = run_cli(*args, "--format", "markdown")
    assert md.status_code == 200 and md.text == cli.stdout[:-1]  # click.echo adds a newline
    assert "| rank uncontrolled |" in md.text and "Style coefficients (both), " in md.text


def test_linked_from_the_overview_and_the_win_rate_board(client):
    overview = client.get("/").text
    assert f'href="/bt?judge={AE}"' in overview
    board = client.get(f"/winrates?baseline={sd.BASELINE}&bootstrap=0").text
    href = f"/bt?family=alpaca_eval&judge={AE}&baseline={sd.BASELINE}"
    assert f'href="{html.escape(href)}"' in board
    page = client.get(href + "&bootstrap=0")
    assert page.status_code == 200 and "Style coefficients" in page.text
    assert f'href="/winrates?family=alpaca_eval&amp;judge={AE}&amp;baseline={sd.BASELINE}"' in page.text


@pytest.mark.parametrize("query,status,says", [
    ("baseline=nobody", 404, "baseline 'nobody' has no usable verdict here"),
    ("control=style", 400, "control must be one of none, length, markdown, both, got 'style'"),
    ("bootstrap=5", 400, "bootstrap=5 resamples cannot give a 95% interval"),
    ("coefficients=1", 400, "coefficients=1 applies to format=csv and format=markdown"),
    ("control=none&coefficients=1&format=csv", 400, "coefficients=1 applies to a style-controlled board"),
    ("tokenizer=smollm2", 400, "tokenizer applies to length_unit=tokens (not chars)"),
    ("length_unit=tokens&bootstrap=0", 403, "have no token length under tokenizer smollm2 yet"),
        ("sort=rating", 400, "unknown query parameter 'sort'"),
])
def test_bad_parameters_are_one_line(client, query, status, says):
    r = client.get(f"/bt?{Q}&{query}")
    assert r.status_code == status and says in _error(r.text), (r.status_code, _error(r.text))


def test_two_judges_are_a_choice(client):
    """The database's second pairwise judge (a hostile name, shown as text): a page of links."""
    r = client.get("/bt?bootstrap=0")
    assert r.status_code == 200 and "Choose one: 2 judge/family pairs have pairwise verdicts" in r.text
    assert "<img src=x" not in r.text and "&lt;img src=x" in r.text
    links = [html.unescape(h) for h in re.findall(r'href="(/bt\?[^"]*)"', r.text)]
    assert f"/bt?bootstrap=0&judge={AE}&family=alpaca_eval" in links, links
    assert client.get(f"/bt?bootstrap=0&judge={AE}&family=alpaca_eval").status_code == 200


def test_choice_pages(tmp_path, data_dir):
    """Two pairwise judges: a page of links to each judge's board; verdicts that name no baseline:
    a page of links to the models with the most battles."""
    from judgecal.views import importing

    url = f"sqlite:///{tmp_path / 'two.db'}"
    res = data_dir / "alpaca_eval" / "results"
    importing.import_alpaca_eval([res / n for n in ("alpaca-7b", "claude-2")], [], None, url)
    rows = [{"task_family": "tiny", "prompt": f"question {i}", "model_a": a, "model_b": b, "verdict": v,
             "judge": "tiny-judge",
             "response_a": f"answer {a} {i}" + (" **bold**" if a == "m1" else ""), "response_b": f"answer {b} {i}"}
            for i in range(12) for a, b, v in (("m1", "m2", "a" if i % 3 else "b"), ("m2", "m3", "a" if i % 4 else "tie"),
                                             ("m1", "m3", "a" if i % 2 else "b"))]
    path = tmp_path / "verdicts.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    importing.import_generic(path, "verdicts", "jsonl", None, url)
    c = TestClient(create_app(url, cache_mb=0))
    r = c.get("/bt?bootstrap=0")
    assert r.status_code == 200 and "<h1>Choose one: 2 judge/family pairs have pairwise verdicts" in r.text
    links = [html.unescape(h) for h in re.findall(r'href="(/bt\?[^"]*)"', r.text)]
    assert f"/bt?bootstrap=0&judge={AE}&family=alpaca_eval" in links, links
    tiny = next(h for h in links if "family=tiny" in h)
    r = c.get(tiny)
    assert r.status_code == 200 and "models with the most battles: m1, m2, m3" in r.text, _error(r.text)
    assert re.search(r"<h1>Choose one: give (--)?baseline", r.text)
    options = [html.unescape(h) for h in re.findall(r'href="(/bt\?[^"]*baseline=[^"]*)"', r.text)]
    assert len(options) == 3 and all("family=tiny" in h and "bootstrap=0" in h for h in options), options
    board = c.get(options[0])
    assert board.status_code == 200 and "Style coefficients" in board.text, _error(board.text)
    assert c.get(tiny + "&format=json").json()["options"][0]["label"].endswith(" battles")

