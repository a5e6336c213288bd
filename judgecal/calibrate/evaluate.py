"""Evaluation of every calibration method on one task family and judge (the `fit`/`report` core).

``evaluate_pairwise(data: PairData, ...)`` and ``evaluate_pointwise(data: PointData, ...)`` fit
every method of :mod:`judgecal.calibrate.baselines` on all the labelled data (in-sample), in
K-fold cross-validation grouped by item (the folds are built once from ``seed`` and shared by
every method), and on ``n_bootstrap`` bootstrap resamples of the items (seeded; each refit
starts from the full-data optimum only). docs/calibration.md gives every formula and procedure. ``evaluate_verbosity_only(verbosity, ...)`` is the
no-label case. Every function returns a plain JSON-serialisable dict (NaN becomes None):

``kind``              "pairwise" | "pointwise" | "verbosity_only"
``fitted``            True, or False when no fit was possible (then ``no_fit_reason`` says why)
``no_fit_reason``     None or a one-line reason
``n``, ``n_items``, ``n_verbosity``  labelled pairs (pointwise: responses), distinct items,
                      concise/verbose pairs
``l_ref``, ``scale``, ``p_bounds``, ``folds`` (used), ``n_bootstrap``, ``seed``, ``density``
``params``            None, or {gamma, p, l_ref, bt_scale, loss, n, converged, at_bound, message,
                      gamma_ci, p_ci, bt_scale_ci, n_bootstrap_ok} (CIs: [2.5, 97.5] percentiles
                      or None with ``n_bootstrap`` = 0)
``methods``           {name: {...}}; pairwise keys: agreement, agreement_cv, agreement_ci,
                      agreement_cv_ci, agreement_cv_gain and agreement_cv_gain_ci (not raw:
                      out-of-fold agreement minus raw's, paired bootstrap over items),
                      verbosity_win_rate, verbosity_win_rate_ci,
                      length_preference, length_preference_ci, slope, slope_ci,
                      verbosity_slope, n_bootstrap, params. Pointwise keys: spearman,
                      spearman_cv, spearman_ci, kendall, kendall_cv, mae, mae_cv, mae_ci,
                      verbosity_win_rate, verbosity_win_rate_ci, slope, slope_ci,
                      verbosity_slope, n_bootstrap, params. (n_bootstrap: refits that
                      entered the CIs; LOWESS is refitted on at most 200 resamples.) A figure that does not apply (lc_glm has no
                      per-response score, so no slope) or failed is None.
``signed``, ``gamma_max``   the sign option and |gamma| bound of linear and polylog
``lean``              {measure, value, ci, direction ("longer" | "shorter" | "none" |
                      "undetermined"), gamma, signed}: which way the raw judge leans on length
``comparison``        {best_method, best_agreement_cv | best_spearman_cv, published,
                      published_agreement_cv, gap, gap_ci, ...}: the method that wins out of
                      sample and the paired gap from polylog to it
``length_rule``       pairwise: "prefer the shorter answer" {agreement, agreement_ci,
                      polylog_minus_rule, polylog_minus_rule_ci}; pointwise None
``selection``         nested cross-validated recommendation (:mod:`.select`): a method, or
                      "keep raw" with the reason, or None
``identification``    is the polylog fit identified (:mod:`.identify`): {identified, reasons,
                      caveats, gamma_ci_share, influence, clipped_share, ...}
``flags``             [{code, message}]: "not_identified" (and the answer guards' codes)
``judge_ties``        pairwise: labelled pairs the raw judge tied (per method:
                      gain_from_ties_cv, gain_from_decisive_cv, raw_ties_broken_cv)
``expert_length_preference``  pairwise only: share of pairs the experts decide for the longer
``raw_slope``         slope of the raw scores on ln L (labelled responses)
``warnings``          list of one-line strings
``points``            {"labelled": {item_id, side, length, score_raw, score_calibrated},
                       "verbosity": {side, length, score_raw, score_calibrated} or None}
                      score_calibrated is the polylog (seed formula) calibration.
"""

from __future__ import annotations

import math

import numpy as np

from judgecal.calibrate.baselines import (
    PAIRWISE_METHODS,
    POINTWISE_METHODS,
    FitContext,
    Fitted,
)
from judgecal.calibrate.data import PairData, PointData, VerbosityData
from judgecal.calibrate.fit import MIN_LABELS, default_l_ref, map_expert_scale
from judgecal.calibrate.identify import flag as identify_flag
from judgecal.calibrate.identify import identification
from judgecal.calibrate import metrics as M
from judgecal.calibrate.penalty import LENGTH_FLOOR
from judgecal.calibrate.resample import (
    item_codes,
    make_folds,
    pair_metrics_batch,
    percentile_ci,
    resample_counts,
    weighted_means,
    weighted_slopes,
)
from judgecal.errors import FitError, UsageError

