"""``judgecal leaderboard``: one row per producing model, raw and calibrated mean judge score
with bootstrap CIs, ranks and rank changes, mean length, verbosity win-rate, multiple-choice
metrics, and flags.

Calibrated scores use, per task family, the newest calibration of (family, judge) (or the one
named by ``calibration``); responses of families without a calibration keep their raw score
and their rows are flagged ``uncalibrated``."""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from judgecal.calibrate.guards import SCORE_NO_GAIN_CODES, SHORT_CODES, model_flags, no_credit
from judgecal.calibrate.metrics import verbosity_win_rate
from judgecal.calibrate.penalty import token_entropy
from judgecal.calibrate.ranking import SCORE_DECIMALS, mean_cis, rank_change, shown_ranks
from judgecal.db import boarddata
from judgecal.db import models as m
from judgecal.db import queries as q
from judgecal.db.derived import stored
from judgecal.db.engine import get_engine, session_scope
from judgecal.db.guarddata import rated_template_keys
from judgecal.errors import ChoiceError, NotFoundError, UsageError
from judgecal.calibrate.summaries import (DEFAULT_RISK_K, check_summary, large_outside_note, missing_message,
                                          summary_note)
from judgecal.calibrate.summaries import label as summary_label
from judgecal.views.fitting import apply_calibration, load_calibrations, refuse_summary_mismatch, staleness

DEFAULTS = {"min_ratings": 30, "max_unparsed": 0.05, "n_bootstrap": 1000, "seed": 0}


def _pick_judge(s, judge: str | None, families=None) -> m.Judge:
    """The judge of the board: ``judge`` (a name several judges share resolves to the one with
    ratings in ``families``, all families when none are given), else the only judge with
    ratings there. Raises NotFoundError (no ratings), ChoiceError (several judges: each with its
    count of ratings, and the ``judge`` value that chooses it)."""
    from sqlalchemy import func, select

    fam_ids = q.family_ids(s, families) if families else None
    stmt = select(m.Rating.judge_id, func.count()).group_by(m.Rating.judge_id)
    if fam_ids is not None:
        stmt = (stmt.join(m.Response, m.Response.id == m.Rating.response_id).join(m.Item, m.Item.id == m.Response.item_id)
                .where(m.Item.task_family_id.in_(fam_ids)))
    counts = dict(s.execute(stmt).all())
    where = f"with ratings in {', '.join(families)}" if families else "with ratings"
    if judge:
        return q.judge_by_name(s, judge, counts, where)
    if len(counts) == 1:
        return s.get(m.Judge, next(iter(counts)))
    if not counts:
        raise NotFoundError("no ratings in the database yet: run `judgecal rate` or import ratings" if not families else
                            f"no judge has ratings in {', '.join(families)} (see `judgecal stats`)")
    from judgecal.db.browse import judge_ref

    label = q.judge_labels(s)
    names = {jid: s.get(m.Judge, jid).name for jid in counts}
    options = sorted(({"label": f"{label[j]}: {n} ratings", "params": {"judge": judge_ref(label, names, j)}}
                      for j, n in counts.items()), key=lambda o: o["label"])
    raise ChoiceError(f"several judges have ratings{' in ' + ', '.join(families) if families else ''} ("
                      + "; ".join(o["label"] for o in options) + "): choose one with --judge", options)


