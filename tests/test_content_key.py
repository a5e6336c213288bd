"""rating.content_key (migration 0008, judgecal.db.contentkey): the ratings list's content order
as one stored, indexed text, filled by the database's own triggers on both dialects."""

from __future__ import annotations

import hashlib
import itertools
from contextlib import contextmanager
import random

import pytest
from sqlalchemy import select, text, update

from judgecal.db import browse
from judgecal.db import engine as eng
from judgecal.db import migrate
from judgecal.db import models as m
from judgecal.db.contentkey import family_range, rating_content_key
from judgecal.db.engine import session_scope

NAMES = ["", "a", "a\x01", "a\x01b", "a\x02", "a b", "ab", "b", "\x01", "é", "z😀", "Z", "a\x01\x01"]


@contextmanager
def session(url: str):
    engine = eng.create(url)
    try:
        with session_scope(engine) as s:
            yield s
    finally:
        engine.dispose()


def sha(x: str) -> str:
    return hashlib.sha256(x.encode()).hexdigest()


def test_known_key():
    key = rating_content_key("fam", "a" * 64, "m\x01x", "b" * 64, "c" * 64, 3)
    assert key == "fam\x01\x01" + "a" * 64 + "m\x01\x02x\x01\x01" + "b" * 64 + "c" * 64 + "2147483651"
    assert rating_content_key("f", "a" * 64, "m", "b" * 64, "c" * 64, -2**31).endswith("0000000000")
    assert rating_content_key("f", "a" * 64, "m", "b" * 64, "c" * 64, 2**31 - 1).endswith("4294967295")
    with pytest.raises(ValueError, match="prompt_sha256 must be 64"):
        rating_content_key("f", "a" * 63, "m", "b" * 64, "c" * 64, 0)
    with pytest.raises(ValueError, match="32-bit"):
        rating_content_key("f", "a" * 64, "m", "b" * 64, "c" * 64, 2**31)


def test_keys_sort_as_the_tuples():
    rng = random.Random(7)
    digests = [sha(str(i)) for i in range(3)]
    samples = [-2**31, -5, 0, 3, 10, 2**31 - 1]
    tuples = [(rng.choice(NAMES), rng.choice(digests), rng.choice(NAMES), rng.choice(digests), rng.choice(digests),
               rng.choice(samples)) for _ in range(3000)]
    tuples = sorted(set(tuples))
    shuffled = tuples[:]
    rng.shuffle(shuffled)
    assert sorted(shuffled, key=lambda t: rating_content_key(*t)) == tuples
    for name in NAMES:  # a family's range holds its keys and no other family's
        low, high = family_range(name)
        inside = [t for t in tuples if low <= rating_content_key(*t) < high]
        assert inside == [t for t in tuples if t[0] == name]


def _fill(url: str, families, models, samples=(0, -1, 7)) -> list[tuple]:
    """Families x 2 items x models x 2 judges x samples ratings written through the ORM (no key given)."""
    expected = []
    with session(url) as s:
        judges = [m.Judge(judge_key=sha(f"judge{j}"), name=f"J{j}", model="x", endpoint="local", prompt_name="p",
                          prompt_sha256=sha("p"), params={}, scale_min=1, scale_max=10) for j in range(2)]
        s.add_all(judges)
        for fam in families:
            f = m.TaskFamily(name=fam)
            s.add(f)
            s.flush()
            for i in range(2):
                item = m.Item(task_family_id=f.id, prompt=f"{fam}-{i}", prompt_sha256=sha(f"{fam}-{i}"))
                s.add(item)
                s.flush()
                for model in models:
                    body = f"answer {model} {i}"
                    r = m.Response(item_id=item.id, model=model, text=body, text_sha256=sha(body),
                                   n_bytes=len(body.encode()), n_chars=len(body), n_words=len(body.split()))
                    s.add(r)
                    s.flush()
                    for j in judges:
                        for k in samples:
                            s.add(m.Rating(response_id=r.id, judge_id=j.id, sample_index=k, status="ok",
                                           score=float(k % 10)))
                            expected.append((fam, item.prompt_sha256, model, r.text_sha256, j.judge_key, k))
    return sorted(expected)


def _stored(url: str) -> list[tuple]:
    with session(url) as s:
        rows = s.execute(select(m.TaskFamily.name, m.Item.prompt_sha256, m.Response.model, m.Response.text_sha256,
                                m.Judge.judge_key, m.Rating.sample_index, m.Rating.content_key)
                         .join(m.Response, m.Response.id == m.Rating.response_id)
                         .join(m.Item, m.Item.id == m.Response.item_id)
                         .join(m.TaskFamily, m.TaskFamily.id == m.Item.task_family_id)
                         .join(m.Judge, m.Judge.id == m.Rating.judge_id)).all()
    return [tuple(r) for r in rows]


