"""A judge's page (``judgecal judge NAME``, ``/judge?judge=NAME``): who the judge is, and per task
family where it rated or gave verdicts: its position bias (pairs judged in both orders:
consistency, flip rate, first-position preference, with CIs), its preference for the longer
answer against the experts' by length-ratio bin, its expert agreement ranked among every judge
of the family on the same labelled pairs (paired CIs of the gap to the best), and its stored
calibrations with their advice.

Figures come from the functions the report uses (:func:`judgecal.calibrate.winrate.position_consistency`,
:func:`judgecal.calibrate.position.compare_judges`) and
:func:`judgecal.calibrate.length_bins.longer_preference_by_ratio`; pairs in content order."""

from __future__ import annotations

import numpy as np
from sqlalchemy import func, select

from judgecal.calibrate.length_bins import longer_preference_by_ratio
from judgecal.calibrate.metrics import order_credit
from judgecal.calibrate.position import compare_judges, credits, mode_preferences
from judgecal.calibrate.winrate import position_consistency
from judgecal.db import models as m
from judgecal.db import positions as pq
from judgecal.db import queries as q
from judgecal.db.browse import judge_ref
from judgecal.db.derived import stored
from judgecal.db.engine import get_engine, session_scope


def _nan(x) -> float:
    return float("nan") if x is None else float(x)


def _pref(d: dict | None) -> float:
    if d is None or d["status"] != "ok" or d["preference"] is None:
        return float("nan")
    return float(d["preference"])


def _labelled(s, fid: int, judge: m.Judge, kind: str, verdict_pairs: dict | None = None) -> list[dict]:
    """The family's expert-labelled pairs the judge decided: {"key", "outcome", "credit_a" (the
    judge's credit of answer a: 1, 0.5, 0; NaN without a decision), "ab", "ba" (P(a) per order
    shown; pairwise only), "len_a", "len_b"}, in content order. ``verdict_pairs``: the family's
    :func:`judgecal.db.positions.labelled_verdict_pairs_by_judge`, where the caller read them."""
    out = []
    if kind == "pairwise":
        found = (verdict_pairs.get(judge.id, []) if verdict_pairs is not None
                 else pq.labelled_verdict_pairs(s, fid, judge.id))
        pairs = [p for p in found if p["outcome"] is not None]
        ab = np.array([_pref(p.get("ab")) for p in pairs], dtype=float)
        ba = np.array([_pref(p.get("ba")) for p in pairs], dtype=float)
        na = np.array([_pref(p.get("na")) for p in pairs], dtype=float)
        ab = np.where(~np.isfinite(ab) & ~np.isfinite(ba), na, ab)  # a verdict shown in no order ('na')
        combined = mode_preferences(ab, ba)["combined"] if pairs else ab
        for p, x, y, c in zip(pairs, ab.tolist(), ba.tolist(), combined.tolist()):
            out.append({"key": p["key"], "outcome": p["outcome"], "credit_a": float(c), "ab": x, "ba": y,
                        "len_a": p["len_a"], "len_b": p["len_b"]})
    else:
        for p in pq.labelled_rating_pairs(s, fid, judge.id):
            sa, sb = _nan(p["score_a"]), _nan(p["score_b"])
            credit = float(order_credit([sa], [sb])[0]) if np.isfinite(sa) and np.isfinite(sb) else float("nan")
            out.append({"key": p["key"], "outcome": p["outcome"], "credit_a": credit, "ab": None, "ba": None,
                        "len_a": p["len_a"], "len_b": p["len_b"]})
    return sorted(out, key=lambda p: p["key"])


def _agreement_credit(pairs: list[dict]) -> dict[tuple, float]:
    """{pair key: agreement credit with the experts (1, 0.5, 0; NaN: no decision)}."""
    if not pairs:
        return {}
    c = np.asarray([p["credit_a"] for p in pairs], dtype=float)
    o = np.asarray([p["outcome"] for p in pairs], dtype=float)
    # a credit_a of 1 / 0 / 0.5 is the judge's preference for a: credits() scores it against the outcome
    return dict(zip((p["key"] for p in pairs), credits(o, c)))