@stored("score_board")
def build_leaderboard(families=None, judge: str | None = None, calibration: str = "latest", url: str | None = None,
                      min_ratings: int = 30, max_unparsed: float = 0.05, n_bootstrap: int = 1000, seed: int = 0,
                      mc_reference: int | None = None, calibration_from: str | None = None, summary: str = "greedy",
                      risk_k: float = DEFAULT_RISK_K, show_unidentified: bool = False) -> dict:
    """The leaderboard as {"judge", "families", "calibrations": {family: id of its own fit},
    "calibrations_from": {family: {"id", "fitted_on": donor family}} (``calibration_from``),
    "stale": {family: True (the data its calibration was fitted on changed since) | False |
    None (freshness unknown: stored before fingerprints)}, "rows": [...]}. Token lengths
    missing under a calibration's tokenizer are computed first.

    Each row: model, n_rated, n_unparsed, n_failed, unparsed_share, mean_raw, mean_raw_ci,
    mean_calibrated, mean_calibrated_ci, rank_raw, rank_calibrated, rank_change (positive =
    moved up; competition ranks on the means as displayed, :data:`judgecal.calibrate.ranking.SCORE_DECIMALS`
    decimals, so means shown alike share a rank), mean_length, length_unit, verbosity_win_rate (raw), verbosity_win_rate_calibrated,
    verbosity_pairs, acc, acc_norm,
    acc_bytes, acc_norm_minus_acc, mc_run, task_families (the families of its scored ratings), stale_calibration, calibration_freshness_unknown (the
    family's applied calibration is stale / of unknown freshness), calibration_not_identified and
    not_identified_reasons (["family: reasons"]: the mean_calibrated, its CI, rank and the
    calibrated verbosity win-rate are then None), fit_at_bound (["family: gamma, p"]),
    degenerate_answers ([{"code", "message"}] of
    :mod:`judgecal.calibrate.guards`: empty, constant or far-short answers), flags (list of
    strings, the degenerate-answer messages included). ``notes``: board-level notes (a
    calibration stored before the short-side floor is applied as fitted, and said so).

    Guards: per family, answers that are empty or repeated verbatim across items
    (:func:`judgecal.calibrate.guards.no_credit`), and every answer of a model flagged for empty,
    constant, truncated or far-short answers in that family
    (:data:`judgecal.calibrate.guards.SCORE_NO_GAIN_CODES`), earn no length credit (calibrated <=
    raw); the stored short-side floor caps the credit of the other short answers.

    ``show_unidentified``: also show the calibrated column of a family whose applied calibration
    is not identified (still flagged ``unident``, the note says so): for diagnostics (the guard
    tests), never for publication; by default such a column is None (nothing from noise).

    ``calibration``: "latest" or one id (of the judge; without ``judge``, its judge is used); see
    :func:`_choose_calibrations` for what is applied where and what is refused (UsageError).

    ``summary``/``risk_k``: the rating summary (:mod:`judgecal.calibrate.summaries`; "summary"
    in the result); refused (UsageError) when an ok rating lacks a stored distribution, or when
    an applied calibration was fitted on another summary."""
    check_summary(summary, risk_k)
    explicit = None if str(calibration) == "latest" else load_calibrations(None, None, calibration, url)[0]
    if judge is None and explicit is not None:  # the calibration names its judge
        judge = str(explicit[0].judge_id)
    engine = get_engine(url)
    with session_scope(engine) as s:
        jrow = _pick_judge(s, judge, families)
        jref = q.judge_reference(s, jrow)
        fam_ids = list(dict.fromkeys(q.family_ids(s, families)))  # a repeated --task-family counts once
        fam_names = {fid: s.get(m.TaskFamily, fid).name for fid in fam_ids}
        rows = boarddata.rated_responses(s, fam_ids, jrow.id, summary, risk_k)
        lacking = sum(r["n_no_distribution"] for r in rows)
        if lacking:
            raise UsageError(missing_message(lacking, sum(r["n_ok"] for r in rows), summary, f"of judge {jrow.name!r}"))
        scored_of: dict[int, list[dict]] = defaultdict(list)  # family id: its scored rows, in rows' order
        for r in rows:
            if r["score"] is not None:
                scored_of[r["family_id"]].append(r)
        rated = set(scored_of)
        cals, transferred, donor_name = _choose_calibrations(jrow, fam_ids, fam_names, rated, explicit,
                                                             calibration_from, url)
        for fid, cal in cals.items():
            refuse_summary_mismatch(cal, summary, risk_k, fam_names[fid])
        calibrated = {}
        length_of: dict[int, float] = {}
        unit_of_family = {}
        # the guards read per scored response its model, item id, template key and n_words (what
        # db/guarddata.answer_keys gives): the first three from the rows, the keys from one query of the texts
        template = rated_template_keys(s, fam_ids, jrow.id) if rated else {}
        guard_flags: dict[str, list[dict]] = defaultdict(list)
        notes: list[str] = [summary_note(summary, risk_k)] if summary != "greedy" else []
        n_outside = sum(r["n_large_outside"] for r in rows)
        if n_outside:  # a mean over a sliver of the judgment is not ranked without a word
            per_model: dict[str, int] = defaultdict(int)
            for r in rows:
                per_model[r["model"]] += r["n_large_outside"]
            notes.append(large_outside_note(n_outside, sum(r["n_ok"] for r in rows), summary, risk_k,
                                            {mo: k for mo, k in per_model.items() if k}))
        unrated = [fam_names[f] for f in fam_ids if f not in rated]
        if unrated:  # never an empty board without a word
            notes.append(f"judge {jrow.name!r} has no scored rating in {', '.join(unrated)} (see `judgecal stats`)")
        for fid in fam_ids:
            frows = scored_of.get(fid, [])
            cal = cals.get(fid)
            unit, tok = (cal.length_unit, cal.tokenizer) if cal else ("words", None)
            unit_of_family[fid] = unit
            ids = [r["response_id"] for r in frows]
            lens = boarddata.unit_lengths(s, frows, fid, jrow.id, unit, tok)
            if cal is not None and unit == "tokens" and len(lens) < len(set(ids)):  # fill, never skip silently
                from judgecal.tokens import fill_lengths

                fill_lengths(tok, url, response_ids=[i for i in ids if i not in lens])
                lens = boarddata.lengths(s, ids, unit, tok)
            length_of.update(lens)
            # the family's scored rows with a length, as columns (the guards and the calibration read them)
            have = frows if len(lens) == len(frows) else [r for r in frows if r["response_id"] in lens]
            models, items = [r["model"] for r in have], [r["item_id"] for r in have]
            tkeys, words = [template.get(r["response_id"]) for r in have], [r["n_words"] for r in have]
            le = [lens[r["response_id"]] for r in have]
            before = {mo: len(v) for mo, v in guard_flags.items()}
            _guard_family(models, items, tkeys, words, le, cal, fam_names[fid] if len(fam_ids) > 1 else None,
                          guard_flags)
            flagged_here = {mo for mo, v in guard_flags.items()
                            if any(f["code"] in SCORE_NO_GAIN_CODES for f in v[before.get(mo, 0):])}
            if cal is None or not frows:
                continue
            dens = None
            if cal.density_exemption:
                txt = boarddata.texts(s, [r["response_id"] for r in have])
                dens = [token_entropy(txt[r["response_id"]]) for r in have]
            guard = no_credit(models, items, tkeys, words)  # every scored answer has its template key
            # a model flagged for empty, constant, truncated or far-short answers in this family gains nothing
            guard = guard | np.array([mo in flagged_here for mo in models], dtype=bool)
            out = apply_calibration(cal, [r["score"] for r in have], le, dens, no_credit=guard)
            calibrated.update({r["response_id"]: float(v) for r, v in zip(have, out)})
            if (cal.params or {}).get("short_floor") is None:
                notes.append(f"calibration {cal.id} ({fam_names[fid]}) was fitted before judgecal had the short-side "
                             f"floor: it is applied as fitted, with an unbounded short side (empty and repeated answers "
                             f"still earn no length credit); refit with `judgecal fit` to get the guard")
        vpairs = boarddata.verbosity_pairs(s, fam_ids)
        mc = boarddata.mc_runs_by_model(s)
        ref_run = s.get(m.McRun, mc_reference) if mc_reference else None
        if mc_reference and ref_run is None:
            raise NotFoundError(f"no multiple-choice run with id {mc_reference} (see `judgecal mc list`)")
        if ref_run is not None and _perplexity_run(ref_run):
            raise UsageError(f"--mc-reference {mc_reference} is an lm-eval perplexity run (no acc/acc_norm): give a "
                             "multiple-choice run (see `judgecal mc list`)")
        ref_metrics = ref_run.metrics if ref_run else None
        cal_ids = {fam_names[f]: c.id for f, c in cals.items() if f not in transferred}
        cal_from = {fam_names[f]: {"id": c.id, "fitted_on": donor_name} for f, c in cals.items() if f in transferred}
        at_bound = {fam_names[f]: [k for k, v in ((c.params or {}).get("at_bound") or {}).items() if v] for f, c in cals.items()}
        advice = {fam_names[f]: _advice(c) for f, c in cals.items()}
    engine.dispose()
    # freshness of each applied calibration, read on its own family (a donor's on the donor family)
    own = {c.id: (c, donor_name if f in transferred else fam_names[f], None) for f, c in cals.items()}
    fresh = staleness(list(own.values()), url)
    stale_of = {f: fresh[c.id] for f, c in cals.items()}

    by_model: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        by_model[r["model"]].append(r)
    in_pairs = {i for pair in vpairs for i in pair}  # the verbosity pairs' answers: all that score_of/model_of serve
    score_of = {r["response_id"]: r["score"] for r in rows if r["score"] is not None and r["response_id"] in in_pairs}
    model_of = {r["response_id"]: r["model"] for r in rows if r["response_id"] in in_pairs}
    table = []
    for model in sorted(set(by_model) | set(mc)):
        rs = by_model.get(model, [])
        ok = [r for r in rs if r["score"] is not None]
        n_unp = sum(r["n_unparsed"] for r in rs)
        n_fail = sum(r["n_failed"] for r in rs)
        n_calls = sum(r["n_ok"] for r in rs) + n_unp + n_fail
        cal_vals = [calibrated.get(r["response_id"], r["score"]) for r in ok]
        (raw_mean, raw_ci), (cal_mean, cal_ci) = mean_cis([[r["score"] for r in ok], cal_vals], n_bootstrap, seed)
        lens = [length_of[r["response_id"]] for r in ok if r["response_id"] in length_of]
        ok_fams = {r["family_id"] for r in ok}
        units = sorted({unit_of_family[f] for f in ok_fams})
        mine = [(c, v) for c, v in vpairs if c in score_of and v in score_of
                and model in (model_of[c], model_of[v])]
        vwr = verbosity_win_rate([score_of[c] for c, _ in mine], [score_of[v] for _, v in mine]) if mine else None
        vwr_cal = (verbosity_win_rate([calibrated.get(c, score_of[c]) for c, _ in mine],
                                      [calibrated.get(v, score_of[v]) for _, v in mine]) if mine else None)
        row = {
            "model": model, "n_rated": len(ok), "n_unparsed": n_unp, "n_failed": n_fail,
            "unparsed_share": (n_unp + n_fail) / n_calls if n_calls else None,
            "mean_raw": None if not ok else raw_mean, "mean_raw_ci": raw_ci,
            "mean_calibrated": None if not ok else cal_mean, "mean_calibrated_ci": cal_ci,
            "mean_length": float(np.mean(lens)) if lens else None, "length_unit": "/".join(units) or None,
            "verbosity_win_rate": vwr, "verbosity_win_rate_calibrated": vwr_cal, "verbosity_pairs": len(mine),
            "uncalibrated": bool(ok) and any(r["response_id"] not in calibrated for r in ok),
            "transferred": bool(ok) and any(f in transferred for f in ok_fams),
            "stale_calibration": bool(ok) and any(stale_of.get(f) is True for f in ok_fams),
            "calibration_freshness_unknown": bool(ok) and any(f in stale_of and stale_of[f] is None for f in ok_fams),
        }
        fams_of_row = {fam_names[f] for f in ok_fams}
        row["task_families"] = sorted(fams_of_row)  # where its scored ratings are: the evidence's families
        row["calibration_not_identified"] = any(advice.get(f, {}).get("identified") is False for f in fams_of_row)
        row["not_identified_reasons"] = [f"{f}: {'; '.join(advice[f]['reasons']) or 'not identified'}"
                                         for f in sorted(fams_of_row) if advice.get(f, {}).get("identified") is False]
        if row["calibration_not_identified"] and not show_unidentified:  # no number from a fit its labels do not determine
            row.update(mean_calibrated=None, mean_calibrated_ci=None, verbosity_win_rate_calibrated=None)
        row["fit_at_bound"] = [f"{f}: {', '.join(at_bound[f])}" for f in sorted(fams_of_row) if at_bound.get(f)]
        row["advice_keep_raw"] = any(advice.get(f, {}).get("decision") == "keep raw" for f in fams_of_row)
        row["advice_other_method"] = sorted({advice[f]["recommended"] for f in fams_of_row if f in advice
                                             and advice[f].get("decision") == "calibrate"
                                             and not str(advice[f].get("recommended") or "").startswith("polylog")})
        row.update(_mc_columns(mc.get(model, []), ref_metrics))
        row["degenerate_answers"] = guard_flags.get(model, [])
        table.append(row)
    rated = [r for r in table if r["mean_raw"] is not None]
    if rated:  # on the displayed means (SCORE_DECIMALS): rows shown alike share a rank; no value, no rank
        rr = shown_ranks([r["mean_raw"] for r in rated], SCORE_DECIMALS)
        rc = shown_ranks([r["mean_calibrated"] for r in rated], SCORE_DECIMALS)
        for r, a, b in zip(rated, rr, rc):
            r.update(rank_raw=a, rank_calibrated=b, rank_change=rank_change(a, b))
    for r in table:
        r.setdefault("rank_raw", None)
        r.setdefault("rank_calibrated", None)
        r.setdefault("rank_change", None)
        r["flags"], r["flag_codes"] = _flags(r, min_ratings, max_unparsed, at_bound)
    table.sort(key=lambda r: (r["rank_calibrated"] is None, r["rank_calibrated"] or 0, r["rank_raw"] is None,
                              r["rank_raw"] or 0, r["model"]))
    for fam in sorted(f for f, a in advice.items() if a.get("identified") is False):
        shown = ("its calibrated values are shown only because show_unidentified was asked (diagnostics, not for "
                 "publication)" if show_unidentified else "so no calibrated value is shown for its models")
        notes.append(f"calibration {advice[fam]['calibration']} ({fam}) is not identified, {shown}: "
                     f"{'; '.join(advice[fam]['reasons']) or 'see judgecal report'}")
    left = {
        "responses whose ratings are all unparsed or failed (no score)": sum(1 for r in rows if r["score"] is None),
        "rated responses without a length in the calibration's unit (kept uncalibrated)":
            sum(1 for r in rows if r["score"] is not None and r["response_id"] not in length_of
                and cals.get(r["family_id"]) is not None),
    }
    return {"judge": jrow.name, "judge_ref": jref, "families": [fam_names[f] for f in fam_ids], "calibrations": cal_ids,
            "summary": summary_label(summary, risk_k),
            "notes": list(dict.fromkeys(notes)),
            "calibrations_from": cal_from,
            "at_bound": {k: v for k, v in at_bound.items() if v},
            "advice": advice,
            "stale": {fam_names[f]: v for f, v in stale_of.items()}, "rows": table,
            "flag_legend": _legend(table),
            "left_out": {k: v for k, v in left.items() if v}}


