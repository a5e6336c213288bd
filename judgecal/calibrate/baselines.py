"""Calibration methods behind one interface: ``Method.fit(train, ctx) -> Fitted``.

``fit(train, ctx, start=None, weights=None)``: ``start`` is a previous fit to start from (the
full-data optimum, for bootstrap and CV refits), ``weights`` (n,) are row multiplicities (a
bootstrap resample without copying the data). ``fit_batch(train, ctx, W, start)`` refits once per
row of W (B, n) and returns a list of Fitted (None where the fit failed); linear and lc_glm do it
for all rows at once by damped Newton (:func:`judgecal.calibrate.fit.batch_logistic`), falling
back to the L-BFGS-B fit for the rows where the Newton optimum leaves the bounds.

A :class:`Fitted` exposes ``calibrate(score, length, density=None)`` (per-response calibrated
scores; None for pair-only methods) and ``predict_pair(score_a, score_b, len_a, len_b, ...)``
(P(a is preferred) in [0, 1]; score-based methods return the hard order 1 / 0.5 / 0 of their
calibrated scores), plus ``params`` (a JSON-serialisable dict).

Methods (source and formula; details in docs/calibration.md):

* ``raw``: identity, S_calib = S.
* ``linear``: ``clip(S - gamma * (L - L_ref) / L_ref, min, max)``, gamma >= 0 fitted like the
  seed formula, clip inside the objective (the seed article's linear-penalty baseline).
* ``polylog``: the seed formula (DESIGN.md), fitted by :mod:`judgecal.calibrate.fit`, with the
  short-side floor of ``FitContext.short_floor`` (default 1/4: an answer shorter than a quarter
  of L_ref earns no more credit than one at a quarter; None: the seed's unbounded short side).
* ``lowess``: Huang et al., "Post-hoc Reward Calibration: A Case Study on Length Bias", ICLR
  2025: ``S_calib = S - g(ln L) + mean_train(g(ln L))`` where g is the LOWESS fit of score on
  ln(max(L, 1)) over the training responses (statsmodels.nonparametric.lowess, frac=2/3, it=3),
  applied out of sample by linear interpolation of the fitted curve (constant beyond its ends).
  Unsupervised (uses no expert label); not clipped, so the mean score is unchanged in-sample.
* ``lc_glm`` (pairs only): AlpacaEval 2.0 length-controlled GLM (Dubois et al. 2024,
  "Length-Controlled AlpacaEval"): ``P(a beats b) = sigmoid(theta*(S_a - S_b) + phi*tanh((L_a -
  L_b)/sd))``, sd = standard deviation of L_a - L_b in training, fitted on the expert outcomes
  by maximum likelihood (ties half). ``predict_pair(..., length_term=False)`` removes the length
  term as AlpacaEval does; evaluation uses ``length_term=True`` (see docs/calibration.md: fitted
  on expert outcomes, the length term is the correction, and without it the ordering of every
  pair equals the raw judge's).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import minimize
from statsmodels.nonparametric.smoothers_lowess import lowess as sm_lowess

from judgecal.calibrate.data import PairData, PointData
from judgecal.calibrate.fit import (
    FitResult,
    batch_logistic,
    fit_pairwise,
    fit_pointwise,
    map_expert_scale,
    single_threaded_blas,
)
from judgecal.calibrate.metrics import order_credit
from judgecal.calibrate.penalty import DEFAULT_SHORT_FLOOR, LENGTH_FLOOR, density_multiplier, polylog_penalty
from judgecal.errors import FitError, UsageError


@dataclass(frozen=True)
class FitContext:
    """Settings shared by every method of one evaluation.

    ``scale``: the judge's (min, max); ``expert_scale``: pointwise experts' (min, max);
    ``density``: use the density exemption in ``polylog`` (needs densities in the data);
    ``density_w``: its weight w; ``starts``: starting points of the L-BFGS-B fits;
    ``signed``: gamma may be negative (linear and polylog); ``gamma_max``: bound of |gamma|
    (None: 10 x the scale width); ``clip``: the clip to the scale inside the objective (True:
    the fitted function is the reported one); ``short_floor``: the short-side floor of polylog
    (:data:`judgecal.calibrate.penalty.DEFAULT_SHORT_FLOOR`; None: no floor)."""

    l_ref: float
    scale: tuple[float, float]
    p_bounds: tuple[float, float] = (1.0, 1.5)
    expert_scale: tuple[float, float] | None = None
    density: bool = False
    density_w: float = 0.5
    starts: int = 8
    lowess_frac: float = 2.0 / 3.0
    signed: bool = False
    gamma_max: float | None = None
    clip: bool = True
    short_floor: float | None = DEFAULT_SHORT_FLOOR

    @property
    def bounded(self) -> bool:
        """True when the judge's scale has a finite end (the clip does something)."""
        return bool(np.isfinite(self.scale[0]) or np.isfinite(self.scale[1]))


