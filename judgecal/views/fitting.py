"""``judgecal fit``: load a family's ratings, labels and lengths, evaluate every calibration
method (judgecal.calibrate.evaluate), and store the result as a new versioned Calibration row.

A fit row is never updated: fitting again adds a row, and reports use the newest unless told."""

from __future__ import annotations

from collections.abc import Callable
import warnings

import numpy as np

from judgecal.db.models import iso_utc
from judgecal import __version__
from judgecal.progress import no_step
from judgecal.calibrate.data import PairData
from judgecal.calibrate.evaluate import evaluate_pairwise, evaluate_pointwise, evaluate_verbosity_only
from judgecal.db import models as m
from judgecal.db import queries as q
from judgecal.db.engine import get_engine, session_scope
from judgecal.calibrate.fingerprint import fingerprint
from judgecal.db.fitdata import FamilyRows, fingerprint_records
from judgecal.db.guarddata import answer_keys
from judgecal.calibrate.summaries import DEFAULT_RISK_K, check_summary, missing_message
from judgecal.errors import FitError, UsageError
from judgecal.views.fitinputs import (  # noqa: F401 (re-exported)
    default_select_units,
    family_inputs,
    left_out,
    load_inputs,
)

LENGTH_UNITS = ("tokens", "words", "chars", "bytes")
MAX_STORED_POINTS = 5000


