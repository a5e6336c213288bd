"""The length penalty of the seed formula, and the optional information-density exemption.

Source: DESIGN.md (seed formula of the method judgecal measures)::

    S_calib = clip(S_raw - gamma * sign(L - L_ref) * |ln(L / L_ref)|^p, scale_min, scale_max)

with gamma >= 0 (strength; a *signed* calibration, an option of the fit, may have gamma < 0:
it then penalises answers shorter than L_ref), p > 0 (usually in [1.0, 1.5]) and L_ref > 0 the reference length
(the median length of the task family unless given). Lengths are in whatever unit the caller
chose (tokens, words, characters or UTF-8 bytes); L and L_ref must use the same unit.

Length zero: an empty response has L = 0 and ln(0) is undefined, so every length (and L_ref)
is floored at :data:`LENGTH_FLOOR` = 1 unit before the logarithm: ``ln(max(L, 1) / max(L_ref,
1))``. An empty answer is therefore treated like a one-unit answer (the shortest possible
non-empty one); no function here ever raises a math error or returns NaN for L = 0.

Short-side floor (gaming guard, docs/calibration.md): with ``floor`` (a length ratio in (0, 1];
judgecal's fits use :data:`DEFAULT_SHORT_FLOOR` = 1/4, the same guard as the win-rate mode of
:mod:`judgecal.calibrate.winrate_penalty`) the log ratio saturates on the short side::

    r = max(ln(max(L, 1) / max(L_ref, 1)), ln(floor))

so an answer shorter than ``floor * L_ref`` earns no more credit than one at ``floor * L_ref``:
the bonus is bounded by gamma * ln(1/floor)^p. The long side is unchanged (the worked example
below holds with or without a floor). ``floor`` None (the default of these functions) is the
seed formula as written: an unbounded short side. ``no_credit`` (per response, bool) marks
answers that earn no length credit at all: their penalty is clipped at >= 0, so their
calibrated score is never above their raw score (empty answers and answers repeated verbatim
across items: :mod:`judgecal.calibrate.guards`).

All functions are pure and vectorised over numpy arrays (broadcasting as numpy does).
"""

from __future__ import annotations

from collections import Counter
from typing import Mapping

import numpy as np

from judgecal.errors import UsageError

#: Lengths (and L_ref) are floored at this many units before the logarithm (handles L = 0).
LENGTH_FLOOR = 1.0

#: Default short-side floor of judgecal's fits (a length ratio: an answer shorter than a quarter of
#: L_ref earns no more credit than one at a quarter). The win-rate mode uses the same constant.
DEFAULT_SHORT_FLOOR = 0.25

#: Default weight ``w`` of the information-density exemption.
DEFAULT_DENSITY_WEIGHT = 0.5


def _check_l_ref(l_ref) -> np.ndarray:
    l_ref = np.asarray(l_ref, dtype=float)
    if not np.all(np.isfinite(l_ref)) or np.any(l_ref <= 0):
        raise UsageError(f"l_ref must be a positive finite length, got {l_ref!r}")
    return l_ref


def check_floor(floor) -> float | None:
    """``floor`` as a float in (0, 1], or None (no floor). Raises UsageError otherwise."""
    if floor is None:
        return None
    f = float(floor)
    if not (0.0 < f <= 1.0):
        raise UsageError(f"the short-side floor must be a length ratio in (0, 1], got {floor!r}")
    return f


def log_ratio(length, l_ref, floor: float | None = None) -> np.ndarray:
    """ln(L / L_ref) with both lengths floored at :data:`LENGTH_FLOOR` (1 unit), saturating at
    ln(floor) on the short side when ``floor`` is given (module doc).

    Args:
        length: array-like of lengths, shape (n,) (any unit; >= 0).
        l_ref: reference length(s) in the same unit, > 0 (scalar or broadcastable).
        floor: None (no floor: the seed formula) or a length ratio in (0, 1].
    Returns:
        float array of natural-log ratios (nats), shape of the broadcast. L = 0 gives
        ln(1 / L_ref) (or ln(floor) when that is larger), never a math error.
    Raises:
        UsageError: l_ref not positive/finite, floor outside (0, 1]. judgecal.errors.InputError
        is not raised here: negative or NaN lengths give NaN (callers validate their inputs).
    Source: DESIGN.md seed formula (the ln(L / L_ref) term); the floor is judgecal's guard.
    """
    l_ref = _check_l_ref(l_ref)
    floor = check_floor(floor)
    length = np.asarray(length, dtype=float)
    r = np.log(np.maximum(length, LENGTH_FLOOR)) - np.log(np.maximum(l_ref, LENGTH_FLOOR))
    return r if floor is None else np.maximum(r, np.log(floor))


