"""The team's database (tests/serve_data.py ``team_db``: everything ``make demo`` imports, LLMBar's
repository layout with about 65 judges, a second judge named "GPT-4", a 175-character model name
and one named with a right-to-left override) in ``judgecal serve``, issue 32: "Pages and tables
that cannot break" and the crawl of "Done when".

- The crawl: ``/`` and one page of each kind its links reach (a link per path and set of
  parameters, plus what the overview does not link itself: the win-rate and publish boards of
  the baseline, a pairwise judge, a shared judge name, an audit of one model reached from the
  win-rate board), at most :data:`MAX_PAGES`, each opened in real headless Chromium and measured
  at 1400 and 900 px by JavaScript in the page (tests/test_serve_browser.py ``LAYOUT``): HTTP
  status 200 and no error page (a choice page is a 200), no table wider than its box, every
  number cell in view, the page not wider than the window. Pages that take ``bootstrap`` are
  opened with ``bootstrap=0`` (the layout is the same; the run is short).
- Every link form docs/serve.md gives (its backticked ``/path?...`` forms, placeholders filled
  from the database) answers 200 (a board or a choice page), through Starlette's TestClient.
- The forms carry every parameter: the leaderboard's and win-rate board's (and the ratings' and
  publish board's) form, submitted unchanged, sends back every parameter given.

Run alone: ``HF_HUB_OFFLINE=1 .venv/bin/pytest -q -p no:cacheprovider tests/test_team_browser.py``
(about 75 s on 2 cores, 30 s of it building the team's database; JUDGECAL_SCREENSHOTS=DIR keeps
a screenshot of each page at each width)."""

from __future__ import annotations

import html
import os
import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import parse_qsl, quote, urlencode, urlsplit

import pytest

import serve_data as sd
from test_serve_browser import TOKEN, _chromium, _need_browser, _serve, _severe, layout_problems, resize

pytest.importorskip("starlette")
from starlette.testclient import TestClient  # noqa: E402

from judgecal.web import create_app  # noqa: E402

pytestmark = pytest.mark.slow

BASE = sd.BASELINE
AE = "weighted_alpaca_eval_gpt4_turbo"
WIDTHS = (1400, 900)
MAX_PAGES = 40
#: the pages that take ``bootstrap``: crawled with ``bootstrap=0`` unless the link gives one
BOOTSTRAP_PAGES = {"/leaderboard", "/winrates", "/publish", "/judge", "/calibration", "/bt"}
#: every path the crawl must reach
PATHS = {"/", "/leaderboard", "/winrates", "/publish", "/judge", "/calibration", "/audit", "/ratings", "/mc", "/bt"}
DOCS = Path(__file__).resolve().parents[1] / "docs" / "serve.md"


@pytest.fixture(scope="module")
def team(tmp_path_factory, data_dir):
    return sd.team_db(tmp_path_factory, data_dir)


@pytest.fixture(scope="module")
def client(team):
    return TestClient(create_app(team["url"], cache_mb=0))


# ---------------------------------------------------------------- the crawl
def links(page: str) -> list[str]:
    """The same-site links of a page (``href="/..."``, not the static files), unescaped, in order, once each."""
    found = (html.unescape(h) for h in re.findall(r'href="([^"]*)"', page))
    return list(dict.fromkeys(h for h in found if h.startswith("/") and not h.startswith(("//", "/static/"))))


def _shape(href: str) -> tuple:
    u = urlsplit(href)
    return u.path, tuple(sorted({k for k, _ in parse_qsl(u.query, keep_blank_values=True)}))


def _short(href: str) -> str:
    """``href`` with ``bootstrap=0`` where its page takes it and the link gives none."""
    u = urlsplit(href)
    if u.path in BOOTSTRAP_PAGES and "bootstrap" not in dict(parse_qsl(u.query)):
        return href + ("&" if u.query else "?") + "bootstrap=0"
    return href


