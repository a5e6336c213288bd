"""``judgecal bt``: a Bradley-Terry board from pairwise verdicts.

Per model (one task family, one judge): the Bradley-Terry rating fitted by maximum likelihood
over every model pair the verdicts cover (:mod:`judgecal.calibrate.bt`), on Arena-Hard-Auto's
scale (400 points per factor of 10 in the odds, the baseline at 1000), the win rate against the
baseline derived from it (Arena-Hard-Auto's ``show_result.py``), each with a bootstrap CI over
items, competition ranks, and the counts behind them. Models without a finite rating, and models
with degenerate answers (empty, constant, truncated), are set apart with the reason; verdicts
not used are counted by reason."""

from __future__ import annotations

import numpy as np
from sqlalchemy import select

from judgecal.calibrate import bt, guards
from judgecal.calibrate import stylecontrol as sc
from judgecal.calibrate.ranking import WIN_RATE_DECIMALS, rank_change, shown_ranks
from judgecal.calibrate.separation import covariate_to_drop
from judgecal.db import battles as bq
from judgecal.db import guarddata
from judgecal.db import models as m
from judgecal.db import queries as q
from judgecal.db.browse import judge_ref
from judgecal.db.derived import stored
from judgecal.db.engine import get_engine, session_scope
from judgecal.errors import ChoiceError, NotFoundError, UsageError

OUTCOMES = ("preference", "verdict")
CONTROLS = tuple(sc.CONTROLS)
LENGTH_UNITS = ("tokens", "words", "chars", "bytes")
STYLE_SOURCE = ("Arena-Hard-Auto show_result.py (print_leaderboard_with_style_features) on the features of "
                "utils/add_markdown_info.py; docs/style.md")
_WHY = {"above": "won every battle that links it to the baseline's side: no finite rating (+inf)",
        "below": "lost every battle that links it to the baseline's side: no finite rating (-inf)",
        "unlinked": "no verdict links it to the baseline: no rating"}


def pick_scope(s, families: list[str], judge: str | None) -> tuple[m.Judge, int, str, str | None]:
    """(judge row, family id, family name, note) of a board: the judge and family given, or the
    only ones with usable pairwise verdicts (``note`` then names them). Raises UsageError for
    several families, NotFoundError where nothing fits, :class:`~judgecal.errors.ChoiceError`
    (listing each judge and family with its verdict count) where several do."""
    q.one_family(s, families, "a Bradley-Terry board")
    scopes = bq.verdict_scopes(s)
    if families:
        fid = q.family_id(s, families[0])
        scopes = [x for x in scopes if x[0] == fid]
    if judge:
        jrow = q.judge_by_name(s, judge, {x[1] for x in scopes}, "with pairwise verdicts"
                               + (f" in {families[0]}" if families else ""))
        scopes = [x for x in scopes if x[1] == jrow.id]
    if not scopes:
        where = " and ".join(x for x in ((f"judge {judge!r}" if judge else ""),
                                        (f"task family {families[0]!r}" if families else "")) if x)
        raise NotFoundError("no usable pairwise verdicts (status ok, with a preference)" + (f" for {where}" if where else ""))
    names = dict(s.execute(select(m.TaskFamily.id, m.TaskFamily.name)).all())
    if len(scopes) == 1:
        fid, jid, n = scopes[0]
        jrow = s.get(m.Judge, jid)
        implied = [w for w, given in ((f"judge {jrow.name!r}", judge), (f"task family {names[fid]!r}", families)) if not given]
        note = (" and ".join(implied) + f": the only {'ones' if len(implied) > 1 else 'one'} with pairwise verdicts "
                f"({n} usable)") if implied else None
        return jrow, fid, names[fid], note
    label = q.judge_labels(s)
    jnames = dict(s.execute(select(m.Judge.id, m.Judge.name)).all())
    options = [{"label": f"judge {label[j]} in {names[f]}: {n} verdicts",
                "params": {"judge": judge_ref(label, jnames, j), "family": names[f]}}
               for f, j, n in sorted(scopes, key=lambda x: (names[x[0]], label[x[1]]))]
    raise ChoiceError(f"{len(scopes)} judge/family pairs have pairwise verdicts: "
                      + "; ".join(o["label"] for o in options) + ": choose with --judge and --task-family", options)