@dataclass(frozen=True)
class Fitted:
    """A fitted method. ``fit`` is the FitResult of penalty methods (None otherwise)."""

    name: str
    params: dict
    fit: FitResult | None = None
    per_response: bool = True
    _apply: object = field(default=None, repr=False)
    _pair: object = field(default=None, repr=False)
    #: pair methods that read the answers' Markdown counts too (lc_glm_style: judgecal.calibrate.lc_style)
    _pair_md: object = field(default=None, repr=False)

    def calibrate(self, score, length, density=None) -> np.ndarray | None:
        """Calibrated scores, shape (n,); None for pair-only methods (lc_glm)."""
        if not self.per_response:
            return None
        return self._apply(np.asarray(score, dtype=float), np.asarray(length, dtype=float), density)

    def predict_pair(self, score_a, score_b, len_a, len_b, density_a=None, density_b=None,
                     *, length_term: bool = True, md_a=None, md_b=None) -> np.ndarray:
        """P(a preferred), shape (n,). Score methods: 1 / 0.5 / 0 from calibrated scores.
        ``md_a``/``md_b`` (n, 3): the answers' Markdown counts, read by the methods that need them
        (``lc_glm_style``; UsageError without them)."""
        if self._pair_md is not None:
            if md_a is None or md_b is None:
                raise UsageError(f"{self.name} needs the answers' Markdown counts")
            return self._pair_md(np.asarray(score_a, dtype=float), np.asarray(score_b, dtype=float),
                                 np.asarray(len_a, dtype=float), np.asarray(len_b, dtype=float),
                                 np.asarray(md_a, dtype=float), np.asarray(md_b, dtype=float))
        if self._pair is not None:
            return self._pair(np.asarray(score_a, dtype=float), np.asarray(score_b, dtype=float),
                              np.asarray(len_a, dtype=float), np.asarray(len_b, dtype=float),
                              length_term)
        return order_credit(self.calibrate(score_a, len_a, density_a),
                            self.calibrate(score_b, len_b, density_b))


def _responses(train):
    """(scores, lengths, densities) of every response in the training data (pairs: a and b)."""
    if isinstance(train, PairData):
        dens = None
        if train.density_a is not None and train.density_b is not None:
            dens = np.concatenate([train.density_a, train.density_b])
        return (np.concatenate([train.score_a, train.score_b]),
                np.concatenate([train.len_a, train.len_b]), dens)
    return train.score, train.length, train.density


def _weighted_median(values, weights=None) -> float:
    if weights is None:
        return float(np.median(values))
    order = np.argsort(values)
    cw = np.cumsum(np.asarray(weights, dtype=float)[order])
    return float(values[order][np.searchsorted(cw, 0.5 * cw[-1])])


class _Method:
    name = "?"

    def fit(self, train, ctx: FitContext, start: Fitted | None = None, weights=None) -> Fitted:
        raise NotImplementedError

    def fit_batch(self, train, ctx: FitContext, W, start: Fitted | None = None) -> list:
        """One refit per row of W (B, n); None where a FitError occurred."""
        out = []
        for w in W:
            try:
                out.append(self.fit(train, ctx, start=start, weights=w))
            except FitError:
                out.append(None)
        return out


class Raw(_Method):
    """Identity: the raw judge score (the baseline every method must beat)."""

    name = "raw"

    def fit(self, train, ctx: FitContext, start: Fitted | None = None, weights=None) -> Fitted:
        return Fitted("raw", {}, _apply=lambda s, le, d: s.copy())

    def fit_batch(self, train, ctx, W, start=None) -> list:
        one = self.fit(train, ctx)
        return [one] * len(W)


