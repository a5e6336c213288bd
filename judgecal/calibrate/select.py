"""Choosing the calibration method, its bounds and the length unit by nested cross-validation.

The question a team asks is "which calibration should we publish, and what will it be worth on
new items?". Picking the best of several candidates by cross-validation and then quoting that
same cross-validated figure is optimistic (the winner's figure is a maximum of noisy figures).
Nested cross-validation (Varma & Simon 2006; Cawley & Talbot 2010) keeps the figure honest:

* outer folds: the items are split into K folds (``make_folds(item_ids, K, seed + 3)``);
* for each outer fold, on the other K-1 folds only, every candidate is scored by an inner
  K-fold cross-validation (``seed + 4``); the best candidate (highest inner figure; a tie goes
  to the earlier, simpler candidate) is refitted on those K-1 folds and predicts the held-out
  outer fold;
* the **nested figure** pools those outer predictions: pairwise, the expert agreement (ties 1/2);
  pointwise, Spearman rho. Its 95% CI resamples items over the pooled outer credits (no refit;
  ``seed + 5``) - the same procedure as ``agreement_cv_ci``.

"Keep raw" is an answer. The *candidate* is the one the same inner procedure picks on all the
data. It is **recommended** only when it is not ``raw`` and both (a) the nested procedure's gain
over raw and (b) the candidate's own out-of-sample gain over raw (the candidate refitted on each
outer training fold, predicting the held-out fold) have a paired 95% CI above zero (the same
item resamples for both figures of a difference), and (c) its fit on all the data does not give
the judge's score a negative weight (LC GLM theta < 0 "reverses the judge": the gain would come
from length alone, the judge counted against the answer it prefers). Otherwise the
recommendation is ``raw``
("keep raw") with the reason. The figure printed beside a recommendation is the recommended
method's own out-of-sample figure (raw's for "keep raw"), never the procedure's;
``candidate_chosen_in`` says in how many outer folds the inner loop chose the candidate.

Candidates (in this order; ``unit`` ranges over the length units given, the fit's first):
``raw``; per unit: ``linear``, ``polylog`` with the fit's bounds (gamma in [0, G], the fit's p
bounds), ``polylog`` with a tight gamma bound (gamma <= 1 x width; only when that is below G),
``polylog`` with wide p bounds [0.5, 2.0], ``polylog`` signed (gamma in [-G, G]; only when the
fit is signed), ``lowess``, (pairs only) ``lc_glm`` and (pairs whose answers carry Markdown
counts) ``lc_glm_style`` (:mod:`judgecal.calibrate.lc_style`: lc_glm plus Arena-Hard-Auto's
header, list and bold densities). G is the fit's ``gamma_max`` (the user's
``--gamma-max``), else 10 x width: no candidate goes beyond the user's bound, and without
``--signed`` no candidate has gamma < 0. Each unit's L_ref is the median labelled length in that
unit (the fit's own L_ref for its unit).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from judgecal.calibrate import metrics as M
from judgecal.calibrate.baselines import FitContext, LcGlm, Linear, Lowess, PolyLog, Raw
from judgecal.calibrate.data import PairData
from judgecal.calibrate.fit import default_l_ref, map_expert_scale, scale_width
from judgecal.calibrate.lc_style import LcGlmStyle
from judgecal.calibrate.resample import item_codes, make_folds, percentile_ci, resample_counts
from judgecal.errors import FitError

#: Wide p bounds tried as a candidate.
WIDE_P = (0.5, 2.0)


def _lengths(d) -> np.ndarray:
    return np.concatenate([d.len_a, d.len_b]) if isinstance(d, PairData) else d.length


def candidates(variants: dict, unit: str, ctx: FitContext, kind: str) -> list[dict]:
    """The candidate list: dicts {name, method, unit, ctx, description} (see module doc)."""
    units = [unit] + [u for u in variants if u != unit]
    main = variants[unit]
    scores = np.concatenate([main.score_a, main.score_b]) if isinstance(main, PairData) else main.score
    width = scale_width(ctx.scale, scores)
    g_hi = float(ctx.gamma_max) if ctx.gamma_max is not None else 10 * width  # the user's bound holds everywhere
    out = [{"name": "raw", "method": Raw(), "unit": unit, "ctx": ctx, "description": "raw judge score"}]
    for u in units:
        c = ctx if u == unit else replace(ctx, l_ref=default_l_ref(_lengths(variants[u])))
        seed_c = replace(c, signed=False, gamma_max=ctx.gamma_max)
        out.append({"name": f"linear[{u}]", "method": Linear(), "unit": u, "ctx": seed_c,
                    "description": f"linear penalty, gamma in [0, {g_hi:g}], {u}"})
        out.append({"name": f"polylog[{u}]", "method": PolyLog(), "unit": u, "ctx": seed_c,
                    "description": f"polylog, gamma in [0, {g_hi:g}], p in [{c.p_bounds[0]:g}, {c.p_bounds[1]:g}], {u}"})
        if width < g_hi:  # a tighter bound than the fit's own (never looser than the user's)
            out.append({"name": f"polylog[{u}, gamma<={width:g}]", "method": PolyLog(), "unit": u,
                        "ctx": replace(seed_c, gamma_max=width),
                        "description": f"polylog, gamma in [0, {width:g}], p in [{c.p_bounds[0]:g}, {c.p_bounds[1]:g}], {u}"})
        if tuple(c.p_bounds) != WIDE_P:
            out.append({"name": f"polylog[{u}, p in {list(WIDE_P)}]", "method": PolyLog(), "unit": u,
                        "ctx": replace(seed_c, p_bounds=WIDE_P),
                        "description": f"polylog, gamma in [0, {g_hi:g}], p in [{WIDE_P[0]:g}, {WIDE_P[1]:g}], {u}"})
        if ctx.signed:
            out.append({"name": f"polylog[{u}, signed]", "method": PolyLog(), "unit": u,
                        "ctx": replace(c, signed=True, gamma_max=ctx.gamma_max),
                        "description": f"polylog, signed gamma in [-{g_hi:g}, {g_hi:g}], {u}"})
        out.append({"name": f"lowess[{u}]", "method": Lowess(), "unit": u, "ctx": c,
                    "description": f"LOWESS residual on ln L, {u}"})
        if kind == "pairwise":
            out.append({"name": f"lc_glm[{u}]", "method": LcGlm(), "unit": u, "ctx": c,
                        "description": f"length-controlled GLM, {u}"})
            if variants[u].md_a is not None:
                out.append({"name": f"lc_glm_style[{u}]", "method": LcGlmStyle(), "unit": u, "ctx": c,
                            "extends": f"lc_glm[{u}]",
                            "description": f"length- and style-controlled GLM (Arena-Hard-Auto's Markdown "
                                           f"densities: headers, lists, bold), {u}"})
    return out


def _predict(fitted, test, kind):
    if kind == "pairwise":
        return fitted.predict_pair(test.score_a, test.score_b, test.len_a, test.len_b, test.density_a, test.density_b,
                                   md_a=test.md_a, md_b=test.md_b)
    return fitted.calibrate(test.score, test.length, test.density)


def _oof(cand: dict, data, fold: np.ndarray, k: int, kind: str) -> np.ndarray:
    """Out-of-fold predictions of one candidate (FitError propagates)."""
    pred = np.empty(data.n)
    for f in range(k):
        test = fold == f
        fitted = cand["method"].fit(data.take(np.flatnonzero(~test)), cand["ctx"])
        pred[test] = _predict(fitted, data.take(np.flatnonzero(test)), kind)
    return pred


def _figure(pred, data, kind, target) -> float:
    if kind == "pairwise":
        return float(M.agreement_credit(pred, 1.0 - pred, data.outcome).mean())
    v = M.spearman(pred, target)
    return v if np.isfinite(v) else -np.inf


def _inner_choice(cands, variants, idx, folds, seed, kind, target) -> tuple[int, dict]:
    """Index of the best candidate by inner CV on the rows ``idx``, and every candidate's figure."""
    first = variants[cands[0]["unit"]].take(idx)
    fold, k = make_folds(first.item_ids, folds, seed)
    figs = {}
    best, best_v = 0, -np.inf
    for i, c in enumerate(cands):
        d = variants[c["unit"]].take(idx)
        try:
            pred = _oof(c, d, fold, k, kind)
        except FitError:
            figs[c["name"]] = None
            continue
        v = _figure(pred, d, kind, None if target is None else target[idx])
        figs[c["name"]] = v
        if v > best_v + 1e-12:
            best, best_v = i, v
    return best, figs


