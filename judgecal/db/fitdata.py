"""Load what a calibration needs from the database: per-response judge scores and lengths,
expert-labelled pairs, pointwise expert labels, verbosity pairs (plain Python lists; the
calibrate layer turns them into arrays)."""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from judgecal.db import models as m

LENGTH_COLUMNS = {"words": m.Response.n_words, "chars": m.Response.n_chars, "bytes": m.Response.n_bytes}


@dataclass
class FamilyRows:
    """One family's data for one judge. ``score``: mean of the judge's ok ratings of a response
    (over samples); ``length``: in the requested unit; ``text`` only when asked for."""

    score: dict[int, float] = field(default_factory=dict)
    n_samples: dict[int, int] = field(default_factory=dict)
    length: dict[int, float] = field(default_factory=dict)
    item_of: dict[int, int] = field(default_factory=dict)
    model_of: dict[int, str] = field(default_factory=dict)
    text: dict[int, str] = field(default_factory=dict)
    pairs: list[tuple[int, int, int, float]] = field(default_factory=list)  # item, a, b, outcome
    points: list[tuple[int, int, float, float, float]] = field(default_factory=list)  # item, resp, score, min, max
    verbosity: list[tuple[int, int]] = field(default_factory=list)  # concise, verbose
    missing_lengths: list[int] = field(default_factory=list)
    status_counts: dict[str, int] = field(default_factory=dict)


OUTCOME = {"a": 1.0, "b": 0.0, "tie": 0.5}


def response_ids_of_family(s: Session, family_id: int) -> list[int]:
    """Every response id of a family."""
    q = select(m.Response.id).join(m.Item, m.Item.id == m.Response.item_id).where(m.Item.task_family_id == family_id)
    return list(s.scalars(q))


def load_family(
    s: Session,
    family_id: int,
    judge_id: int,
    *,
    length_unit: str,
    tokenizer: str | None,
    with_text: bool = False,
    verbosity_family_id: int | None = None,
) -> FamilyRows:
    """Scores of ``judge_id`` on ``family_id`` plus labels, verbosity pairs and lengths.

    ``length_unit`` 'tokens' reads ``token_length`` rows of ``tokenizer``; responses without
    one are listed in ``missing_lengths`` (the caller fills them and loads again)."""
    rows = FamilyRows()
    fams = {family_id} | ({verbosity_family_id} if verbosity_family_id else set())
    base = select(m.Response.id, m.Response.item_id, m.Response.model).join(m.Item, m.Item.id == m.Response.item_id).where(
        m.Item.task_family_id.in_(fams)
    )
    for rid, item_id, model in s.execute(base):
        rows.item_of[rid] = item_id
        rows.model_of[rid] = model
    ids = select(m.Response.id).join(m.Item, m.Item.id == m.Response.item_id).where(m.Item.task_family_id.in_(fams))
    q = (
        select(m.Rating.response_id, func.avg(m.Rating.score), func.count())
        .where(m.Rating.judge_id == judge_id, m.Rating.status == "ok", m.Rating.response_id.in_(ids))
        .group_by(m.Rating.response_id)
    )
    for rid, score, n in s.execute(q):
        rows.score[rid] = float(score)
        rows.n_samples[rid] = int(n)
    q = (
        select(m.Rating.status, func.count())
        .where(m.Rating.judge_id == judge_id, m.Rating.response_id.in_(ids))
        .group_by(m.Rating.status)
    )
    rows.status_counts = dict(s.execute(q).all())
    if length_unit == "tokens":
        q = select(m.TokenLength.response_id, m.TokenLength.n_tokens).where(
            m.TokenLength.tokenizer == tokenizer, m.TokenLength.response_id.in_(ids)
        )
    else:
        q = select(m.Response.id, LENGTH_COLUMNS[length_unit]).where(m.Response.id.in_(ids))
    rows.length = {rid: float(n) for rid, n in s.execute(q)}
    if with_text:
        rows.text = dict(s.execute(select(m.Response.id, m.Response.text).where(m.Response.id.in_(ids))).all())

    fam_ids = select(m.Response.id).join(m.Item, m.Item.id == m.Response.item_id).where(m.Item.task_family_id == family_id)
    q = select(m.ExpertLabel.response_a_id, m.ExpertLabel.response_b_id, m.ExpertLabel.preference).where(
        m.ExpertLabel.kind == "pairwise", m.ExpertLabel.response_a_id.in_(fam_ids)
    ).order_by(m.ExpertLabel.id)
    for a, b, pref in s.execute(q):
        rows.pairs.append((rows.item_of[a], a, b, OUTCOME[pref]))
    q = select(m.ExpertLabel.response_id, m.ExpertLabel.score, m.ExpertLabel.scale_min, m.ExpertLabel.scale_max).where(
        m.ExpertLabel.kind == "pointwise", m.ExpertLabel.response_id.in_(fam_ids)
    ).order_by(m.ExpertLabel.id)
    for r, score, lo, hi in s.execute(q):
        rows.points.append((rows.item_of[r], r, score, lo, hi))
    vfam = verbosity_family_id or family_id
    q = (
        select(m.VerbosityPair.concise_response_id, m.VerbosityPair.verbose_response_id)
        .join(m.Item, m.Item.id == m.VerbosityPair.item_id)
        .where(m.Item.task_family_id == vfam)
        .order_by(m.VerbosityPair.id)
    )
    rows.verbosity = [tuple(r) for r in s.execute(q)]
    needed = {r for r in rows.score}
    rows.missing_lengths = sorted(r for r in needed if r not in rows.length)
    return rows