def evaluate_family(
    family: str, judge: str, *, objective: str | None = None, length_unit: str = "tokens", tokenizer: str = "smollm2",
    l_ref: float | None = None, p_bounds=(1.0, 1.5), folds: int = 5, n_bootstrap: int = 1000, seed: int = 0,
    density: bool = False, verbosity_family: str | None = None, url: str | None = None, signed: bool = False,
    gamma_max: float | None = None, nested: bool = True, select_units: list[str] | None = None,
    step: Callable[[str], None] | None = None, summary: str = "greedy", risk_k: float = DEFAULT_RISK_K,
) -> tuple[dict, dict]:
    """Evaluate every method on one family and judge. Returns (evaluation, context) where
    context names the family/judge ids and settings. ``signed``: gamma may be negative;
    ``gamma_max``: bound of |gamma|; ``nested``: the nested cross-validated choice of method,
    bounds and length unit among ``select_units`` (default :func:`default_select_units`; an empty
    list, or a list given without the nested selection (``nested`` False or ``folds`` < 2), is a
    UsageError). ``step(message)`` is called at each phase (:mod:`judgecal.progress`).
    ``summary``: the rating summary the fit uses (:mod:`judgecal.calibrate.summaries`; greedy,
    mean or risk-averse with ``risk_k``); a summary some ok rating has no distribution for is
    refused (UsageError naming how many). When every ok rating has a distribution, the
    evaluation's ``summaries`` compares the three out of sample (else it says why not).
    Token lengths are computed where missing. Raises FitError, NotFoundError, UsageError."""
    step = step or no_step
    check_summary(summary, risk_k)
    if length_unit not in LENGTH_UNITS:
        raise UsageError(f"--length-unit must be one of {', '.join(LENGTH_UNITS)}")
    if objective not in (None, "pairwise", "pointwise"):
        raise UsageError("--objective must be pairwise or pointwise")
    if select_units is not None and (not select_units or not nested or folds < 2):
        raise UsageError("--select-units names no length unit" if not select_units else
                         "--select-units applies to the nested selection, which --no-nested or --folds < 2 skips")
    units = list(dict.fromkeys(select_units or default_select_units(length_unit)))
    if length_unit not in units:
        units.insert(0, length_unit)
    bad = [u for u in units if u not in LENGTH_UNITS]
    if bad:
        raise UsageError(f"--select-units: unknown length unit {bad[0]!r} (one of {', '.join(LENGTH_UNITS)})")
    engine = get_engine(url)
    from judgecal.tokens import canonical_name

    tok = canonical_name(tokenizer) if "tokens" in units else None
    with session_scope(engine) as s:
        fam_id = q.family_id(s, family)
        fam = s.get(m.TaskFamily, fam_id)
        jrow = q.judge_by_name(s, judge, lambda: q.judges_with_data(s, [fam_id]), f"with ratings or verdicts in {family}")
        vfam_id = q.family_id(s, verbosity_family) if verbosity_family else None
        fixed_l_ref = l_ref if l_ref is not None else fam.l_ref
        ctx = {"task_family_id": fam_id, "judge_id": jrow.id, "judge": jrow.name, "task_family": family,
               "scale": (jrow.scale_min, jrow.scale_max), "fixed_l_ref": fixed_l_ref}
    step(f"reading {family}'s ratings, labels and lengths")
    rows, pair, point, verb, info = load_inputs(engine, fam_id, ctx["judge_id"], length_unit=length_unit,
                                                 tokenizer=tok if length_unit == "tokens" else None, density=density,
                                                 verbosity_family_id=vfam_id, url=url, summary=summary, risk_k=risk_k,
                                                 with_summaries=True)
    n_ok = rows.status_counts.get("ok", 0)
    try:
        refuse_without_distribution((rows, family), summary=summary, judge=judge)
    except UsageError:
        engine.dispose()
        raise
    with session_scope(engine) as s:
        keys = answer_keys(s, rows.score)
    if not rows.score:
        engine.dispose()
        raise FitError(f"judge {judge!r} has no ok rating in task family {family!r} (see `judgecal stats`)")
    objective = objective or ("pairwise" if rows.pairs else "pointwise" if rows.points else "pairwise")
    variants = None
    if nested and folds >= 2 and ((objective == "pairwise" and pair is not None) or (objective == "pointwise" and point is not None)):
        variants = {length_unit: pair if objective == "pairwise" else point}
        for u in units:
            if u == length_unit:
                continue
            step(f"reading lengths in {u} for the nested selection")
            _, p2, pt2, _, _ = load_inputs(engine, fam_id, ctx["judge_id"], length_unit=u,
                                            tokenizer=tok if u == "tokens" else None, density=density,
                                            verbosity_family_id=None, url=url, summary=summary, risk_k=risk_k)
            variants[u] = p2 if objective == "pairwise" else pt2
    engine.dispose()
    from judgecal.calibrate.fit import check_scores

    for d in (pair, point):  # before any method runs: no overflow, no numpy warning
        if d is not None:
            check_scores(np.concatenate([d.score_a, d.score_b]) if isinstance(d, PairData) else d.score,
                         f"judge {ctx['judge']!r} in {family!r}")
    common = dict(scale=ctx["scale"], l_ref=fixed_l_ref, p_bounds=tuple(p_bounds), folds=folds,
                  n_bootstrap=n_bootstrap, seed=seed, verbosity_pairs=verb, density=density, signed=signed,
                  gamma_max=gamma_max, variants=variants, unit=length_unit, nested=nested)
    step(f"fitting every method ({folds}-fold CV, {n_bootstrap} bootstrap resamples"
         + (f", nested selection over {len(variants)} length unit(s)" if variants else "") + ")")
    with warnings.catch_warnings(record=True) as caught:  # numerical warnings go into the fit's warnings
        warnings.simplefilter("always", RuntimeWarning)
        if objective == "pairwise":
            evaluation = evaluate_pairwise(pair, **common)
        else:
            if point is None:
                evaluation = evaluate_verbosity_only(verb, n_bootstrap=n_bootstrap, seed=seed) if verb else None
                if evaluation is None:
                    raise FitError(f"task family {family!r} has no pointwise expert labels rated by {judge!r}")
            else:
                evaluation = evaluate_pointwise(point, expert_scale=tuple(info["expert_scale"]), **common)
        evaluation["summaries"] = _summary_comparison(rows, density, objective, evaluation, folds=folds, seed=seed,
                                                      n_bootstrap=n_bootstrap, p_bounds=p_bounds, signed=signed,
                                                      gamma_max=gamma_max, risk_k=risk_k, n_ok=n_ok, step=step)
    evaluation["summary"] = summary
    evaluation["risk_k"] = float(risk_k)
    one_raw_ci(evaluation)
    _numeric_warnings(evaluation, caught)
    evaluation["data"] = {**info, "rating_status": rows.status_counts, "verbosity_family": verbosity_family or family,
                          "fingerprint": fingerprint(fingerprint_records(rows))}
    _guard_flags(evaluation, rows, keys, fixed_l_ref)
    left = left_out(info, rows.status_counts)
    evaluation["data"]["left_out"] = left
    evaluation.setdefault("warnings", [])
    evaluation["warnings"] += [f"left out: {n} {reason}" for reason, n in left.items()]
    if nested and pair is not None and pair.md_a is None:  # the style candidate needs every answer's counts
        missing = sum(1 for rid in rows.md if rows.md[rid] is None)
        evaluation["warnings"].append(
            f"nested selection: lc_glm_style not offered: {missing} answers of the family have no stored Markdown "
            "counts (rows written by another client than judgecal after migration 0007)")
    if rows.large_outside:  # --summary mean / risk-averse over a sliver of the judgment: counted and said
        from judgecal.calibrate.summaries import large_outside_note

        evaluation["data"]["n_large_outside"] = sum(rows.large_outside.values())
        evaluation["warnings"].append(large_outside_note(sum(rows.large_outside.values()), n_ok, summary, risk_k,
                                                         rows.large_outside))
    ctx.update(summary=summary, risk_k=float(risk_k))
    ctx.update(objective=objective, length_unit=length_unit, tokenizer=tok if length_unit == "tokens" else None,
               p_bounds=tuple(p_bounds), folds=folds, n_bootstrap=n_bootstrap, seed=seed, density=density,
               signed=signed, gamma_max=gamma_max)
    return evaluation, ctx


