"""Win rates against a baseline from pairwise verdicts, and the judge's position consistency.

Pure numpy/scipy, no I/O. A verdict's soft preference ``pref`` is the probability in [0, 1]
that the model's answer is preferred to the baseline's (AlpacaEval's ``preference`` p in
[1, 2] is ``pref = p - 1``; a discrete verdict gives 1, 0, or 0.5 for a tie).

Sources:
- win rate: AlpacaEval 2.0, ``src/alpaca_eval/metrics/winrate.py`` (tatsu-lab/alpaca_eval):
  ``win_rate = 100 * mean(preference - 1)`` over the verdicts that have a preference, ties
  counted as half a win; ``discrete_win_rate`` rounds each verdict first (> 0.5 a win, 0.5 a
  half).
- position consistency: Zheng et al. (2023), "Judging LLM-as-a-judge with MT-Bench and
  Chatbot Arena", sec. 3.3 (the same pair judged in both orders; a consistent judge gives the
  same canonical verdict).
- rank correlations: scipy.stats.spearmanr / kendalltau (tau-b), percentile bootstrap over
  models (Efron & Tibshirani 1993).
"""

from __future__ import annotations

import hashlib

import numpy as np
from scipy.stats import kendalltau, spearmanr

from judgecal.calibrate.ranking import mean_ci


def win_rate(pref) -> float:
    """AlpacaEval's win rate in percent: 100 * mean(pref) over the finite entries of ``pref``.

    Args: pref: shape (n,), soft preferences in [0, 1] (NaN = no verdict, left out).
    Returns: percent in [0, 100]; NaN when no entry is finite.
    Source: alpaca_eval ``metrics/winrate.py`` (``preference - 1``, ties as half)."""
    p = np.asarray(pref, dtype=float)
    p = p[np.isfinite(p)]
    return float(100.0 * p.mean()) if p.size else float("nan")


def discrete_win_rate(pref) -> float:
    """Percent of verdicts won when each is rounded first: > 0.5 a win, == 0.5 half, < 0.5 a loss.

    Shape (n,) -> percent (NaN when empty). Source: alpaca_eval ``discrete_win_rate``."""
    p = np.asarray(pref, dtype=float)
    p = p[np.isfinite(p)]
    if not p.size:
        return float("nan")
    return float(100.0 * np.mean(np.where(p > 0.5, 1.0, np.where(p < 0.5, 0.0, 0.5))))


def bootstrap_over_items(values, n_bootstrap: int = 1000, seed: int = 0) -> tuple[float, list[float] | None]:
    """Mean (in percent) of per-instruction values in [0, 1] and its 95% percentile bootstrap CI
    over instructions (resampling instructions with replacement).

    Shape (n,) -> (percent, [low, high] or None). NaN entries are left out first."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    mean, ci = mean_ci(v, n_bootstrap, seed)
    return 100.0 * mean, None if ci is None else [100.0 * ci[0], 100.0 * ci[1]]


def item_weights(keys, n_bootstrap: int, seed: int = 0) -> np.ndarray:
    """Poisson bootstrap weights of instructions, shape (n_bootstrap, len(keys)): instruction
    ``keys[j]``'s weight in resample b is drawn from Poisson(1) by a generator seeded with
    ``seed`` and the key itself (its content key, e.g. the prompt SHA-256).

    Every model that answered an instruction sees the same weights for it, whatever other
    instructions or models there are: a model's interval depends on its own verdicts, ``seed``
    and nothing else (pool- and database-independent), and models are resampled together
    (paired). Source: Hanley & MacGibbon (2006), "Creating non-parametric bootstrap samples
    using Poisson frequencies"; the Poisson(1) count approximates the multinomial one."""
    out = np.empty((n_bootstrap, len(keys)))
    for j, k in enumerate(keys):
        h = hashlib.sha256(f"{seed}\x00{k}".encode("utf-8")).digest()
        out[:, j] = np.random.default_rng(int.from_bytes(h[:8], "little")).poisson(1.0, n_bootstrap)
    return out