def _legend(rows: list[dict]) -> dict[str, str]:
    """{code: meaning} of the flag codes the rows use, in :data:`FLAG_LEGEND` order (``rank+2``
    and ``rank-1`` are both ``rank``)."""
    used = {c if not c.startswith("rank") else "rank" for r in rows for c in r["flag_codes"]}
    return {c: m for c, m in FLAG_LEGEND.items() if c in used}


def _choose_calibrations(jrow: m.Judge, fam_ids: list[int], fam_names: dict[int, str], rated: set[int],
                         explicit: tuple | None, calibration_from: str | None, url: str | None):
    """({family id: Calibration row to apply}, family ids calibrated by transfer, donor family name).

    ``explicit`` (a calibration named by id, as (row, family, judge)) must be of the judge, and of
    one of the chosen families unless ``calibration_from`` names its family (it is then the donor,
    applied as a transfer). Without an id: the newest calibration per (family, judge). The donor of
    ``calibration_from`` is the named calibration, else that family's newest of the judge; it is
    applied to the chosen families the judge rated that have no calibration of their own here. A
    donor with the density exemption is refused (as ``judgecal report`` refuses its transfer).
    Raises UsageError, NotFoundError."""
    if explicit is not None:
        row, cfam, cjudge = explicit
        if row.judge_id != jrow.id:
            ids = (f" (id:{row.judge_id})", f" (id:{jrow.id})") if cjudge == jrow.name else ("", "")  # a shared name
            raise UsageError(f"calibration {row.id} is of judge {cjudge!r}{ids[0]}, not {jrow.name!r}{ids[1]}")
        if calibration_from is not None and calibration_from != cfam:
            raise UsageError(f"calibration {row.id} is of task family {cfam!r} but --calibration-from names "
                             f"{calibration_from!r}: name one donor (--calibration-from alone takes that family's newest fit)")
        if row.task_family_id not in fam_ids and calibration_from is None:
            asked = ", ".join(fam_names[f] for f in fam_ids)
            raise UsageError(f"calibration {row.id} is of task family {cfam!r}, not of {asked}: `judgecal leaderboard "
                             f"--calibration {row.id} --calibration-from {cfam}` applies it to other families as a "
                             f"transfer; `judgecal report --calibration {row.id} --task-family F` measures it on F's labels")
        cals = {row.task_family_id: row} if row.task_family_id in fam_ids else {}
    else:
        chosen = load_calibrations([fam_names[f] for f in fam_ids], str(jrow.id), "latest", url) if fam_ids else []
        cals = {c.task_family_id: c for c, _, _ in chosen if c.judge_id == jrow.id}
    transferred: set[int] = set()
    donor_name = None
    if calibration_from:
        if explicit is not None:
            donor, donor_name = explicit[0], explicit[1]
        else:
            found = load_calibrations([calibration_from], str(jrow.id), "latest", url)
            if not found:
                raise NotFoundError(f"no calibration of {calibration_from!r} for judge {jrow.name!r} (run `judgecal fit`)")
            donor, donor_name = found[0][0], found[0][1]
        if donor.density_exemption:
            raise UsageError(f"calibration {donor.id} of {donor_name!r} uses the density exemption: it cannot be applied "
                             f"to another family (fit {donor_name} without --density, or name such a fit with --calibration ID)")
        for fid in fam_ids:
            if fid not in cals and fid in rated:
                cals[fid] = donor
                transferred.add(fid)
    return cals, transferred, donor_name


