"""AlpacaEval 2.0's length-controlled win rate (a GLM on the judge's verdicts), judgecal's own
implementation, and the instruction difficulty it needs, estimated here.

Source: Dubois et al. (2024), "Length-Controlled AlpacaEval: A Simple Way to Debias Automatic
Evaluators", and tatsu-lab/alpaca_eval ``src/alpaca_eval/metrics/glm_winrate.py``
(``length_controlled_v1``). Per model m against the baseline b, over instructions x::

    logit P(m preferred on x) = w_len * tanh(std_delta_len_x) + w_diff * difficulty_x
                                + w_bias * not_gamed_baseline                  (no intercept)
    std_delta_len_x = (len(output_b) - len(output_m)) / std over x   (characters)
    LC win rate     = 100 * mean_x logistic(w_diff * difficulty_x + w_bias)  (length term at 0)

fitted by soft-label logistic regression (the verdict's preference is the target
probability) with an L1 penalty, ``C`` chosen by 5-fold cross-validation (grouped by
instruction) over ``logspace(-4, 4, 10)`` (scikit-learn's LogisticRegressionCV defaults that
AlpacaEval uses, objective ``||w||_1 + C * sum_i s_i * logloss_i``). The regularisation
towards the gamed baselines adds, with weight ``lambda / 2`` each (lambda = 0.2), the verdicts
of the baseline model itself prompted to be verbose and to be concise against the baseline,
with ``not_gamed_baseline = 0``: they anchor the length slope on pairs that differ only in
length.

Where judgecal differs from AlpacaEval (docs/leaderboard.md):
- ``difficulty_x``: AlpacaEval downloads a per-instruction difficulty fitted on its whole
  leaderboard (``instruction_difficulty.csv``, Hugging Face Hub); judgecal estimates it from
  the verdicts in the database (:func:`instruction_difficulty`: a joint logistic model of every
  model's verdicts with a per-model intercept and length slope and a ridge-penalised
  per-instruction effect).
- the gamed baselines' verdicts: AlpacaEval downloads them (``df_gamed.csv``); judgecal uses
  the judge's verdicts on ``<baseline>_verbose`` / ``<baseline>_concise`` when they are in the
  database, else soft verdicts predicted from AlpacaEval's published GLM weights of those two
  models (``length_controlled_v1/baseline_<baseline>.csv``) when given, else no regularisation
  (reported).
Everything is pure numpy/scipy (no scikit-learn, no patsy, no download).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize
from scipy.special import expit, log_expit

#: The C grid of scikit-learn's LogisticRegressionCV (Cs=10), as AlpacaEval uses it.
C_GRID = np.logspace(-4, 4, 10)
#: Strength of the regularisation towards the gamed baselines (AlpacaEval length_controlled_v1).
GAMED_LAMBDA = 0.2
#: Ridge penalty of the per-instruction effects in :func:`instruction_difficulty`.
DIFFICULTY_RIDGE = 0.1


def std_delta_len(len_model, len_baseline) -> np.ndarray:
    """tanh((len_b - len_m) / std) as AlpacaEval's GLM uses it, shape (n,).

    Lengths in characters (Python ``len``, code points, as pandas ``str.len``); the standard
    deviation is the sample one (ddof = 1) over the n verdicts of this model; a zero spread
    gives 0 everywhere."""
    d = np.asarray(len_baseline, dtype=float) - np.asarray(len_model, dtype=float)
    sd = d.std(ddof=1) if d.size > 1 else 0.0
    return np.tanh(d / sd) if sd > 0 else np.zeros_like(d)


def instruction_difficulty(item, model, pref, tanh_len, n_items: int, n_models: int,
                           ridge: float = DIFFICULTY_RIDGE) -> np.ndarray:
    """Per-instruction difficulty estimated from every model's verdicts against one baseline.

    Model: logit P(model m preferred on x) = a_m + b_m * tanh_len + d_x, with a ridge penalty
    ``ridge/2 * ||d||^2``; fitted by L-BFGS on the soft-label log-loss. Returns d (shape
    (n_items,), centred to mean 0, logit units; larger = easier for the models than for the
    baseline). Instructions without a verdict get 0.

    Args: item, model: int codes, shape (n,); pref: shape (n,) in [0, 1]; tanh_len: shape (n,)
    the models' tanh(std_delta_len)."""
    item, model = np.asarray(item, dtype=int), np.asarray(model, dtype=int)
    p, t = np.asarray(pref, dtype=float), np.asarray(tanh_len, dtype=float)
    M, N = n_models, n_items

    def f(th):
        a, b, d = th[:M], th[M:2 * M], th[2 * M:]
        z = a[model] + b[model] * t + d[item]
        r = p - expit(z)
        loss = -(p * log_expit(z) + (1 - p) * log_expit(-z)).sum() + 0.5 * ridge * (d @ d)
        grad = np.concatenate([-np.bincount(model, r, M), -np.bincount(model, r * t, M),
                               -np.bincount(item, r, N) + ridge * d])
        return loss, grad

    res = minimize(f, np.zeros(2 * M + N), jac=True, method="L-BFGS-B", options={"maxiter": 2000})
    d = res.x[2 * M:]
    seen = np.bincount(item, minlength=N) > 0
    d = np.where(seen, d - d[seen].mean(), 0.0)
    return d


