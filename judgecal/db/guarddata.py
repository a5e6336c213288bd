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


def rated_template_keys(s: Session, family_ids: list[int], judge_id: int) -> dict[int, str]:
    """{response id: :func:`judgecal.calibrate.guards.template_key` of its text} for every response
    of the families with an ok rating with a score by the judge (what the score board's guards
    read, with :func:`judgecal.db.boarddata.rated_responses` giving the model, item and word
    count). One query (the responses joined to the judge's ratings, not ``IN`` lists of ids), the
    texts streamed and only their keys kept; the key is computed once per distinct text (by its
    stored SHA-256), so an answer repeated across items costs one normalisation."""
    from judgecal.calibrate.guards import template_key
    from judgecal.db.boarddata import _streamed

    rated = select(m.Rating.response_id).where(m.Rating.judge_id == judge_id, m.Rating.status == "ok",
                                               m.Rating.score.is_not(None))
    q = (select(m.Response.id, m.Response.text_sha256, m.Response.text)
         .join(m.Item, m.Item.id == m.Response.item_id)
         .where(m.Item.task_family_id.in_(family_ids), m.Response.id.in_(rated)))
    out: dict[int, str] = {}
    by_sha: dict[str, str] = {}
    for rid, sha, text in _streamed(s, q):
        key = by_sha.get(sha)
        if key is None:
            key = by_sha[sha] = template_key(text)
        out[rid] = key
    return out


def answer_identities(s: Session, response_ids) -> dict[int, tuple[int, str, int, int]]:
    """{response id: (item id, text SHA-256, n_words, n_chars)} for the given responses (unknown
    ids are absent): what the win-rate board's guards read (the same bytes are the same answer),
    without reading the texts."""
    ids = sorted(set(int(r) for r in response_ids))
    out: dict[int, tuple[int, str, int, int]] = {}
    for start in range(0, len(ids), 5000):
        part = ids[start : start + 5000]
        q = select(m.Response.id, m.Response.item_id, m.Response.text_sha256, m.Response.n_words,
                   m.Response.n_chars).where(m.Response.id.in_(part))
        for rid, item_id, sha, words, chars in s.execute(q):
            out[rid] = (item_id, sha, int(words), int(chars))
    return out
