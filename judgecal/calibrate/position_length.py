"""Length and position together: does combining a pairwise judge's two orders AND a length
calibration of its verdicts beat either alone, out of sample?

Pure numpy, no I/O. Input: per expert-labelled pair (a, b) the expert ``outcome`` (1.0 / 0.0 /
0.5), the judge's P(a preferred) with a shown first (``pref_ab``) and with b shown first
(``pref_ba``), the two answers' lengths and the pair's item key. Only pairs with a usable
verdict in BOTH orders are used (every candidate predicts the same rows); the others are
counted (``n_left_out``).

Each *order* turns the verdicts into a score per answer, ``score_a = P, score_b = 1 - P`` on
the scale [0, 1] (:func:`judgecal.calibrate.position.mode_preferences`):

* ``ab``: a shown first only (the plain, one-order judge: LLMBar's ``swap = False``);
* ``ba``: b shown first only;
* ``combined``: both orders, a tie when they disagree;
* ``soft``: the soft average (pref_ab + pref_ba) / 2 - left out where it equals ``combined``
  on every pair (hard verdicts, e.g. all of LLMBar's).

Candidates, in this order (earlier wins a tie in the inner cross-validation): ``raw`` (= ``ab``
raw, the plain judge and the keep-raw answer), ``raw[ba]``, ``raw[combined]``, ``raw[soft]``,
then per order ``polylog[<order>]`` (the seed formula fitted on the verdict scores against the
expert outcomes, :class:`judgecal.calibrate.baselines.PolyLog`) and ``lc_glm[<order>]``
(AlpacaEval's length-controlled GLM on the verdict difference,
:class:`judgecal.calibrate.baselines.LcGlm`). L_ref is the median length of the answers used.

Every candidate is refitted on K-1 item-grouped folds and predicts the held-out fold
(``make_folds(item_ids, K, seed + 3)``, the outer folds of the nested selection), and its
agreement with the experts (judge ties 1/2) is compared with the plain judge's on the same
pairs: the paired 95% CI of the gain resamples items (``seed + 5``, the same resamples as the
nested selection's, by :func:`judgecal.calibrate.select._figure_ci`). The recommendation is
:func:`judgecal.calibrate.select.nested_selection` over the same candidates: "keep raw" (the
plain one-order verdicts) unless the chosen candidate's out-of-sample gain over raw, and the
nested procedure's, have paired 95% CIs above zero.

"Together" answers the question of the section for each length method M (polylog, lc_glm):
``M[combined]`` against position alone (``raw[combined]``) and against length alone
(``M[ab]``), each a paired out-of-sample difference with its 95% CI; ``beats_both`` is True
only when both CIs lie above zero.
"""

from __future__ import annotations

import numpy as np

from judgecal.calibrate.baselines import FitContext, LcGlm, PolyLog, Raw
from judgecal.calibrate.data import PairData
from judgecal.calibrate.fit import default_l_ref
from judgecal.calibrate.position import mode_preferences
from judgecal.calibrate.resample import item_codes, make_folds
from judgecal.calibrate.select import _ci_above_zero, _figure_ci, _oof, nested_selection
from judgecal.errors import FitError

#: Orders in candidate order (``soft`` only where it differs from ``combined``).
ORDERS = ("ab", "ba", "combined", "soft")
#: Length calibrations of the verdicts, in candidate order.
LENGTH_METHODS = ("polylog", "lc_glm")
_METHOD = {"polylog": PolyLog, "lc_glm": LcGlm}
SHORTER = "shorter answer"
_ORDER_TEXT = {"ab": "a shown first", "ba": "b shown first", "combined": "both orders (tie when they disagree)",
               "soft": "both orders (soft average)"}


def candidate_list(orders, ctx: FitContext) -> list[dict]:
    """The candidates (module doc) as :func:`judgecal.calibrate.select.nested_selection` takes
    them: {name, method, unit (= the order), ctx, description, order, length}."""
    out = []
    for o in orders:
        out.append({"name": "raw" if o == "ab" else f"raw[{o}]", "method": Raw(), "unit": o, "ctx": ctx,
                    "description": f"raw verdicts, {_ORDER_TEXT[o]}", "order": o, "length": None})
    for m in LENGTH_METHODS:
        for o in orders:
            what = "polylog length penalty" if m == "polylog" else "length-controlled GLM"
            out.append({"name": f"{m}[{o}]", "method": _METHOD[m](), "unit": o, "ctx": ctx,
                        "description": f"{what} on the verdicts, {_ORDER_TEXT[o]}", "order": o, "length": m})
    return out


