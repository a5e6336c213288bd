"""Fitting gamma and p of the seed formula against expert labels (pairwise or pointwise).

Sources: the penalty is DESIGN.md's seed formula (see :mod:`judgecal.calibrate.penalty`); the
pairwise objective is the Bradley-Terry / logistic likelihood (Bradley & Terry 1952) with
ties counted as half a win each way (no separate tie parameter as in Rao & Kupper 1967); the
pointwise objective is ordinary least squares. :func:`batch_logistic` (damped Newton on many
weighted two-parameter logistic problems at once) serves the bootstrap of the baselines.

Pairwise model, per pair i (a vs b)::

    d_i  = (S_a - m_a*gamma*f(L_a; p)) - (S_b - m_b*gamma*f(L_b; p)),  f(L; p) = sign(r)|r|^p,
           r = ln(max(L,1)/L_ref)
    P(a beats b) = sigmoid(s * d_i)                   (s = bt_scale, the BT temperature, > 0)
    loss = sum_i w_i [softplus(s d_i) - y_i s d_i] / sum_i w_i,  y_i in {1, 0.5, 0}

(m = 1 unless the density exemption gives per-response multipliers; with ``floor`` the log
ratio saturates on the short side, ``r = max(ln(max(L,1)/L_ref), ln(floor))``, the gaming guard
of :mod:`judgecal.calibrate.penalty`: the fitted function is the one applied.) **The clip is part of the
fitted model**: with ``clip`` = the judge's (min, max), each calibrated score is
``c = clip(S - m*gamma*f(L; p), min, max)`` and ``d_i = c_a - c_b``, so what is fitted is exactly
the function that is reported (a calibration that pushes scores past the scale ends turns
pairs into ties, and the likelihood pays for it). The clip is piecewise linear: its derivative
is 1 inside the scale and 0 outside, which is the (sub)gradient used. An unbounded scale
(-inf, inf) clips nothing.

**Signed penalty** (``signed=True``, off by default): gamma may be negative, bounded by
[-gamma_max, gamma_max]; a negative gamma penalises answers *shorter* than L_ref (a judge that
already favours short answers). The seed formula's gamma >= 0 is the default.

Pointwise model: ``loss = sum_i w_i (clip(S_i - m_i*gamma*f(L_i; p)) - E'_i)^2 / sum_i w_i`` where
E' is the expert score mapped linearly onto the judge's scale,
``E' = j_min + (E - e_min) * (j_max - j_min) / (e_max - e_min)``.

Both are minimised by ``scipy.optimize.minimize(method="L-BFGS-B")`` with bounds
(gamma in [0, gamma_max] or [-gamma_max, gamma_max] when signed, p in p_bounds, s in
[1e-3, 1e3] / scale width), a vectorised objective and its analytic (sub)gradient, from several
starting points; the best optimum is returned. For an unbounded scale the "width" is the
spread (max - min) of the observed scores.
"""

from __future__ import annotations

import contextlib
from dataclasses import asdict, dataclass, field
from typing import Sequence

import numpy as np
from scipy.optimize import minimize

from judgecal.calibrate.penalty import check_floor, log_ratio
from judgecal.errors import FitError, UsageError

#: Fewer labelled pairs (or pointwise labels) than this raise FitError.
MIN_LABELS = 10


@dataclass(frozen=True)
class FitResult:
    """A fitted calibration. ``short_floor``: the short-side floor of the fitted penalty (None:
    the seed formula's unbounded short side). ``bt_scale`` is None for pointwise fits; ``loss`` is the mean
    negative log-likelihood in nats per pair (pairwise) or the mean squared error in squared
    score units (pointwise). ``at_bound`` maps "gamma", "p", "bt_scale" to None, "lower" or
    "upper". ``n`` counts labelled pairs (pairwise) or responses (pointwise)."""

    gamma: float
    p: float
    l_ref: float
    bt_scale: float | None
    loss: float
    n: int
    converged: bool
    at_bound: dict
    message: str
    short_floor: float | None = None
    #: other local optima the multi-start found with a loss within :data:`OPTIMA_TOL` of the best,
    #: at different parameters: [{"gamma", "p", "loss"}] (empty: the starts agree)
    other_optima: list = field(default_factory=list)

    def to_dict(self) -> dict:
        """JSON-serialisable copy."""
        return asdict(self)