def _penalty_fitted(name, penalty, res: FitResult, ctx: FitContext, dparams=None) -> Fitted:
    lo, hi = ctx.scale
    l_ref, gamma, p = ctx.l_ref, res.gamma, res.p
    floor = res.short_floor if penalty == "polylog" else None

    def apply(s, le, d):
        if penalty == "linear":
            pen = gamma * (le - l_ref) / l_ref
        else:
            pen = polylog_penalty(le, l_ref, gamma, p, signed=True, floor=floor)
            if dparams is not None:
                if d is None:
                    raise UsageError("the density exemption needs a density per response")
                pen = pen * density_multiplier(le, l_ref, d, dparams)
        return np.clip(s - pen, lo, hi)

    params = {"gamma": gamma, "p": p, "l_ref": l_ref, "bt_scale": res.bt_scale, "signed": bool(ctx.signed),
              "gamma_max": ctx.gamma_max, "p_bounds": list(ctx.p_bounds)}
    if penalty == "polylog":
        params["short_floor"] = floor
        params["other_optima"] = list(res.other_optima)  # other starts' optima that fit as well (identification)
    if dparams is not None:
        params["density"] = dparams
    return Fitted(name, params, fit=res, _apply=apply)


class _PenaltyMethod(_Method):
    penalty = "polylog"
    name = "polylog"

    def fit(self, train, ctx: FitContext, start: Fitted | None = None, weights=None) -> Fitted:
        l_ref = ctx.l_ref
        use_density = ctx.density and self.penalty == "polylog"
        dparams = None
        mult_a = mult_b = mult = None
        if use_density:
            _, _, dens = _responses(train)
            if dens is None:
                raise UsageError("the density exemption needs a density (entropy) per response")
            wr = None if weights is None else np.concatenate([weights, weights]) \
                if isinstance(train, PairData) else weights
            dparams = {"h_ref": max(_weighted_median(dens, wr), 1e-9), "w": float(ctx.density_w)}
        starts = ctx.starts
        if isinstance(train, PairData):
            if use_density:
                mult_a = density_multiplier(train.len_a, l_ref, train.density_a, dparams)
                mult_b = density_multiplier(train.len_b, l_ref, train.density_b, dparams)
            if start is not None and start.fit is not None:
                starts = [(start.fit.gamma, start.fit.p, start.fit.bt_scale)]
            res = fit_pairwise(train.score_a, train.score_b, train.len_a, train.len_b, train.outcome,
                               l_ref=l_ref, scale=ctx.scale, p_bounds=ctx.p_bounds, starts=starts,
                               mult_a=mult_a, mult_b=mult_b, penalty=self.penalty, weights=weights,
                               clip=ctx.clip, signed=ctx.signed, gamma_max=ctx.gamma_max,
                               floor=ctx.short_floor if self.penalty == "polylog" else None)
        else:
            if ctx.expert_scale is None:
                raise UsageError("pointwise fits need the experts' scale (expert_scale)")
            if use_density:
                mult = density_multiplier(train.length, l_ref, train.density, dparams)
            if start is not None and start.fit is not None:
                starts = [(start.fit.gamma, start.fit.p)]
            res = fit_pointwise(train.score, train.length, train.expert, expert_scale=ctx.expert_scale,
                                judge_scale=ctx.scale, l_ref=l_ref, p_bounds=ctx.p_bounds,
                                starts=starts, mult=mult, penalty=self.penalty, weights=weights,
                                clip=ctx.clip, signed=ctx.signed, gamma_max=ctx.gamma_max,
                                floor=ctx.short_floor if self.penalty == "polylog" else None)
        return _penalty_fitted(self.name, self.penalty, res, ctx, dparams)


