"""Bradley-Terry scores from pairwise verdicts, by maximum likelihood, with bootstrap CIs over
items. Pure numpy/scipy; no I/O.

Model (Bradley & Terry 1952; Arena-Hard-Auto's ``compute_mle_elo`` in lm-sys/arena-hard-auto
``show_result.py``, v0.1): a battle between models a and b with covariates z (none on a plain
board; style control adds them) has

    P(a preferred) = expit(theta_a - theta_b + z . gamma)

theta in natural-log odds units, the anchor model's theta fixed at 0 (the likelihood only sees
differences). A battle's outcome y in [0, 1] is the credit of a: 1 a win, 0 a loss, 0.5 a tie
(Arena-Hard counts a tie as one win and one loss of the battle counted twice: the same
likelihood), a judge's soft preference P(a preferred) where one is stored; its weight w >= 0
(Arena-Hard-Auto repeats a strong verdict ``A>>B`` 3 times: weight 3). The log-likelihood

    L = sum_battles w * (y * log expit(eta) + (1 - y) * log expit(-eta))

is maximised by Newton's method with step halving (strictly concave once the anchor is fixed
and every model is linked to it). Battles with the same design row are merged (their weights
summed, their credits weighted-averaged: the same L).

Ratings as Arena-Hard-Auto prints them (``compute_mle_elo``: SCALE 400, BASE 10, INIT_RATING
1000, the baseline anchored at 1000): ``rating = 1000 + 400 * (theta - theta_anchor) / ln 10``.
The win rate against a baseline derived from the coefficients is Arena-Hard-Auto's
``predict_win_rate`` / ``get_win_rate_column`` (same file): ``1 / (1 + 10 ** ((R_baseline - R) /
400)) = expit(theta - theta_baseline)``, 0.5 for the baseline itself; its CI is that transform
of the rating CI's bounds (show_result.py applies ``get_win_rate_column`` to the ``lower`` and
``upper`` columns).

A finite maximum exists only when the directed graph "i beat j" (positive credit of i in some
battle with j) restricted to the fitted models is strongly connected (Ford 1957; Hunter 2004):
models outside the anchor's strongly connected component are set apart, their coefficient
+inf (they won every battle that links them to the anchor's side), -inf (lost every one) or NaN
(no battle links them) -- never fitted to a huge finite number as an unpenalised solver would.

Bootstrap: items resampled with replacement (every battle of an item goes with it), ``B``
refits from the full-data optimum, vectorised over resamples (one Newton step solves every
resample's system at once); 95% percentile intervals."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy import sparse
from scipy.sparse.csgraph import connected_components
from scipy.special import expit, log_expit
from threadpoolctl import ThreadpoolController

from judgecal.calibrate.resample import resample_counts

SCALE, BASE, INIT_RATING = 400.0, 10.0, 1000.0
#: Newton stops when no coefficient moves by more than this (natural-log odds units)
TOL = 1e-10
MAX_ITER = 100
#: resamples solved together: at most CHUNK, and at most CHUNK_CELLS / design rows (the per-step arrays,
#: resamples x rows, then stay in the CPU's cache: 64 resamples x 20 119 battles took 10.2 s for 1000
#: resamples, 8 x 20 119 4.7 s, the same numbers; memory also CHUNK x q x q floats for q parameters)
CHUNK = 64
CHUNK_CELLS = 200_000

_THREADPOOLS = None


def _one_thread():
    """A context that runs BLAS on one thread (the libraries found once: threadpoolctl's own
    search costs about 1 ms a call)."""
    global _THREADPOOLS
    if _THREADPOOLS is None:
        _THREADPOOLS = ThreadpoolController()
    return _THREADPOOLS.limit(limits=1)


@dataclass
class Design:
    """Battles merged into design rows: row r compares model ``ia[r]`` (+1) with ``ib[r]`` (-1)
    (codes into the ``n_models`` models), covariates ``Z[r]`` (shape (n_rows, k)); ``Cw`` and
    ``Cs`` (sparse, n_items x n_rows) the weight and the credit (weight x outcome) each item puts
    on each row."""

    ia: np.ndarray
    ib: np.ndarray
    Z: np.ndarray
    Cw: sparse.csr_matrix
    Cs: sparse.csr_matrix
    n_models: int

    @property
    def k(self) -> int:
        return int(self.Z.shape[1])


def make_design(model_a, model_b, outcome, weight, item, n_models: int, n_items: int, features=None) -> Design:
    """Merge battles into design rows.

    Args: model_a, model_b (n,) int codes in 0..n_models-1 (a battle of a model with itself
    is refused: ValueError); outcome (n,) credit of a in [0, 1]; weight (n,) >= 0; item (n,)
    codes in 0..n_items-1; features (n, k) covariates of a minus b (None: none). Without
    covariates each battle is oriented so that ``ia < ib`` (the credit then 1 - y) and battles
    of one pair share a row; with covariates every battle is its own row."""
    a = np.asarray(model_a, dtype=np.int64)
    b = np.asarray(model_b, dtype=np.int64)
    y = np.asarray(outcome, dtype=float)
    w = np.asarray(weight, dtype=float)
    it = np.asarray(item, dtype=np.int64)
    n = a.size
    if np.any(a == b):
        raise ValueError("a battle of a model with itself")
    if np.any((y < 0) | (y > 1)) or not np.all(np.isfinite(y)):
        raise ValueError("outcomes must lie in [0, 1]")
    if np.any(w < 0) or not np.all(np.isfinite(w)):
        raise ValueError("weights must be finite and >= 0")
    if features is None:
        swap = a > b
        ia, ib = np.where(swap, b, a), np.where(swap, a, b)
        y = np.where(swap, 1.0 - y, y)
        key = ia * n_models + ib
        keys, row = np.unique(key, return_inverse=True)
        ia, ib = keys // n_models, keys % n_models
        Z = np.zeros((keys.size, 0))
    else:
        Z = np.asarray(features, dtype=float).reshape(n, -1)
        ia, ib, row = a, b, np.arange(n)
    n_rows = ia.size
    Cw = sparse.csr_matrix((w, (it, row)), shape=(n_items, n_rows))
    Cs = sparse.csr_matrix((w * y, (it, row)), shape=(n_items, n_rows))
    Cw.sum_duplicates()
    Cs.sum_duplicates()
    return Design(ia, ib, Z, Cw, Cs, n_models)


@dataclass
class Fit:
    """A fit: ``coef`` (n_models,) theta in natural-log odds units, the anchor's 0, +inf /
    -inf / NaN for models set apart (``set_apart``: {model code: "above" | "below" |
    "unlinked"}); ``gamma`` (k,) covariate coefficients; ``loglik`` at the optimum;
    ``converged``; ``n_iter`` Newton steps."""

    coef: np.ndarray
    gamma: np.ndarray
    loglik: float
    converged: bool
    n_iter: int
    set_apart: dict[int, str] = field(default_factory=dict)


def linked(ia, ib, w, s, n_models: int, anchor: int) -> dict[int, str]:
    """Models without a finite maximum-likelihood coefficient relative to ``anchor``: {model:
    "above" (beat the anchor's side in every battle linking them), "below" (lost every one) or
    "unlinked" (no battle links them)}; models in the anchor's strongly connected component
    of the graph "i beat j" (credit ``s`` > 0 for a = i, ``w - s`` > 0 for b = i) are not
    listed. Rows (ia, ib, weight w, credit s) as :class:`Design` holds them."""
    win_a = s > 0
    win_b = (w - s) > 0
    src = np.concatenate([ia[win_a], ib[win_b]])
    dst = np.concatenate([ib[win_a], ia[win_b]])
    g = sparse.csr_matrix((np.ones(src.size), (src, dst)), shape=(n_models, n_models))
    n_comp, label = connected_components(g, directed=True, connection="strong")
    if n_comp == 1:
        return {}
    mine = label == label[anchor]
    down = _reach(g, mine)  # beaten (transitively) by the anchor's side
    up = _reach(g.T.tocsr(), mine)  # beat (transitively) the anchor's side
    out = {}
    for i in np.flatnonzero(~mine).tolist():
        out[i] = "above" if up[i] else "below" if down[i] else "unlinked"
    return out


def _reach(g: sparse.csr_matrix, start: np.ndarray) -> np.ndarray:
    seen = start.copy()
    frontier = start.copy()
    while frontier.any():
        nxt = (g.T @ frontier.astype(float)) > 0
        frontier = nxt & ~seen
        seen |= nxt
    return seen


def _params(design: Design, keep: np.ndarray, anchor: int):
    """(column of each model in the parameter vector, -1 for the anchor and models not kept;
    q = number of parameters)."""
    col = np.full(design.n_models, -1, dtype=np.int64)
    free = np.flatnonzero(keep & (np.arange(design.n_models) != anchor))
    col[free] = np.arange(free.size)
    return col, free.size + design.k


def fit_rows(design: Design, anchor: int, W: np.ndarray, S: np.ndarray):
    """What a fit on row weights ``W`` and credits ``S`` (n_rows,) estimates: (models set apart
    (:func:`linked`), rows used (weight > 0, both models kept), column of each model (-1: none),
    q parameters)."""
    used = W > 0
    apart = linked(design.ia[used], design.ib[used], W[used], S[used], design.n_models, anchor)
    keep = np.ones(design.n_models, dtype=bool)
    keep[list(apart)] = False
    rows = np.flatnonzero(used & keep[design.ia] & keep[design.ib])
    col, q = _params(design, keep, anchor)
    return apart, rows, col, q


def design_matrix(design: Design, col: np.ndarray, q: int, rows: np.ndarray) -> sparse.csr_matrix:
    """Sparse X (n_rows x q) of the rows used: +1 in a's model column, -1 in b's, then the k
    covariates; P(a preferred) = expit(X beta)."""
    ia, ib, Z = design.ia[rows], design.ib[rows], design.Z[rows]
    n, k = rows.size, design.k
    r_idx, c_idx, vals = [], [], []
    for codes, sign in ((ia, 1.0), (ib, -1.0)):
        c = col[codes]
        ok = c >= 0
        r_idx.append(np.flatnonzero(ok))
        c_idx.append(c[ok])
        vals.append(np.full(int(ok.sum()), sign))
    p = q - k
    for j in range(k):
        r_idx.append(np.arange(n))
        c_idx.append(np.full(n, p + j))
        vals.append(Z[:, j])
    X = sparse.csr_matrix((np.concatenate(vals), (np.concatenate(r_idx), np.concatenate(c_idx))), shape=(n, q))
    X.sum_duplicates()
    return X


def _system(design: Design, col: np.ndarray, q: int, rows: np.ndarray):
    """Sparse X (:func:`design_matrix`), and T (n_rows x q*q) with T[r, i*q + j] =
    X[r, i] X[r, j] for i <= j, 0 below the diagonal (a Hessian is then :func:`_hessian` of c:
    the upper triangle c @ T mirrored; half the products of the full square)."""
    X = design_matrix(design, col, q, rows)
    n = rows.size
    Xc = X.tocoo()
    # pairs of nonzeros of each row
    order = np.argsort(Xc.row, kind="stable")
    rr, cc, vv = Xc.row[order], Xc.col[order], Xc.data[order]
    starts = np.searchsorted(rr, np.arange(n))
    ends = np.searchsorted(rr, np.arange(n), side="right")
    counts = ends - starts
    tr, tc, tv = [], [], []
    for m_ in np.unique(counts):
        if m_ == 0:
            continue
        at = np.flatnonzero(counts == m_)
        idx = starts[at][:, None] + np.arange(m_)[None, :]  # (len(at), m_)
        ci, vi = cc[idx], vv[idx]
        upper = np.broadcast_to((ci[:, :, None] <= ci[:, None, :]), (len(at), m_, m_))  # H is symmetric
        tr.append(np.broadcast_to(at[:, None, None], (len(at), m_, m_))[upper])
        tc.append((ci[:, :, None] * q + ci[:, None, :])[upper])
        tv.append((vi[:, :, None] * vi[:, None, :])[upper])
    if tr:
        T = sparse.csr_matrix((np.concatenate(tv), (np.concatenate(tr), np.concatenate(tc))), shape=(n, q * q))
    else:
        T = sparse.csr_matrix((n, q * q))
    return X.tocsr(), T.T.tocsr()


def _hessian(TT: sparse.csr_matrix, c: np.ndarray, q: int) -> np.ndarray:
    """sum_r c[b, r] X[r]' X[r] per row b of c (B, n_rows): (B, q, q), from ``TT`` (q*q x
    n_rows: the transposed upper-triangle products of :func:`_system`)."""
    U = (TT @ c.T).T.reshape(c.shape[0], q, q)
    return U + np.triu(U, 1).transpose(0, 2, 1)


def _loglik(eta: np.ndarray, W: np.ndarray, S: np.ndarray) -> np.ndarray:
    """sum_r S log expit(eta) + (W - S) log expit(-eta), per row of W, S (B, n_rows); with
    log expit(-eta) = log expit(eta) - eta: one logarithm per cell."""
    return (W * log_expit(eta) - (W - S) * eta).sum(axis=1)


def _newton(X: sparse.csr_matrix, T: sparse.csr_matrix, W: np.ndarray, S: np.ndarray, beta0: np.ndarray,
            tol: float = TOL, max_iter: int = MAX_ITER) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Maximise sum_r S log expit(X beta) + (W - S) log expit(-X beta) for every row of W, S
    (B, n_rows) at once. Returns (beta (B, q), loglik (B,), converged (B,) bool, steps).

    Newton's method: the step solves H d = g (H = X' diag(W p (1 - p)) X, g = X' (S - W p)), halved
    (up to 40 times) while it lowers a resample's likelihood; a resample has converged when no
    coefficient moves by more than ``tol``."""
    beta = np.array(beta0, dtype=float, copy=True)
    B, q = beta.shape
    if q == 0:
        return beta, _loglik(np.zeros_like(W), W, S), np.ones(B, dtype=bool), 0
    XT = X.T.tocsr()
    eta = (X @ beta.T).T
    ll = _loglik(eta, W, S)
    done = np.zeros(B, dtype=bool)
    steps = 0
    for steps in range(1, max_iter + 1):
        act = np.flatnonzero(~done)
        if act.size == 0:
            steps -= 1
            break
        p = expit(eta[act])
        g = (XT @ (S[act] - W[act] * p).T).T  # (b, q)
        c = W[act] * p * (1.0 - p)
        H = _hessian(T, c, q)
        try:
            d = np.linalg.solve(H, g[:, :, None])[:, :, 0]
        except np.linalg.LinAlgError:
            d = np.stack([np.linalg.lstsq(h, v, rcond=None)[0] for h, v in zip(H, g)])
        t = np.ones(act.size)
        new_beta = beta[act] + d
        new_eta = (X @ new_beta.T).T
        new_ll = _loglik(new_eta, W[act], S[act])
        for _ in range(40):
            worse = ~(new_ll >= ll[act] - 1e-12 * np.maximum(1.0, np.abs(ll[act])))
            if not worse.any():
                break
            t[worse] /= 2
            nb = beta[act][worse] + t[worse, None] * d[worse]
            new_beta[worse] = nb
            new_eta[worse] = (X @ nb.T).T
            new_ll[worse] = _loglik(new_eta[worse], W[act][worse], S[act][worse])
        moved = np.max(np.abs(new_beta - beta[act]), axis=1) if q else np.zeros(act.size)
        beta[act], eta[act], ll[act] = new_beta, new_eta, new_ll
        done[act[moved <= tol]] = True
    return beta, ll, done, steps


