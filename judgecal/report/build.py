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
raw judge **out of sample** (K-fold cross-validation grouped by item)?  Definitions of every
figure: docs/calibration.md; how to read them: docs/report.md.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence

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

PAIRWISE_KEYS = ("agreement", "agreement_ci", "agreement_cv", "agreement_cv_ci",
                 "verbosity_win_rate", "verbosity_win_rate_ci", "length_preference",
                 "length_preference_ci", "slope", "slope_ci", "verbosity_slope")
POINTWISE_KEYS = ("spearman", "spearman_ci", "spearman_cv", "kendall", "kendall_cv", "mae",
                  "mae_ci", "mae_cv", "verbosity_win_rate", "verbosity_win_rate_ci", "slope",
                  "slope_ci", "verbosity_slope")
VERBOSITY_KEYS = ("verbosity_win_rate", "verbosity_win_rate_ci", "verbosity_slope")
PARAM_KEYS = ("gamma", "gamma_ci", "p", "p_ci", "bt_scale", "bt_scale_ci", "l_ref", "loss",
              "converged", "at_bound", "message", "n_bootstrap_ok", "density")

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


def _check_entry(i: int, entry) -> None:
    if not isinstance(entry, Mapping):
        raise InputError(f"report entry {i}: expected a dict, got {type(entry).__name__}")
    for key in ENTRY_FIELDS:
        if key not in entry:
            raise InputError(f"report entry {i}: missing field {key!r}")
    ev = entry["evaluation"]
    if not isinstance(ev, Mapping) or ev.get("kind") not in ("pairwise", "pointwise", "verbosity_only"):
        raise InputError(f"report entry {i}: field 'evaluation' is not an evaluation dict "
                         f"(kind must be pairwise, pointwise or verbosity_only)")
    unit = entry.get("length_unit")
    if unit is not None and unit not in LENGTH_UNITS:
        raise InputError(f"report entry {i}: field 'length_unit' must be one of "
                         f"{', '.join(LENGTH_UNITS)}, got {unit!r}")


def _methods(ev: Mapping) -> dict:
    kind = ev["kind"]
    keys = {"pairwise": PAIRWISE_KEYS, "pointwise": POINTWISE_KEYS}.get(kind, VERBOSITY_KEYS)
    src = ev.get("methods") or {}
    names = [m for m in METHOD_ORDER if m in src] + sorted(m for m in src if m not in METHOD_ORDER)
    out = {}
    for name in names:
        m = src[name] or {}
        row = {"label": METHOD_LABELS.get(name, name)}
        row.update({k: _value(k, m.get(k)) for k in keys})
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
        out[k] = _ci(v) if k.endswith("_ci") else (_num(v) if isinstance(v, (int, float)) and
                                                    not isinstance(v, bool) else v)
    return out