def _baseline(data: bq.Battles, baseline: str | None, any_baseline: bool = False) -> tuple[str, str | None]:
    """(baseline, note) of a board: the one given, or the one model the verdicts name as the
    baseline. NotFoundError for a baseline without a usable verdict; ChoiceError (the named
    baselines, or the ten models with the most battles, each with its count) where none is
    implied, unless ``any_baseline``: then the first of those, with a note saying so."""
    counts = np.bincount(np.concatenate([data.a, data.b]), minlength=len(data.models))
    by_battles = sorted(data.models, key=lambda n: (-counts[data.models.index(n)], n))
    if baseline is not None:
        if baseline not in data.models:
            raise NotFoundError(f"baseline {baseline!r} has no usable verdict here; models with the most battles: "
                                + ", ".join(by_battles[:10]))
        return baseline, None
    named = [n for n in data.baseline_side if n in data.models]
    if len(named) == 1:
        return named[0], (f"baseline {named[0]!r}: the model the verdicts name as the baseline "
                          f"({data.baseline_side[named[0]]} verdicts)")
    offered = sorted(named) if named else by_battles[:10]
    if any_baseline:
        return offered[0], (f"baseline {offered[0]!r}: " + ("the first of the baselines the verdicts name" if named else
                                                             "the model with the most battles")
                            + " (no single baseline implied; `judgecal bt --baseline MODEL` anchors another)")
    raise ChoiceError("give --baseline MODEL (the model anchored at 1000 and whose win rate is 50%): "
                      + ("the verdicts name several baselines: " + ", ".join(offered) if named
                         else "the verdicts name none; models with the most battles: " + ", ".join(offered)),
                      [{"label": f"{n}: {counts[data.models.index(n)]} battles", "params": {"baseline": n}}
                       for n in offered])


