"""Is a fitted polylog calibration identified by the data? Pure numpy; no I/O.

A fit can report "converged" and still be decided by its constraints or by one item rather than
by the labels. Such a calibration must not be published, badged or passed by ``check``. The
polylog fit (the seed formula, gamma >= 0 unless signed) is **not identified** when any of:

* ``bound``: gamma sits at its upper bound G (``--gamma-max``, else 10 x the scale width): the
  data ask for a stronger penalty than allowed, the value is the bound's, not the data's;
* ``ci``: gamma's bootstrap 95% CI covers more than :data:`MAX_CI_SHARE` of its effective
  range [0, min(G, G_sat)] (signed: symmetric), where G_sat = width / median over the labelled
  answers of |ln(L / L_ref)|^p is the gamma at which half the answers move by a whole scale
  width (beyond it the calibration is a sort by length): the labels do not pin gamma down;
* ``influence``: the optimum moves when one item is left out (jackknife over items, at most
  :data:`MAX_JACKKNIFE_ITEMS` items, each refit started from the full-data optimum): some item's
  removal moves gamma by more than ``max(INFLUENCE_REL * |gamma|, INFLUENCE_ABS * width / max_i
  |ln(L_i / L_ref)|^p)`` (half the estimate, and at least a shift that moves the most extreme
  answer's penalty by 5% of the scale width);
* ``separated`` (pairs): the calibrated scores separate the expert labels perfectly (mean
  Bradley-Terry loss below :data:`SEPARATED_LOSS`, or its scale at its bound): a whole range of
  gamma fits equally, the optimiser stops wherever it started, and bootstrap refits that start
  from the optimum never move (zero-width intervals);
* ``degenerate CI``: gamma's bootstrap CI has no width (:data:`DEGENERATE_CI`): the refits never
  moved, so the interval claims a precision the data do not give;
* ``clipped``: the calibration puts more than :data:`MAX_CLIPPED_SHARE` more of the labelled
  scores at the ends of the judge's scale than the raw judge does (clipped scores are ties);
* ``optima``: the multi-start of the full-data fit (the fixed grid of starts) ended in several
  optima at different (gamma, p) whose losses lie within
  :data:`judgecal.calibrate.fit.OPTIMA_TOL` of each other: the labels do not decide between them.

* ``constant``: the judge gave every labelled answer the same score: it tells nothing apart,
  whatever gamma the fit reached (at a bound or not), so nothing of it is identified.

A fit with gamma = 0 (at its lower bound, unsigned) is the raw judge: identified (nothing is
applied), said as such, unless the judge is constant (above). p at a bound of its range is a caveat (the seed's stated range of p, default [1.0, 1.5],
is a modelling choice; p is then set by its bound), listed but not a failure: the decision
rests on gamma. Source of the rules: issue 18 ("Advice a team can publish on"), docs/calibration.md.

:func:`winrate_identification` applies the same idea to the win-rate penalty fit of the
calibrated win rate (ties, no length difference, no within-model variation, bound, a Wald CI over
most of gamma's range; issue 23 "no numbers from noise", docs/calibration.md#win-rate-calibration-identification).
"""

from __future__ import annotations

import numpy as np

from judgecal.calibrate.data import PairData
from judgecal.calibrate.penalty import LENGTH_FLOOR
from judgecal.calibrate.winrate_penalty import GAMMA_MAX

#: A gamma CI wider than this share of its allowed range is "not identified".
MAX_CI_SHARE = 0.5
#: More than this share of labelled scores newly clipped to the scale's ends: "not identified".
MAX_CLIPPED_SHARE = 0.25
#: Leave-one-item-out shift of gamma beyond max(INFLUENCE_REL * |gamma|, INFLUENCE_ABS * width / max feature):
#: half the estimate, and at least a shift that moves the most extreme answer's penalty by 5% of the scale width.
INFLUENCE_REL = 0.5
INFLUENCE_ABS = 0.05
#: A pairwise fit whose mean Bradley-Terry loss is below this (nats per pair) separates the labels.
SEPARATED_LOSS = 1e-4
#: A gamma CI narrower than this times max(|gamma|, 1) means the refits never moved.
DEGENERATE_CI = 1e-6
#: Above this many items the jackknife is skipped (one item then weighs under 0.2%), said so.
MAX_JACKKNIFE_ITEMS = 500


def _responses(data):
    if isinstance(data, PairData):
        return (np.concatenate([data.score_a, data.score_b]), np.concatenate([data.len_a, data.len_b]),
                None if data.density_a is None else np.concatenate([data.density_a, data.density_b]))
    return data.score, data.length, data.density