def polylog_feature(length, l_ref, p, floor: float | None = None) -> np.ndarray:
    """sign(r) * |r|^p with r = :func:`log_ratio` (the penalty for gamma = 1). Shape of the broadcast.

    Source: DESIGN.md seed formula. Zero at L = L_ref; odd in the log ratio, so answers
    shorter than L_ref get a bonus of the same size as longer ones get a penalty (down to the
    short-side ``floor``, when given).
    """
    r = log_ratio(length, l_ref, floor)
    return np.sign(r) * np.abs(r) ** np.asarray(p, dtype=float)


def no_credit_clip(pen, no_credit) -> np.ndarray:
    """The penalty with no length credit for the rows of ``no_credit`` (bool, broadcastable):
    ``max(pen, 0)`` there (the calibrated score is never above the raw one), ``pen`` elsewhere."""
    pen = np.asarray(pen, dtype=float)
    if no_credit is None:
        return pen
    return np.where(np.asarray(no_credit, dtype=bool), np.maximum(pen, 0.0), pen)


def polylog_penalty(length, l_ref, gamma, p, *, signed: bool = False, floor: float | None = None,
                    no_credit=None) -> np.ndarray:
    """The penalty gamma * sign(L - L_ref) * |ln(L / L_ref)|^p, in score units.

    Args:
        length: lengths, shape (n,), same unit as l_ref (floored at 1 unit: see module doc).
        l_ref: reference length > 0.
        gamma: strength >= 0 (score units per |nat|^p); any finite value with ``signed``.
        p: exponent > 0.
        signed: allow gamma < 0 (a signed calibration; see :mod:`judgecal.calibrate.fit`).
        floor: short-side floor (a ratio in (0, 1]; None: none): module doc.
        no_credit: optional bool per response: those rows get ``max(pen, 0)`` (no credit).
    Returns:
        float array, shape (n,): positive for L > L_ref (subtracted from the score), negative
        (a bonus) for L < L_ref, 0 at L = L_ref. With a floor the bonus is at most
        gamma * ln(1/floor)^p.
    Raises:
        UsageError: gamma < 0 (without ``signed``) or not finite, p <= 0 or l_ref not positive.
    Source: DESIGN.md seed formula. Worked example (DESIGN.md): L = 1200, L_ref = 300,
    gamma = 0.5, p = 1.2 gives 0.5 * ln(4)^1.2 = 0.7399.
    """
    g = np.asarray(gamma, dtype=float)
    if not np.all(np.isfinite(g)):
        raise UsageError(f"gamma must be finite, got {gamma!r}")
    if not signed and np.any(g < 0):
        raise UsageError(f"gamma must be >= 0 (a negative gamma needs a signed calibration), got {gamma!r}")
    if np.any(np.asarray(p, dtype=float) <= 0):
        raise UsageError(f"p must be > 0, got {p!r}")
    return no_credit_clip(np.asarray(gamma, dtype=float) * polylog_feature(length, l_ref, p, floor), no_credit)


def token_entropy(text: str) -> float:
    """Unique-token (Shannon) entropy of a response, in bits, over whitespace tokens.

    ``H = -sum_t (c_t / n) * log2(c_t / n)`` where c_t counts each distinct token of
    ``text.split()`` and n is the number of tokens. An empty text (n = 0) and a text made of
    one repeated token both give 0.0. A text of n distinct tokens gives log2(n).

    Source: judgecal's reading of DESIGN.md's "information density (unique-token entropy)"
    refinement; the exact form is ours (documented in docs/calibration.md).
    """
    tokens = text.split()
    n = len(tokens)
    if n == 0:
        return 0.0
    counts = np.fromiter(Counter(tokens).values(), dtype=float)
    q = counts / n
    return float(-(q * np.log2(q)).sum())