@stored("bt_board")
def build_bt_board(families=None, judge: str | None = None, baseline: str | None = None, url: str | None = None, *,
                   outcome: str = "preference", n_bootstrap: int = 1000, seed: int = 0, control: str = "none",
                   length_unit: str = "tokens", tokenizer: str = "smollm2", any_baseline: bool = False) -> dict:
    """The Bradley-Terry board of one family and judge (JSON-ready).

    ``outcome``: "preference" (the stored soft verdict P(a preferred): a tie 0.5, a judge's
    probability where it gave one) or "verdict" (a = 1, b = 0, tie = 0.5, as Arena-Hard-Auto
    counts hard verdicts). Every usable verdict is one battle of weight 1 (both orders of a pair
    shown are two battles, as Arena-Hard-Auto counts its two games). ``baseline``: anchored at
    1000 (default: the one model the verdicts name as the baseline; where none is implied, a
    ChoiceError, or with ``any_baseline`` the first named baseline or the model with the most
    battles, noted). Bootstrap: ``n_bootstrap``
    item resamples with ``seed`` (0: no CIs).

    ``control``: "none" (the plain board), or style control (:mod:`judgecal.calibrate.stylecontrol`,
    Arena-Hard-Auto's covariates): "length", "markdown" or "both"; the lengths in ``length_unit``
    ("tokens" under ``tokenizer``, filled as ``judgecal lengths`` does where not stored; "words",
    "chars", "bytes"). A controlled board's rows carry the controlled fit as rating, win_rate,
    coef (with CIs) and the plain fit beside it (rating_uncontrolled, win_rate_uncontrolled and
    their CIs, coef_uncontrolled), rank_uncontrolled, rank_controlled and change (positive:
    moved up under control); ``style`` holds the coefficients ({control, length_unit, tokenizer,
    coefficients: [{feature, description, coef, coef_ci, odds_ratio, odds_ratio_ci, raw_mean, raw_sd,
    meaning}], left_out: [constant columns], source}).

    Returns {task_family, judge (label), judge_ref (what --judge and a URL name it by), baseline,
    outcome, scale, n_battles, n_items, n_models, n_pairs, n_bootstrap, seed, bootstrap: {set_apart, not_converged}, rows: [{rank, model, rating,
    rating_ci, win_rate (%), win_rate_ci, coef, n_battles, n_opponents, n_items, mean_credit}] (a model's
    counts: the battles the fit used), set_apart: [{model, why, n_battles, codes}] (every battle of the
    model; codes "above" / "below" / "unlinked" for a model without a finite rating, or the guards'
    short codes "empty" / "constant" / "truncated" for degenerate answers), left_out: {reason: n},
    notes: [...]}; n_battles, n_items, n_pairs count every usable verdict.

    Gaming guards (docs/style.md, "Gaming guards"): models whose answers are empty, constant or
    truncated (:func:`judgecal.calibrate.guards.model_flags`, the publish board's guards) are set
    apart, their battles kept in the fit; a controlled board's rows carry ``flags`` (messages) and
    ``flag_codes``: "style-outside" for a model whose mean Markdown density is far above the
    others' (:func:`judgecal.calibrate.stylecontrol.far_outside`), whose controlled figures are
    then capped at its uncontrolled ones (:func:`judgecal.calibrate.stylecontrol.no_lift`)."""
    if outcome not in OUTCOMES:
        raise UsageError(f"outcome must be one of {', '.join(OUTCOMES)}")
    engine = get_engine(url)
    try:
        with session_scope(engine) as s:
            if baseline is not None and s.scalar(select(m.Response.id).where(m.Response.model == baseline).limit(1)) is None:
                # before any choice of judge or family: a choice whose every link ends on this error is a dead end
                raise NotFoundError(f"baseline {baseline!r} has no usable verdict here: no answer of that model "
                                    "in the database")
            jrow, fid, fam, note = pick_scope(s, list(families or []), judge)
            data = bq.battles(s, fid, jrow.id)
            judge_label = q.judge_labels(s)[jrow.id]
            jref = q.judge_reference(s, jrow)
    finally:
        engine.dispose()
    if control not in CONTROLS:
        raise UsageError(f"control must be one of {', '.join(CONTROLS)}")
    if length_unit not in LENGTH_UNITS:
        raise UsageError(f"length unit must be one of {', '.join(LENGTH_UNITS)}")
    notes = [note] if note else []
    left = dict(data.left_out)
    y = data.preference if outcome == "preference" else data.verdict_credit
    keep = np.isfinite(y)
    if not keep.all():
        left["verdict without a, b or tie (--outcome verdict)"] = int((~keep).sum())
    if not keep.any():
        raise NotFoundError(f"no usable pairwise verdict of judge {judge_label!r} in {fam}")
    a, b, it, y = data.a[keep], data.b[keep], data.item[keep], y[keep]
    base, bnote = _baseline(data, baseline, any_baseline)
    if bnote:
        notes.append(bnote)
    models = data.models
    anchor = models.index(base)
    design = bt.make_design(a, b, y, np.ones(a.size), it, len(models), len(data.items))
    fit = bt.fit_bt(design, anchor)
    boot = bt.bootstrap_bt(design, anchor, fit, n_bootstrap, seed) if n_bootstrap else None
    if not fit.converged:
        notes.append(f"the fit did not settle in {bt.MAX_ITER} Newton steps: ratings are the last iterate")
    degenerate = _degenerate(data, keep, models, base, url)
    style = stuffed = None
    if control != "none":
        raw, feats = _raw_style(data.resp_a[keep], data.resp_b[keep], length_unit, tokenizer, url)
        if control in ("markdown", "both"):
            stuffed = _stuffed(data, keep, models, feats, degenerate, fit, length_unit, anchor)
        fit_s = boot_s = None
        if stuffed:  # the coefficients (and the others) from the battles within the range of styles seen
            out_idx = [models.index(n) for n in stuffed]
            clean = ~(np.isin(a, out_idx) | np.isin(b, out_idx))
            try:
                cols, constant, collinear, separated, fit_c, boot_c = _controlled_fit(a, b, y, it, raw, control, clean, models,
                                                                           data, anchor, n_bootstrap, seed)
                lost = sorted(set(fit_c.set_apart) - set(fit.set_apart) - set(out_idx))
                why = ", ".join(models[i] for i in lost) + " would have no rating"
            except UsageError:  # every column constant over the other battles
                lost, why = [-1], "no style column varies over the other battles"
            if lost:  # a flagged model was the only link of others: keep every battle
                notes.append("the style-outside models' battles are kept in the controlled fit: without them " + why)
                stuffed_fit = None
            else:
                stuffed_fit = _controlled_fit(a, b, y, it, raw, control, np.ones(a.size, dtype=bool), models, data,
                                              anchor, n_bootstrap, seed)
                fit_s, boot_s = stuffed_fit[4], stuffed_fit[5]
                notes.append("the style coefficients and the controlled ratings of the other models are fitted without "
                             "the battles of the style-outside models (" + ", ".join(sorted(stuffed)) + "); theirs come "
                             "from the fit with every battle, capped at their uncontrolled ratings")
            if stuffed_fit is None:
                cols, constant, collinear, separated, fit_c, boot_c = _controlled_fit(
                    a, b, y, it, raw, control, np.ones(a.size, dtype=bool), models, data, anchor, n_bootstrap, seed)
                fit_s, boot_s = fit_c, boot_c
        else:
            cols, constant, collinear, separated, fit_c, boot_c = _controlled_fit(
                a, b, y, it, raw, control, np.ones(a.size, dtype=bool), models, data, anchor, n_bootstrap, seed)
        if not fit_c.converged:
            notes.append(f"the style-controlled fit did not settle in {bt.MAX_ITER} Newton steps: its figures are the "
                         "last iterate")
        if constant:
            notes.append("style columns constant over the battles, left out of the control (no sd to standardise by): "
                         + ", ".join(constant))
        if collinear:
            notes.append("style columns not identified apart from the models' ratings and the other columns (a "
                         "feature that only one model's answers carry, or features that always come together: its "
                         "coefficient and the model's rating cannot be told apart), left out of the control: "
                         + ", ".join(collinear))
        if separated:
            notes.append("style columns without a finite coefficient (separation: the battles where they differ are "
                         "won by one side, so the fit runs off to infinity or does not settle), left out of the "
                         "control: " + ", ".join(separated))
        if boot_c is not None and boot_c.n_style_separated:
            notes.append(f"bootstrap (style-controlled): {boot_c.n_style_separated} of {n_bootstrap} resamples gave a "
                         f"coefficient that puts some battle beyond +-{sc.MAX_COEF:g} log-odds (separation within the "
                         "resample): it counts as infinite there, so a CI bound may be infinite")
        if boot_c is not None and (boot_c.n_set_apart or boot_c.n_not_converged):
            notes.append(f"bootstrap (style-controlled): {boot_c.n_set_apart} of {n_bootstrap} resamples left some model "
                         f"without a finite rating, {boot_c.n_not_converged} did not settle (left out of the CIs)")
        style = _style_block(control, length_unit, tokenizer, cols, constant, fit_c, boot_c, separated, collinear)
    rating = bt.ratings(fit.coef)
    rows, apart = [], []
    n_all = np.bincount(np.concatenate([a, b]), minlength=len(models))
    inside = np.ones(len(models), dtype=bool)
    inside[list(fit.set_apart)] = False
    fitted = inside[a] & inside[b]  # the battles the fit used (per model: its counts below)
    a, b, it, y = a[fitted], b[fitted], it[fitted], y[fitted]
    n_b = np.bincount(np.concatenate([a, b]), minlength=len(models))
    credit = np.bincount(a, weights=y, minlength=len(models)) + np.bincount(b, weights=1 - y, minlength=len(models))
    for i, name in enumerate(models):
        if i in fit.set_apart:
            apart.append({"model": name, "why": _WHY[fit.set_apart[i]], "n_battles": int(n_all[i]),
                          "codes": [fit.set_apart[i]]})
            continue
        if name in degenerate:
            flags = degenerate[name]
            apart.append({"model": name, "why": "degenerate answers, not ranked (as the publish board sets them apart): "
                                                + "; ".join(f["message"] for f in flags),
                          "n_battles": int(n_all[i]), "codes": [guards.SHORT_CODES[f["code"]] for f in flags]})
            continue
        opp = set(b[a == i].tolist()) | set(a[b == i].tolist())
        r_ci = bt.percentile_ci(bt.ratings(boot.coef[:, i])) if boot is not None else None
        rows.append({
            "model": name, "rating": float(rating[i]), "rating_ci": r_ci,
            "win_rate": float(100 * bt.win_rate(rating[i], 1000.0)),
            "win_rate_ci": None if r_ci is None else [float(100 * bt.win_rate(v, 1000.0)) for v in r_ci],
            "coef": float(fit.coef[i]), "n_battles": int(n_b[i]), "n_opponents": len(opp),
            "n_items": int(np.unique(np.concatenate([it[a == i], it[b == i]])).size),
            "mean_credit": float(credit[i] / n_b[i]) if n_b[i] else None,
        })
    rows.sort(key=lambda r: (-r["rating"], r["model"]))
    for r, k in zip(rows, shown_ranks([round(r["win_rate"], WIN_RATE_DECIMALS) for r in rows], WIN_RATE_DECIMALS)):
        r["rank"] = k
    rows = [{"rank": r.pop("rank"), **r} for r in rows]
    if degenerate:
        notes.append(f"{len(degenerate)} model(s) set apart for degenerate answers (empty, constant or truncated: the "
                     "guards of the publish board): " + ", ".join(sorted(degenerate)) + "; their battles stay in the fit "
                     "(as Arena-Hard-Auto keeps every battle), so the ranked models' ratings are those of the full fit")
    if style is not None:
        rows = _controlled_rows(rows, models, fit, boot, fit_c, boot_c, stuffed or {}, fit_s, boot_s)
        if stuffed:
            notes.append(f"{len(stuffed)} model(s) with a Markdown density far outside the other models' "
                         f"({', '.join(sorted(stuffed))}): style control cannot correct a style beyond the range it "
                         "was fitted on reliably, so their controlled rating is at most their uncontrolled one "
                         "(flag 'style-outside'; docs/style.md)")
    if boot is not None and (boot.n_set_apart or boot.n_not_converged):
        notes.append(f"bootstrap: {boot.n_set_apart} of {n_bootstrap} resamples left some model without a finite rating "
                     f"(its CI bound is then infinite), {boot.n_not_converged} did not settle (left out of the CIs)")
    pairs = {(min(x, z), max(x, z)) for x, z in zip(data.a[keep].tolist(), data.b[keep].tolist())}
    return {
        "task_family": fam, "judge": judge_label, "judge_ref": jref, "baseline": base, "outcome": outcome,
        "scale": {"scale": bt.SCALE, "base": bt.BASE, "init_rating": bt.INIT_RATING,
                  "source": "Arena-Hard-Auto show_result.py (compute_mle_elo, predict_win_rate)"},
        "n_battles": int(keep.sum()), "n_items": int(np.unique(data.item[keep]).size), "n_models": len(models), "n_pairs": len(pairs),
        "n_bootstrap": int(n_bootstrap), "seed": int(seed),
        "bootstrap": None if boot is None else {"set_apart": boot.n_set_apart, "not_converged": boot.n_not_converged},
        "loglik": fit.loglik, "converged": fit.converged, "control": control, "style": style,
        "rows": rows, "set_apart": apart, "left_out": left, "notes": notes,
    }