def crawl(client) -> list[str]:
    """``/``, the first link of each (path, parameter names) on it, then what the overview does
    not link itself (each reached as a reader would: the audit of one model from the win-rate
    board's row), deduplicated, at most :data:`MAX_PAGES`."""
    home = client.get("/")
    assert home.status_code == 200
    first: dict[tuple, str] = {}
    for href in links(home.text):
        first.setdefault(_shape(href), href)
    board = client.get(f"/winrates?baseline={BASE}&bootstrap=0")
    assert board.status_code == 200
    by_model = {dict(parse_qsl(urlsplit(h).query)).get("model"): h for h in links(board.text)
                if urlsplit(h).path == "/audit"}
    assert sd.LONG_MODEL in by_model and sd.RLO_MODEL in by_model, sorted(m for m in by_model if m)[:5]
    extra = [f"/winrates?baseline={quote(BASE)}",  # the board with the long and bidi names
             f"/publish?baseline={quote(BASE)}",
             "/leaderboard?judge=GPT-4",  # a name two judges share: the choice page
             f"/judge?judge={quote(AE)}", "/judge?judge=GPT-4%2FVanilla",  # pairwise judges (65 ranked)
             by_model[sd.LONG_MODEL], by_model[sd.RLO_MODEL],
             # the Bradley-Terry board with style control, its CIs under the values (the long and bidi names)
             f"/bt?family=alpaca_eval&judge={quote(AE)}&bootstrap=20",
             "/bt?family=llmbar/Natural&judge=GPT-4%2FVanilla"]
    pages = list(dict.fromkeys(_short(h) for h in ["/", *first.values(), *extra]))
    return pages[:MAX_PAGES]


def test_the_crawl_covers_every_page(client):
    pages = crawl(client)
    paths = {urlsplit(p).path for p in pages}
    assert PATHS <= paths, PATHS - paths
    shapes = {_shape(p) for p in pages}
    # the choice pages (/leaderboard, /winrates, /audit), the lists and the boards (a choice page keeps bootstrap=0)
    for needed in (("/leaderboard", ("bootstrap",)), ("/leaderboard", ("bootstrap", "judge")),
                   ("/winrates", ("bootstrap",)), ("/winrates", ("baseline", "bootstrap")),
                   ("/publish", ("bootstrap",)), ("/publish", ("baseline", "bootstrap")),
                   ("/calibration", ("bootstrap",)), ("/calibration", ("bootstrap", "calibration")),
                   ("/audit", ()), ("/audit", ("family", "judge")), ("/audit", ("family", "judge", "model")),
                   ("/judge", ("bootstrap", "judge"))):
        assert needed in shapes, needed
    assert len(pages) <= MAX_PAGES


@pytest.fixture(scope="module")
def team_server(tmp_path_factory, team):
    _need_browser()
    # --no-warm: the warmer would compute every judge's board (1000 resamples) beside the test
    yield from _serve(tmp_path_factory, team, ("--no-warm",))


@pytest.fixture(scope="module")
def chrome(tmp_path_factory, team_server):
    yield from _chromium(tmp_path_factory)


def test_no_page_breaks_in_chromium(client, team_server, chrome):
    """Every crawled page at 1400 and 900 px: status 200, no table wider than its box, every
    number in view, nothing wider than the window, no console error."""
    base = team_server["base"]
    shots = os.environ.get("JUDGECAL_SCREENSHOTS")
    chrome.get(f"{base}/?token={TOKEN}")  # the cookie, and a redirect to / without the token
    assert chrome.current_url == f"{base}/", chrome.current_url
    problems = []
    for i, path in enumerate(crawl(client)):
        resize(chrome, WIDTHS[0])
        chrome.get(base + path)
        severe = _severe(chrome)
        if severe:
            problems.append(f"{path}: console: {severe[:2]}")
        for width in WIDTHS:
            resize(chrome, width)
            problems += [f"{path} at {width} px: {p}" for p in layout_problems(chrome)]
            if shots:
                Path(shots).mkdir(parents=True, exist_ok=True)
                chrome.save_screenshot(str(Path(shots) / f"team_{i:02d}_{width}.png"))
    assert not problems, "\n".join(problems)