def _page_tuples(url: str, f: browse.RatingFilter) -> list[tuple]:
    """Every matching rating, page by page (per page 5), as tuples (the test's texts are short: whole)."""
    out = []
    with session(url) as s:
        judge_keys = dict(s.execute(select(m.Judge.id, m.Judge.judge_key)).all())
        total = None
        for page in itertools.count():
            rows, total = browse.rating_page(s, f, limit=5, offset=5 * page)
            if not rows:
                break
            out += [(r["task_family"], sha(r["prompt"]), r["model"], sha(r["answer"]), judge_keys[r["judge_id"]],
                     r["sample_index"]) for r in rows]
    assert len(out) == total
    return out


@pytest.mark.parametrize("db_url", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)], indirect=True)
def test_the_database_fills_the_key_and_pages_follow_it(db_url):
    engine = eng.create(db_url)
    migrate.upgrade(engine, "head")
    engine.dispose()
    families = ["a", "a\x01", "ab", "a b", "é", "Z"]
    expected = _fill(db_url, families, ["m", "m\x01", "mé", "M"])
    stored = _stored(db_url)
    assert len(stored) == len(expected) and all(row[-1] == rating_content_key(*row[:-1]) for row in stored)
    assert _page_tuples(db_url, browse.RatingFilter()) == expected
    with session(db_url) as s:
        fams = dict(s.execute(select(m.TaskFamily.name, m.TaskFamily.id)).all())
        judge = s.scalar(select(m.Judge.id).where(m.Judge.name == "J1"))
    for fam in families:
        f = browse.RatingFilter(family_id=fams[fam], judge_id=judge, score_min=5)  # score = sample % 10
        assert _page_tuples(db_url, f) == [t for t in expected if t[0] == fam and t[4] == sha("judge1") and t[5] % 10 >= 5]
    assert _page_tuples(db_url, browse.RatingFilter(model="m\x01")) == [t for t in expected if t[2] == "m\x01"]
    with session(db_url) as s:  # an unknown family has no ratings
        assert browse.rating_page(s, browse.RatingFilter(family_id=10**6), limit=5, offset=0) == ([], 0)
    with session(db_url) as s:  # the index reads the same order
        index = browse.rating_index(s)
        by_id = dict(s.execute(select(m.Rating.id, m.Rating.content_key)).all())
    assert [by_id[int(i)] for i in index.id] == sorted(by_id.values())
    with session(db_url) as s:  # a rating moved to another sample gets its new key
        s.execute(update(m.Rating).where(m.Rating.sample_index == 7).values(sample_index=70))
    stored = _stored(db_url)
    assert all(row[-1] == rating_content_key(*row[:-1]) for row in stored)
    assert sum(row[5] == 70 for row in stored) == sum(t[5] == 7 for t in expected)
    # another client renames a family, a model, moves an answer, changes a judge key: the keys follow
    # (a break-it run found a renamed family's ratings gone from its filter)
    with session(db_url) as s:
        s.execute(text("UPDATE task_family SET name = 'ZZ-renamed' WHERE name = 'Z'"))
        s.execute(text("UPDATE response SET model = 'm-renamed' WHERE model = 'mé'"))
        s.execute(text("UPDATE judge SET judge_key = :k WHERE name = 'J0'"), {"k": sha("judge0-new")})
        s.execute(text("UPDATE item SET task_family_id = (SELECT id FROM task_family WHERE name = 'ab') "
                       "WHERE prompt = 'a-0'"))
    stored = _stored(db_url)
    assert all(row[-1] == rating_content_key(*row[:-1]) for row in stored)
    assert {row[0] for row in stored} == {"a", "a\x01", "ab", "a b", "é", "ZZ-renamed"}
    with session(db_url) as s:
        fid = s.scalar(select(m.TaskFamily.id).where(m.TaskFamily.name == "ZZ-renamed"))
        rows, total = browse.rating_page(s, browse.RatingFilter(family_id=fid), limit=200, offset=0)
    assert total == sum(t[0] == "Z" for t in expected) and {r["task_family"] for r in rows} == {"ZZ-renamed"}
    assert sum(row[0] == "ab" for row in _stored(db_url)) == sum(t[0] in ("ab", "a") and (t[0] == "ab" or t[1] == sha("a-0"))
                                                                 for t in expected)
    assert _page_tuples(db_url, browse.RatingFilter()) == sorted(row[:-1] for row in _stored(db_url))


