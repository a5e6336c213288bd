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
