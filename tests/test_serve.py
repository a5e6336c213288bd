"""``judgecal serve``: the read-only web view through Starlette's TestClient on a real database
(tests/serve_data.py): every page answers, filters and pages work, the leaderboards, the
calibration report and mc compare show the CLI's own figures (``--format json`` equals the
page's JSON), only GET/HEAD exist, the database refuses writes, the token rules hold, bad
query parameters are a one-line 400, and hostile names, answers and judge outputs are text.
SQLite throughout; the overview and the audit on PostgreSQL too."""

from __future__ import annotations

import datetime as dt
import json
import re
from html.parser import HTMLParser
from urllib.parse import quote, quote_plus

import pytest

import serve_data as sd

pytest.importorskip("starlette")
pytest.importorskip("httpx")
from starlette.testclient import TestClient  # noqa: E402

from judgecal.web import create_app  # noqa: E402

TOKEN = "serve-test-token-0123456789"
AE_JUDGE = "weighted_alpaca_eval_gpt4_turbo"


@pytest.fixture(scope="module")
def demo(tmp_path_factory, data_dir):
    return sd.demo_db(tmp_path_factory, data_dir)


@pytest.fixture(scope="module")
def client(demo):
    return TestClient(create_app(demo["url"]))


class Tags(HTMLParser):
    """Every start tag of a page with its attributes (the parser decodes entities)."""

    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def tags(html: str) -> list[tuple[str, dict]]:
    p = Tags()
    p.feed(html)
    return p.tags


def assert_inert(html: str) -> None:
    """No script element, no event-handler attribute, no injected <img src=x>, and the
    hostile strings appear as escaped text."""
    found = tags(html)
    assert not [t for t, _ in found if t == "script"]
    assert not [(t, a) for t, a in found for k in a if k.lower().startswith("on")]
    assert not [a for t, a in found if t == "img" and a.get("src") == "x"]
    assert "<script>alert(1)</script>" not in html and "<img src=x" not in html


def q(**params) -> str:
    return "&".join(f"{k}={quote(str(v), safe='')}" for k, v in params.items())


PAGES = ["/", "/leaderboard", "/leaderboard?judge=GPT-4", "/leaderboard?judge=GPT-4&sort=-mean_raw",
         "/winrates", f"/winrates?baseline={sd.BASELINE}&family=alpaca_eval&judge={AE_JUDGE}&bootstrap=50", "/calibration",
         "/calibration?family=llmbar/Natural&judge=GPT-4&bootstrap=50&plots=0",
         "/audit", "/audit?family=llmbar/Natural&judge=GPT-4", "/audit?family=llmbar/Natural&judge=GPT-4&filter=flips",
         "/audit?family=alpaca_eval&judge=weighted_alpaca_eval_gpt4_turbo&page=2",
         "/ratings", "/ratings?judge=GPT-4&status=ok&score_min=8&page=2", "/mc", "/mc/compare?a=1&b=2"]


@pytest.mark.parametrize("path", PAGES)
def test_every_page_answers(client, path):
    r = client.get(path)
    assert r.status_code == 200, (path, r.text[-500:])
    assert r.headers["content-type"].startswith("text/html")
    assert "default-src 'none'" in r.headers["content-security-policy"]
    assert r.headers["x-content-type-options"] == "nosniff" and r.headers["referrer-policy"] == "no-referrer"
    assert "Traceback" not in r.text and "<script" not in r.text and "built-in method" not in r.text
    head = client.head(path)
    assert head.status_code == 200 and head.text == ""


def test_overview_shows_the_database(client, demo):
    html = client.get("/").text
    assert "llmbar/Natural" in html and "alpaca_eval" in html and "weighted_alpaca_eval_gpt4_turbo" in html
    assert f"#{demo['calibration']}" in html and "keep raw" in html and "fresh" in html
    assert "ok 405" in html and "unparsed 1" in html  # LLMBar Natural's 400 ratings and the hostile family's 6
    row = html.split('id="families"', 1)[1].split('<td class="name">llmbar/Natural</td>', 1)[1].split("</tr>", 1)[0]
    assert '<td class="num">100</td><td class="num">200</td>' in row and "pairwise 100" in row  # items, responses, labels
    assert "GPT-4: <span" in row and ">ok 200<" in row
    assert demo["url"].split("///")[1] in html and "read-only" in html


