"""``judgecal serve``'s page cache (judgecal/web/cache.py) and its one engine per app
(judgecal/db/engine.py pin_engine): a page is served again byte for byte until the database
changes, and a write by another process is seen at the next request, on SQLite and PostgreSQL;
errors are not kept; the token is not part of the key; the cache is bounded."""

from __future__ import annotations

import gc
import threading
import time

import pytest

pytest.importorskip("starlette")
from starlette.testclient import TestClient  # noqa: E402

from db_helpers import import_ratings  # noqa: E402
from judgecal.db import engine as eng  # noqa: E402
from judgecal.db import migrate  # noqa: E402
from judgecal.web import create_app  # noqa: E402
from judgecal.web.cache import Page, PageCache  # noqa: E402

FAMILY = "cache/test"


def _ratings(url: str, tmp_path, judge: str, n: int) -> None:
    import_ratings(url, tmp_path, FAMILY, judge, n, raw_output=True)


@pytest.fixture()
def filled(db_url, tmp_path):
    e = eng.create(db_url)
    migrate.upgrade(e, "head")
    e.dispose()
    _ratings(db_url, tmp_path, "judge-one", 6)
    return db_url


def test_second_request_is_a_hit_and_a_write_is_seen_at_once(filled, tmp_path):
    client = TestClient(create_app(filled))
    first = client.get("/")
    assert first.status_code == 200 and first.headers["x-judgecal-cache"] == "miss"
    assert "judge-one" in first.text and "judge-two" not in first.text
    again = client.get("/")
    assert again.headers["x-judgecal-cache"] == "hit" and again.text == first.text
    # a write through another engine (as another process's import would do): seen at the next
    # request on SQLite, within PostgreSQL's statistics delay there (engine.data_version)
    _ratings(filled, tmp_path, "judge-two", 3)
    after = _until_miss(client, "/")
    assert "judge-two" in after.text
    # the ratings page lists the new judge's ratings too, and is then kept as well
    page = client.get("/ratings?judge=judge-two")
    assert page.status_code == 200 and page.headers["x-judgecal-cache"] == "miss" and "judge-two" in page.text
    assert client.get("/ratings?judge=judge-two").headers["x-judgecal-cache"] == "hit"


def _until_miss(client, path: str, within_s: float = 12.0):
    """The first response of ``path`` computed again (PostgreSQL publishes a commit's counters
    within about a second: engine.data_version); fails if none comes within ``within_s``."""
    deadline = time.monotonic() + within_s
    while True:
        r = client.get(path)
        if r.headers["x-judgecal-cache"] == "miss" or time.monotonic() > deadline:
            assert r.headers["x-judgecal-cache"] == "miss", "the write was never seen"
            return r
        time.sleep(0.2)


def test_errors_are_not_kept_and_queries_are_keys(filled):
    client = TestClient(create_app(filled))
    for _ in range(2):
        bad = client.get("/ratings?bogus=1")
        assert bad.status_code == 400 and bad.headers["x-judgecal-cache"] == "miss"
    a = client.get("/ratings?judge=judge-one")
    b = client.get("/ratings?judge=judge-one&page=1")
    assert a.headers["x-judgecal-cache"] == "miss" and b.headers["x-judgecal-cache"] == "miss"
    # the same parameters in another order are the same page
    c = client.get("/ratings?page=1&judge=judge-one")
    assert c.headers["x-judgecal-cache"] == "hit" and c.text == b.text


def test_token_is_not_part_of_the_key_and_still_required(filled):
    token = "cache-test-token-0123456789"
    client = TestClient(create_app(filled, token=token))
    assert client.get("/").status_code == 401
    first = client.get(f"/?token={token}")
    assert first.status_code == 200 and first.headers["x-judgecal-cache"] == "miss"
    fresh = TestClient(create_app(filled, token=token))  # another app: its own cache
    assert fresh.get("/").status_code == 401
    hit = client.get("/", headers={"authorization": f"Bearer {token}"})
    assert hit.headers["x-judgecal-cache"] == "hit" and hit.text == first.text


def test_cache_off(filled):
    client = TestClient(create_app(filled, cache_mb=0))
    assert [client.get("/").headers["x-judgecal-cache"] for _ in range(2)] == ["miss", "miss"]
    with pytest.raises(ValueError):
        create_app(filled, cache_mb=-1)


def test_one_engine_per_app_released_with_it(filled):
    app = create_app(filled)
    ro = app.state.database_url
    assert eng.get_engine(ro) is eng.get_engine(ro)
    second = create_app(filled)  # two apps on one URL share the pin
    pinned = eng.get_engine(ro)
    del app
    gc.collect()
    assert eng.get_engine(ro) is pinned  # still pinned by the second app
    del second
    gc.collect()
    assert ro not in eng._PINNED
    other = eng.get_engine(ro)
    assert other is not pinned
    other.dispose()