def _fit_l1(X, y, s, C: float | None, w0=None) -> np.ndarray:
    """min ||w||_1 + C * sum s_i * logloss(y_i, X_i w) (C None: no penalty), w via w = u - v;
    ``w0`` warm-starts the solver (the C path)."""
    k = X.shape[1]

    def f(uv):
        w = uv[:k] - uv[k:]
        z = X @ w
        r = s * (y - expit(z))
        loss = -(s * (y * log_expit(z) + (1 - y) * log_expit(-z))).sum()
        g = -(X.T @ r)
        if C is None:
            return loss, np.concatenate([g, -g])
        return C * loss + uv.sum(), np.concatenate([C * g + 1, -C * g + 1])

    x0 = np.zeros(2 * k) if w0 is None else np.concatenate([np.maximum(w0, 0), np.maximum(-w0, 0)])
    res = minimize(f, x0, jac=True, method="L-BFGS-B", bounds=[(0, None)] * (2 * k))
    return res.x[:k] - res.x[k:]


def _logloss(X, y, s, w) -> float:
    z = X @ w
    return float(-(s * (y * log_expit(z) + (1 - y) * log_expit(-z))).sum() / max(s.sum(), 1e-12))


@dataclass
class LcFit:
    """A fitted length-controlled GLM: weights (w_len, w_diff, w_bias), the chosen C, the
    per-instruction predicted preference at zero length difference (``p_lc``, shape (n,)) and
    the LC win rate in percent."""

    w_len: float
    w_diff: float
    w_bias: float
    C: float | None
    p_lc: np.ndarray
    lc_win_rate: float
    regularised: bool


