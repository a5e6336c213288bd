"""Web choice and error pages speak the web's language (issue 32 leftovers, items 3 and 4).

On a small real database (LLMBar Natural with its GPT-4 and ChatGPT ratings and expert pairs;
the real AlpacaEval judge's verdicts on alpaca-7b against gpt4_1106_preview):

- ``/audit`` without a family or judge offers the audits; ``model=`` narrows them to those that
  hold an answer of that model (either side of a verdict, an expert or verbosity pair), and every
  other parameter rides along in each link;
- an error page names URL parameters (``tokenizer=NAME``), never the CLI's options, while the
  CLI keeps naming its options; where the answer is a choice (one family at a time, a model for a
  model filter) the page is a choice page with links."""

from __future__ import annotations

import html
import re
import sys
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import pytest

pytest.importorskip("starlette")
from starlette.testclient import TestClient  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
import serve_data as sd  # noqa: E402

from judgecal.web import create_app  # noqa: E402

BASE = "gpt4_1106_preview"
AE = "weighted_alpaca_eval_gpt4_turbo"


@pytest.fixture(scope="module")
def db(tmp_path_factory, data_dir):
    url = f"sqlite:///{tmp_path_factory.mktemp('choices') / 'j.db'}"
    for argv in (["import", "llmbar", str(data_dir / "llmbar" / "Natural")],
                 ["import", "alpaca-eval", str(data_dir / "alpaca_eval" / "results" / "alpaca-7b")]):
        code, text = sd.run_main(["--database-url", url, *argv])
        assert code == 0, text
    return url


@pytest.fixture(scope="module")
def client(db):
    return TestClient(create_app(db, cache_mb=0))


def _links(page: str) -> list[tuple[str, dict]]:
    """(label, {parameter: [values]}) of every choice on a choice page."""
    out = []
    for href, label in re.findall(r'<li><a href="([^"]*)">(.*?)</a></li>', page, re.S):
        u = urlsplit(html.unescape(href))
        params: dict = {}
        for k, v in parse_qsl(u.query):
            params.setdefault(k, []).append(v)
        out.append((html.unescape(label), dict(params, _path=u.path)))
    return out


def _message(page: str) -> str:
    found = re.findall(r'<p class="error-message">(.*?)</p>', page, re.S) or re.findall(r"<h1>(.*?)</h1>", page, re.S)
    return html.unescape(found[0])


# ---------------------------------------------------------------- item 3: /audit narrowed by model
def test_audit_choice_page_narrows_by_model_and_keeps_every_parameter(client):
    every = _links(client.get("/audit").text)
    assert sorted(label for label, _ in every) == [f"alpaca_eval · {AE} (pairwise)", "llmbar/Natural · ChatGPT (pointwise)",
                                                   "llmbar/Natural · GPT-4 (pointwise)"]
    r = client.get("/audit?model=alpaca-7b&q=the&filter=won&per_page=10")
    assert r.status_code == 200 and "answers of model alpaca-7b" in r.text
    (label, params), = _links(r.text)
    assert label == f"alpaca_eval · {AE} (pairwise)"
    assert params == {"_path": "/audit", "model": ["alpaca-7b"], "q": ["the"], "filter": ["won"], "per_page": ["10"],
                      "family": ["alpaca_eval"], "judge": [AE]}
    opened = client.get("/audit?" + "&".join(f"{k}={v[0]}" for k, v in params.items() if k != "_path") + "&format=json").json()
    assert opened["model"] == "alpaca-7b" and opened["filter"] == "won" and opened["q"] == "the" and opened["total"] > 0
    # the baseline's answers are the other side of each verdict; LLMBar's answers are in its expert pairs
    assert [lab for lab, _ in _links(client.get(f"/audit?model={BASE}").text)] == [f"alpaca_eval · {AE} (pairwise)"]
    assert sorted(lab for lab, _ in _links(client.get("/audit?model=llmbar/output_1").text)) == [
        "llmbar/Natural · ChatGPT (pointwise)", "llmbar/Natural · GPT-4 (pointwise)"]
    assert [lab for lab, _ in _links(client.get("/audit?model=llmbar/output_1&judge=GPT-4").text)] == [
        "llmbar/Natural · GPT-4 (pointwise)"]
    j = client.get("/audit?model=llmbar/output_1&format=json").json()
    assert j["carried"] == {"model": ["llmbar/output_1"]} and len(j["options"]) == 2
    assert all("model=llmbar%2Foutput_1" in o["url"] for o in j["options"])
    r = client.get("/audit?model=nobody")
    assert r.status_code == 200 and _links(r.text) == []
    assert "No judge audit holds an answer of model &#39;nobody&#39;" in r.text


