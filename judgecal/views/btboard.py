"""``judgecal bt``: a Bradley-Terry board from pairwise verdicts.

Per model (one task family, one judge): the Bradley-Terry rating fitted by maximum likelihood
over every model pair the verdicts cover (:mod:`judgecal.calibrate.bt`), on Arena-Hard-Auto's
scale (400 points per factor of 10 in the odds, the baseline at 1000), the win rate against the
baseline derived from it (Arena-Hard-Auto's ``show_result.py``), each with a bootstrap CI over
items, competition ranks, and the counts behind them. Models without a finite rating are set
apart with the reason; verdicts not used are counted by reason."""

from __future__ import annotations

import numpy as np
from sqlalchemy import select

from judgecal.calibrate import bt
from judgecal.calibrate.ranking import WIN_RATE_DECIMALS, shown_ranks
from judgecal.db import battles as bq
from judgecal.db import models as m
from judgecal.db import queries as q
from judgecal.db.browse import judge_ref
from judgecal.db.engine import get_engine, session_scope
from judgecal.errors import ChoiceError, NotFoundError, UsageError

OUTCOMES = ("preference", "verdict")
_WHY = {"above": "won every battle that links it to the baseline's side: no finite rating (+inf)",
        "below": "lost every battle that links it to the baseline's side: no finite rating (-inf)",
        "unlinked": "no verdict links it to the baseline: no rating"}


def pick_scope(s, families: list[str], judge: str | None) -> tuple[m.Judge, int, str, str | None]:
    """(judge row, family id, family name, note) of a board: the judge and family given, or the
    only ones with usable pairwise verdicts (``note`` then names them). Raises UsageError for
    several families, NotFoundError where nothing fits, :class:`~judgecal.errors.ChoiceError`
    (listing each judge and family with its verdict count) where several do."""
    if len(families) > 1:
        raise UsageError("judgecal bt takes one --task-family at a time")
    scopes = bq.verdict_scopes(s)
    if families:
        fid = q.family_id(s, families[0])
        scopes = [x for x in scopes if x[0] == fid]
    if judge:
        jrow = q.judge_by_name(s, judge, {x[1] for x in scopes}, "with pairwise verdicts"
                               + (f" in {families[0]}" if families else ""))
        scopes = [x for x in scopes if x[1] == jrow.id]
    if not scopes:
        where = " and ".join(x for x in ((f"judge {judge!r}" if judge else ""),
                                        (f"task family {families[0]!r}" if families else "")) if x)
        raise NotFoundError("no usable pairwise verdicts (status ok, with a preference)" + (f" for {where}" if where else ""))
    names = dict(s.execute(select(m.TaskFamily.id, m.TaskFamily.name)).all())
    if len(scopes) == 1:
        fid, jid, n = scopes[0]
        jrow = s.get(m.Judge, jid)
        implied = [w for w, given in ((f"judge {jrow.name!r}", judge), (f"task family {names[fid]!r}", families)) if not given]
        note = (" and ".join(implied) + f": the only {'ones' if len(implied) > 1 else 'one'} with pairwise verdicts "
                f"({n} usable)") if implied else None
        return jrow, fid, names[fid], note
    label = q.judge_labels(s)
    jnames = dict(s.execute(select(m.Judge.id, m.Judge.name)).all())
    options = [{"label": f"judge {label[j]} in {names[f]}: {n} verdicts",
                "params": {"judge": judge_ref(label, jnames, j), "family": names[f]}}
               for f, j, n in sorted(scopes, key=lambda x: (names[x[0]], label[x[1]]))]
    raise ChoiceError(f"{len(scopes)} judge/family pairs have pairwise verdicts: "
                      + "; ".join(o["label"] for o in options) + ": choose with --judge and --task-family", options)


def _baseline(data: bq.Battles, baseline: str | None) -> tuple[str, str | None]:
    counts = np.bincount(np.concatenate([data.a, data.b]), minlength=len(data.models))
    by_battles = sorted(data.models, key=lambda n: (-counts[data.models.index(n)], n))
    if baseline is not None:
        if baseline not in data.models:
            raise NotFoundError(f"baseline {baseline!r} has no usable verdict here; models with the most battles: "
                                + ", ".join(by_battles[:10]))
        return baseline, None
    named = [n for n in data.baseline_side if n in data.models]
    if len(named) == 1:
        return named[0], (f"baseline {named[0]!r}: the model the verdicts name as the baseline "
                          f"({data.baseline_side[named[0]]} verdicts)")
    raise UsageError("give --baseline MODEL (the model anchored at 1000 and whose win rate is 50%): "
                     + ("the verdicts name several baselines: " + ", ".join(sorted(named)) if named
                        else "the verdicts name none; models with the most battles: " + ", ".join(by_battles[:10])))


