"""Read the stored style features of answers (lengths and Markdown counts) for summaries. No maths."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from judgecal.calibrate.style import COLUMNS, style_counts
from judgecal.db import models as m

#: the length columns every response has, in the order summaries show them
LENGTHS = ("n_chars", "n_words", "n_bytes")


def answer_features(s: Session, family_id: int | None = None) -> dict[tuple[int, str], dict[str, list[float]]]:
    """{(task family id, model): {feature: [value per answer]}} of every stored answer:
    :data:`LENGTHS`, ``tokens[<tokenizer>]`` for every tokenizer with stored token lengths
    (answers without one are absent from that list), and the Markdown counts
    (:data:`judgecal.calibrate.style.COLUMNS`; a row another client wrote without them is
    counted from its text here). Rows in id order; ``family_id``: that family's answers only."""
    R = m.Response
    out: dict[tuple[int, str], dict[str, list[float]]] = {}
    where: dict[int, tuple[int, str]] = {}
    cols = [getattr(R, c) for c in LENGTHS + COLUMNS]
    q = select(R.id, m.Item.task_family_id, R.model, *cols).join(m.Item, m.Item.id == R.item_id).order_by(R.id)
    if family_id is not None:
        q = q.where(m.Item.task_family_id == family_id)
    missing: list[int] = []
    for part in s.connection().execute(q).partitions(20_000):
        for rid, fid, model, *vals in part:
            d = out.get((fid, model))
            if d is None:
                d = out[(fid, model)] = {c: [] for c in LENGTHS + COLUMNS}
            where[rid] = (fid, model)
            for c, v in zip(LENGTHS, vals):
                d[c].append(v)
            if any(v is None for v in vals[len(LENGTHS):]):
                missing.append(rid)
                continue
            for c, v in zip(COLUMNS, vals[len(LENGTHS):]):
                d[c].append(v)
    for start in range(0, len(missing), 900):
        for rid, t in s.execute(select(R.id, R.text).where(R.id.in_(missing[start:start + 900]))):
            d = out[where[rid]]
            for c, v in zip(COLUMNS, style_counts(t)):
                d[c].append(v)
    tq = select(m.TokenLength.response_id, m.TokenLength.tokenizer, m.TokenLength.n_tokens).order_by(
        m.TokenLength.tokenizer, m.TokenLength.response_id)
    if family_id is not None:
        tq = tq.join(R, R.id == m.TokenLength.response_id).join(m.Item, m.Item.id == R.item_id).where(
            m.Item.task_family_id == family_id)
    for rid, tok, n in s.connection().execute(tq):
        key = where.get(rid)
        if key is not None:
            out[key].setdefault(f"tokens[{tok}]", []).append(n)
    return out
