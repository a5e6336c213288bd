"""Style control against length-only control out of sample, per pairwise judge and task family
with expert labels (issue 34 item 5; :mod:`judgecal.calibrate.style_oos`, docs/style.md "Out of
sample"). Reads the verdicts and the answers' stored style features; the maths is the
calibrate module's."""

from __future__ import annotations

import numpy as np

from judgecal.calibrate import stylecontrol as sc
from judgecal.calibrate.style_oos import style_oos
from judgecal.db import battles as bq
from judgecal.db import models as m
from judgecal.db import positions as pq
from judgecal.db import queries as q
from judgecal.db import verdicts as vq
from judgecal.db.engine import get_engine, session_scope
from judgecal.errors import NotFoundError

LENGTH_UNITS = ("words", "chars", "bytes")
ORDERS = ("ab", "ba", "na")


def battles_of(pairs: list[dict], feats: dict) -> tuple[np.ndarray, np.ndarray, list[str], dict]:
    """(credit of the expert's answer (n,), raw style differences expert's answer minus the other
    (n, 4), item keys (n,), counts) of the usable verdicts (status ok, with a preference; every
    order shown is one battle) on pairs whose expert label is a or b. ``pairs``: rows of
    :func:`judgecal.db.positions.labelled_verdict_pairs`; ``feats``: {response id: (length,
    headers, list items, bold)} (:func:`judgecal.db.battles.answer_style`). counts: {"pairs",
    "expert_ties", "unlabelled", "unusable_verdicts"}."""
    y, fe, fo, items = [], [], [], []
    counts = {"pairs": 0, "expert_ties": 0, "unlabelled": 0, "unusable_verdicts": 0}
    for p in pairs:
        if p["gold"] is None:
            counts["unlabelled"] += 1
            continue
        if p["gold"] == "tie":
            counts["expert_ties"] += 1
            continue
        counts["pairs"] += 1
        exp, oth = (p["resp_a"], p["resp_b"]) if p["gold"] == "a" else (p["resp_b"], p["resp_a"])
        for o in ORDERS:
            d = p.get(o)
            if d is None:
                continue
            if d["status"] != "ok" or d["preference"] is None:
                counts["unusable_verdicts"] += 1
                continue
            pa = float(d["preference"])
            y.append(pa if p["gold"] == "a" else 1.0 - pa)
            fe.append(feats[exp])
            fo.append(feats[oth])
            items.append(p["key"][0])
    fe_a = np.array(fe, dtype=float).reshape(-1, 4)
    fo_a = np.array(fo, dtype=float).reshape(-1, 4)
    raw = sc.raw_features(fe_a[:, 0], fo_a[:, 0], fe_a[:, 1:], fo_a[:, 1:])
    return np.array(y, dtype=float), raw, items, counts


def style_oos_entries(families=None, judges=None, url: str | None = None, *, length_unit: str = "words", folds: int = 5,
                      seed: int = 0, n_bootstrap: int = 200) -> list[dict]:
    """One dict per (task family, pairwise judge) with expert-labelled verdicts, families and
    judges by name (``families``/``judges``: only these names; None: all): {task_family, judge,
    length_unit, counts (:func:`battles_of`), answers: {n (distinct answers of the judged pairs),
    headers, lists, bold (how many of them have at least one)},
    **:func:`judgecal.calibrate.style_oos.style_oos`}.
    Lengths in ``length_unit`` ("words", "chars", "bytes": stored on every answer). Raises
    NotFoundError when nothing matches."""
    if length_unit not in LENGTH_UNITS:
        raise ValueError(f"length unit must be one of {', '.join(LENGTH_UNITS)}")
    engine = get_engine(url)
    out = []
    try:
        with session_scope(engine) as s:
            labels = q.judge_labels(s)
            fams = sorted(s.execute(m.TaskFamily.__table__.select()).mappings(), key=lambda r: r["name"])
            judge_rows = sorted(vq.judges_with_verdicts(s), key=lambda j: (labels[j.id], j.id))
            for fam in fams:
                if families is not None and fam["name"] not in families:
                    continue
                for j in judge_rows:
                    if judges is not None and labels[j.id] not in judges:
                        continue
                    pairs = pq.labelled_verdict_pairs(s, fam["id"], j.id)
                    if not any(p["gold"] is not None for p in pairs):
                        continue
                    ids = sorted({p[k] for p in pairs for k in ("resp_a", "resp_b")})
                    feats = bq.answer_style(s, ids, length_unit, None)
                    y, raw, items, counts = battles_of(pairs, feats)
                    have = np.array([feats[i][1:] for i in ids], dtype=float).reshape(-1, 3) > 0
                    entry = {"task_family": fam["name"], "judge": labels[j.id], "length_unit": length_unit,
                             "counts": counts, "answers": {"n": len(ids), **{
                                 k: int(have[:, c].sum()) for c, k in enumerate(("headers", "lists", "bold"))}}}
                    entry.update(style_oos(y, raw, items, folds=folds, seed=seed, n_bootstrap=n_bootstrap)
                                 if y.size else {"n_battles": 0})
                    out.append(entry)
    finally:
        engine.dispose()
    return _found(out, "no pairwise verdicts on expert-labelled pairs", "for", judges, families)