# ----------------------------------------------------------------------------- helpers
def _check_p_bounds(p_bounds) -> tuple[float, float]:
    lo, hi = (float(v) for v in p_bounds)
    if not (0 < lo <= hi) or not np.isfinite(hi):
        raise UsageError(f"p bounds must satisfy 0 < p_min <= p_max, got {p_bounds!r}")
    return lo, hi


def _check_scale(scale) -> tuple[float, float]:
    lo, hi = (float(v) for v in scale)
    if np.isnan(lo) or np.isnan(hi) or not lo < hi:
        raise UsageError(f"scale must be (min, max) with min < max, got {scale!r}")
    return lo, hi


def scale_width(scale, *scores) -> float:
    """Width max - min of the judge's scale; for an unbounded scale (an infinite end) the spread
    of the observed scores (at least 1 score unit). Sets the bounds of gamma and s."""
    lo, hi = (float(v) for v in scale)
    if np.isfinite(lo) and np.isfinite(hi):
        return hi - lo
    allv = np.concatenate([np.asarray(v, dtype=float).reshape(-1) for v in scores]) if scores else np.empty(0)
    spread = float(np.ptp(allv)) if allv.size else 0.0
    return max(spread, 1.0)


def clip_grad_mask(c, clip) -> np.ndarray:
    """d clip(c)/dc: 1 where lo <= c <= hi (the scale ends count as inside), else 0."""
    if clip is None:
        return np.ones_like(c)
    return ((c >= clip[0]) & (c <= clip[1])).astype(float)


def default_l_ref(*lengths) -> float:
    """The median of all given lengths (floored at 1 unit): DESIGN.md's default L_ref."""
    allv = np.concatenate([np.asarray(v, dtype=float).reshape(-1) for v in lengths])
    if allv.size == 0:
        raise FitError("cannot compute L_ref: no lengths")
    return float(max(np.median(allv), 1.0))


class _Feature:
    """Precomputed f(L; p) = m * sign(r) * |r|^p and df/dp for one set of lengths (r saturating
    at ln(floor) on the short side when ``floor`` is given)."""

    def __init__(self, length, l_ref, mult=None, floor=None):
        r = log_ratio(length, l_ref, floor)
        self.sign = np.sign(r) * (1.0 if mult is None else np.asarray(mult, dtype=float))
        absr = np.abs(r)
        self.logabs = np.where(absr > 0, np.log(np.where(absr > 0, absr, 1.0)), 0.0)

    def __call__(self, p):
        f = self.sign * np.exp(p * self.logabs)  # |r|^p, 0 where r == 0 (sign 0)
        return f, f * self.logabs


class _LinearFeature:
    """f(L) = (L - L_ref) / L_ref of the linear baseline (no exponent: df/dp = 0)."""

    def __init__(self, length, l_ref, mult=None, floor=None):  # floor: the linear short side is bounded already
        with np.errstate(over="ignore"):  # a tiny L_ref overflows: fit_* refuse a feature that is not finite
            self.f = (np.asarray(length, dtype=float) - l_ref) / l_ref
        if mult is not None:
            self.f = self.f * np.asarray(mult, dtype=float)
        self.zero = np.zeros_like(self.f)

    def __call__(self, p):
        return self.f, self.zero


def _make_feature(penalty: str, length, l_ref, mult=None, floor=None):
    if penalty == "polylog":
        return _Feature(length, l_ref, mult, floor)
    if penalty == "linear":
        return _LinearFeature(length, l_ref, mult)
    raise UsageError(f"unknown penalty {penalty!r}: expected 'polylog' or 'linear'")


def _weights(weights, n) -> np.ndarray:
    if weights is None:
        return np.full(n, 1.0 / n)
    w = np.asarray(weights, dtype=float)
    if w.shape != (n,) or np.any(w < 0) or w.sum() <= 0:
        raise UsageError("weights must be n non-negative numbers with a positive sum")
    return w / w.sum()


def _at_bound(x, lo, hi, tol) -> str | None:
    if x <= lo + tol:
        return "lower"
    if x >= hi - tol:
        return "upper"
    return None


_BLAS = None


def single_threaded_blas():
    """Context manager limiting BLAS to one thread (via threadpoolctl, when installed).

    scipy's L-BFGS-B calls BLAS on vectors of 2-3 numbers; a multi-threaded OpenBLAS spends
    ~10x the work waking its threads there (measured: 6.7 ms vs 67 ms per 100-pair fit on 2
    cores). Without threadpoolctl this is a no-op (correct, only slower)."""
    global _BLAS
    if _BLAS is None:
        try:
            from threadpoolctl import ThreadpoolController

            _BLAS = ThreadpoolController()
        except Exception:  # threadpoolctl missing or unable to inspect: run as is
            _BLAS = False
    if _BLAS is False:
        return contextlib.nullcontext()
    return _BLAS.limit(limits=1, user_api="blas")