@stored("judge_profile")
def judge_profile(judge: str, url: str | None = None, *, n_bootstrap: int = 1000, seed: int = 0) -> dict:
    """The judge page as a dict: {"judge": {id, name, label, ref, model, mode, endpoint,
    prompt_name, prompt_sha256, params, scale, identity (one line)}, "families": [{task_family,
    kind ("pointwise" | "pairwise"), ratings ({status: n}), verdicts ({status: n}), n_labelled
    (expert-labelled pairs the judge decided), agreement (its mean agreement credit over them),
    position (:func:`judgecal.calibrate.winrate.position_consistency` keys; None unless
    pairwise with pairs in both orders), longer_by_ratio
    (:func:`judgecal.calibrate.length_bins.longer_preference_by_ratio`, lengths in characters;
    None without labelled pairs of unequal length), comparison ({"n_pairs", "n_judges", "rows":
    [{judge, ref, kind, agreement, rank, gap_to_best, gap_to_best_ci, this}]}: every judge of
    the family with labelled pairs, on the pairs all of them decided; None without such pairs),
    calibrations ([{id, created_at, length_unit, decision, recommended, reason, identified,
    reasons}], newest first), answer_style (per model of the family, the mean and median of its
    answers' lengths and Markdown counts: :func:`judgecal.views.stats.style_summary`)}]}, by
    family name.

    ``judge``: a name, model or id as ``--judge`` takes it (a shared name resolves to the one
    judge with ratings or verdicts). Raises NotFoundError, ChoiceError."""
    from judgecal.db import style as sq
    from judgecal.db import verdicts as vq
    from judgecal.views.fitting import list_fits
    from judgecal.views.stats import style_summary

    engine = get_engine(url)
    with session_scope(engine) as s:
        jrow = q.judge_by_name(s, judge, lambda: q.judges_with_data(s), "with ratings or verdicts")
        labels = q.judge_labels(s)
        names = dict(s.execute(select(m.Judge.id, m.Judge.name)).all())
        head = {"id": jrow.id, "name": jrow.name, "label": labels[jrow.id], "ref": judge_ref(labels, names, jrow.id),
                "model": jrow.model, "mode": jrow.mode, "endpoint": jrow.endpoint, "prompt_name": jrow.prompt_name,
                "prompt_sha256": jrow.prompt_sha256, "params": jrow.params or {},
                "scale": [jrow.scale_min, jrow.scale_max], "identity": q.describe_judge(jrow)}
        vcounts = vq.verdict_counts(s)
        rcounts = _rating_counts(s, jrow.id)
        fams = sorted(s.execute(select(m.TaskFamily.id, m.TaskFamily.name)).all(), key=lambda t: t[1])
        families = []
        for fid, fname in fams:
            judges = pq.judges_in_family(s, fid)
            kinds = {j.id: kind for j, kind in judges}
            if jrow.id not in kinds:
                continue
            mine = _labelled(s, fid, jrow, kinds[jrow.id])
            entry = {"task_family": fname, "kind": kinds[jrow.id], "ratings": rcounts.get(fid, {}),
                     "verdicts": (vcounts.get(fid) or {}).get(labels[jrow.id], {}),
                     "n_labelled": sum(1 for p in mine if np.isfinite(p["credit_a"]))}
            cred = _agreement_credit(mine)
            decided = [v for v in cred.values() if np.isfinite(v)]
            entry["agreement"] = float(np.mean(decided)) if decided else None
            both = [p for p in mine if p["ab"] is not None and np.isfinite(p["ab"]) and np.isfinite(p["ba"] or np.nan)]
            entry["position"] = (position_consistency([p["ab"] for p in both], [p["ba"] for p in both], n_bootstrap, seed)
                                 if kinds[jrow.id] == "pairwise" and both else None)
            lb = longer_preference_by_ratio([p["credit_a"] for p in mine], [p["outcome"] for p in mine],
                                            [p["len_a"] for p in mine], [p["len_b"] for p in mine],
                                            n_bootstrap=n_bootstrap, seed=seed + 3) if mine else None
            entry["longer_by_ratio"] = lb if lb and lb["n"] else None
            entry["comparison"] = _comparison(s, fid, judges, jrow.id, labels, names, cred, n_bootstrap, seed + 7)
            entry["answer_style"] = style_summary({mo: f for (_, mo), f in sq.answer_features(s, fid).items()})
            families.append(entry)
    engine.dispose()
    for entry in families:
        fits = list_fits(entry["task_family"], f"id:{jrow.id}", url)
        entry["calibrations"] = [
            {"id": f["id"], "created_at": f["created_at"], "length_unit": f["length_unit"],
             "decision": (f.get("selection") or {}).get("decision"),
             "recommended": (f.get("selection") or {}).get("recommended"),
             "reason": (f.get("selection") or {}).get("reason"),
             "identified": (f.get("identification") or {}).get("identified") if f.get("identification") else None,
             "reasons": (f.get("identification") or {}).get("reasons") or []}
            for f in sorted(fits, key=lambda f: -f["id"])]
    return {"judge": head, "families": families}


def _rating_counts(s, judge_id: int) -> dict[int, dict[str, int]]:
    """{family id: {status: n}} of the judge's ratings."""
    R = m.Rating
    stmt = (select(m.Item.task_family_id, R.status, func.count()).select_from(R)
            .join(m.Response, m.Response.id == R.response_id).join(m.Item, m.Item.id == m.Response.item_id)
            .where(R.judge_id == judge_id).group_by(m.Item.task_family_id, R.status))
    out: dict[int, dict[str, int]] = {}
    for fid, status, n in s.execute(stmt):
        out.setdefault(fid, {})[status] = n
    return out


def _comparison(s, fid: int, judges, this_id: int, labels, names, mine: dict, n_bootstrap: int, seed: int) -> dict | None:
    """Every judge of the family ranked by expert agreement on the labelled pairs all of them
    decided (:func:`judgecal.calibrate.position.compare_judges`); None when this judge has none."""
    if not mine:
        return None
    credit_by: dict[str, dict] = {}
    kind_of, ref_of = {}, {}
    verdict_pairs = pq.labelled_verdict_pairs_by_judge(s, fid, [j.id for j, kind in judges if kind == "pairwise"])
    for j, kind in judges:
        c = mine if j.id == this_id else _agreement_credit(_labelled(s, fid, j, kind, verdict_pairs))
        c = {k: v for k, v in c.items() if np.isfinite(v)}
        if c:
            credit_by[labels[j.id]] = c
            kind_of[labels[j.id]], ref_of[labels[j.id]] = kind, judge_ref(labels, names, j.id)
    if labels[this_id] not in credit_by:
        return None
    common = sorted(set.intersection(*(set(c) for c in credit_by.values())))
    if not common:
        return {"n_pairs": 0, "n_judges": len(credit_by), "rows": []}
    cmp_ = compare_judges({name: np.array([c[k] for k in common]) for name, c in credit_by.items()}, n_bootstrap, seed)
    rows = [{"judge": name, "ref": ref_of[name], "kind": kind_of[name], **row, "this": name == labels[this_id]}
            for name, row in cmp_["rows"].items()]
    return {"n_pairs": cmp_["n_pairs"], "n_judges": len(credit_by), "best": cmp_["best"], "rows": rows}

