"""Leaderboard statistics: bootstrap CI of a mean, competition ranks, rank changes.

Pure numpy; no I/O."""

from __future__ import annotations

import numpy as np
from scipy.stats import rankdata


def mean_ci(values, n_bootstrap: int = 1000, seed: int = 0, level: float = 0.95) -> tuple[float, list[float] | None]:
    """Mean of ``values`` (shape (n,)) and its percentile bootstrap CI (resampling values).

    Returns (mean, [low, high]) or (mean, None) when n < 2 or ``n_bootstrap`` is 0; (nan, None)
    for an empty input. Source: Efron & Tibshirani (1993), percentile interval."""
    v = np.asarray(values, dtype=float)
    if v.size == 0:
        return float("nan"), None
    mean = float(v.mean())
    if v.size < 2 or n_bootstrap <= 0:
        return mean, None
    rng = np.random.default_rng(seed)
    # resample in blocks to bound memory at ~8 MB whatever n is
    block = max(1, 1_000_000 // v.size)
    means = []
    for start in range(0, n_bootstrap, block):
        k = min(block, n_bootstrap - start)
        means.append(v[rng.integers(0, v.size, (k, v.size))].mean(axis=1))
    means = np.concatenate(means)
    alpha = (1 - level) / 2
    return mean, [float(np.quantile(means, alpha)), float(np.quantile(means, 1 - alpha))]


def ranks(scores) -> np.ndarray:
    """Competition ranks, 1 = highest score; ties share the best rank ("1224"); NaN ranks last.

    Shape (n,) -> int array (n,)."""
    s = np.asarray(scores, dtype=float)
    filled = np.where(np.isnan(s), -np.inf, s)
    return rankdata(-filled, method="min").astype(int)