def _metric(metrics: dict, name: str):
    v = (metrics or {}).get(name)
    return v.get("value") if isinstance(v, dict) else v


#: a score-board row's keys, in the order a row holds them (a CSV of a board without rows has this header)
ROW_COLUMNS = ["model", "n_rated", "n_unparsed", "n_failed", "unparsed_share", "mean_raw", "mean_raw_ci",
               "mean_calibrated", "mean_calibrated_ci", "mean_length", "length_unit", "verbosity_win_rate",
               "verbosity_win_rate_calibrated", "verbosity_pairs", "uncalibrated", "transferred", "stale_calibration",
               "calibration_freshness_unknown", "task_families", "calibration_not_identified", "not_identified_reasons",
               "fit_at_bound",
               "advice_keep_raw", "advice_other_method", "acc", "acc_norm", "acc_bytes", "acc_norm_minus_acc", "mc_run",
               "mc_opposite", "bits_per_byte", "ppl_run", "degenerate_answers", "rank_raw", "rank_calibrated", "rank_change", "flags", "flag_codes"]


def _perplexity_run(run: m.McRun) -> bool:
    """An lm-eval perplexity run (loglikelihood_rolling): it has no acc/acc_norm."""
    return (run.diagnostics or {}).get("output_type") == "loglikelihood_rolling"