def _page(body: bytes, status: int = 200) -> Page:
    return Page(status, body, "text/html", ())


def test_page_cache_bounds_and_versions():
    cache = PageCache(max_entries=2, max_bytes=400)
    calls: list[str] = []

    def make(name: str, size: int = 10, status: int = 200):
        def compute():
            calls.append(name)
            return _page(name.encode().ljust(size, b"."), status)
        return compute

    assert cache.get_or_compute(("a",), 1, make("a"))[1] is False
    assert cache.get_or_compute(("a",), 1, make("a"))[1] is True
    assert cache.get_or_compute(("a",), 2, make("a2"))[0].body.startswith(b"a2")  # new data version
    cache.get_or_compute(("b",), 2, make("b"))
    cache.get_or_compute(("c",), 2, make("c"))  # third entry: "a" (least recently used) goes
    assert len(cache) == 2
    assert cache.get_or_compute(("a",), 2, make("a3"))[1] is False
    assert calls == ["a", "a2", "b", "c", "a3"]
    # bytes: a page over a quarter of the bound is served, not kept; the total stays under it
    big = cache.get_or_compute(("big",), 2, make("big", 101))
    assert big[1] is False and ("big",) not in cache._pages
    cache.get_or_compute(("d",), 2, make("d", 100))
    assert cache.size_bytes <= 400
    # a failed page is not kept; an exception keeps nothing either
    cache.get_or_compute(("e",), 2, make("e", 10, 503))
    assert cache.get_or_compute(("e",), 2, make("e", 10, 503))[1] is False

    def boom():
        raise RuntimeError("database went away")
    with pytest.raises(RuntimeError):
        cache.get_or_compute(("f",), 2, boom)
    assert ("f",) not in cache._pages
    with pytest.raises(ValueError):
        PageCache(max_entries=-1)


def test_page_cache_computes_a_page_once_under_concurrent_requests():
    cache = PageCache()
    started, release = threading.Event(), threading.Event()
    calls: list[int] = []

    def slow():
        calls.append(1)
        started.set()
        release.wait(10)
        return _page(b"board")

    results: list[tuple] = []
    first = threading.Thread(target=lambda: results.append(cache.get_or_compute(("board",), 7, slow)))
    first.start()
    assert started.wait(10)
    second = threading.Thread(target=lambda: results.append(cache.get_or_compute(("board",), 7, slow)))
    second.start()
    second.join(0.2)
    assert second.is_alive()  # waiting for the first request's page, not computing its own
    release.set()
    first.join(10)
    second.join(10)
    assert len(calls) == 1 and sorted(hit for _, hit in results) == [False, True]


def test_data_version_moves_with_a_commit(filled, tmp_path):
    e = eng.create(filled)
    try:
        before = eng.data_version(e)
        assert eng.data_version(e) == before  # reading changes nothing
        _ratings(filled, tmp_path, "judge-three", 2)
        deadline = time.monotonic() + 12
        while eng.data_version(e) == before and time.monotonic() < deadline:
            time.sleep(0.2)
        assert eng.data_version(e) != before
    finally:
        e.dispose()


def test_an_app_collected_while_an_engine_is_pinned_does_not_deadlock(tmp_path, monkeypatch):
    """The app's finalizer (unpin_engine) can run inside pin_engine when the garbage collector
    collects an old app while pin_engine allocates: it must not wait on the lock its own thread
    holds (a plain Lock hung test_serve_command_rules under load). Simulated by an unpin of
    another URL from inside the engine creation, as a finalizer would run it."""
    url = f"sqlite:///{tmp_path / 'a.db'}"
    e = eng.create(url)
    migrate.upgrade(e, "head")
    e.dispose()
    other = f"sqlite:///{tmp_path / 'b.db'}"
    e = eng.create(other)
    migrate.upgrade(e, "head")
    e.dispose()
    eng.pin_engine(other)
    real = eng.get_engine

    def collecting_get_engine(u, *a, **k):
        eng.unpin_engine(other)  # what weakref.finalize(app, unpin_engine, other) does when the GC runs here
        return real(u, *a, **k)

    monkeypatch.setattr(eng, "get_engine", collecting_get_engine)
    done = threading.Event()

    def pin():
        eng.pin_engine(url)
        done.set()

    t = threading.Thread(target=pin, daemon=True)
    t.start()
    t.join(30)
    assert done.is_set(), "pin_engine deadlocked on its own lock"
    monkeypatch.setattr(eng, "get_engine", real)
    assert other not in eng._PINNED and url in eng._PINNED
    eng.unpin_engine(url)
    assert url not in eng._PINNED
