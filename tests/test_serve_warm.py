"""``judgecal serve``'s warmer (judgecal/web/warm.py): the entry pages are computed ahead of the
reader; after a write, a page's HTML is served at once from its previous copy WITH a banner
saying so (never silently), JSON and ``fresh=1`` wait for the current data, and the warmer brings
the page up to date; SQLite and PostgreSQL (whose data version lags a commit by up to a second)."""

from __future__ import annotations

import time

import pytest

pytest.importorskip("starlette")
from starlette.testclient import TestClient  # noqa: E402

from db_helpers import import_ratings  # noqa: E402
from judgecal.db import engine as eng  # noqa: E402
from judgecal.db import migrate  # noqa: E402
from judgecal.web import create_app  # noqa: E402

FAMILY = "warm/test"


def _ratings(url: str, tmp_path, judge: str, n: int, model: str = "model-x") -> None:
    import_ratings(url, tmp_path, FAMILY, judge, n, model=model)


@pytest.fixture()
def filled(db_url, tmp_path):
    e = eng.create(db_url)
    migrate.upgrade(e, "head")
    e.dispose()
    _ratings(db_url, tmp_path, "judge-one", 8)
    _ratings(db_url, tmp_path, "judge-two", 8)
    return db_url


def _until(client, path: str, want: str, timeout: float = 30.0):
    end = time.monotonic() + timeout
    while True:
        r = client.get(path)
        if r.headers["x-judgecal-cache"] == want or time.monotonic() > end:
            return r
        time.sleep(0.1)


def test_pages_are_computed_ahead_and_a_stale_copy_says_so(filled, tmp_path):
    app = create_app(filled, warm=True)
    with TestClient(app) as client:  # the lifespan starts the warmer
        warmer = app.state.warmer
        assert warmer is not None and warmer.wait_warm(60)
        # the entry pages and each judge's score board were computed before anyone asked
        for path in ("/", "/leaderboard", "/leaderboard?judge=judge-one", "/leaderboard?judge=judge-two",
                     "/calibration", "/mc"):
            r = client.get(path)
            assert r.status_code == 200 and r.headers["x-judgecal-cache"] == "hit", (path, r.headers)
        before = client.get("/leaderboard?judge=judge-one").text
        assert "model-y" not in before and 'class="stale"' not in before
        # the warmer sleeps until a request wakes it (its own look every 2 s would race the test)
        warmer.interval = 3600
        time.sleep(2.5)
        # a write: the next HTML request gets the previous copy at once, with the banner
        _ratings(filled, tmp_path, "judge-one", 8, model="model-y")
        time.sleep(1.5)  # PostgreSQL publishes its counters (the data version) within about a second
        stale = client.get("/leaderboard?judge=judge-one")
        assert stale.headers["x-judgecal-cache"] == "stale", stale.headers
        assert '<p class="stale" role="status"><b>Not the current data.</b>' in stale.text
        assert "model-y" not in stale.text
        # JSON never gets a stale copy: it waits for the current data, the CLI's figures
        js = client.get("/leaderboard?judge=judge-one&format=json")
        assert js.status_code == 200 and js.headers["x-judgecal-cache"] != "stale"
        assert "model-y" in {row["model"] for row in js.json()["rows"]}
        # fresh=1 waits too, and shows no banner
        fresh = client.get("/leaderboard?judge=judge-one&fresh=1")
        assert fresh.headers["x-judgecal-cache"] != "stale" and "model-y" in fresh.text
        assert 'class="stale"' not in fresh.text
        # the warmer brings every entry page up to date: hits again, no banner, the new model shown
        from judgecal.db.engine import data_version, get_engine

        assert warmer.wait_warm(60), (warmer.cycles, warmer.warm_version, warmer.last_error, warmer.computed,
                                      data_version(get_engine(app.state.database_url)))
        now = _until(client, "/leaderboard?judge=judge-one", "hit")
        assert now.headers["x-judgecal-cache"] == "hit" and "model-y" in now.text and 'class="stale"' not in now.text
        assert client.get("/?fresh=maybe").status_code == 400


def test_without_the_warmer_no_page_is_ever_stale(filled, tmp_path):
    client = TestClient(create_app(filled))
    assert client.app.state.warmer is None
    assert client.get("/leaderboard?judge=judge-one").headers["x-judgecal-cache"] == "miss"
    _ratings(filled, tmp_path, "judge-one", 8, model="model-y")
    end = time.monotonic() + 15
    while True:  # PostgreSQL's data version may lag the commit: a hit until it moves, then a miss
        r = client.get("/leaderboard?judge=judge-one")
        assert r.headers["x-judgecal-cache"] in ("hit", "miss") and 'class="stale"' not in r.text
        if "model-y" in r.text or time.monotonic() > end:
            break
        time.sleep(0.1)
    assert "model-y" in r.text


def test_serve_refuses_warm_without_a_cache(run_cli):
    r = run_cli("serve", "--warm", "--cache-mb", "0")
    assert r.exit_code == 2 and "--warm keeps the pages it computes in the page cache" in r.stderr, r