@pytest.mark.postgres
def test_the_key_does_not_depend_on_the_writer_s_search_path(pg_url):
    engine = eng.create(pg_url)
    migrate.upgrade(engine, "head")
    engine.dispose()
    _fill(pg_url, ["f"], ["m"], samples=(0,))
    with session(pg_url) as s:  # a client whose search_path does not hold the tables (a break-it run: the insert failed)
        s.execute(text("SET search_path = pg_catalog"))
        s.execute(text("INSERT INTO public.rating (response_id, judge_id, sample_index, status, attempts, created_at) "
                       "SELECT response_id, judge_id, 5, 'ok', 0, now() FROM public.rating LIMIT 1"))
        s.execute(text("UPDATE public.task_family SET name = 'g'"))
    stored = _stored(pg_url)
    assert len(stored) == 5 and all(row[-1] == rating_content_key(*row[:-1]) for row in stored)
    assert {row[0] for row in stored} == {"g"} and sorted(row[5] for row in stored) == [0, 0, 0, 0, 5]


@pytest.mark.parametrize("db_url", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)], indirect=True)
def test_the_upgrade_fills_the_ratings_stored_before_it(db_url):
    engine = eng.create(db_url)
    migrate.upgrade(engine, "0007")
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO task_family (name, created_at) VALUES ('f\x01', CURRENT_TIMESTAMP)"))
        conn.execute(text("INSERT INTO judge (judge_key, name, model, endpoint, prompt_name, prompt_sha256, mode, "
                          "params, scale_min, scale_max, created_at) VALUES (:k, 'J', 'x', 'local', 'p', :k, "
                          "'pointwise', '{}', 1, 10, CURRENT_TIMESTAMP)"), {"k": sha("j")})
        conn.execute(text("INSERT INTO item (task_family_id, prompt, prompt_sha256, created_at) "
                          "SELECT id, 'p', :p, CURRENT_TIMESTAMP FROM task_family"), {"p": sha("p")})
        conn.execute(text("INSERT INTO response (item_id, model, text, text_sha256, n_bytes, n_chars, n_words, created_at) "
                          "SELECT id, 'mod', 't', :t, 1, 1, 1, CURRENT_TIMESTAMP FROM item"), {"t": sha("t")})
        conn.execute(text("INSERT INTO rating (response_id, judge_id, sample_index, status, attempts, created_at) "
                          "SELECT r.id, j.id, k.k, 'ok', 0, CURRENT_TIMESTAMP FROM response r, judge j, "
                          "(SELECT -3 AS k UNION ALL SELECT 2) k"))
    migrate.upgrade(engine, "head")
    engine.dispose()
    stored = sorted(_stored(db_url))
    assert [row[-1] for row in stored] == [rating_content_key("f\x01", sha("p"), "mod", sha("t"), sha("j"), k)
                                           for k in (-3, 2)]


def test_a_family_with_a_control_character_has_its_pages(tmp_path):
    # an import accepts a family named "a\x01" (only its ends are trimmed); the pages refused it with 400
    # "family holds a control character" while the overview linked to it (a break-it run)
    from starlette.testclient import TestClient

    from judgecal.web.app import create_app

    url = f"sqlite:///{tmp_path / 'c.db'}"
    engine = eng.create(url)
    migrate.upgrade(engine, "head")
    engine.dispose()
    expected = _fill(url, ["a", "a\x01", "a\x01\x01x"], ["m"], samples=(0,))
    c = TestClient(create_app(url, cache_mb=0))
    for fam in ("a", "a\x01", "a\x01\x01x"):
        r = c.get("/ratings", params={"family": fam, "per_page": 50})
        assert r.status_code == 200, r.text[:300]
        assert f"{sum(t[0] == fam for t in expected)} ratings" in r.text
    assert c.get("/ratings", params={"family": "a\x00"}).status_code == 400  # NUL never


def test_the_ratings_export_is_the_same_file_whatever_the_import_order(tmp_path, run_cli):
    # it was in row-id order: two databases holding the same ratings, imported in two orders, exported two files
    import json

    rows = [{"task_family": fam, "prompt": f"q{i}", "model": mod, "response": f"{mod} answers q{i}", "judge": "J",
             "scale_min": 1, "scale_max": 10, "sample_index": k, "score": (i + k) % 10 + 1}
            for fam in ("f2", "f1") for i in range(4) for mod in ("mb", "ma") for k in (1, 0)]
    files = []
    for name, order in (("fwd", rows), ("rev", rows[::-1])):
        src = tmp_path / f"{name}.jsonl"
        src.write_text("".join(json.dumps(r) + "\n" for r in order), encoding="utf-8")
        url = f"sqlite:///{tmp_path / (name + '.db')}"
        r = run_cli("--database-url", url, "import", "jsonl", str(src), "--kind", "ratings", "--no-refresh")
        assert r.exit_code == 0, r.stderr
        out = tmp_path / f"{name}.out.jsonl"
        r = run_cli("--database-url", url, "export", "ratings", str(out))
        assert r.exit_code == 0, r.stderr
        files.append(out.read_text(encoding="utf-8"))
    assert files[0] == files[1]
    got = [(json.loads(line)["task_family"], json.loads(line)["sample_index"]) for line in files[0].splitlines()]
    assert len(got) == len(rows) and [f for f, _ in got] == sorted(f for f, _ in got)  # family by family
