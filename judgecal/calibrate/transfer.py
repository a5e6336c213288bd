"""Transfer evaluation: apply a calibration fitted on one task family to another family's labels.

The realistic use of a calibration: fit it where experts labelled (the *source* family), apply
it to new data (the *target* family). This module measures what that is worth on the target's
own expert labels, which the calibration never saw:

* ``raw``: the judge's raw scores on the target;
* ``polylog``: the stored calibration (gamma, p, L_ref of the source; clipped to the judge's
  scale exactly as fitted), applied unchanged;
* ``linear``, ``lowess``, ``lc_glm``: the baselines **refitted on the source family** with the
  source's settings (its L_ref, scale, p bounds, sign option) and applied unchanged to the target.

Per method: expert agreement on the target pairs (ties 1/2, as everywhere), its 95% CI and the
gain over raw with a **paired** 95% CI (the same item resamples for both, ``default_rng(seed +
7)``, ``n_bootstrap`` resamples of the target's items; the calibration is held fixed: the CI is
the target's sampling uncertainty given the source fit), how much of the gain comes from pairs
the raw judge tied (``gain_from_ties``), the judge-free rule "prefer the shorter answer" on the
target, and the method that wins on the target. Nothing is refitted on the target. Only
pairwise target labels are evaluated (a pointwise target is refused with a one-line reason).
"""

from __future__ import annotations

import numpy as np

from judgecal.calibrate import metrics as M
from judgecal.calibrate.baselines import FitContext, Fitted, LcGlm, Linear, Lowess
from judgecal.calibrate.data import PairData
from judgecal.calibrate.penalty import calibrate as apply_polylog
from judgecal.calibrate.resample import decided_mean_ci, item_codes, percentile_ci, resample_counts
from judgecal.errors import FitError, UsageError

ORDER = ("raw", "linear", "lowess", "lc_glm", "polylog")


def apply_stored(params: dict, scale, score, length, density=None, no_credit=None) -> np.ndarray:
    """Calibrated scores of a stored polylog calibration: the fitted function, clipped to
    ``scale`` (an unbounded end clips nothing), with the stored short-side floor
    (``params["short_floor"]``; a calibration stored before judgecal had the floor has none and
    keeps its unbounded short side, as it was fitted) and no length credit for the rows of
    ``no_credit`` (bool per response: empty or repeated answers, :mod:`judgecal.calibrate.guards`;
    their calibrated score is at most their raw score, old rows included).

    ``params``: gamma, p, l_ref, optional signed, density, short_floor. Shapes (n,)."""
    gamma, p, l_ref = float(params["gamma"]), float(params["p"]), float(params["l_ref"])
    dparams = params.get("density") if isinstance(params.get("density"), dict) else None
    floor = params.get("short_floor")
    lo, hi = (float(v) for v in scale)
    if dparams is not None and density is None:
        raise UsageError("this calibration uses the density exemption: the target needs response texts")
    return apply_polylog(score, length, l_ref, gamma, p, lo, hi, density=density if dparams else None,
                         density_params=dparams, signed=True, floor=None if floor is None else float(floor),
                         no_credit=no_credit)


def stored_polylog(params: dict, scale) -> Fitted:
    """A :class:`Fitted` applying a stored polylog calibration (``params``: gamma, p, l_ref,
    optional signed, density and short_floor) clipped to ``scale``: :func:`apply_stored`."""
    gamma, p, l_ref = float(params["gamma"]), float(params["p"]), float(params["l_ref"])
    floor = params.get("short_floor")

    def apply(s, le, d):
        return apply_stored(params, scale, s, le, d)

    return Fitted("polylog", {"gamma": gamma, "p": p, "l_ref": l_ref, "signed": bool(params.get("signed", gamma < 0)),
                              "short_floor": None if floor is None else float(floor)},
                  _apply=apply)


def _raw() -> Fitted:
    return Fitted("raw", {}, _apply=lambda s, le, d: s.copy())