def test_score_board_equals_the_cli(client, demo, run_cli):
    cli = run_cli("--database-url", demo["url"], "leaderboard", "--judge", "GPT-4", "--bootstrap", "200", "--format", "json")
    assert cli.exit_code == 0, cli
    web = client.get("/leaderboard?judge=GPT-4&bootstrap=200&format=json")
    assert web.status_code == 200 and web.headers["content-type"].startswith("application/json")
    assert web.json() == json.loads(cli.stdout)
    html = client.get("/leaderboard?judge=GPT-4&bootstrap=200").text
    rated = [r for r in web.json()["rows"] if r["mean_raw"] is not None]  # (the mc runs' models have rows too)
    assert len(rated) == 2
    for row in rated:  # the page's cells are the CLI table's strings of the same figures
        # the model's cell opens its evidence: the audit of the family and judge, filtered to the model (issue 32)
        from judgecal.web.render import link

        href = link("/audit", family="llmbar/Natural", judge=web.json()["judge_ref"], model=row["model"])
        assert f'<td class="name"><a href="{href.replace("&", "&amp;")}"' in html
        assert client.get(href).status_code == 200
        # an unidentified calibration shows no calibrated mean (issue 23): the cell is '-', the row flagged
        cal = "-" if row["calibration_not_identified"] else f"{row['mean_calibrated']:.3f}"
        assert (row["mean_calibrated"] is None) == row["calibration_not_identified"]
        assert f">{row['mean_raw']:.3f}<" in html and f">{cal}<" in html
        lo, hi = row["mean_raw_ci"]
        assert f"[{lo:.2f}, {hi:.2f}]" in html
    assert "<svg" in html and "mean judge score" in html


def test_score_board_sorts(client):
    rows = client.get("/leaderboard?judge=GPT-4&format=json").json()["rows"]
    order = [r["model"] for r in sorted((r for r in rows if r["mean_raw"] is not None), key=lambda r: r["mean_raw"])]
    for sort, expected in (("mean_raw", order), ("-mean_raw", order[::-1])):
        html = client.get(f"/leaderboard?judge=GPT-4&sort={sort}").text
        body = html.split("<tbody>", 1)[1]
        assert [m for m in re.findall(r'<td class="name"><a [^>]*>(llmbar/output_\d)</a></td>', body)] == expected
    assert client.get("/leaderboard?judge=GPT-4&sort=nope").status_code == 400


def test_win_rates_equal_the_cli(client, demo, run_cli):
    cli = run_cli("--database-url", demo["url"], "leaderboard", "--baseline", sd.BASELINE, "--task-family", "alpaca_eval", "--judge", AE_JUDGE, "--bootstrap", "100",
                  "--sort-by", "win_rate", "--format", "json")
    assert cli.exit_code == 0, cli
    web = client.get(f"/winrates?baseline={sd.BASELINE}&family=alpaca_eval&judge={AE_JUDGE}&bootstrap=100&sort=win_rate&format=json").json()
    assert web == json.loads(cli.stdout)
    html = client.get(f"/winrates?baseline={sd.BASELINE}&family=alpaca_eval&judge={AE_JUDGE}&bootstrap=100&sort=win_rate").text
    models = [r["model"] for r in web["rows"]]
    assert set(sd.ALPACA_MODELS) <= set(models)
    body = html.split("<tbody>", 1)[1].split("</tbody>", 1)[0]
    # the board's own order; each model links to its evidence, the baseline (50% by construction) to none
    assert re.findall(r'<tr><td class="name">(?:<a href="[^"]*"[^>]*>)?([^<]+)', body) == models
    for r in web["rows"]:
        assert f">{r['win_rate']:.2f}<" in body and f">{r['length_controlled_winrate']:.2f}<" in body
    assert "choose a baseline" in client.get("/winrates").text and sd.BASELINE in client.get("/winrates").text


