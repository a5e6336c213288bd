"""The judge audit's drill-down (issue 32, "the evidence one click away"): ``model`` (with the
won / lost / won_longer filters), the text search ``q``, the /audit form that carries every
parameter, and ``judgecal audit`` (its ``--format json`` is the page's ``format=json``).

Known answers are computed here from the database rows (SQL) and from the AlpacaEval
annotation files the database was imported from, not from the audit. SQLite (the serve test
database, tests/serve_data.py); the last test compares SQLite and PostgreSQL."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from sqlalchemy import text

import serve_data as sd

pytest.importorskip("starlette")
pytest.importorskip("httpx")
from starlette.testclient import TestClient  # noqa: E402

from judgecal.web import create_app  # noqa: E402

AE_JUDGE = "weighted_alpaca_eval_gpt4_turbo"
AE = dict(family="alpaca_eval", judge=AE_JUDGE)


@pytest.fixture(scope="module")
def demo(tmp_path_factory, data_dir):
    return sd.demo_db(tmp_path_factory, data_dir)


@pytest.fixture(scope="module")
def client(demo):
    return TestClient(create_app(demo["url"]))


def audit(url, family, judge, **kw):
    from judgecal.views.audit import judge_audit

    return judge_audit(family, judge, url, **kw)


def every_row(url, family, judge, **kw) -> list[dict]:
    """Every pair of the audit (every page), with the options ``kw``."""
    first = audit(url, family, judge, per_page=200, **kw)
    rows = list(first["rows"])
    for page in range(2, first["pages"] + 1):
        rows += audit(url, family, judge, per_page=200, page=page, **kw)["rows"]
    assert len(rows) == first["total"]
    return rows


def sql(url: str, query: str, **params) -> list[tuple]:
    from judgecal.db.engine import get_engine

    engine = get_engine(url)
    with engine.connect() as c:
        rows = [tuple(r) for r in c.execute(text(query), params)]
    engine.dispose()
    return rows


def annotations(data_dir: Path, model: str) -> list[dict]:
    """The AlpacaEval annotations of ``model`` against gpt4_1106_preview (output_1 the
    baseline's answer, output_2 the model's; preference in [1, 2], 2: output_2 preferred)."""
    path = data_dir / "alpaca_eval" / "results" / model / AE_JUDGE / "annotations.json"
    return [r for r in json.loads(path.read_text(encoding="utf-8")) if r.get("preference") not in (None, "")]


# ---------------------------------------------------------------- model, won, lost, won_longer
#: a judge's sample-0 verdicts per (answer a's model, answer b's model, verdict), from the rows
VERDICTS = """
select ra.model, rb.model, pj.verdict, count(*) from pairwise_judgment pj
join judge j on j.id = pj.judge_id join response ra on ra.id = pj.response_a_id
join response rb on rb.id = pj.response_b_id
where j.name = :judge and pj.sample_index = 0 and pj.status = 'ok' group by ra.model, rb.model, pj.verdict
"""


def test_won_and_lost_are_the_verdicts(demo, data_dir):
    """AlpacaEval stores one verdict a pair (order not recorded): a model's pairs won are its
    verdicts preferring its answer, counted in SQL and in the annotations file."""
    url = demo["url"]
    counts: dict[tuple[str, str], int] = {}
    for ma, mb, verdict, n in sql(url, VERDICTS, judge=AE_JUDGE):
        for model, side in ((ma, "a"), (mb, "b")):
            outcome = "tie" if verdict == "tie" else ("won" if verdict == side else "lost")
            counts[(model, outcome)] = counts.get((model, outcome), 0) + n
    for model in sd.ALPACA_MODELS:
        a = audit(url, "alpaca_eval", AE_JUDGE, model=model, per_page=5)
        file = annotations(data_dir, model)
        assert a["model"] == model and a["total"] == a["counts"]["all"] == len(file) == 805
        assert a["counts"]["won"] == counts.get((model, "won"), 0) == sum(float(r["preference"]) > 1.5 for r in file)
        assert a["counts"]["lost"] == counts.get((model, "lost"), 0) == sum(float(r["preference"]) < 1.5 for r in file)
        # won, and the model's answer (output_2) has more characters (code points) than the baseline's
        assert a["counts"]["won_longer"] == sum(float(r["preference"]) > 1.5 and len(r["output_2"]) > len(r["output_1"])
                                                for r in file)
        assert all(r["model_side"] == "a" and r["a"]["model"] == model for r in a["rows"])
    assert counts[("claude-2", "won")] > 100  # (the test reads real figures)
    # the baseline holds one side of every pair: what the three models lost, it won
    base = audit(url, "alpaca_eval", AE_JUDGE, model=sd.BASELINE, per_page=5)
    assert base["total"] == 3 * 805 and all(r["model_side"] == "b" for r in base["rows"])
    assert base["counts"]["won"] == sum(counts.get((m, "lost"), 0) for m in sd.ALPACA_MODELS)
    assert base["counts"]["lost"] == sum(counts.get((m, "won"), 0) for m in sd.ALPACA_MODELS)


def test_each_row_of_a_model_filter_passes_it(demo):
    url = demo["url"]
    won = every_row(url, "alpaca_eval", AE_JUDGE, model="claude-2", filter="won_longer")
    assert won and all({"won", "won_longer"} <= set(r["flags"]) for r in won)
    for r in won:
        mine, other = r[r["model_side"]], r["b" if r["model_side"] == "a" else "a"]
        assert r["decision"] == r["model_side"] and mine["n_chars"] > other["n_chars"]
    lost = every_row(url, "alpaca_eval", AE_JUDGE, model="claude-2", filter="lost")
    assert all(r["decision"] not in (None, "tie", r["model_side"]) and "lost" in r["flags"] for r in lost)


def test_model_combines_with_every_filter(demo):
    """LLMBar Natural (GPT-4's ratings, expert labels): a model's counts per filter are those
    of its pairs in the whole audit."""
    url = demo["url"]
    whole = every_row(url, "llmbar/Natural", "GPT-4")
    for model in ("llmbar/output_1", "llmbar/output_2"):
        mine = [r for r in whole if model in (r["a"]["model"], r["b"]["model"])]
        a = audit(url, "llmbar/Natural", "GPT-4", model=model, per_page=3)
        assert a["counts"]["all"] == a["total"] == len(mine) > 0
        for flt in ("disagree", "flips", "ties", "unparsed", "inconsistent"):
            assert a["counts"][flt] == sum(flt in r["flags"] for r in mine), flt
            got = every_row(url, "llmbar/Natural", "GPT-4", model=model, filter=flt)
            assert [r["item"]["prompt_sha256"] for r in got] == [r["item"]["prompt_sha256"] for r in mine
                                                                   if flt in r["flags"]]

        def side(r):
            return "a" if r["a"]["model"] == model else "b"

        assert a["counts"]["won"] == sum(r["decision"] == side(r) for r in mine)
        assert a["counts"]["lost"] == sum(r["decision"] in ("a", "b") and r["decision"] != side(r) for r in mine)
        assert a["counts"]["won_longer"] == sum(
            r["decision"] == side(r) and r[side(r)]["n_chars"] > r["b" if side(r) == "a" else "a"]["n_chars"]
            for r in mine)
    # the audit's own figures stay the whole audit's
    assert a["agreement"] == audit(url, "llmbar/Natural", "GPT-4")["agreement"]


def test_a_model_filter_needs_a_model(demo, client, run_cli):
    from judgecal.errors import UsageError

    for flt in ("won", "lost", "won_longer"):
        with pytest.raises(UsageError, match=f"--filter {flt} needs --model NAME"):
            audit(demo["url"], "alpaca_eval", AE_JUDGE, filter=flt)
    # the web: a choice page of the audit's models (URL parameters named, each link keeps the filter)
    r = client.get(f"/audit?family=alpaca_eval&judge={AE_JUDGE}&filter=won")
    heading = re.findall(r"<h1>(.*?)</h1>", r.text, re.S)
    assert r.status_code == 200 and len(heading) == 1 and "filter=won needs model=NAME" in heading[0]
    assert "--" not in heading[0]
    links = re.findall(r'<li><a href="([^"]*)"', r.text)
    assert len(links) >= 2 and all("filter=won" in h and "model=" in h for h in links)
    assert any(h.endswith("model=gpt4_1106_preview") for h in links)
    cli = run_cli("--database-url", demo["url"], "audit", "--task-family", "alpaca_eval", "--judge", AE_JUDGE,
                  "--filter", "won")
    assert cli.exit_code == 2 and cli.stdout == ""
    assert cli.stderr.startswith("error: --filter won needs --model NAME") and cli.stderr.count("\n") == 1


def test_an_unknown_model_says_so(demo, client, run_cli):
    from judgecal.errors import NotFoundError

    with pytest.raises(NotFoundError, match=r"no answers of model 'claude2' in alpaca_eval .*did you mean 'claude-2'"):
        audit(demo["url"], "alpaca_eval", AE_JUDGE, model="claude2")
    with pytest.raises(NotFoundError):  # exact match: spaces and case count
        audit(demo["url"], "alpaca_eval", AE_JUDGE, model="Claude-2")
    r = client.get(f"/audit?family=llmbar/Natural&judge=GPT-4&model={sd.RLO_MODEL}")
    msg = re.findall(r'<p class="error-message">(.*?)</p>', r.text, re.S)
    assert r.status_code == 404 and len(msg) == 1 and "no answers of model" in msg[0] and "in llmbar/Natural" in msg[0]
    assert "\u202e" not in r.text and "\\u202e" in msg[0]  # the bidi override shown, never applied
    cli = run_cli("--database-url", demo["url"], "audit", "--task-family", "alpaca_eval", "--judge", AE_JUDGE,
                  "--model", "nobody")
    assert cli.exit_code == 2 and cli.stderr.startswith("error: no answers of model 'nobody' in alpaca_eval")


# ---------------------------------------------------------------- q
def _contains(needle: str, *texts: str) -> bool:
    """Case-insensitive for A-Z only (re.ASCII), every other character as written."""
    return any(re.search(re.escape(needle), t, re.IGNORECASE | re.ASCII) for t in texts)


@pytest.mark.parametrize("q", ["python", "PYTHON", "PyThOn", "%", "_", "100%", "e.g."])
def test_q_finds_the_pairs_holding_the_text(demo, data_dir, q):
    url = demo["url"]
    want = 0
    for model in sd.ALPACA_MODELS:
        want += sum(_contains(q, r["instruction"], r["output_1"], r["output_2"]) for r in annotations(data_dir, model))
    a = audit(url, "alpaca_eval", AE_JUDGE, q=q, per_page=200)
    assert a["q"] == q and a["total"] == a["counts"]["all"] == want
    for r in a["rows"]:
        assert _contains(q, r["item"]["prompt"], r["a"]["text"], r["b"]["text"])
    # with a model: that model's file alone
    mine = sum(_contains(q, r["instruction"], r["output_1"], r["output_2"]) for r in annotations(data_dir, "claude-2"))
    assert audit(url, "alpaca_eval", AE_JUDGE, q=q, model="claude-2", per_page=3)["total"] == mine


def test_q_is_case_insensitive_and_literal(demo):
    url = demo["url"]
    keys = lambda a: [(r["item"]["prompt_sha256"], r["a"]["model"], r["b"]["model"]) for r in a["rows"]]  # noqa: E731
    runs = [audit(url, "alpaca_eval", AE_JUDGE, q=q, per_page=200) for q in ("javascript", "JavaScript", " JAVASCRIPT ")]
    assert runs[0]["total"] > 0 and keys(runs[0]) == keys(runs[1]) == keys(runs[2])
    assert runs[2]["q"] == "JAVASCRIPT"  # spaces around it dropped, as the page does
    # % and _ are characters, not LIKE's wildcards
    assert audit(url, "alpaca_eval", AE_JUDGE, q="p_thon")["total"] == 0
    assert audit(url, "alpaca_eval", AE_JUDGE, q="py%on")["total"] == 0
    assert audit(url, "alpaca_eval", AE_JUDGE, q="no such text anywhere 1234")["total"] == 0
    from judgecal.errors import UsageError

    with pytest.raises(UsageError, match="control character"):
        audit(url, "alpaca_eval", AE_JUDGE, q="a\x00b")


# ---------------------------------------------------------------- CLI = web
CASES = [
    dict(family="alpaca_eval", judge=AE_JUDGE, model="claude-2", q="python", filter="won", per_page=7, page=2),
    dict(family="alpaca_eval", judge=AE_JUDGE, model=sd.BASELINE, filter="won_longer", per_page=5),
    dict(family="llmbar/Natural", judge="GPT-4", model="llmbar/output_2", filter="flips"),
    dict(family="llmbar/Natural", judge="GPT-4", q="THE", calibration="none", per_page=3),
    dict(family=sd.HOSTILE_FAMILY, judge=sd.HOSTILE_JUDGE, model=sd.HOSTILE_MODEL_A, filter="lost"),
    dict(family=sd.HOSTILE_FAMILY, judge=sd.HOSTILE_PAIR_JUDGE, q="<script>", filter="inconsistent"),
]


@pytest.mark.parametrize("case", CASES, ids=[f"{c['family'][:7]}-{c.get('filter', 'all')}" for c in CASES])
def test_cli_json_is_the_pages_json(demo, client, run_cli, case):
    from judgecal.web.render import link

    web = client.get(link("/audit", **case, format="json"))
    assert web.status_code == 200, web.text[-300:]
    opts = {"family": "--task-family", "judge": "--judge", "model": "--model", "q": "--q", "filter": "--filter",
            "per_page": "--per-page", "page": "--page", "calibration": "--calibration"}
    argv = [x for k, v in case.items() for x in (opts[k], str(v))]
    cli = run_cli("--database-url", demo["url"], "audit", *argv, "--format", "json")
    assert cli.exit_code == 0, cli
    assert json.loads(cli.stdout) == web.json()
    assert web.json()["total"] > 0 and web.json()["model"] == case.get("model")


def test_the_cli_table_fits_80_and_120_columns(demo):
    from rich.console import Console

    from judgecal.report.audit import audit_table

    for kw in (dict(family="alpaca_eval", judge=AE_JUDGE, model="claude-2", filter="won_longer"),
               dict(family="llmbar/Natural", judge="GPT-4", filter="flips"),
               dict(family=sd.HOSTILE_FAMILY, judge=sd.HOSTILE_JUDGE)):
        a = audit(demo["url"], kw.pop("family"), kw.pop("judge"), per_page=10, **kw)
        for width in (80, 120):
            table, head, notes = audit_table(a, width)
            console = Console(width=width, record=True, color_system=None)
            console.print(table)
            lines = console.export_text().splitlines()
            assert max(len(x) for x in lines) <= width
            body = [x for x in lines if x.startswith("│")]
            assert len(body) == len(a["rows"]), "\n".join(lines)  # one line a pair
            for k, line in enumerate(body, 1):
                assert line.split("│")[1].strip() == str(k)
            assert any(line.startswith("pairs per filter") for line in head)


def test_cli_table_output(demo, run_cli):
    r = run_cli("--database-url", demo["url"], "audit", "--task-family", "alpaca_eval", "--judge", AE_JUDGE,
                "--model", "claude-2", "--filter", "won", "--per-page", "3")
    assert r.exit_code == 0, r
    assert "model claude-2, filter won: " in r.stdout and "page 1 of " in r.stdout
    assert "won 131, lost 673, won_longer 52" in r.stdout  # the counts line (test_won_and_lost_are_the_verdicts)
    assert "gpt4_1106_preview" in r.stdout  # the other model


# ---------------------------------------------------------------- the page: form, links, escaping
class Form(HTMLParser):
    """The audit form's fields ({name: value}, the selected option of a select) and every link."""

    def __init__(self):
        super().__init__()
        self.fields: dict[str, str] = {}
        self.links: list[str] = []
        self._select = None
        self._in_form = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "form" and a.get("action") == "/audit":
            self._in_form = True
        if tag == "a" and a.get("href"):
            self.links.append(a["href"])
        if not self._in_form:
            return
        if tag == "input":
            self.fields[a["name"]] = a.get("value", "")
        elif tag == "select":
            self._select = a["name"]
            self.fields.setdefault(self._select, "")
        elif tag == "option" and self._select and "selected" in a:
            self.fields[self._select] = a.get("value", "")

    def handle_endtag(self, tag):
        if tag == "select":
            self._select = None
        if tag == "form":
            self._in_form = False


def parse(html: str) -> Form:
    f = Form()
    f.feed(html)
    return f


@pytest.mark.parametrize("given", [
    dict(family="alpaca_eval", judge=AE_JUDGE, model="claude-2", q="python", filter="won", per_page="5", page="2"),
    dict(family=sd.HOSTILE_FAMILY, judge=sd.HOSTILE_JUDGE, model=sd.HOSTILE_MODEL_A, q="<script>", filter="unparsed",
         per_page="2", calibration="none"),
])
def test_the_form_and_links_keep_every_parameter(client, given):
    from judgecal.web.render import link

    r = client.get(link("/audit", **given))
    assert r.status_code == 200, r.text[-300:]
    page = parse(r.text)
    want = {k: v for k, v in given.items() if k != "page"}
    want.setdefault("calibration", "latest")
    assert page.fields == want  # every parameter, exactly (names decoded from the escaped HTML)
    audit_links = [parse_qs(urlsplit(h).query) for h in page.links if h.startswith("/audit?")]
    assert len(audit_links) >= 8  # the filter tabs (with the model filters), the JSON link, the pager
    for q in audit_links:
        for k in ("family", "judge", "model", "q", "per_page"):
            assert q[k] == [given[k]], (k, q)
        if given.get("calibration"):
            assert q["calibration"] == [given["calibration"]]
    tabs = {q.get("filter", ["all"])[0] for q in audit_links if "format" not in q and "page" not in q}
    assert {"won", "lost", "won_longer", "flips"} <= tabs


def test_the_page_is_escaped_and_offers_the_models(client):
    from judgecal.web.render import link

    html = client.get(link("/audit", family=sd.HOSTILE_FAMILY, judge=sd.HOSTILE_JUDGE, model=sd.HOSTILE_MODEL_B)).text
    for tag, attrs in sd_tags(html):
        assert tag != "script" and not [k for k in attrs if k.lower().startswith("on")]
        assert not (tag == "img" and attrs.get("src") == "x")
    assert "<script>alert(1)</script>" not in html and "<img src=x" not in html
    assert "model &lt;script&gt;alert(1)&lt;/script&gt;" in html
    options = re.findall(r'<option value="([^"]*)"', html.split('name="model"', 1)[1].split("</select>", 1)[0])
    assert options == ["", "model &#34;&gt;&lt;img src=x onerror=alert(1)&gt;", "model &lt;script&gt;alert(1)&lt;/script&gt;"]
    # without a model the page offers the filters of a model in the form, not as tabs
    plain = client.get(link("/audit", family="alpaca_eval", judge=AE_JUDGE)).text
    tabs = plain.split('aria-label="filters"', 1)[1].split("</nav>", 1)[0]
    assert "filter=won" not in tabs and "filter=flips" in tabs


def sd_tags(html: str):
    class T(HTMLParser):
        def __init__(self):
            super().__init__()
            self.tags = []

        def handle_starttag(self, tag, attrs):
            self.tags.append((tag, dict(attrs)))

    t = T()
    t.feed(html)
    return t.tags


def test_the_chooser_keeps_model_and_q(client):
    r = client.get("/audit?model=claude-2&q=python&format=json").json()
    assert r["carried"] == {"model": ["claude-2"], "q": ["python"]}
    assert all("model=claude-2" in o["url"] and "q=python" in o["url"] for o in r["options"])


# ---------------------------------------------------------------- SQLite and PostgreSQL alike
UNICODE_FAMILY = "unicode/search"
#: answers whose case folds differently under SQLite's lower(), PostgreSQL's lower() and str.casefold
UNICODE_ANSWERS = [("Café CRÈME brûlée", "a café"), ("İstanbul by night", "plain b1"), ("straße", "plain b2"),
                   ("Kelvin: 300 \u212a", "plain b3"), ("100% sure_ish", "plain b4")]


def _unicode_records() -> dict[str, list[dict]]:
    labels, ratings = [], []
    for i, (ra, rb) in enumerate(UNICODE_ANSWERS):
        prompt = f"Question {i}"
        labels.append({"prompt": prompt, "model_a": "m-a", "response_a": ra, "model_b": "m-b", "response_b": rb,
                       "preference": "a"})
        for model, resp, score in (("m-a", ra, 6), ("m-b", rb, 5)):
            ratings.append({"prompt": prompt, "model": model, "response": resp, "judge": "uni-judge", "scale_min": 1,
                            "scale_max": 10, "score": score, "raw_output": f"[[{score}]]"})
    return {"labels": labels, "ratings": ratings}


def _add_unicode_family(url: str, work: Path) -> None:
    from judgecal.views import importing

    work.mkdir(parents=True, exist_ok=True)
    for kind, recs in _unicode_records().items():
        path = work / f"unicode_{kind}.jsonl"
        path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in recs), encoding="utf-8")
        importing.import_generic(path, kind, "jsonl", UNICODE_FAMILY, url)