def _raw_style(resp_a, resp_b, unit: str, tokenizer: str, url: str | None) -> tuple[np.ndarray, dict]:
    """The unstandardised style differences (n, 4) of the battles whose answers are ``resp_a``,
    ``resp_b`` (response ids), and {response id: (length, headers, list items, bold)}: lengths in ``unit`` (tokens filled where not stored, as
    ``judgecal lengths`` does; ReadOnlyError on a read-only database) and the Markdown counts."""
    tok = None
    if unit == "tokens":
        from judgecal.tokens import canonical_name

        tok = canonical_name(tokenizer)
    ids = np.unique(np.concatenate([resp_a, resp_b])).tolist()

    def read() -> dict:
        engine = get_engine(url)
        try:
            with session_scope(engine) as s:
                return bq.answer_style(s, ids, unit, tok)
        finally:
            engine.dispose()

    feats = read()
    missing = [i for i in ids if i not in feats]
    if missing:  # token lengths not stored yet: fill them, then read them
        from judgecal.tokens import fill_lengths

        fill_lengths(tokenizer, url, response_ids=missing)
        feats = read()
        still = [i for i in ids if i not in feats]
        if still:
            raise NotFoundError(f"{len(still)} answers have no {unit} length under tokenizer {tok}")
    fa = np.array([feats[i] for i in resp_a.tolist()], dtype=float).reshape(-1, 4)
    fb = np.array([feats[i] for i in resp_b.tolist()], dtype=float).reshape(-1, 4)
    return sc.raw_features(fa[:, 0], fb[:, 0], fa[:, 1:], fb[:, 1:]), feats