def newton(X: sparse.csr_matrix, T: sparse.csr_matrix, W: np.ndarray, S: np.ndarray, beta0: np.ndarray,
           tol: float = TOL, max_iter: int = MAX_ITER) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """:func:`_newton` with BLAS on one thread: many small solves, which a BLAS thread pool only
    slows down (100x on a loaded 2-core machine: threads spinning for work)."""
    with _one_thread():
        return _newton(X, T, W, S, beta0, tol, max_iter)


#: chord steps (fixed Hessian) tried on a chunk of resamples before Newton's steps finish the rest
CHORD_ITER = 40
#: Newton's steps then (from near the optimum a finite one is reached in a few; a resample without
#: a finite optimum never settles and is looked at on its own)
REFIT_NEWTON_ITER = 30


def _undamped(X: sparse.csr_matrix, W: np.ndarray, S: np.ndarray, beta0: np.ndarray, direction, tol: float,
              max_iter: int) -> tuple[np.ndarray, np.ndarray]:
    """Steps ``beta += direction(act, p, g)`` without step halving for every row of W, S (B,
    n_rows) from ``beta0`` (B, q): ``act`` the resamples still moving, ``p`` their fitted
    probabilities, ``g`` their gradients. Returns (beta (B, q), converged (B,)): a resample has
    converged when no coefficient moved by more than ``tol``; one whose step left the finite
    numbers is returned at ``beta0``, not converged."""
    beta = np.array(beta0, dtype=float, copy=True)
    XT = X.T.tocsr()
    done = np.zeros(beta.shape[0], dtype=bool)
    bad = np.zeros(beta.shape[0], dtype=bool)
    for _ in range(max_iter):
        act = np.flatnonzero(~done & ~bad)
        if act.size == 0:
            break
        p = expit((X @ beta[act].T).T)
        g = (XT @ (S[act] - W[act] * p).T).T
        d = direction(act, p, g)
        new = beta[act] + d
        finite = np.isfinite(new).all(axis=1)
        beta[act[finite]] = new[finite]
        bad[act[~finite]] = True
        done[act[finite & (np.max(np.abs(d), axis=1) <= tol)]] = True
    beta[bad] = beta0[bad]
    return beta, done