def fit_lc(pref, tanh_len, difficulty, gamed: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = (),
           lam: float = GAMED_LAMBDA, folds: int = 5, cv: bool = True) -> LcFit:
    """Fit AlpacaEval's length_controlled_v1 GLM for one model (see the module docstring).

    Args:
        pref: shape (n,) the model's soft preferences in [0, 1] (NaN rows left out of the fit).
        tanh_len: shape (n,) tanh(std_delta_len) of those verdicts (:func:`std_delta_len`).
        difficulty: shape (n,) the instruction difficulty of each verdict's instruction.
        gamed: per gamed baseline, (pref, tanh_len, difficulty) arrays of its verdicts against
            the baseline; weighted ``lam / len(gamed)`` each with not_gamed_baseline = 0.
        folds: cross-validation folds for C (grouped by row = instruction); cv False fits
            without penalty.
    Returns: :class:`LcFit`; ``p_lc`` covers all n rows (NaN preferences included).
    Source: alpaca_eval ``metrics/glm_winrate.py`` (``get_length_controlled_winrate``)."""
    pref = np.asarray(pref, dtype=float)
    t = np.asarray(tanh_len, dtype=float)
    d = np.asarray(difficulty, dtype=float)
    ok = np.isfinite(pref)
    X = [np.stack([t[ok], d[ok], np.ones(ok.sum())], 1)]
    y = [pref[ok]]
    s = [np.ones(ok.sum())]
    groups = [np.arange(ok.sum())]
    for gp, gt, gd in gamed:
        gp, gt, gd = (np.asarray(v, dtype=float) for v in (gp, gt, gd))
        gok = np.isfinite(gp)
        X.append(np.stack([gt[gok], gd[gok], np.zeros(gok.sum())], 1))
        y.append(gp[gok])
        s.append(np.full(gok.sum(), lam / len(gamed)))
        groups.append(np.arange(gok.sum()))
    X, y, s, grp = np.concatenate(X), np.concatenate(y), np.concatenate(s), np.concatenate(groups)
    best_C = None
    if cv and ok.sum() >= folds * 2:
        fold = grp % folds
        scores = np.zeros(len(C_GRID))
        for k in range(folds):
            tr, te = fold != k, fold == k
            w = None
            for j, C in enumerate(C_GRID):  # the regularisation path, warm-started
                w = _fit_l1(X[tr], y[tr], s[tr], C, w)
                scores[j] += _logloss(X[te], y[te], s[te], w)
        best_C = float(C_GRID[int(np.argmin(scores))])
    w = _fit_l1(X, y, s, best_C)
    p_lc = expit(w[1] * d + w[2])
    # AlpacaEval averages the prediction over every row of the model, verdict or not
    return LcFit(float(w[0]), float(w[1]), float(w[2]), best_C, p_lc, float(100 * p_lc.mean()) if p_lc.size else float("nan"),
                 bool(gamed))


def gamed_from_weights(tanh_len, difficulty, weights: tuple[float, float, float]) -> np.ndarray:
    """Soft verdicts of a gamed baseline predicted from its published GLM weights
    (w_len, w_diff, w_bias): logistic(w_len * tanh_len + w_diff * difficulty + w_bias), shape (n,).

    Used when the judge's own verdicts on ``<baseline>_verbose`` / ``_concise`` are not in the
    database (AlpacaEval downloads them)."""
    t, d = np.asarray(tanh_len, dtype=float), np.asarray(difficulty, dtype=float)
    return expit(weights[0] * t + weights[1] * d + weights[2])


# ---------------------------------------------------------------- many models at once
#: Convergence of the batched solver: a proximal Newton step whose predicted decrease of the
#: objective is below this (in log-loss units) ends that problem's iterations.
BATCH_TOL = 1e-8
BATCH_MAX_ITER = 100



class _Scratch:
    """Work arrays reused from one evaluation to the next: a fresh array of a million floats
    costs its page faults, more than the pass that fills it. ``get(name, shape)`` is a view of
    a flat buffer grown as needed (contents undefined)."""

    def __init__(self):
        self._flat: dict[str, np.ndarray] = {}

    def get(self, name: str, shape: tuple[int, int]) -> np.ndarray:
        size = shape[0] * shape[1]
        buf = self._flat.get(name)
        if buf is None or buf.size < size:
            buf = self._flat[name] = np.empty(size)
        return buf[:size].reshape(shape)