def evaluate_transfer(
    target: PairData,
    calibration: dict,
    *,
    scale: tuple[float, float],
    source: PairData | None = None,
    source_ctx: FitContext | None = None,
    n_bootstrap: int = 1000,
    max_resamples: int | None = None,
    seed: int = 0,
    recommended: dict | None = None,
) -> dict:
    """Agreement on the target family's labels of raw, the stored calibration and the baselines
    refitted on the source (module doc), and of the source fit's **recommended** method (what a
    team following the advice applies).

    Args:
        target: the target family's expert-labelled pairs, lengths in the calibration's unit.
        calibration: the stored polylog parameters {gamma, p, l_ref[, signed, density]}.
        scale: the judge's (min, max) the calibration clips to.
        source, source_ctx: the source family's labelled pairs and fit context, to refit the
            baselines (None: baselines left out, with a warning).
        n_bootstrap: item resamples of the target for the CIs (0: none). seed: their seed.
        max_resamples: the gains' CIs are resampled further (doubling, the same stream) while
            the side of zero they lie on is within Monte Carlo error, up to this many (default
            32 x n_bootstrap; :func:`judgecal.calibrate.resample.decided_mean_ci`);
            ``gain_ci_decided`` False: still undecided there.
        recommended: the source's nested-CV recommendation: {"name": "raw", "decision": "keep
            raw", "reason"} or {"name", "decision": "calibrate", "fitted": Fitted refitted on the
            source, "target": the target's pairs in the method's length unit, "unit"} or with
            "error" instead of "fitted" (evaluated as missing, with a warning). None: a fit
            stored before recommendations weighed raw.
    Returns:
        {"kind": "transfer", "fitted": True, "n", "n_items", "scale", "l_ref", "params",
        "methods": {name: {agreement, agreement_ci, gain, gain_ci, gain_ci_resamples,
        gain_ci_side ("below" | "above" | "spans" zero), gain_ci_decided, gain_from_ties,
        raw_ties_broken, length_preference, fitted_on}}, "length_rule": {agreement,
        agreement_ci, polylog_minus_rule, polylog_minus_rule_ci}, "comparison": {best_method,
        best_agreement, gap, gap_ci}, "expert_length_preference", "judge_ties", "n_bootstrap",
        "seed", "warnings", "recommended": {name, decision, reason, agreement, agreement_ci,
        gain, gain_ci, gain_from_ties, raw_ties_broken} or None} (numpy-free; NaN as None is left
        to the caller's cleaning).
    Raises:
        UsageError: the target has no labelled pair.
    """
    if target is None or target.n == 0:
        raise UsageError("the target family has no expert-labelled pair rated by this judge: nothing to evaluate")
    warnings: list[str] = []
    fits: dict[str, Fitted] = {"raw": _raw(), "polylog": stored_polylog(calibration, scale)}
    if source is not None and source_ctx is not None:
        for m in (Linear(), Lowess(), LcGlm()):
            try:
                fits[m.name] = m.fit(source, source_ctx)
            except (FitError, UsageError) as exc:
                warnings.append(f"{m.name}: could not be refitted on the source family: {exc}")
    else:
        warnings.append("baselines not refitted: the source family's labelled pairs were not given")
    d = target
    codes, n_items = item_codes(d.item_ids)
    W = resample_counts(n_items, n_bootstrap, np.random.default_rng(seed + 7))[:, codes] if n_bootstrap > 0 else None

    def ci(credit):
        return None if W is None else percentile_ci(W @ credit / W.sum(axis=1))

    def gain(diff) -> dict:
        """The gain's paired CI, resampled until its sign is decided (Monte Carlo error:
        :func:`judgecal.calibrate.resample.decided_mean_ci`; its first resamples are W's)."""
        g = decided_mean_ci(diff, codes, n_items, n_bootstrap, seed + 7, max_resamples=max_resamples)
        return {"gain_ci": g["ci"], "gain_ci_resamples": g["n_resamples"], "gain_ci_side": g["side"],
                "gain_ci_decided": g["decided"] if g["ci"] is not None else None}

    credits, preds = {}, {}
    for name in ORDER:
        if name not in fits:
            continue
        pred = fits[name].predict_pair(d.score_a, d.score_b, d.len_a, d.len_b, d.density_a, d.density_b)
        preds[name] = pred
        credits[name] = M.agreement_credit(pred, 1.0 - pred, d.outcome)
    tie = d.score_a == d.score_b
    methods = {}
    for name, credit in credits.items():
        diff = credit - credits["raw"]
        methods[name] = {
            "agreement": float(credit.mean()), "agreement_ci": ci(credit),
            "gain": None if name == "raw" else float(diff.mean()),
            **({"gain_ci": None, "gain_ci_resamples": 0, "gain_ci_side": None, "gain_ci_decided": None}
               if name == "raw" else gain(diff)),
            "gain_from_ties": None if name == "raw" else float(diff[tie].sum() / d.n),
            "raw_ties_broken": None if name == "raw" else int(np.sum(tie & (preds[name] != 0.5))),
            "length_preference": M.length_preference(preds[name], 1.0 - preds[name], d.len_a, d.len_b),
            "fitted_on": None if name == "raw" else ("stored calibration" if name == "polylog" else "source family"),
            "params": fits[name].params,
        }
    rec_out = None
    if recommended is not None:
        rec_out = {"name": recommended.get("name"), "decision": recommended.get("decision"),
                   "reason": recommended.get("reason"), "unit": recommended.get("unit"),
                   "description": recommended.get("description"), "agreement": None, "agreement_ci": None,
                   "gain": None, "gain_ci": None, "gain_from_ties": None, "raw_ties_broken": None, "error": None}
        if recommended.get("name") == "raw":
            rec_out.update(agreement=methods["raw"]["agreement"], agreement_ci=methods["raw"]["agreement_ci"],
                           gain=0.0, gain_ci=None)
        elif recommended.get("fitted") is not None:
            t = recommended["target"]
            if t.n != d.n or not np.array_equal(np.asarray(t.item_ids).astype(str), np.asarray(d.item_ids).astype(str)):
                rec_out["error"] = "the target's pairs differ between length units"
            elif recommended["fitted"]._pair_md is not None and t.md_a is None:
                rec_out["error"] = "the target's answers have no stored Markdown counts (run `judgecal db upgrade`)"
            else:
                pred = recommended["fitted"].predict_pair(t.score_a, t.score_b, t.len_a, t.len_b, t.density_a, t.density_b,
                                                          md_a=t.md_a, md_b=t.md_b)
                credit = M.agreement_credit(pred, 1.0 - pred, d.outcome)
                diff = credit - credits["raw"]
                rec_out.update(agreement=float(credit.mean()), agreement_ci=ci(credit), gain=float(diff.mean()),
                               **gain(diff), gain_from_ties=float(diff[tie].sum() / d.n),
                               raw_ties_broken=int(np.sum(tie & (pred != 0.5))))
        else:
            rec_out["error"] = recommended.get("error") or "not evaluated"
        if rec_out["error"]:
            warnings.append(f"the recommended method {rec_out['name']} could not be evaluated on the target: {rec_out['error']}")
        elif rec_out["name"] != "raw":  # its own row beside the refitted baselines (which may differ in unit)
            methods[f"recommended: {rec_out['name']}"] = {
                k: rec_out.get(k) for k in ("agreement", "agreement_ci", "gain", "gain_ci", "gain_ci_resamples",
                                            "gain_ci_side", "gain_ci_decided", "gain_from_ties", "raw_ties_broken")}
            methods[f"recommended: {rec_out['name']}"].update(
                fitted_on="source family (its recommended method, as selected)", params={},
                length_preference=None)
    rule_pred = M.order_credit(d.len_b, d.len_a)
    rule = M.agreement_credit(rule_pred, 1.0 - rule_pred, d.outcome)
    length_rule = {"rule": "prefer the shorter answer", "agreement": float(rule.mean()), "agreement_ci": ci(rule),
                   "polylog_minus_rule": float((credits["polylog"] - rule).mean()),
                   "polylog_minus_rule_ci": ci(credits["polylog"] - rule)}
    best = max(credits, key=lambda m: (round(float(credits[m].mean()), 12), -ORDER.index(m)))
    gap = credits[best] - credits["polylog"]
    comparison = {"best_method": best, "best_agreement": float(credits[best].mean()), "published": "polylog",
                  "published_agreement": float(credits["polylog"].mean()), "gap": float(gap.mean()),
                  "gap_ci": ci(gap), "length_rule_agreement": length_rule["agreement"]}
    if d.n < 50:
        warnings.append(f"only {d.n} labelled pairs in the target family: confidence intervals are wide")
    return {
        "kind": "transfer", "fitted": True, "no_fit_reason": None, "n": d.n, "n_items": n_items,
        "scale": [float(scale[0]), float(scale[1])], "l_ref": float(calibration["l_ref"]),
        "params": {k: calibration.get(k) for k in ("gamma", "p", "l_ref", "signed", "short_floor", "gamma_ci", "p_ci", "at_bound")
                   if k in calibration},
        "methods": methods, "length_rule": length_rule, "comparison": comparison,
        "expert_length_preference": M.expert_length_preference(d.outcome, d.len_a, d.len_b),
        "judge_ties": int(tie.sum()), "n_bootstrap": n_bootstrap, "seed": seed, "warnings": warnings,
        "recommended": rec_out,
    }