AGREEMENT_GAP_WARN = 0.10
#: LOWESS (statsmodels, ~7 ms a fit on 200 responses) is refitted on at most this many of the
#: bootstrap resamples (the first ones); its CIs say so through methods.lowess.n_bootstrap.
LOWESS_BOOTSTRAP_MAX = 200
FEW_LABELS_WARN = 50


# ----------------------------------------------------------------------------- helpers
def _clean(x):
    """Recursively turn numpy scalars/arrays into JSON values; NaN/inf become None."""
    if isinstance(x, dict):
        return {str(k): _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    if isinstance(x, np.ndarray):
        return [_clean(v) for v in x.tolist()]
    if isinstance(x, (np.bool_, bool)):
        return bool(x)
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (float, np.floating)):
        x = float(x)
        return x if math.isfinite(x) else None
    return x


def _verbosity_metrics(fitted: Fitted, v: VerbosityData | None) -> tuple[float, float]:
    if v is None or v.n == 0:
        return float("nan"), float("nan")
    pred = fitted.predict_pair(v.score_verbose, v.score_concise, v.len_verbose, v.len_concise,
                               v.density_verbose, v.density_concise)
    vwr = float(np.mean(M.order_credit(pred, 0.5)))
    slope = float("nan")
    if fitted.per_response:
        s = np.concatenate([fitted.calibrate(v.score_concise, v.len_concise, v.density_concise),
                            fitted.calibrate(v.score_verbose, v.len_verbose, v.density_verbose)])
        slope = M.score_length_slope(s, np.concatenate([v.len_concise, v.len_verbose]))
    return vwr, slope


def _resolve_scale(scale, scores, warnings) -> tuple[float, float]:
    if scale is None:
        lo, hi = float(np.min(scores)), float(np.max(scores))
        if hi <= lo:
            hi = lo + 1.0
        warnings.append(f"judge scale not given: using the observed range [{lo:g}, {hi:g}]")
        return lo, hi
    lo, hi = (float(v) for v in scale)
    if not lo < hi:
        raise UsageError(f"scale must be (min, max) with min < max, got {scale!r}")
    return lo, hi


def _fit_warnings(fitted: Fitted, warnings: list[str]) -> None:
    res = fitted.fit
    if res is None:
        return
    for name, where in res.at_bound.items():
        if where is not None:
            warnings.append(f"{fitted.name}: {name} is at its {where} bound "
                            f"({getattr(res, name):.4g}); widen the bounds or distrust it")
    if not res.converged:
        warnings.append(f"{fitted.name}: the optimiser did not report convergence ({res.message})")


def evaluate_verbosity_only(verbosity: VerbosityData, *, n_bootstrap: int = 1000, seed: int = 0,
                            reason: str = "no expert labels: a calibration cannot be fitted") -> dict:
    """Raw verbosity win-rate and score-length slope when no expert label exists (no fit).

    Returns the dict of the module docstring with ``fitted`` False, ``params`` None and
    ``methods`` = {"raw": {verbosity_win_rate, verbosity_win_rate_ci, verbosity_slope}}.
    Raises FitError when there are no verbosity pairs either.
    """
    if verbosity is None or verbosity.n == 0:
        raise FitError(reason + ", and no concise/verbose pairs to measure")
    v = verbosity
    vwr = M.verbosity_win_rate(v.score_concise, v.score_verbose)
    lengths = np.concatenate([v.len_concise, v.len_verbose])
    scores = np.concatenate([v.score_concise, v.score_verbose])
    slope = M.score_length_slope(scores, lengths)
    ci = None
    if n_bootstrap > 0:
        rng = np.random.default_rng(seed)
        idx = rng.integers(0, v.n, (n_bootstrap, v.n))
        credit = M.order_credit(v.score_verbose, v.score_concise)
        ci = percentile_ci(credit[idx].mean(axis=1))
    warnings = [reason]
    if np.ptp(scores) == 0:
        warnings.append("every judge score is the same: the judge output is constant")
    return _clean({
        "kind": "verbosity_only", "fitted": False, "no_fit_reason": reason, "n": 0, "n_items": 0,
        "n_verbosity": v.n, "n_bootstrap": n_bootstrap, "seed": seed, "params": None,
        "methods": {"raw": {"verbosity_win_rate": vwr, "verbosity_win_rate_ci": ci,
                            "verbosity_slope": slope}},
        "expert_length_preference": None, "raw_slope": slope, "warnings": warnings,
        "points": {"labelled": None, "verbosity": {
            "side": ["concise"] * v.n + ["verbose"] * v.n, "length": lengths,
            "score_raw": scores, "score_calibrated": None}},
    })


def _data_warnings(scores, lengths, warnings, n, kind):
    if n < FEW_LABELS_WARN:
        warnings.append(f"only {n} labelled {kind}: confidence intervals are wide, "
                        f"cross-validated figures noisy")
    if np.ptp(scores) == 0:
        warnings.append("every judge score is the same: the judge output is constant")
    if np.ptp(lengths) == 0:
        warnings.append("every response has the same length: the length penalty is not identifiable")