def _logistic_parts(z, y, work: _Scratch, tag: str):
    """(p - y, p (1 - p), log-loss) of logits ``z`` (P, n) against soft labels ``y`` (broadcast
    to (P, n)), elementwise and stable for any |z|: with e = exp(-|z|) and q = 1 / (1 + e),
    p = logistic(z) is q where z >= 0 and e q below (1 - p the other one), p (1 - p) = q e q,
    loss = max(z, 0) + log1p(e) - y z (nats). The side is chosen by arithmetic,
    q * [z >= 0] + e q * [z < 0] (exact: one term is 0), not by ``np.where``, whose branches
    cost more than the rest on logits of mixed signs. The three results are arrays of ``work``
    (names starting with ``tag``), valid until its next use."""
    e, q, eq = work.get(tag + "e", z.shape), work.get(tag + "q", z.shape), work.get(tag + "eq", z.shape)
    pp, up, p = work.get(tag + "pp", z.shape), work.get(tag + "up", z.shape), work.get(tag + "p", z.shape)
    np.abs(z, out=e)
    np.negative(e, out=e)
    np.exp(e, out=e)
    np.add(e, 1.0, out=q)
    np.divide(1.0, q, out=q)
    np.multiply(e, q, out=eq)
    np.multiply(q, eq, out=pp)
    np.greater_equal(z, 0.0, out=up)  # 1.0 where z >= 0, 0.0 below
    np.multiply(q, up, out=p)
    np.subtract(1.0, up, out=up)
    up *= eq
    p += up
    p -= y
    np.log1p(e, out=e)
    ell = np.maximum(z, 0.0, out=eq)
    ell += e
    np.multiply(y, z, out=up)
    ell -= up
    return p, pp, ell


class _Rows:
    """The rows of P independent weighted soft-label logistic problems with 3 features
    (tanh length, difficulty, not-gamed indicator): each problem's own rows (``T``, ``D``,
    ``Y``, weights ``S``, shape (P, n); the indicator is 1 on them, padding rows have weight 0)
    plus a block of rows shared by every problem (``gT``, ``gD``, ``gY`` shape (g,): the gamed
    baselines, indicator 0) with per-problem weights ``gS`` (P, g)."""

    def __init__(self, T, D, Y, S, gT, gD, gY, gS, work: _Scratch | None = None):
        self.T, self.D, self.Y, self.S = T, D, Y, S
        self.gX = np.stack([gT, gD], 1)  # (g, 2)
        self.gY, self.gS = gY, gS
        self.gXX = np.stack([gT * gT, gT * gD, gD * gD], 1)
        self.work = _Scratch() if work is None else work

    def take(self, idx):
        return _Rows(self.T[idx], self.D[idx], self.Y[idx], self.S[idx], self.gX[:, 0], self.gX[:, 1], self.gY, self.gS[idx],
                     self.work)

    def loss(self, w, S=None, gS=None):
        """Weighted log-loss sum per problem, shape (P,); ``S``/``gS`` replace the weights."""
        S = self.S if S is None else S
        gS = self.gS if gS is None else gS
        z = self.T * w[:, :1] + self.D * w[:, 1:2] + w[:, 2:3]
        zg = w[:, :2] @ self.gX.T
        return (S * (np.logaddexp(0.0, z) - self.Y * z)).sum(1) + (gS * (np.logaddexp(0.0, zg) - self.gY * zg)).sum(1)

    def evaluate(self, w, test=None):
        """(loss (P,), gradient (P, 3), Hessian (P, 3, 3)) at ``w`` (P, 3), from one pass; with
        ``test`` = (S, gS) other weights, also the loss under those weights (P,) (held-out rows)."""
        out_f = np.zeros(len(w))
        out_t = np.zeros(len(w))
        g = np.zeros((len(w), 3))
        H = np.zeros((len(w), 3, 3))
        work = self.work
        z, zd = work.get("z", self.T.shape), work.get("zd", self.T.shape)
        np.multiply(self.T, w[:, :1], out=z)
        z += np.multiply(self.D, w[:, 1:2], out=zd)
        z += w[:, 2:3]
        r, h, ell = _logistic_parts(z, self.Y, work, "")
        out_f += np.einsum("pn,pn->p", self.S, ell)
        if test is not None:
            out_t += np.einsum("pn,pn->p", test[0], ell)
        r *= self.S  # S (p - Y)
        h *= self.S  # S p (1 - p)
        ht = np.multiply(h, self.T, out=ell)
        g[:, 0] = np.einsum("pn,pn->p", r, self.T)
        g[:, 1] = np.einsum("pn,pn->p", r, self.D)
        g[:, 2] = r.sum(1)
        H[:, 0, 0] = np.einsum("pn,pn->p", ht, self.T)
        H[:, 0, 1] = np.einsum("pn,pn->p", ht, self.D)
        H[:, 0, 2] = ht.sum(1)
        H[:, 1, 1] = np.einsum("pn,pn->p", np.multiply(h, self.D, out=z), self.D)
        H[:, 1, 2] = np.einsum("pn,pn->p", h, self.D)
        H[:, 2, 2] = h.sum(1)
        if self.gY.size:
            zg = np.matmul(w[:, :2], self.gX.T, out=work.get("zg", self.gS.shape))
            rg, hg, ellg = _logistic_parts(zg, self.gY, work, "g")
            out_f += np.einsum("pn,pn->p", self.gS, ellg)
            if test is not None:
                out_t += np.einsum("pn,pn->p", test[1], ellg)
            rg *= self.gS
            hg *= self.gS
            g[:, :2] += rg @ self.gX
            hh = hg @ self.gXX
            H[:, 0, 0] += hh[:, 0]
            H[:, 0, 1] += hh[:, 1]
            H[:, 1, 1] += hh[:, 2]
        H[:, 1, 0], H[:, 2, 0], H[:, 2, 1] = H[:, 0, 1], H[:, 0, 2], H[:, 1, 2]
        return (out_f, g, H) if test is None else (out_f, g, H, out_t)


