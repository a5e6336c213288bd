"""Does style control beat length-only control out of sample? Pure numpy; no I/O.

The question of issue 34 item 5 on expert-labelled pairs (LLMBar): does adding Arena-Hard-Auto's
Markdown covariates (headers, lists, bold) to the length covariate explain a judge's verdicts
better on items the fit has not seen? The measure (docs/style.md, "Out of sample"):

- **Battles.** Every usable verdict of the judge on an expert-labelled pair whose expert label is
  not a tie is one battle (a pair judged in both orders gives two, as Arena-Hard-Auto counts its
  two games), oriented so that its first answer is the expert's preferred one: the credit ``y`` is
  the judge's P(expert's answer preferred) (1, 0, 0.5 for a tie, or a soft preference), the
  style row is :func:`judgecal.calibrate.stylecontrol.raw_features` of the expert's answer minus
  the other.
- **Model.** The Bradley-Terry model of :mod:`judgecal.calibrate.bt` with two players -- the
  expert's answer and the other (the anchor) -- and the style covariates of ``control``
  (:data:`CONTROLS`: "none", "length", "length+lists" or "both", standardised as
  :func:`judgecal.calibrate.stylecontrol.style_matrix` does over the training battles; the test
  battles are standardised with the training mean and sd; a column constant over a training fold
  is left out of that fold's fit, as the board leaves it out):
  ``P(expert's answer preferred) = expit(theta + z . gamma)``, theta the judge's
  log-odds of siding with the expert at the training battles' mean style difference, gamma how
  much the judge rewards each style feature *given* the expert's label. Fitted by
  :func:`judgecal.calibrate.bt.fit_bt` (maximum likelihood).
- **Out of sample.** K-fold cross-validation grouped by item
  (:func:`judgecal.calibrate.resample.make_folds` with ``seed``): each fold's battles are
  predicted by the fit on the other folds, and scored by their log-likelihood
  ``y log p + (1 - y) log (1 - p)`` (nats; higher is better). The figure of a control is the
  mean held-out log-likelihood per battle; the gain of "both" over "length" is the paired
  difference of the two on the same battles, with a 95% percentile CI over item resamples
  (:func:`judgecal.calibrate.resample.resample_counts` with ``seed + 1``; every battle of an item
  goes with it; the gain of a resample is its summed difference over its summed battles).
  **Style control beats length-only** when that CI lies above zero; otherwise keep length-only.

A fold whose training fit has no finite maximum (the judge sides with the expert in every
training battle, or in none; or a covariate separates the credits) makes that control undefined
on the set: the result says so rather than scoring a divergent fit. Separation is decided from
the training battles alone by Konis's linear program
(:func:`judgecal.calibrate.separation.separation`), not from where Newton stopped: under
separation Newton's steps grow a coefficient until the fitted probabilities round to 0 or 1 and
then report convergence, at a size that depends on the machine's rounding (a coefficient of 9 on
one machine, past :data:`MAX_COEF` on another, and a held-out figure of -2.8 nats per verdict or
"n.i." for the same data). A fit of data that overlap that still does not settle, or stops with
a coefficient beyond :data:`MAX_COEF`, is refused too."""

from __future__ import annotations

import numpy as np
from scipy.special import log_expit

from judgecal.calibrate import bt
from judgecal.calibrate import stylecontrol as sc
from judgecal.calibrate.resample import item_codes, make_folds, percentile_ci, resample_counts
from judgecal.calibrate.separation import separation

#: the covariate sets compared, in order ("none": the plain two-player fit; "both": Arena-Hard-Auto's
#: full style control, ``--control both``; "length+lists": length and the list-item density only, the
#: one Markdown feature common enough in LLMBar's answers for its coefficient to exist)
#: a fitted coefficient beyond this is a maximum at infinity (:data:`judgecal.calibrate.stylecontrol.MAX_COEF`)
MAX_COEF = sc.MAX_COEF
CONTROLS = {"none": (), "length": ("length",), "length+lists": ("length", "lists"), "both": sc.FEATURES}


