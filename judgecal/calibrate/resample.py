"""Resampling for evaluation: item-grouped CV folds, bootstrap multiplicities, and metrics of
many refits at once weighted by those multiplicities. Pure numpy; no I/O.

Sources: K-fold cross-validation grouped by item; the nonparametric bootstrap over items with
percentile intervals (Efron & Tibshirani 1993). Metric definitions: :mod:`.metrics`.
"""

from __future__ import annotations

import numpy as np

from judgecal.calibrate import metrics as M
from judgecal.calibrate.data import PairData, VerbosityData
from judgecal.calibrate.penalty import LENGTH_FLOOR


def percentile_ci(values) -> list | None:
    """[2.5, 97.5] percentiles of the finite values, or None when there is none."""
    v = np.asarray([x for x in values if x is not None and np.isfinite(x)], dtype=float)
    if v.size == 0:
        return None
    return [float(np.percentile(v, 2.5)), float(np.percentile(v, 97.5))]


#: a verdict read off a bootstrap CI is decided when its tail share lies more than this many
#: Monte Carlo (binomial) standard errors from 2.5%
MC_Z = 3.0

#: resamples x units (items or rows) drawn at once by :func:`decided_mean_ci` (32 MB a float64
#: array): its doubling reaches 32 x --bootstrap resamples, which drawn in one piece took
#: several GB on a family of ~1000 items (a knife edge at --bootstrap 20000)
CHUNK_CELLS = 1 << 22


