"""The indexes ``judgecal serve`` keeps: the judge audit's pair index
(judgecal.views.audit.AuditIndex) and the ratings list's (judgecal.db.browse.RatingIndex).
Every filter and page is cut from one index, equal to the page computed afresh by its query;
serve keeps an index until the database changes (then computes it again, with the new data),
and its warmer computes each family's and judge's audit and the ratings list ahead. SQLite and
PostgreSQL."""

from __future__ import annotations

import pytest

import serve_data as sd

pytest.importorskip("starlette")
from starlette.testclient import TestClient  # noqa: E402

from judgecal.views.audit import FILTERS, audit_index, audit_page, judge_audit  # noqa: E402
from judgecal.views.browse import family_judges, rating_index, ratings  # noqa: E402
from judgecal.web import create_app  # noqa: E402


@pytest.fixture(scope="module")
def demo(tmp_path_factory, data_dir):
    return sd.demo_db(tmp_path_factory, data_dir)


def test_every_filter_and_page_of_one_index_equals_the_audit(demo):
    url = demo["url"]
    combos = [(fam, j["ref"]) for fam, js in family_judges(url).items() for j in js]
    assert ("llmbar/Natural", "GPT-4") in combos and len(combos) >= 4
    for fam, judge in combos:
        index = audit_index(fam, judge, url)
        n = len(index.a)
        assert index.head["counts"]["all"] == n and index.nbytes >= 24 * n
        for flt in FILTERS:
            first = audit_page(index, url, filter=flt, per_page=7)
            assert first == judge_audit(fam, judge, url, filter=flt, per_page=7)  # computed afresh
            assert first["total"] == first["counts"][flt]
            seen = []
            for page in range(1, first["pages"] + 1):
                rows = audit_page(index, url, filter=flt, page=page, per_page=7)["rows"]
                assert all(flt == "all" or flt in r["flags"] for r in rows)
                seen += [(r["item"]["prompt_sha256"], r["a"]["model"], r["b"]["model"], r["a"]["text"][:50]) for r in rows]
            assert len(seen) == first["total"] == len(set(seen))


def test_the_index_shows_scores_lengths_and_calibrated_scores(demo):
    from judgecal.views.fitting import apply_calibration, load_calibrations

    a = judge_audit("llmbar/Natural", "GPT-4", demo["url"], per_page=200)
    assert a["calibration"]["id"] == demo["calibration"] and a["length_unit"] == "words"
    (cal, _, _), = load_calibrations(None, None, str(demo["calibration"]), demo["url"])
    moved = 0
    for r in a["rows"]:
        for side in ("a", "b"):
            x = r[side]
            assert x["length"] == float(x["n_words"])  # the calibration's unit, as stored
            ok = [g["score"] for g in x["ratings"] if g["status"] == "ok"]
            assert x["score"] == pytest.approx(sum(ok) / len(ok))
            # the stored calibration applied to this answer alone, as the fit applies it
            assert x["calibrated"] == float(apply_calibration(cal, [x["score"]], [x["length"]])[0])
            moved += x["calibrated"] != x["score"]
    assert moved > 0
    none = judge_audit("llmbar/Natural", "GPT-4", demo["url"], calibration="none", per_page=3)
    assert all(r[s]["calibrated"] is None for r in none["rows"] for s in "ab")


def _one_ok_rating(url: str) -> int:
    from sqlalchemy import text

    from judgecal.db.engine import get_engine

    engine = get_engine(url)
    with engine.connect() as c:
        rid = c.execute(text("select r.id from rating r join judge j on j.id = r.judge_id join response p on "
                             "p.id = r.response_id join item i on i.id = p.item_id join task_family f on "
                             "f.id = i.task_family_id where j.name = 'GPT-4' and f.name = 'llmbar/Natural' and "
                             "r.status = 'ok' order by p.text_sha256 limit 1")).scalar_one()
    engine.dispose()
    return rid