def build_bt_board(families=None, judge: str | None = None, baseline: str | None = None, url: str | None = None, *,
                   outcome: str = "preference", n_bootstrap: int = 1000, seed: int = 0) -> dict:
    """The Bradley-Terry board of one family and judge (JSON-ready).

    ``outcome``: "preference" (the stored soft verdict P(a preferred): a tie 0.5, a judge's
    probability where it gave one) or "verdict" (a = 1, b = 0, tie = 0.5, as Arena-Hard-Auto
    counts hard verdicts). Every usable verdict is one battle of weight 1 (both orders of a pair
    shown are two battles, as Arena-Hard-Auto counts its two games). ``baseline``: anchored at
    1000 (default: the one model the verdicts name as the baseline). Bootstrap: ``n_bootstrap``
    item resamples with ``seed`` (0: no CIs).

    Returns {task_family, judge, baseline, outcome, scale, n_battles, n_items, n_models, n_pairs,
    n_bootstrap, seed, bootstrap: {set_apart, not_converged}, rows: [{rank, model, rating,
    rating_ci, win_rate (%), win_rate_ci, coef, n_battles, n_opponents, n_items, mean_credit}] (a model's
    counts: the battles the fit used), set_apart: [{model, why, n_battles}] (every battle of the model),
    left_out: {reason: n}, notes: [...]}; n_battles, n_items, n_pairs count every usable verdict."""
    if outcome not in OUTCOMES:
        raise UsageError(f"outcome must be one of {', '.join(OUTCOMES)}")
    engine = get_engine(url)
    try:
        with session_scope(engine) as s:
            jrow, fid, fam, note = pick_scope(s, list(families or []), judge)
            data = bq.battles(s, fid, jrow.id)
            judge_label = q.judge_labels(s)[jrow.id]
    finally:
        engine.dispose()
    notes = [note] if note else []
    left = dict(data.left_out)
    y = data.preference if outcome == "preference" else data.verdict_credit
    keep = np.isfinite(y)
    if not keep.all():
        left["verdict without a, b or tie (--outcome verdict)"] = int((~keep).sum())
    if not keep.any():
        raise NotFoundError(f"no usable pairwise verdict of judge {judge_label!r} in {fam}")
    a, b, it, y = data.a[keep], data.b[keep], data.item[keep], y[keep]
    base, bnote = _baseline(data, baseline)
    if bnote:
        notes.append(bnote)
    models = data.models
    anchor = models.index(base)
    design = bt.make_design(a, b, y, np.ones(a.size), it, len(models), len(data.items))
    fit = bt.fit_bt(design, anchor)
    boot = bt.bootstrap_bt(design, anchor, fit, n_bootstrap, seed) if n_bootstrap else None
    if not fit.converged:
        notes.append(f"the fit did not settle in {bt.MAX_ITER} Newton steps: ratings are the last iterate")
    rating = bt.ratings(fit.coef)
    rows, apart = [], []
    n_all = np.bincount(np.concatenate([a, b]), minlength=len(models))
    inside = np.ones(len(models), dtype=bool)
    inside[list(fit.set_apart)] = False
    fitted = inside[a] & inside[b]  # the battles the fit used (per model: its counts below)
    a, b, it, y = a[fitted], b[fitted], it[fitted], y[fitted]
    n_b = np.bincount(np.concatenate([a, b]), minlength=len(models))
    credit = np.bincount(a, weights=y, minlength=len(models)) + np.bincount(b, weights=1 - y, minlength=len(models))
    for i, name in enumerate(models):
        if i in fit.set_apart:
            apart.append({"model": name, "why": _WHY[fit.set_apart[i]], "n_battles": int(n_all[i])})
            continue
        opp = set(b[a == i].tolist()) | set(a[b == i].tolist())
        r_ci = bt.percentile_ci(bt.ratings(boot.coef[:, i])) if boot is not None else None
        rows.append({
            "model": name, "rating": float(rating[i]), "rating_ci": r_ci,
            "win_rate": float(100 * bt.win_rate(rating[i], 1000.0)),
            "win_rate_ci": None if r_ci is None else [float(100 * bt.win_rate(v, 1000.0)) for v in r_ci],
            "coef": float(fit.coef[i]), "n_battles": int(n_b[i]), "n_opponents": len(opp),
            "n_items": int(np.unique(np.concatenate([it[a == i], it[b == i]])).size),
            "mean_credit": float(credit[i] / n_b[i]) if n_b[i] else None,
        })
    rows.sort(key=lambda r: (-r["rating"], r["model"]))
    for r, k in zip(rows, shown_ranks([round(r["win_rate"], WIN_RATE_DECIMALS) for r in rows], WIN_RATE_DECIMALS)):
        r["rank"] = k
    rows = [{"rank": r.pop("rank"), **r} for r in rows]
    if boot is not None and (boot.n_set_apart or boot.n_not_converged):
        notes.append(f"bootstrap: {boot.n_set_apart} of {n_bootstrap} resamples left some model without a finite rating "
                     f"(its CI bound is then infinite), {boot.n_not_converged} did not settle (left out of the CIs)")
    pairs = {(min(x, z), max(x, z)) for x, z in zip(data.a[keep].tolist(), data.b[keep].tolist())}
    return {
        "task_family": fam, "judge": judge_label, "baseline": base, "outcome": outcome,
        "scale": {"scale": bt.SCALE, "base": bt.BASE, "init_rating": bt.INIT_RATING,
                  "source": "Arena-Hard-Auto show_result.py (compute_mle_elo, predict_win_rate)"},
        "n_battles": int(keep.sum()), "n_items": int(np.unique(data.item[keep]).size), "n_models": len(models), "n_pairs": len(pairs),
        "n_bootstrap": int(n_bootstrap), "seed": int(seed),
        "bootstrap": None if boot is None else {"set_apart": boot.n_set_apart, "not_converged": boot.n_not_converged},
        "loglik": fit.loglik, "converged": fit.converged,
        "rows": rows, "set_apart": apart, "left_out": left, "notes": notes,
    }

