"""What the degenerate-answer guards (judgecal.calibrate.guards) read from the database: per
response its producing model, item, template identity (:func:`judgecal.calibrate.guards.
template_key`: the text with digits, case and whitespace normalised, so that "answer to request
1" and "answer to request 2" are one template) and number of words. Texts are read in batches
and only their keys kept."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from judgecal.db import models as m


def answer_keys(s: Session, response_ids) -> dict[int, tuple[str, int, str, int]]:
    """{response id: (model, item id, template key, n_words)} for the given responses (unknown
    ids are absent)."""
    from judgecal.calibrate.guards import template_key

    ids = sorted(set(int(r) for r in response_ids))
    out: dict[int, tuple[str, int, str, int]] = {}
    for start in range(0, len(ids), 5000):
        part = ids[start : start + 5000]
        q = select(m.Response.id, m.Response.model, m.Response.item_id, m.Response.text,
                   m.Response.n_words).where(m.Response.id.in_(part))
        for rid, model, item_id, text, words in s.execute(q):
            out[rid] = (model, item_id, template_key(text), int(words))
    return out