#: two figures closer than this are one figure (the same mean over the same rows, summed in another order)
SAME_FIGURE = 1e-9


def one_raw_ci(evaluation: dict) -> None:
    """Give the raw judge's figure ONE confidence interval wherever the evaluation holds it.

    Raw has no parameter, so its in-sample figure, its cross-validated figure, the nested
    selection's ``raw`` (and its ``nested`` when the advice is keep raw) and the rating-summary
    comparison's figure of the fit's own summary are one number on the same rows; each had its
    own item resamples (``seed + 1``, ``+ 2``, ``+ 5``), so one fit printed e.g. ``0.920 [0.875,
    0.955]`` in the methods table and ``raw agreement 0.920 [0.875, 0.960]`` in the
    recommendation (issue 33). The single source is the cross-validated CI
    (``methods.raw.agreement_cv_ci``, the resamples of every paired CV gain), else the in-sample
    one (``spearman_ci`` pointwise, which has no CV CI); it is copied to every other place that
    holds the same figure (checked to :data:`SAME_FIGURE`), and ``selection.raw_ci_source``
    names it. Paired gain CIs keep their own resamples (they are CIs of differences). In place."""
    metric = {"pairwise": "agreement", "pointwise": "spearman"}.get(evaluation.get("kind"))
    raw = (evaluation.get("methods") or {}).get("raw") or {}
    fig = raw.get(metric) if metric else None
    if fig is None:
        return

    def same(x) -> bool:
        return x is not None and abs(float(x) - float(fig)) <= SAME_FIGURE

    cv_key, in_key = f"{metric}_cv_ci", f"{metric}_ci"
    key = cv_key if raw.get(cv_key) is not None and same(raw.get(f"{metric}_cv")) else in_key
    ci = raw.get(key)
    if ci is None:
        return
    raw[in_key] = list(ci)
    if raw.get(cv_key) is not None and same(raw.get(f"{metric}_cv")):
        raw[cv_key] = list(ci)
    sel = evaluation.get("selection")
    if isinstance(sel, dict) and same(sel.get("raw")) and sel.get("raw_ci") is not None:
        sel["raw_ci"] = list(ci)
        sel["raw_ci_source"] = f"methods.raw.{key}"
        if sel.get("decision") == "keep raw" and same(sel.get("nested")) and sel.get("nested_ci") is not None:
            sel["nested_ci"] = list(ci)
    rows = ((evaluation.get("summaries") or {}).get("summaries") or {})
    own = rows.get(evaluation.get("summary") or "greedy")
    if isinstance(own, dict) and same(own.get("figure_cv")) and own.get("figure_cv_ci") is not None:
        own["figure_cv_ci"] = list(ci)