def _multistart(fun, starts, bounds, maxiter=500):
    with single_threaded_blas():
        return _multistart_inner(fun, starts, bounds, maxiter)


def _multistart_inner(fun, starts, bounds, maxiter):
    best = None
    ends = []  # (x, loss) where each start ended
    for x0 in starts:
        x0 = np.clip(np.asarray(x0, dtype=float), [b[0] for b in bounds], [b[1] for b in bounds])
        res = minimize(fun, x0, jac=True, method="L-BFGS-B", bounds=bounds,
                       options={"maxiter": maxiter, "ftol": 1e-12, "gtol": 1e-8})
        if np.isfinite(res.fun):
            ends.append((np.asarray(res.x, dtype=float), float(res.fun)))
        if np.isfinite(res.fun) and (best is None or res.fun < best.fun):
            best = res
    if best is None:
        raise FitError("the fit failed: the objective was not finite at any starting point")
    best.ends = ends
    return best


#: two optima whose losses differ by less than this (nats per pair, or squared score units per
#: response) fit the labels equally well
OPTIMA_TOL = 1e-4


def _other_optima(res, width: float) -> list[dict]:
    """The optima the starts ended in whose loss is within :data:`OPTIMA_TOL` of the best but whose
    (gamma, p) differ from the best's (gamma by more than 1% of the scale width, or p by more
    than 0.02): [{"gamma", "p", "loss"}], distinct, by loss."""
    def same(g1, p1, g2, p2) -> bool:  # the same penalty: close parameters, or no penalty at all (p is then free)
        close_g = abs(g1 - g2) <= 0.01 * width
        return close_g and (abs(p1 - p2) <= 0.02 or max(abs(g1), abs(g2)) <= 0.01 * width)

    out: list[dict] = []
    for x, loss in sorted(getattr(res, "ends", []), key=lambda e: e[1]):
        if loss - float(res.fun) > OPTIMA_TOL:
            continue
        if same(x[0], x[1], res.x[0], res.x[1]) or any(same(x[0], x[1], o["gamma"], o["p"]) for o in out):
            continue
        out.append({"gamma": float(x[0]), "p": float(x[1]), "loss": float(loss)})
    return out


# ----------------------------------------------------------------------------- pairwise
def bt_objective(theta, ds, feat_a: _Feature, feat_b: _Feature, y, w, *, score_a=None, score_b=None,
                 clip=None):
    """Mean BT negative log-likelihood (nats/pair) and its gradient in (gamma, p, s).

    Vectorised over pairs; ``w`` are normalised weights (sum 1). With ``clip`` = (min, max) the
    calibrated scores are clipped before the difference (then ``score_a``/``score_b`` are
    needed; ``ds`` is ignored): the fitted function is the reported one. Source: module doc.
    """
    gamma, p, s = theta
    fa, dfa = feat_a(p)
    fb, dfb = feat_b(p)
    if clip is None:
        dF = fa - fb
        d = ds - gamma * dF
        dG = dF
        dP = dfa - dfb
    else:
        ca = np.asarray(score_a) - gamma * fa
        cb = np.asarray(score_b) - gamma * fb
        ma, mb = clip_grad_mask(ca, clip), clip_grad_mask(cb, clip)
        d = np.clip(ca, clip[0], clip[1]) - np.clip(cb, clip[0], clip[1])
        dG = ma * fa - mb * fb
        dP = ma * dfa - mb * dfb
    z = s * d
    # stable softplus(z) = max(z, 0) + log1p(exp(-|z|)); sigmoid(z) = (1 + tanh(z/2)) / 2
    # (both much faster than np.logaddexp / a masked division on large arrays)
    loss = float(np.dot(w, np.maximum(z, 0.0) + np.log1p(np.exp(-np.abs(z))) - y * z))
    gz = w * (0.5 + 0.5 * np.tanh(0.5 * z) - y)
    grad = np.array([-s * np.dot(gz, dG), -s * gamma * np.dot(gz, dP), np.dot(gz, d)])
    return loss, grad


