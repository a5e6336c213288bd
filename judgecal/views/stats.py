"""``judgecal stats``: counts per task family."""

from __future__ import annotations

from sqlalchemy import func, select

from judgecal.db import models as m
from judgecal.db import queries as q
from judgecal.db import verdicts as vq
from judgecal.db.engine import get_engine, session_scope


def collect_stats(url: str | None = None) -> list[dict]:
    """One dict per task family: items, responses, expert labels (pairwise/pointwise),
    verbosity pairs, ratings and pairwise verdicts as {judge: {status: n}} (the judge's name, or ``name (id N)``
    where several judges share it), and ``judges_told_apart``: {``name (id N)``: what tells that
    judge from the others of its name (:func:`judgecal.db.queries.judge_differences`, e.g.
    ``"mode pairwise"``)} for the family's judges that share a name."""
    engine = get_engine(url)
    out = []
    with session_scope(engine) as s:
        fams = s.execute(select(m.TaskFamily.id, m.TaskFamily.name).order_by(m.TaskFamily.name)).all()

        def per_family(stmt):
            return dict(s.execute(stmt).all())

        items = per_family(select(m.Item.task_family_id, func.count()).group_by(m.Item.task_family_id))
        resp = per_family(
            select(m.Item.task_family_id, func.count()).join(m.Response, m.Response.item_id == m.Item.id).group_by(m.Item.task_family_id)
        )
        pairs = per_family(
            select(m.Item.task_family_id, func.count()).join(m.VerbosityPair, m.VerbosityPair.item_id == m.Item.id).group_by(m.Item.task_family_id)
        )
        labels: dict[int, dict[str, int]] = {}
        for fid, kind, n in s.execute(
            select(m.Item.task_family_id, m.ExpertLabel.kind, func.count())
            .join(m.Response, m.Response.item_id == m.Item.id)
            .join(m.ExpertLabel, func.coalesce(m.ExpertLabel.response_a_id, m.ExpertLabel.response_id) == m.Response.id)
            .group_by(m.Item.task_family_id, m.ExpertLabel.kind)
        ):
            labels.setdefault(fid, {})[kind] = n
        ratings: dict[int, dict[str, dict[str, int]]] = {}
        label = q.judge_labels(s)
        for fid, judge_id, status, n in s.execute(
            select(m.Item.task_family_id, m.Rating.judge_id, m.Rating.status, func.count())
            .join(m.Response, m.Response.item_id == m.Item.id)
            .join(m.Rating, m.Rating.response_id == m.Response.id)
            .group_by(m.Item.task_family_id, m.Rating.judge_id, m.Rating.status)
        ):
            ratings.setdefault(fid, {}).setdefault(label[judge_id], {})[status] = n
        verdicts = vq.verdict_counts(s)
        differ = {label[jid]: d for jid, d in q.shared_name_differences(s).items()}
        for fid, name in fams:
            out.append(
                {
                    "task_family": name,
                    "items": items.get(fid, 0),
                    "responses": resp.get(fid, 0),
                    "expert_labels": labels.get(fid, {}),
                    "verbosity_pairs": pairs.get(fid, 0),
                    "ratings": ratings.get(fid, {}),
                    "pairwise_verdicts": verdicts.get(fid, {}),
                    "judges_told_apart": {k: differ[k] for k in sorted(set(ratings.get(fid, {})) | set(verdicts.get(fid, {})))
                                          if k in differ},
                }
            )
    engine.dispose()
    return out