def _figure_ci(pred_by_name: dict, data, kind, target, codes, n_items, n_bootstrap, seed) -> dict:
    """Figure, 95% CI and the paired gain over ``raw`` with its 95% CI of each prediction vector
    in ``pred_by_name`` (every vector predicts the same rows out of sample; ``raw`` among them).
    The same item resamples (``default_rng(seed)``) serve every vector, so each gain CI is of the
    paired difference. Pairwise: agreement (ties 1/2); pointwise: Spearman rho (at most 500
    resamples, weighted Spearman of the repeated rows)."""
    out = {}
    if kind == "pairwise":
        credit = {k: M.agreement_credit(p, 1.0 - p, data.outcome) for k, p in pred_by_name.items()}
        W = None
        if n_bootstrap > 0:
            W = resample_counts(n_items, n_bootstrap, np.random.default_rng(seed))[:, codes]
            tot = W.sum(axis=1)
        for k, c in credit.items():
            d = c - credit["raw"]
            out[k] = {"figure": float(c.mean()), "ci": None if W is None else percentile_ci(W @ c / tot),
                      "gain": float(d.mean()), "gain_ci": None if W is None else percentile_ci(W @ d / tot)}
        return out
    figs = {k: M.spearman(p, target) for k, p in pred_by_name.items()}
    boot = {}
    if n_bootstrap > 0:
        W = resample_counts(n_items, min(n_bootstrap, 500), np.random.default_rng(seed))[:, codes]
        boot = {k: np.array([M.weighted_spearman(p, target, w) for w in W]) for k, p in pred_by_name.items()}
    for k, v in figs.items():
        g = v - figs["raw"] if np.isfinite(v) and np.isfinite(figs["raw"]) else float("nan")
        out[k] = {"figure": v, "ci": percentile_ci(boot[k]) if boot else None, "gain": g,
                  "gain_ci": percentile_ci(boot[k] - boot["raw"]) if boot else None}
    return out