def _summary_comparison(rows: FamilyRows, density: bool, objective: str, evaluation: dict, *, folds, seed, n_bootstrap,
                        p_bounds, signed, gamma_max, risk_k, n_ok, step) -> dict:
    """greedy vs mean vs risk-averse out of sample (:func:`judgecal.calibrate.summaries.compare_summaries`)
    on the fit's own labelled rows, or {"available": False, "reason"} saying why not (ratings
    without a distribution, counted; no fit; too few labels)."""
    from dataclasses import replace

    from judgecal.calibrate.baselines import FitContext
    from judgecal.calibrate.evaluate import _clean
    from judgecal.calibrate.fit import map_expert_scale
    from judgecal.calibrate.summaries import compare_summaries

    if rows.summaries is None:
        return {"available": False, "n_without_distribution": rows.no_distribution, "n_ok": n_ok,
                "reason": f"greedy only: {rows.no_distribution} of {n_ok} ok ratings have no stored distribution"}
    if not evaluation.get("fitted") or evaluation.get("kind") not in ("pairwise", "pointwise"):
        return {"available": False, "n_without_distribution": 0, "n_ok": n_ok,
                "reason": "not compared: no calibration could be fitted (too few expert labels)"}
    step("comparing the rating summaries (greedy, mean, risk-averse) out of sample")
    variants, verbs, target = {}, {}, None
    for name, scores in rows.summaries.items():
        pair, point, verb, info = family_inputs(replace(rows, score=scores), density)
        variants[name] = pair if objective == "pairwise" else point
        verbs[name] = verb
        if objective == "pointwise" and point is not None:
            target = map_expert_scale(point.expert, tuple(info["expert_scale"]), tuple(evaluation["scale"]))
    if any(v is None for v in variants.values()):
        return {"available": False, "n_without_distribution": 0, "n_ok": n_ok, "reason": "not compared: no labelled rows"}
    ctx = FitContext(l_ref=float(evaluation["l_ref"]), scale=tuple(evaluation["scale"]), p_bounds=tuple(p_bounds),
                     expert_scale=tuple(info.get("expert_scale") or ()) or None, density=density, signed=signed,
                     gamma_max=gamma_max)
    try:
        out = compare_summaries(variants, kind=objective, ctx=ctx, folds=folds, seed=seed, n_bootstrap=n_bootstrap,
                                verbosity=verbs, target=target, risk_k=risk_k)
    except (FitError, UsageError) as exc:
        return {"available": False, "n_without_distribution": 0, "n_ok": n_ok, "reason": f"not compared: {exc}"}
    return _clean({"available": True, "n_without_distribution": 0, "n_ok": n_ok, **out})


def _guard_flags(evaluation: dict, rows: FamilyRows, keys: dict, fixed_l_ref) -> None:
    """Flag degenerate answers among the judge's rated responses of the family (every one, not
    only the expert-labelled): ``evaluation["flags"]`` gets one {"code", "message", "models"} per
    code of :mod:`judgecal.calibrate.guards` (empty, constant, far-short answers; ``check`` fails
    on them unless allowed) and ``evaluation["data"]["degenerate_answers"]`` the per-model flags.
    Far-short is measured against the fit's L_ref with its short-side floor."""
    from judgecal.calibrate.fit import default_l_ref
    from judgecal.calibrate.guards import family_flags, model_flags
    from judgecal.calibrate.penalty import DEFAULT_SHORT_FLOOR

    flags = evaluation.setdefault("flags", [])
    evaluation["data"]["degenerate_answers"] = {}  # present: the guards ran (check reads it)
    rids = sorted(r for r in rows.score if r in keys and r in rows.length)
    if not rids:
        return
    params = evaluation.get("params") if isinstance(evaluation.get("params"), dict) else {}
    l_ref = evaluation.get("l_ref") or fixed_l_ref or default_l_ref([rows.length[r] for r in rids])
    floor = params.get("short_floor") or DEFAULT_SHORT_FLOOR
    per_model = model_flags([keys[r][0] for r in rids], [keys[r][1] for r in rids], [keys[r][2] for r in rids],
                            [keys[r][3] for r in rids], [rows.length[r] for r in rids], float(l_ref), floor=floor)
    flags.extend(family_flags(per_model))
    evaluation["data"]["degenerate_answers"] = per_model


def _numeric_warnings(evaluation: dict, caught: list) -> None:
    """Report the RuntimeWarnings numpy/scipy raised during an evaluation in its ``warnings``
    (never on the terminal), once each; an overflow also marks the fit not converged."""
    msgs = list(dict.fromkeys(str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)))
    for w in caught:
        if not issubclass(w.category, RuntimeWarning):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    if not msgs:
        return
    evaluation.setdefault("warnings", [])
    evaluation["warnings"] += [f"numerical warning during the fit: {m}" for m in msgs]
    if any("overflow" in m for m in msgs) and isinstance(evaluation.get("params"), dict):
        evaluation["params"]["converged"] = False
        evaluation["warnings"].append("the fit overflowed: it is reported as not converged (rescale the scores)")