def _style_block(control, unit, tokenizer, cols, constant, fit_c, boot_c, separated=(), collinear=()) -> dict:
    coefs = []
    for j, c in enumerate(cols):
        g = float(fit_c.gamma[j])
        ci = bt.percentile_ci(boot_c.gamma[:, j]) if boot_c is not None else None
        coefs.append({
            "feature": c["feature"], "description": c["description"], "coef": g, "coef_ci": ci,
            "odds_ratio": _exp(g), "odds_ratio_ci": None if ci is None else [_exp(v) for v in ci],
            "raw_mean": c["mean"], "raw_sd": c["sd"], "meaning": sc.meaning(c["feature"], g),
        })
    return {"control": control, "length_unit": unit, "tokenizer": tokenizer if unit == "tokens" else None,
            "coefficients": coefs, "left_out": constant, "collinear": list(collinear), "separated": list(separated),
            "source": STYLE_SOURCE,
            "scale": "log-odds per standard deviation of the standardised column (features of a minus b)"}


def _exp(x: float) -> float:
    """exp(x), inf where it overflows (a coefficient that runs off: separation), without numpy's warning."""
    return float(np.exp(x)) if x < 709 else float("inf")


def _controlled_rows(rows: list[dict], models: list[str], fit, boot, fit_c, boot_c, stuffed: dict[str, str],
                     fit_s=None, boot_s=None) -> list[dict]:
    """The plain rows with the controlled fit as rating / win_rate / coef and the plain one
    beside it; sorted and ranked by the controlled win rate. A model of ``stuffed`` ({model:
    flag message}) takes its controlled figures from ``fit_s`` / ``boot_s`` (the controlled fit
    with its battles) and is not lifted by the control: its controlled coefficient (and each
    resample's) is at most its uncontrolled one (:func:`judgecal.calibrate.stylecontrol.no_lift`)."""
    out = []
    for r in rows:
        i = models.index(r["model"])
        rating = float(bt.ratings(fit_c.coef[i]))
        r_ci = bt.percentile_ci(bt.ratings(boot_c.coef[:, i])) if boot_c is not None else None
        out.append({
            "model": r["model"], "rating": rating, "rating_ci": r_ci,
            "win_rate": float(100 * bt.win_rate(rating, 1000.0)),
            "win_rate_ci": None if r_ci is None else [float(100 * bt.win_rate(v, 1000.0)) for v in r_ci],
            "rank_uncontrolled": r["rank"], "rating_uncontrolled": r["rating"], "rating_uncontrolled_ci": r["rating_ci"],
            "win_rate_uncontrolled": r["win_rate"], "win_rate_uncontrolled_ci": r["win_rate_ci"],
            "n_battles": r["n_battles"], "n_opponents": r["n_opponents"], "n_items": r["n_items"],
            "mean_credit": r["mean_credit"], "coef": float(fit_c.coef[i]), "coef_uncontrolled": r["coef"],
            "flags": [], "flag_codes": [],
        })
        if r["model"] in stuffed:
            o = out[-1]
            rating = float(bt.ratings(fit_s.coef[i]))
            cap = float(sc.no_lift(fit_s.coef[i], fit.coef[i]))
            lifted = float(bt.ratings(fit_s.coef[i])) - float(bt.ratings(cap)) >= 0.05  # visible at one decimal
            o["coef"], o["rating"] = cap, float(bt.ratings(cap))
            o["win_rate"] = float(100 * bt.win_rate(o["rating"], 1000.0))
            if boot_s is not None:
                o["rating_ci"] = bt.percentile_ci(bt.ratings(sc.no_lift(boot_s.coef[:, i], boot.coef[:, i])))
                o["win_rate_ci"] = [float(100 * bt.win_rate(v, 1000.0)) for v in o["rating_ci"]]
            o["flags"].append(stuffed[r["model"]] + (f"; the controlled fit gave {rating:.1f}, above its uncontrolled "
                                                     f"{r['rating']:.1f}: capped there" if lifted else
                                                     "; its controlled rating is not above its uncontrolled one"))
            o["flag_codes"].append("style-outside")
    out.sort(key=lambda r: (-r["rating"], r["model"]))
    for r, k in zip(out, shown_ranks([round(r["win_rate"], WIN_RATE_DECIMALS) for r in out], WIN_RATE_DECIMALS)):
        r["rank_controlled"] = k
        r["change"] = rank_change(r["rank_uncontrolled"], k)
    return [{"rank": r["rank_controlled"], **r} for r in out]