def bootstrap_means(values, weights, level: float = 0.95) -> list[list[float] | None]:
    """Percentile CIs (in percent) of the weighted means of each column of ``values`` (shape
    (n, k), in [0, 1]; NaN rows left out) under bootstrap ``weights`` (shape (B, n), e.g.
    :func:`item_weights` of the rows' instructions). A resample whose weights sum to 0 is
    dropped. Returns k intervals ([low, high], or None when n < 2 or B = 0)."""
    v = np.asarray(values, dtype=float)
    if v.ndim == 1:
        v = v[:, None]
    # C order whatever the weights' layout: a matrix product's rounding depends on it
    Wt = np.ascontiguousarray(weights, dtype=float)
    ok = np.all(np.isfinite(v), axis=1)
    if not ok.all():  # (copies only when there is something to drop)
        v, Wt = v[ok], np.ascontiguousarray(Wt[:, ok])
    if v.shape[0] < 2 or Wt.shape[0] == 0:
        return [None] * v.shape[1]
    tot = Wt.sum(1)
    keep = tot > 0
    means = ((Wt @ v) / tot[:, None]) if keep.all() else (Wt[keep] @ v) / tot[keep, None]
    alpha = (1 - level) / 2
    lo, hi = np.quantile(means, [alpha, 1 - alpha], axis=0)
    return [[100.0 * float(a), 100.0 * float(b)] for a, b in zip(lo, hi)]


def head_to_head(pref) -> dict:
    """AlpacaEval's head-to-head counts of soft preferences in [0, 1] (finite entries):
    ``win_rate`` (100 * mean), ``standard_error`` (100 * standard error of the mean, ddof 1),
    ``n_wins`` (pref > 0.5), ``n_wins_base`` (pref < 0.5), ``n_draws`` (pref == 0.5),
    ``n_total``, ``discrete_win_rate``. Source: alpaca_eval ``metrics/helpers.py``
    (``describe_head2head``)."""
    p = np.asarray(pref, dtype=float)
    p = p[np.isfinite(p)]
    n = int(p.size)
    return {"win_rate": float(100 * p.mean()) if n else float("nan"),
            "standard_error": float(100 * p.std(ddof=1) / np.sqrt(n)) if n > 1 else float("nan"),
            "n_wins": int(np.sum(p > 0.5)), "n_wins_base": int(np.sum(p < 0.5)), "n_draws": int(np.sum(p == 0.5)),
            "n_total": n, "discrete_win_rate": discrete_win_rate(p)}


def position_consistency(pref_ab, pref_ba, n_bootstrap: int = 1000, seed: int = 0) -> dict:
    """How a judge's verdict depends on the order it was shown, from pairs judged in both orders.

    Args:
        pref_ab: shape (n,), P(a preferred) when a was shown first (canonical, i.e. already
            mapped back to a/b).
        pref_ba: shape (n,), P(a preferred) for the same pairs shown with b first.
    Returns: {"n_pairs", "consistent": share whose rounded canonical verdicts agree (ties
        agree only with ties), "flip_rate": 1 - consistent, "first_position_preference": share
        of the 2n verdicts that prefer whatever was shown first (ties count half; 0.5 = no
        position bias), each with a 95% bootstrap CI over pairs ("..._ci")}. Values are
        shares in [0, 1]; None when n = 0.
    Source: Zheng et al. (2023), MT-Bench paper, sec. 3.3 (position bias, consistency)."""
    ab = np.asarray(pref_ab, dtype=float)
    ba = np.asarray(pref_ba, dtype=float)
    keep = np.isfinite(ab) & np.isfinite(ba)
    ab, ba = ab[keep], ba[keep]
    n = int(ab.size)
    if n == 0:
        return {"n_pairs": 0, "consistent": None, "consistent_ci": None, "flip_rate": None, "flip_rate_ci": None,
                "first_position_preference": None, "first_position_preference_ci": None}
    sign_ab, sign_ba = np.sign(ab - 0.5), np.sign(ba - 0.5)
    same = (sign_ab == sign_ba).astype(float)
    # first shown: a in 'ab' (P(first) = ab), b in 'ba' (P(first) = 1 - ba)
    first = (ab + (1.0 - ba)) / 2.0
    cons, cons_ci = mean_ci(same, n_bootstrap, seed)
    fp, fp_ci = mean_ci(first, n_bootstrap, seed + 1)
    return {
        "n_pairs": n,
        "consistent": cons,
        "consistent_ci": cons_ci,
        "flip_rate": 1.0 - cons,
        "flip_rate_ci": None if cons_ci is None else [1.0 - cons_ci[1], 1.0 - cons_ci[0]],
        "first_position_preference": fp,
        "first_position_preference_ci": fp_ci,
    }