# ---------------------------------------------------------------- item 4: URL parameters, not CLI options
def test_error_page_names_url_parameters_and_the_cli_its_options(client, db, run_cli):
    r = client.get(f"/winrates?baseline={BASE}&length_unit=tokens")
    assert r.status_code == 400 and _message(r.text) == "length_unit=tokens needs tokenizer=NAME"
    r = client.get(f"/winrates?baseline={BASE}&tokenizer=x")
    assert r.status_code == 400
    assert _message(r.text) == ("tokenizer=x applies to length_unit=tokens, not chars: give length_unit=tokens, "
                                "or drop tokenizer=")
    cli = run_cli("--database-url", db, "leaderboard", "--baseline", BASE, "--length-unit", "tokens")
    assert cli.exit_code == 2 and cli.stderr == "error: --length-unit tokens needs --tokenizer NAME\n", cli
    # a command to run, in backquotes, stays a command
    r = client.get("/leaderboard?judge=GPT-4&calibration=99")
    assert r.status_code == 404 and "`judgecal fit --list`" in _message(r.text)
    r = client.get("/publish?family=llmbar/Natural&judge=GPT-4&publish=calibrated")
    assert r.status_code == 400 and _message(r.text) == (
        "publish=calibrated: llmbar/Natural has no calibration of judge 'GPT-4' "
        "(run `judgecal fit --task-family llmbar/Natural`)")


def test_one_family_at_a_time_is_a_choice_page(client, db, run_cli):
    r = client.get(f"/publish?baseline={BASE}&family=alpaca_eval&family=llmbar/Natural&seed=3")
    assert r.status_code == 200
    assert _message(r.text) == ("Choose one: a win-rate board (baseline=) takes one family= at a time "
                                "(given: alpaca_eval, llmbar/Natural)")
    links = _links(r.text)
    assert [p["family"] for _, p in links] == [["alpaca_eval"], ["llmbar/Natural"]]
    assert all(p["baseline"] == [BASE] and p["seed"] == ["3"] and p["_path"] == "/publish" for _, p in links)
    assert client.get("/publish?" + f"baseline={BASE}&family=alpaca_eval&seed=3").status_code == 200
    cli = run_cli("--database-url", db, "publish", "--baseline", BASE, "--task-family", "alpaca_eval",
                  "--task-family", "llmbar/Natural")
    assert cli.exit_code == 2 and cli.stderr == ("error: a win-rate board (--baseline) takes one --task-family at a "
                                                 "time (given: alpaca_eval, llmbar/Natural)\n"), cli


@pytest.mark.parametrize("path,wording", [
    ("/winrates", "win-rate mode takes one family= at a time"),
    ("/bt", "a Bradley-Terry board takes one family= at a time"),
])
def test_every_board_offers_one_family_at_a_time(client, path, wording):
    # /winrates and /bt answered 400 ("family given twice") where /publish offered the families
    r = client.get(f"{path}?baseline={BASE}&family=alpaca_eval&family=llmbar/Natural&seed=3")
    assert r.status_code == 200 and _message(r.text) == (f"Choose one: {wording} (given: alpaca_eval, llmbar/Natural)")
    links = _links(r.text)
    assert [p["family"] for _, p in links] == [["alpaca_eval"], ["llmbar/Natural"]]
    assert all(p["baseline"] == [BASE] and p["seed"] == ["3"] and p["_path"] == path for _, p in links)
    # the JSON form says the same in the web's words (it kept the CLI's "--task-family")
    j = client.get(f"{path}?baseline={BASE}&family=alpaca_eval&family=llmbar/Natural&format=json").json()
    assert j["choose"] == f"{wording} (given: alpaca_eval, llmbar/Natural)" and "--" not in j["choose"]
    assert [o["url"] for o in j["options"]] == [f"{path}?baseline={BASE}&family=alpaca_eval&format=json",
                                               f"{path}?baseline={BASE}&family=llmbar%2FNatural&format=json"]
    first = client.get(j["options"][0]["url"]).json()
    assert first["task_family"] == "alpaca_eval" and first["baseline"] == BASE