def decided_mean_ci(credit, codes, n_items: int, n_bootstrap: int, seed: int, *, max_resamples: int | None = None,
                    z: float = MC_Z) -> dict:
    """A paired-bootstrap 95% percentile CI of the item-resampled mean of ``credit`` with the
    side of zero it lies on, resampled until that side is decided or reported as undecided.

    The side: "below" when the share of replicates >= 0 is under 2.5% (the CI lies below zero),
    "above" when the share <= 0 is under 2.5%, else "spans". Each share is a binomial
    proportion of the B replicates: the side is decided when both shares lie more than ``z``
    Monte Carlo standard errors (sqrt(p (1 - p) / B), p at least 1/B) from 2.5%, so a verdict
    read off the CI does not hang on the seed (a bootstrap distribution is discrete: its
    percentile can sit exactly on zero for one seed and beside it for another).

    Args: credit shape (n,) per-row values (e.g. a method's agreement credit minus raw's);
    codes shape (n,) each row's item in 0..n_items-1 (:func:`item_codes`); ``n_bootstrap``
    resamples first (drawn as :func:`resample_counts` does with ``default_rng(seed)``, so the CI
    of a side decided at once is the plain percentile CI of those resamples); while undecided,
    the resamples are doubled (continuing the same random stream: the result depends only on
    the data and ``seed``) up to ``max_resamples`` (default 32 x n_bootstrap). Drawn in chunks
    of at most :data:`CHUNK_CELLS` resample x unit cells (the same stream as one piece), so the
    memory does not grow with the number of resamples beyond the replicate means.

    Returns {"ci": [lo, hi] | None, "side": "below" | "above" | "spans" | None, "decided":
    bool, "n_resamples", "share_at_or_above_0", "share_at_or_below_0"}; ``ci`` None when
    ``n_bootstrap`` is 0."""
    credit = np.asarray(credit, dtype=float)
    out = {"ci": None, "side": None, "decided": False, "n_resamples": 0, "share_at_or_above_0": None,
           "share_at_or_below_0": None}
    if n_bootstrap <= 0:
        return out
    cap = max(n_bootstrap, max_resamples if max_resamples is not None else 32 * n_bootstrap)
    rng = np.random.default_rng(seed)
    reps: list[np.ndarray] = []
    drawn, batch = 0, n_bootstrap
    codes = np.asarray(codes)
    step = max(1, CHUNK_CELLS // max(n_items, codes.size, 1))
    while True:
        for s in range(0, batch, step):  # in chunks: the same random stream, bounded memory
            W = resample_counts(n_items, min(step, batch - s), rng)[:, codes]
            tot = W.sum(axis=1)
            reps.append(np.where(tot > 0, W @ credit / np.where(tot > 0, tot, 1.0), np.nan))
        drawn += batch
        v = np.concatenate(reps)
        v = v[np.isfinite(v)]
        ci = percentile_ci(v)
        if ci is None:
            return {**out, "n_resamples": drawn}
        n = v.size
        shares = (float(np.mean(v >= 0)), float(np.mean(v <= 0)))

        def clear(p: float) -> bool:
            se = np.sqrt(max(p, 1.0 / n) * (1.0 - min(p, 1.0 - 1.0 / n)) / n)
            return abs(p - 0.025) > z * se

        decided = all(clear(p) for p in shares)
        if decided or drawn >= cap:
            side = "below" if shares[0] < 0.025 else "above" if shares[1] < 0.025 else "spans"
            return {"ci": ci, "side": side, "decided": bool(decided), "n_resamples": drawn,
                    "share_at_or_above_0": shares[0], "share_at_or_below_0": shares[1]}
        batch = min(drawn, cap - drawn)


def make_folds(item_ids, folds: int, seed: int) -> tuple[np.ndarray, int]:
    """Fold number of every row, grouped by item: the distinct items (sorted as strings) are
    shuffled with ``numpy.random.default_rng(seed)`` and split into ``k = min(folds, n_items)``
    near-equal groups (numpy.array_split). Returns (fold per row, shape (n,), k); k < 2 means no
    CV. The folds depend only on the item keys and ``seed``: pass content keys (judgecal passes
    each item's prompt SHA-256), never database row ids, for the same folds in every database."""
    items, codes = np.unique(np.asarray(item_ids).astype(str), return_inverse=True)
    k = int(min(folds, items.size))
    if k < 2:
        return np.zeros(codes.size, dtype=int), k
    perm = np.random.default_rng(seed).permutation(items.size)
    fold_of_item = np.empty(items.size, dtype=int)
    for f, group in enumerate(np.array_split(perm, k)):
        fold_of_item[group] = f
    return fold_of_item[codes], k


def item_codes(item_ids) -> tuple[np.ndarray, int]:
    """(code of each row's item in 0..n_items-1, n_items); item keys compared as strings, codes
    in their sorted order (content keys give the same codes, hence the same bootstrap
    resamples, in every database)."""
    items, codes = np.unique(np.asarray(item_ids).astype(str), return_inverse=True)
    return codes, int(items.size)


def resample_counts(n: int, n_bootstrap: int, rng) -> np.ndarray:
    """(B, n) multiplicities of B bootstrap resamples of n units (drawn with replacement)."""
    idx = rng.integers(0, n, (n_bootstrap, n)) + n * np.arange(n_bootstrap)[:, None]
    return np.bincount(idx.ravel(), minlength=n_bootstrap * n).reshape(n_bootstrap, n).astype(float)


def weighted_means(credit, W) -> np.ndarray:
    """Row-wise weighted means of credit (B, n) (or (n,)) under weights W (B, n); NaN where a
    row's weights sum to 0."""
    tot = W.sum(axis=1)
    return np.where(tot > 0, (credit * W).sum(axis=1) / np.where(tot > 0, tot, 1.0), np.nan)


def weighted_slopes(S, x, W) -> np.ndarray:
    """Row-wise weighted least-squares slope of S (B, m) on x (m,)."""
    tot = W.sum(axis=1)
    xm = W @ x / tot
    ym = (W * S).sum(axis=1) / tot
    dx = x[None, :] - xm[:, None]
    sxx = (W * dx * dx).sum(axis=1)
    sxy = (W * dx * (S - ym[:, None])).sum(axis=1)
    return np.where(sxx > 1e-12, sxy / np.where(sxx > 1e-12, sxx, 1.0), np.nan)


def pair_metrics_batch(fits: list, d: PairData, W, v: VerbosityData | None, V) -> dict:
    """Agreement, length preference, slope and verbosity win-rate of every refit, weighted by
    its resample's multiplicities (rows of W, V): arrays of shape (B,)."""
    nan = np.full(len(fits), np.nan)
    if not fits:
        return {"agreement": nan, "length_preference": nan, "slope": nan, "verbosity_win_rate": nan}
    P = np.stack([f.predict_pair(d.score_a, d.score_b, d.len_a, d.len_b, d.density_a, d.density_b)
                  for f in fits])
    keep = (d.len_a != d.len_b).astype(float)
    lcredit = np.where(d.len_a > d.len_b, M.order_credit(P, 0.5), M.order_credit(0.5, P))
    out = {"agreement": weighted_means(M.agreement_credit(P, 1.0 - P, d.outcome), W),
           "length_preference": weighted_means(lcredit, W * keep), "slope": nan,
           "verbosity_win_rate": nan}
    if fits[0].per_response:
        S = np.stack([np.concatenate([f.calibrate(d.score_a, d.len_a, d.density_a),
                                      f.calibrate(d.score_b, d.len_b, d.density_b)]) for f in fits])
        x = np.log(np.maximum(np.concatenate([d.len_a, d.len_b]), LENGTH_FLOOR))
        out["slope"] = weighted_slopes(S, x, np.concatenate([W, W], axis=1))
    if v is not None and V is not None:
        VP = np.stack([f.predict_pair(v.score_verbose, v.score_concise, v.len_verbose, v.len_concise,
                                      v.density_verbose, v.density_concise) for f in fits])
        out["verbosity_win_rate"] = weighted_means(M.order_credit(VP, 0.5), V)
    return out