class Linear(_PenaltyMethod):
    """Linear length penalty ``clip(S - gamma (L - L_ref)/L_ref)`` (seed article's baseline)."""

    penalty = "linear"
    name = "linear"

    def fit_batch(self, train, ctx, W, start=None) -> list:
        """Pairs: z = s*dS - s*gamma*dF is logistic in beta = (s, s*gamma >= 0): batch Newton.
        Pointwise: the weighted least-squares gamma = max(0, sum w f (S - E') / sum w f^2).
        Both shortcuts hold only for the unclipped, gamma >= 0 objective with the default bound;
        otherwise every row is refitted with L-BFGS-B from the full-data optimum."""
        if (ctx.clip and ctx.bounded) or ctx.signed or ctx.gamma_max is not None:
            return super().fit_batch(train, ctx, W, start)
        if isinstance(train, PointData) and ctx.expert_scale is not None and train.n >= 10:
            f = (train.length - ctx.l_ref) / ctx.l_ref
            t = map_expert_scale(train.expert, ctx.expert_scale, ctx.scale)
            Wn = np.asarray(W, dtype=float)
            den = Wn @ (f * f)
            gam = np.where(den > 0, np.maximum(0.0, Wn @ (f * (train.score - t)) / np.where(den > 0, den, 1)), 0.0)
            g_hi = 10.0 * (ctx.scale[1] - ctx.scale[0])
            gam = np.minimum(gam, g_hi)
            out = []
            for b, g in enumerate(gam):
                r = train.score - g * f - t
                loss = float(Wn[b] @ (r * r) / Wn[b].sum())
                at = {"gamma": "lower" if g == 0 else ("upper" if g == g_hi else None), "p": None,
                      "bt_scale": None}
                res = FitResult(float(g), 1.0, ctx.l_ref, None, loss, train.n, True, at, "closed form")
                out.append(_penalty_fitted(self.name, "linear", res, ctx))
            return out
        if not isinstance(train, PairData) or start is None or start.fit is None or train.n < 10:
            return super().fit_batch(train, ctx, W, start)
        l_ref = ctx.l_ref
        width = ctx.scale[1] - ctx.scale[0]
        dF = (train.len_a - train.len_b) / l_ref
        s0, g0 = start.fit.bt_scale, start.fit.gamma
        beta, loss, conv = batch_logistic(train.score_a - train.score_b, -dF, train.outcome, W,
                                          [s0, s0 * g0], nonneg_second=True)
        out = []
        for b in range(len(W)):
            s, c = beta[b]
            gamma = c / s if s > 0 else np.inf
            ok = conv[b] and 1e-3 / width < s < 1e3 / width and gamma <= 10.0 * width
            if not ok:  # outside the L-BFGS-B bounds: refit exactly
                try:
                    out.append(self.fit(train, ctx, start=start, weights=W[b]))
                except FitError:
                    out.append(None)
                continue
            at = {"gamma": "lower" if c == 0 else None, "p": None, "bt_scale": None}
            res = FitResult(float(gamma), 1.0, l_ref, float(s), float(loss[b]), train.n, True, at,
                            "batch Newton")
            out.append(_penalty_fitted(self.name, "linear", res, ctx))
        return out


class PolyLog(_PenaltyMethod):
    """The seed formula (DESIGN.md), optionally with the density exemption."""

    penalty = "polylog"
    name = "polylog"


class Lowess(_Method):
    """LOWESS residualisation on ln L (Huang et al., ICLR 2025); see the module docstring."""

    name = "lowess"

    def fit(self, train, ctx: FitContext, start: Fitted | None = None, weights=None) -> Fitted:
        if weights is not None:  # integer multiplicities: LOWESS on the repeated rows
            train = train.take(np.repeat(np.arange(train.n), np.asarray(weights).astype(int)))
        s, le, _ = _responses(train)
        x = np.log(np.maximum(le, LENGTH_FLOOR))
        if s.size < 3 or np.ptp(x) == 0:
            xs, ys = np.array([0.0]), np.array([float(np.mean(s))])
        else:
            delta = 0.01 * float(np.ptp(x))  # statsmodels' advice: skip re-fits within 1% of range
            curve = sm_lowess(s, x, frac=ctx.lowess_frac, it=3, delta=delta, return_sorted=True)
            xs, ys = curve[:, 0], curve[:, 1]
            ok = np.isfinite(ys)
            xs, ys = xs[ok], ys[ok]
            xs, keep = np.unique(xs, return_index=True)  # duplicated x: one curve value each
            ys = ys[keep]
            if xs.size == 0:
                raise FitError("LOWESS produced no finite curve")
        centre = float(np.mean(np.interp(x, xs, ys)))

        def apply(sc, length, d):
            xl = np.log(np.maximum(length, LENGTH_FLOOR))
            return sc - np.interp(xl, xs, ys) + centre

        return Fitted("lowess", {"frac": ctx.lowess_frac, "it": 3, "centre": centre,
                                 "n_curve": int(xs.size)}, _apply=apply)