def _chord(X: sparse.csr_matrix, W: np.ndarray, S: np.ndarray, beta0: np.ndarray, Hinv: np.ndarray,
           tol: float = TOL, max_iter: int = CHORD_ITER) -> tuple[np.ndarray, np.ndarray]:
    """The chord method: Newton's steps with one fixed inverse Hessian ``Hinv`` ((q, q) for every
    resample, or (B, q, q) one per resample) for every step, without step halving (linear
    convergence, fast when each resample's Hessian is close to it, as a bootstrap resample's is
    to the full data's). Returns (beta (B, q), converged (B,)) as :func:`_undamped`."""
    def direction(act, p, g):
        return g @ Hinv if Hinv.ndim == 2 else np.einsum("bq,bqr->br", g, Hinv[act])

    return _undamped(X, W, S, beta0, direction, tol, max_iter)


#: undamped Newton steps tried on a chunk of resamples (own Hessians) before damped ones finish the rest
UNDAMPED_ITER = 12


def _newton_undamped(X: sparse.csr_matrix, T: sparse.csr_matrix, W: np.ndarray, S: np.ndarray, beta0: np.ndarray,
                     tol: float = TOL, max_iter: int = UNDAMPED_ITER) -> tuple[np.ndarray, np.ndarray]:
    """Newton's steps for every row of W, S (B, n_rows) from ``beta0`` (B, q), each with its
    own Hessian and without step halving. Returns (beta (B, q), converged (B,)) as
    :func:`_undamped`; a resample whose Hessian cannot be solved is returned at ``beta0``, not
    converged (the damped :func:`_newton` then takes it)."""
    q = beta0.shape[1]

    def direction(act, p, g):
        H = _hessian(T, W[act] * p * (1.0 - p), q)
        try:
            return np.linalg.solve(H, g[:, :, None])[:, :, 0]
        except np.linalg.LinAlgError:
            return np.full((act.size, q), np.nan)

    return _undamped(X, W, S, beta0, direction, tol, max_iter)