def _found(out: list[dict], nothing: str, by: str, judges, families) -> list[dict]:
    """``out``, or NotFoundError ``nothing`` naming the judges and families asked for."""
    if not out:
        raise NotFoundError(nothing + (f" {by} judges {', '.join(judges)}" if judges else "")
                            + (f" in {', '.join(families)}" if families else ""))
    return out


def pointwise_style_entries(families=None, judges=None, url: str | None = None, *, length_unit: str = "tokens",
                            tokenizer: str = "smollm2", folds: int = 5, seed: int = 0,
                            n_bootstrap: int = 200) -> list[dict]:
    """One dict per (task family, pointwise judge) with ratings on expert-labelled pairs, by name
    (``families``/``judges``: only these names; None: all): {task_family, judge, length_unit,
    **:func:`judgecal.calibrate.lc_style_oos.style_over_length`} on the pairs whose two answers
    the judge rated (the pairs a fit uses), lengths in ``length_unit`` (token lengths missing
    under ``tokenizer`` are computed and stored first, as ``judgecal fit`` does). The judge's
    scale bounds the fits; L_ref is the median length. Raises NotFoundError when nothing
    matches."""
    from sqlalchemy import select

    from judgecal.calibrate.baselines import FitContext
    from judgecal.calibrate.fit import default_l_ref
    from judgecal.calibrate.lc_style_oos import style_over_length
    from judgecal.tokens import canonical_name
    from judgecal.views.fitinputs import load_inputs

    if length_unit not in ("tokens",) + LENGTH_UNITS:
        raise ValueError(f"length unit must be one of tokens, {', '.join(LENGTH_UNITS)}")
    tok = canonical_name(tokenizer) if length_unit == "tokens" else None
    engine = get_engine(url)
    out = []
    try:
        with session_scope(engine) as s:
            labels = q.judge_labels(s)
            fams = sorted(s.execute(select(m.TaskFamily.id, m.TaskFamily.name)).all(), key=lambda r: r[1])
            scopes = []
            for fid, fname in fams:
                if families is not None and fname not in families:
                    continue
                if not s.scalar(select(m.ExpertLabel.id).join(m.Response, m.Response.id == m.ExpertLabel.response_a_id)
                                .join(m.Item, m.Item.id == m.Response.item_id)
                                .where(m.Item.task_family_id == fid, m.ExpertLabel.kind == "pairwise").limit(1)):
                    continue
                rated = s.scalars(select(m.Rating.judge_id).distinct()
                                  .join(m.Response, m.Response.id == m.Rating.response_id)
                                  .join(m.Item, m.Item.id == m.Response.item_id).where(m.Item.task_family_id == fid))
                for jrow in sorted((s.get(m.Judge, jid) for jid in rated), key=lambda j: (labels[j.id], j.id)):
                    if judges is None or labels[jrow.id] in judges:
                        scopes.append((fid, fname, jrow.id, labels[jrow.id], (jrow.scale_min, jrow.scale_max)))
        for fid, fname, jid, label, scale in scopes:
            _, pair, _, _, _ = load_inputs(engine, fid, jid, length_unit=length_unit, tokenizer=tok, density=False,
                                            verbosity_family_id=None, url=url)
            if pair is None:
                continue
            ctx = FitContext(l_ref=default_l_ref(pair.len_a, pair.len_b), scale=scale)
            out.append({"task_family": fname, "judge": label, "length_unit": length_unit,
                        **style_over_length(pair, ctx, folds=folds, seed=seed, n_bootstrap=n_bootstrap)})
    finally:
        engine.dispose()
    return _found(out, "no pointwise ratings of expert-labelled pairs", "by", judges, families)