def _common(kind, n, n_items, l_ref, scale, p_bounds, k, n_bootstrap, seed, density, v):
    return {"kind": kind, "fitted": True, "no_fit_reason": None, "n": n, "n_items": n_items,
            "n_verbosity": 0 if v is None else v.n, "l_ref": l_ref, "scale": list(scale),
            "p_bounds": list(p_bounds), "folds": k, "n_bootstrap": n_bootstrap, "seed": seed,
            "density": density}


def _params(poly: Fitted, boot_params: list) -> dict:
    res = poly.fit
    out = res.to_dict()
    arr = np.asarray(boot_params, dtype=float).reshape(-1, 3) if boot_params else None
    for j, name in enumerate(("gamma", "p", "bt_scale")):
        out[f"{name}_ci"] = None if arr is None or res.bt_scale is None and name == "bt_scale" \
            else percentile_ci(arr[:, j])
    out["n_bootstrap_ok"] = 0 if arr is None else int(arr.shape[0])
    if "density" in poly.params:
        out["density"] = poly.params["density"]
    return out


def _identify(poly: Fitted, data, ctx, params: dict, codes, n_items: int, scores) -> dict:
    """:func:`judgecal.calibrate.identify.identification` of the full-data polylog fit."""
    from judgecal.calibrate.baselines import PolyLog
    from judgecal.calibrate.fit import scale_width

    return identification(poly, data, ctx, method=PolyLog(), gamma_ci=params.get("gamma_ci"), codes=codes,
                          n_items=n_items, item_ids=data.item_ids, width=scale_width(ctx.scale, scores))


# ----------------------------------------------------------------------------- pairwise
def _pair_metrics(fitted: Fitted, d: PairData):
    pred = fitted.predict_pair(d.score_a, d.score_b, d.len_a, d.len_b, d.density_a, d.density_b)
    agree = M.pair_agreement(pred, d.outcome)
    lpref = M.length_preference(pred, 1.0 - pred, d.len_a, d.len_b)
    slope = float("nan")
    if fitted.per_response:
        s = np.concatenate([fitted.calibrate(d.score_a, d.len_a, d.density_a),
                            fitted.calibrate(d.score_b, d.len_b, d.density_b)])
        slope = M.score_length_slope(s, np.concatenate([d.len_a, d.len_b]))
    return agree, lpref, slope


def _out_of_fold(methods, data, ctx, full: dict, fold: np.ndarray, k: int, warnings: list[str], predict) -> dict:
    """{method name: out-of-fold predictions (n,)}: each fold predicted by a fit on the other
    folds, started from the method's fixed multi-start grid scaled on the training folds
    (never from the full-data optimum, which has seen the held-out fold: issue 33). A method
    whose fit fails is left out, with a warning. ``full`` is not used for the starts."""
    out = {}
    for m in methods:
        pred = np.empty(data.n)
        try:
            for f_ in range(k):
                test = fold == f_
                fitted = m.fit(data.take(np.flatnonzero(~test)), ctx)
                pred[test] = predict(fitted, data.take(np.flatnonzero(test)))
        except FitError as exc:
            warnings.append(f"{m.name}: cross-validation skipped: {exc}")
            continue
        out[m.name] = pred
    return out


def _length_rule(d: PairData, poly_credit, counts) -> dict:
    """The judge-free rule "prefer the shorter answer" (equal lengths: a tie): its expert
    agreement (no parameter: in-sample = out of sample), CI over items, and the paired gap
    polylog(CV) - rule."""
    pred = M.order_credit(d.len_b, d.len_a)  # 1 when a is shorter
    credit = M.agreement_credit(pred, 1.0 - pred, d.outcome)
    out = {"rule": "prefer the shorter answer", "agreement": float(credit.mean()), "agreement_ci": None,
           "polylog_minus_rule": None, "polylog_minus_rule_ci": None}
    if counts is not None:
        out["agreement_ci"] = percentile_ci(counts @ credit / counts.sum(axis=1))
    if poly_credit is not None:
        diff = poly_credit - credit
        out["polylog_minus_rule"] = float(diff.mean())
        if counts is not None:
            out["polylog_minus_rule_ci"] = percentile_ci(counts @ diff / counts.sum(axis=1))
    out["credit"] = credit
    return out


#: Report order of the methods, simplest first: a tie in cross-validated agreement goes to the
#: simpler method.
SIMPLICITY = ("raw", "linear", "lowess", "lc_glm", "polylog")


