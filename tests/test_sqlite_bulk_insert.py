"""SQLite bulk inserts (issue 20): several rows per INSERT statement give the same rows, ids
and counts as one statement per row, and a new database gets 16 KiB pages."""

from __future__ import annotations

import sqlite3

import pytest

from judgecal.db import engine as eng
from judgecal.db import migrate
from judgecal.db import models as m
from judgecal.db import queries as q
from judgecal.db.engine import session_scope


def _db(tmp_path, name="b.db"):
    url = f"sqlite:///{tmp_path / name}"
    e = eng.create(url)
    migrate.upgrade(e, "head")
    return e


def _setup(session) -> tuple[int, list[int]]:
    q.insert_ignore(session, m.TaskFamily, [{"name": "f", "l_ref": None, "created_at": m.utcnow()}])
    fid = q.family_id(session, "f")
    now = m.utcnow()
    q.insert_ignore(session, m.Item, [{"task_family_id": fid, "prompt": f"p{i}", "prompt_sha256": f"{i:064x}",
                                       "external_id": None, "reference": None, "source": "t", "created_at": now}
                                      for i in range(5)])
    return fid, sorted(session.connection().exec_driver_sql("SELECT id FROM item").scalars())


NOW = m.utcnow()


def _rows(items: list[int], n: int, now=NOW) -> list[tuple]:
    # duplicates of earlier rows (same natural key, other text) in the same group and in later ones
    rows = []
    for k in range(n):
        j = k if k % 7 else k // 2  # every 7th row repeats the key of an earlier one
        rows.append((items[j % len(items)], f"model{j}", f"text {k} é", f"{j:064x}", k, k + 1, k % 5, now))
    return rows


COLS = ("item_id", "model", "text", "text_sha256", "n_bytes", "n_chars", "n_words", "created_at")
VCOLS = ("response_a_id", "response_b_id", "judge_id", "sample_index", "position", "status", "verdict", "preference",
         "source", "attempts", "created_at")


def _judge(session) -> int:
    q.insert_ignore(session, m.Judge, [{"judge_key": "k", "name": "j", "model": "j", "endpoint": "e",
                                        "prompt_name": "p", "prompt_sha256": "0" * 64, "mode": "pairwise",
                                        "params": {}, "scale_min": 0.0, "scale_max": 1.0, "created_at": NOW}])
    return session.connection().exec_driver_sql("SELECT id FROM judge").scalar_one()


def _verdicts(ra: int, rb: int, jid: int, n: int) -> list[tuple]:
    rows = []
    for k in range(n):
        j = k if k % 7 else k // 2  # every 7th row repeats the key of an earlier one (another value)
        rows.append((ra, rb, jid, j, ("ab", "ba", "na")[j % 3], "ok", ("a", "b", "tie")[k % 3], (k % 11) / 10,
                     f"src {k} é", 0, NOW))
    return rows


@pytest.mark.parametrize("n", [1, 5, 63, 64, 65, 200, 5001])
@pytest.mark.parametrize("chunk", [7, 5000])
def test_multi_row_inserts_equal_one_row_statements(tmp_path, monkeypatch, n, chunk):
    """pairwise_judgment (CHECK constraints: several rows per INSERT) and response (none: one
    row per INSERT) store the same rows, ids and counts either way."""
    stored = {}
    multi = q._SQLITE_ROWS_PER_INSERT
    for group in (1, multi):
        monkeypatch.setattr(q, "_SQLITE_ROWS_PER_INSERT", group)
        e = _db(tmp_path, f"g{group}.db")
        with session_scope(e) as s:
            _, items = _setup(s)
            rows = _rows(items, max(2, min(n, 300)))
            added_r = q.insert_ignore_rows(s, m.Response, COLS, rows, chunk=chunk)
            ra, rb = s.connection().exec_driver_sql("SELECT id FROM response ORDER BY id LIMIT 2").scalars()
            vrows = _verdicts(ra, rb, _judge(s), n)
            added = q.insert_ignore_rows(s, m.PairwiseJudgment, VCOLS, vrows, chunk=chunk)
            again = q.insert_ignore_rows(s, m.PairwiseJudgment, VCOLS, vrows, chunk=chunk)
            got = s.connection().exec_driver_sql(
                "SELECT id, response_a_id, response_b_id, judge_id, sample_index, position, status, verdict, "
                "preference, source, attempts, created_at FROM pairwise_judgment ORDER BY id").all()
            resp = s.connection().exec_driver_sql("SELECT * FROM response ORDER BY id").all()
        e.dispose()
        assert added == len({(r[3], r[4]) for r in vrows}) == len(got)
        assert again == 0
        assert added_r == len({(r[0], r[1], r[3]) for r in rows}) == len(resp)
        stored[group] = ([tuple(r) for r in got], [tuple(r) for r in resp])
    assert multi > 1 and stored[1] == stored[multi]