def test_the_static_report_fits_900_and_1400_px(team, chrome, run_cli, tmp_path):
    """``judgecal report --format html`` of the team's database (every family, 65 judges, the
    long and bidi names) at 1400 and 900 px: no table wider than its box, every number in view,
    nothing wider than the window (the pairwise judges' tables scrolled sideways before: their
    CIs and headers did not wrap)."""
    res = run_cli("--database-url", team["url"], "report", "--format", "html", "--no-plots", "--bootstrap", "50",
                  "--out", str(tmp_path))
    assert res.exit_code == 0, res
    chrome.get((tmp_path / "report.html").as_uri())
    problems = []
    for width in WIDTHS:
        resize(chrome, width)
        problems += [f"report at {width} px: {p}" for p in layout_problems(chrome) if "HTTP status" not in p]
    assert not problems, "\n".join(problems)


# ---------------------------------------------------------------- the link forms of the docs
def doc_forms() -> list[str]:
    """The backticked link forms of docs/serve.md: ``/path?query`` and, in a line that names a
    ``/path`` first, the bare ``?query`` forms of that path (``/publish`` (``?baseline=MODEL``))."""
    out = []
    for line in DOCS.read_text(encoding="utf-8").splitlines():
        path = None
        for form in re.findall(r"`([/?][^`\s]*)`", line):
            if form.startswith("/"):
                path = form.split("?")[0]
                if "?" in form:
                    out.append(form)
            elif path and "token" not in form:
                out.append(path + form)
    return list(dict.fromkeys(out))


def test_every_link_form_of_the_docs_answers(team, client):
    forms = doc_forms()
    assert {"/leaderboard?judge=GPT-4", "/winrates?baseline=MODEL", "/publish?baseline=MODEL",
            "/calibration?calibration=ID", "/audit?family=F&judge=J", "/mc/compare?a=A&b=B"} <= set(forms), forms
    runs = [r["id"] for r in client.get("/mc?format=json").json()]  # newest first
    fill = {"F": "llmbar/Natural", "x": "llmbar/Natural", "J": "GPT-4", "MODEL": BASE,
            "ID": str(team_db_calibration(client)), "A": None, "B": None}
    if len(runs) >= 2:
        fill.update(A=str(runs[1]), B=str(runs[0]))
    checked = []
    for form in forms:
        u = urlsplit(form)
        items = [(k, fill.get(v, v)) for k, v in parse_qsl(u.query)]
        if any(v is None for _, v in items):  # mc runs: the team's database holds none (no model pulled)
            continue
        if u.path in BOOTSTRAP_PAGES and "bootstrap" not in dict(items):
            items.append(("bootstrap", "0"))
        url = u.path + ("?" + urlencode(items) if items else "")
        r = client.get(url)
        assert r.status_code == 200 and 'class="error-message"' not in r.text, (form, url, r.status_code, _error(r.text))
        checked.append(url)
    assert len(checked) >= len(forms) - 1, (checked, forms)


def team_db_calibration(client, judge: str = "ChatGPT") -> int:
    """The newest calibration of ``judge`` on LLMBar Natural."""
    fits = client.get("/calibration?format=json&family=llmbar/Natural").json()["calibrations"]
    return next(f["id"] for f in fits if f["judge"] == judge)


# ---------------------------------------------------------------- forms carry every parameter
class _Form(HTMLParser):
    """What a browser sends for the form whose ``action`` is given, submitted unchanged: every
    named input's value, each selected option (a single select without one: its first)."""

    def __init__(self, action: str):
        super().__init__()
        self.action, self.inside, self.items, self.select, self.first = action, False, [], None, None
        self.found = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "form" and a.get("action") == self.action:
            self.inside = self.found = True
        if not self.inside:
            return
        if tag == "input" and a.get("name") and a.get("type") not in ("submit", "button", "reset"):
            if a.get("type") not in ("checkbox", "radio") or "checked" in a:
                self.items.append((a["name"], a.get("value") or ""))
        elif tag == "select":
            self.select, self.first = (a["name"], "multiple" in a, []), None
        elif tag == "option" and self.select is not None:
            value = a.get("value", "")
            self.first = value if self.first is None else self.first
            if "selected" in a:
                self.select[2].append(value)

    def handle_endtag(self, tag):
        if tag == "form":
            self.inside = False
        elif tag == "select" and self.select is not None:
            name, multiple, chosen = self.select
            self.items += [(name, v) for v in (chosen or ([] if multiple else [self.first or ""]))]
            self.select = None