def test_calibration_page_is_the_report(client, demo, run_cli):
    cli = run_cli("--database-url", demo["url"], "report", "--task-family", "llmbar/Natural", "--judge", "GPT-4",
                  "--bootstrap", "50", "--format", "json")
    assert cli.exit_code == 0, cli
    web = client.get("/calibration?family=llmbar/Natural&judge=GPT-4&bootstrap=50&format=json").json()
    assert web == json.loads(cli.stdout)
    html = client.get("/calibration?family=llmbar/Natural&judge=GPT-4&bootstrap=50").text
    entry = web["entries"][0]
    assert entry["recommendation"]["decision"] == "keep raw" and "recommended: keep raw" in html
    assert entry["verdict"]["code"] in html
    for label in ("raw (no calibration)", "linear penalty", "calibration (polylog, fitted)"):
        assert label in html
    raw = entry["methods"]["raw"]
    assert f"{raw['agreement']:.3f}" in html
    assert html.count("data:image/png;base64,") == 2  # the report's two plots
    listing = client.get("/calibration").text
    assert f'calibration={demo["calibration"]}' in listing
    assert client.get(f"/calibration?calibration={demo['calibration']}&plots=0").status_code == 200
    # a family alone narrows the list to its calibrations (docs/serve.md); an unknown one is a 404
    narrowed = client.get("/calibration?family=llmbar/Natural&format=json").json()["calibrations"]
    assert narrowed and {f["task_family"] for f in narrowed} == {"llmbar/Natural"}
    assert client.get("/calibration?family=nosuch").status_code == 404


def test_audit_pairs_and_filters(client, demo):
    from judgecal.views.audit import judge_audit

    a = judge_audit("llmbar/Natural", "GPT-4", demo["url"], per_page=200)
    fit = demo["fit"]
    assert a["total"] == 100 and a["calibration"]["id"] == demo["calibration"] and a["calibration"]["stale"] is False
    # the audit reads the scores and applies the calibration as the fit did: its in-sample figures
    assert a["agreement"]["raw"] == pytest.approx(fit["agreement_raw"])
    assert a["agreement"]["calibrated"] == pytest.approx(fit["agreement_calibrated"])
    assert a["counts"]["disagree"] == sum(r["decision"] != r["gold"] for r in a["rows"])
    assert a["counts"]["flips"] == sum(r["changed"] for r in a["rows"]) > 0
    assert a["counts"]["ties"] == sum(r["raw_decision"] == "tie" for r in a["rows"])
    keys = [(r["item"]["prompt_sha256"], r["a"]["model"], r["b"]["model"]) for r in a["rows"]]
    assert keys == sorted(keys)  # content order, never row ids
    flips = judge_audit("llmbar/Natural", "GPT-4", demo["url"], filter="flips")
    assert flips["total"] == a["counts"]["flips"] and all(r["changed"] for r in flips["rows"])
    assert all(r["raw_decision"] != r["calibrated_decision"] for r in flips["rows"])
    r0 = flips["rows"][0]
    assert r0["a"]["ratings"][0]["raw_output"] is not None and r0["item"]["prompt"]
    html = client.get("/audit?family=llmbar/Natural&judge=GPT-4&filter=flips").text
    assert html.count('<article class="pair">') == min(flips["total"], 25)
    assert html.count("calibration changed the decision") == min(flips["total"], 25)
    assert f"raw {a['agreement']['raw']:.3f}" in html
    page1 = client.get("/audit?family=llmbar/Natural&judge=GPT-4&per_page=10").text
    page2 = client.get("/audit?family=llmbar/Natural&judge=GPT-4&per_page=10&page=2").text
    items = lambda h: re.findall(r'title="prompt SHA-256 ([0-9a-f]{64})"', h)  # noqa: E731
    assert len(items(page1)) == len(items(page2)) == 10 and not set(items(page1)) & set(items(page2))
    assert 'rel="next"' in page1 and 'rel="prev"' in page2
    none = judge_audit("llmbar/Natural", "GPT-4", demo["url"], calibration="none")
    assert none["calibration"] is None and none["counts"]["flips"] == 0


def test_audit_pairwise_judge_orders(client, demo):
    from judgecal.views.audit import judge_audit

    a = judge_audit(sd.HOSTILE_FAMILY, sd.HOSTILE_PAIR_JUDGE, demo["url"])
    assert a["total"] == 3 and a["counts"]["inconsistent"] == 1
    for r in a["rows"]:
        assert set(r["verdicts"]) == {"ab", "ba"} and r["gold"] in ("a", "b")
        assert all(v["raw_output"].startswith("Output (") for v in r["verdicts"].values())
    bad = judge_audit(sd.HOSTILE_FAMILY, sd.HOSTILE_PAIR_JUDGE, demo["url"], filter="inconsistent")["rows"]
    assert len(bad) == 1 and bad[0]["verdict_decision"] == "inconsistent"
    alpaca = judge_audit("alpaca_eval", "weighted_alpaca_eval_gpt4_turbo", demo["url"], per_page=5)
    assert alpaca["total"] == 3 * 805 and len(alpaca["rows"]) == 5  # three models' verdicts on 805 instructions
    unparsed = judge_audit(sd.HOSTILE_FAMILY, sd.HOSTILE_JUDGE, demo["url"], filter="unparsed")
    assert unparsed["total"] == 1 and unparsed["rows"][0]["raw_decision"] is None


