"""Leaderboard statistics: bootstrap CI of a mean, competition ranks, rank changes.

Ranks are computed on the values as the boards display them (:data:`WIN_RATE_DECIMALS`,
:data:`SCORE_DECIMALS`): two rows shown with the same number share a rank, so fitting noise
below the last shown digit never makes a rank change (docs/leaderboard.md). Pure numpy; no I/O."""

from __future__ import annotations

import numpy as np
from scipy.stats import rankdata


def mean_ci(values, n_bootstrap: int = 1000, seed: int = 0, level: float = 0.95) -> tuple[float, list[float] | None]:
    """Mean of ``values`` (shape (n,)) and its percentile bootstrap CI (resampling values).

    Returns (mean, [low, high]) or (mean, None) when n < 2 or ``n_bootstrap`` is 0; (nan, None)
    for an empty input. Source: Efron & Tibshirani (1993), percentile interval."""
    return mean_cis([values], n_bootstrap, seed, level)[0]


def mean_cis(columns, n_bootstrap: int = 1000, seed: int = 0, level: float = 0.95) -> list[tuple[float, list[float] | None]]:
    """:func:`mean_ci` of each of ``columns`` (sequences of one length n, e.g. a model's raw and
    calibrated scores) over the SAME resamples: the seed's resample indices are drawn once (in
    blocks bounding memory at about 8 MB whatever n is) and every column is averaged over them,
    so each result equals :func:`mean_ci` of that column alone. Raises ValueError when the
    columns differ in length."""
    vs = [np.asarray(c, dtype=float) for c in columns]
    if len({v.size for v in vs}) > 1:
        raise ValueError(f"mean_cis: columns of different lengths {sorted({v.size for v in vs})}")
    n = vs[0].size if vs else 0
    if n == 0:
        return [(float("nan"), None) for _ in vs]
    if n < 2 or n_bootstrap <= 0:
        return [(float(v.mean()), None) for v in vs]
    rng = np.random.default_rng(seed)
    block = max(1, 1_000_000 // n)
    means: list[list[np.ndarray]] = [[] for _ in vs]
    for start in range(0, n_bootstrap, block):
        idx = rng.integers(0, n, (min(block, n_bootstrap - start), n))
        for out, v in zip(means, vs):
            out.append(v[idx].mean(axis=1))
    alpha = (1 - level) / 2
    res = []
    for v, ms in zip(vs, means):
        ms = np.concatenate(ms)
        res.append((float(v.mean()), [float(np.quantile(ms, alpha)), float(np.quantile(ms, 1 - alpha))]))
    return res


#: Decimals the win-rate boards show (percent) and rank on.
WIN_RATE_DECIMALS = 2
#: Decimals the score board shows its mean judge scores with and ranks on.
SCORE_DECIMALS = 3


def shown(value: float, decimals: int) -> float:
    """``value`` rounded as it is displayed with ``decimals`` decimals (the float of its
    ``f"{value:.{decimals}f}"`` text: the same rounding as the renderers, half-even on the
    binary value); NaN stays NaN."""
    return float(f"{value:.{decimals}f}") if value == value else value


def ranks(scores, decimals: int | None = None) -> np.ndarray:
    """Competition ranks, 1 = highest score; ties share the best rank ("1224"); NaN (or None)
    ranks last. With ``decimals``, on the scores as displayed (:func:`shown`): scores shown
    alike are ties.

    Shape (n,) -> int array (n,)."""
    s = np.asarray(scores, dtype=float)
    if decimals is not None:
        s = np.array([shown(float(v), decimals) for v in s], dtype=float)
    filled = np.where(np.isnan(s), -np.inf, s)
    return rankdata(-filled, method="min").astype(int)


def shown_ranks(scores, decimals: int) -> list[int | None]:
    """Competition ranks (:func:`ranks`) on the displayed scores of the rows that have one;
    None for a row without a score (None or NaN: e.g. a column not identified), which takes no
    rank and pushes no other row down. Shape (n,) -> list (n,)."""
    s = np.asarray([np.nan if v is None else v for v in scores], dtype=float)
    have = np.flatnonzero(np.isfinite(s))
    out: list[int | None] = [None] * s.size
    for i, k in zip(have, ranks(s[have], decimals)):
        out[int(i)] = int(k)
    return out


def rank_change(before: int | None, after: int | None) -> int | None:
    """``before - after`` (positive = moved up), None when either rank is None."""
    return None if before is None or after is None else int(before - after)