def _simpler_unless_better(cand, cands, variants, main, outer, k, kind, target, codes, n_items, n_bootstrap,
                           seed) -> tuple[dict, dict | None]:
    """(the candidate to weigh against raw, what was decided about an extension or None).

    A candidate that extends a simpler one (``extends``: ``lc_glm_style[u]`` adds style
    covariates to ``lc_glm[u]``) stands only where its own out-of-sample figure beats the simpler
    one's on the same outer folds, paired 95% CI above zero (the item resamples of the decision,
    ``seed``); otherwise the simpler candidate is weighed against raw in its place: the inner
    choice on all the data is optimistic, and more coefficients must earn their place out of
    sample. Returns {"name", "over", "gain", "gain_ci", "kept"} for such a candidate."""
    base_name = cand.get("extends")
    base = next((c for c in cands if c["name"] == base_name), None) if base_name else None
    if base is None:
        return cand, None
    try:
        own = _oof(cand, variants[cand["unit"]], outer, k, kind)
        simpler = _oof(base, variants[base["unit"]], outer, k, kind)
    except FitError:
        return base, {"name": cand["name"], "over": base_name, "gain": None, "gain_ci": None, "kept": False}
    ext = _figure_ci({"raw": simpler, "ext": own}, main, kind, target, codes, n_items, n_bootstrap, seed)["ext"]
    kept = _ci_above_zero(ext["gain_ci"])
    return (cand if kept else base), {"name": cand["name"], "over": base_name, "gain": ext["gain"],
                                      "gain_ci": ext["gain_ci"], "kept": kept}


def _ci_above_zero(ci) -> bool:
    return ci is not None and ci[0] is not None and ci[0] > 0


