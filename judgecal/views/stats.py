"""``judgecal stats``: counts per task family."""

from __future__ import annotations

import numpy as np
from sqlalchemy import func, select

from judgecal.db import models as m
from judgecal.db import queries as q
from judgecal.db import style as sq
from judgecal.db import verdicts as vq
from judgecal.db.engine import get_engine, session_scope


def collect_stats(url: str | None = None, *, style: bool = False) -> list[dict]:
    """One dict per task family: items, responses, expert labels (pairwise/pointwise),
    verbosity pairs, ratings and pairwise verdicts as {judge: {status: n}} (the judge's name, or ``name (id N)``
    where several judges share it), and ``judges_told_apart``: {``name (id N)``: what tells that
    judge from the others of its name (:func:`judgecal.db.queries.judge_differences`, e.g.
    ``"mode pairwise"``)} for the family's judges that share a name; ``answer_style``: per
    model, the distribution of its answers' style features (:func:`style_summary`; only with
    ``style``: it reads every answer's row, which the web overview does not need)."""
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
        features = sq.answer_features(s) if style else {}
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
            if style:
                out[-1]["answer_style"] = style_summary({mo: f for (f_id, mo), f in features.items() if f_id == fid})
    engine.dispose()
    return out


def style_summary(by_model: dict[str, dict[str, list[float]]]) -> list[dict]:
    """[{model, answers, features: {feature: {mean, median, n}}}] by model name: each feature's
    mean and median over the model's answers (lengths: ``n_chars``, ``n_words``, ``n_bytes``,
    ``tokens[<tokenizer>]`` where stored; Markdown counts ``md_*``: docs/style.md)."""
    out = []
    for model in sorted(by_model):
        feats = {}
        for name, values in by_model[model].items():
            v = np.asarray(values, dtype=float)
            feats[name] = ({"mean": float(v.mean()), "median": float(np.median(v)), "n": int(v.size)} if v.size
                           else {"mean": None, "median": None, "n": 0})
        out.append({"model": model, "answers": len(by_model[model]["n_chars"]), "features": feats})
    return out
