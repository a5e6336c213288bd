"""The length- and style-controlled GLM: a pointwise judge's calibration candidate beyond length.

``lc_glm_style`` (pairs only) extends AlpacaEval 2.0's length-controlled GLM
(:class:`judgecal.calibrate.baselines.LcGlm`, Dubois et al. 2024) with Arena-Hard-Auto's
Markdown style covariates (lmarena/arena-hard-auto ``show_result.py``, the style features of
:mod:`judgecal.calibrate.stylecontrol`), fitted on expert-labelled pairs by maximum likelihood
(ties count half)::

    P(a preferred) = sigmoid(theta * (S_a - S_b) + phi * tanh((L_a - L_b) / sd)
                             + sum_k gamma_k * (x_k - mean_k) / sd_k)

``S`` the judge's scores, ``L`` the lengths in the candidate's unit, ``sd`` the population
standard deviation of ``L_a - L_b`` over the training pairs (as ``lc_glm``), and ``x_k`` for
k in headers, lists, bold Arena-Hard-Auto's density difference ``(d_a - d_b) / (d_a + d_b + 1)``
with ``d = count / L`` (:func:`judgecal.calibrate.stylecontrol.raw_features`; an empty answer's
density is 0), standardised with the training pairs' mean and sample standard deviation. A
column constant over the training pairs (no answer has a header, say) is left out of the fit
and named in ``params["left_out"]``. Bounds (L-BFGS-B): theta in +-1000 / scale width, phi in
+-50 (as ``lc_glm``), each gamma in +-:data:`MAX_GAMMA` log-odds per sd
(:data:`judgecal.calibrate.stylecontrol.MAX_PER_SD`: beyond it a covariate separates the
outcomes and has no finite maximum); a coefficient at its bound is named in
``params["at_bound"]``.

It is one candidate of the nested selection (:mod:`judgecal.calibrate.select`) of a family whose
answers carry Markdown counts: recommended only when its own out-of-sample gain over raw has a
95% CI above zero and its judge weight theta is not negative, like every candidate. It has no
per-response calibrated score: a board never applies it (``published_column``: raw, with the
advice naming it)."""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import minimize

from judgecal.calibrate import stylecontrol as sc
from judgecal.calibrate.baselines import FitContext, Fitted, _Method
from judgecal.calibrate.data import PairData
from judgecal.calibrate.fit import single_threaded_blas
from judgecal.errors import FitError, UsageError

#: the Markdown covariates, in :data:`judgecal.calibrate.stylecontrol.FEATURES` order
MARKDOWN = sc.MARKDOWN
#: the bound of each style coefficient, log-odds per sd
MAX_GAMMA = sc.MAX_PER_SD
#: fewest expert-labelled pairs fitted
MIN_PAIRS = 20


def markdown_columns(train: PairData) -> np.ndarray:
    """Arena-Hard-Auto's Markdown density differences of the pairs, shape (n, 3), unstandardised
    (columns :data:`MARKDOWN`). Raises FitError when the pairs carry no Markdown counts."""
    if train.md_a is None or train.md_b is None:
        raise FitError("lc_glm_style needs the answers' Markdown counts (md_a, md_b)")
    return sc.raw_features(train.len_a, train.len_b, train.md_a, train.md_b)[:, 1:]


class LcGlmStyle(_Method):
    """The length- and style-controlled GLM on pairs (module doc)."""

    name = "lc_glm_style"

    def fit(self, train, ctx: FitContext, start: Fitted | None = None, weights=None) -> Fitted:
        """Fit on ``train`` (:class:`PairData` with ``md_a``/``md_b``), weights (n,) optional row
        multiplicities. Raises UsageError for pointwise data, FitError for fewer than
        :data:`MIN_PAIRS` pairs or no Markdown counts."""
        if not isinstance(train, PairData):
            raise UsageError("lc_glm_style needs pairwise data")
        if train.n < MIN_PAIRS:
            raise FitError(f"too few expert-labelled pairs for lc_glm_style: {train.n} < {MIN_PAIRS}")
        raw_md = markdown_columns(train)
        dl = train.len_a - train.len_b
        sd = float(np.std(dl)) or 1.0
        cols, kept, left = [], [], []
        for j, name in enumerate(MARKDOWN):
            x = raw_md[:, j]
            mean, sdx = float(np.mean(x)), float(np.std(x, ddof=1))
            if not sdx > sc.CONSTANT_SD * max(1.0, abs(mean)) or not math.isfinite(sdx):
                left.append(name)
                continue
            kept.append((x - mean) / sdx)
            cols.append({"feature": name, "mean": mean, "sd": sdx})
        X = np.column_stack([train.score_a - train.score_b, np.tanh(dl / sd)] + kept)
        y = train.outcome
        w = np.full(train.n, 1.0 / train.n) if weights is None else np.asarray(weights, dtype=float) / np.sum(weights)
        width = ctx.scale[1] - ctx.scale[0]
        bounds = [(-1e3 / width, 1e3 / width), (-50.0, 50.0)] + [(-MAX_GAMMA, MAX_GAMMA)] * len(kept)

        def obj(t):
            z = X @ t
            loss = np.dot(w, np.maximum(z, 0.0) + np.log1p(np.exp(-np.abs(z))) - y * z)
            return float(loss), X.T @ (w * (0.5 + 0.5 * np.tanh(0.5 * z) - y))

        x0 = np.zeros(X.shape[1])
        x0[0] = 1.0 / max(float(np.std(X[:, 0])), 1e-9)
        with single_threaded_blas():
            res = minimize(obj, x0, jac=True, method="L-BFGS-B", bounds=bounds,
                           options={"ftol": 1e-12, "gtol": 1e-8, "maxiter": 1000})
        t = res.x
        for c, g in zip(cols, t[2:]):
            c["gamma"] = float(g)
        at_bound = [c["feature"] for c in cols if abs(c["gamma"]) >= MAX_GAMMA * (1 - 1e-6)]
        params = {"theta": float(t[0]), "phi": float(t[1]), "sd": sd, "columns": cols, "left_out": left,
                  "at_bound": at_bound, "loss": float(res.fun), "converged": bool(res.success)}
        return Fitted("lc_glm_style", params, per_response=False, _pair_md=self._predictor(params))

    @staticmethod
    def _predictor(params: dict):
        theta, phi, sd, cols = params["theta"], params["phi"], params["sd"], params["columns"]

        def pair(sa, sb, la, lb, md_a, md_b):
            z = theta * (sa - sb) + phi * np.tanh((la - lb) / sd)
            if cols:
                raw_md = sc.raw_features(la, lb, md_a, md_b)[:, 1:]
                for c in cols:
                    j = MARKDOWN.index(c["feature"])
                    z = z + c["gamma"] * (raw_md[:, j] - c["mean"]) / c["sd"]
            return 0.5 + 0.5 * np.tanh(0.5 * z)

        return pair
