"""Metrics of length bias and of agreement with experts. Pure, vectorised, optional weights.

Every pairwise metric is a (weighted) mean of a per-pair credit in {0, 0.5, 1}; ``weights``
(e.g. bootstrap multiplicities) default to 1 per pair. Exact definitions (also in
docs/calibration.md):

* verbosity win-rate: credit 1 if the verbose response scores higher, 0.5 on a tie, else 0.
  Ideal 0.5 for concise/verbose pairs with the same content (DESIGN.md; the seed article).
* expert agreement: on a decisive expert pair (outcome 1 or 0) credit 1 if the judge orders it
  the same way, 0.5 if the judge ties, 0 if reversed; on an expert tie (outcome 0.5) credit 1
  if the judge ties too, else 0.5. (LLMBar-style accuracy with half credit for ties.)
* length preference: over pairs of different lengths only, credit 1 if the judge scores the
  longer response higher, 0.5 on a judge tie, else 0; the experts' equivalent uses the expert
  outcome instead of the judge's scores. NaN when every pair has equal lengths.
* score-length slope: ordinary least-squares slope of score on ln(max(L, 1)), score units per
  nat of length. NaN when ln L is constant.
* pointwise: Spearman rho and Kendall tau-b (scipy.stats), mean absolute error.
"""

from __future__ import annotations

import numpy as np
from scipy import stats

from judgecal.calibrate.penalty import LENGTH_FLOOR


def _mean(credit, weights) -> float:
    credit = np.asarray(credit, dtype=float)
    if credit.size == 0:
        return float("nan")
    if weights is None:
        return float(credit.mean())
    w = np.asarray(weights, dtype=float)
    tot = w.sum()
    return float(np.dot(w, credit) / tot) if tot > 0 else float("nan")


def order_credit(first, second) -> np.ndarray:
    """Per-pair credit 1 where first > second, 0.5 where equal, 0 where first < second."""
    diff = np.asarray(first, dtype=float) - np.asarray(second, dtype=float)
    return 0.5 * (np.sign(diff) + 1.0)


def verbosity_win_rate(score_concise, score_verbose, weights=None) -> float:
    """Share of concise/verbose pairs where the verbose response scores higher (ties 0.5).

    Shapes (n,). Returns a share in [0, 1] (NaN for n = 0); 0.5 means no verbosity bias.
    Source: DESIGN.md / the seed article's verbosity win-rate.
    """
    return _mean(order_credit(score_verbose, score_concise), weights)


def agreement_credit(score_a, score_b, outcome) -> np.ndarray:
    """Per-pair expert-agreement credit (see module docstring), shape (n,)."""
    judge = order_credit(score_a, score_b)  # 1, 0.5, 0
    outcome = np.asarray(outcome, dtype=float)
    decisive = outcome != 0.5
    credit_decisive = np.where(judge == 0.5, 0.5, (judge == outcome).astype(float))
    credit_tie = np.where(judge == 0.5, 1.0, 0.5)
    return np.where(decisive, credit_decisive, credit_tie)


def expert_agreement(score_a, score_b, outcome, weights=None) -> float:
    """Share of expert-labelled pairs the judge orders as the experts did (ties: module doc).

    Args: score_a, score_b: shape (n,) (raw or calibrated); outcome: 1.0 / 0.0 / 0.5, (n,).
    Returns a share in [0, 1]. Source: LLMBar accuracy (Zeng et al. 2024) with half credit
    for judge ties; e.g. GPT-4 ratings on LLMBar Natural give 0.920 over 100 pairs.
    """
    return _mean(agreement_credit(score_a, score_b, outcome), weights)


def pair_agreement(prob_a, outcome, weights=None) -> float:
    """Expert agreement of a probabilistic pair predictor: P(a) > 0.5 counts as preferring a,
    == 0.5 as a judge tie (same credit rules as :func:`expert_agreement`)."""
    p = np.asarray(prob_a, dtype=float)
    return expert_agreement(p, 1.0 - p, outcome, weights)