def run_fit(family: str, judge: str, *, url: str | None = None, **settings) -> dict:
    """Evaluate and store a calibration; returns the stored row as a dict (see :func:`fit_row`).

    Raises FitError (with the raw verbosity figures in the message when they exist) when the
    family has too few expert labels rated by the judge."""
    evaluation, ctx = evaluate_family(family, judge, url=url, **settings)
    (settings.get("step") or no_step)("storing the calibration")
    if not evaluation.get("fitted"):
        raw = (evaluation.get("methods") or {}).get("raw") or {}
        extra = ""
        if raw.get("verbosity_win_rate") is not None:
            extra = f" (raw verbosity win-rate {raw['verbosity_win_rate']:.3f} on {evaluation.get('n_verbosity')} pairs; `judgecal report` shows it)"
        raise FitError(f"{family} / {judge}: {evaluation.get('no_fit_reason')}{extra}")
    params = dict(evaluation["params"], signed=bool(ctx["signed"]), gamma_max=ctx["gamma_max"],
                  summary=ctx["summary"], risk_k=ctx["risk_k"])
    stored = {k: v for k, v in evaluation.items() if k != "points"}
    points = _subsample_points(evaluation.get("points") or {}, seed=ctx["seed"])
    engine = get_engine(url)
    with session_scope(engine) as s:
        row = m.Calibration(
            task_family_id=ctx["task_family_id"], judge_id=ctx["judge_id"], method="polylog",
            objective=ctx["objective"], length_unit=ctx["length_unit"], tokenizer=ctx["tokenizer"],
            l_ref=float(params["l_ref"]), gamma=float(params["gamma"]), p=float(params["p"]),
            p_min=float(ctx["p_bounds"][0]), p_max=float(ctx["p_bounds"][1]),
            scale_min=float(ctx["scale"][0]), scale_max=float(ctx["scale"][1]), n=int(params["n"]),
            converged=bool(params["converged"]), loss=float(params["loss"]), folds=int(ctx["folds"]),
            n_bootstrap=int(ctx["n_bootstrap"]), seed=ctx["seed"], density_exemption=bool(ctx["density"]),
            params=params, metrics=stored, data={"points": points, **evaluation["data"]},
            judgecal_version=__version__, created_at=m.utcnow(),
        )
        s.add(row)
        s.flush()
        out = fit_row(row, ctx["task_family"], ctx["judge"])
    engine.dispose()
    return out


def _subsample_points(points: dict, seed: int) -> dict:
    out = {}
    for key, block in points.items():
        if not block:
            out[key] = block
            continue
        n = len(next(iter(v for v in block.values() if isinstance(v, list))))
        if n <= MAX_STORED_POINTS:
            out[key] = block
            continue
        idx = np.sort(np.random.default_rng(seed).choice(n, MAX_STORED_POINTS, replace=False))
        out[key] = {k: ([v[i] for i in idx] if isinstance(v, list) else v) for k, v in block.items()}
    return out


METHOD_FIGURES = ("agreement", "agreement_ci", "agreement_cv", "agreement_cv_ci", "agreement_cv_gain",
                  "agreement_cv_gain_ci", "gain_from_ties_cv", "gain_from_decisive_cv", "raw_ties_broken_cv",
                  "minus_length_rule_cv", "spearman", "spearman_cv", "spearman_ci", "kendall", "kendall_cv",
                  "mae", "mae_cv", "verbosity_win_rate", "verbosity_win_rate_ci", "length_preference", "slope")


