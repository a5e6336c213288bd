"""Does a logistic likelihood have a finite maximum? An exact test by linear programming.

A binary (or fractional) logistic model ``P(success) = expit(X beta)`` has no finite
maximum-likelihood estimate exactly when the data are *separated* (Albert & Anderson, 1984,
"On the existence of maximum likelihood estimates in logistic regression models", Biometrika
71(1)): some direction ``d`` with ``X d != 0`` never lowers the likelihood, i.e. ``X_r d >= 0``
on every row whose whole weight is a success, ``X_r d <= 0`` on every row whose whole weight is
a failure, and ``X_r d = 0`` on every row that carries both (a fractional credit such as a tie's
0.5). Moving along such a ``d`` raises the likelihood for ever: the coefficients run off to
infinity, and where a Newton solver stops then depends on rounding (the number of steps, the
BLAS kernels of the machine), not on the data.

The test is Konis's linear program (K. Konis, 2007, "Linear programming algorithms for
detecting separated data in binary logistic regression models", DPhil thesis, Oxford; the
method of R's ``safeBinaryRegression`` and ``detectseparation``): maximise ``sum_r s_r X_r d``
over ``-1 <= d <= 1`` subject to the sign constraints above (``s_r`` = +1 for a success, -1 for
a failure). Its optimum is 0 when the data overlap (the maximum is finite) and positive when
they are separated. It answers from the data alone -- the same on every machine -- where a
check on a fitted coefficient's size answers from where the solver happened to stop. Solved
with :func:`scipy.optimize.linprog` (HiGHS)."""

from __future__ import annotations

import numpy as np
from scipy.optimize import linprog

#: an optimum above this (per row, with the direction bounded by 1 and the design's columns
#: scaled to a largest absolute value of 1) is separation; far above HiGHS's feasibility tolerance
#: (1e-7), far below the optimum of any separated design seen (LLMBar's folds: >= 1e-2 per row)
SEPARATION_TOL = 1e-6


def separation(X, w, s) -> dict:
    """Konis's test (module doc) for the logistic likelihood
    ``sum_r s_r log expit(X_r beta) + (w_r - s_r) log expit(-X_r beta)``.

    Args: X (n, q) design (any real numbers; columns are scaled to a largest absolute value of 1
    before the test, which does not change the answer); w (n,) weights >= 0 (a row of weight 0
    is left out); s (n,) success weights, 0 <= s <= w. Returns {"separated": bool, "optimum":
    the LP optimum per row used (0 for overlapping data), "direction": (q,) a direction along which
    the likelihood never falls (in the scaled columns; zeros when not separated), "n_rows": rows
    used}. Raises ValueError on mismatched shapes, a value that is not finite, s outside [0, w]
    or a linear program HiGHS cannot solve."""
    X = np.asarray(X, dtype=float)
    w = np.asarray(w, dtype=float).ravel()
    s = np.asarray(s, dtype=float).ravel()
    if X.ndim != 2 or X.shape[0] != w.size or w.size != s.size:
        raise ValueError(f"X must be (n, q) with w and s (n,): got {X.shape}, {w.shape}, {s.shape}")
    if not (np.all(np.isfinite(X)) and np.all(np.isfinite(w)) and np.all(np.isfinite(s))):
        raise ValueError("X, w and s must be finite numbers")
    if np.any(w < 0) or np.any(s < -1e-12) or np.any(s > w + 1e-12):
        raise ValueError("weights must be >= 0 and success weights in [0, weight]")
    used = w > 0
    X, w, s = X[used], w[used], s[used]
    n, q = X.shape
    if n == 0 or q == 0:
        return {"separated": False, "optimum": 0.0, "direction": np.zeros(q), "n_rows": int(n)}
    scale = np.max(np.abs(X), axis=0)
    scale[scale == 0] = 1.0
    Xs = X / scale
    tol = 1e-12 * np.maximum(1.0, w)
    win = s >= w - tol
    lose = s <= tol
    both = ~(win | lose)
    sign = np.where(win, 1.0, -1.0)
    ineq = ~both
    A_ub = -(sign[ineq, None] * Xs[ineq])  # -s_r X_r d <= 0
    c = -(sign[ineq, None] * Xs[ineq]).sum(axis=0)  # minimise -(sum s_r X_r d)
    res = linprog(c, A_ub=A_ub if A_ub.size else None, b_ub=np.zeros(int(ineq.sum())) if A_ub.size else None,
                  A_eq=Xs[both] if both.any() else None, b_eq=np.zeros(int(both.sum())) if both.any() else None,
                  bounds=[(-1.0, 1.0)] * q, method="highs")
    if res.status != 0 or res.x is None:
        raise ValueError(f"the separation test's linear program failed: {res.message}")
    opt = max(0.0, -float(res.fun)) / n
    sep = opt > SEPARATION_TOL
    return {"separated": bool(sep), "optimum": opt, "direction": res.x if sep else np.zeros(q), "n_rows": int(n)}


def bt_separation(design, anchor: int) -> dict:
    """:func:`separation` of a Bradley-Terry fit's likelihood (:func:`judgecal.calibrate.bt.fit_bt`
    on ``design``, a :class:`judgecal.calibrate.bt.Design`, every item weighted 1), over the
    parameters that fit has: the models in the anchor's strongly connected component (the others
    are set apart by :func:`judgecal.calibrate.bt.linked`, exactly) and the ``design.k`` covariate
    columns, on the rows among those models. Returns :func:`separation`'s dict with
    "covariates": the direction's entries on the covariate columns ((k,); zeros when not
    separated), in units of the column's largest absolute value."""
    from judgecal.calibrate import bt

    W = np.asarray(design.Cw.sum(axis=0)).ravel()
    S = np.asarray(design.Cs.sum(axis=0)).ravel()
    used = W > 0
    apart = bt.linked(design.ia[used], design.ib[used], W[used], S[used], design.n_models, anchor)
    keep = np.ones(design.n_models, dtype=bool)
    keep[list(apart)] = False
    rows = np.flatnonzero(used & keep[design.ia] & keep[design.ib])
    col, q = bt._params(design, keep, anchor)
    X, _ = bt._system(design, col, q, rows)
    r = separation(X.toarray(), W[rows], S[rows])
    r["covariates"] = r["direction"][q - design.k:] if design.k else np.zeros(0)
    return r