def length_preference(score_a, score_b, len_a, len_b, weights=None) -> float:
    """Share of pairs of different length where the judge scores the longer one higher.

    Ties of the judge count 0.5; pairs of equal length are excluded (NaN if none is left).
    Shapes (n,). Source: judgecal's definition (docs/calibration.md).
    """
    la, lb = np.asarray(len_a, dtype=float), np.asarray(len_b, dtype=float)
    keep = la != lb
    a_longer = la > lb
    longer = np.where(a_longer, score_a, score_b)
    shorter = np.where(a_longer, score_b, score_a)
    w = None if weights is None else np.asarray(weights, dtype=float)[keep]
    return _mean(order_credit(longer, shorter)[keep], w)


def expert_length_preference(outcome, len_a, len_b, weights=None) -> float:
    """Share of pairs of different length where the experts prefer the longer one (ties 0.5)."""
    outcome = np.asarray(outcome, dtype=float)
    la, lb = np.asarray(len_a, dtype=float), np.asarray(len_b, dtype=float)
    keep = la != lb
    credit = np.where(la > lb, outcome, 1.0 - outcome)
    w = None if weights is None else np.asarray(weights, dtype=float)[keep]
    return _mean(credit[keep], w)


def score_length_slope(score, length, weights=None) -> float:
    """Least-squares slope of score on ln(max(L, 1)), in score units per nat (NaN if ln L is
    constant or n < 2). Weighted least squares when weights are given."""
    x = np.log(np.maximum(np.asarray(length, dtype=float), LENGTH_FLOOR))
    y = np.asarray(score, dtype=float)
    w = np.ones_like(x) if weights is None else np.asarray(weights, dtype=float)
    if x.size < 2 or w.sum() <= 0:
        return float("nan")
    xm = np.dot(w, x) / w.sum()
    ym = np.dot(w, y) / w.sum()
    sxx = np.dot(w, (x - xm) ** 2)
    if sxx <= 1e-12 * max(1.0, np.dot(w, x * x)):
        return float("nan")
    return float(np.dot(w, (x - xm) * (y - ym)) / sxx)


def spearman(score, expert) -> float:
    """Spearman rank correlation (scipy.stats.spearmanr); NaN if either side is constant."""
    if np.ptp(score) == 0 or np.ptp(expert) == 0:
        return float("nan")
    return float(stats.spearmanr(score, expert).statistic)


def _weighted_midranks(x, w) -> np.ndarray:
    """Mid-ranks each value would get in the sample where row i is repeated w_i times."""
    order = np.argsort(x, kind="stable")
    xs, ws = x[order], w[order]
    new = np.r_[True, xs[1:] != xs[:-1]]
    gid = np.cumsum(new) - 1
    gw = np.bincount(gid, weights=ws)
    ranks_sorted = (np.cumsum(gw) - gw)[gid] + (gw[gid] + 1.0) / 2.0
    out = np.empty_like(ranks_sorted)
    out[order] = ranks_sorted
    return out


def weighted_spearman(score, expert, weights) -> float:
    """Spearman rho of the sample in which row i appears ``weights[i]`` times (integer
    bootstrap multiplicities), without building it: weighted Pearson correlation of the
    weighted mid-ranks. Equals scipy.stats.spearmanr on the repeated rows; NaN if constant."""
    x, y = np.asarray(score, dtype=float), np.asarray(expert, dtype=float)
    w = np.asarray(weights, dtype=float)
    rx, ry = _weighted_midranks(x, w), _weighted_midranks(y, w)
    tot = w.sum()
    dx, dy = rx - np.dot(w, rx) / tot, ry - np.dot(w, ry) / tot
    sxx, syy = np.dot(w, dx * dx), np.dot(w, dy * dy)
    if sxx <= 0 or syy <= 0:
        return float("nan")
    return float(np.dot(w, dx * dy) / np.sqrt(sxx * syy))


def kendall_tau(score, expert) -> float:
    """Kendall tau-b (scipy.stats.kendalltau); NaN if either side is constant."""
    if np.ptp(score) == 0 or np.ptp(expert) == 0:
        return float("nan")
    return float(stats.kendalltau(score, expert).statistic)


def mae(score, target, weights=None) -> float:
    """Mean absolute error between scores and targets (same units), optionally weighted."""
    return _mean(np.abs(np.asarray(score, dtype=float) - np.asarray(target, dtype=float)), weights)
