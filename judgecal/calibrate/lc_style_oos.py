"""Does the style candidate beat length-only control out of sample, for a pointwise judge?

The pointwise half of issue 34 item 5 (the pairwise judges' half is
:mod:`judgecal.calibrate.style_oos`). On one family's expert-labelled pairs rated by one
pointwise judge, the length-controlled GLM (``lc_glm``, AlpacaEval 2.0's) and its style
extension (``lc_glm_style``, :mod:`judgecal.calibrate.lc_style`) are each refitted on the
training folds and predict the held-out fold, with the outer folds of the nested selection
(:func:`judgecal.calibrate.resample.make_folds` with ``seed + 3``, grouped by item). The figure
is the expert agreement of those predictions (ties count half); the gain of ``lc_glm_style``
over ``lc_glm`` is the paired difference on the same pairs with its 95% percentile CI over item
resamples (``seed + 5``, the same resamples for both). **Style beats length-only** when that
CI lies above zero; **worse** when it lies below; otherwise keep length-only. Pure numpy; no I/O."""

from __future__ import annotations

from judgecal.calibrate.baselines import FitContext, LcGlm, Raw
from judgecal.calibrate.data import PairData
from judgecal.calibrate.lc_style import LcGlmStyle
from judgecal.calibrate.resample import item_codes, make_folds
from judgecal.calibrate.select import _figure_ci, _oof, _predict
from judgecal.errors import FitError


def style_over_length(data: PairData, ctx: FitContext, *, folds: int = 5, seed: int = 0,
                      n_bootstrap: int = 200) -> dict:
    """{"n_pairs", "n_items", "folds", "raw", "lc_glm", "lc_glm_style" (each {"figure", "ci"}: out-of-
    sample expert agreement, or None with "errors"[name] when a fold could not be fitted),
    "gain", "gain_ci" (lc_glm_style minus lc_glm, paired), "verdict" ("style beats length-only" |
    "worse than length-only" | "keep length-only" | "not evaluated"), "fit" (lc_glm_style on every
    pair: theta, phi and each Markdown column's gamma in log-odds per sd, the columns left out
    and at their bound), "errors"} (module doc).

    ``data``: expert-labelled pairs with Markdown counts (``md_a``/``md_b``); raises FitError
    without them."""
    if data.md_a is None:
        raise FitError("the pairs carry no Markdown counts: nothing to control for")
    codes, n_items = item_codes(data.item_ids)
    outer, k = make_folds(data.item_ids, folds, seed + 3)
    out = {"n_pairs": data.n, "n_items": n_items, "folds": k, "raw": None, "lc_glm": None, "lc_glm_style": None,
           "gain": None, "gain_ci": None, "verdict": "not evaluated", "fit": None, "errors": {}}
    if k < 2:
        out["errors"]["folds"] = f"{n_items} items are too few for {folds} folds"
        return out
    preds = {"raw": _predict(Raw().fit(data, ctx), data, "pairwise")}
    for name, method in (("lc_glm", LcGlm()), ("lc_glm_style", LcGlmStyle())):
        try:
            preds[name] = _oof({"method": method, "ctx": ctx}, data, outer, k, "pairwise")
        except FitError as exc:
            out["errors"][name] = str(exc)
    figs = _figure_ci(preds, data, "pairwise", None, codes, n_items, n_bootstrap, seed + 5)
    for name in preds:
        out[name] = {"figure": figs[name]["figure"], "ci": figs[name]["ci"]}
    try:
        p = LcGlmStyle().fit(data, ctx).params
        out["fit"] = {"theta": p["theta"], "phi": p["phi"], "gamma": {c["feature"]: c["gamma"] for c in p["columns"]},
                      "left_out": p["left_out"], "at_bound": p["at_bound"]}
    except FitError as exc:
        out["errors"]["fit"] = str(exc)
    if "lc_glm" in preds and "lc_glm_style" in preds:
        paired = _figure_ci({"raw": preds["lc_glm"], "style": preds["lc_glm_style"]}, data, "pairwise", None, codes,
                            n_items, n_bootstrap, seed + 5)["style"]
        out["gain"], out["gain_ci"] = paired["gain"], paired["gain_ci"]
        ci = paired["gain_ci"]
        out["verdict"] = ("keep length-only" if ci is None else "style beats length-only" if ci[0] > 0 else
                          "worse than length-only" if ci[1] < 0 else "keep length-only")
    return out