def fit_row(row: m.Calibration, family: str, judge: str) -> dict:
    """A stored calibration as a flat dict (what `fit --list`, `fit --format json` and `export
    calibrations` show): the polylog parameters and headline figures, plus ``methods`` (every
    method's in-sample and cross-validated figures), ``comparison`` (best method out of sample,
    gap to the published calibration with its CI), ``length_rule``, ``lean`` and ``selection``
    (the nested cross-validated recommendation); None where the fit predates them."""
    metrics = row.metrics or {}
    methods = metrics.get("methods", {})
    raw, cal = methods.get("raw", {}), methods.get("polylog", {})
    params = row.params or {}
    return {
        "id": row.id, "task_family": family, "judge": judge, "created_at": iso_utc(row.created_at),
        "objective": row.objective, "length_unit": row.length_unit, "tokenizer": row.tokenizer,
        "l_ref": row.l_ref, "gamma": row.gamma, "p": row.p, "p_bounds": [row.p_min, row.p_max],
        "signed": bool(params.get("signed", False)), "gamma_max": params.get("gamma_max"),
        "short_floor": params.get("short_floor"),
        "scale": [_finite_or_none(row.scale_min), _finite_or_none(row.scale_max)],
        "gamma_ci": params.get("gamma_ci"), "p_ci": params.get("p_ci"),
        "n": row.n, "converged": row.converged, "loss": row.loss, "folds": row.folds, "n_bootstrap": row.n_bootstrap,
        "seed": row.seed, "density_exemption": row.density_exemption,
        "at_bound": {k: v for k, v in (params.get("at_bound") or {}).items() if v},
        "agreement_raw": raw.get("agreement", raw.get("spearman")), "agreement_calibrated": cal.get("agreement", cal.get("spearman")),
        "agreement_cv_raw": raw.get("agreement_cv", raw.get("spearman_cv")),
        "agreement_cv_calibrated": cal.get("agreement_cv", cal.get("spearman_cv")),
        "verbosity_win_rate_raw": raw.get("verbosity_win_rate"), "verbosity_win_rate_calibrated": cal.get("verbosity_win_rate"),
        "methods": {name: {k: fig.get(k) for k in METHOD_FIGURES if k in fig} for name, fig in methods.items()},
        "comparison": metrics.get("comparison"), "length_rule": metrics.get("length_rule"),
        "lean": metrics.get("lean"), "selection": metrics.get("selection"),
        "identification": metrics.get("identification"), "flags": metrics.get("flags", []),
        "warnings": metrics.get("warnings", []), "judgecal_version": row.judgecal_version,
        "fingerprint": (row.data or {}).get("fingerprint"),
        "summary": fitted_summary(row)[0], "risk_k": fitted_summary(row)[1], "summaries": metrics.get("summaries"),
    }


def fitted_summary(row: m.Calibration) -> tuple[str, float]:
    """(rating summary, k) a stored calibration was fitted on (``params``; a row stored before
    summaries existed was fitted on greedy scores)."""
    params = row.params or {}
    return str(params.get("summary") or "greedy"), float(params.get("risk_k", DEFAULT_RISK_K))


def refuse_summary_mismatch(row: m.Calibration, summary: str, risk_k: float, family: str) -> None:
    """Refuse applying calibration ``row`` to ratings summarised another way (UsageError naming
    both): a penalty fitted on greedy scores is not one fitted on means."""
    from judgecal.calibrate.summaries import label

    fs, fk = fitted_summary(row)
    if fs != summary or (fs == "risk-averse" and abs(fk - risk_k) > 1e-12):
        raise UsageError(f"calibration {row.id} ({family}) was fitted on the {label(fs, fk)} rating summary, not "
                         f"{label(summary, risk_k)}: pass --summary {fs}" + (f" --risk-k {fk:g}" if fs == "risk-averse" else "")
                         + f" or refit with `judgecal fit --summary {summary}`")


def _finite_or_none(x):
    return None if x is None or not np.isfinite(x) else float(x)


def stored_params(row: m.Calibration) -> dict:
    """The polylog parameters of a stored calibration, as :func:`judgecal.calibrate.transfer.stored_polylog`
    and :func:`apply_calibration` read them."""
    params = row.params or {}
    out = {"gamma": row.gamma, "p": row.p, "l_ref": row.l_ref, "signed": bool(params.get("signed", row.gamma < 0))}
    for k in ("gamma_ci", "p_ci", "at_bound", "short_floor"):
        if k in params:
            out[k] = params[k]
    if isinstance(params.get("density"), dict):
        out["density"] = params["density"]
    return out


def apply_calibration(row: m.Calibration, scores, lengths, density=None, no_credit=None) -> np.ndarray:
    """Calibrated scores of a stored calibration (the fitted function: clipped to the stored
    scale, signed when the fit was, with its stored short-side floor; a row stored before the
    floor existed has none). Lengths must be in the row's unit/tokenizer; ``density``
    (entropies in bits) is required when the row uses the density exemption; ``no_credit`` (bool
    per response, :func:`judgecal.calibrate.guards.no_credit`): no length credit there."""
    from judgecal.calibrate.transfer import apply_stored

    if row.density_exemption and density is None:
        raise UsageError(f"calibration {row.id} uses the density exemption: it needs the response texts")
    return apply_stored(stored_params(row), (row.scale_min, row.scale_max), np.asarray(scores, dtype=float),
                        np.asarray(lengths, dtype=float), density, no_credit)