def _mc_columns(runs: list, ref_metrics: dict | None) -> dict:
    """A row's multiple-choice columns from the model's stored runs (newest first): acc,
    acc_norm, acc_bytes, acc_norm - acc and ``mc_run`` of its newest multiple-choice run,
    ``mc_opposite`` against ``ref_metrics``; ``bits_per_byte`` and ``ppl_run`` of its newest
    lm-eval perplexity run (None without one)."""
    ppl = next((r for r in runs if _perplexity_run(r)), None)
    ppl_cols = {"bits_per_byte": _metric(ppl.metrics, "bits_per_byte") if ppl else None,
                "ppl_run": ppl.id if ppl else None}
    runs = [r for r in runs if not _perplexity_run(r)]  # the newest multiple-choice run, not a perplexity run
    if not runs:
        return {"acc": None, "acc_norm": None, "acc_bytes": None, "acc_norm_minus_acc": None, "mc_run": None,
                "mc_opposite": False, **ppl_cols}
    run = runs[0]
    acc, norm, byt = (_metric(run.metrics, k) for k in ("acc", "acc_norm", "acc_bytes"))
    opposite = False
    if ref_metrics is not None and None not in (acc, norm):
        d_acc = acc - _metric(ref_metrics, "acc")
        d_norm = norm - _metric(ref_metrics, "acc_norm")
        opposite = d_acc * d_norm < 0
    return {"acc": acc, "acc_norm": norm, "acc_bytes": byt,
            "acc_norm_minus_acc": None if None in (acc, norm) else norm - acc, "mc_run": run.id, "mc_opposite": opposite,
            **ppl_cols}


