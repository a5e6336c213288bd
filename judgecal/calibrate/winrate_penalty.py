"""The seed's polynomial log-length penalty as the length term of a win-rate model, fitted on the
judge's own pairwise verdicts (no expert labels), with a guard against truncated-answer gaming.

For model m's answer to instruction x (length L_mx) against the baseline's (length L_bx), the
seed formula ``S_calib = S_raw - gamma * sign(L - L_ref) * |ln(L / L_ref)|^p`` is applied to the
judge's score difference with the reference length set to the baseline's answer to the same
instruction (L_ref = L_bx, so the baseline's own penalty is 0)::

    r_mx  = max(ln(L_mx / L_bx), ln(floor))               (short side saturates at ``floor``)
    pen   = sign(r_mx) * |r_mx|^p
    logit P(m preferred on x) = theta_m + psi_m * difficulty_x + gamma * pen_mx
    calibrated win rate_m     = 100 * mean_x logistic(theta_m + psi_m * difficulty_x)

gamma (>= 0 by default; strength in logits per unit of penalty) and p (bounded, default
[1.0, 1.5]) are shared by every model of the family and judge; theta_m (strength at equal
length) and psi_m (slope on the instruction difficulty of :mod:`judgecal.calibrate.glm_lc`)
are per model. Fitted by maximum likelihood (soft-label log-loss, L-BFGS-B).

Gaming guard (docs/calibration.md): without the floor, the symmetric penalty credits a
truncated answer with gamma * |ln(L_m / L_b)|^p for every halving of its length, without
limit, so a model that answers with a few words is lifted to the top (measured on AlpacaEval:
``gpt4_gamed``, raw 3.7%, to 48%). With ``floor`` (default 1/4: an answer a quarter of the
baseline's length or shorter earns no further credit) the credit is bounded by
gamma * ln(4)^p. An answer that does not depend on the instruction (the same text given to
several instructions, as ``NullModel`` does) earns no credit for being short at all. The cost: a genuinely concise model whose answers are under a quarter of the
baseline's length gets no more credit than one at a quarter.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize
from scipy.special import expit, log_expit

from judgecal.calibrate.penalty import DEFAULT_SHORT_FLOOR
from judgecal.errors import UsageError

#: The short-side floor: one constant for both modes (the score mode's fits use it too).
DEFAULT_FLOOR = DEFAULT_SHORT_FLOOR
DEFAULT_P_BOUNDS = (1.0, 1.5)
GAMMA_MAX = 50.0


def _check(floor: float, p: float) -> None:
    if not 0 < floor <= 1:
        raise UsageError(f"the short-side floor must be a length ratio in (0, 1], got {floor}")
    if not p > 0:
        raise UsageError(f"p must be positive, got {p}")


def pair_penalty(len_model, len_baseline, p: float, floor: float = DEFAULT_FLOOR) -> np.ndarray:
    """sign(r) * |r|^p with r = max(ln(L_m / L_b), ln(floor)); lengths floored at 1 unit.

    Args: len_model, len_baseline: shape (n,) lengths in one unit (tokens, words, characters
    or bytes); p > 0; floor in (0, 1] (1 = no credit for being shorter than the baseline;
    0 is refused: use a tiny floor for the seed's unbounded short side).
    Returns: shape (n,) penalty in units of |ln ratio|^p (nats^p).
    Raises: UsageError for floor outside (0, 1] or p <= 0.
    Source: DESIGN.md seed formula with L_ref = the baseline's length on the same item."""
    _check(floor, p)
    lm = np.maximum(np.asarray(len_model, dtype=float), 1.0)
    lb = np.maximum(np.asarray(len_baseline, dtype=float), 1.0)
    r = np.maximum(np.log(lm / lb), np.log(floor))
    return np.sign(r) * np.abs(r) ** p


@dataclass
class PenaltyFit:
    """Shared gamma, p; per model theta (shape (M,)) and psi (shape (M,)); converged flag;
    whether gamma or p sits at a bound; the per-row calibrated preference ``p_cal`` (shape (n,));
    ``evidence``: what the verdicts say about gamma (:func:`gamma_evidence`; None without the
    length term)."""

    gamma: float
    p: float
    theta: np.ndarray
    psi: np.ndarray
    converged: bool
    at_bound: dict
    p_cal: np.ndarray
    floor: float
    evidence: dict | None = None


def fit_penalty(model, pref, len_model, len_baseline, difficulty, n_models: int,
                p_bounds: tuple[float, float] = DEFAULT_P_BOUNDS, floor: float = DEFAULT_FLOOR,
                signed: bool = False, length_term: bool = True, no_short_credit=None) -> PenaltyFit:
    """Fit the win-rate model of the module docstring on every model's verdicts of one family.

    Args:
        model: int codes 0..M-1, shape (n,); pref: shape (n,) soft preferences (NaN rows are
        left out of the fit but get a prediction); len_model, len_baseline: shape (n,) lengths
        in one unit; difficulty: shape (n,) the instruction difficulty of each row.
        signed: allow gamma < 0 (a judge that prefers shorter answers).
        length_term: False fits the same model without the length term (gamma = 0): the
        Bradley-Terry smoothing of the raw verdicts that the implied verbosity win-rate uses.
        no_short_credit: shape (n,) bool, rows whose shorter length earns no credit (r floored
        at 0): answers that do not depend on the instruction (the same text given to several
        instructions), which the length calibration must not reward for brevity.
    Returns: :class:`PenaltyFit` (``p_cal``: logistic(theta_m + psi_m * difficulty) per row).
    Raises: UsageError for bad bounds or floor."""
    lo, hi = p_bounds
    if not 0 < lo <= hi:
        raise UsageError(f"p bounds must satisfy 0 < p_min <= p_max, got {p_bounds}")
    m = np.asarray(model, dtype=int)
    y = np.asarray(pref, dtype=float)
    d = np.asarray(difficulty, dtype=float)
    ok = np.isfinite(y)
    mo, yo, do = m[ok], y[ok], d[ok]
    lmo, lbo = np.asarray(len_model, dtype=float)[ok], np.asarray(len_baseline, dtype=float)[ok]
    M = n_models
    _check(floor, lo)
    r = np.maximum(np.log(np.maximum(lmo, 1.0) / np.maximum(lbo, 1.0)), np.log(floor))
    if no_short_credit is not None:
        r = np.where(np.asarray(no_short_credit, dtype=bool)[ok], np.maximum(r, 0.0), r)
    absr, sgn = np.abs(r), np.sign(r)
    logabs = np.log(np.where(absr > 0, absr, 1.0))

    def f(th):
        g, p = th[0], th[1]
        theta, psi = th[2:2 + M], th[2 + M:]
        powr = np.where(absr > 0, absr ** p, 0.0)
        pen = sgn * powr
        z = theta[mo] + psi[mo] * do + (g * pen if length_term else 0.0)
        res = yo - expit(z)
        loss = -(yo * log_expit(z) + (1 - yo) * log_expit(-z)).sum()
        dg = -(res * pen).sum() if length_term else 0.0
        dp = -(res * g * sgn * powr * logabs).sum() if length_term else 0.0
        return loss, np.concatenate([[dg, dp], -np.bincount(mo, res, M), -np.bincount(mo, res * do, M)])

    g_bounds = (-GAMMA_MAX if signed else 0.0, GAMMA_MAX) if length_term else (0.0, 0.0)
    x0 = np.concatenate([[0.5 if length_term else 0.0, (lo + hi) / 2], np.zeros(2 * M)])
    res = minimize(f, x0, jac=True, method="L-BFGS-B", bounds=[g_bounds, (lo, hi)] + [(None, None)] * (2 * M),
                   options={"maxiter": 5000})
    g, p = float(res.x[0]), float(res.x[1])
    theta, psi = res.x[2:2 + M], res.x[2 + M:]
    p_cal = expit(theta[m] + psi[m] * d)
    evidence = None
    if length_term:
        pen_fit = sgn * np.where(absr > 0, absr ** p, 0.0)
        evidence = gamma_evidence(mo, yo, pen_fit, do, theta[mo] + psi[mo] * do + g * pen_fit, M)
    at_bound = {"gamma": bool(length_term and (abs(g - g_bounds[1]) < 1e-6 or (signed and abs(g - g_bounds[0]) < 1e-6))),
                "p": bool(length_term and g != 0 and (abs(p - lo) < 1e-6 or abs(p - hi) < 1e-6))}
    return PenaltyFit(g, p, theta, psi, bool(res.success), at_bound, p_cal, floor, evidence)


#: |preference - 0.5| at or below this is a tie (no side preferred)
TIE_TOL = 1e-9


def gamma_evidence(model, pref, pen, difficulty, z, n_models: int) -> dict:
    """What the verdicts of a fit say about gamma, p held at its fitted value.

    Args: model (int codes, shape (n,)), pref (soft preferences, shape (n,), no NaN), pen (the
    penalty feature sign(r)|r|^p of each verdict, shape (n,)), difficulty (shape (n,)), z (the
    fitted logit of each verdict, shape (n,)), n_models M.
    Returns: {"n": verdicts, "n_decisive": verdicts that are not ties (|pref - 0.5| >
    :data:`TIE_TOL`), "n_with_length": verdicts whose penalty is not 0 (answer and baseline of
    different lengths), "median_abs_penalty": median |pen| over those (0 when none), "information": the observed Fisher information of gamma with every
    model's theta and psi profiled out (sum over models of w*pen^2 minus its projection on the
    model's [1, difficulty], w = P(1 - P) at the fit; logits^-2), "information_share": that
    over sum w*pen^2 (0: the penalty varies within no model beyond what theta and psi absorb,
    e.g. every answer longer than the baseline's by the same ratio), "gamma_se": 1 / sqrt(
    information) (inf when it is 0)}. Source: the Schur complement of the logistic Hessian
    X'WX (McCullagh & Nelder, Generalized Linear Models, 2nd ed., sec. 4.4)."""
    mo = np.asarray(model, dtype=int)
    y, e, d = (np.asarray(a, dtype=float) for a in (pref, pen, difficulty))
    pz = expit(np.asarray(z, dtype=float))
    w = pz * (1 - pz)
    M = n_models
    sw, swd, swdd = (np.bincount(mo, w * v, M) for v in (np.ones_like(d), d, d * d))
    swe, swed, swee = (np.bincount(mo, w * v, M) for v in (e, e * d, e * e))
    info = 0.0
    for k in range(M):
        if sw[k] <= 0:
            continue
        A = np.array([[sw[k], swd[k]], [swd[k], swdd[k]]])
        b = np.array([swe[k], swed[k]])
        info += float(swee[k] - b @ np.linalg.pinv(A, rcond=1e-10) @ b)
    total = float(swee.sum())
    share = info / total if total > 0 else 0.0
    if share <= 1e-9:  # what is left is the rounding of a projection that removes everything
        info, share = 0.0, 0.0
    return {"n": int(y.size), "n_decisive": int(np.sum(np.abs(y - 0.5) > TIE_TOL)),
            "n_with_length": int(np.sum(e != 0)),
            "median_abs_penalty": float(np.median(np.abs(e[e != 0]))) if np.any(e != 0) else 0.0,
            "information": info, "information_share": share,
            "gamma_se": float(1 / np.sqrt(info)) if info > 0 else float("inf")}


def implied_verbosity_win_rate(p_verbose, p_concise) -> float:
    """Implied share of instructions on which a model's verbose answer beats its concise one,
    from their predicted preferences against the same baseline on the same instructions
    (Bradley-Terry: logit P(v > c) = logit p_v - logit p_c), in percent; 50 = no verbosity
    preference. Shapes (n,), (n,) (paired by instruction); NaN pairs left out."""
    pv, pc = np.asarray(p_verbose, dtype=float), np.asarray(p_concise, dtype=float)
    keep = np.isfinite(pv) & np.isfinite(pc)
    if not keep.any():
        return float("nan")
    pv, pc = np.clip(pv[keep], 1e-9, 1 - 1e-9), np.clip(pc[keep], 1e-9, 1 - 1e-9)
    z = (np.log(pv) - np.log1p(-pv)) - (np.log(pc) - np.log1p(-pc))
    return float(100 * expit(z).mean())


def fit_strength_many(models, ridge: float = 1e-6, max_iter: int = 100) -> list[tuple[float, float]]:
    """Per model, (theta, psi) of ``logit P = theta + psi * difficulty + offset`` by maximum
    likelihood on its soft verdicts, the length term ``offset`` (e.g. gamma * penalty, fixed)
    given: the per-model part of :func:`fit_penalty` once gamma and p are known. Every model is
    fitted on its own rows (a model's figures do not depend on the others), all at once by a
    batched Newton method with a line search; ``ridge/2 * (theta^2 + psi^2)`` keeps the
    estimate finite when every verdict is 0 or 1.

    Args: models: per model, (pref, offset, difficulty) arrays shape (n_m,) (NaN preferences
    left out). Returns: [(theta, psi)] in order."""
    M = len(models)
    if not M:
        return []
    oks = [np.isfinite(np.asarray(p, dtype=float)) for p, _, _ in models]
    n = max(1, max(int(ok.sum()) for ok in oks))
    Y, O, D, S = (np.zeros((M, n)) for _ in range(4))
    for i, ((p, o, d), ok) in enumerate(zip(models, oks)):
        k = int(ok.sum())
        Y[i, :k] = np.asarray(p, dtype=float)[ok]
        O[i, :k] = np.broadcast_to(np.asarray(o, dtype=float), ok.shape)[ok]
        D[i, :k] = np.asarray(d, dtype=float)[ok]
        S[i, :k] = 1.0

    def loss(w):
        z = w[:, :1] + w[:, 1:2] * D + O
        return (S * (np.logaddexp(0.0, z) - Y * z)).sum(1) + 0.5 * ridge * (w * w).sum(1)

    w = np.zeros((M, 2))
    f = loss(w)
    active = np.arange(M)
    for _ in range(max_iter):
        if not active.size:
            break
        wa = w[active]
        z = wa[:, :1] + wa[:, 1:2] * D[active] + O[active]
        p = expit(z)
        r, h = S[active] * (p - Y[active]), S[active] * p * (1 - p)
        g = np.stack([r.sum(1), (r * D[active]).sum(1)], 1) + ridge * wa
        a, b, c = h.sum(1) + ridge, (h * D[active]).sum(1), (h * D[active] ** 2).sum(1) + ridge
        det = a * c - b * b
        step = -np.stack([(c * g[:, 0] - b * g[:, 1]) / det, (a * g[:, 1] - b * g[:, 0]) / det], 1)
        dec = (g * step).sum(1)
        t = np.ones(active.size)
        accepted = np.zeros(active.size, dtype=bool)
        for _ls in range(30):
            todo = np.flatnonzero(~accepted)
            if not todo.size:
                break
            cand = wa[todo] + t[todo, None] * step[todo]
            zc = cand[:, :1] + cand[:, 1:2] * D[active[todo]] + O[active[todo]]
            fc = (S[active[todo]] * (np.logaddexp(0.0, zc) - Y[active[todo]] * zc)).sum(1) + 0.5 * ridge * (cand * cand).sum(1)
            ok = fc <= f[active[todo]] + 1e-4 * t[todo] * dec[todo] + 1e-13 * np.abs(f[active[todo]])
            w[active[todo[ok]]], f[active[todo[ok]]] = cand[ok], fc[ok]
            accepted[todo[ok]] = True
            t[todo[~ok]] *= 0.5
        done = (dec > -1e-10) | ~accepted
        active = active[~done]
    return [(float(a), float(b)) for a, b in w]