def bt_loss_at(score_a, score_b, len_a, len_b, outcome, *, gamma, p, l_ref, bt_scale, clip=None,
               penalty="polylog", weights=None, mult_a=None, mult_b=None, floor=None) -> float:
    """The pairwise objective of :func:`fit_pairwise` evaluated at given parameters (nats/pair):
    lets a caller check that a stored fit's loss is the loss of the reported function."""
    sa, sb, la, lb, y = _pair_inputs(score_a, score_b, len_a, len_b, outcome)
    fa, fb = _make_feature(penalty, la, l_ref, mult_a, floor), _make_feature(penalty, lb, l_ref, mult_b, floor)
    w = _weights(weights, sa.shape[0])
    return bt_objective((gamma, p, bt_scale), sa - sb, fa, fb, y, w, score_a=sa, score_b=sb, clip=clip)[0]


#: Largest |judge score| a fit accepts (as the importers' numbers): the objectives, their
#: Hessians and the bootstrap square score differences, which overflow float64 near 1e154.
MAX_ABS_SCORE = 1e15


def check_scores(scores, name: str = "judge scores") -> None:
    """Refuse judge scores a fit cannot use: non-finite values, or a magnitude above
    :data:`MAX_ABS_SCORE` (whose squares overflow in the fit and its bootstrap; rescale them).
    Raises UsageError naming the largest value."""
    a = np.asarray(scores, dtype=float).reshape(-1)
    if a.size == 0:
        return
    if not np.all(np.isfinite(a)):
        raise UsageError(f"{name}: contains non-finite values")
    big = float(np.max(np.abs(a)))
    if big > MAX_ABS_SCORE:
        raise UsageError(f"{name}: a score of magnitude {big:.3g} is beyond what a fit can use "
                         f"(|score| <= {MAX_ABS_SCORE:g}): rescale the scores and import them again")


def _pair_inputs(score_a, score_b, len_a, len_b, outcome):
    arrs = [np.asarray(v, dtype=float).reshape(-1) for v in (score_a, score_b, len_a, len_b, outcome)]
    n = arrs[0].shape[0]
    names = ("score_a", "score_b", "len_a", "len_b", "outcome")
    for name, a in zip(names, arrs):
        if a.shape[0] != n:
            raise UsageError(f"{name}: {a.shape[0]} values, expected {n}")
        if not np.all(np.isfinite(a)):
            raise UsageError(f"{name}: contains non-finite values")
    check_scores(arrs[0], "score_a")
    check_scores(arrs[1], "score_b")
    if not np.all(np.isin(arrs[4], (0.0, 0.5, 1.0))):
        raise UsageError("outcome: values must be 1.0 (a better), 0.0 (b better) or 0.5 (tie)")
    return arrs


def _flat_feature_message(lengths_a, lengths_b, l_ref: float, floor, penalty: str, what: str) -> str:
    """Why the length feature cannot separate the labelled answers (FitError text): every
    answer has the same length (``lengths_b`` None: pointwise, one value), or L_ref lies so far
    from the answers' lengths that the feature is flat (every answer below the short-side floor
    x L_ref, where it saturates) or overflows (the linear baseline with a tiny L_ref)."""
    a = np.maximum(np.asarray(lengths_a, dtype=float), 1.0)
    b = None if lengths_b is None else np.maximum(np.asarray(lengths_b, dtype=float), 1.0)
    same = np.all(a == b) if b is not None else np.ptp(a) == 0
    if same:
        return (f"every labelled pair compares two responses of the same length: {what}" if b is not None
                else f"every labelled response has the same length: {what}")
    allv = a if b is None else np.concatenate([a, b])
    lo, hi, med = float(allv.min()), float(allv.max()), float(np.median(allv))
    where = (f"L_ref {l_ref:.6g} lies outside the labelled answers' lengths ({lo:.6g} to {hi:.6g}, median {med:.6g})"
             if not lo <= l_ref <= hi else f"with L_ref {l_ref:.6g} (the labelled answers' lengths run from {lo:.6g} to "
                                           f"{hi:.6g}, median {med:.6g})")
    if penalty == "polylog" and floor is not None and hi < floor * l_ref:
        why = (f"every answer is shorter than the short-side floor ({floor:g} x L_ref), where the length feature "
               f"saturates: it takes one value for every answer")
    else:
        why = ("the length feature does not tell the answers apart (it is the same for every answer, or not a finite "
               "number)")
    return (f"{where}: {why}, so {what}; give an --l-ref within the answers' lengths (or leave it out: the "
            f"median)")