def _prox_newton(rows: _Rows, alpha, w0, tol: float = BATCH_TOL, max_iter: int = BATCH_MAX_ITER, state=None,
                 test=None):
    """Minimise ``loss_p(w) + alpha_p * ||w||_1`` for every problem p at once (proximal Newton:
    the L1-penalised quadratic model solved exactly by coordinate descent on its 3 coordinates,
    then a backtracking line search). ``alpha`` shape (P,) (0 = no penalty); ``w0`` (P, 3) the
    warm start; ``state`` its (loss, gradient, Hessian[, held-out loss]) when known (the loss
    part does not depend on alpha: a warm start along a C path reuses it); ``test`` held-out
    weights (S, gS) whose loss is tracked too. Returns (solutions (P, 3), state at them)."""
    w = np.array(w0, dtype=float)
    alpha = np.asarray(alpha, dtype=float)
    if state is None:
        state = rows.evaluate(w, test)
    loss, g, H = (np.array(x) for x in state[:3])
    held = np.array(state[3]) if test is not None else None
    f = loss + alpha * np.abs(w).sum(1)
    active = np.arange(len(w))
    for _ in range(max_iter):
        if not active.size:
            break
        sub = rows.take(active) if active.size < len(w) else rows
        wa, aa, ga, Ha = w[active], alpha[active], g[active], H[active].copy()
        Ha[:, [0, 1, 2], [0, 1, 2]] += 1e-12
        d = np.zeros_like(wa)
        for _sweep in range(50):  # coordinate descent on the quadratic model (3 coordinates)
            d_old = d.copy()
            for j in range(3):
                a = Ha[:, j, j]
                b = ga[:, j] + np.einsum("pk,pk->p", Ha[:, j, :], d) - a * d[:, j]
                u = wa[:, j] - b / a
                u = np.sign(u) * np.maximum(np.abs(u) - aa / a, 0.0)
                d[:, j] = u - wa[:, j]
            if np.max(np.abs(d - d_old), initial=0.0) < 1e-14:
                break
        decrease = np.einsum("pk,pk->p", ga, d) + aa * (np.abs(wa + d).sum(1) - np.abs(wa).sum(1))
        converged = decrease > -tol
        fa = f[active]
        step = np.ones(len(wa))
        todo = np.flatnonzero(~converged)
        for _ls in range(40):  # backtracking (Armijo) on the problems whose step is not yet accepted
            if not todo.size:
                break
            cand = wa[todo] + step[todo, None] * d[todo]
            sel = todo if todo.size < len(w) else slice(None)
            tt = None if test is None else (test[0][active[sel]], test[1][active[sel]])
            res = (sub.take(todo) if todo.size < len(wa) else sub).evaluate(cand, tt)
            lc_, gc, Hc = res[:3]
            fc = lc_ + aa[todo] * np.abs(cand).sum(1)
            ok = fc <= fa[todo] + 1e-4 * step[todo] * decrease[todo] + 1e-13 * np.abs(fa[todo])
            idx = active[todo[ok]]
            w[idx], f[idx], loss[idx], g[idx], H[idx] = cand[ok], fc[ok], lc_[ok], gc[ok], Hc[ok]
            if test is not None:
                held[idx] = res[3][ok]
            todo = todo[~ok]
            step[todo] *= 0.5
        converged[todo] = True  # no decrease found: at the optimum to rounding
        active = active[~converged]
    return w, ((loss, g, H) if test is None else (loss, g, H, held))


