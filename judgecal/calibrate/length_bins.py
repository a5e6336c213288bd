"""A judge's preference for the longer answer against the experts', by length ratio.

On expert-labelled pairs whose two answers differ in length, how often the judge prefers the
longer answer and how often the experts do, in bins of the length ratio (longer / shorter):
a judge with a verbosity bias prefers the longer answer more often than the experts, and more
so as the ratio grows. Pure numpy; no I/O."""

from __future__ import annotations

import numpy as np

#: bin edges of the length ratio longer/shorter (the last bin is open)
RATIO_EDGES = (1.0, 1.25, 1.5, 2.0, 3.0, np.inf)


def longer_preference_by_ratio(judge_credit_a, expert_credit_a, len_a, len_b, *, edges=RATIO_EDGES,
                               n_bootstrap: int = 1000, seed: int = 0) -> dict:
    """The judge's and the experts' preference for the longer answer, per length-ratio bin.

    Args: ``judge_credit_a``, ``expert_credit_a`` shape (n,): credit of answer a (1 a
    preferred, 0 b, 0.5 tie; NaN: no decision, left out); ``len_a``, ``len_b`` shape (n,)
    lengths in one unit (characters on the judge page); pairs of equal length are left out.
    ``edges``: increasing bin edges of ratio = max(len) / min(len) (a pair falls in
    [edges[i], edges[i+1]); a zero length counts as ratio inf).

    Returns {"n": pairs used, "overall": bin dict, "bins": [bin dict]}; a bin dict: {"lo",
    "hi" (None for the open last bin), "n", "judge_longer" (mean credit the judge gives the longer answer, in [0, 1]),
    "experts_longer" (the experts' mean credit), "excess" (judge - experts) and "excess_ci"
    (95% percentile bootstrap CI over pairs, ``n_bootstrap`` resamples, numpy
    ``default_rng(seed)``; None with fewer than 2 pairs or ``n_bootstrap`` 0)}. A positive
    excess: the judge prefers the longer answer more often than the experts do."""
    ja = np.asarray(judge_credit_a, dtype=float)
    ea = np.asarray(expert_credit_a, dtype=float)
    la, lb = np.asarray(len_a, dtype=float), np.asarray(len_b, dtype=float)
    if not (ja.shape == ea.shape == la.shape == lb.shape):
        raise ValueError("judge_credit_a, expert_credit_a, len_a and len_b must have the same shape")
    keep = np.isfinite(ja) & np.isfinite(ea) & (la != lb) & np.isfinite(la) & np.isfinite(lb)
    ja, ea, la, lb = ja[keep], ea[keep], la[keep], lb[keep]
    a_longer = la > lb
    judge_longer = np.where(a_longer, ja, 1.0 - ja)
    experts_longer = np.where(a_longer, ea, 1.0 - ea)
    short = np.minimum(la, lb)
    with np.errstate(divide="ignore"):
        ratio = np.where(short > 0, np.maximum(la, lb) / np.where(short > 0, short, 1.0), np.inf)
    rng = np.random.default_rng(seed)

    def one(mask, lo, hi) -> dict:
        j, e = judge_longer[mask], experts_longer[mask]
        n = int(mask.sum())
        out = {"lo": lo, "hi": hi if np.isfinite(hi) else None, "n": n, "judge_longer": float(j.mean()) if n else None,
               "experts_longer": float(e.mean()) if n else None,
               "excess": float(j.mean() - e.mean()) if n else None, "excess_ci": None}
        if n >= 2 and n_bootstrap > 0:
            idx = rng.integers(0, n, size=(n_bootstrap, n))
            diffs = j[idx].mean(axis=1) - e[idx].mean(axis=1)
            lo_ci, hi_ci = np.percentile(diffs, [2.5, 97.5])
            out["excess_ci"] = [float(lo_ci), float(hi_ci)]
        return out

    overall = one(np.ones(ratio.shape, dtype=bool), float(edges[0]), float(edges[-1]))
    bins = [one((ratio >= lo) & (ratio < hi) if np.isfinite(hi) else (ratio >= lo), float(lo), float(hi))
            for lo, hi in zip(edges[:-1], edges[1:])]
    return {"n": int(ratio.size), "overall": overall, "bins": bins}