@pytest.mark.parametrize("path", ["/winrates", "/bt", "/publish"])
def test_a_choice_never_offers_a_family_that_does_not_exist(client, path):
    # the choice page linked to families that do not exist: each link answered 404
    r = client.get(f"{path}?baseline={BASE}&family=alpaca_eval&family=nosuch&family=nope")
    assert r.status_code == 404 and _message(r.text) == (
        "task families 'nosuch', 'nope' do not exist (see `judgecal stats`)")
    j = client.get(f"{path}?baseline={BASE}&family=nosuch&family=alpaca_eval&format=json")
    assert j.status_code == 404 and j.headers["content-type"] == "application/json"
    assert j.json() == {"error": "task family 'nosuch' does not exist (see `judgecal stats`)", "status": 404}


def test_no_choice_of_baselines_or_pairs_for_what_does_not_exist(client):
    # /winrates without a baseline answered an empty choice for an unknown family and dropped one beside a
    # known family; /bt?baseline=nope offered 175 judge/family pairs whose links all ended on a 404
    j = client.get("/winrates?family=nope&format=json")
    assert j.status_code == 404 and j.json()["error"] == "task family 'nope' does not exist (see `judgecal stats`)"
    r = client.get("/winrates?family=alpaca_eval&family=nope")
    assert r.status_code == 404 and _message(r.text) == "task family 'nope' does not exist (see `judgecal stats`)"
    r = client.get("/bt?baseline=nope")
    assert r.status_code == 404 and _message(r.text) == ("baseline 'nope' has no usable verdict here: no answer of "
                                                         "that model in the database")
    ok = client.get("/winrates?family=alpaca_eval&format=json").json()
    assert ok["options"] and all("family=alpaca_eval" in o["url"] for o in ok["options"])


@pytest.mark.parametrize("url,status", [
    ("/winrates?baseline=nosuch&format=json", 404),
    ("/winrates?baseline=x&bootstrap=many&format=json", 400),
    ("/leaderboard?judge=GPT-4&calibration=99&format=json", 404),
    ("/bt?family=alpaca_eval&fresh=maybe&format=json", 400),
    ("/nonexistent?format=json", 404),  # no such page: answered HTML before
    (f"/winrates?baseline={BASE}&length_unit=tokens&format=json", 400),  # the CLI's words came back in JSON
    ("/publish?publish=sometimes&format=json", 400),
])
def test_an_error_of_a_json_request_is_json(client, url, status):
    # errors of format=json requests came back as HTML pages
    r = client.get(url)
    assert r.status_code == status and r.headers["content-type"] == "application/json", r.text[:200]
    body = r.json()
    assert set(body) == {"error", "status"} and body["status"] == status and "\n" not in body["error"]
    import re

    # URL parameters, not the CLI's options (a command to run, in backticks, keeps its options)
    assert body["error"] and "<" not in body["error"] and " --" not in re.sub(r"`[^`]*`", "", body["error"])
    html = client.get(url.replace("&format=json", "").replace("?format=json", ""))
    assert html.status_code == status and _message(html.text) == body["error"]


def test_bt_cli_names_its_option(db, run_cli):
    cli = run_cli("--database-url", db, "bt", "--task-family", "alpaca_eval", "--task-family", "llmbar/Natural")
    assert cli.exit_code == 2 and cli.stderr == ("error: bt takes one --task-family (got alpaca_eval, llmbar/Natural): "
                                                 "give it once\n"), cli


def test_a_model_filter_without_a_model_offers_the_models(client, db, run_cli):
    r = client.get(f"/audit?family=alpaca_eval&judge={AE}&filter=won&per_page=5")
    assert r.status_code == 200
    assert _message(r.text) == ("Choose one: filter=won needs model=NAME: won, lost, won_longer are said of one "
                                "model's answers")
    links = _links(r.text)
    assert [label for label, _ in links] == ["model alpaca-7b", f"model {BASE}"]
    for _, p in links:
        assert p["filter"] == ["won"] and p["family"] == ["alpaca_eval"] and p["judge"] == [AE] and p["per_page"] == ["5"]
    won = client.get(f"/audit?family=alpaca_eval&judge={AE}&filter=won&model=alpaca-7b&format=json").json()
    assert won["filter"] == "won" and won["counts"]["won"] == won["total"] > 0
    cli = run_cli("--database-url", db, "audit", "--task-family", "alpaca_eval", "--judge", AE, "--filter", "won")
    assert cli.exit_code == 2 and cli.stderr.startswith("error: --filter won needs --model NAME: "), cli