def _comparison(out_m: dict, cv_credit: dict, counts, length_rule: dict) -> dict:
    """Which method wins out of sample (highest cross-validated agreement; ties to the simpler
    one), and the gap from the published calibration (polylog) to it with a paired CI."""
    rule_credit = length_rule.pop("credit")
    cands = [m for m in SIMPLICITY if m in cv_credit]
    out = {"best_method": None, "best_agreement_cv": None, "published": "polylog",
           "published_agreement_cv": None, "gap": None, "gap_ci": None,
           "length_rule_agreement": length_rule["agreement"], "best_beats_length_rule": None}
    if not cands:
        return out
    best = max(cands, key=lambda m: (round(float(cv_credit[m].mean()), 12), -SIMPLICITY.index(m)))
    out["best_method"] = best
    out["best_agreement_cv"] = float(cv_credit[best].mean())
    out["best_beats_length_rule"] = bool(out["best_agreement_cv"] > length_rule["agreement"])
    if "polylog" in cv_credit:
        diff = cv_credit[best] - cv_credit["polylog"]
        out["published_agreement_cv"] = float(cv_credit["polylog"].mean())
        out["gap"] = float(diff.mean())
        if counts is not None:
            out["gap_ci"] = percentile_ci(counts @ diff / counts.sum(axis=1))
    for name, credit in cv_credit.items():
        if name in out_m:
            diff = credit - rule_credit
            out_m[name]["minus_length_rule_cv"] = float(diff.mean())
    return out


def _ties_broken(d: PairData, out_m: dict, cv_credit: dict, oof: dict) -> None:
    """How much of each method's out-of-fold gain over raw comes from pairs the raw judge tied:
    ``gain_from_ties_cv`` = sum over raw-tie pairs of (credit - raw credit) / n (the rest,
    ``gain_from_decisive_cv``, comes from pairs the raw judge decided), and
    ``raw_ties_broken_cv``, the number of raw ties the method decides."""
    if "raw" not in cv_credit:
        return
    tie = d.score_a == d.score_b
    n = d.n
    for name, credit in cv_credit.items():
        if name == "raw":
            continue
        diff = credit - cv_credit["raw"]
        pred = oof.get(name)
        out_m[name]["raw_ties_broken_cv"] = None if pred is None else int(np.sum(tie & (pred != 0.5)))
        out_m[name]["gain_from_ties_cv"] = float(diff[tie].sum() / n)
        out_m[name]["gain_from_decisive_cv"] = float(diff[~tie].sum() / n)


def _lean_pairwise(d: PairData, W, poly: Fitted, signed: bool) -> dict:
    """Which way the raw judge leans on length, measured against the experts: over pairs of
    different length, (share where the judge prefers the longer, ties 1/2) minus (share where
    the experts do); CI over the bootstrap resamples of items. "longer" when the CI lies above
    0, "shorter" below, else "none". With a signed fit the sign of gamma is given too."""
    keep = d.len_a != d.len_b
    a_long = d.len_a > d.len_b
    judge = np.where(a_long, M.order_credit(d.score_a, d.score_b), M.order_credit(d.score_b, d.score_a))
    expert = np.where(a_long, d.outcome, 1.0 - d.outcome)
    diff = (judge - expert) * keep
    out = {"measure": "judge minus expert length preference (pairs of different length)",
           "value": float(diff.sum() / keep.sum()) if keep.any() else None, "ci": None,
           "direction": None, "gamma": poly.fit.gamma if poly.fit is not None else None, "signed": bool(signed)}
    if out["value"] is None:
        out["direction"] = "undetermined"
        return out
    if W is not None:
        Wk = W * keep
        out["ci"] = percentile_ci(weighted_means(diff[None, :].repeat(W.shape[0], 0), Wk))
    ci = out["ci"]
    if ci is None:
        out["direction"] = "undetermined"
    else:
        out["direction"] = "longer" if ci[0] > 0 else "shorter" if ci[1] < 0 else "none"
    return out


def _clip_warning(poly: Fitted, d: PairData, scale, warnings: list[str]) -> None:
    lo, hi = scale
    if not (np.isfinite(lo) or np.isfinite(hi)) or poly.fit is None:
        return
    c = np.concatenate([poly.calibrate(d.score_a, d.len_a, d.density_a), poly.calibrate(d.score_b, d.len_b, d.density_b)])
    raw = np.concatenate([d.score_a, d.score_b])
    share = float(np.mean((c <= lo) | (c >= hi)) - np.mean((raw <= lo) | (raw >= hi)))
    if share >= 0.25:
        warnings.append(f"polylog: the fitted calibration puts {share:.0%} more scores at the ends of the scale "
                        f"[{lo:g}, {hi:g}] (the clip is part of the fit: these pairs count as the ties they become)")


