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