def nested_selection(variants: dict, unit: str, ctx: FitContext, *, kind: str, folds: int = 5, seed: int = 0,
                     n_bootstrap: int = 1000, warnings: list | None = None, cands: list[dict] | None = None) -> dict | None:
    """Nested cross-validated choice of method, bounds and length unit, with "keep raw" as an
    answer (module doc).

    Args:
        variants: {unit: PairData | PointData}, the same rows with lengths in each unit.
        unit: the fit's own unit (a key of ``variants``). ctx: the fit's context.
        kind: "pairwise" or "pointwise". folds: K of both loops. n_bootstrap: CI resamples.
        cands: the candidate list (dicts as :func:`candidates` returns; default: that list); its
            first must be ``raw`` of ``unit`` (the keep-raw answer).
    Returns:
        {"decision": "calibrate" | "keep raw", "reason": one line,
        "recommended": name ("raw" when the decision is keep raw), "recommended_method",
        "recommended_unit", "recommended_description",
        "nested", "nested_ci": the recommended method's OWN out-of-sample figure (refitted on
        each outer training fold, predicting the held-out fold; raw's figure for keep raw),
        "nested_gain", "nested_gain_ci": that figure minus raw's, paired 95% CI,
        "candidate", "candidate_description": the inner choice on all the data (what would be
        recommended if the evidence allowed), "candidate_nested", "candidate_nested_ci",
        "candidate_gain", "candidate_gain_ci": its own outer-fold figure and gain over raw,
        "procedure", "procedure_ci", "procedure_gain", "procedure_gain_ci": the nested figure of
        the whole selection procedure (each outer fold's own inner choice),
        "raw", "raw_ci": raw's figure on the same rows,
        "chosen_in_outer_folds": [names], "candidate_chosen_in": folds whose inner loop chose the
        candidate, "recommended_cv" (the optimistic inner figure of the candidate on all the
        data), "metric" ("agreement" | "spearman"), "candidates": {name: inner CV figure},
        "units", "folds"}; None when there are fewer than 2*folds items.

    Decision rule: the candidate is recommended only when it is not raw AND both the nested
    procedure's gain over raw and the candidate's own out-of-sample gain over raw have a paired
    95% CI above zero; otherwise "keep raw", with the reason (no CI: keep raw, the evidence is
    missing). Seeds: outer folds ``seed + 3``, inner folds ``seed + 4``, item resamples ``seed + 5``.
    """
    main = variants[unit]
    codes, n_items = item_codes(main.item_ids)
    if n_items < 2 * max(folds, 2):
        if warnings is not None:
            warnings.append(f"nested cross-validation skipped: {n_items} items are too few for {folds}x{folds} folds")
        return None
    cands = candidates(variants, unit, ctx, kind) if cands is None else cands
    target = None
    if kind == "pointwise":
        target = map_expert_scale(main.expert, ctx.expert_scale, ctx.scale)
    outer, k = make_folds(main.item_ids, folds, seed + 3)
    pred = np.empty(main.n)
    chosen = []
    for f in range(k):
        test = np.flatnonzero(outer == f)
        train = np.flatnonzero(outer != f)
        i, _ = _inner_choice(cands, variants, train, folds, seed + 4, kind, target)
        c = cands[i]
        chosen.append(c["name"])
        d = variants[c["unit"]]
        fitted = c["method"].fit(d.take(train), c["ctx"])
        pred[test] = _predict(fitted, d.take(test), kind)
    all_idx = np.arange(main.n)
    best, figs = _inner_choice(cands, variants, all_idx, folds, seed + 4, kind, target)
    cand = cands[best]
    cand, extension = _simpler_unless_better(cand, cands, variants, main, outer, k, kind, target, codes, n_items,
                                             n_bootstrap, seed + 5)
    own = None
    try:  # the candidate's own out-of-sample predictions on the outer folds
        own = _oof(cand, variants[cand["unit"]], outer, k, kind)
    except FitError as exc:
        if warnings is not None:
            warnings.append(f"nested selection: {cand['name']} could not be refitted on an outer fold ({exc})")
    preds = {"raw": _predict(Raw().fit(main, ctx), main, kind), "procedure": pred}
    if own is not None:
        preds["candidate"] = own
    figs_ci = _figure_ci(preds, main, kind, target, codes, n_items, n_bootstrap, seed + 5)
    metric = "agreement" if kind == "pairwise" else "spearman"
    proc, raw = figs_ci["procedure"], figs_ci["raw"]
    cown = figs_ci.get("candidate")
    n_chosen = sum(c == cand["name"] for c in chosen)
    theta = None
    if cand["name"] != "raw" and cown is not None:
        try:  # a method whose fit on all the data weighs the judge's score negatively reverses the judge
            theta = (cand["method"].fit(variants[cand["unit"]], cand["ctx"]).params or {}).get("theta")
        except FitError:
            theta = None
    reverses = theta is not None and theta < 0
    if cand["name"] == "raw":
        fitted_any = any(v is not None for n, v in figs.items() if n != "raw")
        decision, reason = "keep raw", ("the inner cross-validation on all the data prefers the raw judge" if fitted_any else
                                        "no calibration method could be fitted in the inner folds (too few labelled "
                                        "items per fold): nothing to weigh against raw")
    elif cown is None:
        decision, reason = "keep raw", f"{cand['name']} could not be evaluated out of sample"
    elif proc["gain_ci"] is None or cown["gain_ci"] is None:
        decision, reason = "keep raw", "no confidence interval (--bootstrap 0): a gain over raw is not established"
    elif not _ci_above_zero(proc["gain_ci"]):
        decision, reason = "keep raw", (f"the selection procedure's nested out-of-sample gain over raw, "
                                        f"{_fmt_gain(proc['gain'], proc['gain_ci'], kind)}, does not clear zero"
                                        + ("" if cown is None else f" (the best candidate's own gain: "
                                                                   f"{_fmt_gain(cown['gain'], cown['gain_ci'], kind)})"))
    elif not _ci_above_zero(cown["gain_ci"]):
        decision, reason = "keep raw", (f"{cand['name']}'s own out-of-sample gain over raw, "
                                        f"{_fmt_gain(cown['gain'], cown['gain_ci'], kind)}, does not clear zero")
    elif reverses:
        decision, reason = "keep raw", (f"{cand['name']} gives the judge's score a negative weight (theta {theta:+.3f} "
                                        "fitted on all the data): its gain over raw "
                                        f"{_fmt_gain(cown['gain'], cown['gain_ci'], kind)} comes from counting the "
                                        "judge against the answer it prefers (and from length), not from correcting "
                                        "its length bias: a calibration cannot make this judge usable here")
    else:
        decision, reason = "calibrate", (f"out-of-sample gain over raw {_fmt_gain(cown['gain'], cown['gain_ci'], kind)} "
                                         f"(paired 95% CI above zero; "
                                         f"chosen in {n_chosen} of {k} outer folds)")
    if extension is not None and not extension["kept"]:
        reason += (f"; the inner choice {extension['name']} does not beat the simpler {extension['over']} out of "
                   f"sample ({_fmt_gain(extension['gain'], extension['gain_ci'], kind)}), which stands in for it")
    rec = cand if decision == "calibrate" else cands[0]
    rec_fig = cown if decision == "calibrate" else raw
    out = {"metric": metric, "units": sorted(variants, key=lambda u: u != unit), "folds": k,
           "decision": decision, "reason": reason,
           "recommended": rec["name"], "recommended_method": rec["name"].split("[")[0],
           "recommended_unit": rec["unit"] if decision == "calibrate" else None,
           "recommended_description": rec["description"],
           "nested": rec_fig["figure"], "nested_ci": rec_fig["ci"],
           "nested_gain": rec_fig["gain"] if decision == "calibrate" else 0.0,
           "nested_gain_ci": rec_fig["gain_ci"] if decision == "calibrate" else None,
           "candidate": cand["name"], "candidate_description": cand["description"],
           "candidate_nested": None if cown is None else cown["figure"],
           "candidate_nested_ci": None if cown is None else cown["ci"],
           "candidate_gain": None if cown is None else cown["gain"],
           "candidate_gain_ci": None if cown is None else cown["gain_ci"],
           "candidate_chosen_in": n_chosen,
           "candidate_theta": theta, "reverses_judge": reverses, "extension": extension,
           "procedure": proc["figure"], "procedure_ci": proc["ci"], "procedure_gain": proc["gain"],
           "procedure_gain_ci": proc["gain_ci"], "raw": raw["figure"], "raw_ci": raw["ci"],
           "recommended_cv": figs[cand["name"]], "chosen_in_outer_folds": chosen,
           "candidates": {n: (None if v is None or not np.isfinite(v) else v) for n, v in figs.items()}}
    return out


def _fmt_gain(v, ci, kind) -> str:
    """"+1.0 [-2.0, +4.3] points" (pairwise, agreement points) or "+0.012 [-0.020, +0.041]"."""
    def one(x):
        if x is None or not np.isfinite(x):
            return "-"
        return f"{100 * x:+.1f}" if kind == "pairwise" else f"{x:+.3f}"
    txt = one(v) + ("" if ci is None else f" [{one(ci[0])}, {one(ci[1])}]")
    return txt + (" points" if kind == "pairwise" else " Spearman")