def test_multi_row_insert_refuses_a_bad_row_like_one_row_statements(tmp_path):
    e = _db(tmp_path)
    with pytest.raises(Exception, match="CHECK constraint failed"):
        with session_scope(e) as s:
            q.insert_ignore(s, m.Judge, [{"judge_key": "k", "name": "j", "model": "j", "endpoint": "e",
                                          "prompt_name": "p", "prompt_sha256": "0" * 64, "mode": "pairwise",
                                          "params": {}, "scale_min": 0.0, "scale_max": 1.0,
                                          "created_at": m.utcnow()}])
            jid = s.connection().exec_driver_sql("SELECT id FROM judge").scalar_one()
            _, items = _setup(s)
            q.insert_ignore_rows(s, m.Response, COLS, _rows(items, 2))
            ra, rb = s.connection().exec_driver_sql("SELECT id FROM response ORDER BY id").scalars()
            now = m.utcnow()
            rows = [(ra, rb, jid, k, "ab", "ok", "a", 1.0, None, 0, now) for k in range(100)]
            rows[70] = (ra, rb, jid, 70, "ab", "ok", "a", 1.5, None, 0, now)  # preference outside [0, 1]
            q.insert_ignore_rows(s, m.PairwiseJudgment, ("response_a_id", "response_b_id", "judge_id", "sample_index",
                                                         "position", "status", "verdict", "preference", "source", "attempts",
                                                         "created_at"), rows)
    with session_scope(e) as s:  # rolled back: nothing of the transaction stored
        assert s.connection().exec_driver_sql("SELECT count(*) FROM pairwise_judgment").scalar_one() == 0
        assert s.connection().exec_driver_sql("SELECT count(*) FROM response").scalar_one() == 0
    e.dispose()


def test_new_database_gets_16k_pages_existing_keeps_its_own(tmp_path):
    e = _db(tmp_path)
    e.dispose()
    con = sqlite3.connect(tmp_path / "b.db")
    assert con.execute("PRAGMA page_size").fetchone()[0] == eng.SQLITE_PAGE_SIZE == 16384
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    con.close()
    old = sqlite3.connect(tmp_path / "old.db")
    old.execute("CREATE TABLE t (x)")
    old.commit()
    old.close()
    e = eng.create(f"sqlite:///{tmp_path / 'old.db'}")
    with e.connect() as c:
        assert c.exec_driver_sql("PRAGMA page_size").scalar_one() == 4096
        assert c.exec_driver_sql("PRAGMA journal_mode").scalar_one() == "wal"
    e.dispose()


def test_alpaca_eval_file_hashed_from_the_bytes_parsed(tmp_path, monkeypatch):
    """An annotations file's content hash (imported_file) comes from the bytes parsed, not a
    second read of the file; a BOM is part of the content hashed."""
    import hashlib
    import json

    from judgecal.importers import alpaca_eval

    recs = [{"instruction": f"q{i}", "output_1": f"base {i}", "generator_1": "base", "output_2": f"model {i} é",
             "generator_2": "m", "annotator": "ann", "preference": 1.25, "raw_completion": None} for i in range(3)]
    data = b"\xef\xbb\xbf" + json.dumps(recs).encode()
    path = tmp_path / "annotations.json"
    path.write_bytes(data)

    def no_second_read(p):
        raise AssertionError(f"{p} read again to hash it")

    monkeypatch.setattr(alpaca_eval, "file_digest", no_second_read)
    batch, _ = alpaca_eval.parse_file(path, "alpaca_eval")
    assert batch.digests[str(path)] == (hashlib.sha256(data).hexdigest(), len(data))
    assert len(batch.verdicts) == 3
