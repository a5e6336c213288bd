"""Rating summaries: which number a judgment distribution becomes, and which one to use.

A judge that returns a distribution over its verdicts (``rate --logprobs``, ``rate --local``;
:mod:`judgecal.judge.distribution`) can be read three ways (Wang, Zhang & Choi, "Improving
LLM-as-a-Judge Inference with the Judgment Distribution", Findings of EMNLP 2025):

``greedy``       the verdict greedy decoding writes (the stored ``score``; today's number and the
                 reference: a summary other than greedy is recommended only when it beats it
                 out of sample);
``mean``         the expected score under the distribution normalised over the scale,
                 ``mu = sum_v p_v v`` (score units);
``risk-averse``  ``mu - k sigma`` with ``sigma = sqrt(sum_v p_v (v - mu)^2)``: the paper's
                 risk-averse mean, a judge unsure of a response scores it lower. ``k`` = 1
                 (:data:`DEFAULT_RISK_K`, one standard deviation, as the paper's risk-averse
                 variant subtracts); ``--risk-k`` changes it. Never below the scale's lowest
                 value (a distribution split between 1 and 10 has mu - sigma < 1).

Pairwise verdicts (``probs`` over a, b, tie), as the credit of response a in [0, 1]:
``greedy`` 1 / 0 / 0.5 for the verdict; ``mean`` the expected preference
``(1 + P(a) - P(b)) / 2`` (= P(a) + P(tie)/2, AlpacaEval's logprob-weighted preference);
``risk-averse`` ``mean - k sigma`` clipped to [0, 1], sigma the standard deviation of the credit
X (1 / 0.5 / 0 with P(a) / P(tie) / P(b)). The risk is taken from a's side: a win-rate board
puts the model under test in a, so it is credited what it wins minus k sd of that.

:func:`compare_summaries` evaluates every summary out of sample against the expert labels
exactly as :mod:`judgecal.calibrate.evaluate` evaluates the calibration methods: the same
item-grouped folds (``make_folds(item_ids, folds, seed)``), raw and the polylog calibration
fitted on the other folds, the same item resamples for the CIs (``seed + 2``), and the paired
gain over greedy with its 95% CI. "Keep greedy" unless a summary's gain has a CI above zero.
Pure numpy; no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from judgecal.errors import UsageError

SUMMARIES = ("greedy", "mean", "risk-averse")
DEFAULT_SUMMARY = "greedy"
#: k of the risk-averse summary mu - k sigma (one standard deviation).
DEFAULT_RISK_K = 1.0
MAX_RISK_K = 10.0


def check_summary(summary: str, risk_k: float = DEFAULT_RISK_K) -> None:
    """Raise UsageError for an unknown summary or a k outside [0, 10]."""
    if summary not in SUMMARIES:
        raise UsageError(f"--summary must be one of {', '.join(SUMMARIES)}, got {summary!r}")
    if not (isinstance(risk_k, (int, float)) and math.isfinite(risk_k) and 0.0 <= risk_k <= MAX_RISK_K):
        raise UsageError(f"--risk-k must be a number in [0, {MAX_RISK_K:g}], got {risk_k!r}")


def label(summary: str, risk_k: float = DEFAULT_RISK_K) -> str:
    """How a summary is named in reports: ``greedy``, ``mean``, ``risk-averse (k=1)``."""
    return f"risk-averse (k={risk_k:g})" if summary == "risk-averse" else summary


def moments(probs: Mapping[str, float]) -> tuple[float, float]:
    """(mean, standard deviation) of a pointwise distribution ``{"1": p_1, ...}`` whose keys are
    the scale's values as text; the probabilities are renormalised (a stored distribution sums
    to 1 already). Raises ValueError when they sum to 0."""
    vals = np.array([float(k) for k in probs], dtype=float)
    p = np.array([float(v) for v in probs.values()], dtype=float)
    tot = p.sum()
    if not tot > 0:
        raise ValueError("the distribution has no mass")
    p = p / tot
    mu = float(p @ vals)
    var = float(p @ (vals - mu) ** 2)
    return mu, math.sqrt(max(var, 0.0))


def point_summary(probs: Mapping[str, float], summary: str, risk_k: float = DEFAULT_RISK_K) -> float:
    """The ``mean`` or ``risk-averse`` summary of a pointwise distribution, in score units
    (module doc). ``greedy`` is the stored score, not computed here: ValueError."""
    mu, sd = moments(probs)
    if summary == "mean":
        return mu
    if summary == "risk-averse":
        return max(mu - risk_k * sd, min(float(v) for v in probs))
    raise ValueError(f"summary {summary!r} is not read from a distribution")


def pair_summary(probs: Mapping[str, float], summary: str, risk_k: float = DEFAULT_RISK_K) -> float:
    """The ``mean`` or ``risk-averse`` credit of response a in [0, 1] from a pairwise
    distribution ``{"a", "b", "tie"}`` (module doc)."""
    pa, pb, pt = (float(probs.get(k, 0.0)) for k in ("a", "b", "tie"))
    tot = pa + pb + pt
    if not tot > 0:
        raise ValueError("the distribution has no mass")
    pa, pb, pt = pa / tot, pb / tot, pt / tot
    mean = pa + 0.5 * pt
    if summary == "mean":
        return mean
    if summary == "risk-averse":
        var = pa * (1.0 - mean) ** 2 + pt * (0.5 - mean) ** 2 + pb * mean ** 2
        return min(1.0, max(0.0, mean - risk_k * math.sqrt(max(var, 0.0))))
    raise ValueError(f"summary {summary!r} is not read from a distribution")


def tie_rate(score_a, score_b) -> float | None:
    """Share of pairs whose two scores are equal (None without pairs)."""
    a, b = np.asarray(score_a, dtype=float), np.asarray(score_b, dtype=float)
    return float(np.mean(a == b)) if a.size else None


def _ci_above_zero(ci) -> bool:
    return ci is not None and ci[0] > 0


def compare_summaries(variants: Mapping, *, kind: str, ctx, folds: int = 5, seed: int = 0, n_bootstrap: int = 1000,
                      verbosity: Mapping | None = None, target=None, risk_k: float = DEFAULT_RISK_K) -> dict:
    """Every summary evaluated out of sample against the expert labels (module doc).

    ``variants``: {summary: PairData (kind "pairwise") or PointData ("pointwise")}, the same
    labelled pairs/responses in the same order, only the scores differing; ``greedy`` must be
    among them. ``ctx``: the :class:`judgecal.calibrate.baselines.FitContext` of the fit (its
    L_ref, scale, bounds). ``verbosity``: {summary: VerbosityData or None}. ``target``:
    pointwise, the expert scores mapped onto the judge's scale.

    Returns {"reference": "greedy", "risk_k", "folds", "n", "summaries": {summary: {tie_rate
    (pairwise: share of labelled pairs the summary ties), figure, figure_cv, figure_cv_ci,
    calibrated_cv, calibrated_cv_ci, gain_cv, gain_cv_ci, calibrated_gain_cv,
    calibrated_gain_cv_ci, verbosity_win_rate, verbosity_win_rate_calibrated,
    verbosity_tie_rate}}, "recommended", "reason"}; the figure is expert agreement (ties 1/2)
    pairwise, Spearman rho pointwise; ``calibrated`` is the polylog calibration of that summary,
    fitted on the other folds; gains are paired differences from greedy's with the CI over the
    same item resamples (pointwise at most 500). Raises UsageError when greedy is missing or the
    variants do not hold the same rows."""
    from judgecal.calibrate import metrics as M
    from judgecal.calibrate.baselines import PolyLog, Raw
    from judgecal.calibrate.evaluate import _out_of_fold, _verbosity_metrics
    from judgecal.calibrate.resample import item_codes, make_folds, percentile_ci, resample_counts

    if "greedy" not in variants:
        raise UsageError("the summary comparison needs the greedy summary (the reference)")
    ref = variants["greedy"]
    for name, d in variants.items():
        if d.n != ref.n or not np.array_equal(np.asarray(d.item_ids).astype(str), np.asarray(ref.item_ids).astype(str)):
            raise UsageError(f"summary {name!r} does not hold the same labelled rows as greedy")
    pairwise = kind == "pairwise"
    fold, k = make_folds(ref.item_ids, folds, seed)
    codes, n_items = item_codes(ref.item_ids)
    out = {"reference": "greedy", "risk_k": float(risk_k), "folds": int(k), "n": int(ref.n), "n_bootstrap": n_bootstrap,
           "figure": "expert agreement (ties 1/2)" if pairwise else "Spearman rho", "summaries": {},
           "recommended": "greedy", "reason": None}
    if k < 2:
        out["reason"] = f"not evaluated out of sample: only {n_items} distinct item(s)"
        return out
    W = None
    if n_bootstrap > 0:
        W = resample_counts(n_items, n_bootstrap if pairwise else min(n_bootstrap, 500),
                            np.random.default_rng(seed + 2))[:, codes]
    methods = [Raw(), PolyLog()]
    credit: dict[str, dict[str, np.ndarray]] = {}
    oof_of: dict[str, dict[str, np.ndarray]] = {}
    warns: list[str] = []
    for name in SUMMARIES:
        if name not in variants:
            continue
        d = variants[name]
        full = {m.name: m.fit(d, ctx) for m in methods}
        if pairwise:
            oof = _out_of_fold(methods, d, ctx, full, fold, k, warns,
                               lambda f, t: f.predict_pair(t.score_a, t.score_b, t.len_a, t.len_b, t.density_a, t.density_b))
            credit[name] = {m: M.agreement_credit(p, 1.0 - p, d.outcome) for m, p in oof.items()}
        else:
            oof = _out_of_fold(methods, d, ctx, full, fold, k, warns, lambda f, t: f.calibrate(t.score, t.length, t.density))
        oof_of[name] = oof
        v = (verbosity or {}).get(name)
        vwr_raw, _ = _verbosity_metrics(full["raw"], v)
        vwr_cal, _ = _verbosity_metrics(full["polylog"], v)
        row = {"tie_rate": tie_rate(d.score_a, d.score_b) if pairwise else None,
               "verbosity_win_rate": vwr_raw, "verbosity_win_rate_calibrated": vwr_cal,
               "verbosity_tie_rate": None if v is None or v.n == 0 else tie_rate(v.score_concise, v.score_verbose),
               "verbosity_pairs": 0 if v is None else int(v.n)}
        for tag, m in (("figure", "raw"), ("calibrated", "polylog")):
            key = "figure_cv" if tag == "figure" else "calibrated_cv"
            if m not in oof:
                row[key], row[key + "_ci"] = None, None
                continue
            if pairwise:
                c = credit[name][m]
                row[key] = float(c.mean())
                row[key + "_ci"] = None if W is None else percentile_ci(W @ c / W.sum(axis=1))
            else:
                row[key] = M.spearman(oof[m], target)
                row[key + "_ci"] = None if W is None else percentile_ci(
                    [M.weighted_spearman(oof[m], target, w) for w in W])
        out["summaries"][name] = row
    for name, row in out["summaries"].items():
        for tag, m in (("gain_cv", "raw"), ("calibrated_gain_cv", "polylog")):
            row[tag], row[tag + "_ci"] = None, None
            if name == "greedy" or m not in oof_of[name] or m not in oof_of["greedy"]:
                continue
            if pairwise:
                diff = credit[name][m] - credit["greedy"][m]
                row[tag] = float(diff.mean())
                row[tag + "_ci"] = None if W is None else percentile_ci(W @ diff / W.sum(axis=1))
            else:
                a, g = oof_of[name][m], oof_of["greedy"][m]
                row[tag] = M.spearman(a, target) - M.spearman(g, target)
                row[tag + "_ci"] = None if W is None else percentile_ci(
                    [M.weighted_spearman(a, target, w) - M.weighted_spearman(g, target, w) for w in W])
    wins = [(row["gain_cv"], n) for n, row in out["summaries"].items()
            if n != "greedy" and _ci_above_zero(row.get("gain_cv_ci"))]
    if wins:
        gain, best = max(wins)
        out["recommended"] = best
        out["reason"] = (f"{label(best, risk_k)} gains {_fmt(gain, pairwise)} over greedy out of sample "
                         f"(paired 95% CI above zero)")
    else:
        out["reason"] = ("keep greedy: no other summary's out-of-sample gain over greedy has a paired 95% CI above zero"
                         if W is not None else "keep greedy: no bootstrap (n_bootstrap 0), so no CI can clear zero")
    out["warnings"] = warns
    return out


def _fmt(x: float, pairwise: bool) -> str:
    return f"{100 * x:+.1f} points" if pairwise else f"{x:+.3f} rho"


def rating_value(score, distribution, summary: str, risk_k: float = DEFAULT_RISK_K, *, pairwise: bool = False):
    """One rating's number under ``summary``: ``greedy`` the stored ``score`` (pairwise: the
    stored credit), otherwise :func:`point_summary` (:func:`pair_summary`) of the stored
    ``distribution`` (a dict with ``probs``); None when the rating has no distribution."""
    if summary == "greedy":
        return score
    probs = (distribution or {}).get("probs") if isinstance(distribution, Mapping) else None
    if not probs:
        return None
    try:
        return (pair_summary if pairwise else point_summary)(probs, summary, risk_k)
    except (ValueError, TypeError):
        return None


def large_outside(distribution) -> bool:
    """True when a stored distribution puts at least
    :data:`judgecal.judge.distribution.LARGE_OUTSIDE` of its mass outside the scale (its mean
    and risk-averse summaries are then over a renormalised minority of the judgment)."""
    from judgecal.judge.distribution import LARGE_OUTSIDE

    out = distribution.get("outside") if isinstance(distribution, Mapping) else None
    return isinstance(out, (int, float)) and not isinstance(out, bool) and out >= LARGE_OUTSIDE


def large_outside_note(n: int, n_total: int, summary: str, risk_k: float = DEFAULT_RISK_K,
                       by_model: Mapping[str, int] | None = None) -> str:
    """The board's warning for ``n`` of ``n_total`` ratings read under ``summary`` from
    distributions with a large share outside the scale (:func:`large_outside`), naming the
    models with the most of them."""
    from judgecal.judge.distribution import LARGE_OUTSIDE

    models = ""
    if by_model:
        top = sorted(by_model.items(), key=lambda kv: (-kv[1], kv[0]))
        models = " (" + ", ".join(f"{mo}: {k}" for mo, k in top[:5]) + (f", {len(top) - 5} more models" if len(top) > 5 else "") + ")"
    return (f"--summary {label(summary, risk_k)}: {n} of {n_total} ok ratings{models} come from distributions with "
            f"{LARGE_OUTSIDE:.0%} or more of their mass outside the scale; their summary is read from the in-scale "
            f"rest, renormalised, so it says little about the judgment (--summary greedy reads the verdict written)")


def summary_note(summary: str, risk_k: float = DEFAULT_RISK_K, *, pairwise: bool = False) -> str:
    """The board note naming a non-greedy summary, e.g. ``rating summary: mean (each rating's
    expected score under its stored distribution), not the greedy score``."""
    what = {"mean": ("each verdict's expected preference P(a) + P(tie)/2" if pairwise
                     else "each rating's expected score under its stored distribution"),
            "risk-averse": (f"each verdict's expected credit minus {risk_k:g} sd, from the model's side" if pairwise
                            else f"each rating's mean minus {risk_k:g} sd under its stored distribution")}
    return f"rating summary: {label(summary, risk_k)} ({what.get(summary, summary)}), not the greedy {'verdict' if pairwise else 'score'}"


def missing_message(n_missing: int, n_total: int, summary: str, what: str) -> str:
    """The refusal of a summary some ratings cannot give, e.g. ``--summary mean: 12 of 200 ok
    ratings of judge 'x' in 'fam' have no stored distribution (rate with --logprobs or
    --local to store one; greedy needs none)``."""
    return (f"--summary {summary}: {n_missing} of {n_total} ok ratings {what} have no stored distribution "
            f"(rate with --logprobs or --local to store one; --summary greedy needs none)")