def transfer_evaluation(row: m.Calibration, source_family: str, judge: str, target_family: str, *,
                        n_bootstrap: int = 1000, seed: int = 0, url: str | None = None) -> dict:
    """Apply stored calibration ``row`` (fitted on ``source_family``) to ``target_family``'s
    expert labels: :func:`judgecal.calibrate.transfer.evaluate_transfer` with the baselines
    refitted on the source. Lengths in the calibration's unit are computed where missing.

    Both families are read under the rating summary the calibration was fitted on
    (:func:`fitted_summary`: greedy scores, or the mean / risk-averse summary of each rating's
    stored distribution), so a penalty fitted on means is never applied to greedy scores; the
    result names it (``summary``, ``risk_k``).

    Raises UsageError when the calibration cannot be applied (pointwise target labels, no
    labelled pair of the target rated by the judge, the density exemption without texts, ok
    ratings of either family without the distribution a non-greedy summary needs)."""
    from judgecal.calibrate.baselines import FitContext
    from judgecal.calibrate.evaluate import _clean
    from judgecal.calibrate.transfer import evaluate_transfer

    if row.density_exemption:
        raise UsageError(f"calibration {row.id} uses the density exemption: transfer evaluation does not support it")
    engine = get_engine(url)
    with session_scope(engine) as s:
        tgt_id = q.family_id(s, target_family)
        src_id = row.task_family_id
    unit, tok = row.length_unit, row.tokenizer
    summ, k = fitted_summary(row)
    load = dict(length_unit=unit, tokenizer=tok, density=False, verbosity_family_id=None, url=url, summary=summ,
                risk_k=k)
    trows, tpair, tpoint, _, tinfo = load_inputs(engine, tgt_id, row.judge_id, **load)
    srows, spair, _, _, _ = load_inputs(engine, src_id, row.judge_id, **load)
    with session_scope(engine) as s:  # the target's answers, for the degenerate-answer guards
        tkeys = answer_keys(s, trows.score)
    engine.dispose()
    refuse_without_distribution((trows, target_family), (srows, source_family), summary=summ, judge=judge)
    if tpair is None:
        what = "only pointwise expert labels" if tpoint is not None else "no expert-labelled pair"
        raise UsageError(f"calibration {row.id} cannot be evaluated on {target_family!r}: the family has {what} "
                         f"rated by judge {judge!r} (transfer evaluation needs pairwise expert labels)")
    from judgecal.calibrate.fit import check_scores

    check_scores(np.concatenate([tpair.score_a, tpair.score_b]), f"judge {judge!r} in {target_family!r}")
    params = row.params or {}
    sctx = None
    if spair is not None and spair.n >= 10:
        sctx = FitContext(l_ref=row.l_ref, scale=(row.scale_min, row.scale_max), p_bounds=(row.p_min, row.p_max),
                          signed=bool(params.get("signed", False)), gamma_max=params.get("gamma_max"))
    recommended = None
    sel = (row.metrics or {}).get("selection") or {}
    if sel.get("decision") == "keep raw":
        recommended = {"name": "raw", "decision": "keep raw", "reason": sel.get("reason")}
    elif sel.get("decision") == "calibrate" and row.objective != "pairwise":
        recommended = {"name": sel.get("recommended"), "decision": "calibrate", "reason": sel.get("reason"),
                       "error": "it was selected on pointwise expert scores (Spearman); a transfer is judged on pairwise "
                                "labels, where only the stored polylog calibration is applied"}
    elif sel.get("decision") == "calibrate" and sctx is None:
        recommended = {"name": sel.get("recommended"), "decision": "calibrate", "reason": sel.get("reason"),
                       "error": "the source family has fewer than 10 labelled pairs rated by the judge to refit it on"}
    elif sel.get("decision") == "calibrate":
        recommended = _recommended_on(row, sel, sctx, src_id, tgt_id, engine_url=url)
    ev = evaluate_transfer(tpair, stored_params(row), scale=(row.scale_min, row.scale_max),
                           source=spair if sctx else None, source_ctx=sctx, n_bootstrap=n_bootstrap, seed=seed,
                           recommended=recommended)
    ev["source_family"] = source_family
    ev["target_family"] = target_family
    ev["summary"], ev["risk_k"] = summ, k  # as evaluate_family's: the report's entry names it
    ev["calibration_id"] = row.id
    ev["source_objective"] = row.objective
    ident = (row.metrics or {}).get("identification")
    ev["identification"] = ident  # the applied polylog fit's own (on its source family)
    ev["flags"] = []
    if ident and ident.get("identified") is False:
        ev["flags"].append({"code": "not_identified", "message": f"the source calibration (fitted on {source_family}) is "
                                                                  f"not identified: " + "; ".join(ident.get("reasons") or [])})
    ev["data"] = tinfo
    # the guards run on the target's answers too: a calibration applied there must not credit an empty,
    # constant or far-short model of the target (flags in every format; check fails on them unless allowed)
    guard = {"data": {}, "flags": [], "l_ref": row.l_ref, "params": row.params or {}}
    _guard_flags(guard, trows, tkeys, row.l_ref)
    ev["data"] = {**(ev["data"] or {}), "degenerate_answers": guard["data"]["degenerate_answers"]}
    ev["flags"] += [dict(f, message=f"{target_family} (the target): {f['message']}") for f in guard["flags"]]
    if spair is None or spair.n < 10:
        ev["warnings"].append(f"the source family {source_family!r} has fewer than 10 labelled pairs rated by "
                              f"{judge!r}: the baselines could not be refitted there")
    return _clean(ev)