def evaluate_pairwise(
    data: PairData | None,
    *,
    scale: tuple[float, float] | None = None,
    l_ref: float | None = None,
    p_bounds: tuple[float, float] = (1.0, 1.5),
    folds: int = 5,
    n_bootstrap: int = 1000,
    seed: int = 0,
    verbosity_pairs: VerbosityData | None = None,
    density: bool = False,
    density_w: float = 0.5,
    signed: bool = False,
    gamma_max: float | None = None,
    variants: dict | None = None,
    unit: str | None = None,
    nested: bool = True,
) -> dict:
    """Fit and compare raw, linear, polylog, lowess and lc_glm on expert-labelled pairs.

    Args:
        data: labelled pairs (None or fewer than 10 pairs: no fit; see below).
        scale: the judge's (min, max) (None: the observed range, with a warning).
        l_ref: reference length; None = median length of the labelled responses.
        p_bounds: bounds of p. folds: K of the item-grouped CV (< 2 items: no CV).
        n_bootstrap: bootstrap replicates (0 skips every CI). seed: seeds folds and bootstrap.
        verbosity_pairs: concise/verbose pairs (need not be labelled) for the verbosity win-rate.
        density: apply the density exemption (needs density_a/_b in data and verbosity pairs).
        signed: allow gamma < 0 in linear and polylog (default False: the seed's gamma >= 0).
        gamma_max: bound of |gamma| (None: 10 x the scale width).
        variants: {length unit: PairData} - the same pairs with lengths in other units, for the
            nested cross-validated choice of method, bounds and unit (:mod:`.select`); ``unit``
            names the unit of ``data``. nested: run that selection (needs folds >= 2).
    Returns:
        the dict of the module docstring. With fewer than 10 labelled pairs but verbosity pairs
        given, the result of :func:`evaluate_verbosity_only` (``fitted`` False, with the reason).
    Raises:
        FitError: too few labelled pairs and no verbosity pairs; or a full-data fit is
            impossible (only ties, no pair of two lengths). UsageError: bad settings.
    """
    n = 0 if data is None else data.n
    if n < MIN_LABELS:
        reason = ("no expert labels: a calibration cannot be fitted" if n == 0 else
                  f"too few expert-labelled pairs to fit a calibration: {n} < {MIN_LABELS}")
        return evaluate_verbosity_only(verbosity_pairs, n_bootstrap=n_bootstrap, seed=seed, reason=reason)
    if folds < 0 or n_bootstrap < 0:
        raise UsageError("folds and n_bootstrap must be >= 0")
    v = verbosity_pairs
    warnings: list[str] = []
    scores = np.concatenate([data.score_a, data.score_b])
    lengths = np.concatenate([data.len_a, data.len_b])
    scale = _resolve_scale(scale, scores, warnings)
    l_ref = float(l_ref) if l_ref is not None else default_l_ref(lengths)
    ctx = FitContext(l_ref=l_ref, scale=scale, p_bounds=tuple(p_bounds), density=density,
                     density_w=density_w, signed=signed, gamma_max=gamma_max)
    _data_warnings(scores, lengths, warnings, n, "pairs")
    ties = float(np.mean(data.score_a == data.score_b))
    if ties > 0.5:
        warnings.append(f"{ties:.0%} of labelled pairs are judge ties: the judge barely discriminates")
    dup = int(np.sum((data.score_a == data.score_b) & (data.len_a == data.len_b)))
    if dup:
        warnings.append(f"{dup} pairs have equal length and equal score: possibly duplicate outputs")
    methods = PAIRWISE_METHODS
    codes, n_items = item_codes(data.item_ids)

    # in-sample
    full: dict[str, Fitted] = {m.name: m.fit(data, ctx) for m in methods}
    out_m: dict[str, dict] = {}
    for name, f in full.items():
        agree, lpref, slope = _pair_metrics(f, data)
        vwr, vslope = _verbosity_metrics(f, v)
        out_m[name] = {"agreement": agree, "agreement_cv": None, "agreement_ci": None,
                       "agreement_cv_ci": None, "verbosity_win_rate": vwr,
                       "verbosity_win_rate_ci": None, "length_preference": lpref,
                       "length_preference_ci": None, "slope": slope, "slope_ci": None,
                       "verbosity_slope": vslope, "params": f.params}
        _fit_warnings(f, warnings)

    # cross-validation (folds shared by every method)
    fold, k = make_folds(data.item_ids, folds, seed)
    cv_credit: dict[str, np.ndarray] = {}
    cv_counts = None
    if k >= 2:
        oof = _out_of_fold(methods, data, ctx, full, fold, k, warnings,
                           lambda f, t: f.predict_pair(t.score_a, t.score_b, t.len_a, t.len_b, t.density_a, t.density_b))
        for m in methods:
            if m.name not in oof:
                continue
            pred = oof[m.name]
            credit = M.agreement_credit(pred, 1.0 - pred, data.outcome)
            cv_credit[m.name] = credit
            out_m[m.name]["agreement_cv"] = float(credit.mean())
            if n_bootstrap > 0:  # CI of the out-of-fold agreement: resample items, no refit
                rng = np.random.default_rng(seed + 2)
                cv_counts = resample_counts(n_items, n_bootstrap, rng)[:, codes]
                out_m[m.name]["agreement_cv_ci"] = percentile_ci(cv_counts @ credit / cv_counts.sum(axis=1))
        # paired gain over raw: the same item resamples for both methods, so the CI is of the
        # difference itself (narrower and more honest than comparing two overlapping CIs)
        if "raw" in cv_credit:
            for name, credit in cv_credit.items():
                if name == "raw":
                    continue
                diff = credit - cv_credit["raw"]
                out_m[name]["agreement_cv_gain"] = float(diff.mean())
                out_m[name]["agreement_cv_gain_ci"] = (
                    None if cv_counts is None else percentile_ci(cv_counts @ diff / cv_counts.sum(axis=1)))
    elif folds >= 2:
        warnings.append(f"cross-validation skipped: only {n_items} distinct item(s)")
    if cv_counts is None and n_bootstrap > 0 and k >= 2:
        cv_counts = resample_counts(n_items, n_bootstrap, np.random.default_rng(seed + 2))[:, codes]
    length_rule = _length_rule(data, cv_credit.get("polylog"), cv_counts)
    comparison = _comparison(out_m, cv_credit, cv_counts, length_rule)
    _ties_broken(data, out_m, cv_credit, oof if k >= 2 else {})

    # bootstrap (resample items; refits start from the full-data optimum; metrics vectorised)
    boot_params: list = []
    W = None
    if n_bootstrap > 0:
        rng = np.random.default_rng(seed + 1)
        W = resample_counts(n_items, n_bootstrap, rng)[:, codes]  # (B, n) pair multiplicities
        V = None if v is None or v.n == 0 else resample_counts(v.n, n_bootstrap, rng)
        for m in methods:
            rows = n_bootstrap if m.name != "lowess" else min(n_bootstrap, LOWESS_BOOTSTRAP_MAX)
            fits = m.fit_batch(data, ctx, W[:rows], start=full[m.name])
            ok = np.array([f is not None for f in fits])
            if not ok.all():
                warnings.append(f"{m.name}: {int((~ok).sum())} of {rows} bootstrap refits failed "
                                f"and were left out")
            if m.name == "polylog":
                boot_params = [(f.fit.gamma, f.fit.p, f.fit.bt_scale) for f in fits if f is not None]
            stats = pair_metrics_batch([f for f in fits if f is not None], data, W[:rows][ok],
                                        v, None if V is None else V[:rows][ok])
            out_m[m.name]["n_bootstrap"] = int(ok.sum())
            for key, vals in stats.items():
                out_m[m.name][f"{key}_ci"] = percentile_ci(vals)

    # headline warnings
    ra, pa = out_m["raw"]["agreement"], out_m["polylog"]["agreement"]
    if abs(pa - ra) > AGREEMENT_GAP_WARN:
        warnings.append(f"calibrated (polylog) and raw expert agreement differ by "
                        f"{100 * (pa - ra):+.1f} points in-sample: check the cross-validated figure")

    _clip_warning(full["polylog"], data, scale, warnings)
    selection = None
    if nested and k >= 2:
        from judgecal.calibrate.select import nested_selection

        selection = nested_selection(variants or {unit or "length": data}, unit or "length", ctx, kind="pairwise",
                                     folds=folds, seed=seed, n_bootstrap=n_bootstrap, warnings=warnings)
    poly = full["polylog"]
    params = _params(poly, boot_params)
    ident = _identify(poly, data, ctx, params, codes, n_items, scores)
    result = _common("pairwise", n, n_items, l_ref, scale, p_bounds, k, n_bootstrap, seed, density, v)
    result.update({
        "signed": bool(signed),
        "gamma_max": gamma_max,
        "params": params,
        "identification": ident,
        "flags": [f for f in [identify_flag(ident)] if f],
        "methods": out_m,
        "lean": _lean_pairwise(data, W, full["polylog"], signed),
        "length_rule": length_rule,
        "comparison": comparison,
        "selection": selection,
        "judge_ties": int(np.sum(data.score_a == data.score_b)),
        "expert_length_preference": M.expert_length_preference(data.outcome, data.len_a, data.len_b),
        "raw_slope": out_m["raw"]["slope"],
        "warnings": warnings,
        "points": {
            "labelled": {
                "item_id": np.concatenate([data.item_ids, data.item_ids]).astype(str).tolist(),
                "side": ["a"] * n + ["b"] * n, "length": lengths, "score_raw": scores,
                "score_calibrated": np.concatenate([
                    poly.calibrate(data.score_a, data.len_a, data.density_a),
                    poly.calibrate(data.score_b, data.len_b, data.density_b)]),
            },
            "verbosity": _verbosity_points(poly, v),
        },
    })
    return _clean(result)