def test_ratings_filters_and_pages(client, demo):
    from judgecal.views.browse import ratings

    all_gpt4 = ratings(demo["url"], judge="GPT-4", per_page=200)
    assert all_gpt4["total"] == 200 and len(all_gpt4["rows"]) == 200
    high = ratings(demo["url"], judge="GPT-4", score_min=9, per_page=200)
    assert high["total"] == sum(r["score"] >= 9 for r in all_gpt4["rows"]) and all(r["score"] >= 9 for r in high["rows"])
    band = ratings(demo["url"], judge="GPT-4", score_min=3, score_max=6, per_page=200)
    assert all(3 <= r["score"] <= 6 for r in band["rows"])
    model = ratings(demo["url"], model="llmbar/output_1", per_page=200)
    assert model["total"] == 200 and {r["model"] for r in model["rows"]} == {"llmbar/output_1"}
    unparsed = ratings(demo["url"], status="unparsed")
    assert unparsed["total"] == 1 and unparsed["rows"][0]["judge"] == sd.HOSTILE_JUDGE
    today = dt.datetime.now(dt.timezone.utc).date()
    assert ratings(demo["url"], since=today - dt.timedelta(days=1), until=today + dt.timedelta(days=1))["total"] == 406
    assert ratings(demo["url"], since=today + dt.timedelta(days=2))["total"] == 0
    p1 = client.get("/ratings?judge=GPT-4&per_page=20").text
    p2 = client.get("/ratings?judge=GPT-4&per_page=20&page=2").text
    assert "200 ratings, page 1 of 10" in p1 and "page 2 of 10" in p2 and p1 != p2
    assert client.get(f"/ratings?{q(model='llmbar/output_2', status='ok')}").status_code == 200
    assert "0 ratings" in client.get(f"/ratings?since={today + dt.timedelta(days=2)}").text


def test_mc_pages_equal_the_cli(client, demo, run_cli):
    a, b = demo["mc_runs"]
    cli = run_cli("--database-url", demo["url"], "mc", "compare", str(a), str(b), "--format", "json")
    assert cli.exit_code == 0, cli
    assert client.get(f"/mc/compare?a={a}&b={b}&format=json").json() == json.loads(cli.stdout)
    html = client.get(f"/mc/compare?a={a}&b={b}").text
    assert "+0.0500" in html and "-0.0250" in html and "opposite directions" in html
    listed = run_cli("--database-url", demo["url"], "mc", "list", "--format", "json")
    assert client.get("/mc?format=json").json() == json.loads(listed.stdout)
    assert client.get("/mc/compare?a=1").status_code == 400
    assert client.get("/mc/compare?a=1&b=999").status_code == 404