def _check_fit_l_ref(l_ref) -> float:
    """``l_ref`` as a positive finite float (UsageError otherwise)."""
    v = float(l_ref)
    if not (np.isfinite(v) and v > 0):
        raise UsageError(f"L_ref must be a positive finite length, got {l_ref!r}")
    return v


def fit_pairwise(
    score_a,
    score_b,
    len_a,
    len_b,
    outcome,
    *,
    l_ref: float | None = None,
    scale: tuple[float, float] = (0.0, 10.0),
    p_bounds: tuple[float, float] = (1.0, 1.5),
    starts: int | Sequence[Sequence[float]] = 4,
    weights=None,
    mult_a=None,
    mult_b=None,
    gamma_max: float | None = None,
    penalty: str = "polylog",
    clip: bool = True,
    signed: bool = False,
    floor: float | None = None,
) -> FitResult:
    """Fit gamma, p and the BT scale s by maximum likelihood on expert pairwise preferences.

    Args:
        score_a, score_b: raw judge scores of the two responses, shape (n,), judge scale units.
        len_a, len_b: their lengths, shape (n,), one unit (L = 0 allowed: floored at 1).
        outcome: shape (n,): 1.0 = expert prefers a, 0.0 = b, 0.5 = tie (half a win each way).
        l_ref: reference length; None = median of all lengths of len_a and len_b.
        scale: the judge's (min, max) (an end may be infinite: unbounded); sets the bounds of
            gamma (gamma_max defaults to 10 x the width) and of s ([1e-3, 1e3] / width), and
            with ``clip`` the clip of the calibrated scores inside the objective (module doc).
        p_bounds: (p_min, p_max), default (1.0, 1.5) as in DESIGN.md.
        starts: number of starting points (1-8, from a fixed grid of (gamma, p)) or an explicit
            list of (gamma, p, s) starts (e.g. the full-data optimum for bootstrap refits).
        weights: optional non-negative pair weights (bootstrap multiplicities), shape (n,).
        mult_a, mult_b: optional penalty multipliers (density exemption), shape (n,).
        gamma_max: upper bound of gamma (default 10 x the scale width).
        penalty: "polylog" (seed formula) or "linear" (baseline f = (L - L_ref) / L_ref; p is
            then fixed at 1 and reported as 1.0).
        clip: clip the calibrated scores to ``scale`` inside the objective (default True: the
            fitted function is the reported one). False fits the unclipped curve (the old fit).
        signed: allow gamma < 0 (bounds [-gamma_max, gamma_max]); default False (gamma >= 0).
        floor: short-side floor of the polylog penalty (a length ratio in (0, 1]; None: the
            seed formula's unbounded short side). judgecal's evaluations pass 1/4.
    Returns:
        :class:`FitResult` with bt_scale = s and loss in nats per pair (weighted mean) of the
        fitted (clipped) function.
    Raises:
        FitError: fewer than 10 pairs, no decisive (non-tie) preference, or no pair of two
            responses of different length (gamma would be unidentifiable).
        UsageError: bad bounds/scale or arrays of different lengths / non-finite values.
    Source: DESIGN.md seed formula + Bradley-Terry likelihood with half-win ties (module doc).
    """
    sa, sb, la, lb, y = _pair_inputs(score_a, score_b, len_a, len_b, outcome)
    n = sa.shape[0]
    if n < MIN_LABELS:
        raise FitError(f"too few expert-labelled pairs to fit a calibration: {n} < {MIN_LABELS}")
    if np.all(y == 0.5):
        raise FitError("no decisive expert preference: every labelled pair is a tie")
    p_lo, p_hi = _check_p_bounds(p_bounds)
    s_lo_scale, s_hi_scale = _check_scale(scale)
    width = scale_width((s_lo_scale, s_hi_scale), sa, sb)
    cl = (s_lo_scale, s_hi_scale) if clip and (np.isfinite(s_lo_scale) or np.isfinite(s_hi_scale)) else None
    if l_ref is None:
        l_ref = default_l_ref(la, lb)
    l_ref = _check_fit_l_ref(l_ref)
    if penalty == "linear":
        p_lo = p_hi = 1.0
    floor = check_floor(floor) if penalty == "polylog" else None
    fa, fb = _make_feature(penalty, la, l_ref, mult_a, floor), _make_feature(penalty, lb, l_ref, mult_b, floor)
    va, vb = fa(1.0)[0], fb(1.0)[0]
    if not (np.all(np.isfinite(va)) and np.all(np.isfinite(vb))) or np.all(va == vb):
        raise FitError(_flat_feature_message(la, lb, l_ref, floor, penalty, "the length penalty cannot be fitted"))
    ds = sa - sb
    w = _weights(weights, n)
    g_hi = float(gamma_max) if gamma_max is not None else 10.0 * width
    g_lo = -g_hi if signed else 0.0
    bounds = [(g_lo, g_hi), (p_lo, p_hi), (1e-3 / width, 1e3 / width)]
    if isinstance(starts, (int, np.integer)):
        sd = float(np.std(ds)) or width / 4
        s0 = 1.0 / sd
        pm = 0.5 * (p_lo + p_hi)
        grid = [(0.05 * width, pm, s0), (0.0, p_lo, s0), (0.15 * width, p_hi, s0),
                (0.4 * width, pm, 0.5 * s0), (0.02 * width, p_lo, 2 * s0), (0.8 * width, p_hi, s0),
                (0.1 * width, p_hi, 0.3 * s0), (0.25 * width, p_lo, 3 * s0)]
        k = max(1, min(int(starts), len(grid)))
        starts = grid[:k]
        if signed:  # mirror the starts onto gamma < 0
            starts = [x for g in starts for x in (g, (-g[0], g[1], g[2])) if not (x is not g and g[0] == 0)]
    res = _multistart(lambda t: bt_objective(t, ds, fa, fb, y, w, score_a=sa, score_b=sb, clip=cl),
                      starts, bounds)
    gamma, p, s = (float(v) for v in res.x)
    at = {
        "gamma": _at_bound(gamma, g_lo, g_hi, 1e-6 * width) if not signed
        else ("upper" if gamma >= g_hi - 1e-6 * width else "lower" if gamma <= g_lo + 1e-6 * width else None),
        "p": _at_bound(p, p_lo, p_hi, 1e-6) if p_hi > p_lo else None,
        "bt_scale": _at_bound(s, *bounds[2], 1e-6 * bounds[2][0]),
    }
    msg = str(res.message)
    if not signed and at["gamma"] == "lower":
        msg += "; gamma at 0: no length penalty fits the labels better (p is then undetermined)"
    finite = bool(np.all(np.isfinite(res.x)) and np.isfinite(res.fun))
    if not finite:
        msg += "; the optimum is not a finite number (overflow): not converged"
    return FitResult(gamma, p, l_ref, s, float(res.fun), n, bool(res.success) and finite, at, msg, floor,
                     _other_optima(res, width))