def _verbosity_points(poly: Fitted, v: VerbosityData | None):
    if v is None or v.n == 0:
        return None
    return {"side": ["concise"] * v.n + ["verbose"] * v.n,
            "length": np.concatenate([v.len_concise, v.len_verbose]),
            "score_raw": np.concatenate([v.score_concise, v.score_verbose]),
            "score_calibrated": np.concatenate([
                poly.calibrate(v.score_concise, v.len_concise, v.density_concise),
                poly.calibrate(v.score_verbose, v.len_verbose, v.density_verbose)])}


# ----------------------------------------------------------------------------- pointwise
def _comparison_pointwise(out_m, oof, target, codes, n_items, n_bootstrap, seed) -> dict:
    """Pointwise counterpart of the pairwise comparison: best method by cross-validated Spearman
    (ties to the simpler), gap to polylog with a CI from at most 500 item resamples (weighted
    Spearman of the out-of-fold predictions; no refit)."""
    out = {"best_method": None, "best_spearman_cv": None, "published": "polylog",
           "published_spearman_cv": None, "gap": None, "gap_ci": None}
    figs = {m: out_m[m]["spearman_cv"] for m in SIMPLICITY if m in oof and out_m[m].get("spearman_cv") is not None
            and np.isfinite(out_m[m]["spearman_cv"])}
    if not figs:
        return out
    best = max(figs, key=lambda m: (round(figs[m], 12), -SIMPLICITY.index(m)))
    out.update(best_method=best, best_spearman_cv=figs[best])
    if "polylog" in figs:
        out["published_spearman_cv"] = figs["polylog"]
        out["gap"] = figs[best] - figs["polylog"]
        if n_bootstrap > 0 and best != "polylog":
            W = resample_counts(n_items, min(n_bootstrap, 500), np.random.default_rng(seed + 2))[:, codes]
            diffs = [M.weighted_spearman(oof[best], target, w) - M.weighted_spearman(oof["polylog"], target, w) for w in W]
            out["gap_ci"] = percentile_ci(diffs)
        elif best == "polylog":
            out["gap_ci"] = [0.0, 0.0] if n_bootstrap > 0 else None
    return out