def refit_many(X: sparse.csr_matrix, T: sparse.csr_matrix, W: np.ndarray, S: np.ndarray, beta0: np.ndarray,
               H0: np.ndarray, tol: float = TOL, own_hessian: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Refits of many resamples (rows of W, S) from ``beta0`` (q,): chord steps with the
    inverse of ``H0`` (the Hessian at the full-data optimum) -- or, ``own_hessian``, of each
    resample's own Hessian at ``beta0`` (one product with T per call: faster where the resamples'
    Hessians differ more from the full data's, as with per-battle covariate rows) --, then
    Newton's steps for any resample the chord steps left unsettled. Returns (beta (B, q),
    converged (B,))."""
    with _one_thread():
        B, q = W.shape[0], beta0.size
        start = np.tile(beta0, (B, 1))
        if q == 0:
            return start, np.ones(B, dtype=bool)
        if own_hessian:
            # Newton's steps without step halving: from the full-data optimum a resample's optimum is near,
            # where they converge quadratically (no likelihood evaluated: one logarithm per cell saved a step)
            beta, conv = _newton_undamped(X, T, W, S, start, tol)
            beta[~conv] = start[~conv]  # an unsettled resample restarts damped from the full-data optimum
        else:
            try:
                Hinv = np.linalg.inv(H0)
            except np.linalg.LinAlgError:
                Hinv = np.linalg.pinv(H0)
            beta, conv = _chord(X, W, S, start, Hinv, tol)
        rest = np.flatnonzero(~conv)
        if rest.size:
            b2, _, c2, _ = _newton(X, T, W[rest], S[rest], beta[rest], tol, REFIT_NEWTON_ITER)
            beta[rest], conv[rest] = b2, c2
        return beta, conv


def fit_bt(design: Design, anchor: int, weights_of_items: np.ndarray | None = None,
           start: np.ndarray | None = None) -> Fit:
    """The maximum-likelihood fit of one data set: ``weights_of_items`` (n_items,) multiplies
    each item's battles (None: 1, the data as it is). Models without battles, or outside the
    anchor's strongly connected component (:func:`linked`), are set apart. ``start``: (n_models
    + k,) coefficients to start from (None: zeros)."""
    m_items = np.ones(design.Cw.shape[0]) if weights_of_items is None else np.asarray(weights_of_items, dtype=float)
    W = design.Cw.T @ m_items
    S = design.Cs.T @ m_items
    return _fit_one(design, anchor, W, S, start)


def _fit_one(design: Design, anchor: int, W: np.ndarray, S: np.ndarray, start: np.ndarray | None) -> Fit:
    m = design.n_models
    apart, rows, col, q = fit_rows(design, anchor, W, S)
    X, T = _system(design, col, q, rows)
    beta0 = np.zeros((1, q))
    if start is not None:
        free = np.flatnonzero(col >= 0)
        beta0[0, col[free]] = start[free] - start[anchor]
        if design.k:
            beta0[0, q - design.k:] = start[m:]
    beta, ll, conv, steps = newton(X, T, W[rows][None, :], S[rows][None, :], beta0)
    coef = np.full(m, np.nan)
    coef[anchor] = 0.0
    free = np.flatnonzero(col >= 0)
    coef[free] = beta[0, col[free]]
    for i, why in apart.items():
        coef[i] = math.inf if why == "above" else -math.inf if why == "below" else math.nan
    return Fit(coef, beta[0, q - design.k:].copy(), float(ll[0]), bool(conv[0]), steps, apart)


@dataclass
class Bootstrap:
    """Bootstrap refits: ``coef`` (B, n_models) (the anchor's 0; +inf / -inf / NaN where a
    resample leaves a model without a finite coefficient), ``gamma`` (B, k); ``n_set_apart``
    resamples refitted on fewer models (:func:`linked`); ``n_not_converged`` resamples whose
    Newton steps did not settle (their coefficients NaN); ``n_style_separated`` resamples with a
    covariate coefficient that ran off (set by the style-controlled board,
    :func:`judgecal.views.btboard._controlled_fit`)."""

    coef: np.ndarray
    gamma: np.ndarray
    n_set_apart: int = 0
    n_not_converged: int = 0
    n_style_separated: int = 0


def bootstrap_bt(design: Design, anchor: int, fit: Fit, n_bootstrap: int, seed: int, chunk: int | None = None) -> Bootstrap:
    """``n_bootstrap`` refits on item resamples (:func:`judgecal.calibrate.resample.resample_counts`
    with ``numpy.random.default_rng(seed)``: the same resamples for the same items and seed),
    each started from ``fit`` (the full-data optimum); the models ``fit`` set apart stay apart.
    Every resample is solved with the others, ``chunk`` at a time (:func:`refit_many`; None:
    :data:`CHUNK`, fewer where the design has many rows, :data:`CHUNK_CELLS`; the numbers do not
    depend on it). A resample
    that lost a direction of credit the data has between some model pair is checked with
    :func:`linked` (on the battles merged per model pair) -- without covariates when it did not
    settle, with covariates settled or not (a diverging coefficient can settle falsely where expit
    saturates) --; one whose graph came apart (a model has no finite
    coefficient in it) is refitted alone on the models still linked, the others set apart (+inf /
    -inf / NaN)."""
    m, k = design.n_models, design.k
    n_items = design.Cw.shape[0]
    M = resample_counts(n_items, n_bootstrap, np.random.default_rng(seed))
    keep = np.ones(m, dtype=bool)
    keep[list(fit.set_apart)] = False
    rows = np.flatnonzero(keep[design.ia] & keep[design.ib] & (np.asarray(design.Cw.sum(axis=0)).ravel() > 0))
    # the resamples' weights and credits per design row, ``chunk`` resamples at a time (resamples x rows
    # numbers: with covariates every battle is a row)
    CwT, CsT = design.Cw.T.tocsr()[rows], design.Cs.T.tocsr()[rows]
    full_w, full_s = np.asarray(design.Cw.sum(axis=0)).ravel()[rows], np.asarray(design.Cs.sum(axis=0)).ravel()[rows]

    def weights(part):
        Mp = M[part].T
        return np.asarray((CwT @ Mp).T), np.asarray((CsT @ Mp).T)

    # the rows merged per model pair (lo, hi), credits of lo: a direction of credit is per pair
    ra, rb = design.ia[rows], design.ib[rows]
    pkey, prow = np.unique(np.minimum(ra, rb) * m + np.maximum(ra, rb), return_inverse=True)
    pia, pib = pkey // m, pkey % m
    flip = ra > rb
    P = sparse.csr_matrix((np.ones(rows.size), (np.arange(rows.size), prow)), shape=(rows.size, pkey.size))
    Pflip = sparse.csr_matrix((flip.astype(float), (np.arange(rows.size), prow)), shape=(rows.size, pkey.size))
    Psign = (P - 2 * Pflip).tocsr()

    def per_pair(W, S):
        """(weights, credits of the pair's lower model) per pair, (b, n_pairs)."""
        return np.asarray(W @ P), np.asarray(S @ Psign + W @ Pflip)

    full_pw, full_ps = per_pair(full_w[None, :], full_s[None, :])
    full_pw, full_ps = full_pw[0], full_ps[0]
    coef = np.full((n_bootstrap, m), np.nan)
    gamma = np.full((n_bootstrap, k), np.nan)
    for i, why in fit.set_apart.items():
        coef[:, i] = math.inf if why == "above" else -math.inf if why == "below" else math.nan
    col, q = _params(design, keep, anchor)
    free = np.flatnonzero(col >= 0)
    X, T = _system(design, col, q, rows)
    start = np.zeros(q)
    start[col[free]] = fit.coef[free]
    start[q - k:] = fit.gamma
    w0 = full_w[None, :]
    p0 = expit((X @ start[:, None]).T)
    H0 = _hessian(T, w0 * p0 * (1.0 - p0), q)[0]
    apart_rs = {}  # resample: (W, S) of a resample whose graph came apart
    not_conv = 0
    if chunk is None:
        chunk = max(1, min(CHUNK, CHUNK_CELLS // max(1, rows.size)))
    for lo in range(0, n_bootstrap, chunk):
        part = np.arange(lo, min(lo + chunk, n_bootstrap))
        W, S = weights(part)
        beta, conv = refit_many(X, T, W, S, start, H0, own_hessian=k > 0)
        # a direction of credit the data has between a model pair and the resample lost: the graph may
        # have come apart
        PW, PS = per_pair(W, S)
        lost = (((full_ps > 0) & ~(PS > 0)) | (((full_pw - full_ps) > 0) & ~((PW - PS) > 0))).any(axis=1)
        # without covariates a resample whose graph came apart never settles (a chord or Newton step of a
        # diverging coefficient stays large), so only the unsettled ones are checked; with covariates the
        # own-Hessian steps can carry such a coefficient to where expit saturates and its gradient is 0
        # exactly (a false convergence), so every one that lost a direction is
        for j in np.flatnonzero(lost & (~conv if k == 0 else True)).tolist():
            if set(linked(pia, pib, PW[j], PS[j], m, anchor)) - set(fit.set_apart):
                apart_rs[int(part[j])] = (W[j].copy(), S[j].copy())
                conv[j] = True  # refitted below
        not_conv += int((~conv).sum())
        beta[~conv] = np.nan
        c = coef[part]
        c[:, anchor] = 0.0
        c[:, free] = beta[:, col[free]]
        coef[part] = c
        gamma[part] = beta[:, q - k:]
    # a resample whose graph came apart (it lost a direction of credit the data has, and a model left the
    # anchor's component) is refitted on the models still linked
    hard = list(apart_rs)
    full_start = np.concatenate([np.where(np.isfinite(fit.coef), fit.coef, 0.0), fit.gamma])
    for b in hard:
        Wb = np.zeros(design.ia.size)
        Sb = np.zeros(design.ia.size)
        Wb[rows], Sb[rows] = apart_rs[b]
        f = _fit_one(design, anchor, Wb, Sb, full_start)
        if not f.converged:
            not_conv += 1
            f.coef[np.isfinite(f.coef)] = np.nan
            f.coef[anchor] = 0.0
        coef[b] = f.coef
        gamma[b] = f.gamma if f.converged else np.nan
    n_apart = len(hard)
    return Bootstrap(coef, gamma, n_apart, not_conv)


def ratings(coef, anchor_coef: float = 0.0) -> np.ndarray:
    """Arena-Hard-Auto's rating scale: ``1000 + 400 * (theta - theta_anchor) / ln 10`` (SCALE
    400, BASE 10, INIT_RATING 1000; the anchor at 1000)."""
    return INIT_RATING + SCALE * (np.asarray(coef, dtype=float) - anchor_coef) / math.log(BASE)


def win_rate(rating, baseline_rating) -> np.ndarray:
    """Arena-Hard-Auto's ``predict_win_rate`` of a model against the baseline: ``1 / (1 + 10 **
    ((R_baseline - R) / 400))`` (0.5 for the baseline; 1 for +inf, 0 for -inf)."""
    r = np.asarray(rating, dtype=float)
    with np.errstate(over="ignore", invalid="ignore"):
        return 1.0 / (1.0 + BASE ** ((baseline_rating - r) / SCALE))


def percentile_ci(values) -> list | None:
    """[2.5, 97.5] percentiles (numpy's linear interpolation) of the values that are not NaN,
    infinite values included: a bound whose interpolation touches an infinite value is that
    infinity (never a finite number interpolated from one), and a bound at an exact index is that
    value even where the next one is infinite (numpy gives NaN there); None when none is left."""
    v = np.sort(np.asarray(values, dtype=float).ravel())
    v = v[~np.isnan(v)]
    if v.size == 0:
        return None
    out = []
    for q in (0.025, 0.975):
        pos = q * (v.size - 1)
        lo, hi = v[int(math.floor(pos))], v[int(math.ceil(pos))]
        if math.isinf(lo) or math.isinf(hi):
            out.append(float(lo if math.isinf(lo) and (q < 0.5 or not math.isinf(hi)) else hi))
            continue
        # numpy interpolates between v[k] and v[k + 1] even at an exact index k (weight 0): with
        # v[k + 1] infinite that is inf * 0 = NaN; the percentile there is v[k] itself
        with np.errstate(invalid="ignore"):
            p = float(np.percentile(v, 100 * q))
        out.append(float(lo) if math.isnan(p) else p)
    return out