# ----------------------------------------------------------------------------- pointwise
def map_expert_scale(expert, expert_scale, judge_scale) -> np.ndarray:
    """Map expert scores linearly onto the judge's scale: ``j_min + (E - e_min) * jw / ew``."""
    e_lo, e_hi = _check_scale(expert_scale)
    j_lo, j_hi = _check_scale(judge_scale)
    return j_lo + (np.asarray(expert, dtype=float) - e_lo) * (j_hi - j_lo) / (e_hi - e_lo)


def ls_objective(theta, s, feat: _Feature, target, w, *, clip=None):
    """Weighted mean squared error (score units^2) and gradient in (gamma, p); with ``clip`` =
    (min, max) the calibrated score is clipped first (derivative 0 outside the scale)."""
    gamma, p = theta
    f, df = feat(p)
    c = s - gamma * f
    if clip is None:
        res = c - target
        mask = 1.0
    else:
        res = np.clip(c, clip[0], clip[1]) - target
        mask = clip_grad_mask(c, clip)
    loss = float(np.dot(w, res * res))
    g = -2.0 * w * res * mask
    return loss, np.array([np.dot(g, f), gamma * np.dot(g, df)])


def fit_pointwise(
    score,
    length,
    expert_score,
    *,
    expert_scale: tuple[float, float],
    judge_scale: tuple[float, float],
    l_ref: float | None = None,
    p_bounds: tuple[float, float] = (1.0, 1.5),
    starts: int | Sequence[Sequence[float]] = 4,
    weights=None,
    mult=None,
    gamma_max: float | None = None,
    penalty: str = "polylog",
    clip: bool = True,
    signed: bool = False,
    floor: float | None = None,
) -> FitResult:
    """Fit gamma and p by least squares between the calibrated score (clipped to the judge's
    scale unless ``clip`` is False) and the expert score mapped linearly onto the judge's scale
    (see :func:`map_expert_scale`).

    Args:
        score: raw judge scores, shape (n,); length: shape (n,); expert_score: shape (n,).
        expert_scale, judge_scale: (min, max) of each scale.
        l_ref: None = median length. p_bounds, starts, weights, mult, gamma_max, penalty, clip,
            signed, floor: as in :func:`fit_pairwise` (starts are (gamma, p) pairs here).
    Returns:
        :class:`FitResult` with bt_scale None and loss = weighted mean squared error.
    Raises:
        FitError: fewer than 10 labelled responses, or every one at the reference length.
        UsageError: bad scales or bounds.
    Source: DESIGN.md seed formula; ordinary least squares.
    """
    arrs = [np.asarray(v, dtype=float).reshape(-1) for v in (score, length, expert_score)]
    n = arrs[0].shape[0]
    for name, a in zip(("score", "length", "expert_score"), arrs):
        if a.shape[0] != n or not np.all(np.isfinite(a)):
            raise UsageError(f"{name}: expected {n} finite values")
    if n < MIN_LABELS:
        raise FitError(f"too few expert-labelled responses to fit a calibration: {n} < {MIN_LABELS}")
    s, le, e = arrs
    check_scores(s, "score")
    p_lo, p_hi = _check_p_bounds(p_bounds)
    j_lo, j_hi = _check_scale(judge_scale)
    width = scale_width((j_lo, j_hi), s)
    cl = (j_lo, j_hi) if clip and (np.isfinite(j_lo) or np.isfinite(j_hi)) else None
    if not (np.isfinite(j_lo) and np.isfinite(j_hi)):
        raise UsageError("pointwise fits map the expert scale onto the judge's: the judge's scale must be bounded")
    target = map_expert_scale(e, expert_scale, judge_scale)
    if l_ref is None:
        l_ref = default_l_ref(le)
    l_ref = _check_fit_l_ref(l_ref)
    if penalty == "linear":
        p_lo = p_hi = 1.0
    floor = check_floor(floor) if penalty == "polylog" else None
    feat = _make_feature(penalty, le, l_ref, mult, floor)
    v = feat(1.0)[0]
    if np.all(v == 0):
        raise FitError("every labelled response has the reference length: "
                       "the length penalty cannot be fitted")
    if not np.all(np.isfinite(v)) or np.ptp(v) == 0:  # one value for all: a shift of every score, not a length term
        raise FitError(_flat_feature_message(le, None, l_ref, floor, penalty, "the length penalty cannot be fitted"))
    w = _weights(weights, n)
    g_hi = float(gamma_max) if gamma_max is not None else 10.0 * width
    g_lo = -g_hi if signed else 0.0
    bounds = [(g_lo, g_hi), (p_lo, p_hi)]
    if isinstance(starts, (int, np.integer)):
        pm = 0.5 * (p_lo + p_hi)
        grid = [(0.05 * width, pm), (0.0, p_lo), (0.15 * width, p_hi), (0.4 * width, pm),
                (0.02 * width, p_lo), (0.8 * width, p_hi)]
        starts = grid[: max(1, min(int(starts), len(grid)))]
        if signed:
            starts = starts + [(-g, q) for g, q in starts if g > 0]
    res = _multistart(lambda t: ls_objective(t, s, feat, target, w, clip=cl), starts, bounds)
    gamma, p = (float(v) for v in res.x)
    at = {"gamma": _at_bound(gamma, g_lo, g_hi, 1e-6 * width) if not signed
          else ("upper" if gamma >= g_hi - 1e-6 * width else "lower" if gamma <= g_lo + 1e-6 * width else None),
          "p": _at_bound(p, p_lo, p_hi, 1e-6) if p_hi > p_lo else None, "bt_scale": None}
    msg = str(res.message)
    if not signed and at["gamma"] == "lower":
        msg += "; gamma at 0: no length penalty fits the labels better (p is then undetermined)"
    finite = bool(np.all(np.isfinite(res.x)) and np.isfinite(res.fun))
    if not finite:
        msg += "; the optimum is not a finite number (overflow): not converged"
    return FitResult(gamma, p, l_ref, None, float(res.fun), n, bool(res.success) and finite, at, msg, floor,
                     _other_optima(res, width))