def length_preference(pref, len_a, len_b) -> dict:
    """The judge's length preference on pairs: share of decided verdicts (pref != 0.5, lengths
    different) that prefer the longer answer, and the mean preference for the longer one.

    Args: pref shape (n,) P(a preferred); len_a, len_b shape (n,) lengths (any one unit).
    Returns: {"n": decided pairs of unequal length, "longer_preferred": share in [0, 1] or None}.
    0.5 = no length preference."""
    p = np.asarray(pref, dtype=float)
    la, lb = np.asarray(len_a, dtype=float), np.asarray(len_b, dtype=float)
    keep = np.isfinite(p) & (la != lb) & (p != 0.5)
    if not keep.any():
        return {"n": 0, "longer_preferred": None}
    p, la, lb = p[keep], la[keep], lb[keep]
    longer = np.where(la > lb, p, 1.0 - p)
    return {"n": int(keep.sum()), "longer_preferred": float(np.mean(longer > 0.5))}


def rank_correlation(ours, theirs, n_bootstrap: int = 1000, seed: int = 0) -> dict:
    """Spearman rho and Kendall tau-b between two score vectors over the same models, with 95%
    percentile bootstrap CIs over models.

    Args: ours, theirs: shape (k,) scores of the same k models (NaN pairs left out).
    Returns: {"n_models", "spearman", "spearman_ci", "kendall", "kendall_ci", "undefined"}: the
    figures are None and ``undefined`` says why when k < 3 or when every score of one side is
    the same (a correlation with a constant is not defined); ``undefined`` is None otherwise.
    Source: scipy.stats.spearmanr, scipy.stats.kendalltau (tau-b)."""
    a, b = np.asarray(ours, dtype=float), np.asarray(theirs, dtype=float)
    keep = np.isfinite(a) & np.isfinite(b)
    a, b = a[keep], b[keep]
    k = int(a.size)
    out = {"n_models": k, "spearman": None, "spearman_ci": None, "kendall": None, "kendall_ci": None, "undefined": None}
    if k < 3:
        out["undefined"] = f"{k} models in common (3 or more are needed)"
        return out
    if np.ptp(a) == 0 or np.ptp(b) == 0:
        out["undefined"] = f"every {'score here' if np.ptp(a) == 0 else 'external score'} is the same ({(a if np.ptp(a) == 0 else b)[0]:g})"
        return out
    out["spearman"] = float(spearmanr(a, b).statistic)
    out["kendall"] = float(kendalltau(a, b).statistic)
    if n_bootstrap > 0:
        rng = np.random.default_rng(seed)
        idx = rng.integers(0, k, (n_bootstrap, k))
        rho, tau = _spearman_rows(a[idx], b[idx]), _kendall_rows(a[idx], b[idx])
        keep = np.isfinite(rho) & np.isfinite(tau)
        if keep.any():
            out["spearman_ci"] = [float(np.quantile(rho[keep], 0.025)), float(np.quantile(rho[keep], 0.975))]
            out["kendall_ci"] = [float(np.quantile(tau[keep], 0.025)), float(np.quantile(tau[keep], 0.975))]
    return out


def _spearman_rows(A, B) -> np.ndarray:
    """Spearman rho per row of (r, k) matrices (average ranks for ties; NaN for a constant row)."""
    from scipy.stats import rankdata

    ra, rb = rankdata(A, axis=1), rankdata(B, axis=1)
    ra -= ra.mean(axis=1, keepdims=True)
    rb -= rb.mean(axis=1, keepdims=True)
    den = np.sqrt((ra ** 2).sum(1) * (rb ** 2).sum(1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, (ra * rb).sum(1) / np.where(den > 0, den, 1), np.nan)


def _kendall_rows(A, B) -> np.ndarray:
    """Kendall tau-b per row of (r, k) matrices (NaN for a constant row), as scipy's kendalltau."""
    sa = np.sign(A[:, :, None] - A[:, None, :])
    sb = np.sign(B[:, :, None] - B[:, None, :])
    iu = np.triu_indices(A.shape[1], 1)
    sa, sb = sa[:, iu[0], iu[1]], sb[:, iu[0], iu[1]]
    num = (sa * sb).sum(1)
    den = np.sqrt((sa != 0).sum(1) * (sb != 0).sum(1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1), np.nan)
