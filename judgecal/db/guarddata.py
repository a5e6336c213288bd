"""What the degenerate-answer guards (judgecal.calibrate.guards) read from the database: per
response its producing model, item, text identity (SHA-256) and number of words, without loading
the texts themselves."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from judgecal.db import models as m


def answer_keys(s: Session, response_ids) -> dict[int, tuple[str, int, str, int]]:
    """{response id: (model, item id, text_sha256, n_words)} for the given responses (unknown
    ids are absent)."""
    ids = sorted(set(int(r) for r in response_ids))
    out: dict[int, tuple[str, int, str, int]] = {}
    for start in range(0, len(ids), 5000):
        part = ids[start : start + 5000]
        q = select(m.Response.id, m.Response.model, m.Response.item_id, m.Response.text_sha256,
                   m.Response.n_words).where(m.Response.id.in_(part))
        for rid, model, item_id, sha, words in s.execute(q):
            out[rid] = (model, item_id, sha, int(words))
    return out