#: The score board's flag codes (``flag_codes`` of each row; the table and Markdown show the
#: codes and this legend; ``flags`` keeps the full sentences, docs/leaderboard.md)
FLAG_LEGEND = {
    "rank": "rank moved by the calibration (rank+N up, rank-N down)",
    "few": "fewer rated responses than --min-ratings",
    "unparsed": "unparsed or failed share above --max-unparsed",
    "uncal": "no calibration for this family (calibrated = raw)",
    "transfer": "calibration fitted on another family (--calibration-from)",
    "bound": "a parameter of the fit sits at its bound (the flag sentence names it)",
    "unident": "calibration not identified: no calibrated value (the notes say why)",
    "keep-raw": "the advice for this family is keep raw (its CI does not clear raw)",
    "advice": "the advice is another method than the polylog column applies",
    "stale": "the calibration's data changed since it was fitted",
    "fresh?": "calibration stored before fingerprints: freshness unknown",
    "mc-opp": "acc and acc_norm move in opposite directions against --mc-reference",
    "empty": "empty answers (no gain from the calibration)",
    "constant": "the same answer to many items (no gain from the calibration)",
    "truncated": "truncated answers (no gain from the calibration)",
    "far-short": "answers far below L_ref (no gain from the calibration)",
}


def _flags(r: dict, min_ratings: int, max_unparsed: float, at_bound: dict) -> tuple[list[str], list[str]]:
    """(flags, codes): the sentences (docs/leaderboard.md explains each) and their short codes
    (:data:`FLAG_LEGEND`), one code per sentence, in the same order."""
    flags, codes = [], []

    def add(text: str, code: str) -> None:
        flags.append(text)
        codes.append(code)

    if r["rank_change"]:
        sign = "+" if r["rank_change"] > 0 else "-"
        add(f"rank {sign}{abs(r['rank_change'])}", f"rank{sign}{abs(r['rank_change'])}")
    if r["mean_raw"] is not None and r["n_rated"] < min_ratings:
        add(f"few ratings (<{min_ratings})", "few")
    if r["unparsed_share"] is not None and r["unparsed_share"] > max_unparsed:
        add(f"unparsed {r['unparsed_share']:.0%}", "unparsed")
    if r.get("uncalibrated"):
        add("uncalibrated family", "uncal")
    if r.get("transferred"):
        add("calibration from another family", "transfer")
    if r.get("fit_at_bound"):
        add("fit at bound: " + "; ".join(r["fit_at_bound"]), "bound")
    if r.get("calibration_not_identified"):
        add("calibration not identified, no calibrated value: " + " | ".join(r.get("not_identified_reasons") or []),
            "unident")
    if r.get("advice_keep_raw"):
        add("advice: keep raw", "keep-raw")
    for name in r.get("advice_other_method") or []:
        add(f"advice: {name} (the calibrated column applies polylog)", "advice")
    if r.get("stale_calibration"):
        add("stale calibration", "stale")
    elif r.get("calibration_freshness_unknown"):
        add("calibration freshness unknown", "fresh?")
    if r.get("mc_opposite"):
        add("acc/acc_norm opposite", "mc-opp")
    for f in r.get("degenerate_answers") or []:
        add(f["message"], SHORT_CODES.get(f["code"], f["code"]))
    return flags, codes


