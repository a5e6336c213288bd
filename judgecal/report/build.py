"""Build the ``judgecal report`` document from evaluations: a plain, JSON-serialisable dict.

Pure: no database, no network, no file. Input is a list of *entries*, one per (task family,
judge)::

    {"task_family": str, "judge": str, "calibration_id": int | None, "created_at": str,
     "length_unit": "tokens" | "words" | "chars" | "bytes", "tokenizer": str | None,
     "evaluation": <dict of judgecal.calibrate.evaluate.evaluate_pairwise / _pointwise /
                    evaluate_verbosity_only>}

:func:`build_report` keeps every figure of the evaluation that a reader needs (no per-response
``points``: the plots read those from the entries), adds report-level warnings that the
evaluation does not already give, and a plain-language *verdict* per entry: does the fitted
calibration (``polylog``, the seed formula of DESIGN.md) agree better with the experts than the
raw judge **out of sample** (K-fold cross-validation grouped by item)? - and, per entry,
*notes* a team can act on (:func:`entry_notes`): which way the judge leans on length, which
method wins out of sample and the gap from the published calibration to it, the length-only
rule's agreement, how much of the gain comes from judge ties broken, and the method recommended
by nested cross-validation with its nested figure. A *transfer* entry (kind ``"transfer"``)
shows a calibration fitted on one family applied to another family's labels.  Definitions of
every figure: docs/calibration.md; how to read them: docs/report.md.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence

import numpy as np

from judgecal.report.tables import Col
from judgecal.errors import InputError

SCHEMA = "judgecal.report/1"

#: Methods in the order the report shows them (the fitted calibration last).
METHOD_ORDER = ("raw", "linear", "lowess", "lc_glm", "polylog")
METHOD_LABELS = {
    "raw": "raw (no calibration)",
    "linear": "linear penalty",
    "lowess": "LOWESS residual (Huang et al. 2025)",
    "lc_glm": "length-controlled GLM (AlpacaEval 2.0)",
    "polylog": "calibration (polylog, fitted)",
}
LENGTH_UNITS = ("tokens", "words", "chars", "bytes")

#: Calibrated and raw agreement differing by more than this (a share, i.e. 10 points) is flagged.
AGREEMENT_GAP_WARN = 0.10
#: Spearman rho differing by more than this is flagged (pointwise).
SPEARMAN_GAP_WARN = 0.10
#: A raw score value held by at least this share of responses makes the judge output "near constant".
NEAR_CONSTANT_SHARE = 0.80
#: At least this share of calibrated scores stuck at a scale end is flagged.
CLIPPED_SHARE_WARN = 0.25

PAIRWISE_KEYS = ("agreement", "agreement_ci", "agreement_cv", "agreement_cv_ci", "agreement_cv_gain", "agreement_cv_gain_ci",
                 "verbosity_win_rate", "verbosity_win_rate_ci", "length_preference",
                 "length_preference_ci", "slope", "slope_ci", "verbosity_slope")
POINTWISE_KEYS = ("spearman", "spearman_ci", "spearman_cv", "kendall", "kendall_cv", "mae",
                  "mae_ci", "mae_cv", "verbosity_win_rate", "verbosity_win_rate_ci", "slope",
                  "slope_ci", "verbosity_slope")
VERBOSITY_KEYS = ("verbosity_win_rate", "verbosity_win_rate_ci", "verbosity_slope")
PAIRWISE_KEYS = PAIRWISE_KEYS + ("gain_from_ties_cv", "gain_from_decisive_cv", "raw_ties_broken_cv",
                                 "minus_length_rule_cv")
TRANSFER_KEYS = ("agreement", "agreement_ci", "gain", "gain_ci", "gain_from_ties", "raw_ties_broken",
                 "length_preference", "fitted_on")
KINDS = ("pairwise", "pointwise", "verbosity_only", "transfer")
PARAM_KEYS = ("gamma", "gamma_ci", "p", "p_ci", "bt_scale", "bt_scale_ci", "l_ref", "loss",
              "converged", "at_bound", "message", "n_bootstrap_ok", "density", "short_floor")

ENTRY_FIELDS = ("task_family", "judge", "evaluation")


# ----------------------------------------------------------------------------- helpers
def _num(x) -> float | None:
    """A finite float, or None (missing, NaN, inf or not a number)."""
    if x is None or isinstance(x, bool):
        return None
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _ci(x) -> list[float] | None:
    if not isinstance(x, Sequence) or isinstance(x, str) or len(x) != 2:
        return None
    lo, hi = _num(x[0]), _num(x[1])
    return None if lo is None or hi is None else [lo, hi]


def _value(key: str, x):
    if key.endswith("_ci"):
        return _ci(x)
    return _num(x)


def _finite(values) -> np.ndarray:
    """A float array of the finite values of a (possibly None-holding) list."""
    if not values:
        return np.empty(0)
    arr = np.asarray(values, dtype=float).reshape(-1)  # None becomes NaN
    return arr[np.isfinite(arr)]


def _check_entry(i: int, entry) -> None:
    if not isinstance(entry, Mapping):
        raise InputError(f"report entry {i}: expected a dict, got {type(entry).__name__}")
    for key in ENTRY_FIELDS:
        if key not in entry:
            raise InputError(f"report entry {i}: missing field {key!r}")
    ev = entry["evaluation"]
    if not isinstance(ev, Mapping) or ev.get("kind") not in KINDS:
        raise InputError(f"report entry {i}: field 'evaluation' is not an evaluation dict "
                         f"(kind must be pairwise, pointwise, verbosity_only or transfer)")
    unit = entry.get("length_unit")
    if unit is not None and unit not in LENGTH_UNITS:
        raise InputError(f"report entry {i}: field 'length_unit' must be one of "
                         f"{', '.join(LENGTH_UNITS)}, got {unit!r}")


def _methods(ev: Mapping) -> dict:
    kind = ev["kind"]
    keys = {"pairwise": PAIRWISE_KEYS, "pointwise": POINTWISE_KEYS, "transfer": TRANSFER_KEYS}.get(kind, VERBOSITY_KEYS)
    src = ev.get("methods") or {}
    names = [m for m in METHOD_ORDER if m in src] + sorted(m for m in src if m not in METHOD_ORDER)
    out = {}
    for name in names:
        m = src[name] or {}
        row = {"label": METHOD_LABELS.get(name, name)}
        row.update({k: (m.get(k) if k == "fitted_on" else _value(k, m.get(k))) for k in keys})
        row["n_bootstrap"] = m.get("n_bootstrap")
        row["params"] = m.get("params") or {}
        out[name] = row
    return out


def _params(ev: Mapping) -> dict | None:
    p = ev.get("params")
    if not p:
        return None
    out = {}
    for k in PARAM_KEYS:
        if k not in p:
            continue
        v = p[k]
        if k.endswith("_ci"):
            v = _ci(v)
        elif isinstance(v, float):
            v = _num(v)
        out[k] = v
    return out


# ----------------------------------------------------------------------------- verdict
def _fmt_diff(d: float, pointwise: bool) -> str:
    return f"{d:+.3f}" if pointwise else f"{100 * d:+.1f} points"


def _fmt_range(ci: list[float], pointwise: bool) -> str:
    if pointwise:
        return f"[{ci[0]:+.3f}, {ci[1]:+.3f}]"
    return f"[{100 * ci[0]:+.1f}, {100 * ci[1]:+.1f}] points"


def verdict(ev: Mapping) -> dict:
    """Plain-language verdict: does the fitted calibration help OUT OF SAMPLE?

    Compares the cross-validated expert agreement of ``polylog`` (pairwise: agreement_cv;
    pointwise: spearman_cv) with the raw judge's, difference d = calibrated - raw:

    * a paired bootstrap CI of d (``methods.polylog.agreement_cv_gain_ci`` or
      ``spearman_cv_gain_ci``, when the evaluation provides it): "helps" if the CI lies above
      0, "hurts" if below 0, else "no measurable effect";
    * otherwise the two methods' own CV CIs (``agreement_cv_ci``): "helps"/"hurts" only when
      they do not overlap (a conservative test), else "no measurable effect";
    * no CI at all (``n_bootstrap`` = 0, or pointwise without a CV CI): "undetermined", with d;
    * no fit or no cross-validation: "not fitted" / "undetermined" with the reason.

    A "helps" whose fit's nested selection advises "keep raw" is "no measurable effect" (the
    calibration's own CV gain clears zero, but not once it is weighed against raw and the other
    methods). A fit that is not identified (``identification.identified`` False,
    :mod:`judgecal.calibrate.identify`) is "not identified" whatever its figures say, unless it
    hurts ("hurts", with the reason).

    Returns {code, text, metric, raw, calibrated, difference, difference_ci, rule}, code one of
    "helps", "no measurable effect", "hurts", "undetermined", "not identified", "not fitted".
    """
    base = {"metric": None, "raw": None, "calibrated": None, "difference": None,
            "difference_ci": None, "rule": None}
    if not ev.get("fitted"):
        reason = ev.get("no_fit_reason") or "no calibration was fitted"
        return {**base, "code": "not fitted", "text": f"No calibration: {reason}."}
    if ev["kind"] == "transfer":
        return _transfer_verdict(ev, base)
    pointwise = ev["kind"] == "pointwise"
    metric = "spearman_cv" if pointwise else "agreement_cv"
    methods = ev.get("methods") or {}
    raw, cal = methods.get("raw") or {}, methods.get("polylog") or {}
    r, c = _num(raw.get(metric)), _num(cal.get(metric))
    base["metric"] = metric
    ident = ev.get("identification") or {}
    if r is None or c is None:
        text = ("Undetermined: no cross-validated figure (too few items for the folds, "
                "or the cross-validation failed); in-sample figures overstate any gain.")
        if ident.get("identified") is False:  # the stronger finding comes first
            why = "; ".join(ident.get("reasons") or [])
            return {**base, "code": "not identified", "rule": "no cross-validated figure",
                    "text": f"Not identified: {why}. Do not publish this calibration. ({text})"}
        return {**base, "code": "undetermined", "rule": "no cross-validated figure", "text": text}
    d = c - r
    base.update(raw=r, calibrated=c, difference=d)
    what = "Spearman rho with the experts" if pointwise else "expert agreement"
    gain_ci = _ci(cal.get(metric + "_gain_ci"))
    r_ci, c_ci = _ci(raw.get(metric + "_ci")), _ci(cal.get(metric + "_ci"))
    if gain_ci is not None:
        rule = "paired bootstrap CI of the difference"
        base["difference_ci"] = gain_ci
        code = "helps" if gain_ci[0] > 0 else "hurts" if gain_ci[1] < 0 else "no measurable effect"
        ci_txt = f"95% CI of the difference {_fmt_range(gain_ci, pointwise)}"
    elif r_ci is not None and c_ci is not None:
        rule = "non-overlapping 95% CIs of the two cross-validated figures"
        code = ("helps" if c_ci[0] > r_ci[1] else "hurts" if c_ci[1] < r_ci[0]
                else "no measurable effect")
        ci_txt = "the two 95% CIs " + ("overlap" if code == "no measurable effect" else "do not overlap")
    else:
        rule = "no confidence interval"
        code = "undetermined"
        ci_txt = "no confidence interval to test it against"
    base["rule"] = rule
    head = {"helps": "Calibration helps out of sample",
            "hurts": "Calibration hurts out of sample",
            "no measurable effect": "No measurable effect out of sample",
            "undetermined": "Undetermined out of sample"}[code]
    text = (f"{head}: cross-validated {what} {r:.3f} raw vs {c:.3f} calibrated "
            f"({_fmt_diff(d, pointwise)}; {ci_txt}).")
    sel = ev.get("selection") or {}
    if code == "helps" and sel.get("decision") == "keep raw":  # no badge the nested evidence does not back
        code = "no measurable effect"
        text = (f"No measurable effect after selection: the calibration's own cross-validated gain clears zero "
                f"({_fmt_diff(d, pointwise)}; {ci_txt}), but the nested selection, which weighs it against raw and "
                f"the other methods, advises keep raw ({sel.get('reason')}).")
    gamma = _num(((ev.get("params") or {}).get("gamma")))
    if gamma == 0 and code in ("hurts", "helps"):
        text += (" The fit on all the data has gamma = 0: applied as stored it changes no score; the "
                 "out-of-sample figure is that of refitting the calibration on each fold.")
    if ident.get("identified") is False:  # never a green badge on a fit the labels do not determine
        why = "; ".join(ident.get("reasons") or [])
        if code == "hurts":
            text += f" The fit is also not identified: {why}."
        else:
            code = "not identified"
            text = f"Not identified: {why}. Do not publish this calibration. (Out of sample: {text[0].lower()}{text[1:]})"
    return {**base, "code": code, "text": text}


def _transfer_verdict(ev: Mapping, base: dict) -> dict:
    """Verdict of a transfer entry: what would be applied, judged on the target's labels (nothing
    is refitted there, so the figures are out of sample as they stand).

    Two things can be applied: the source's **recommended** method (nested-CV advice; "keep raw"
    applies nothing) and the stored **polylog** calibration (what the score leaderboard applies).
    "hurts" when either one's paired 95% CI of (method - raw) agreement lies below zero, naming
    it; otherwise the verdict of the recommended method when it calibrates ("helps" when its CI
    lies above zero, else "no measurable effect"), else that of the polylog calibration."""
    methods = ev.get("methods") or {}
    raw, cal = methods.get("raw") or {}, methods.get("polylog") or {}
    rec = ev.get("recommended") or {}
    r, c = _num(raw.get("agreement")), _num(cal.get("agreement"))
    src, tgt = ev.get("source_family") or "the source family", ev.get("target_family") or "this family"
    base.update(metric="agreement", raw=r, calibrated=c, difference=None if r is None or c is None else c - r,
                rule="paired bootstrap CI of the difference on the target's items")
    ci = _ci(cal.get("gain_ci"))
    base["difference_ci"] = ci
    if r is None or c is None:
        return {**base, "code": "undetermined", "text": "Undetermined: no agreement figure on the target."}

    def code_of(gci, decided=None, side=None):
        if gci is None:
            return "undetermined"
        if decided is False:  # the side of zero within Monte Carlo error at the most resamples allowed
            return "undecided"
        if side is not None:  # judgecal.calibrate.resample.decided_mean_ci: the tail shares decide
            return {"above": "helps", "below": "hurts", "spans": "no measurable effect"}[side]
        return "helps" if gci[0] > 0 else "hurts" if gci[1] < 0 else "no measurable effect"

    applied = []  # (label, agreement, gain, gain CI, decided, resamples, side)
    if rec.get("decision") == "calibrate" and _num(rec.get("agreement")) is not None:
        applied.append((f"the recommended method {rec.get('name')}", _num(rec.get("agreement")), _num(rec.get("gain")),
                        _ci(rec.get("gain_ci")), rec.get("gain_ci_decided"), rec.get("gain_ci_resamples"),
                        rec.get("gain_ci_side")))
    applied.append(("the stored polylog calibration", c, c - r, ci, cal.get("gain_ci_decided"),
                    cal.get("gain_ci_resamples"), cal.get("gain_ci_side")))
    hurt = [a for a in applied if code_of(a[3], a[4], a[6]) == "hurts"]
    undecided = [a for a in applied if code_of(a[3], a[4], a[6]) == "undecided"]
    label, a_val, gain, gci, decided, n_res, side = hurt[0] if hurt else undecided[0] if undecided else applied[0]
    code = code_of(gci, decided, side)
    base["difference_ci"], base["resamples"], base["decided"] = gci, n_res, decided
    ci_txt = ("no confidence interval to test it against" if gci is None else
              f"95% CI of the difference {_fmt_range(gci, False)}" + (f", {n_res} resamples" if n_res else ""))
    head = {"helps": "Transfers and helps", "hurts": "Transfer hurts",
            "no measurable effect": "No measurable effect after transfer",
            "undetermined": "Undetermined after transfer",
            "undecided": f"Undecided at {n_res} resamples after transfer"}[code]
    text = (f"{head}: {label}, fitted on {src} and applied to {tgt}'s expert labels, agreement {r:.3f} raw vs "
            f"{a_val:.3f} ({_fmt_diff(gain, False)}; {ci_txt}).")
    if code == "undecided":
        text += (" Whether the interval lies above, below or across zero is within Monte Carlo error even at that "
                 "many resamples: the sign of the effect is not decided (a gate treats it as a failure).")
    others = [a for a in applied if a[0] != label]
    for o_label, o_val, o_gain, o_ci, _, _, _ in others:
        o_ci_txt = "" if o_ci is None else f"; 95% CI {_fmt_range(o_ci, False)}"
        text += f" {o_label[0].upper()}{o_label[1:]}: {o_val:.3f} ({_fmt_diff(o_gain, False)}{o_ci_txt})."
    if rec.get("decision") == "keep raw":
        text += f" The source's recommendation is keep raw ({rec.get('reason')}): following it applies nothing."
    elif rec.get("error"):
        text += f" The recommended method {rec.get('name')} could not be evaluated: {rec['error']}."
    elif not rec:
        text += (" The source fit has no recommendation (fitted with --no-nested, too few items, or before judgecal "
                 "weighed raw as an answer): refit it to judge its recommended method.")
    ident = ev.get("identification") or {}
    # a verdict that fails a gate (hurts, undecided) stays that code: "not identified" would let
    # check --allow-unidentified pass it
    if label == "the stored polylog calibration" and ident.get("identified") is False and code not in ("hurts",
                                                                                                        "undecided"):
        code = "not identified"
        text = (f"Not identified: the source calibration is not determined by its labels ("
                + "; ".join(ident.get("reasons") or []) + f"). Do not publish it. (On the target: {text[0].lower()}{text[1:]})")
    base.update(calibrated=a_val, difference=gain, difference_ci=gci, applied=label)
    return {**base, "code": code, "text": text}


def _pts(x: float | None, signed: bool = True) -> str:
    return DASH if x is None else (f"{100 * x:+.1f}" if signed else f"{100 * x:.1f}")


def entry_notes(entry: Mapping) -> list[str]:
    """Plain sentences a team can act on (shown under the verdict in every format): which way
    the judge leans on length, the method that wins out of sample and the gap from the
    published calibration to it (95% CI), the length-only rule's agreement, how much of the
    calibration's gain comes from judge ties broken, and the method recommended by nested
    cross-validation with its nested figure. Empty for verbosity-only entries."""
    notes: list[str] = []
    kind = entry["kind"]
    lean = entry.get("lean") or {}
    if lean.get("value") is not None:
        v, ci = lean["value"], _ci(lean.get("ci"))
        ci_txt = "" if ci is None else f" [{ci[0]:+.3f}, {ci[1]:+.3f}]"
        what = {"longer": "leans towards LONGER answers", "shorter": "leans towards SHORTER answers",
                "none": "shows no measurable lean on length", "undetermined": "has an undetermined lean on length"}
        measure = ("judge minus expert length preference" if kind == "pairwise"
                   else "slope of (judge - expert) score on ln L")
        sign_note = ""
        if lean.get("direction") == "shorter" and not lean.get("signed"):
            sign_note = " A gamma >= 0 penalty cannot correct this: refit with --signed."
        notes.append(f"Lean: the judge {what.get(lean.get('direction'), 'has an undetermined lean')} "
                     f"({measure} {v:+.3f}{ci_txt}).{sign_note}")
    cmp_ = entry.get("comparison") or {}
    if kind == "pairwise" and cmp_.get("best_method"):
        best, gap, gci = cmp_["best_method"], _num(cmp_.get("gap")), _ci(cmp_.get("gap_ci"))
        label = METHOD_LABELS.get(best, best)
        if best == "polylog":
            notes.append(f"Best out of sample: the published calibration itself (CV agreement {cmp_['best_agreement_cv']:.3f}).")
        else:
            gtxt = "" if gap is None else f"; gap to the published calibration {_pts(gap)} points" + (
                "" if gci is None else f" [{_pts(gci[0])}, {_pts(gci[1])}]")
            notes.append(f"Best out of sample: {label} (CV agreement {cmp_['best_agreement_cv']:.3f}{gtxt}).")
    elif kind == "pointwise" and cmp_.get("best_method"):
        best, gap, gci = cmp_["best_method"], _num(cmp_.get("gap")), _ci(cmp_.get("gap_ci"))
        gtxt = "" if gap is None else f"; gap to the published calibration {gap:+.3f}" + (
            "" if gci is None else f" [{gci[0]:+.3f}, {gci[1]:+.3f}]")
        notes.append(f"Best out of sample: {METHOD_LABELS.get(best, best)} (CV Spearman {cmp_['best_spearman_cv']:+.3f}{gtxt}).")
    elif kind == "transfer" and cmp_.get("best_method"):
        best, gap, gci = cmp_["best_method"], _num(cmp_.get("gap")), _ci(cmp_.get("gap_ci"))
        gtxt = "" if gap is None or best == "polylog" else f"; gap to the transferred calibration {_pts(gap)} points" + (
            "" if gci is None else f" [{_pts(gci[0])}, {_pts(gci[1])}]")
        notes.append(f"Best on the target: {METHOD_LABELS.get(best, best)} (agreement {cmp_['best_agreement']:.3f}{gtxt}).")
    rule = entry.get("length_rule") or {}
    if rule.get("agreement") is not None:
        rci = _ci(rule.get("agreement_ci"))
        d, dci = _num(rule.get("polylog_minus_rule")), _ci(rule.get("polylog_minus_rule_ci"))
        txt = f"Length-only rule (prefer the shorter answer, no judge): agreement {rule['agreement']:.3f}"
        txt += "" if rci is None else f" [{rci[0]:.3f}, {rci[1]:.3f}]"
        if d is not None:
            txt += f"; calibration minus rule {_pts(d)} points" + ("" if dci is None else f" [{_pts(dci[0])}, {_pts(dci[1])}]")
        notes.append(txt + ".")
    cal = (entry.get("methods") or {}).get("polylog") or {}
    key_t, key_g = ("gain_from_ties_cv", "agreement_cv_gain") if kind == "pairwise" else ("gain_from_ties", "gain")
    gt, g = _num(cal.get(key_t)), _num(cal.get(key_g))
    if kind in ("pairwise", "transfer") and gt is not None and g is not None:
        broken = cal.get("raw_ties_broken_cv" if kind == "pairwise" else "raw_ties_broken")
        ties = entry.get("judge_ties")
        notes.append(f"Judge ties: of the calibration's gain of {_pts(g)} points over raw, {_pts(gt)} points come "
                     f"from pairs the raw judge tied ({int(broken) if broken is not None else '-'} of "
                     f"{ties if ties is not None else '-'} raw ties decided), {_pts(g - gt)} from pairs it had decided.")
    sel = entry.get("selection") or {}
    if sel.get("recommended"):
        notes.append(recommendation_text(sel))
    return notes


def _fig_txt(v, ci) -> str:
    v = _num(v)
    ci = _ci(ci)
    return DASH if v is None else f"{v:.3f}" + ("" if ci is None else f" [{ci[0]:.3f}, {ci[1]:.3f}]")


def recommendation_text(sel: Mapping) -> str:
    """One sentence: the nested cross-validated recommendation ("keep raw" or a method) with the
    recommended method's own out-of-sample figure, how many outer folds chose the candidate and,
    for keep raw, the reason (a selection stored before "keep raw" existed is said as such)."""
    metric = "agreement" if sel.get("metric") == "agreement" else "Spearman"
    units = ", ".join(sel.get("units") or [])
    chosen = sel.get("chosen_in_outer_folds") or []
    if "decision" not in sel:  # stored before judgecal weighed raw as an answer
        return (f"Nested CV (stored before \"keep raw\" was an answer; refit to get a recommendation): "
                f"{sel['recommended']} ({sel.get('recommended_description')}); nested-CV {metric} "
                f"{_fig_txt(sel.get('nested'), sel.get('nested_ci'))}.")
    cand = sel.get("candidate")
    n_in = sel.get("candidate_chosen_in")
    stab = f"chosen in {n_in} of {len(chosen)} outer folds" if chosen and n_in is not None else ""
    if sel["decision"] == "keep raw":
        txt = (f"Recommended (nested CV over raw, methods, bounds and length units {units}): keep raw "
               f"(raw {metric} {_fig_txt(sel.get('raw'), sel.get('raw_ci'))}): {sel.get('reason')}")
        if cand and cand != "raw":
            txt += (f"; best candidate {cand}, own out-of-sample {metric} "
                    f"{_fig_txt(sel.get('candidate_nested'), sel.get('candidate_nested_ci'))}"
                    + (f", {stab}" if stab else ""))
        return txt + "."
    return (f"Recommended (nested CV over raw, methods, bounds and length units {units}): {sel['recommended']} "
            f"({sel.get('recommended_description')}); its own out-of-sample {metric} "
            f"{_fig_txt(sel.get('nested'), sel.get('nested_ci'))} vs raw {_fig_txt(sel.get('raw'), sel.get('raw_ci'))}; "
            f"{sel.get('reason')}.")


def recommendation(entry: Mapping) -> dict | None:
    """{decision ("calibrate" | "keep raw" | None for a selection stored before keep raw was an
    answer), reason, method, name, unit, description, nested, nested_ci (the recommended method's
    own out-of-sample figure), nested_gain, nested_gain_ci, candidate, candidate_chosen_in,
    outer_folds, metric, text} of the nested selection, or None."""
    tr = entry.get("recommended_on_target")
    if entry.get("kind") == "transfer" and tr:  # the source's advice, measured on the target's labels
        keep = tr.get("decision") == "keep raw"
        return {"decision": tr.get("decision"), "reason": tr.get("reason"), "name": "raw" if keep else tr.get("name"),
                "method": None, "unit": tr.get("unit"), "description": tr.get("description"), "metric": "agreement",
                "nested": _num(tr.get("agreement")), "nested_ci": _ci(tr.get("agreement_ci")),
                "nested_gain": _num(tr.get("gain")), "nested_gain_ci": _ci(tr.get("gain_ci")), "candidate": None,
                "candidate_chosen_in": None, "outer_folds": None, "on_target": True,
                "text": (f"The source's advice is keep raw ({tr.get('reason')})." if keep else
                         f"The source recommends {tr.get('name')}: agreement on the target "
                         f"{_fig_txt(tr.get('agreement'), tr.get('agreement_ci'))}"
                         + ("" if tr.get("error") is None else f" (not evaluated: {tr['error']})") + ".")}
    sel = entry.get("selection") or {}
    if not sel.get("recommended"):
        return None
    return {"decision": sel.get("decision"), "reason": sel.get("reason"),
            "name": sel["recommended"], "method": sel.get("recommended_method"), "unit": sel.get("recommended_unit"),
            "description": sel.get("recommended_description"), "metric": sel.get("metric"),
            "nested": _num(sel.get("nested")), "nested_ci": _ci(sel.get("nested_ci")),
            "nested_gain": _num(sel.get("nested_gain")), "nested_gain_ci": _ci(sel.get("nested_gain_ci")),
            "candidate": sel.get("candidate"), "candidate_chosen_in": sel.get("candidate_chosen_in"),
            "outer_folds": len(sel.get("chosen_in_outer_folds") or []) or None,
            "text": recommendation_text(sel)}


# ----------------------------------------------------------------------------- flags
def entry_flags(ev: Mapping) -> list[dict]:
    """The evaluation's ``flags`` as [{"code", "message"}] (every renderer shows each message;
    codes: "empty_answers", "constant_answers", "truncated_answers", "far_short_answers" of
    :mod:`judgecal.calibrate.guards`, "not_identified", ...; a flag without a message shows its
    code). An evaluation stored before flags existed has none."""
    out = []
    for f in ev.get("flags") or []:
        if isinstance(f, Mapping) and f.get("code"):
            out.append({"code": str(f["code"]), "message": str(f.get("message") or f["code"])})
    return out


def flag_lines(entry: Mapping) -> list[str]:
    """One display line per flag of a report entry: ``code: message``."""
    return [f"{f['code']}: {f['message']}" for f in entry.get("flags") or []]


# ----------------------------------------------------------------------------- warnings
def _has(warnings: list[str], *needles: str) -> bool:
    return any(all(n in w for n in needles) for w in warnings)


def _report_warnings(ev: Mapping, warnings: list[str]) -> list[str]:
    """Report-level warnings that the evaluation did not already give (no duplicates)."""
    extra: list[str] = []
    methods = ev.get("methods") or {}
    raw, cal = methods.get("raw") or {}, methods.get("polylog") or {}
    if ev.get("fitted") and ev["kind"] != "transfer":
        pointwise = ev["kind"] == "pointwise"
        metric = "spearman" if pointwise else "agreement"
        gap = SPEARMAN_GAP_WARN if pointwise else AGREEMENT_GAP_WARN
        for suffix, where, needle in (("", "in-sample", "in-sample"),
                                      ("_cv", "out of sample (cross-validated)", "out of sample")):
            r, c = _num(raw.get(metric + suffix)), _num(cal.get(metric + suffix))
            if r is None or c is None or abs(c - r) <= gap:
                continue
            if _has(warnings, "differ by", needle):
                continue
            size = f"{c - r:+.3f}" if pointwise else f"{100 * (c - r):+.1f} points"
            extra.append(f"calibrated (polylog) and raw {'Spearman' if pointwise else 'expert agreement'} "
                         f"differ by {size} {where}")
        at_bound = ((ev.get("params") or {}).get("at_bound")) or {}
        for name, where in at_bound.items():
            if where and not _has(warnings, "polylog", f"{name} is at its"):
                extra.append(f"polylog: {name} is at its {where} bound; widen the bounds or distrust it")
        n = ev.get("n") or 0
        if n and n < 50 and not _has(warnings, f"only {n} labelled"):
            extra.append(f"only {n} expert labels: confidence intervals are wide")
    pts = (ev.get("points") or {})
    lab = pts.get("labelled") or pts.get("verbosity") or {}
    scores = _finite(lab.get("score_raw"))
    if scores.size and not _has(warnings, "the judge output is constant"):
        values, counts = np.unique(scores, return_counts=True)
        share = counts.max() / scores.size
        if values.size == 1:
            extra.append("every judge score is the same: the judge output is constant")
        elif share >= NEAR_CONSTANT_SHARE:
            extra.append(f"{share:.0%} of the judge scores are {values[counts.argmax()]:g}: the "
                         f"judge output is near constant, so every figure rests on the few others")
    cal_scores = _finite(lab.get("score_calibrated"))
    scale = ev.get("scale")
    if scale and len(scale) == 2 and (scale[0] is None or scale[1] is None):
        scale = None  # an unbounded scale: nothing lies outside it, nothing is clipped
    if scores.size and scale and len(scale) == 2:
        outside = int(np.count_nonzero((scores < float(scale[0])) | (scores > float(scale[1]))))
        if outside:
            extra.append(f"{outside} raw judge score(s) lie outside the declared scale "
                         f"[{float(scale[0]):g}, {float(scale[1]):g}]: check the scale given at import")
    if ev.get("fitted") and cal_scores.size and scores.size and scale and len(scale) == 2:
        lo, hi = float(scale[0]), float(scale[1])
        raw_ends = np.count_nonzero((scores <= lo) | (scores >= hi)) / scores.size
        cal_ends = np.count_nonzero((cal_scores <= lo) | (cal_scores >= hi)) / cal_scores.size
        share = cal_ends - raw_ends
        if share >= CLIPPED_SHARE_WARN and not _has(warnings, "at the ends of the scale"):
            extra.append(f"the calibration clips {share:.0%} more scores to the ends of the "
                         f"scale [{lo:g}, {hi:g}]: the penalty is strong for this scale")
    return extra


def withhold_in_sample(figures: Mapping, ident: Mapping) -> dict:
    """A not-identified polylog fit's method figures with its in-sample numbers withheld (None,
    CIs too): the labels do not determine gamma and p, so what the fit on all the data scores is
    noise (issue 23: no numbers from noise). The cross-validated figures (``*_cv``, the gains and
    their CIs) stay: they measure the fitting procedure out of sample, and the verdict reads
    them. ``withheld`` says why; the entry's ``params`` stay in JSON beside ``identification``
    for diagnosis, and the renderings show "not identified" instead of gamma and p."""
    why = "; ".join(str(r) for r in (ident.get("reasons") or [])) or "the labels do not determine gamma and p"
    out = {k: (v if k in ("label", "fitted_on") or "_cv" in k or "gain" in k else None) for k, v in figures.items()}
    out["withheld"] = f"in-sample figures withheld: not identified: {why}"
    return out


def _not_identified(entry: Mapping) -> bool:
    return (entry.get("identification") or {}).get("identified") is False and entry.get("kind") != "transfer"


# ----------------------------------------------------------------------------- report
def build_entry(entry: Mapping, index: int = 0) -> dict:
    """One report entry (see :func:`build_report`). Raises InputError on a malformed entry."""
    _check_entry(index, entry)
    ev = entry["evaluation"]
    warnings = [str(w) for w in (ev.get("warnings") or [])]
    reason = ev.get("no_fit_reason")
    if reason and reason not in warnings:
        warnings.insert(0, str(reason))
    warnings += _report_warnings(ev, warnings)
    out = {
        "task_family": str(entry["task_family"]),
        "judge": str(entry["judge"]),
        "source_family": entry.get("source_family") or ev.get("source_family"),
        "calibration_id": entry.get("calibration_id"),
        "created_at": None if entry.get("created_at") is None else str(entry["created_at"]),
        "length_unit": entry.get("length_unit"),
        "tokenizer": entry.get("tokenizer"),
        "kind": ev["kind"],
        "fitted": bool(ev.get("fitted")),
        "no_fit_reason": reason,
        "n": ev.get("n"),
        "n_items": ev.get("n_items"),
        "n_verbosity": ev.get("n_verbosity"),
        "l_ref": _num(ev.get("l_ref")),
        "scale": ev.get("scale"),
        "p_bounds": ev.get("p_bounds"),
        "folds": ev.get("folds"),
        "n_bootstrap": ev.get("n_bootstrap"),
        "seed": ev.get("seed"),
        "density": ev.get("density"),
        "params": _params(ev),
        "expert_length_preference": _num(ev.get("expert_length_preference")),
        "raw_slope": _num(ev.get("raw_slope")),
        "methods": _methods(ev),
        "signed": bool(ev.get("signed", False)),
        "lean": ev.get("lean"),
        "length_rule": ev.get("length_rule"),
        "comparison": ev.get("comparison"),
        "selection": ev.get("selection"),
        "judge_ties": ev.get("judge_ties"),
        "identification": ev.get("identification"),
        "recommended_on_target": ev.get("recommended") if ev["kind"] == "transfer" else None,
        "verdict": verdict(ev),
        "flags": entry_flags(ev),
        "warnings": warnings,
    }
    ident = out.get("identification") or {}
    if ident.get("identified") is False and out["kind"] in ("pairwise", "pointwise") and "polylog" in out["methods"]:
        out["methods"]["polylog"] = withhold_in_sample(out["methods"]["polylog"], ident)
    out["rating_summary"] = ev.get("summary") or "greedy"
    out["summaries"] = ev.get("summaries")
    out["recommendation"] = recommendation(out)
    out["notes"] = entry_notes(out) + summary_lines(ev.get("summaries"), ev.get("summary"), ev.get("risk_k"))
    return out


def _pct_ci(x, ci, signed=False) -> str:
    if x is None:
        return "n/a"
    txt = f"{100 * x:+.1f}" if signed else f"{100 * x:.1f}%"
    return txt + (f" [{100 * ci[0]:+.1f}, {100 * ci[1]:+.1f}]" if signed and ci else
                  f" [{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]" if ci else "")


def _rho_ci(x, ci, signed=False) -> str:
    if x is None:
        return "n/a"
    f = "{:+.3f}" if signed else "{:.3f}"
    return f.format(x) + (f" [{f.format(ci[0])}, {f.format(ci[1])}]" if ci else "")


def summary_lines(comp: Mapping | None, used: str | None = None, risk_k: float | None = None) -> list[str]:
    """The rating-summary lines of an entry or fit (every format shows them): the summary the
    fit used, then per summary (greedy, mean, risk-averse) the tie rate of the labelled pairs and
    the out-of-sample figure with its 95% CI, raw and after the polylog calibration, the paired
    gain over greedy (CI) and the verbosity win-rate, then the recommendation ("keep greedy"
    unless a gain's CI is above zero). One line saying why when the summaries were not compared
    although some ratings carry a distribution; nothing for fits stored before summaries or
    judges without any distribution (and greedy fits)."""
    from judgecal.calibrate.summaries import label

    used = used or "greedy"
    k = 1.0 if risk_k is None else float(risk_k)
    lines = [] if used == "greedy" else [f"rating summary: this calibration is fitted on the {label(used, k)} summary"]
    if not comp:
        return lines
    if not comp.get("available"):
        if comp.get("n_ok") and comp.get("n_without_distribution", 0) < comp.get("n_ok", 0):
            lines.append(f"rating summaries: {comp.get('reason')}")
        return lines
    pairwise = str(comp.get("figure", "")).startswith("expert agreement")
    fig = _pct_ci if pairwise else _rho_ci
    head = (f"rating summaries out of sample ({comp.get('folds')}-fold CV, {comp.get('n')} labelled "
            f"{'pairs' if pairwise else 'responses'}; {comp.get('figure')}; raw / after the polylog calibration):")
    lines.append(head)
    for name, r in (comp.get("summaries") or {}).items():
        parts = [f"{label(name, comp.get('risk_k', k))}:"]
        if r.get("tie_rate") is not None:
            parts.append(f"ties {100 * r['tie_rate']:.1f}%,")
        parts.append(f"raw {fig(r.get('figure_cv'), r.get('figure_cv_ci'))}, calibrated "
                     f"{fig(r.get('calibrated_cv'), r.get('calibrated_cv_ci'))}")
        if name != "greedy":
            parts.append(f"; gain over greedy raw {fig(r.get('gain_cv'), r.get('gain_cv_ci'), True)}, calibrated "
                         f"{fig(r.get('calibrated_gain_cv'), r.get('calibrated_gain_cv_ci'), True)}")
        if r.get("verbosity_win_rate") is not None:
            parts.append(f"; verbosity win-rate {100 * r['verbosity_win_rate']:.1f}% raw, "
                         f"{100 * (r.get('verbosity_win_rate_calibrated') or 0):.1f}% calibrated "
                         f"({r.get('verbosity_pairs')} pairs, ties {100 * (r.get('verbosity_tie_rate') or 0):.1f}%)")
        lines.append("  " + " ".join(parts).replace(" ;", ";"))
    rec = comp.get("recommended") or "greedy"
    lines.append(f"rating summary recommended: {label(rec, comp.get('risk_k', k))} ({comp.get('reason')})")
    return lines


def build_report(entries: Sequence[Mapping]) -> dict:
    """The whole report: ``{"schema", "n_entries", "entries": [...], "warnings": [...]}``.

    Each output entry holds: task_family, judge, calibration_id, created_at, length_unit,
    tokenizer, kind ("pairwise" | "pointwise" | "verbosity_only"), fitted, no_fit_reason, n
    (labelled pairs; pointwise: responses), n_items, n_verbosity (concise/verbose pairs), l_ref
    (in ``length_unit``), scale, p_bounds, folds, n_bootstrap, seed, density, params (gamma, p,
    bt_scale with ``*_ci`` [2.5, 97.5] percentiles, converged, at_bound ...; None when not
    fitted), expert_length_preference, raw_slope, methods ({name: figures} in the order raw,
    linear, lowess, lc_glm, polylog; pairwise figures: agreement, agreement_cv,
    verbosity_win_rate, length_preference, slope each with ``*_ci``; pointwise: spearman,
    kendall, mae (+ ``_cv``), verbosity_win_rate, slope; shares in [0, 1], slopes in score
    units per nat of length; None = does not apply), verdict (:func:`verdict`), warnings (the
    evaluation's plus report-level ones, no duplicates).

    Top-level ``warnings``: duplicated (task family, judge) entries. Entries keep their order,
    except that transfer entries whose verdict is "hurts" come first (a calibration that lowers
    agreement where it would be applied is the first thing a team must read). Pure; the result passes ``json.dumps(..., allow_nan=False)``.

    Raises:
        InputError: an entry is not a dict, lacks task_family / judge / evaluation, or its
        evaluation has no known ``kind`` (the message names the entry and field).
    """
    if isinstance(entries, Mapping) or not isinstance(entries, Sequence):
        raise InputError("report entries must be a list of dicts")
    out = [build_entry(e, i) for i, e in enumerate(entries)]
    out.sort(key=lambda e: not (e["kind"] == "transfer" and e["verdict"]["code"] == "hurts"))  # stable
    seen: dict[tuple[str, str], int] = {}
    top: list[str] = []
    for e in out:
        key = (e["task_family"], e["judge"])
        seen[key] = seen.get(key, 0) + 1
    for (fam, judge), count in seen.items():
        if count > 1:
            top.append(f"{count} entries for task family {fam!r} and judge {judge!r}")
    return {"schema": SCHEMA, "n_entries": len(out), "entries": out, "warnings": top}


def report_json(report: Mapping) -> str:
    """The report as indented JSON text (no NaN: every non-finite figure is already null)."""
    return json.dumps(report, indent=2, allow_nan=False, ensure_ascii=False) + "\n"


# ----------------------------------------------------------------------------- table model
# Shared by the text, Markdown and HTML renderers so that all three show the same strings.
DASH = "-"


def fmt_value(x, ci=None, *, signed: bool = False) -> str:
    """A figure to 3 decimals with its CI: ``0.920 [0.875, 0.960]``; None/NaN -> "-".
    ``signed``: always a sign, ``+0.126 [-0.135, +0.381]``."""
    v = _num(x)
    if v is None:
        return DASH
    f = "{:+.3f}" if signed else "{:.3f}"
    c = _ci(ci)
    return f.format(v) + (f" [{f.format(c[0])}, {f.format(c[1])}]" if c else "")


def fmt_signed(x, ci=None) -> str:
    """A signed figure (slope, correlation) to 3 decimals with its CI: ``+0.126 [-0.135, +0.381]``."""
    return fmt_value(x, ci, signed=True)


def fmt_num(x, digits: int = 3) -> str:
    v = _num(x)
    return DASH if v is None else f"{v:.{digits}f}"


def fmt_length(x) -> str:
    v = _num(x)
    if v is None:
        return DASH
    return f"{v:.0f}" if v == round(v) else f"{v:.1f}"


def method_table(entry: Mapping) -> tuple[list[str], list[list[str]]]:
    """(column headers, rows of display strings) of one report entry's methods table.

    Pairwise columns: method, agreement, agreement (CV), verbosity win-rate, length pref., slope
    (plus an "experts" row holding the experts' length preference and a row for the judge-free
    rule "prefer the shorter answer"). Transfer: method, agreement on target, gain vs raw,
    gain from raw ties, length pref., fitted on. Pointwise: method,
    Spearman, Spearman (CV), Kendall, Kendall (CV), MAE, MAE (CV), verbosity win-rate, slope.
    Verbosity only: method, verbosity win-rate, slope (verbosity pairs). CIs in brackets.
    """
    kind = entry["kind"]
    methods = entry["methods"]
    rows: list[list[str]] = []
    if kind == "pairwise":
        cols = ["method", "agreement", "agreement (CV)", "verbosity win-rate", "length pref.", "slope"]
        for m in methods.values():
            rows.append([m["label"], "not identified" if m.get("withheld") else fmt_value(m["agreement"], m["agreement_ci"]),
                         fmt_value(m["agreement_cv"], m["agreement_cv_ci"]),
                         fmt_value(m["verbosity_win_rate"], m["verbosity_win_rate_ci"]),
                         fmt_value(m["length_preference"], m["length_preference_ci"]),
                         fmt_signed(m["slope"], m["slope_ci"])])
        rows.append(["experts (gold labels)", DASH, DASH, DASH,
                     fmt_value(entry["expert_length_preference"]), DASH])
        rule = entry.get("length_rule") or {}
        if rule.get("agreement") is not None:
            rows.append(["prefer the shorter answer (no judge)", fmt_value(rule["agreement"], rule.get("agreement_ci")),
                         fmt_value(rule["agreement"], rule.get("agreement_ci")), DASH, "0.000", DASH])
    elif kind == "transfer":
        cols = ["method", "agreement on target", "gain vs raw", "gain from raw ties", "length pref.", "fitted on"]
        for m in methods.values():
            rows.append([m["label"], fmt_value(m["agreement"], m["agreement_ci"]),
                         fmt_signed(m["gain"], m["gain_ci"]), fmt_signed(m["gain_from_ties"]),
                         fmt_value(m["length_preference"]), str(m.get("fitted_on") or DASH)])
        rows.append(["experts (gold labels)", DASH, DASH, DASH, fmt_value(entry["expert_length_preference"]), DASH])
        rule = entry.get("length_rule") or {}
        if rule.get("agreement") is not None:
            rows.append(["prefer the shorter answer (no judge)", fmt_value(rule["agreement"], rule.get("agreement_ci")),
                         DASH, DASH, "0.000", DASH])
    elif kind == "pointwise":
        cols = ["method", "Spearman", "Spearman (CV)", "Kendall", "Kendall (CV)", "MAE", "MAE (CV)",
                "verbosity win-rate", "slope"]
        for m in methods.values():
            rows.append([m["label"], "not identified" if m.get("withheld") else fmt_signed(m["spearman"], m["spearman_ci"]),
                         fmt_signed(m["spearman_cv"]), fmt_signed(m["kendall"]),
                         fmt_signed(m["kendall_cv"]), fmt_value(m["mae"], m["mae_ci"]),
                         fmt_num(m["mae_cv"]),
                         fmt_value(m["verbosity_win_rate"], m["verbosity_win_rate_ci"]),
                         fmt_signed(m["slope"], m["slope_ci"])])
    else:
        cols = ["method", "verbosity win-rate", "slope (verbosity pairs)"]
        for m in methods.values():
            rows.append([m["label"], fmt_value(m["verbosity_win_rate"], m["verbosity_win_rate_ci"]),
                         fmt_signed(m["verbosity_slope"])])
    return cols, rows


def entry_title(entry: Mapping) -> str:
    """``task family · judge`` (transfer: ``... · calibration from SOURCE``; user text:
    renderers escape it)."""
    title = f"{entry['task_family']} · {entry['judge']}"
    if entry.get("kind") == "transfer":
        title += f" · calibration from {entry.get('source_family')}"
    return title


def entry_facts(entry: Mapping) -> list[str]:
    """Short facts of one entry: n, L_ref, gamma, p with CIs, folds, bootstrap, provenance."""
    unit = entry.get("length_unit") or "length units"
    if entry.get("tokenizer") and unit == "tokens":
        unit = f"tokens ({entry['tokenizer']})"
    facts = []
    if entry["kind"] == "transfer":
        facts.append(f"calibration fitted on {entry.get('source_family')}, applied to this family's "
                     f"{entry['n']} expert-labelled pairs ({entry['n_items']} items); nothing refitted here")
    if entry["kind"] == "pairwise":
        facts.append(f"n = {entry['n']} expert-labelled pairs ({entry['n_items']} items)")
    elif entry["kind"] == "pointwise":
        facts.append(f"n = {entry['n']} expert-scored responses ({entry['n_items']} items)")
    if entry.get("n_verbosity"):
        facts.append(f"{entry['n_verbosity']} concise/verbose pairs")
    if entry.get("l_ref") is not None:
        facts.append(f"L_ref = {fmt_length(entry['l_ref'])} {unit}")
    p = entry.get("params")
    if p and _not_identified(entry):
        facts.append("gamma, p: not identified (withheld: the labels do not determine them)")
    elif p:
        facts.append(f"gamma = {fmt_value(p.get('gamma'), p.get('gamma_ci'))}")
        facts.append(f"p = {fmt_value(p.get('p'), p.get('p_ci'))}")
    if p and p.get("short_floor") is not None:
        facts.append(f"short-side floor {p['short_floor']:g} of L_ref")
    if entry.get("signed"):
        facts.append("signed penalty (gamma may be negative)")
    sc = entry.get("scale")
    if sc and (sc[0] is None or sc[1] is None):
        facts.append("unbounded scale (no clip)")
    elif sc:
        facts.append(f"scale [{sc[0]:g}, {sc[1]:g}]")
    if entry.get("folds"):
        facts.append(f"{entry['folds']}-fold CV by item")
    if entry.get("n_bootstrap") is not None:
        facts.append(f"{entry['n_bootstrap']} bootstrap resamples (seed {entry.get('seed')})")
    prov = []
    if entry.get("calibration_id") is not None:
        prov.append(f"fit #{entry['calibration_id']}")
    if entry.get("created_at"):
        prov.append(str(entry["created_at"]))
    if prov:
        facts.append(", ".join(prov))
    return facts


#: Columns of text (left-aligned by the renderers); the others hold figures.
TEXT_COLUMNS = frozenset({"method", "task family", "judge", "kind", "verdict"})
SUMMARY_COLUMNS = ["task family", "judge", "kind", "n", "L_ref", "gamma", "p",
                   "raw (CV)", "calibrated (CV)", "verbosity win-rate raw → calibrated",
                   "best (CV)", "recommended (nested CV)", "verdict", "warnings"]
#: The summary's columns for the terminal and Markdown (:class:`judgecal.report.tables.Col`:
#: level 0 always, 1 when it fits / within Markdown's 10 columns, 2 with --wide)
SUMMARY_COLS = [
    Col("task family", "task_family", 0, "name"), Col("judge", "judge", 0, "name"), Col("kind", "kind", 2, "text"),
    Col("n", "n", 1, priority=3), Col("L_ref", "l_ref", 2), Col("gamma", "gamma", 1, priority=2), Col("p", "p", 2),
    Col("raw (CV)", "raw_cv", 0, "text"), Col("calibrated (CV)", "calibrated_cv", 1, "text", priority=1),
    Col("verbosity win-rate raw → calibrated", "verbosity_win_rate", 1, "text", priority=2),
    Col("best (CV)", "best_cv", 2, "text"), Col("recommended (nested CV)", "recommended", 0, "text"),
    Col("verdict", "verdict", 0, "text"), Col("warnings", "warnings", 1, priority=1),
]
assert [c.header for c in SUMMARY_COLS] == SUMMARY_COLUMNS


#: Marks a transfer row's figures in the "(CV)" summary columns: they are the agreement on the
#: target family's labels of a calibration fitted elsewhere (out of sample, but not cross-validated).
TRANSFER_MARK = "(target, not CV)"


def summary_rows(report: Mapping) -> list[list[str]]:
    """One row of display strings per entry, columns :data:`SUMMARY_COLUMNS`. The "(CV)"
    columns are the cross-validated expert agreement (pointwise: ``rho`` = Spearman); a transfer
    row's figures there are its agreement on the target family, marked :data:`TRANSFER_MARK`."""
    rows = []
    for e in report["entries"]:
        m = e["methods"]
        raw, cal = m.get("raw", {}), m.get("polylog", {})
        if e["kind"] == "pointwise":
            r_cv = "rho " + fmt_signed(raw.get("spearman_cv")) if raw.get("spearman_cv") is not None else DASH
            c_cv = "rho " + fmt_signed(cal.get("spearman_cv")) if cal.get("spearman_cv") is not None else DASH
        elif e["kind"] == "transfer":  # agreement on the target's labels: applied, not cross-validated
            r_cv, c_cv = (f"{fmt_value(x.get('agreement'))} {TRANSFER_MARK}" for x in (raw, cal))
        else:
            r_cv, c_cv = fmt_value(raw.get("agreement_cv")), fmt_value(cal.get("agreement_cv"))
        vr, vc = raw.get("verbosity_win_rate"), cal.get("verbosity_win_rate")
        vwr = DASH if vr is None else fmt_value(vr) + (f" → {fmt_value(vc)}" if vc is not None else "")
        p = e.get("params") or {}
        cmp_ = e.get("comparison") or {}
        best = cmp_.get("best_method")
        bfig = cmp_.get("best_agreement_cv", cmp_.get("best_agreement", cmp_.get("best_spearman_cv")))
        best_txt = DASH if not best else f"{best} {fmt_value(bfig)}"
        if best and e["kind"] == "transfer":
            best_txt += f" {TRANSFER_MARK}"
        rec = e.get("recommendation") or {}
        rec_txt = DASH if not rec else f"{rec['name']} {fmt_value(rec.get('nested'), rec.get('nested_ci'))}"
        if rec and rec.get("decision") == "keep raw":
            rec_txt = f"keep raw {fmt_value(rec.get('nested'), rec.get('nested_ci'))}"
        if rec and rec.get("on_target"):
            rec_txt += f" {TRANSFER_MARK}"
        kind = e["kind"].replace("_", " ")
        if e["kind"] == "transfer":
            kind = f"transfer from {e.get('source_family')}"
        g, pw = ("n.i.", "n.i.") if _not_identified(e) else (fmt_num(p.get("gamma")), fmt_num(p.get("p")))
        rows.append([e["task_family"], e["judge"], kind,
                     DASH if not e.get("n") else str(e["n"]), fmt_length(e.get("l_ref")),
                     g, pw, r_cv, c_cv, vwr, best_txt, rec_txt,
                     e["verdict"]["code"], str(len(e["warnings"]))])
    return rows