def _found(url: str, family: str, judge: str, **kw) -> list[tuple]:
    return [(r["item"]["prompt_sha256"], r["a"]["model"], r["b"]["model"], r["a"]["text"][:40], r["model_side"])
            for r in every_row(url, family, judge, **kw)]


@pytest.mark.postgres
def test_q_and_model_give_the_same_pairs_on_both_dialects(pg_url, demo, data_dir, tmp_path):
    sd.fill(pg_url, data_dir, tmp_path / "files", fit_nested=False, alpaca=False)
    lite = f"sqlite:///{tmp_path / 'uni.db'}"
    from judgecal.db import engine as eng
    from judgecal.db import migrate

    e = eng.create(lite)
    migrate.upgrade(e, "head")
    e.dispose()
    for url in (pg_url, lite):
        _add_unicode_family(url, tmp_path / "uni")
    # the same real data on both: LLMBar Natural (demo: SQLite; pg_url: PostgreSQL)
    for kw in (dict(q="the"), dict(q="PYTHON"), dict(q="%"), dict(q="_"), dict(q="é"), dict(q="É"),
               dict(model="llmbar/output_1"), dict(model="llmbar/output_2", q="Write", filter="won"),
               dict(model="llmbar/output_1", filter="won_longer")):
        assert _found(demo["url"], "llmbar/Natural", "GPT-4", **kw) == _found(pg_url, "llmbar/Natural", "GPT-4", **kw), kw
    # letters whose case PostgreSQL's lower() would fold (È, İ, the Kelvin sign) match only as written on both
    # (str.casefold would match "istanbul", "strasse" and "300 k" too: neither dialect does)
    expect = {"café": [0], "CAFÉ": [], "crème": [], "CRÈME": [0], "istanbul": [], "İSTANBUL": [1], "strasse": [],
              "STRAßE": [2], "300 K": [], "\u212a": [3], "KELVIN": [3], "100%": [4], "1_0": [], "e%h": [], "E_ISH": [4]}
    for q, items in expect.items():
        got = {dialect: _found(url, UNICODE_FAMILY, "uni-judge", q=q) for dialect, url in (("pg", pg_url), ("sqlite", lite))}
        assert got["pg"] == got["sqlite"], q
        texts = [row[3] for row in got["pg"]]
        assert texts == [UNICODE_ANSWERS[i][0][:40] for i in items], (q, texts)
    assert audit(pg_url, UNICODE_FAMILY, "uni-judge", model="m-b", filter="lost")["total"] == 5
