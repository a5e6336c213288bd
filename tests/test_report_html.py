"""The HTML page and its PNG plots: self-contained, escaped, and really drawn (headless Chromium).

Chromium: Debian packages ``chromium`` and ``chromium-driver`` (``make chromium``). Without it
the screenshot test is skipped outside CI and fails in CI (``CI`` set).
"""

from __future__ import annotations

import base64
import io
import os
import re
import shutil
import subprocess

import numpy as np
import pytest
from matplotlib import image as mpimg

from judgecal.calibrate.penalty import calibrate
from judgecal.calibrate.evaluate import evaluate_pairwise
from judgecal.errors import InputError
from judgecal.report.build import build_report
from judgecal.report.plots import _ols_line, plot_score_distributions, plot_score_vs_length
from judgecal.report.render_html import render_html

from test_calibrate_evaluate import llmbar_pairs
from test_report_build import entry

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
EVIL = "<script>alert(1)</script>"
ORANGE = np.array([255, 127, 14]) / 255.0  # the penalty curve's colour (plots.COLOURS["curve"])


@pytest.fixture(scope="module")
def gpt4_entry():
    ev = evaluate_pairwise(llmbar_pairs("Natural", "GPT-4"), scale=(0, 9), n_bootstrap=30, seed=0)
    return entry("llmbar/Natural", "GPT-4", ev)


@pytest.fixture(scope="module")
def page(gpt4_entry):
    entries = [gpt4_entry, dict(gpt4_entry, task_family=EVIL, judge='j"<b>')]
    return render_html(build_report(entries), entries)