# ----------------------------------------------------------------------------- verdict
def _fmt_diff(d: float, pointwise: bool) -> str:
    return f"{d:+.3f} (Spearman rho)" if pointwise else f"{100 * d:+.1f} points"


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

    Returns {code, text, metric, raw, calibrated, difference, difference_ci, rule}, code one of
    "helps", "no measurable effect", "hurts", "undetermined", "not fitted".
    """
    base = {"metric": None, "raw": None, "calibrated": None, "difference": None,
            "difference_ci": None, "rule": None}
    if not ev.get("fitted"):
        reason = ev.get("no_fit_reason") or "no calibration was fitted"
        return {**base, "code": "not fitted", "text": f"No calibration: {reason}."}
    pointwise = ev["kind"] == "pointwise"
    metric = "spearman_cv" if pointwise else "agreement_cv"
    methods = ev.get("methods") or {}
    raw, cal = methods.get("raw") or {}, methods.get("polylog") or {}
    r, c = _num(raw.get(metric)), _num(cal.get(metric))
    base["metric"] = metric
    if r is None or c is None:
        return {**base, "code": "undetermined", "rule": "no cross-validated figure",
                "text": "Undetermined: no cross-validated figure (too few items for the folds, "
                        "or the cross-validation failed); in-sample figures overstate any gain."}
    d = c - r
    base.update(raw=r, calibrated=c, difference=d)
    what = "Spearman rho with the experts" if pointwise else "expert agreement"
    gain_ci = _ci(cal.get(metric + "_gain_ci"))
    r_ci, c_ci = _ci(raw.get(metric + "_ci")), _ci(cal.get(metric + "_ci"))
    if gain_ci is not None:
        rule = "paired bootstrap CI of the difference"
        base["difference_ci"] = gain_ci
        code = "helps" if gain_ci[0] > 0 else "hurts" if gain_ci[1] < 0 else "no measurable effect"
        ci_txt = (f"95% CI [{_fmt_diff(gain_ci[0], pointwise).split(' ')[0]}, "
                  f"{_fmt_diff(gain_ci[1], pointwise)}]")
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
    raw_txt = f"{r:.3f}"
    text = (f"{head}: cross-validated {what} {raw_txt} raw vs {c:.3f} calibrated "
            f"({_fmt_diff(d, pointwise)}; {ci_txt}).")
    return {**base, "code": code, "text": text}


# ----------------------------------------------------------------------------- warnings
def _has(warnings: list[str], *needles: str) -> bool:
    return any(all(n in w for n in needles) for w in warnings)


def _report_warnings(ev: Mapping, warnings: list[str]) -> list[str]:
    """Report-level warnings that the evaluation did not already give (no duplicates)."""
    extra: list[str] = []
    methods = ev.get("methods") or {}
    raw, cal = methods.get("raw") or {}, methods.get("polylog") or {}
    if ev.get("fitted"):
        pointwise = ev["kind"] == "pointwise"
        metric = "spearman" if pointwise else "agreement"
        gap = SPEARMAN_GAP_WARN if pointwise else AGREEMENT_GAP_WARN
        for suffix, where in (("", "in-sample"), ("_cv", "cross-validated")):
            r, c = _num(raw.get(metric + suffix)), _num(cal.get(metric + suffix))
            if r is None or c is None or abs(c - r) <= gap:
                continue
            if _has(warnings, "differ by", where):
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
    scores = [s for s in (lab.get("score_raw") or []) if s is not None]
    if scores and not _has(warnings, "the judge output is constant"):
        counts: dict[float, int] = {}
        for s in scores:
            counts[s] = counts.get(s, 0) + 1
        value, top = max(counts.items(), key=lambda kv: kv[1])
        share = top / len(scores)
        if len(counts) == 1:
            extra.append("every judge score is the same: the judge output is constant")
        elif share >= NEAR_CONSTANT_SHARE:
            extra.append(f"{share:.0%} of the judge scores are {value:g}: the judge output is "
                         f"near constant, so every figure rests on the few other scores")
    cal_scores = [s for s in (lab.get("score_calibrated") or []) if s is not None]
    scale = ev.get("scale")
    if ev.get("fitted") and cal_scores and scale and len(scale) == 2:
        lo, hi = float(scale[0]), float(scale[1])
        raw_ends = sum(1 for s in scores if s <= lo or s >= hi)
        cal_ends = sum(1 for s in cal_scores if s <= lo or s >= hi)
        share = (cal_ends - raw_ends) / len(cal_scores)
        if share >= CLIPPED_SHARE_WARN:
            extra.append(f"the calibration clips {share:.0%} more scores to the ends of the "
                         f"scale [{lo:g}, {hi:g}]: the penalty is strong for this scale")
    return extra


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
    return {
        "task_family": str(entry["task_family"]),
        "judge": str(entry["judge"]),
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
        "verdict": verdict(ev),
        "warnings": warnings,
    }


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

    Top-level ``warnings``: duplicated (task family, judge) entries. Entries keep their order.
    Pure; the result passes ``json.dumps(..., allow_nan=False)``.

    Raises:
        InputError: an entry is not a dict, lacks task_family / judge / evaluation, or its
        evaluation has no known ``kind`` (the message names the entry and field).
    """
    if isinstance(entries, Mapping) or not isinstance(entries, Sequence):
        raise InputError("report entries must be a list of dicts")
    out = [build_entry(e, i) for i, e in enumerate(entries)]
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