def clipped_share(fitted, data, scale) -> float | None:
    """Share of the labelled scores at the ends of ``scale`` after calibration minus the share
    there before (raw); None for an unbounded scale. Shape-free: pairs count both answers."""
    lo, hi = (float(v) for v in scale)
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return None
    s, le, d = _responses(data)
    c = fitted.calibrate(s, le, d)
    return float(np.mean((c <= lo) | (c >= hi)) - np.mean((s <= lo) | (s >= hi)))


def identification(poly, data, ctx, *, method, gamma_ci, codes, n_items: int, item_ids, width: float) -> dict:
    """Identification of the full-data polylog fit ``poly`` (module doc).

    Args:
        poly: the fitted polylog (:class:`judgecal.calibrate.baselines.Fitted` with ``.fit``).
        data: the labelled PairData / PointData it was fitted on. ctx: its FitContext.
        method: the PolyLog method object (for the jackknife refits, ``fit_batch``).
        gamma_ci: gamma's bootstrap [2.5, 97.5] percentiles or None.
        codes, n_items, item_ids: each row's item code (0..n_items-1) and the item keys.
        width: the judge scale's width (score units).
    Returns:
        {"identified": bool, "reasons": [one line each], "caveats": [...], "constant_judge": True
        (only when the judge gave every labelled answer one score), "gamma": value,
        "gamma_bound": G, "gamma_ci_share": share or None, "influence": {"max_shift", "item",
        "gamma_without", "threshold"} or None (with "skipped" giving why), "clipped_share": share
        or None, "gamma_saturation": G_sat, "rules": {constant: value}}.
    """
    res = poly.fit
    g = float(res.gamma)
    g_hi = float(ctx.gamma_max) if ctx.gamma_max is not None else 10.0 * width
    g_lo = -g_hi if ctx.signed else 0.0
    out = {"identified": True, "reasons": [], "caveats": [], "gamma": g, "gamma_bound": g_hi,
           "gamma_ci_share": None, "influence": None, "clipped_share": None,
           "rules": {"max_ci_share": MAX_CI_SHARE, "max_clipped_share": MAX_CLIPPED_SHARE,
                     "influence_rel": INFLUENCE_REL, "influence_abs": INFLUENCE_ABS}}
    at = res.at_bound or {}
    scores = _responses(data)[0]
    scores = scores[np.isfinite(scores)]
    if scores.size and float(np.ptp(scores)) == 0.0:  # before the gamma = 0 rule: a constant raw judge is no judge
        out["reasons"].append(f"the judge gave every labelled answer the same score ({float(scores[0]):g}): a constant "
                              f"judge tells no answer from another, so no calibration of it is identified (whatever it "
                              f"ranks, length alone ranks)")
        out["identified"] = False
        out["constant_judge"] = True
        return out
    if not ctx.signed and at.get("gamma") == "lower":
        out["caveats"].append("gamma = 0: no length penalty fits the labels better; the calibration is the raw judge")
        return out
    if res.bt_scale is not None and (res.loss < SEPARATED_LOSS or at.get("bt_scale") == "upper"):
        out["reasons"].append(f"the calibrated scores separate the expert labels perfectly (loss {res.loss:.2g} nats per "
                              f"pair{', Bradley-Terry scale at its bound' if at.get('bt_scale') == 'upper' else ''}): "
                              f"a range of gamma fits them equally, the optimum and its intervals are not determined")
    if gamma_ci is not None and float(gamma_ci[1]) - float(gamma_ci[0]) <= DEGENERATE_CI * max(abs(g), 1.0):
        out["reasons"].append(f"gamma's bootstrap 95% CI [{gamma_ci[0]:.6g}, {gamma_ci[1]:.6g}] has no width: the refits "
                              f"never moved from the full-data optimum (a flat or separated objective), so it says nothing")
    if at.get("gamma") is not None:
        out["reasons"].append(f"gamma {g:.4g} sits at its {at['gamma']} bound {g_hi if at['gamma'] == 'upper' else g_lo:g}: "
                              f"the bound, not the labels, sets it")
    if at.get("p") is not None:
        out["caveats"].append(f"p {res.p:.4g} sits at its {at['p']} bound: p is set by its range, not by the labels")
    others = list(getattr(res, "other_optima", None) or [])
    out["other_optima"] = others
    if others:  # the multi-start ended in several optima that fit the labels equally
        o = others[0]
        out["reasons"].append(f"{len(others) + 1} optima fit the labels equally (losses within 1e-4): gamma {g:.4g}, "
                              f"p {res.p:.3g} and gamma {o['gamma']:.4g}, p {o['p']:.3g}"
                              + (f" and {len(others) - 1} more" if len(others) > 1 else "")
                              + ": the labels do not decide between them")
    _, lengths, _ = _responses(data)
    feat = np.abs(np.log(np.maximum(lengths, LENGTH_FLOOR) / float(ctx.l_ref))) ** float(res.p)
    feat = feat[feat > 0]
    g_sat = float(width / np.median(feat)) if feat.size else g_hi
    g_top = min(g_hi, g_sat)  # beyond g_sat half the answers move a whole scale width: a length sort
    g_bot = -g_top if ctx.signed else 0.0
    out["gamma_saturation"] = g_sat
    if gamma_ci is not None and g_top > g_bot:
        lo_ci, hi_ci = max(float(gamma_ci[0]), g_bot), min(float(gamma_ci[1]), g_top)
        share = max(hi_ci - lo_ci, 0.0) / (g_top - g_bot)
        out["gamma_ci_share"] = share
        if share > MAX_CI_SHARE:
            out["reasons"].append(f"gamma's 95% CI [{gamma_ci[0]:.3g}, {gamma_ci[1]:.3g}] covers {share:.0%} of its "
                                  f"effective range [{g_bot:.3g}, {g_top:.3g}] (limit {MAX_CI_SHARE:.0%})")
    share = clipped_share(poly, data, ctx.scale)
    out["clipped_share"] = share
    if share is not None and share > MAX_CLIPPED_SHARE:
        out["reasons"].append(f"the calibration clips {share:.0%} more of the labelled scores to the ends of the scale "
                              f"(limit {MAX_CLIPPED_SHARE:.0%})")
    thr = max(INFLUENCE_REL * abs(g), INFLUENCE_ABS * width / float(feat.max()) if feat.size else 0.0)
    if n_items > MAX_JACKKNIFE_ITEMS:
        out["influence"] = {"skipped": f"{n_items} items: one item weighs too little to move the optimum"}
    elif n_items >= 3:
        W = np.ones((n_items, data.n))
        W[codes, np.arange(data.n)] = 0.0  # row i leaves out item i
        fits = method.fit_batch(data, ctx, W, start=poly)
        shifts = np.array([abs(f.fit.gamma - g) if f is not None else np.inf for f in fits])
        i = int(np.argmax(shifts))
        keys = np.unique(np.asarray(item_ids).astype(str))
        keys = np.array([k[:12] if len(k) == 64 else k for k in keys])  # a SHA-256 content key: its prefix
        out["influence"] = {"max_shift": float(shifts[i]) if np.isfinite(shifts[i]) else None, "item": str(keys[i]),
                            "gamma_without": None if fits[i] is None else float(fits[i].fit.gamma), "threshold": thr}
        if shifts[i] > thr:
            without = "the refit fails" if fits[i] is None else f"gamma moves from {g:.4g} to {fits[i].fit.gamma:.4g}"
            out["reasons"].append(f"one item decides the optimum: without item {keys[i]}, {without} "
                                  f"(more than {thr:.3g})")
    out["identified"] = not out["reasons"]
    return out