def length_and_position(outcome, pref_ab, pref_ba, len_a, len_b, item_ids, *, folds: int = 5, seed: int = 0,
                        n_bootstrap: int = 1000, length_unit: str = "characters") -> dict | None:
    """Length and position together for one judge on one set (module doc).

    Args: outcome (n,) 1.0 / 0.0 / 0.5 (NaN: no label); pref_ab, pref_ba (n,) P(a preferred),
        NaN = no usable verdict; len_a, len_b (n,) lengths in ``length_unit``; item_ids (n,)
        content keys of the pairs' items (folds and resamples group by them).
    Returns: None when fewer than ``2 * folds`` items have both orders; else {"n_pairs",
        "n_left_out", "length_unit", "l_ref", "folds", "orders", "candidates": {name: {"order",
        "length" (None | "polylog" | "lc_glm"), "description", "agreement", "ci", "gain" (over
        the plain judge, agreement share), "gain_ci"} or None where a fit failed}, "together":
        {method: {"candidate", "vs_position_alone": {"against", "gain", "gain_ci"},
        "vs_length_alone": {...}, "beats_both"}}, "shorter_answer": {"agreement", "ci", "gain",
        "gain_ci"} of the rule "the shorter answer is better" (no judge, nothing fitted: how much
        a length prior alone explains), "selection": the nested selection's dict (decision
        "calibrate" | "keep raw", reason, recommended, nested, nested_ci, ...),
        "recommended_fit": {"name", "order", "length", "params" (fitted on every pair: lc_glm
        theta, phi, sd; polylog gamma, p, l_ref), "reverses_judge" (lc_glm with theta < 0: the
        calibrated judge inverts the verdicts and the length term does the agreeing)} or None,
        "warnings": [lines]}.
    """
    outcome = np.asarray(outcome, dtype=float)
    ab, ba = np.asarray(pref_ab, dtype=float), np.asarray(pref_ba, dtype=float)
    keep = np.isfinite(outcome) & np.isfinite(ab) & np.isfinite(ba)
    idx = np.flatnonzero(keep)
    items = np.asarray(item_ids).astype(str)[idx]
    la, lb = np.asarray(len_a, dtype=float)[idx], np.asarray(len_b, dtype=float)[idx]
    y = outcome[idx]
    prefs = mode_preferences(ab[idx], ba[idx])
    orders = [o for o in ORDERS if o != "soft" or not np.array_equal(prefs["soft"], prefs["combined"])]
    if idx.size == 0 or item_codes(items)[1] < 2 * max(folds, 2):
        return None
    ctx = FitContext(l_ref=default_l_ref(la, lb), scale=(0.0, 1.0))
    variants = {o: PairData(items, prefs[o], 1.0 - prefs[o], la, lb, y) for o in orders}
    cands = candidate_list(orders, ctx)
    warnings: list[str] = []
    selection = nested_selection(variants, "ab", ctx, kind="pairwise", folds=folds, seed=seed,
                                 n_bootstrap=n_bootstrap, warnings=warnings, cands=cands)
    outer, k = make_folds(items, folds, seed + 3)  # the nested selection's outer folds
    preds = {}
    for c in cands:
        try:
            preds[c["name"]] = _oof(c, variants[c["unit"]], outer, k, "pairwise")
        except FitError as exc:
            warnings.append(f"{c['name']} could not be fitted on an outer training fold ({exc})")
    codes, n_items = item_codes(items)
    main = variants["ab"]

    def paired(by_name: dict) -> dict:  # figures and gains over by_name["raw"], the same resamples
        return _figure_ci(by_name, main, "pairwise", None, codes, n_items, n_bootstrap, seed + 5)

    shorter = np.where(la < lb, 1.0, np.where(la > lb, 0.0, 0.5))  # no judge, no fit
    figs = paired({**preds, SHORTER: shorter})
    out_c = {}
    for c in cands:
        f = figs.get(c["name"])
        out_c[c["name"]] = None if f is None else {
            "order": c["order"], "length": c["length"], "description": c["description"], "agreement": f["figure"],
            "ci": f["ci"], "gain": f["gain"], "gain_ci": f["gain_ci"]}
    together = {}
    for m in LENGTH_METHODS:
        both, pos, length = f"{m}[combined]", "raw[combined]", f"{m}[ab]"
        if not all(n in preds for n in (both, pos, length)):
            together[m] = None
            continue
        vs = {}
        for key, against in (("vs_position_alone", pos), ("vs_length_alone", length)):
            g = paired({"raw": preds[against], "x": preds[both]})["x"]
            vs[key] = {"against": against, "gain": g["gain"], "gain_ci": g["gain_ci"]}
        together[m] = {"candidate": both, **vs,
                       "beats_both": _ci_above_zero(vs["vs_position_alone"]["gain_ci"])
                       and _ci_above_zero(vs["vs_length_alone"]["gain_ci"])}
    ref = figs[SHORTER]
    rec = None
    if selection is not None:
        c = next(c for c in cands if c["name"] == selection["recommended"])
        fitted = c["method"].fit(variants[c["unit"]], c["ctx"])  # on every pair: what would be applied
        params = {k: v for k, v in fitted.params.items() if k in ("theta", "phi", "sd", "gamma", "p", "l_ref")}
        rec = {"name": c["name"], "order": c["order"], "length": c["length"], "params": params,
               "reverses_judge": bool(c["length"] == "lc_glm" and params["theta"] < 0)}
    return {"n_pairs": int(idx.size), "n_left_out": int(outcome.size - idx.size), "length_unit": length_unit,
            "l_ref": ctx.l_ref, "folds": k, "orders": orders, "candidates": out_c, "together": together,
            "shorter_answer": {"agreement": ref["figure"], "ci": ref["ci"], "gain": ref["gain"], "gain_ci": ref["gain_ci"]},
            "selection": selection, "recommended_fit": rec, "warnings": warnings}