def _answers(data: bq.Battles, keep: np.ndarray, models: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(response ids, model codes) of the distinct answers of the usable battles."""
    rid = np.concatenate([data.resp_a[keep], data.resp_b[keep]])
    mo = np.concatenate([data.a[keep], data.b[keep]])
    rid, first = np.unique(rid, return_index=True)
    return rid, mo[first]


def _degenerate(data: bq.Battles, keep: np.ndarray, models: list[str], base: str, url: str | None) -> dict[str, list[dict]]:
    """{model: guard flags} of the models whose answers are empty, constant or truncated
    (:func:`judgecal.calibrate.guards.model_flags`, the flags the win-rate board and the publish
    board read; :data:`judgecal.calibrate.guards.NO_GAIN_CODES` only): over each model's
    distinct answers in the battles, the same bytes (stored SHA-256) being the same answer and
    lengths in characters against the baseline's answer to the same item (the median of its
    answers there; an item the baseline did not answer gives no ratio), as the win-rate board
    (the publish board's pairwise source) reads them. The baseline itself is never set apart."""
    rid, mo = _answers(data, keep, models)
    engine = get_engine(url)
    try:
        with session_scope(engine) as s:
            ident = guarddata.answer_identities(s, rid.tolist())
    finally:
        engine.dispose()
    rows = [ident[r] for r in rid.tolist()]
    item = np.array([x[0] for x in rows], dtype=np.int64)
    key = [x[1] for x in rows]
    words = np.array([x[2] for x in rows], dtype=float)
    length = np.array([x[3] for x in rows], dtype=float)
    bi = models.index(base)
    ref_of: dict[int, list[float]] = {}
    for it_, le in zip(item[mo == bi].tolist(), length[mo == bi].tolist()):
        ref_of.setdefault(it_, []).append(le)
    med = {i: float(np.median(v)) for i, v in ref_of.items()}
    l_ref = np.array([med.get(i, np.nan) for i in item.tolist()])
    flags = guards.model_flags(mo, item, key, words, length, l_ref, reference="the baseline's length")
    out = {}
    for code, fl in flags.items():
        bad = [f for f in fl if f["code"] in guards.NO_GAIN_CODES]
        if bad and code != bi:
            out[models[code]] = bad
    return out


def _stuffed(data: bq.Battles, keep: np.ndarray, models: list[str], feats: dict, degenerate: dict, fit,
             unit: str, anchor: int) -> dict[str, str]:
    """{model: flag message} of the ranked models whose mean Markdown density is far outside
    the other ranked models' (:func:`judgecal.calibrate.stylecontrol.far_outside`). The
    baseline is compared with, never flagged: it is the anchor (1000 under any control), and
    every battle of an AlpacaEval-shaped board is one of its."""
    rid, mo = _answers(data, keep, models)
    f = np.array([feats[r] for r in rid.tolist()], dtype=float).reshape(-1, 4)
    dens = sc.model_densities(mo, f[:, 0], f[:, 1:], len(models))
    share = sc.model_shares(mo, f[:, 1:], len(models))
    ranked = [i for i, n in enumerate(models) if i not in fit.set_apart and n not in degenerate]
    per = unit.rstrip("s")
    out = {}
    for i, hits in sc.far_outside(dens, [i for i in ranked if i != anchor], ranked, share).items():
        out[models[i]] = ("Markdown density far above the other models': " + "; ".join(_outside_reason(h, i, models, per)
                                                                                       for h in hits)
                          + "; style control corrects within the range of styles it was fitted on, not beyond it")
    return out


def _outside_reason(h: dict, i: int, models: list[str], per: str) -> str:
    """One hit of :func:`judgecal.calibrate.stylecontrol.far_outside` in words."""
    feat, d = h["feature"], h["density"]
    with_ = [models[g] for g in h["group"] if g != i]
    together = f" (with {', '.join(sorted(with_))})" if with_ else ""
    if h["highest"] == 0:
        return (f"{feat} {d:.4f} per {per}, a feature no other model{' outside the group' if with_ else ''} uses"
                f"{together} (its coefficient would rest on these answers alone)")
    if with_:
        return (f"{feat} {d:.4f} per {per}{together}: the group's lowest density is "
                f"{h['low'] / h['highest']:.1f} times the "
                f"highest of the rest ({h['highest']:.4f}; a group flagged above {sc.FAR_OUTSIDE_GROUP:g} times)")
    return (f"{feat} {d:.4f} per {per}, {d / h['highest']:.1f} times the highest of the others ({h['highest']:.4f}; "
            f"flagged above {sc.FAR_OUTSIDE:g} times)")


def _controlled_fit(a, b, y, it, raw, control, sel, models, data, anchor, n_bootstrap, seed):
    """(columns, constant columns, collinear columns, separated columns, fit, bootstrap) of the
    style-controlled model on the battles ``sel`` (bool mask), the columns standardised over those
    battles. A column not identified apart from the models' ratings and the columns before it
    (:func:`judgecal.calibrate.stylecontrol.collinear`, on the battles the fit uses: none of a
    model set apart by :func:`judgecal.calibrate.bt.linked`) is left out first.

    A column whose coefficient has no finite maximum is left out and the model refitted
    without it, as a constant column is: separation is decided from the battles by Konis's linear
    program: :func:`judgecal.calibrate.separation.covariate_to_drop` names the column, one at a
    time (of the columns a separating direction moves, the first whose removal alone ends the
    separation, else the first of them), whatever size Newton's last step left it at.
    Where the data overlap (a finite maximum), a coefficient the optimum puts out of bounds
    (:func:`judgecal.calibrate.stylecontrol.separated`, :func:`~judgecal.calibrate.stylecontrol.run_off`:
    collinear columns running off against each other) or a fit that does not settle is left out
    too; a resample whose coefficient runs past
    :data:`judgecal.calibrate.stylecontrol.MAX_COEF` holds +-inf there (its CI bound is then
    infinite, never the last iterate of a run-off fit), counted in the bootstrap's
    ``n_style_separated``."""
    Z, cols, constant = sc.style_matrix(raw[sel], control)
    if not cols:
        raise UsageError(f"every style column of --control {control} ({', '.join(constant)}) is constant over the "
                         "battles: nothing to control for")
    # on the battles the fit uses: a model set apart (bt.linked: it won or lost all its battles) has none there,
    # and two columns may be equal on the others only (a direction between them would change no probability)
    apart = list(bt.linked(a[sel], b[sel], np.ones(int(sel.sum())), y[sel], len(models), anchor))
    among = ~(np.isin(a[sel], apart) | np.isin(b[sel], apart))
    off = sc.collinear(a[sel][among], b[sel][among], len(models), anchor, Z[among])
    collinear = [c["feature"] for c, o in zip(cols, off) if o]
    cols, Z = [c for c, o in zip(cols, off) if not o], Z[:, ~off]
    if not cols:
        raise UsageError(f"no style column of --control {control} is identified apart from the models' ratings "
                         f"(collinear: {', '.join(collinear)}; constant: {', '.join(constant) or 'none'}): nothing to "
                         "control for")
    separated: list[str] = []
    while True:
        d_c = bt.make_design(a[sel], b[sel], y[sel], np.ones(int(sel.sum())), it[sel], len(models), len(data.items),
                             features=Z)
        fit_c = bt.fit_bt(d_c, anchor)
        drop = covariate_to_drop(d_c, anchor)  # decided by the data, not by where Newton stopped
        if drop is not None:
            off = np.arange(fit_c.gamma.size) == drop
        else:
            off = sc.separated(fit_c.gamma, Z)
        if not off.any():
            off = sc.run_off(fit_c.gamma, Z)
        if not off.any() and not fit_c.converged and fit_c.gamma.size:
            # quasi-separation: step halving keeps the run-off coefficient below the bound within MAX_ITER
            # steps (seen: headers -8.4, bold 6.5, ratings CI [-5e18, 2e23] on LLMBar Natural, GPT-4/CoT):
            # leave out the largest coefficient, the one running off
            off = np.arange(fit_c.gamma.size) == int(np.argmax(np.abs(fit_c.gamma)))
        if not off.any():
            break
        if off.sum() > 1:  # one at a time, the largest first: the others may settle once it is out
            off = np.arange(off.size) == int(np.argmax(np.where(off, np.abs(np.nan_to_num(fit_c.gamma, nan=np.inf)), -1)))
        separated += [c["feature"] for c, o in zip(cols, off) if o]
        cols = [c for c, o in zip(cols, off) if not o]
        Z = Z[:, ~off]
        if not cols:
            raise UsageError(f"no style column of --control {control} has a finite coefficient (separation: "
                             + ", ".join(separated) + "; constant: " + (", ".join(constant) or "none")
                             + "): nothing to control for")
    boot_c = bt.bootstrap_bt(d_c, anchor, fit_c, n_bootstrap, seed) if n_bootstrap else None
    if boot_c is not None:  # a resample whose fit ran off: its coefficients beyond the bound count as infinite
        off = sc.separated(boot_c.gamma, Z) & np.isfinite(boot_c.gamma)
        big = sc.separated(boot_c.coef) & np.isfinite(boot_c.coef)
        boot_c.n_style_separated = int((off.any(axis=1) | big.any(axis=1)).sum())
        boot_c.gamma = np.where(off, np.copysign(np.inf, boot_c.gamma), boot_c.gamma)
        boot_c.coef = np.where(big, np.copysign(np.inf, boot_c.coef), boot_c.coef)
    return cols, constant, collinear, separated, fit_c, boot_c
