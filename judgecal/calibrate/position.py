"""Position bias of a pairwise judge against expert labels, and the comparison of judges.

Pure numpy, no I/O. Inputs are per expert-labelled pair (a, b): the expert ``outcome`` (1.0 = a
better, 0.0 = b, 0.5 = tie) and the judge's soft preference P(a preferred) with a shown first
(``pref_ab``) and with b shown first (``pref_ba``), NaN where that order has no usable verdict.

Agreement with the experts (:func:`judgecal.calibrate.metrics.agreement_credit`: a judge tie
earns 1/2 on a decided pair) is given four ways:

* ``ab``: from the verdicts with a shown first only (LLMBar's ``swap = False``);
* ``ba``: from the verdicts with b shown first only (``swap = True``);
* ``combined``: both orders combined, a tie when they disagree (each order rounded first);
* ``soft``: the soft average (pref_ab + pref_ba) / 2, rounded.

For hard verdicts (1 / 0) ``combined`` and ``soft`` coincide; they differ for soft
preferences. A pair with one usable order uses that order in ``combined`` and ``soft``; a
pair with none is left out. Each figure has a 95% percentile bootstrap CI over pairs.

The judge comparison (:func:`compare_judges`) ranks judges by ``combined`` agreement on the
pairs every compared judge judged and gives each judge's paired difference to the best one,
with a 95% CI from the same pair resamples for every judge (Efron & Tibshirani 1993).
Source of the position measures: Zheng et al. (2023), MT-Bench paper, sec. 3.3; LLMBar
(Zeng et al. 2024), which judges every pair in both orders.
"""

from __future__ import annotations

import numpy as np

from judgecal.calibrate.metrics import agreement_credit
from judgecal.calibrate.ranking import mean_ci
from judgecal.calibrate.resample import percentile_ci

MODES = ("ab", "ba", "combined", "soft")


def _round(p: np.ndarray) -> np.ndarray:
    return np.where(p > 0.5, 1.0, np.where(p < 0.5, 0.0, 0.5))


def mode_preferences(pref_ab, pref_ba) -> dict[str, np.ndarray]:
    """{mode: P(a preferred) per pair, NaN where the mode has no verdict} for :data:`MODES`.
    Shapes (n,), (n,) -> each (n,)."""
    ab = np.asarray(pref_ab, dtype=float)
    ba = np.asarray(pref_ba, dtype=float)
    both = np.isfinite(ab) & np.isfinite(ba)
    one = np.where(np.isfinite(ab), ab, ba)  # the usable order when only one is
    combined = np.where(both, (_round(np.nan_to_num(ab)) + _round(np.nan_to_num(ba))) / 2.0, _round(one))
    combined = np.where(np.isfinite(one), combined, np.nan)
    soft = np.where(both, (ab + ba) / 2.0, one)
    return {"ab": ab, "ba": ba, "combined": combined, "soft": soft}


def credits(outcome, pref) -> np.ndarray:
    """Agreement credit per pair (1, 1/2, 0; NaN where ``pref`` is NaN). Shapes (n,) -> (n,)."""
    p = np.asarray(pref, dtype=float)
    out = np.full(p.shape, np.nan)
    keep = np.isfinite(p)
    if keep.any():
        q = p[keep]
        out[keep] = agreement_credit(q, 1.0 - q, np.asarray(outcome, dtype=float)[keep])
    return out


def expert_agreement_by_order(outcome, pref_ab, pref_ba, n_bootstrap: int = 1000, seed: int = 0) -> dict:
    """Agreement with the experts in each of :data:`MODES`.

    Args: outcome (n,) 1.0 / 0.0 / 0.5; pref_ab, pref_ba (n,) P(a preferred), NaN = none.
    Returns: {mode: {"agreement": share in [0, 1] or None, "ci": [lo, hi] or None, "n": pairs
    used}} (module doc)."""
    out = {}
    for i, (mode, pref) in enumerate(mode_preferences(pref_ab, pref_ba).items()):
        c = credits(outcome, pref)
        c = c[np.isfinite(c)]
        if not c.size:
            out[mode] = {"agreement": None, "ci": None, "n": 0}
            continue
        mean, ci = mean_ci(c, n_bootstrap, seed + i)
        out[mode] = {"agreement": mean, "ci": ci, "n": int(c.size)}
    return out


def cohen_kappa_binary(outcome, pref) -> float | None:
    """judgecal's Cohen's kappa of the judge's rounded verdicts against the expert labels, both
    on the same labels {a, b, tie} (unlike LLMBar's statistics.json kappa;
    :mod:`judgecal.calibrate.llmbar_stats`). Pairs without a verdict are left out; None when
    fewer than 2 pairs or the expected disagreement is 0."""
    from judgecal.calibrate.llmbar_stats import cohen_kappa

    p = np.asarray(pref, dtype=float)
    keep = np.isfinite(p)
    if keep.sum() < 2:
        return None
    k = cohen_kappa(list(_round(p[keep])), list(np.asarray(outcome, dtype=float)[keep]))
    return None if not np.isfinite(k) else k


RANK_TOL = 1e-12  # two agreements closer than this (float rounding of equal credit sums) are equal


def compare_judges(credit_by_judge: dict[str, np.ndarray], n_bootstrap: int = 1000, seed: int = 0) -> dict:
    """Rank judges by mean agreement credit over the same pairs and compare each with the best.

    Args: credit_by_judge: {judge: credit per pair, shape (n,), the SAME n pairs in the same
        order for every judge; NaN entries leave that pair out for every judge}.
    Returns: {"n_pairs", "best": judge name, "rows": {judge: {"agreement", "rank" (1 = best;
        competition ranks: judges with equal agreement share a rank, the next rank skips, as
        1, 2, 2, 4), "gap_to_best", "gap_to_best_ci" (paired 95% CI of judge minus best; None
        for the best or without resamples)}}}. The best of several with equal agreement is the
        judge named first (sorted names); rows are in (rank, name) order.
    """
    names = sorted(credit_by_judge)
    if not names:
        return {"n_pairs": 0, "best": None, "rows": {}}
    C = np.vstack([np.asarray(credit_by_judge[n], dtype=float) for n in names])
    C = C[:, np.all(np.isfinite(C), axis=0)]
    n = C.shape[1]
    if n == 0:
        return {"n_pairs": 0, "best": None, "rows": {}}
    means = C.mean(axis=1)
    order = sorted(range(len(names)), key=lambda i: (-means[i], names[i]))
    best = order[0]
    W = None
    if n_bootstrap > 0 and n > 1:
        rng = np.random.default_rng(seed)
        W = np.zeros((n_bootstrap, n))
        idx = rng.integers(0, n, (n_bootstrap, n))
        for b in range(n_bootstrap):
            W[b] = np.bincount(idx[b], minlength=n)
    rows = {}
    for i in order:
        rank = 1 + int(np.sum(means > means[i] + RANK_TOL))  # agreements equal up to rounding share a rank
        d = C[i] - C[best]
        ci = None
        if W is not None and i != best:
            ci = percentile_ci(W @ d / n)
        rows[names[i]] = {"agreement": float(means[i]), "rank": rank, "gap_to_best": float(d.mean()),
                          "gap_to_best_ci": ci}
    return {"n_pairs": int(n), "best": names[best], "rows": rows}
