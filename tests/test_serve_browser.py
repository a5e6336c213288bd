"""``judgecal serve`` in a real browser: the real server (``judgecal serve`` in a subprocess, with
a token, on a free loopback port) driven by Debian's headless Chromium through Selenium and
chromedriver. Every page loads with no SEVERE console entry (a failed request, a script error
or a Content-Security-Policy violation would be one), a link and a filter work, the hostile
page shows the injected text and runs none of it, and screenshots of every page are saved
(``JUDGECAL_SCREENSHOTS`` or the test's tmp folder) for a person to look at."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from urllib.parse import quote

import pytest

import serve_data as sd

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
TOKEN = "browser-test-token-0123456789abcdef"

pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _need_browser() -> None:
    if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
        pytest.skip(f"Chromium or chromedriver absent ({CHROMIUM}, {CHROMEDRIVER}: apt-get install chromium chromium-driver)")
    pytest.importorskip("selenium")


@pytest.fixture(scope="module")
def server(tmp_path_factory, data_dir):
    _need_browser()
    yield from _serve(tmp_path_factory, sd.demo_db(tmp_path_factory, data_dir))


@pytest.fixture(scope="module")
def demo_server(tmp_path_factory, data_dir):
    """The real server over the ``make demo`` database (tests/serve_data.py build_demo: the
    demo's commands on the same real inputs)."""
    _need_browser()
    yield from _serve(tmp_path_factory, sd.demo_like_db(tmp_path_factory, data_dir))


def _serve(tmp_path_factory, demo: dict, args: tuple[str, ...] = ()):
    """``judgecal serve`` over ``demo["url"]`` with :data:`TOKEN` (and ``args``) on a free
    loopback port, until the generator is closed: yields {"base", "demo", "log"}."""
    port = _free_port()
    log = tmp_path_factory.mktemp("serve_log") / "serve.log"
    env = {**os.environ, "JUDGECAL_SERVE_TOKEN": TOKEN}
    with open(log, "wb") as fh:
        proc = subprocess.Popen([sys.executable, "-m", "judgecal", "--database-url", demo["url"], "serve", "--port",
                                 str(port), *args], stdout=fh, stderr=subprocess.STDOUT, env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                req = urllib.request.Request(base + "/static/style.css", headers={"Authorization": f"Bearer {TOKEN}"})
                with urllib.request.urlopen(req, timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"judgecal serve did not start: {log.read_text(errors='replace')[-2000:]}")
            time.sleep(0.2)
        yield {"base": base, "demo": demo, "log": log}
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def browser(tmp_path_factory, server):
    yield from _chromium(tmp_path_factory)


def _chromium(tmp_path_factory):
    """Headless Chromium driven by chromedriver (1400 x 1000 px, a fresh profile), until the
    generator is closed."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    profile = tmp_path_factory.mktemp("chromium_profile")
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage", f"--user-data-dir={profile}", "--window-size=1400,1000"):
        opts.add_argument(flag)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    out = os.environ.get("JUDGECAL_SCREENSHOTS")
    folder = Path(out) if out else tmp_path_factory.mktemp("screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


#: what a page must never do, measured in the page: the HTTP status of its navigation; its
#: error line if it is an error page; each table wider than its box (the ``.scroll`` wrapper, or
#: its parent) by more than 1 px; each number cell (``td.num``) not wholly inside the window
#: horizontally at scroll position 0, or not inside the box that scrolls it; the page wider than
#: the window (it would scroll sideways)
LAYOUT = """
const vw = document.documentElement.clientWidth;
const nav = performance.getEntriesByType('navigation')[0];
const where = el => { const t = el.closest('table'); const s = el.closest('section, article');
  const h = s && s.querySelector('h2, h3');
  return 'table' + (t && t.className ? '.' + t.className : '') + (h ? ' under "' + h.textContent.trim().slice(0, 50) + '"' : ''); };
const scroller = el => { for (let e = el.parentElement; e && e !== document.body; e = e.parentElement) {
  const x = getComputedStyle(e).overflowX; if (x !== 'visible' && x !== 'clip') return e; } return null; };
const tables = [];
for (const t of document.querySelectorAll('table')) {
  const box = t.closest('.scroll') || t.parentElement;
  const w = Math.max(t.scrollWidth, t.getBoundingClientRect().width);
  if (w > box.clientWidth + 1) tables.push(`${where(t)}: ${Math.round(w)} px in a box of ${box.clientWidth} px`);
}
const cells = [];
let hidden = 0;
for (const c of document.querySelectorAll('td.num')) {
  const r = c.getBoundingClientRect();
  let ok = r.width > 0 && r.left >= -1 && r.right <= vw + 1;
  const s = scroller(c);
  if (ok && s) { const b = s.getBoundingClientRect(); ok = r.left >= b.left - 1 && r.right <= b.left + s.clientWidth + 1; }
  if (!ok && ++hidden <= 3) cells.push(`${where(c)}: '${c.textContent.trim().slice(0, 24)}' at ${Math.round(r.left)}-${Math.round(r.right)} px`);
}
if (hidden > 3) cells.push(`and ${hidden - 3} more`);
const page = document.documentElement.scrollWidth;
const err = document.querySelector('p.error-message');
return {status: nav ? nav.responseStatus : null, error: err ? err.textContent : null, tables: tables, cells: cells,
        page: page > vw + 1 ? `the page is ${page} px wide in a window of ${vw} px` : null,
        n_num: document.querySelectorAll('td.num').length};
"""


def resize(driver, width: int, height: int = 1000) -> None:
    """The window at ``width`` x ``height`` px, waited for until the page sees it."""
    driver.set_window_size(width, height)
    deadline = time.monotonic() + 5
    while driver.execute_script("return window.innerWidth") != width and time.monotonic() < deadline:
        time.sleep(0.05)


def layout_problems(driver) -> list[str]:
    """What :data:`LAYOUT` finds wrong with the page as it is shown now (empty: nothing)."""
    got = driver.execute_script(LAYOUT)
    out = [] if got["status"] == 200 else [f"HTTP status {got['status']}"]
    out += [f"error page: {got['error']}"] if got["error"] else []
    out += [f"table wider than its box: {t}" for t in got["tables"]]
    out += [f"number cell out of view: {c}" for c in got["cells"]]
    return out + ([got["page"]] if got["page"] else [])


def _severe(driver) -> list[dict]:
    return [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"]


def _visit(driver, url: str, shots: Path, name: str) -> None:
    driver.get(url)
    assert driver.execute_script("return document.readyState") == "complete"
    bad = _severe(driver)
    assert not bad, (url, bad)
    height = driver.execute_script("return Math.min(document.documentElement.scrollHeight, 6000)")
    driver.set_window_size(1400, max(700, int(height)))
    driver.save_screenshot(str(shots / f"{name}.png"))
    driver.set_window_size(1400, 1000)


def q(**params) -> str:
    return "&".join(f"{k}={quote(str(v), safe='')}" for k, v in params.items())


def test_every_page_in_chromium(server, browser, shots):
    base, (a, b) = server["base"], server["demo"]["mc_runs"]
    browser.get(f"{base}/?token={TOKEN}")  # the token once: the cookie carries it from here on
    assert "Overview" in browser.title
    pages = {
        "overview": "/", "leaderboard": "/leaderboard?judge=GPT-4&bootstrap=200",
        "winrates": f"/winrates?baseline={sd.BASELINE}&family=alpaca_eval&judge=weighted_alpaca_eval_gpt4_turbo&bootstrap=100",
        "calibrations": "/calibration",
        "calibration": "/calibration?family=llmbar/Natural&judge=GPT-4&bootstrap=50",
        "audit": "/audit?family=llmbar/Natural&judge=GPT-4&filter=flips",
        "audit_pairwise": "/audit?family=alpaca_eval&judge=weighted_alpaca_eval_gpt4_turbo&per_page=5",
        "ratings": "/ratings?judge=GPT-4&score_min=8", "mc": "/mc", "mc_compare": f"/mc/compare?a={a}&b={b}",
        "bad_request": "/ratings?status=maybe", "not_found": "/nowhere",
    }
    for name, path in pages.items():
        if name in ("bad_request", "not_found"):
            browser.get(base + path)  # a 4xx page: its own status is a console entry; the page itself must render
            assert browser.find_element("css selector", "p.error-message").text
            browser.get_log("browser")
            browser.save_screenshot(str(shots / f"{name}.png"))
            continue
        _visit(browser, base + path, shots, name)
        assert browser.find_element("css selector", "h1").text
        for width in (1400, 900):  # no table wider than its box, every number in view (the ratings' score too)
            resize(browser, width)
            assert not layout_problems(browser), (name, width, layout_problems(browser))
        resize(browser, 1400)
        if name in ("leaderboard", "winrates"):
            assert browser.find_elements("css selector", "svg.chart")
        if name == "calibration":
            assert len(browser.find_elements("css selector", "div.plots img")) == 2
            assert browser.execute_script("return Array.from(document.images).every(i => i.complete && i.naturalWidth > 0)")
    assert len(list(shots.glob("*.png"))) >= len(pages)


def test_links_and_filters(server, browser, shots):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    base = server["base"]
    browser.get(f"{base}/?token={TOKEN}")
    # follow a link: the overview's audit link of GPT-4 on LLMBar Natural
    link = browser.find_element(By.XPATH, "//a[contains(@href, '/audit?family=llmbar') and text()='GPT-4']")
    link.click()
    assert "/audit?" in browser.current_url and "Judge audit" in browser.find_element(By.TAG_NAME, "h1").text
    assert len(browser.find_elements(By.CSS_SELECTOR, "article.pair")) == 25
    # a filter tab
    browser.find_element(By.XPATH, "//nav[@class='tabs']/a[starts-with(normalize-space(.), 'disagree')]").click()
    assert "filter=disagree" in browser.current_url
    n = int(browser.find_element(By.CSS_SELECTOR, "nav.tabs a.here .count").text)
    assert len(browser.find_elements(By.CSS_SELECTOR, "article.pair")) == min(n, 25) > 0
    assert not _severe(browser)
    # the ratings form: status unparsed
    browser.get(f"{base}/ratings")
    Select(browser.find_element(By.NAME, "status")).select_by_value("unparsed")
    browser.find_element(By.CSS_SELECTOR, "form.filters button").click()
    # the click submits the form; the next page loads after it returns (under load the address was read
    # before the navigation: CI red at stop 39's full run)
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(browser, 30).until(lambda b: "status=unparsed" in b.current_url)
    assert "status=unparsed" in browser.current_url
    rows = browser.find_elements(By.CSS_SELECTOR, "table.ratings tbody tr")
    assert len(rows) == 1 and "unparsed" in rows[0].text
    # a sortable column header of the score board
    browser.get(f"{base}/leaderboard?judge=GPT-4&bootstrap=100")
    browser.find_element(By.XPATH, "//th/a[starts-with(normalize-space(.), 'raw')]").click()
    assert "sort=mean_raw" in browser.current_url
    assert not _severe(browser)
    browser.save_screenshot(str(shots / "leaderboard_sorted.png"))


def test_hostile_page_shows_text_and_runs_nothing(server, browser, shots):
    from selenium.webdriver.common.by import By

    base = server["base"]
    browser.get(f"{base}/?token={TOKEN}")
    for name, path in (("hostile_audit", f"/audit?{q(family=sd.HOSTILE_FAMILY, judge=sd.HOSTILE_JUDGE)}"),
                       ("hostile_audit_pairwise", f"/audit?{q(family=sd.HOSTILE_FAMILY, judge=sd.HOSTILE_PAIR_JUDGE)}"),
                       ("hostile_leaderboard", f"/leaderboard?{q(judge=sd.HOSTILE_JUDGE)}"),
                       ("hostile_ratings", f"/ratings?{q(family=sd.HOSTILE_FAMILY)}")):
        _visit(browser, base + path, shots, name)
        assert browser.execute_script("return typeof window.__pwned") == "undefined", name
        assert not browser.find_elements(By.CSS_SELECTOR, "main script, img[src='x']"), name
        text = browser.find_element(By.TAG_NAME, "main").text
        if "audit" in name:
            assert "<script>window.__pwned=1</script>" in text
            assert "hostile <b>family</b>" in browser.find_element(By.TAG_NAME, "h1").text
        else:
            assert sd.SCRIPT in text


AE = "weighted_alpaca_eval_gpt4_turbo"
#: every page of the ``make demo`` database that the test opens (name: path), screenshots
#: saved as ``demo_<name>.png``
DEMO_PAGES = {
    "overview": "/",
    "leaderboard_choose": "/leaderboard",
    "leaderboard_gpt4": "/leaderboard?judge=GPT-4&bootstrap=100",
    "leaderboard_chatgpt_natural": "/leaderboard?judge=ChatGPT&family=llmbar/Natural&bootstrap=100",
    "winrates_choose": "/winrates",
    "winrates": f"/winrates?baseline={sd.BASELINE}&family=alpaca_eval&judge={AE}&bootstrap=100",
    "calibrations": "/calibration",
    "calibration_gpt4": "/calibration?family=llmbar/Natural&judge=GPT-4&bootstrap=50",
    "calibration_chatgpt": "/calibration?family=llmbar/Natural&judge=ChatGPT&bootstrap=50",
    "audit_choose": "/audit",
    "audit_gpt4_flips": "/audit?family=llmbar/Natural&judge=GPT-4&filter=flips",
    "audit_gpt4_neighbor": "/audit?family=llmbar/Adversarial_Neighbor&judge=GPT-4&filter=disagree",
    "audit_alpaca_eval": f"/audit?family=alpaca_eval&judge={AE}&per_page=5",
    "ratings": "/ratings?family=llmbar/Adversarial_GPTInst&judge=ChatGPT",
    "mc": "/mc",
}
#: the families and models of the demo database the overview must list
DEMO_FAMILIES = ("llmbar/Natural", "llmbar/Adversarial_Neighbor", "llmbar/Adversarial_GPTInst", "pandalm", "alpaca_eval")

NARROW = """
    const th = [...document.querySelectorAll('table.summary th')];
    const v = th.find(t => t.textContent.trim() == 'verdict');
    return {view: document.documentElement.clientWidth, page: document.documentElement.scrollWidth,
            verdict: v ? v.getBoundingClientRect().right : null}"""


def test_make_demo_database_in_chromium(demo_server, browser, shots):
    """``judgecal serve`` on the ``make demo`` database: every page of :data:`DEMO_PAGES` loads
    with no console error and a screenshot, the overview lists the demo's five task families,
    the 26-model win-rate board shows every model, and the static report the demo writes
    (``report --out``) shows its leaderboards and, at 900 px, its summary's verdict column."""
    from selenium.webdriver.common.by import By

    base, demo = demo_server["base"], demo_server["demo"]
    browser.get(f"{base}/?token={TOKEN}")
    for name, path in DEMO_PAGES.items():
        _visit(browser, base + path, shots, f"demo_{name}")
        assert browser.find_element(By.TAG_NAME, "h1").text, name
        for width in (1400, 900):
            resize(browser, width)
            assert not layout_problems(browser), (name, width, layout_problems(browser))
        resize(browser, 1400)
        main = browser.find_element(By.TAG_NAME, "main").text
        assert not browser.find_elements(By.CSS_SELECTOR, "p.error-message"), (name, main[:300])  # not an error page
        if name == "overview":
            for fam in DEMO_FAMILIES:
                assert fam in main
        if name == "winrates":
            models = browser.find_elements(By.CSS_SELECTOR, "table.board tbody tr")
            assert len(models) == 26  # the 25 models of the results folder and the baseline
            assert browser.find_elements(By.CSS_SELECTOR, "svg.chart")
        if name.startswith("leaderboard_") and name != "leaderboard_choose":
            assert browser.find_elements(By.CSS_SELECTOR, "table.board tbody tr")
        if name.startswith("calibration_"):
            assert len(browser.find_elements(By.CSS_SELECTOR, "div.plots img")) == 2
            assert browser.execute_script("return Array.from(document.images).every(i => i.complete && i.naturalWidth > 0)")
        if name.startswith("audit_") and name != "audit_choose":
            assert browser.find_elements(By.CSS_SELECTOR, "article.pair") or "no pair" in main.lower(), name
        if name == "mc" and "mc score" in demo["ran"]:
            assert "arc_easy" in main
    # at 900 px the boards fit their box: each CI sits under its figure, empty columns are named, not drawn
    browser.set_window_size(900, 1000)
    for name in ("winrates", "leaderboard_gpt4"):
        browser.get(base + DEMO_PAGES[name])
        box = browser.execute_script("const s = document.querySelector('table.board').parentElement;"
                                     "return [s.scrollWidth, s.clientWidth]")
        assert box[0] <= box[1], (name, box)
        browser.save_screenshot(str(shots / f"demo_{name}_900.png"))
    browser.set_window_size(1400, 1000)
    # the static report of the demo, opened as a file
    report = Path(demo["out"]) / "report" / "report.html"
    for width in (1400, 900):
        browser.set_window_size(width, 1000)
        browser.get(report.as_uri())
        assert not _severe(browser)
        got = browser.execute_script(NARROW)
        assert got["verdict"] is not None and got["verdict"] <= got["view"] and got["page"] <= got["view"], (width, got)
        height = browser.execute_script("return Math.min(document.documentElement.scrollHeight, 9000)")
        browser.set_window_size(width, max(700, int(height)))
        browser.save_screenshot(str(shots / f"demo_report_{width}.png"))
    browser.set_window_size(1400, 1000)
    text = browser.find_element(By.TAG_NAME, "body").text
    assert "Win rates against gpt4_1106_preview" in text and "Score leaderboard" in text
    expected = [f"demo_{n}.png" for n in DEMO_PAGES] + ["demo_report_1400.png", "demo_report_900.png",
                                                        "demo_winrates_900.png", "demo_leaderboard_gpt4_900.png"]
    assert sorted(p.name for p in shots.glob("demo_*.png")) == sorted(expected)
