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

from judgecal.calibrate import bt

#: a row whose share ``s_r X_r d`` of the LP's direction is above this (the direction bounded by 1, the
#: design's columns and rows scaled to a largest absolute value of 1) is pushed to certainty: separation. Far
#: above HiGHS's feasibility tolerance (1e-7), far below any separated row of LLMBar's folds (>= 0.5)
SEPARATION_TOL = 1e-6


def _design(X, w, s):
    """(X, w, s) as finite float arrays, checked; raises ValueError (module doc of :func:`separation`)."""
    if hasattr(X, "toarray"):  # a scipy sparse matrix
        X = X.toarray()
    try:
        X, w, s = (np.asarray(v) for v in (X, w, s))
        if any(np.iscomplexobj(v) for v in (X, w, s)):
            raise ValueError("X, w and s must be real numbers")
        X = X.astype(float)
        w = w.astype(float).ravel()
        s = s.astype(float).ravel()
    except (TypeError, ValueError) as e:
        raise ValueError(f"X, w and s must be arrays of real numbers ({e})") from None
    if X.ndim != 2 or X.shape[0] != w.size or w.size != s.size:
        raise ValueError(f"X must be (n, q) with w and s (n,): got {X.shape}, {w.shape}, {s.shape}")
    if not (np.all(np.isfinite(X)) and np.all(np.isfinite(w)) and np.all(np.isfinite(s))):
        raise ValueError("X, w and s must be finite numbers")
    slack = 1e-9 * np.maximum(1.0, w)
    if np.any(w < 0) or np.any(s < -slack) or np.any(s > w + slack):
        raise ValueError("weights must be >= 0 and success weights in [0, weight]")
    return X, w, np.clip(s, 0.0, w)  # a credit rounded past its bound by the last bit is that bound


def _constraints(X, w, s):
    """(X of the rows used, its columns then its rows scaled to a largest absolute value of 1 (a
    positive factor keeps every constraint's sign), sign (+1 won outright, -1 lost outright, 0
    split), mask of the columns not 0 on every row): a row's credit is split unless ``s == w`` or ``s == 0`` exactly, as
    :func:`judgecal.calibrate.bt.linked` reads a credit (any credit above 0 is a win of a)."""
    used = w > 0
    X, w, s = X[used], w[used], s[used]
    scale = np.max(np.abs(X), axis=0) if X.shape[0] else np.zeros(X.shape[1])
    live = scale > 0  # a column that is 0 on every row used: no coefficient moves the likelihood
    Xs = X / np.where(live, scale, 1.0)
    rmax = np.max(np.abs(Xs), axis=1) if Xs.shape[1] else np.zeros(Xs.shape[0])
    Xs = Xs / np.where(rmax > 0, rmax, 1.0)[:, None]  # a row's constraint keeps its sign: scale-free in rows too
    sign = np.where(s >= w, 1.0, np.where(s <= 0, -1.0, 0.0))
    return Xs, sign, live


def _null_space(Xs, live) -> np.ndarray:
    """(m, q) basis of the directions d with ``Xs d = 0`` over the live columns (numpy's rank
    tolerance: singular values up to max(n, q) * eps * the largest); (0, q) when the live columns
    are linearly independent on the rows used."""
    q = Xs.shape[1]
    cols = np.flatnonzero(live)
    if not Xs.shape[0] or not cols.size:
        return np.zeros((0, q))
    _, sv, vt = np.linalg.svd(Xs[:, cols], full_matrices=False)
    rank = int(np.sum(sv > sv.max() * max(Xs.shape[0], cols.size) * np.finfo(float).eps)) if sv.size else 0
    out = np.zeros((cols.size - rank, q))
    out[:, cols] = vt[rank:]
    return out


def _solve(Xs, sign, live, c=None, null=None):
    """Konis's LP on the scaled design; ``c`` (q,) an objective (None: the module's); ``null`` (m, q) directions the answer must be orthogonal to (the null
    space of Xs: a direction that changes no fitted probability moves nothing). Returns
    (direction (q,), rows' shares sign * Xs d)."""
    n, q = Xs.shape
    ineq, eq = sign != 0, sign == 0
    A = sign[ineq, None] * Xs[ineq]
    obj = -A.sum(axis=0) if c is None else c
    bounds = [(-1.0, 1.0) if live[j] else (0.0, 0.0) for j in range(q)]
    E = np.vstack([Xs[eq]] + ([null] if null is not None and null.size else []))
    res = linprog(obj, A_ub=-A if A.size else None, b_ub=np.zeros(A.shape[0]) if A.size else None,
                  A_eq=E if E.size else None, b_eq=np.zeros(E.shape[0]) if E.size else None,
                  bounds=bounds, method="highs")
    if res.status != 0 or res.x is None:
        raise ValueError(f"the separation test's linear program failed: {res.message}")
    d = np.asarray(res.x, dtype=float)
    return d, (A @ d if A.size else np.zeros(0))