def density_multiplier(length, l_ref, density, density_params: Mapping | None = None) -> np.ndarray:
    """Multiplier of the penalty under the information-density exemption, shape (n,).

    For L > L_ref: ``m = 1 - w * clip((H - H_ref) / H_ref, 0, 1)``; for L <= L_ref: m = 1 (the
    bonus of short answers is never changed). H is :func:`token_entropy` of the response in
    bits. ``density_params`` is ``{"h_ref": bits > 0, "w": weight in [0, 1]}``; a missing
    ``h_ref`` defaults to the median of ``density`` and a missing ``w`` to 0.5. So a long answer
    whose entropy is at least twice H_ref keeps (1 - w) of its penalty, one at or below H_ref
    keeps all of it.

    Raises:
        UsageError: h_ref <= 0, w outside [0, 1], or density of another shape than length.
    Source: judgecal's exact form of DESIGN.md's optional density refinement.
    """
    density = np.asarray(density, dtype=float)
    length = np.asarray(length, dtype=float)
    if density.shape != np.broadcast(length, density).shape:
        raise UsageError("density must have one value per response (same shape as length)")
    params = dict(density_params or {})
    h_ref = float(params.get("h_ref", np.median(density) if density.size else 1.0))
    w = float(params.get("w", DEFAULT_DENSITY_WEIGHT))
    if not np.isfinite(h_ref) or h_ref <= 0:
        raise UsageError(f"density h_ref must be > 0 bits, got {h_ref!r}")
    if not 0.0 <= w <= 1.0:
        raise UsageError(f"density weight w must be in [0, 1], got {w!r}")
    excess = np.clip((density - h_ref) / h_ref, 0.0, 1.0)
    m = 1.0 - w * excess
    return np.where(log_ratio(length, l_ref) > 0, m, 1.0)


def calibrate(
    s_raw,
    length,
    l_ref,
    gamma,
    p,
    scale_min,
    scale_max,
    density=None,
    density_params: Mapping | None = None,
    *,
    signed: bool = False,
    floor: float | None = None,
    no_credit=None,
) -> np.ndarray:
    """Calibrated scores: ``clip(S_raw - m * gamma * sign(L-L_ref) * |ln(L/L_ref)|^p, min, max)``.

    Args:
        s_raw: raw judge scores, shape (n,), in the judge's scale units.
        length: lengths, shape (n,) (floored at 1 unit before the log: L = 0 is allowed).
        l_ref, gamma, p: see :func:`polylog_penalty`.
        scale_min, scale_max: the judge's scale; the result is clipped to it (an unbounded
            scale, -inf / inf, clips nothing).
        density: optional per-response entropy in bits (:func:`token_entropy`), shape (n,);
            None (default) disables the exemption (m = 1).
        density_params: ``{"h_ref", "w"}`` of :func:`density_multiplier`.
        signed: allow gamma < 0 (see :func:`polylog_penalty`).
        floor: short-side floor (module doc): ln(L/L_ref) saturates at ln(floor); None: none.
        no_credit: optional bool per response: no length credit there (penalty clipped at >= 0,
            after the density multiplier), so the calibrated score is at most the raw one.
    Returns:
        float array, shape (n,), within [scale_min, scale_max].
    Raises:
        UsageError: scale_min >= scale_max, gamma < 0, p <= 0, l_ref <= 0.
    Source: DESIGN.md seed formula; worked example raw 9.0, L = 1200, L_ref = 300, gamma = 0.5,
    p = 1.2 gives 8.26.
    """
    if not float(scale_min) < float(scale_max):
        raise UsageError(f"scale_min must be < scale_max, got {scale_min!r} >= {scale_max!r}")
    pen = polylog_penalty(length, l_ref, gamma, p, signed=signed, floor=floor)
    if density is not None:
        pen = pen * density_multiplier(length, l_ref, density, density_params)
    pen = no_credit_clip(pen, no_credit)
    return np.clip(np.asarray(s_raw, dtype=float) - pen, float(scale_min), float(scale_max))