def submitted(page: str, action: str) -> list[tuple[str, str]]:
    """The non-blank parameters the form of ``action`` sends, submitted unchanged (a blank one is
    the same as none: every page reads it so)."""
    form = _Form(action)
    form.feed(page)
    assert form.found, f"no form with action {action}"
    return sorted((k, v) for k, v in form.items if v.strip())


FORM_CASES = [
    ("/leaderboard", [("judge", "ChatGPT"), ("family", "llmbar/Natural"), ("family", "llmbar/Adversarial_GPTInst"),
                      ("bootstrap", "0"), ("seed", "3"), ("min_ratings", "5"), ("max_unparsed", "0.1"),
                      ("sort", "-mean_raw")]),
    ("/leaderboard", [("judge", "ChatGPT"), ("family", "llmbar/Natural"), ("calibration", "ID"),
                      ("calibration_from", "llmbar/Natural"), ("bootstrap", "20")]),
    ("/winrates", [("baseline", BASE), ("family", "alpaca_eval"), ("judge", AE), ("bootstrap", "0"), ("seed", "7"),
                   ("length_unit", "words"), ("short_floor", "0.3"), ("lc_regulariser", "auto"), ("joint", "0"),
                   ("sort", "win_rate")]),
    ("/winrates", [("baseline", BASE), ("bootstrap", "0")]),  # family and judge implied: not added
    ("/bt", [("baseline", BASE), ("family", "alpaca_eval"), ("judge", AE), ("control", "length"), ("bootstrap", "0"),
             ("seed", "4"), ("outcome", "verdict"), ("length_unit", "words")]),
    ("/publish", [("family", "llmbar/Natural"), ("judge", "GPT-4"), ("publish", "raw"), ("bootstrap", "0"),
                  ("seed", "2"), ("min_ratings", "10"), ("max_unparsed", "0.2")]),
    ("/ratings", [("judge", "ChatGPT"), ("family", "llmbar/Natural"), ("status", "ok"), ("per_page", "10"),
                  ("model", "llmbar/output_1")]),
]


@pytest.mark.parametrize("path,params", FORM_CASES, ids=[f"{p}-{i}" for i, (p, _) in enumerate(FORM_CASES)])
def test_a_form_submitted_unchanged_keeps_every_parameter(client, path, params):
    params = [(k, str(team_db_calibration(client)) if v == "ID" else v) for k, v in params]
    page = client.get(f"{path}?{urlencode(params)}")
    assert page.status_code == 200 and 'class="error-message"' not in page.text, _error(page.text)
    sent = submitted(page.text, path)
    assert sent == sorted(params)
    again = client.get(f"{path}?{urlencode(sent)}")  # and the page it asks for is the same board
    assert again.status_code == 200 and submitted(again.text, path) == sent


def test_the_leaderboard_form_offers_the_judges_families(client):
    page = client.get("/leaderboard?judge=ChatGPT&bootstrap=0").text
    form = page[page.index('<form class="filters" method="get" action="/leaderboard">'):]
    form = form[:form.index("</form>")]
    families = re.search(r'<select name="family" multiple[^>]*>(.*?)</select>', form, re.S).group(1)
    # the families ChatGPT rated (the board itself lists every family, rows only where it rated)
    assert re.findall(r'<option value="([^"]+)"', families) == [
        "llmbar/Adversarial_GPTInst", "llmbar/Adversarial_Neighbor", "llmbar/Natural"]
    assert "selected" not in families  # none given: the board's default (every family the judge rated)
    assert 'name="calibration_from"' in form and 'name="min_ratings"' in form and 'name="max_unparsed"' in form


def test_names_in_forms_are_sent_back_exactly(client):
    """A model named with a right-to-left override is shown as <U+202E> but sent back as stored."""
    page = client.get(f"/ratings?{urlencode({'model': sd.RLO_MODEL})}")
    assert page.status_code == 200
    assert ("model", sd.RLO_MODEL) in submitted(page.text, "/ratings")


def _error(page: str) -> str:
    """The one line of an error page (or the page's start)."""
    found = re.search(r'<p class="error-message">(.*?)</p>', page, re.S)
    return html.unescape(found.group(1)) if found else page[:300]