def flag(ident: dict | None) -> dict | None:
    """The ``not_identified`` flag ({"code", "message"}) of an identification, or None."""
    if not ident or ident.get("identified", True):
        return None
    return {"code": "not_identified",
            "message": "calibration not identified: " + "; ".join(ident.get("reasons") or [])}


#: A win-rate penalty fit with fewer decisive (non-tie) verdicts than this is "not identified".
MIN_DECISIVE = 20
#: The logit a length term must reach on the median answer for the calibration to be a sort by
#: length: logit(0.99), a 50% verdict moved to 99% by length alone (the effective range of gamma).
WINRATE_SATURATION_LOGIT = float(np.log(99.0))


def winrate_identification(fit, *, signed: bool = False, gamma_max: float | None = None) -> dict:
    """Identification of the win-rate penalty fit (:func:`judgecal.calibrate.winrate_penalty.fit_penalty`,
    the length term of the calibrated win rate), from its ``evidence``
    (:func:`judgecal.calibrate.winrate_penalty.gamma_evidence`, p held at its fitted value).

    Not identified (the calibrated column of that fit is not shown) when any of:

    * ``ties``: every verdict of the fit is a tie, or fewer than :data:`MIN_DECISIVE` are
      decisive: the judge's length preference cannot be estimated from them;
    * ``no length``: every answer has the baseline's length (the penalty is 0 everywhere);
    * ``no variation``: the penalty varies within no model beyond what the model's own strength
      and difficulty slope absorb (e.g. every answer longer than the baseline's by the same
      ratio): gamma and the models' strengths cannot be told apart (profile information 0);
    * ``bound``: gamma sits at its upper bound (signed: either bound);
    * ``ci``: gamma's 95% Wald CI (+-1.96 / sqrt(information)) covers more than
      :data:`MAX_CI_SHARE` of its effective range [0, min(G, G_sat)] (signed: symmetric), where
      G is the bound and G_sat = :data:`WINRATE_SATURATION_LOGIT` / median |penalty| (beyond it
      the median answer's length term alone moves a 50% verdict to 99%);
    * ``converged``: the optimiser did not converge.

    gamma = 0 at its lower bound (unsigned) with decisive verdicts is the raw judge: identified,
    with a caveat; p at a bound of its range is a caveat (p is then set by its range), as in
    :func:`identification`.

    Args: fit: a PenaltyFit (None: nothing fitted: identified, nothing to say); signed: gamma
    may be negative; gamma_max: its bound (default
    :data:`judgecal.calibrate.winrate_penalty.GAMMA_MAX`).
    Returns: {"identified", "reasons": [one line each], "caveats": [...], "gamma", "gamma_bound",
    "gamma_se", "gamma_ci" ([low, high] Wald, or None), "gamma_ci_share", "evidence", "rules"}."""
    g_hi = float(gamma_max if gamma_max is not None else GAMMA_MAX)
    g_lo = -g_hi if signed else 0.0
    out = {"identified": True, "reasons": [], "caveats": [], "gamma": None, "gamma_bound": g_hi, "gamma_se": None,
           "gamma_ci": None, "gamma_ci_share": None, "evidence": None,
           "rules": {"min_decisive": MIN_DECISIVE, "max_ci_share": MAX_CI_SHARE,
                     "saturation_logit": WINRATE_SATURATION_LOGIT}}
    if fit is None or fit.evidence is None:
        return out
    ev = fit.evidence
    g = float(fit.gamma)
    out.update(gamma=g, evidence=ev)
    se = float(ev["gamma_se"])
    out["gamma_se"] = se if np.isfinite(se) else None
    n, k = ev["n"], ev["n_decisive"]
    why = out["reasons"]
    if k == 0:
        why.append(f"all {n} verdicts of the fit are ties: the judge never preferred a side, so its length "
                   f"preference cannot be estimated")
    elif k < MIN_DECISIVE:
        why.append(f"only {k} of the fit's {n} verdicts are decisive (not ties), fewer than {MIN_DECISIVE}: too few "
                   f"to estimate the judge's length preference")
    if n and ev["n_with_length"] == 0:
        why.append("every answer has the baseline's length: there is no length difference to estimate a length "
                   "preference from")
    elif n and ev["information_share"] == 0:
        why.append("the length penalty does not vary within any model beyond a constant (e.g. every answer longer "
                   "than the baseline's by the same ratio): gamma cannot be told apart from the models' strengths")
    at = fit.at_bound or {}
    if at.get("gamma"):
        side = "lower" if signed and abs(g - g_lo) < abs(g - g_hi) else "upper"
        why.append(f"gamma {g:.4g} sits at its {side} bound {g_lo if side == 'lower' else g_hi:g}: the bound, not the "
                   f"verdicts, sets it")
    if at.get("p"):
        out["caveats"].append(f"p {fit.p:.4g} sits at a bound of its range: p is set by its range, not by the verdicts")
    if not fit.converged:
        why.append("the optimiser did not converge")
    if not why and not signed and g <= 1e-9:
        out["caveats"].append("gamma = 0: no length penalty fits the verdicts better; the calibration is the raw judge")
        return out
    g_sat = WINRATE_SATURATION_LOGIT / ev["median_abs_penalty"] if ev["median_abs_penalty"] > 0 else g_hi
    g_top = min(g_hi, g_sat)
    g_bot = -g_top if signed else 0.0
    if np.isfinite(se):
        out["gamma_ci"] = [g - 1.96 * se, g + 1.96 * se]
    lo_ci, hi_ci = (max(out["gamma_ci"][0], g_bot), min(out["gamma_ci"][1], g_top)) if out["gamma_ci"] else (g_bot, g_top)
    share = max(hi_ci - lo_ci, 0.0) / (g_top - g_bot) if g_top > g_bot else 1.0
    out["gamma_ci_share"] = share
    if share > MAX_CI_SHARE and not why:  # (a reason above already says why the verdicts cannot pin it)
        ci = (f"[{out['gamma_ci'][0]:.3g}, {out['gamma_ci'][1]:.3g}]" if out["gamma_ci"] else "(unbounded: no information)")
        why.append(f"gamma's 95% Wald CI {ci} covers {share:.0%} of its effective range [{g_bot:.3g}, {g_top:.3g}] "
                   f"(limit {MAX_CI_SHARE:.0%}): the verdicts do not pin the length preference down")
    out["identified"] = not why
    return out