class LcGlm(_Method):
    """AlpacaEval 2.0 length-controlled GLM on pairs (Dubois et al. 2024); module docstring."""

    name = "lc_glm"

    @staticmethod
    def _features(train: PairData, sd=None):
        dl = train.len_a - train.len_b
        sd = sd if sd is not None else (float(np.std(dl)) or 1.0)
        return train.score_a - train.score_b, np.tanh(dl / sd), sd

    @staticmethod
    def _bounds(ctx):
        width = ctx.scale[1] - ctx.scale[0]
        return [(-1e3 / width, 1e3 / width), (-50.0, 50.0)]

    def _fitted(self, theta, phi, sd, loss, converged) -> Fitted:
        def pair(sa, sb, la, lb, length_term):
            z = theta * (sa - sb)
            if length_term:
                z = z + phi * np.tanh((la - lb) / sd)
            return 0.5 + 0.5 * np.tanh(0.5 * z)

        return Fitted("lc_glm", {"theta": float(theta), "phi": float(phi), "sd": sd,
                                 "loss": float(loss), "converged": bool(converged)},
                      per_response=False, _pair=pair)

    def fit(self, train, ctx: FitContext, start: Fitted | None = None, weights=None) -> Fitted:
        """sd is the standard deviation of L_a - L_b of ``train`` (CV: the training folds)."""
        return self._fit(train, ctx, start, weights, None)

    def _fit(self, train, ctx, start, weights, sd) -> Fitted:
        if not isinstance(train, PairData):
            raise UsageError("lc_glm needs pairwise data")
        if train.n < 10:
            raise FitError(f"too few expert-labelled pairs for lc_glm: {train.n} < 10")
        x1, x2, sd = self._features(train, sd)
        y = train.outcome
        w = np.full(train.n, 1.0 / train.n) if weights is None else \
            np.asarray(weights, dtype=float) / np.sum(weights)

        def obj(t):
            z = t[0] * x1 + t[1] * x2
            loss = np.dot(w, np.maximum(z, 0.0) + np.log1p(np.exp(-np.abs(z))) - y * z)
            g = w * (0.5 + 0.5 * np.tanh(0.5 * z) - y)
            return float(loss), np.array([np.dot(g, x1), np.dot(g, x2)])

        x0 = [1.0 / max(float(np.std(x1)), 1e-9), 0.0]
        if start is not None:
            x0 = [start.params["theta"], start.params["phi"]]
        with single_threaded_blas():
            res = minimize(obj, x0, jac=True, method="L-BFGS-B", bounds=self._bounds(ctx),
                           options={"ftol": 1e-12, "gtol": 1e-8, "maxiter": 500})
        return self._fitted(res.x[0], res.x[1], sd, res.fun, res.success)

    def fit_batch(self, train, ctx, W, start=None) -> list:
        """All rows of W at once by damped Newton (the sd of the full data is kept)."""
        if start is None or train.n < 10:
            return super().fit_batch(train, ctx, W, start)
        x1, x2, sd = self._features(train, start.params["sd"])
        beta, loss, conv = batch_logistic(x1, x2, train.outcome, W,
                                          [start.params["theta"], start.params["phi"]])
        (t_lo, t_hi), (f_lo, f_hi) = self._bounds(ctx)
        out = []
        for b in range(len(W)):
            theta, phi = beta[b]
            if conv[b] and t_lo < theta < t_hi and f_lo < phi < f_hi:
                out.append(self._fitted(theta, phi, sd, loss[b], True))
            else:  # a separable resample: bounded L-BFGS-B fit
                out.append(self._fit(train, ctx, start, W[b], sd))
        return out


#: Every method, in report order. ``lc_glm`` applies to pairwise data only.
PAIRWISE_METHODS = (Raw(), Linear(), PolyLog(), Lowess(), LcGlm())
POINTWISE_METHODS = (Raw(), Linear(), PolyLog(), Lowess())