def _lean_pointwise(d: PointData, target, W, poly: Fitted, signed: bool) -> dict:
    """Pointwise lean: slope of the judge's error (S - E') on ln L in score units per nat, CI
    over the bootstrap resamples of items; "longer" when the CI lies above 0 (the judge scores
    long answers higher than the experts do), "shorter" below, else "none"."""
    x = np.log(np.maximum(d.length, LENGTH_FLOOR))
    err = d.score - target
    out = {"measure": "slope of (judge - expert) score on ln L, score units per nat",
           "value": M.score_length_slope(err, d.length), "ci": None, "direction": "undetermined",
           "gamma": poly.fit.gamma if poly.fit is not None else None, "signed": bool(signed)}
    if W is not None and np.isfinite(out["value"]):
        out["ci"] = percentile_ci(weighted_slopes(np.tile(err, (W.shape[0], 1)), x, W))
    ci = out["ci"]
    if ci is not None:
        out["direction"] = "longer" if ci[0] > 0 else "shorter" if ci[1] < 0 else "none"
    return out


def _point_metrics(fitted: Fitted, d: PointData, target):
    s = fitted.calibrate(d.score, d.length, d.density)
    return (M.spearman(s, target), M.kendall_tau(s, target), M.mae(s, target),
            M.score_length_slope(s, d.length))


