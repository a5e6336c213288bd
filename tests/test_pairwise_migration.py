"""Migration 0002 (pairwise verdicts) up/down/up with data in it, on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest
from sqlalchemy import inspect, text

from judgecal.db import engine as eng
from judgecal.db import migrate
from judgecal.errors import DataLossError


def test_0002_up_down_up_keeps_verdicts(db_url):
    e = eng.create(db_url)
    try:
        migrate.upgrade(e, "0001")
        with e.begin() as c:
            c.execute(text("INSERT INTO task_family (id, name, created_at) VALUES (1, 'f', CURRENT_TIMESTAMP)"))
            c.execute(text("INSERT INTO item (id, task_family_id, prompt, prompt_sha256, created_at) "
                           "VALUES (1, 1, 'q', 'h', CURRENT_TIMESTAMP)"))
            for rid, model in ((1, "m"), (2, "base")):
                c.execute(text("INSERT INTO response (id, item_id, model, text, text_sha256, n_bytes, n_chars, n_words, created_at) "
                               f"VALUES ({rid}, 1, '{model}', 't{rid}', 'h{rid}', 2, 2, 1, CURRENT_TIMESTAMP)"))
            c.execute(text("INSERT INTO judge (id, judge_key, name, model, endpoint, prompt_name, prompt_sha256, mode, params, "
                           "scale_min, scale_max, created_at) VALUES (1, 'k', 'j', 'j', 'e', 'p', 's', 'pairwise', '{}', 0, 1, "
                           "CURRENT_TIMESTAMP)"))
            for pid, pos, verdict in ((1, "ab", "a"), (2, "ba", "tie")):
                c.execute(text("INSERT INTO pairwise_judgment (id, response_a_id, response_b_id, judge_id, sample_index, position, "
                               f"status, verdict, attempts, created_at) VALUES ({pid}, 1, 2, 1, 0, '{pos}', 'ok', '{verdict}', 1, "
                               "CURRENT_TIMESTAMP)"))
        migrate.upgrade(e, "head")
        with e.begin() as c:
            got = dict(c.execute(text("SELECT position, preference FROM pairwise_judgment")).all())
            assert got == {"ab": 1.0, "ba": 0.5}  # backfilled from the verdicts
            c.execute(text("INSERT INTO pairwise_judgment (id, response_a_id, response_b_id, judge_id, sample_index, position, "
                           "status, verdict, preference, baseline_side, source, attempts, created_at) "
                           "VALUES (3, 1, 2, 1, 1, 'na', 'ok', 'b', 0.25, 'b', 'f.json', 0, CURRENT_TIMESTAMP)"))
        with pytest.raises(DataLossError, match="1 pairwise verdicts without a recorded order"):
            migrate.downgrade(e, "0001")  # refused: it would delete the 'na' verdict
        lost = migrate.downgrade(e, "0001", yes=True)
        assert [(c.revision, c.n) for c in lost] == [("0002", 1)]  # the refilled preferences are no loss
        cols = {c["name"] for c in inspect(e).get_columns("pairwise_judgment")}
        assert "preference" not in cols and "baseline_side" not in cols
        with e.begin() as c:
            # the 'na' verdict cannot exist in the older schema (documented); the others stay
            assert sorted(r[0] for r in c.execute(text("SELECT id FROM pairwise_judgment"))) == [1, 2]
        migrate.upgrade(e, "head")
        with e.begin() as c:
            assert dict(c.execute(text("SELECT id, preference FROM pairwise_judgment")).all()) == {1: 1.0, 2: 0.5}
    finally:
        e.dispose()