@pytest.mark.parametrize("dialect", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def test_serve_keeps_the_index_until_the_data_changes(dialect, tmp_path, data_dir, request):
    from sqlalchemy import text

    from judgecal.db.engine import get_engine

    url = f"sqlite:///{tmp_path / 'a.db'}" if dialect == "sqlite" else request.getfixturevalue("pg_url")
    sd.fill(url, data_dir, tmp_path / "files", fit_nested=False, alpaca=False)
    c = TestClient(create_app(url))
    indexes = c.app.state.indexes
    base = "/audit?family=llmbar/Natural&judge=GPT-4&format=json"
    pages = [c.get(base + ("" if f == "all" else f"&filter={f}")) for f in FILTERS]
    assert all(r.status_code == 200 for r in pages)
    assert (indexes.misses, indexes.hits) == (1, len(FILTERS) - 1)  # one index, every filter cut from it
    before = pages[0].json()["counts"]
    # a rating of the audit becomes unparsed: the next page reads a new index with it
    engine = get_engine(url)
    with engine.begin() as conn:
        conn.execute(text("update rating set status = 'unparsed', score = null where id = :i"), {"i": _one_ok_rating(url)})
    engine.dispose()
    after = c.get(base + "&filter=unparsed").json()
    assert indexes.misses == 2
    assert after["counts"]["unparsed"] == before["unparsed"] + 1 == after["total"]
    assert after == judge_audit("llmbar/Natural", "GPT-4", url, filter="unparsed")
    # --cache-mb 0: nothing kept
    off = TestClient(create_app(url, cache_mb=0))
    off.get(base), off.get(base + "&filter=ties")
    assert off.app.state.indexes.misses == 2 and len(off.app.state.indexes) == 0


def test_the_warmer_computes_each_audit_and_the_ratings_ahead(demo):
    from judgecal.web.app import _seeds, page_key

    seeds = _seeds(demo["url"])
    assert page_key("/ratings", ()) in seeds and page_key("/", ()) in seeds
    audits = [k for k in seeds if k[0] == "/audit" and k[1]]
    want = [page_key("/audit", [("family", fam), ("judge", j["ref"])])
            for fam, js in family_judges(demo["url"]).items() for j in js]
    assert audits == want and page_key("/audit", [("family", "llmbar/Natural"), ("judge", "GPT-4")]) in audits
    # the newest calibrations' reports, as the overview links them (by id, and by family and judge)
    assert page_key("/calibration", [("calibration", str(demo["calibration"]))]) in seeds
    assert page_key("/calibration", [("family", "llmbar/Natural"), ("judge", "GPT-4")]) in seeds
    c = TestClient(create_app(demo["url"], warm=True))
    with c:  # the lifespan starts the warmer
        assert c.app.state.warmer.wait_warm(240)
        kept = set(c.app.state.indexes.keys())
        assert kept == {("audit", fam, judge, "latest") for _, ((_, fam), (_, judge)) in want} | {("ratings",)}
        r = c.get("/audit?family=llmbar/Natural&judge=GPT-4&filter=flips&page=1")
        assert r.status_code == 200 and c.app.state.indexes.hits >= 1
        report = c.get(f"/calibration?calibration={demo['calibration']}")
        assert report.status_code == 200 and report.headers["x-judgecal-cache"] == "hit"


def _rating_filters():
    import datetime as dt

    today = dt.datetime.now(dt.timezone.utc).date()
    return [dict(), dict(family="llmbar/Natural"), dict(judge="GPT-4", status="ok", score_min=6.0),
            dict(model="llmbar/output_1", score_max=5.5), dict(status="unparsed"), dict(family=sd.HOSTILE_FAMILY),
            dict(since=today - dt.timedelta(days=1), until=today), dict(since=today + dt.timedelta(days=1)),
            dict(model="no such model"), dict(judge="ChatGPT", score_min=7.0, score_max=7.0)]


def _same_ratings_both_ways(url: str) -> int:
    index = rating_index(url)
    compared = 0
    for f in _rating_filters():
        first = ratings(url, **f, per_page=7)
        for page in range(1, first["pages"] + 1):
            assert ratings(url, **f, page=page, per_page=7, index=index) == ratings(url, **f, page=page, per_page=7)
            compared += 1
    return compared


def test_the_ratings_index_gives_the_query_s_pages(demo):
    assert _same_ratings_both_ways(demo["url"]) >= 20
    index = rating_index(demo["url"])
    assert index.nbytes >= 40 * len(index.id) - 8 * len(index.id)  # about 40 bytes a rating
    # content order: family name, then item; texts by code point, as on SQLite (and PostgreSQL with collation C)
    fams = [int(x) for x in index.family_id]
    assert fams == sorted(fams, key=lambda f: fams.index(f))  # each family in one run


@pytest.mark.postgres
def test_the_ratings_index_on_postgresql(pg_url, tmp_path, data_dir):
    sd.fill(pg_url, data_dir, tmp_path / "files", fit_nested=False, alpaca=False)
    assert _same_ratings_both_ways(pg_url) >= 20


def test_serve_cuts_every_ratings_page_from_one_index(demo):
    c = TestClient(create_app(demo["url"]))
    pages = [c.get("/ratings"), c.get("/ratings?status=unparsed"), c.get("/ratings?family=llmbar/Natural&page=2"),
             c.get("/ratings?judge=GPT-4&score_min=6")]
    assert all(p.status_code == 200 for p in pages)
    assert (c.app.state.indexes.misses, c.app.state.indexes.hits) == (1, 3)
    off = TestClient(create_app(demo["url"], cache_mb=0))  # without a cache: one query a page, no index
    assert off.get("/ratings?status=unparsed").text == pages[1].text
    assert off.app.state.indexes.misses == 0


# ---------------------------------------------------------------- break-it pass (helper-7) findings
def test_a_ratings_index_that_could_not_be_kept_is_not_computed(demo, monkeypatch):
    from judgecal.db import browse

    monkeypatch.setattr(browse, "RATING_INDEX_BYTES", 10**5)  # ~400 ratings x 100 kB: over 4 x 1 MiB
    c = TestClient(create_app(demo["url"], cache_mb=1))
    pages = [c.get("/ratings?status=ok"), c.get("/ratings?status=ok&page=2")]
    assert all(p.status_code == 200 for p in pages)
    assert c.app.state.indexes.misses == 0 and ("ratings",) not in c.app.state.indexes.keys()  # one query a page
    assert pages[0].text == TestClient(create_app(demo["url"], cache_mb=0)).get("/ratings?status=ok").text


def test_the_ratings_index_counts_its_model_names(demo):
    index = rating_index(demo["url"])
    arrays = sum(a.nbytes for a in (index.id, index.family_id, index.judge_id, index.model, index.status, index.score,
                                    index.created_us))
    assert index.models and index.nbytes >= arrays + sum(len(k) for k in index.models)


def test_a_page_that_became_an_error_is_not_served_stale(tmp_path, data_dir):
    from sqlalchemy import text

    from judgecal.db.engine import get_engine

    url = f"sqlite:///{tmp_path / 'a.db'}"
    sd.fill(url, data_dir, tmp_path / "files", fit_nested=False, alpaca=False)
    c = TestClient(create_app(url, warm=True))
    with c:
        assert c.app.state.warmer.wait_warm(240)
        page = ratings(url, per_page=7)["pages"]
        assert c.get(f"/ratings?per_page=7&page={page}").status_code == 200
        engine = get_engine(url)
        with engine.begin() as conn:
            conn.execute(text("delete from rating where judge_id = (select id from judge where name = 'ChatGPT')"))
        engine.dispose()
        first = c.get(f"/ratings?per_page=7&page={page}")
        assert first.status_code == 200 and first.headers["x-judgecal-cache"] == "stale"  # with its banner, once
        assert c.app.state.warmer.wait_warm(240)
        after = c.get(f"/ratings?per_page=7&page={page}")
        assert after.status_code == 400 and "past the last page" in after.text


@pytest.mark.postgres
def test_an_audit_with_a_nan_score_on_postgresql(pg_url, tmp_path, data_dir):
    from sqlalchemy import text

    from judgecal.db.engine import get_engine

    sd.fill(pg_url, data_dir, tmp_path / "files", fit_nested=False, alpaca=False)
    engine = get_engine(pg_url)
    with engine.begin() as conn:  # only a hand edit stores NaN (the importers refuse it)
        conn.execute(text("update rating set score = 'NaN' where id = :i"), {"i": _one_ok_rating(pg_url)})
    engine.dispose()
    c = TestClient(create_app(pg_url))
    a = c.get("/audit?family=llmbar/Natural&judge=GPT-4&format=json&per_page=200")
    assert a.status_code == 200
    assert any(r["raw_decision"] is None for r in a.json()["rows"])
    off = TestClient(create_app(pg_url, cache_mb=0))
    for q in ("/ratings?family=llmbar/Natural&score_min=1", "/ratings?score_max=10&per_page=200"):
        assert c.get(q).text == off.get(q).text  # NaN matches no score bound, query or index



def test_timestamps_written_in_bulk_keep_their_microseconds(tmp_path):
    import datetime as dt
    import sqlite3

    from judgecal.db import models as m
    from judgecal.db import queries
    from judgecal.db.engine import create, session_scope
    from judgecal.db.migrate import upgrade

    url = f"sqlite:///{tmp_path / 'b.db'}"
    engine = create(url)
    upgrade(engine, "head")
    midnight = dt.datetime(2026, 12, 5, tzinfo=dt.timezone.utc)
    with session_scope(engine) as s:
        queries.insert_ignore_rows(s, m.TaskFamily, ["name", "created_at"], [("f1", midnight), ("f2", midnight)])
    engine.dispose()
    stored = [r[0] for r in sqlite3.connect(tmp_path / "b.db").execute("select created_at from task_family")]
    # '2026-12-05 00:00:00+00:00' would sort as text below the bound '2026-12-05 00:00:00.000000'
    assert stored == ["2026-12-05 00:00:00.000000+00:00"] * 2


@pytest.mark.postgres
def test_the_ratings_order_is_code_point_order_under_a_language_collation(pg_server, tmp_path, data_dir):
    import uuid

    from sqlalchemy import text

    from conftest import PG_ADMIN_URL

    name = f"judgecal_test_icu_{uuid.uuid4().hex[:8]}"
    with pg_server.connect() as conn:
        conn.execute(text(f"CREATE DATABASE \"{name}\" TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE 'en-US' "
                          f"LOCALE 'C.UTF-8'"))
    url = PG_ADMIN_URL.rsplit("/", 1)[0] + f"/{name}"
    try:
        sd.fill(url, data_dir, tmp_path / "files", fit_nested=False, alpaca=False)
        index = rating_index(url)
        for f in (dict(), dict(family=sd.HOSTILE_FAMILY), dict(status="ok")):
            for page in range(1, ratings(url, **f, per_page=200)["pages"] + 1):
                got = ratings(url, **f, page=page, per_page=200)
                assert got == ratings(url, **f, page=page, per_page=200, index=index)  # the query sorts by code point too
        by_item: dict[str, list[str]] = {}
        for r in ratings(url, family=sd.HOSTILE_FAMILY, per_page=200)["rows"]:
            by_item.setdefault(r["item"], []).append(r["model"])
        assert all(models == sorted(models) for models in by_item.values())  # each item's models by code point
    finally:
        from conftest import _drop_pg

        _drop_pg(pg_server, name)


# ---------------------------------------------------------------- confirming pass (helper-8) findings
def test_a_page_that_outgrew_the_cache_is_not_served_stale():
    from judgecal.web.cache import Page, PageCache

    cache = PageCache(max_entries=8, max_bytes=400)  # a page over 100 bytes is served, not kept
    small, big = Page(200, b"x" * 50, "text/html", ()), Page(200, b"y" * 300, "text/html", ())
    assert cache.get_or_compute(("/p", ()), 1, lambda: small) == (small, False)
    assert cache.peek(("/p", ())) == (1, small)
    # the data changed and the page grew past a quarter of the budget: the old copy goes
    assert cache.get_or_compute(("/p", ()), 2, lambda: big) == (big, False)
    assert cache.peek(("/p", ())) is None and cache.size_bytes == 0


def test_every_response_says_how_it_was_made(demo):
    c = TestClient(create_app(demo["url"]))
    for path, status in (("/?fresh=2", 400), ("/no-such-page", 404), ("/ratings?page=0", 400), ("/", 200)):
        r = c.get(path)
        assert r.status_code == status and r.headers["x-judgecal-cache"] in ("miss", "hit"), path
    assert c.post("/").headers["x-judgecal-cache"] == "miss"
    token = TestClient(create_app(demo["url"], token="t" * 20)).get("/")
    assert token.status_code == 401 and token.headers["x-judgecal-cache"] == "miss"