def evaluate_pointwise(
    data: PointData | None,
    *,
    expert_scale: tuple[float, float],
    scale: tuple[float, float] | None = None,
    l_ref: float | None = None,
    p_bounds: tuple[float, float] = (1.0, 1.5),
    folds: int = 5,
    n_bootstrap: int = 1000,
    seed: int = 0,
    verbosity_pairs: VerbosityData | None = None,
    density: bool = False,
    density_w: float = 0.5,
    signed: bool = False,
    gamma_max: float | None = None,
    variants: dict | None = None,
    unit: str | None = None,
    nested: bool = True,
) -> dict:
    """Fit and compare raw, linear, polylog and lowess on pointwise expert scores.

    Same arguments and result as :func:`evaluate_pairwise` plus ``expert_scale`` (the experts'
    (min, max)); agreement is measured by Spearman, Kendall tau-b and MAE against the expert
    score mapped onto the judge's scale (MAE in judge score units). No lc_glm (pairs only).
    Fewer than 10 labelled responses: :func:`evaluate_verbosity_only` (or FitError).
    """
    n = 0 if data is None else data.n
    if n < MIN_LABELS:
        reason = ("no expert labels: a calibration cannot be fitted" if n == 0 else
                  f"too few expert-labelled responses to fit a calibration: {n} < {MIN_LABELS}")
        return evaluate_verbosity_only(verbosity_pairs, n_bootstrap=n_bootstrap, seed=seed, reason=reason)
    if folds < 0 or n_bootstrap < 0:
        raise UsageError("folds and n_bootstrap must be >= 0")
    v = verbosity_pairs
    warnings: list[str] = []
    scale = _resolve_scale(scale, data.score, warnings)
    l_ref = float(l_ref) if l_ref is not None else default_l_ref(data.length)
    ctx = FitContext(l_ref=l_ref, scale=scale, p_bounds=tuple(p_bounds), expert_scale=tuple(expert_scale),
                     density=density, density_w=density_w, signed=signed, gamma_max=gamma_max)
    _data_warnings(data.score, data.length, warnings, n, "responses")
    target = map_expert_scale(data.expert, expert_scale, scale)
    codes, n_items = item_codes(data.item_ids)
    methods = POINTWISE_METHODS
    full = {m.name: m.fit(data, ctx) for m in methods}
    out_m: dict[str, dict] = {}
    for name, f in full.items():
        rho, tau, err, slope = _point_metrics(f, data, target)
        vwr, vslope = _verbosity_metrics(f, v)
        out_m[name] = {"spearman": rho, "spearman_cv": None, "spearman_ci": None, "kendall": tau,
                       "kendall_cv": None, "mae": err, "mae_cv": None, "mae_ci": None,
                       "verbosity_win_rate": vwr, "verbosity_win_rate_ci": None, "slope": slope,
                       "slope_ci": None, "verbosity_slope": vslope, "params": f.params}
        _fit_warnings(f, warnings)

    fold, k = make_folds(data.item_ids, folds, seed)
    if k >= 2:
        oof = _out_of_fold(methods, data, ctx, full, fold, k, warnings,
                           lambda f, t: f.calibrate(t.score, t.length, t.density))
        for name, pred in oof.items():
            out_m[name].update(spearman_cv=M.spearman(pred, target),
                               kendall_cv=M.kendall_tau(pred, target), mae_cv=M.mae(pred, target))
    elif folds >= 2:
        warnings.append(f"cross-validation skipped: only {n_items} distinct item(s)")
    comparison = _comparison_pointwise(out_m, oof if k >= 2 else {}, target, codes, n_items, n_bootstrap, seed)

    boot_params: list = []
    if n_bootstrap > 0:
        rng = np.random.default_rng(seed + 1)
        W = resample_counts(n_items, n_bootstrap, rng)[:, codes]  # (B, n) response multiplicities
        V = None if v is None or v.n == 0 else resample_counts(v.n, n_bootstrap, rng)
        x = np.log(np.maximum(data.length, LENGTH_FLOOR))
        for m in methods:
            rows = n_bootstrap if m.name != "lowess" else min(n_bootstrap, LOWESS_BOOTSTRAP_MAX)
            fits = m.fit_batch(data, ctx, W[:rows], start=full[m.name])
            ok = np.array([f is not None for f in fits])
            if not ok.all():
                warnings.append(f"{m.name}: {int((~ok).sum())} of {rows} bootstrap refits failed "
                                f"and were left out")
            good = [f for f in fits if f is not None]
            if m.name == "polylog":
                boot_params = [(f.fit.gamma, f.fit.p, np.nan) for f in good]
            Wk = W[:rows][ok]
            S = np.stack([f.calibrate(data.score, data.length, data.density) for f in good]) \
                if good else np.empty((0, n))
            stats = {"spearman": [M.weighted_spearman(S[b], target, Wk[b]) for b in range(len(good))],
                     "mae": weighted_means(np.abs(S - target), Wk), "slope": weighted_slopes(S, x, Wk),
                     "verbosity_win_rate": np.full(len(good), np.nan)}
            if V is not None and good:
                VP = np.stack([f.predict_pair(v.score_verbose, v.score_concise, v.len_verbose,
                                              v.len_concise, v.density_verbose, v.density_concise)
                               for f in good])
                stats["verbosity_win_rate"] = weighted_means(M.order_credit(VP, 0.5), V[:rows][ok])
            out_m[m.name]["n_bootstrap"] = int(ok.sum())
            for key, vals in stats.items():
                out_m[m.name][f"{key}_ci"] = percentile_ci(vals)

    ra, pa = out_m["raw"]["spearman"], out_m["polylog"]["spearman"]
    if ra is not None and pa is not None and np.isfinite(ra) and np.isfinite(pa) \
            and abs(pa - ra) > AGREEMENT_GAP_WARN:
        warnings.append(f"calibrated (polylog) and raw Spearman differ by {pa - ra:+.3f} in-sample: "
                        f"check the cross-validated figure")
    selection = None
    if nested and k >= 2:
        from judgecal.calibrate.select import nested_selection

        selection = nested_selection(variants or {unit or "length": data}, unit or "length", ctx, kind="pointwise",
                                     folds=folds, seed=seed, n_bootstrap=n_bootstrap, warnings=warnings)
    poly = full["polylog"]
    params = _params(poly, boot_params)
    ident = _identify(poly, data, ctx, params, codes, n_items, data.score)
    result = _common("pointwise", n, n_items, l_ref, scale, p_bounds, k, n_bootstrap, seed, density, v)
    result.update({
        "signed": bool(signed),
        "gamma_max": gamma_max,
        "params": params,
        "identification": ident,
        "flags": [f for f in [identify_flag(ident)] if f],
        "methods": out_m,
        "lean": _lean_pointwise(data, target, W if n_bootstrap > 0 else None, poly, signed),
        "length_rule": None,
        "comparison": comparison,
        "selection": selection,
        "expert_length_preference": None,
        "raw_slope": out_m["raw"]["slope"],
        "warnings": warnings,
        "points": {
            "labelled": {"item_id": data.item_ids.astype(str).tolist(), "side": ["-"] * n,
                         "length": data.length, "score_raw": data.score,
                         "score_calibrated": poly.calibrate(data.score, data.length, data.density)},
            "verbosity": _verbosity_points(poly, v),
        },
    })
    return _clean(result)