def refuse_without_distribution(*family_rows, summary: str, judge: str) -> None:
    """UsageError when ``summary`` is not greedy and some ok rating of a family has no stored
    distribution; ``family_rows``: (FamilyRows, family name) pairs."""
    if summary == "greedy":
        return
    for rows, family in family_rows:
        if rows.no_distribution:
            raise UsageError(missing_message(rows.no_distribution, rows.status_counts.get("ok", 0), summary,
                                             f"of judge {judge!r} in {family!r}"))


def _recommended_on(row: m.Calibration, sel: dict, sctx, src_id: int, tgt_id: int, engine_url: str | None) -> dict:
    """The source fit's recommended method (nested selection) refitted on the whole source family
    exactly as the selection defined it (its length unit, bounds and L_ref), and the target's
    labelled pairs in that unit: {"name", "decision", "fitted" (a Fitted) or "error", "target"
    (PairData in the method's unit)}."""
    from dataclasses import replace as dc_replace

    from judgecal.calibrate.select import candidates

    unit = sel.get("recommended_unit") or row.length_unit
    units = [row.length_unit] + ([unit] if unit != row.length_unit else [])
    summ, k = fitted_summary(row)
    engine = get_engine(engine_url)
    variants, targets = {}, {}
    try:
        for u in units:
            tok = row.tokenizer if u == "tokens" else None
            if u == "tokens" and tok is None:
                from judgecal.tokens import canonical_name

                tok = canonical_name("smollm2")
            load = dict(length_unit=u, tokenizer=tok, density=False, verbosity_family_id=None, url=engine_url,
                        summary=summ, risk_k=k)
            _, sp, _, _, _ = load_inputs(engine, src_id, row.judge_id, **load)
            _, tp, _, _, _ = load_inputs(engine, tgt_id, row.judge_id, **load)
            variants[u], targets[u] = sp, tp
    finally:
        engine.dispose()
    out = {"name": sel["recommended"], "decision": "calibrate", "reason": sel.get("reason"), "unit": unit}
    if any(v is None for v in variants.values()) or targets.get(unit) is None:
        out["error"] = f"the source or target family has no labelled pair in {unit}"
        return out
    ctx = dc_replace(sctx, l_ref=row.l_ref)
    cands = {c["name"]: c for c in candidates(variants, row.length_unit, ctx, "pairwise")}
    cand = cands.get(sel["recommended"])
    if cand is None:
        out["error"] = f"the recommended method {sel['recommended']!r} is not a candidate of this judgecal version"
        return out
    try:
        out["fitted"] = cand["method"].fit(variants[unit], cand["ctx"])
    except (FitError, UsageError) as exc:
        out["error"] = f"could not be refitted on the source family: {exc}"
        return out
    out["target"] = targets[unit]
    out["description"] = cand["description"]
    return out


# split out (re-exported: callers import them from here)
from judgecal.views.fitlist import (  # noqa: E402,F401
    STALE_TEXT,
    UNKNOWN_FRESHNESS_TEXT,
    list_fits,
    load_calibrations,
    refuse_out_of_scope,
    staleness,
)