@pytest.mark.parametrize("path, needle", [
    ("/leaderboard?bootstrap=x", "bootstrap must be an integer"),
    ("/leaderboard?bootstrap=-1", "bootstrap must be between 0 and 100000"),
    ("/leaderboard?judge=nobody", "no judge named 'nobody'"),
    ("/leaderboard?max_unparsed=nan", "max_unparsed must be a finite number"),
    ("/leaderboard?judge=GPT-4&judge=ChatGPT", "judge is given 2 times"),
    (f"/winrates?baseline=nobody&family=alpaca_eval&judge={AE_JUDGE}", "no usable verdicts"),
    ("/winrates?baseline=nobody", "no pairwise verdicts against baseline 'nobody'; baselines with verdicts: "),
    ("/winrates?baseline=x&length_unit=miles", "length_unit must be one of"),
    ("/audit?family=llmbar/Natural&judge=GPT-4&filter=bogus", "filter must be one of"),
    ("/audit?family=llmbar/Natural&judge=GPT-4&page=0", "page must be between 1"),
    ("/audit?family=llmbar/Natural&judge=GPT-4&page=999", "past the last page"),
    ("/audit?family=nope&judge=GPT-4", "task family 'nope' does not exist"),
    ("/ratings?status=maybe", "status must be one of"),
    ("/ratings?score_min=5&score_max=1", "score_min 5 is above score_max 1"),
    ("/ratings?since=yesterday", "since must be a date"),
    ("/ratings?per_page=100000", "per_page must be between 1 and 200"),
    ("/ratings?evil=1", "unknown query parameter 'evil'"),
    ("/ratings?model=a%00b", "control character"),
    ("/calibration?calibration=abc", "calibration must be a calibration id"),
    ("/calibration?calibration=999", "no calibration with id 999"),
    ("/mc/compare?a=x&b=1", "a must be an integer"),
    ("/nowhere", "no such page"),
])
def test_bad_parameters_are_one_line(client, path, needle):
    r = client.get(path)
    assert r.status_code in (400, 404), (path, r.status_code)
    msg = re.findall(r'<p class="error-message">(.*?)</p>', r.text, re.S)
    assert len(msg) == 1 and "\n" not in msg[0] and needle.replace("'", "&#39;") in msg[0], (path, msg)
    assert "Traceback" not in r.text and 'File "' not in r.text


def test_only_get_and_head(client, demo):
    app = client.app
    for route in app.routes:
        methods = getattr(route, "methods", None)
        assert methods is None or methods <= {"GET", "HEAD"}, route.path  # the static mount has none: GET/HEAD only
    for path in ("/", "/leaderboard", "/audit", "/ratings", "/mc", "/mc/compare", "/static/style.css"):
        for method in ("POST", "PUT", "DELETE", "PATCH"):
            assert client.request(method, path).status_code == 405, (method, path)
    assert client.post("/").headers["allow"] == "GET, HEAD"


def _count_rows(url):
    from sqlalchemy import text

    from judgecal.db.engine import get_engine

    e = get_engine(url)
    with e.connect() as c:
        n = c.execute(text("select count(*) from rating")).scalar()
    e.dispose()
    return n


def test_database_refuses_writes(client, demo):
    from sqlalchemy import text
    from sqlalchemy.exc import DBAPIError

    from judgecal.db.engine import get_engine

    url = client.app.state.database_url
    assert "mode=ro" in url
    before = _count_rows(demo["url"])
    engine = get_engine(url)  # what every page's view function opens
    for sql in ("insert into task_family (name, created_at) values ('x', '2024-01-01')", "delete from rating",
                "update judge set name = 'x'", "create table evil (a int)"):
        with engine.connect() as conn, pytest.raises(DBAPIError, match="readonly|read-only"):
            conn.execute(text(sql))
            conn.commit()
    engine.dispose()
    for path in ("/", "/leaderboard?judge=GPT-4&bootstrap=50", "/audit?family=llmbar/Natural&judge=GPT-4", "/ratings"):
        assert client.get(path).status_code == 200
    assert _count_rows(demo["url"]) == before