def fit_lc_many(models, gamed=(), lam: float = GAMED_LAMBDA, folds: int = 5, Cs=C_GRID) -> list[LcFit]:
    """:func:`fit_lc` for many models at once, vectorised over models, folds and the C path.

    The same estimator (AlpacaEval's ``length_controlled_v1``: L1-penalised soft-label logistic
    regression without intercept, C chosen from ``Cs`` by ``folds``-fold cross-validation, the
    held-out score the weighted log-loss averaged over the held-out rows as AlpacaEval's scorer
    does, the gamed baselines' verdicts weighted ``lam / len(gamed)`` each), solved for every
    model, fold and C together by a batched proximal Newton method instead of one L-BFGS-B run
    per (model, fold, C). Folds follow AlpacaEval's grouping: the gamed baselines' rows first,
    then the model's, fold = row position modulo ``folds``.

    Args:
        models: per model, (pref, tanh_len, difficulty) arrays of shape (n_m,) (NaN preferences
            are left out of the fit; they get a prediction).
        gamed: per gamed baseline, (pref, tanh_len, difficulty), shared by every model.
    Returns: one :class:`LcFit` per model, in order. A model with fewer than ``2 * folds``
    usable verdicts is fitted without penalty (as :func:`fit_lc`)."""
    g_t, g_d, g_y, g_s = [], [], [], []
    for gp, gt, gd in gamed:
        gp, gt, gd = (np.asarray(v, dtype=float) for v in (gp, gt, gd))
        ok = np.isfinite(gp)
        g_t.append(gt[ok]), g_d.append(gd[ok]), g_y.append(gp[ok]), g_s.append(np.full(ok.sum(), lam / len(gamed)))
    cat = lambda parts: np.concatenate(parts) if parts else np.zeros(0)  # noqa: E731
    gT, gD, gY, gS = cat(g_t), cat(g_d), cat(g_y), cat(g_s)
    ng = gT.size
    M = len(models)
    if M == 0:
        return []
    prefs = [np.asarray(p, dtype=float) for p, _, _ in models]
    oks = [np.isfinite(p) for p in prefs]
    n_max = max(1, max(int(ok.sum()) for ok in oks))
    T, D, Y, S, pos = (np.zeros((M, n_max)) for _ in range(5))
    for i, ((_, t, d), p, ok) in enumerate(zip(models, prefs, oks)):
        k = int(ok.sum())
        T[i, :k], D[i, :k], Y[i, :k], S[i, :k] = np.asarray(t, float)[ok], np.asarray(d, float)[ok], p[ok], 1.0
        pos[i, :k] = ng + np.arange(k)
    n_ok = S.sum(1)
    g_fold = np.arange(ng) % folds
    m_fold = pos % folds
    Cs = np.asarray(Cs, dtype=float)
    cv = n_ok >= 2 * folds
    best_C = np.full(M, np.nan)
    w_cv = np.zeros((M, 3))
    if cv.any() and len(Cs):
        mi = np.flatnonzero(cv)
        P = mi.size * folds
        pm = np.repeat(mi, folds)
        pk = np.tile(np.arange(folds), mi.size)
        train = (m_fold[pm] != pk[:, None]) * S[pm]
        g_train = (g_fold[None, :] != pk[:, None]) * gS[None, :]
        rows = _Rows(T[pm], D[pm], Y[pm], train, gT, gD, gY, g_train)
        test = ((m_fold[pm] == pk[:, None]) * S[pm], (g_fold[None, :] == pk[:, None]) * gS[None, :])
        n_test = (test[0] > 0).sum(1) + (test[1] > 0).sum(1)
        scores = np.zeros((mi.size, len(Cs)))
        sols = np.zeros((len(Cs), P, 3))
        w, state = np.zeros((P, 3)), None
        for j, C in enumerate(Cs):  # the regularisation path, each C warm-started from the previous one
            w, state = _prox_newton(rows, np.full(P, 1.0 / C), w, state=state, test=test)
            sols[j] = w
            scores[:, j] = (state[3] / np.maximum(n_test, 1)).reshape(mi.size, folds).sum(1)
        jb = np.argmin(scores, axis=1)  # the first of equal scores, as scikit-learn's argmax
        best_C[mi] = Cs[jb]
        w_cv[mi] = sols[jb[:, None], (np.arange(mi.size) * folds)[:, None] + np.arange(folds)].mean(1)
    alpha = np.where(np.isfinite(best_C), 1.0 / np.where(np.isfinite(best_C), best_C, 1.0), 0.0)
    rows = _Rows(T, D, Y, S, gT, gD, gY, np.broadcast_to(gS, (M, ng)))
    W, _ = _prox_newton(rows, alpha, w_cv)
    out = []
    for i, (_, _, d) in enumerate(models):
        d = np.asarray(d, dtype=float)
        p_lc = expit(W[i, 1] * d + W[i, 2])
        out.append(LcFit(float(W[i, 0]), float(W[i, 1]), float(W[i, 2]), None if np.isnan(best_C[i]) else float(best_C[i]),
                         p_lc, float(100 * p_lc.mean()) if p_lc.size else float("nan"), bool(len(gamed))))
    return out