# ----------------------------------------------------------------------------- batched
def batch_logistic(x1, x2, y, weights, beta0, *, nonneg_second: bool = False, max_iter: int = 60,
                   tol: float = 1e-9):
    """Many weighted two-feature logistic regressions at once (no intercept), by damped Newton.

    Minimises, for every row b of ``weights``, the mean half-win BT loss
    ``sum_i w_bi [softplus(z_bi) - y_i z_bi] / sum_i w_bi`` with ``z_bi = beta_b1 x1_i +
    beta_b2 x2_i``; with ``nonneg_second`` the constraint beta_b2 >= 0 holds (the loss is convex,
    so a row whose free optimum has beta_b2 < 0 has its optimum at beta_b2 = 0, re-solved in 1-D).
    Used for bootstrap refits of the linear baseline (beta = (s, s*gamma)) and of lc_glm.

    Args:
        x1, x2, y: shape (n,). weights: shape (B, n), non-negative (bootstrap multiplicities).
        beta0: shape (2,) start (the full-data optimum).
    Returns:
        (beta (B, 2), loss (B,), converged (B,) bool): converged is False where the gradient
        did not fall under ``tol`` (e.g. separable resamples, whose optimum is at infinity).
    """
    W = np.asarray(weights, dtype=float)
    W = W / W.sum(axis=1, keepdims=True)
    X = np.stack([np.asarray(x1, dtype=float), np.asarray(x2, dtype=float)])  # (2, n)
    y = np.asarray(y, dtype=float)
    B = W.shape[0]

    def loss_of(beta, rows):
        z = beta @ X
        return np.sum(W[rows] * (np.maximum(z, 0.0) + np.log1p(np.exp(-np.abs(z))) - y * z), axis=1)

    def solve(beta, free):
        """Damped Newton on the coordinates where free (shape (2,)) is True; only the rows not
        yet converged are computed. A row stops when its gradient is under tol (converged) or
        when a step no longer lowers its loss (stalled: e.g. separable, optimum at infinity)."""
        beta = beta.copy()
        loss = loss_of(beta, np.arange(B))
        conv = np.zeros(B, dtype=bool)
        active = np.arange(B)
        for _ in range(max_iter):
            if active.size == 0:
                break
            b, Wa = beta[active], W[active]
            z = b @ X
            mu = 0.5 + 0.5 * np.tanh(0.5 * z)
            g = (Wa * (mu - y)) @ X.T * free  # (A, 2)
            h = Wa * mu * (1.0 - mu)
            h11, h12, h22 = h @ (X[0] * X[0]), h @ (X[0] * X[1]), h @ (X[1] * X[1])
            if not free[1]:
                h12, h22 = 0.0 * h12, np.ones_like(h22)
            if not free[0]:
                h12, h11 = 0.0 * h12, np.ones_like(h11)
            h11, h22 = h11 + 1e-12, h22 + 1e-12
            det = h11 * h22 - h12 * h12
            step = np.stack([(h22 * g[:, 0] - h12 * g[:, 1]) / det,
                             (h11 * g[:, 1] - h12 * g[:, 0]) / det], axis=1)
            gmax = np.abs(g).max(axis=1)
            done = gmax < tol
            conv[active[done]] = True
            keep = ~done
            active, b, step, gmax = active[keep], b[keep], step[keep], gmax[keep]
            if active.size == 0:
                break
            old = loss[active]
            t = np.ones(active.size)
            new = np.full(active.size, np.inf)
            todo = np.arange(active.size)
            for _ in range(30):  # backtracking, only on the rows whose loss did not decrease
                cand = b[todo] - t[todo, None] * step[todo]
                new[todo] = loss_of(cand, active[todo])
                bad = new[todo] > old[todo]
                todo = todo[bad]
                if todo.size == 0:
                    break
                t[todo] *= 0.5
            moved = new <= old
            moved[todo] = False
            beta[active[moved]] = b[moved] - t[moved, None] * step[moved]
            loss[active[moved]] = new[moved]
            stalled = ~moved | (old - new <= 1e-15 * np.maximum(1.0, np.abs(old)))
            conv[active[stalled & (gmax < 1e-6)]] = True  # at the optimum to rounding
            active = active[~stalled]
        return beta, loss, conv

    beta = np.tile(np.asarray(beta0, dtype=float), (B, 1))
    beta, loss, conv = solve(beta, np.array([True, True]))
    if nonneg_second:
        neg = beta[:, 1] < 0
        if neg.any():
            b1 = beta.copy()
            b1[:, 1] = 0.0
            b1, l1, c1 = solve(b1, np.array([True, False]))
            beta = np.where(neg[:, None], b1, beta)
            loss = np.where(neg, l1, loss)
            conv = np.where(neg, c1, conv)
    return beta, loss, conv