def _pngs(html: str) -> list[bytes]:
    return [base64.b64decode(m) for m in re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', html)]


def test_page_is_self_contained(page):
    assert page.startswith("<!DOCTYPE html>")
    refs = re.findall(r'\b(?:src|href)\s*=\s*"([^"]*)"', page)
    assert refs, "no src/href found at all"
    for ref in refs:
        assert ref.startswith(("data:image/png;base64,", "#")), ref
    assert "http://" not in page and "https://" not in page
    assert "<link" not in page and "<script" not in page and "@import" not in page and "url(" not in page
    assert page.count("data:image/png;base64,") == 4  # two plots for each of the two entries


def test_family_and_judge_names_are_escaped(page):
    assert EVIL not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "j&#34;&lt;b&gt;" in page and 'j"<b>' not in page


def test_page_shows_real_figures(page):
    assert page.count("0.920 [") >= 4  # raw agreement in both entries' tables (in-sample and CV)
    assert "calibration (polylog, fitted)" in page and "Verdict:" in page
    assert '<a href="#entry-1">' in page and 'id="entry-2"' in page


def test_plots_are_small_pngs(page):
    pngs = _pngs(page)
    assert len(pngs) == 4
    for png in pngs:
        assert png.startswith(PNG_MAGIC) and len(png) < 150_000
        img = mpimg.imread(io.BytesIO(png), format="png")
        assert img.shape[0] > 300 and img.shape[1] > 550  # 7 x 4.2 in at 90 dpi
    # the scatter plot draws the fitted penalty curve in its colour
    scatter = mpimg.imread(io.BytesIO(pngs[0]), format="png")[:, :, :3]
    assert np.sum(np.all(np.abs(scatter - ORANGE) < 0.08, axis=-1)) > 200


def test_entries_must_match_the_report(gpt4_entry):
    with pytest.raises(InputError, match="1 entries for a report of 2"):
        render_html(build_report([gpt4_entry, gpt4_entry]), [gpt4_entry])
    no_plots = render_html(build_report([gpt4_entry]))
    assert "data:image/png" not in no_plots and "0.920 [" in no_plots


def test_ols_line_known_answer():
    assert _ols_line(np.array([0.0, 1, 2]), np.array([1.0, 3, 5])) == pytest.approx((2.0, 1.0))
    assert _ols_line(np.array([1.0, 1.0]), np.array([1.0, 2.0])) is None


def test_large_evaluation_is_subsampled_and_reproducible():
    """50 000 labelled responses + 2 x 25 000 verbosity sides (planted length bias): the scatter
    draws a seeded 5 000 of the 100 000 points, and both PNGs stay small."""
    rng = np.random.default_rng(7)
    n = 50_000
    length = rng.lognormal(5, 0.8, n).round()
    raw = np.clip(np.round(rng.normal(5, 1.5, n) + 0.6 * np.log(length / 150)), 0, 10)
    cal = calibrate(raw, length, 150.0, 0.6, 1.2, 0, 10)
    m = n // 2
    ev = {"kind": "pairwise", "scale": [0, 10], "l_ref": 150.0,
          "params": {"gamma": 0.6, "p": 1.2, "l_ref": 150.0},
          "points": {"labelled": {"length": length.tolist(), "score_raw": raw.tolist(),
                                  "score_calibrated": cal.tolist()},
                     "verbosity": {"side": ["concise"] * m + ["verbose"] * m,
                                   "length": np.r_[length[:m], 3 * length[:m]].tolist(),
                                   "score_raw": np.r_[raw[:m], np.clip(raw[:m] + 1, 0, 10)].tolist(),
                                   "score_calibrated": None}}}
    png = plot_score_vs_length(ev, title="planted", length_unit="tokens")
    assert png.startswith(PNG_MAGIC) and len(png) < 150_000
    assert plot_score_vs_length(ev, title="planted", length_unit="tokens") == png  # seeded
    assert plot_score_vs_length(ev, title="planted", length_unit="tokens", seed=1) != png
    hist = plot_score_distributions(ev)
    assert hist.startswith(PNG_MAGIC) and len(hist) < 150_000
    assert plot_score_vs_length({"kind": "pairwise", "points": {"labelled": None}}) is None
    assert plot_score_distributions({"kind": "pairwise"}) is None


def _chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed in CI (install Debian's chromium and chromium-driver: make chromium)")
        pytest.skip("chromium is not installed (apt-get install -y chromium chromium-driver, or make chromium)")
    return exe


@pytest.mark.slow
def test_page_renders_in_headless_chromium(gpt4_entry, tmp_path):
    exe = _chromium()
    html = tmp_path / "report.html"
    html.write_text(render_html(build_report([gpt4_entry]), [gpt4_entry]), encoding="utf-8")
    shot = tmp_path / "shot.png"
    cmd = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           f"--user-data-dir={tmp_path / 'profile'}", f"--screenshot={shot}", "--window-size=1200,1600",
           html.as_uri()]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert shot.exists(), f"no screenshot (exit {proc.returncode}): {proc.stderr[-2000:]}"
    img = mpimg.imread(str(shot))[:, :, :3]
    assert img.shape[:2] == (1600, 1200)
    non_white = np.any(img < 0.95, axis=-1).mean()
    colours = np.unique((img * 255).round().astype(np.uint8).reshape(-1, 3), axis=0).shape[0]
    assert non_white > 0.10, f"only {non_white:.1%} non-white pixels: blank page?"
    assert colours > 500, f"only {colours} distinct colours"
    # the embedded plot loaded: the penalty curve's orange is on screen
    assert np.sum(np.all(np.abs(img - ORANGE) < 0.08, axis=-1)) > 200


@pytest.mark.slow
def test_summary_keeps_its_verdict_column_at_900_px(gpt4_entry, tmp_path):
    """In headless Chromium (Selenium) at 900, 1200 and 1600 px: the summary's verdict and
    warnings columns lie inside the window and the page does not scroll sideways; below
    1180 px the page says which columns it leaves out (kind, L_ref, p)."""
    _chromium()
    if not os.path.exists("/usr/bin/chromedriver"):
        pytest.skip("chromedriver absent (apt-get install chromium-driver)")
    pytest.importorskip("selenium")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    html = tmp_path / "report.html"
    entries = [gpt4_entry, dict(gpt4_entry, task_family="llmbar/Adversarial_Neighbor", judge="ChatGPT-0301")]
    html.write_text(render_html(build_report(entries), entries, plots=False), encoding="utf-8")
    opts = webdriver.ChromeOptions()
    opts.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-dev-shm-usage",
                 f"--user-data-dir={tmp_path / 'profile'}"):
        opts.add_argument(flag)
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)
    try:
        for width in (900, 1200, 1600):
            driver.set_window_size(width, 1000)
            driver.get(html.as_uri())
            got = driver.execute_script("""
                const th = [...document.querySelectorAll('table.summary th')];
                const right = name => th.find(t => t.textContent.trim() == name).getBoundingClientRect().right;
                const shown = t => getComputedStyle(t).display != 'none';
                return {view: document.documentElement.clientWidth, page: document.documentElement.scrollWidth,
                        verdict: right('verdict'), warnings: right('warnings'),
                        hidden: th.filter(t => !shown(t)).map(t => t.textContent.trim()),
                        note: shown(document.querySelector('p.narrow-note'))}""")
            assert got["verdict"] <= got["view"] and got["warnings"] <= got["view"], (width, got)
            assert got["page"] <= got["view"], (width, got)  # no sideways scrolling of the page
            narrow = width < 1180
            assert got["hidden"] == (["kind", "L_ref", "p"] if narrow else []) and got["note"] is narrow, (width, got)
            driver.save_screenshot(str(tmp_path / f"summary_{width}.png"))
    finally:
        driver.quit()