def held_out_loglik(y, raw, item_ids, control: str, *, folds: int = 5,
                    seed: int = 0) -> tuple[np.ndarray | None, str | None, dict[str, int]]:
    """The held-out log-likelihood of every battle under ``control`` (module doc).

    Args: y (n,) credit of the expert's answer in [0, 1]; raw (n, 4) unstandardised style
    differences (expert's answer minus the other, columns :data:`judgecal.calibrate.stylecontrol.FEATURES`);
    item_ids (n,) content keys of the battles' items (folds group by them); control a key of
    :data:`CONTROLS` (its columns standardised as
    :func:`judgecal.calibrate.stylecontrol.style_matrix` does). Returns (ll (n,) in nats, None,
    dropped), or (None, why, dropped) where a
    training fold has no finite fit or every column of ``control`` is constant over it;
    ``dropped`` {column: number of training folds} counts the columns left out of a fold's fit
    because they are constant over its battles (no sd to standardise by, no coefficient to
    fit; the fold's prediction then ignores that column, as a board leaves such a column out)."""
    y = np.asarray(y, dtype=float)
    raw = np.asarray(raw, dtype=float).reshape(y.size, 4)
    if control not in CONTROLS:
        raise ValueError(f"control must be one of {', '.join(CONTROLS)}")
    fold, k = make_folds(item_ids, folds, seed)
    if k < 2:
        return None, "fewer than 2 items: no cross-validation", {}
    codes, n_items = item_codes(item_ids)
    out = np.full(y.size, np.nan)
    dropped: dict[str, int] = {}
    for f in range(k):
        tr, te = fold != f, fold == f
        if control == "none":
            z_tr, z_te = None, np.zeros((int(te.sum()), 0))
        else:
            z_tr, cols, left = sc.style_matrix(raw[tr], "both")
            want = [i for i, c in enumerate(cols) if c["feature"] in CONTROLS[control]]
            z_tr, cols = z_tr[:, want], [cols[i] for i in want]
            left = [c for c in left if c in CONTROLS[control]]
            for c in left:
                dropped[c] = dropped.get(c, 0) + 1
            if not cols:
                return None, f"every column of {control} is constant over a training fold", dropped
            j = [sc.FEATURES.index(c["feature"]) for c in cols]
            z_te = (raw[te][:, j] - np.array([c["mean"] for c in cols])) / np.array([c["sd"] for c in cols])
        n_tr = int(tr.sum())
        design = bt.make_design(np.ones(n_tr, dtype=np.int64), np.zeros(n_tr, dtype=np.int64), y[tr], np.ones(n_tr),
                                codes[tr], 2, n_items, features=z_tr)
        fit = bt.fit_bt(design, 0)
        if fit.set_apart:
            return None, "the judge sides with the expert in every training battle of a fold, or in none", dropped
        if separation(np.column_stack([np.ones(n_tr), z_tr]) if z_tr is not None else np.ones((n_tr, 1)),
                      np.ones(n_tr), y[tr])["separated"]:
            return None, ("the fit of a training fold has no finite maximum (separation: a direction of the "
                          "covariates never lowers the likelihood, so a coefficient runs off to infinity)"), dropped
        if not fit.converged or not np.all(np.abs(np.concatenate([fit.coef[1:], fit.gamma])) <= MAX_COEF):
            return None, ("the fit of a training fold did not settle (its data overlap, but Newton's steps did not "
                          f"converge or left a coefficient past +-{MAX_COEF:g} log-odds per sd)"), dropped
        eta = fit.coef[1] + z_te @ fit.gamma
        out[te] = y[te] * log_expit(eta) + (1.0 - y[te]) * log_expit(-eta)
    return out, None, dropped


def paired_gain(ll_new, ll_old, item_ids, *, n_bootstrap: int = 200, seed: int = 0) -> dict:
    """The mean per-battle gain ``ll_new - ll_old`` (n,) and its 95% percentile CI over item
    resamples (``resample_counts(n_items, n_bootstrap, default_rng(seed))``; a resample's gain is
    its summed difference over its summed battles): {gain, gain_ci, above (CI above zero)}."""
    d = np.asarray(ll_new, dtype=float) - np.asarray(ll_old, dtype=float)
    codes, n_items = item_codes(item_ids)
    per_item = np.bincount(codes, weights=d, minlength=n_items)
    n_item = np.bincount(codes, minlength=n_items).astype(float)
    M = resample_counts(n_items, n_bootstrap, np.random.default_rng(seed))
    ci = percentile_ci((M @ per_item) / (M @ n_item)) if n_bootstrap else None
    return {"gain": float(d.mean()), "gain_ci": ci, "above": bool(ci is not None and ci[0] > 0)}


def style_oos(y, raw, item_ids, *, folds: int = 5, seed: int = 0, n_bootstrap: int = 200) -> dict:
    """Style control against length-only control out of sample, for one judge on one set
    (module doc).

    Args as :func:`held_out_loglik`. Returns {"n_battles", "n_items", "folds", "loglik": {control:
    mean held-out log-likelihood per battle (nats) or None}, "why": {control: why it is None},
    "dropped": {control: {column: training folds it was constant over, left out there}},
    "length_vs_none", "lists_vs_length" (length+lists over length), "both_vs_length":
    :func:`paired_gain` dicts (None where a side is undefined; resamples with ``seed + 1``),
    "beats_length_only": both_vs_length's CI above zero (None where undefined),
    "lists_beat_length_only": lists_vs_length's (None where undefined)}."""
    y = np.asarray(y, dtype=float)
    ll, why, dropped = {}, {}, {}
    for c in CONTROLS:
        ll[c], w, dropped[c] = held_out_loglik(y, raw, item_ids, c, folds=folds, seed=seed)
        if w:
            why[c] = w
    _, n_items = item_codes(item_ids)

    def gain(new, old):
        if ll[new] is None or ll[old] is None:
            return None
        return paired_gain(ll[new], ll[old], item_ids, n_bootstrap=n_bootstrap, seed=seed + 1)

    b_l, l_l = gain("both", "length"), gain("length+lists", "length")
    return {"n_battles": int(y.size), "n_items": n_items, "folds": int(min(folds, n_items)),
            "loglik": {c: None if v is None else float(v.mean()) for c, v in ll.items()}, "why": why,
            "dropped": {c: d for c, d in dropped.items() if d},
            "length_vs_none": gain("length", "none"), "lists_vs_length": l_l, "both_vs_length": b_l,
            "beats_length_only": None if b_l is None else b_l["above"],
            "lists_beat_length_only": None if l_l is None else l_l["above"]}