def difficulty_from_weights(item, model, pref, tanh_len, weights, n_items: int, ridge: float = 0.01) -> np.ndarray:
    """Per-instruction difficulty that best explains verdicts whose models' GLM weights are known.

    With each model's (w_len, w_diff, w_bias) held fixed (AlpacaEval's published
    ``length_controlled_v1`` weights), d_x maximises the soft-label log-likelihood of every
    verdict on instruction x under ``logit P = w_len * tanh_len + w_diff * d_x + w_bias``, with a
    small ridge ``ridge/2 * d_x^2`` (finite d where every verdict is 0 or 1). This is how
    judgecal's packaged AlpacaEval difficulty was computed (benchmarks/make_alpaca_eval_data.py):
    AlpacaEval's own ``instruction_difficulty.csv`` is downloaded by AlpacaEval at run time and
    is not redistributed.

    Args: item, model: int codes shape (n,); pref, tanh_len shape (n,); weights shape (M, 3)
    per model code. Returns shape (n_items,) (0 for instructions without a verdict)."""
    item, model = np.asarray(item, dtype=int), np.asarray(model, dtype=int)
    y, t = np.asarray(pref, dtype=float), np.asarray(tanh_len, dtype=float)
    W = np.asarray(weights, dtype=float)
    a, b = W[model, 0] * t + W[model, 2], W[model, 1]

    def f(d):
        z = a + b * d[item]
        r = y - expit(z)
        loss = -(y * log_expit(z) + (1 - y) * log_expit(-z)).sum() + 0.5 * ridge * (d @ d)
        return loss, -np.bincount(item, r * b, n_items) + ridge * d

    return minimize(f, np.zeros(n_items), jac=True, method="L-BFGS-B", options={"maxiter": 5000}).x