def separation(X, w, s) -> dict:
    """Konis's test (module doc) for the logistic likelihood
    ``sum_r s_r log expit(X_r beta) + (w_r - s_r) log expit(-X_r beta)``.

    Args: X (n, q) design (real numbers, dense or scipy sparse; its columns, then its rows, are
    scaled to a largest absolute value of 1 before the test, which does not change the answer); w (n,) weights >= 0
    (a row of weight 0 is left out); s (n,) success weights, 0 <= s <= w (a row is a plain win
    only when s == w, a plain loss only when s == 0, as :func:`judgecal.calibrate.bt.linked`
    reads it). Returns {"separated": bool (some row's share ``s_r X_r d`` of the direction above
    :data:`SEPARATION_TOL`: that row's fitted probability goes to 0 or 1), "optimum": the LP
    optimum per row used (0 for overlapping data), "direction": (q,) a direction along which the
    likelihood never falls (in the scaled columns; zeros when not separated), "n_rows": rows
    used}. Raises ValueError on mismatched shapes, a value that is not a finite real number, s
    outside [0, w] or a linear program HiGHS cannot solve."""
    X, w, s = _design(X, w, s)
    Xs, sign, live = _constraints(X, w, s)
    n, q = Xs.shape
    if n == 0 or q == 0 or not live.any():
        return {"separated": False, "optimum": 0.0, "direction": np.zeros(q), "n_rows": int(n)}
    d, share = _solve(Xs, sign, live)
    sep = bool(share.size and share.max() > SEPARATION_TOL)
    return {"separated": sep, "optimum": max(0.0, float(share.sum())) / n, "direction": d if sep else np.zeros(q),
            "n_rows": int(n)}


def involved(X, w, s, columns) -> list[int]:
    """Of ``columns`` (indices into X's columns), those that some separating direction moves: the
    columns j for which a direction with ``d_j != 0`` never lowers the likelihood (two LPs each:
    the largest and smallest ``d_j`` over the directions :func:`separation` allows, beyond
    :data:`SEPARATION_TOL`). A property of the data, unlike the one direction an LP solver returns.
    The directions are taken orthogonal to the null space of X on the rows used: columns that
    coincide there (collinear on those rows only) are not moved by a direction that changes no
    fitted probability. A column the first LP's separating direction already moves needs no
    more LPs. Args and errors as :func:`separation`."""
    X, w, s = _design(X, w, s)
    Xs, sign, live = _constraints(X, w, s)
    if not Xs.shape[0] or not live.any():
        return []
    null = _null_space(Xs, live)
    d0, share = _solve(Xs, sign, live, null=null)
    if not (share.size and share.max() > SEPARATION_TOL):
        return []
    out = []
    for j in columns:
        if not 0 <= j < Xs.shape[1]:
            raise ValueError(f"column {j} is not a column of X (0..{Xs.shape[1] - 1})")
        if not live[j]:
            continue
        if abs(d0[j]) > SEPARATION_TOL:
            out.append(int(j))
            continue
        for side in (1.0, -1.0):
            c = np.zeros(Xs.shape[1])
            c[j] = -side
            d, _ = _solve(Xs, sign, live, c=c, null=null)
            if side * d[j] > SEPARATION_TOL:
                out.append(int(j))
                break
    return out


def bt_rows(design, anchor: int):
    """(X (n, q) dense, W (n,), S (n,), k) of a Bradley-Terry fit's likelihood
    (:func:`judgecal.calibrate.bt.fit_bt` on ``design``, every item weighted 1) over the parameters
    that fit has: the models in the anchor's strongly connected component (the others are set
    apart by :func:`judgecal.calibrate.bt.linked`, exactly) and the ``design.k`` covariate
    columns (the last k of X), on the rows among those models."""
    W = np.asarray(design.Cw.sum(axis=0)).ravel()
    S = np.asarray(design.Cs.sum(axis=0)).ravel()
    _, rows, col, q = bt.fit_rows(design, anchor, W, S)
    X = bt.design_matrix(design, col, q, rows)
    return X.toarray(), W[rows], S[rows], design.k


def covariate_to_drop(design, anchor: int) -> int | None:
    """The covariate column (index among the design's k) to leave out of a separated
    Bradley-Terry fit, decided by the data alone: of the columns some separating direction moves
    (:func:`involved`), the first (in column order) whose removal alone leaves data that overlap;
    if no single removal does, the first of them. None when the fit is not separated, or when no
    covariate is involved (separation among the models' columns only, which
    :func:`judgecal.calibrate.bt.linked` handles)."""
    X, W, S, k = bt_rows(design, anchor)
    p = X.shape[1] - k
    cand = [j - p for j in involved(X, W, S, range(p, p + k))]  # [] when not separated
    for j in cand:
        keep = np.ones(X.shape[1], dtype=bool)
        keep[p + j] = False
        if not separation(X[:, keep], W, S)["separated"]:
            return j
    return cand[0] if cand else None