def test_token(demo):
    app = create_app(demo["url"], token=TOKEN)
    with TestClient(app) as c:
        r = c.get("/")
        assert r.status_code == 401 and "needs its token" in r.text and "default-src 'none'" in r.headers["content-security-policy"]
        assert c.get("/?token=wrong").status_code == 401
        assert c.get("/static/style.css").status_code == 401
        good = c.get(f"/?token={TOKEN}")
        assert good.status_code == 200 and good.history[0].status_code == 303  # followed: the token left the address
        cookie = good.history[0].headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and TOKEN not in cookie
        assert c.get("/ratings").status_code == 200  # the cookie
        assert c.get("/static/style.css").status_code == 200
    with TestClient(app, follow_redirects=False) as c:
        # a good ?token= sets the cookie and sends the browser to the same address without the token,
        # every other parameter kept as sent (order, repeats, encoding)
        r = c.get(f"/ratings?judge=GPT-4&token={TOKEN}&family=llmbar%2FNatural&score_min=8&family=x")
        assert r.status_code == 303 and r.headers["location"] == "/ratings?judge=GPT-4&family=llmbar%2FNatural&score_min=8&family=x"
        assert "judgecal_token=" in r.headers["set-cookie"] and TOKEN not in r.headers["set-cookie"]
        assert r.headers["x-judgecal-cache"] == "miss" and "default-src 'none'" in r.headers["content-security-policy"]
        assert c.get(f"/?token={TOKEN}").headers["location"] == "/"
        assert c.head(f"/static/style.css?token={TOKEN}").headers["location"] == "/static/style.css"
        landed = c.get("/ratings?judge=GPT-4&score_min=8")  # the cookie alone authenticates
        assert landed.status_code == 200 and "set-cookie" not in landed.headers
        assert c.get("/?token=wrong").status_code == 401  # a wrong token is refused, cookie or not
    with TestClient(app, follow_redirects=False) as c:
        assert c.get("/ratings").status_code == 401  # no cookie: nothing without the token
    with TestClient(app) as c:
        assert c.get("/", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200
        assert c.get("/", headers={"Authorization": "Bearer nope"}).status_code == 401
        c.cookies.set("judgecal_token", "forged")
        assert c.get("/").status_code == 401


def test_serve_command_rules(run_cli, demo, monkeypatch):
    from judgecal.cli import _loopback

    for host in ("0.0.0.0", "::", "192.168.1.5", "example.org"):
        r = run_cli("--database-url", demo["url"], "serve", "--host", host)
        assert r.exit_code == 2 and "not a loopback address" in r.stderr and "--token" in r.stderr, r
        assert len(r.stderr.strip().splitlines()) == 1
    r = run_cli("serve", "--token", "short")
    assert r.exit_code == 2 and "at least 16 characters" in r.stderr
    monkeypatch.setenv("JUDGECAL_SERVE_TOKEN", "short")
    r = run_cli("serve", "--host", "0.0.0.0")
    assert r.exit_code == 2 and "at least 16 characters" in r.stderr
    assert all(_loopback(h) for h in ("127.0.0.1", "127.1.2.3", "::1", "localhost", "[::1]"))
    assert not any(_loopback(h) for h in ("0.0.0.0", "::", "10.0.0.1", "example.org"))
    import socket

    monkeypatch.delenv("JUDGECAL_SERVE_TOKEN")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        r = run_cli("--database-url", demo["url"], "serve", "--port", str(busy.getsockname()[1]))
    assert r.exit_code == 1 and "cannot listen on 127.0.0.1:" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    r = run_cli("--database-url", "postgresql+psycopg://team:s3cret@127.0.0.1:1/x", "serve")
    assert r.exit_code == 2 and "s3cret" not in r.output and "default_transaction_read_only" not in r.output
    help_ = run_cli("serve", "--help")
    assert help_.exit_code == 0 and "Examples:" in help_.stdout and "--host 0.0.0.0" in help_.stdout


def test_serve_refuses_a_database_it_cannot_serve(tmp_path):
    from judgecal.errors import DatabaseError, UsageError

    with pytest.raises(UsageError, match="no database file"):
        create_app(f"sqlite:///{tmp_path / 'missing.db'}")
    (tmp_path / "empty.db").write_bytes(b"")
    with pytest.raises(DatabaseError, match="not a judgecal database"):
        create_app(f"sqlite:///{tmp_path / 'empty.db'}")
    with pytest.raises(UsageError, match="in-memory"):
        create_app("sqlite://")


def test_a_page_that_would_write_says_so():
    """A page whose view function would write (token lengths not stored yet) is refused by the
    read-only database: 403 and one line naming what to run, never a traceback."""
    import sqlite3

    from sqlalchemy.exc import OperationalError

    from judgecal.web.app import _unexpected

    exc = OperationalError("INSERT INTO token_length ...", {}, sqlite3.OperationalError("attempt to write a readonly database"))
    status, line = _unexpected(exc)
    assert status == 403 and "judgecal lengths" in line and "\n" not in line
    assert _unexpected(ValueError("boom\nsecond line")) == (500, "unexpected ValueError: boom")


def test_an_empty_database(tmp_path):
    """A migrated database with nothing in it: every page answers, the leaderboard with one line."""
    from judgecal.db import engine as eng
    from judgecal.db import migrate

    url = f"sqlite:///{tmp_path / 'empty.db'}"
    e = eng.create(url)
    migrate.upgrade(e, "head")
    e.dispose()
    c = TestClient(create_app(url))
    for path in ("/", "/winrates", "/calibration", "/audit", "/ratings", "/mc"):
        r = c.get(path)
        assert r.status_code == 200 and "Traceback" not in r.text, path
    assert "No calibration stored yet" in c.get("/").text and "0 ratings" in c.get("/ratings").text
    r = c.get("/leaderboard")
    assert r.status_code == 404 and "no ratings in the database yet" in r.text


def test_passwords_never_shown():
    from judgecal.db.engine import read_only_url

    ro = read_only_url("postgresql+psycopg://team:s3cret-pw@127.0.0.1:5432/ratings")
    assert "default_transaction_read_only" in ro
    from judgecal.db.engine import mask_url

    assert "s3cret-pw" not in mask_url(ro)


HOSTILE_PAGES = [
    "/", f"/audit?{q(family=sd.HOSTILE_FAMILY, judge=sd.HOSTILE_JUDGE)}",
    f"/audit?{q(family=sd.HOSTILE_FAMILY, judge=sd.HOSTILE_PAIR_JUDGE)}",
    f"/audit?{q(family=sd.HOSTILE_FAMILY, judge=sd.HOSTILE_JUDGE, filter='unparsed')}",
    f"/ratings?{q(family=sd.HOSTILE_FAMILY)}", f"/leaderboard?{q(judge=sd.HOSTILE_JUDGE)}", "/mc", "/mc/compare?a=1&b=2",
    f"/ratings?{q(model=sd.SCRIPT)}", "/audit",
]


@pytest.mark.parametrize("path", HOSTILE_PAGES)
def test_hostile_content_is_text(client, path):
    r = client.get(path)
    assert r.status_code == 200, (path, r.text[-300:])
    assert_inert(r.text)


def test_hostile_content_shown_escaped(client):
    html = client.get(f"/audit?{q(family=sd.HOSTILE_FAMILY, judge=sd.HOSTILE_JUDGE)}").text
    assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in html  # answers and judge outputs, as text
    assert "&#34;&gt;&lt;img src=x onerror=&#34;window.__pwned=1&#34;&gt;" in html
    assert "judge &lt;script&gt;alert(1)&lt;/script&gt;" in html and "hostile &lt;b&gt;family&lt;/b&gt;" in html
    board = client.get(f"/leaderboard?{q(judge=sd.HOSTILE_JUDGE)}").text
    assert "model &lt;script&gt;alert(1)&lt;/script&gt;" in board  # table and the SVG chart's labels
    svg = board.split("<svg", 1)[1].split("</svg>", 1)[0]
    assert "&lt;script&gt;" in svg and "<script" not in svg
    # a hostile name in a link is percent-encoded in the query string
    assert quote_plus(sd.HOSTILE_FAMILY) in client.get("/").text


@pytest.mark.postgres
def test_overview_and_audit_on_postgresql(pg_url, data_dir, tmp_path):
    from sqlalchemy import text
    from sqlalchemy.exc import DBAPIError

    from judgecal.db.engine import get_engine

    info = sd.fill(pg_url, data_dir, tmp_path / "files", fit_nested=False, alpaca=False)
    c = TestClient(create_app(pg_url))
    assert "default_transaction_read_only" in c.app.state.database_url
    html = c.get("/").text
    assert "llmbar/Natural" in html and "hostile &lt;b&gt;family&lt;/b&gt;" in html and f"#{info['calibration']}" in html
    assert_inert(html)
    audit = c.get("/audit?family=llmbar/Natural&judge=GPT-4&per_page=100")
    assert audit.status_code == 200 and audit.text.count('<article class="pair">') == 100
    from judgecal.views.audit import judge_audit

    a = judge_audit("llmbar/Natural", "GPT-4", c.app.state.database_url, per_page=200)
    assert a["agreement"]["raw"] == pytest.approx(info["fit"]["agreement_raw"])
    assert a["agreement"]["calibrated"] == pytest.approx(info["fit"]["agreement_calibrated"])
    hostile = c.get(f"/audit?{q(family=sd.HOSTILE_FAMILY, judge=sd.HOSTILE_PAIR_JUDGE)}")
    assert hostile.status_code == 200 and "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in hostile.text
    assert_inert(hostile.text)
    engine = get_engine(c.app.state.database_url)
    with engine.connect() as conn, pytest.raises(DBAPIError, match="read-only transaction"):
        conn.execute(text("delete from rating"))
    engine.dispose()