def _advice(cal) -> dict:
    """What a team should do with a family's applied calibration: {"calibration": id,
    "identified": True | False | None (fitted before identification was tested), "reasons",
    "decision": "calibrate" | "keep raw" | None (no nested selection stored), "recommended",
    "reason"}: the score board's calibrated column applies the polylog fit; "keep raw" and "not
    identified" say that column is not what the evidence supports."""
    metrics = cal.metrics or {}
    ident = metrics.get("identification") or {}
    sel = metrics.get("selection") or {}
    return {"calibration": cal.id, "identified": ident.get("identified") if ident else None,
            "reasons": ident.get("reasons") or [], "decision": sel.get("decision"),
            "recommended": sel.get("recommended"), "reason": sel.get("reason")}


def _guard_family(models: list, items: list, tkeys: list, words: list, le: list, cal, family: str | None,
                  out: dict) -> None:
    """Add each model's degenerate-answer flags (:func:`judgecal.calibrate.guards.model_flags`)
    of one family's rated responses with a length (columns: model, item id, template key, n_words,
    length; a row without a template key is left out) to ``out`` ({model: [{"code", "message"}]});
    far-short is measured against the family's calibration's L_ref and floor (uncalibrated: the
    median length, the default L_ref, and the default floor). ``family`` prefixes the messages
    when the board shows several families."""
    if None in tkeys:
        keep = [i for i, k in enumerate(tkeys) if k is not None]
        models, items, tkeys, words, le = ([col[i] for i in keep] for col in (models, items, tkeys, words, le))
    if not models:
        return
    from judgecal.calibrate.fit import default_l_ref
    from judgecal.calibrate.penalty import DEFAULT_SHORT_FLOOR

    l_ref = cal.l_ref if cal is not None else default_l_ref(le)
    stored = (cal.params or {}).get("short_floor") if cal is not None else None
    per_model = model_flags(models, items, tkeys, words, le, l_ref,
                            floor=stored or DEFAULT_SHORT_FLOOR, floor_applied=cal is None or stored is not None,
                            far_short_gains=False)
    for model, flags in per_model.items():
        out[model] += [{"code": f["code"], "message": f"{family}: {f['message']}" if family else f["message"]}
                       for f in flags]
