"""``judgecal leaderboard --baseline MODEL``: win rates against a baseline from pairwise verdicts.

Per model (one task family, one judge): the raw win rate (AlpacaEval's definition), the
length-controlled win rate (AlpacaEval 2.0's GLM, :mod:`judgecal.calibrate.glm_lc`), the
calibrated win rate (the seed's polynomial log-length penalty fitted on the judge's own
verdicts, with the gaming guard of :mod:`judgecal.calibrate.winrate_penalty`), each with a
bootstrap CI over instructions, ranks and rank changes; the verbosity spread of every
verbosity family (``X_verbose`` minus ``X_concise`` under each column) and the implied
verbosity win-rate; optionally rank correlations with an external ranking (``compare_to``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from scipy.special import expit
from sqlalchemy import select
from threadpoolctl import threadpool_limits

from judgecal.calibrate import glm_lc, guards
from judgecal.calibrate.identify import winrate_identification
from judgecal.calibrate.ranking import WIN_RATE_DECIMALS, rank_change, shown_ranks
from judgecal.calibrate.winrate import bootstrap_means, head_to_head, item_weights, rank_correlation
from judgecal.calibrate.winrate_penalty import (DEFAULT_FLOOR, DEFAULT_P_BOUNDS, fit_penalty, fit_strength_many,
                                                implied_verbosity_win_rate)
from judgecal.db import boarddata
from judgecal.db import models as m
from judgecal.db import queries as q
from judgecal.db import verdicts as vq
from judgecal.db.derived import stored
from judgecal.db.engine import get_engine, session_scope
from judgecal.errors import ChoiceError, NotFoundError, UsageError
from judgecal.views.winrate_files import (  # noqa: F401 (re-exported)
    GLM_WEIGHT_COLUMNS,
    MAX_GLM_WEIGHT,
    parse_number,
    read_ranking,
    read_weights,
)

COLUMNS = ("raw", "lc", "calibrated")
VERBOSE, CONCISE = "_verbose", "_concise"
#: a model whose most common answer covers at least this share of its items is flagged (one
#: definition for every mode: judgecal.calibrate.guards)
CONSTANT_SHARE = guards.CONSTANT_SHARE
#: LC is flagged as not identified when fewer than this many of a model's answers lie on one side
#: of the baseline's length: AlpacaEval reads the GLM at equal length, and with (almost) every
#: answer on one side the length term and the model's bias cannot be told apart (on the shared
#: data the most one-sided real models have 8 of 805 answers longer than the baseline's)
LC_MIN_SIDE = 5
#: an answer given verbatim to at least this many instructions of one model earns no brevity credit
REPEATED_ANSWER = guards.REPEATED_ANSWER
#: a bootstrap interval of a fitted column at most this wide (points) has no width: it is not shown
ZERO_WIDTH = 1e-9


def pick_scope(s, baseline: str, families: list[str], judge: str | None) -> tuple[m.Judge, int, str, str | None]:
    """(judge row, task family id, family name, note) of a win-rate board against ``baseline``.

    What the data implies is chosen: the judges and families are narrowed to those whose
    pairwise verdicts hold ``baseline``'s answers on one side (:func:`judgecal.db.browse.baseline_models`);
    a judge or family not given is the only one left, and ``note`` then names it ("judge X and
    task family F: the only ones with verdicts against B"; None when everything was given). A
    judge name that several judges share resolves to the one with such verdicts.

    Raises :class:`~judgecal.errors.ChoiceError` for several families given (one option each), or (a
    UsageError listing each (judge, family) with its verdict count and the options that
    choose it) where several remain, NotFoundError where no verdict exists at all."""
    from judgecal.db.browse import baseline_models

    q.one_family(s, families, "win-rate mode")
    scopes = [b for b in baseline_models(s) if b["model"] == baseline]
    if judge:
        jrow = q.judge_by_name(s, judge, {b["judge_id"] for b in scopes}, f"with verdicts against {baseline!r}")
        scopes = [b for b in scopes if b["judge_id"] == jrow.id]
    if families:
        q.family_ids(s, families)  # NotFoundError for an unknown family
        scopes = [b for b in scopes if b["task_family"] == families[0]]
    if judge and families:
        return jrow, q.family_ids(s, families)[0], families[0], None
    if len(scopes) == 1:
        b = scopes[0]
        jrow = s.get(m.Judge, b["judge_id"])
        implied = [w for w, given in (("judge " + repr(jrow.name), judge), ("task family " + repr(b["task_family"]), families))
                   if not given]
        note = (" and ".join(implied) + f": the only {'ones' if len(implied) > 1 else 'one'} with pairwise verdicts "
                f"against {baseline!r} ({b['verdicts']} verdicts)" + (f" by judge {jrow.name!r}" if judge else "")
                + (f" in {b['task_family']}" if families else ""))
        return jrow, q.family_ids(s, [b["task_family"]])[0], b["task_family"], note
    if not scopes and not judge and not families:
        others = sorted({b["model"] for b in baseline_models(s)})
        if others:
            raise NotFoundError(f"no pairwise verdicts against baseline {baseline!r}; baselines with verdicts: "
                                + ", ".join(others[:10]) + (f" and {len(others) - 10} more" if len(others) > 10 else ""))
    if not scopes:  # the judge / family given has no verdict against this baseline: say so, list what has
        given = " and ".join(x for x in ((f"judge {judge!r}" if judge else ""),
                                        (f"task family {families[0]!r}" if families else "")) if x)
        have = [b for b in baseline_models(s) if b["model"] == baseline]
        where = "; ".join(sorted({f"judge {b['judge']} in {b['task_family']}" for b in have})[:10])
        raise NotFoundError(f"no pairwise verdicts against baseline {baseline!r} for {given}"
                            + (f"; verdicts against it exist for: {where}" if where else
                               f"; no judge has verdicts against {baseline!r}"))
    options = [{"label": f"judge {b['judge']} in {b['task_family']}: {b['verdicts']} verdicts against {baseline}",
                "params": {"judge": b["judge_ref"], "family": b["task_family"]}}
               for b in sorted(scopes, key=lambda b: (b["task_family"], b["judge"]))]
    given = " and ".join(x for x in ((f"judge {judge!r}" if judge else ""), (f"family {families[0]!r}" if families else "")) if x)
    raise ChoiceError(f"{len(scopes)} judge/family pairs have pairwise verdicts against {baseline!r}"
                      + (f" for {given}" if given else "") + ": "
                      + "; ".join(o["label"] for o in options) + ": choose with --judge and --task-family", options)


def verbosity_families(models: list[str]) -> list[tuple[str, str, str]]:
    """(family stem, longer variant, shorter variant) for every model set that differs only by a
    ``_verbose`` / ``_concise`` suffix: (X_verbose, X_concise) when both exist, else
    (X_verbose, X) or (X, X_concise)."""
    have = set(models)
    stems = {mm[: -len(VERBOSE)] for mm in models if mm.endswith(VERBOSE)} | {mm[: -len(CONCISE)] for mm in models if mm.endswith(CONCISE)}
    out = []
    for stem in sorted(stems):
        v, c = stem + VERBOSE, stem + CONCISE
        if v in have and c in have:
            out.append((stem, v, c))
        elif v in have and stem in have:
            out.append((stem, v, stem))
        elif c in have and stem in have:
            out.append((stem, stem, c))
    return out


#: --lc-regulariser choices (docs/leaderboard.md)
REGULARISERS = ("auto", "alpaca-eval", "verdicts", "none")
#: --sort-by choices: AlpacaEval's column names and judgecal's additions
SORT_COLUMNS = ("length_controlled_winrate", "win_rate", "calibrated_win_rate", "discrete_win_rate", "avg_length",
                "n_total", "model")
#: share of a model's instructions that must be AlpacaEval 2.0's for the packaged difficulty to apply
ALPACA_COVERAGE = 0.9
#: flag codes shown in cells, with what each means (the legend printed under every table)
FLAG_LEGEND = {
    "baseline": "the baseline (50% by construction)",
    "few": "fewer verdicts than --min-items",
    "missing": "instructions of the baseline without a verdict of this model (n_missing)",
    "empty": "empty answers (no length credit)",
    "constant": "the same answer to many instructions (no length credit)",
    "truncated": "truncated answers: median length at or below the floor squared of the baseline's (no gain)",
    "far-short": "answers below the short-side floor (credit capped)",
    "gamed": "a gamed baseline of the LC regulariser",
    "lc-unidentified": "LC not identified (fewer than 5 answers on one side of the baseline's length): no LC value",
    "cal-unidentified": "calibration not identified (all ties, no length variation, too few verdicts, gamma at its "
                        "bound or unpinned; the notes say which): no calibrated value",
    "bound": "a parameter of the calibration fit sits at its bound (the notes say which)",
}


@stored("winrate_board", unless=lambda p: p["lc_weights"] is not None or p["compare_to"] is not None)
def build_winrate_board(baseline: str, families=None, judge: str | None = None, url: str | None = None, *,
                        length_unit: str = "chars", tokenizer: str | None = None, n_bootstrap: int = 1000, seed: int = 0,
                        short_floor: float = DEFAULT_FLOOR, p_bounds: tuple[float, float] = DEFAULT_P_BOUNDS,
                        signed: bool = False, lc_weights: Path | None = None, compare_to: Path | None = None,
                        compare_column: str | None = None, min_items: int = 30, lc_regulariser: str = "auto",
                        joint: bool = False, sort_by: str = "length_controlled_winrate", summary: str = "greedy",
                        risk_k: float = 1.0) -> dict:
    """The win-rate leaderboard as a dict (docs/leaderboard.md lists every key).

    Every model's figures come from its own verdicts, the baseline's answers and fixed
    reference data (AlpacaEval's packaged difficulty and gamed-baseline regulariser, or the
    gamed baselines' verdicts in the database): adding or removing other models changes none
    of them, unless ``joint`` asks for the instruction difficulty and the calibration strength
    to be estimated from every model in the database together.

    Raises NotFoundError (no verdicts, unknown baseline), UsageError (several judges/families,
    bad options, a regulariser that is not available, ``summary`` mean / risk-averse where a
    verdict has no stored distribution: :func:`judgecal.db.verdicts.baseline_verdicts`),
    InputError (bad --lc-weights / --compare-to file)."""
    from judgecal.calibrate.summaries import check_summary, label, large_outside_note, missing_message, summary_note

    check_summary(summary, risk_k)
    if length_unit not in vq.LENGTH_UNITS:
        raise UsageError(f"--length-unit must be one of {', '.join(vq.LENGTH_UNITS)}")
    if length_unit == "tokens" and not tokenizer:
        raise UsageError("--length-unit tokens needs --tokenizer NAME")
    if lc_regulariser not in REGULARISERS:
        raise UsageError(f"--lc-regulariser must be one of {', '.join(REGULARISERS)}")
    if sort_by not in SORT_COLUMNS:
        raise UsageError(f"--sort-by must be one of {', '.join(SORT_COLUMNS)}")
    if compare_column is not None and not compare_to:
        raise UsageError(f"--compare-column {compare_column!r} names a column of --compare-to FILE.csv, which is not "
                         "given: give --compare-to too, or drop --compare-column")
    if tokenizer and length_unit != "tokens":
        raise UsageError(f"--tokenizer {tokenizer!r} applies to --length-unit tokens, not {length_unit}: give "
                         "--length-unit tokens, or drop --tokenizer")
    if lc_weights and lc_regulariser in ("verdicts", "none"):
        raise UsageError(f"--lc-weights replaces the GLM weights of AlpacaEval's regulariser; --lc-regulariser "
                         f"{lc_regulariser} does not use them (drop --lc-weights, or give --lc-regulariser alpaca-eval)")
    weights = read_weights(Path(lc_weights)) if lc_weights else None
    external, no_score = read_ranking(Path(compare_to), compare_column) if compare_to else (None, {})
    engine = get_engine(url)
    with session_scope(engine) as s:
        jrow, fid, fam, chosen_note = pick_scope(s, baseline, list(families or []), judge)
        jref = q.judge_reference(s, jrow)
        data = vq.baseline_verdicts(s, fid, jrow.id, baseline, "chars", summary=summary, risk_k=risk_k)
        if data.no_distribution:
            raise UsageError(missing_message(data.no_distribution, data.n_ok, summary,
                                             f"(pairwise verdicts) of judge {jrow.name!r} in {fam}").replace(" ok ratings", " ok verdicts"))
        if not len(data):
            known = sorted(s.scalars(select(m.Response.model).join(m.Item, m.Item.id == m.Response.item_id)
                                     .where(m.Item.task_family_id == fid).distinct()))
            hint = "" if baseline in known else f" (no model {baseline!r} in {fam}; models: {', '.join(known[:10])}{'...' if len(known) > 10 else ''})"
            if data.left_out:
                hint += " (left out: " + ", ".join(f"{n} {why}" for why, n in sorted(data.left_out.items())) + ")"
            raise NotFoundError(f"no usable verdicts of judge {jrow.name!r} against baseline {baseline!r} in {fam}{hint}")
        ids, unit_len = [], None
        if length_unit != "chars":
            ids = sorted(set(data.response_id.tolist()) | set(data.baseline_response_id.tolist()))
            unit_len = boarddata.lengths(s, ids, length_unit, tokenizer)
        gamed_models = [baseline + VERBOSE, baseline + CONCISE]
        gamed_outputs = vq.model_outputs(s, fid, [baseline] + gamed_models, "chars")
    engine.dispose()
    missing = [i for i in ids if i not in unit_len] if unit_len is not None else []
    if missing:  # token lengths not stored yet: fill them (as `judgecal lengths` does), then read them
        from judgecal.tokens import fill_lengths

        fill_lengths(tokenizer, url, response_ids=missing)
        engine = get_engine(url)
        with session_scope(engine) as s:
            unit_len = boarddata.lengths(s, ids, length_unit, tokenizer)
        engine.dispose()
    # BLAS threads only add synchronisation to these small per-model products (measured 4x
    # slower with 2 threads on a busy 2-core machine), so the fits run single-threaded
    with threadpool_limits(1):
        board = _compute(data, baseline, fam, jrow.name, length_unit, tokenizer, unit_len, gamed_models, gamed_outputs,
                        weights, lc_weights, (external, no_score), compare_to, n_bootstrap, seed, short_floor, p_bounds,
                        signed, min_items, lc_regulariser, joint, sort_by)
    board["summary"] = label(summary, risk_k)
    board["chosen"] = chosen_note
    board["judge_ref"] = jref
    if chosen_note:  # said in every format: what the data implied was chosen, and named
        board["notes"].insert(0, f"chosen: {chosen_note}")
    if data.large_outside:  # a mean over a sliver of the judgment is not ranked without a word
        n_out = sum(data.large_outside.values())
        board["notes"].insert(0, large_outside_note(n_out, data.n_ok, summary, risk_k, data.large_outside)
                              .replace(" ok ratings", " ok verdicts"))
    if summary != "greedy":  # said in every format (notes: table footer, Markdown, JSON)
        board["notes"].insert(0, summary_note(summary, risk_k, pairwise=True))
    return board


def _packaged_gamed(weights: dict | None, gamed_models: list[str]):
    """(gamed rows [(pref, tanh_len, difficulty)], label) from AlpacaEval's weights (the
    packaged file, or --lc-weights) and the packaged lengths and difficulty of its 805
    instructions: the soft verdicts AlpacaEval's GLM of each gamed baseline predicts."""
    from judgecal import alpaca_reference as ref

    ins = ref.instructions()
    W = weights if weights is not None else read_weights(ref.packaged_weights_path())
    lacking = [g for g in gamed_models if g not in W]
    if lacking:
        raise UsageError(f"--lc-weights has no row for {', '.join(lacking)} (the gamed baselines of the regulariser)")
    out = []
    for g in gamed_models:
        keys = sorted(k for k in ins.lengths[g] if k in ins.lengths[ref.BASELINE])
        t = glm_lc.std_delta_len([ins.lengths[g][k] for k in keys], [ins.lengths[ref.BASELINE][k] for k in keys])
        d = np.array([ins.difficulty[k] for k in keys])
        out.append((glm_lc.gamed_from_weights(t, d, W[g]), t, d, keys))
    return out


def _compute(data, baseline, fam, judge_name, length_unit, tokenizer, unit_len, gamed_models, gamed_outputs, weights,
             weights_path, external, compare_to, n_bootstrap, seed, short_floor, p_bounds, signed, min_items,
             lc_regulariser, joint, sort_by) -> dict:
    from judgecal import alpaca_reference as ref

    notes: list[str] = []
    models = data.models  # sorted; data's rows are in (model, item) order
    mcode = {mm: i for i, mm in enumerate(models)}
    items = sorted(set(data.items) | set(gamed_outputs.get(baseline, {})))
    icode = {it: i for i, it in enumerate(items)}
    n = len(data)
    model = data.model.astype(int)
    item = np.array([icode[it] for it in data.items], dtype=int)[data.item] if n else np.zeros(0, dtype=int)
    pref = data.pref
    lm_chars, lb_chars = data.len_model, data.len_baseline
    order = np.argsort(model, kind="stable")
    bounds = np.searchsorted(model[order], np.arange(len(models) + 1))
    sel_of = {mm: order[bounds[i]:bounds[i + 1]] for mm, i in mcode.items()}
    tanh_len = np.zeros(n)
    for mm, sel in sel_of.items():
        tanh_len[sel] = glm_lc.std_delta_len(lm_chars[sel], lb_chars[sel])

    # ---- instruction difficulty: fixed (AlpacaEval's instructions), none, or joint (--joint)
    packaged = ref.instructions()
    on_alpaca = np.fromiter((it in packaged.difficulty for it in items), dtype=bool, count=len(items))
    pk_diff = np.array([packaged.difficulty.get(it, 0.0) for it in items])
    alpaca_models = {mm for mm, sel in sel_of.items() if sel.size and on_alpaca[item[sel]].mean() >= ALPACA_COVERAGE}
    if joint:
        difficulty = glm_lc.instruction_difficulty(item, model, pref, tanh_len, len(items), len(models))
        diff_row = difficulty[item]
        diff_source = f"estimated jointly from the {len(models)} models in the database (--joint)"
        notes.append(f"--joint: instruction difficulty and calibration strength estimated from every model in the "
                     f"database together: a model's LC and calibrated win rate change when models are added or removed")
    else:
        in_alpaca = np.isin(model, [mcode[mm] for mm in alpaca_models])
        diff_row = np.where(in_alpaca, pk_diff[item], 0.0)
        if alpaca_models == set(models):
            diff_source = "AlpacaEval 2.0's instructions: fixed difficulty packaged with judgecal"
        elif alpaca_models:
            diff_source = (f"fixed (packaged AlpacaEval difficulty) for {len(alpaca_models)} of {len(models)} models; "
                           "none for the others (their instructions are not AlpacaEval's)")
        else:
            diff_source = "none: not AlpacaEval's instructions (the GLM without its difficulty term)"
        if len(alpaca_models) < len(models):
            notes.append("LC: the instructions of " + (f"{len(models) - len(alpaca_models)} models" if alpaca_models else "this family")
                         + " are not AlpacaEval 2.0's: the LC GLM has no difficulty term for them (--joint estimates one "
                         "from every model in the database)")

    # ---- the gamed-baseline regulariser (and the reference for the calibration strength)
    have_gamed = all(g in mcode for g in gamed_models)
    alpaca_ok = baseline == ref.BASELINE and bool(gamed_outputs.get(baseline)) and (
        np.mean([it in packaged.difficulty for it in gamed_outputs[baseline]]) >= ALPACA_COVERAGE)
    choice = lc_regulariser
    if choice == "auto":
        choice = "verdicts" if have_gamed else ("alpaca-eval" if alpaca_ok else "none")
    gamed: list[tuple] = []
    if weights is not None and choice != "alpaca-eval":  # auto chose another regulariser
        used = (f"the judge's verdicts on the gamed baselines {' and '.join(gamed_models)} (in the database)"
                if choice == "verdicts" else "none (not AlpacaEval's baseline on its instructions)")
        raise UsageError(f"--lc-weights replaces the GLM weights of AlpacaEval's regulariser, but --lc-regulariser auto "
                         f"uses {used} here: drop --lc-weights, or give --lc-regulariser alpaca-eval")
    if choice == "verdicts":
        if not have_gamed:
            raise UsageError(f"--lc-regulariser verdicts: no verdicts of {' and '.join(g for g in gamed_models if g not in mcode)} "
                             "against the baseline in the database")
        for g in gamed_models:
            sel = sel_of[g]
            gamed.append((pref[sel], tanh_len[sel], diff_row[sel], [items[i] for i in item[sel]]))
        reg_label = f"the judge's verdicts on the gamed baselines {' and '.join(gamed_models)} (in the database)"
    elif choice == "alpaca-eval":
        if not alpaca_ok:
            raise UsageError(f"--lc-regulariser alpaca-eval: AlpacaEval's regulariser is for baseline {ref.BASELINE!r} on "
                             "AlpacaEval 2.0's instructions" + ("" if baseline == ref.BASELINE else f", not {baseline!r}"))
        gamed = _packaged_gamed(weights, list(ref.GAMED))
        reg_label = (SOURCE_WEIGHTS_FILE.format(weights_path) if weights is not None else ref.SOURCE)
        if judge_name != ref.JUDGE:
            notes.append(f"LC: the packaged regulariser and difficulty were fitted on AlpacaEval's annotator {ref.JUDGE}, "
                         f"not on {judge_name} (AlpacaEval applies them to every annotator too)")
    else:
        reg_label = "none"
        if lc_regulariser == "auto":
            notes.append(f"LC: no regulariser (no verdicts of the gamed baselines {', '.join(gamed_models)} and not "
                         f"AlpacaEval's baseline {ref.BASELINE} on its instructions): LC can drift for models whose answers "
                         "are much shorter or longer than the baseline's")
    notes.append(f"LC regulariser: {reg_label}")
    if joint and gamed and choice == "alpaca-eval":
        notes.append("--joint with the packaged regulariser: the gamed baselines' soft verdicts use the packaged "
                     "difficulty, the models the jointly estimated one")

    # ---- LC, every model at once
    lc_models = [mm for mm in models if mm != baseline]
    fits = glm_lc.fit_lc_many([(pref[sel_of[mm]], tanh_len[sel_of[mm]], diff_row[sel_of[mm]]) for mm in lc_models],
                              [g[:3] for g in gamed])
    lc_of = dict(zip(lc_models, fits))

    # ---- calibrated: the seed's penalty, strength from the gamed baselines (or per model, or joint)
    if unit_len is not None:
        # a length of 0 (an empty answer) is a length, not a missing one
        lm_unit = np.array([unit_len.get(r, np.nan) for r in data.response_id.tolist()], dtype=float)
        lb_unit = np.array([unit_len.get(r, np.nan) for r in data.baseline_response_id.tolist()], dtype=float)
    else:
        lm_unit, lb_unit = lm_chars, lb_chars
    # the guards compare identities only: model, item and text codes stand for the names and SHA-256s
    g_model, g_item, g_key, g_words = model, item, data.text_key, data.n_words
    repeated = guards.no_credit(g_model, g_item, g_key, g_words)
    if repeated.any():
        notes.append(f"calibrated: {int(repeated.sum())} verdicts on answers that are empty or repeated verbatim for "
                     f"{REPEATED_ANSWER} or more instructions earn no credit for brevity (gaming guard)")
    degenerate = guards.model_flags(g_model, g_item, g_key, g_words, lm_unit, lb_unit, floor=short_floor,
                                    reference="the baseline's length")
    degenerate = {models[k]: flags for k, flags in degenerate.items()}  # model codes -> names
    p_cal = np.full(n, np.nan)
    p_smooth = np.full(n, np.nan)
    theta = {}
    cal_pool = joint
    if joint:
        pen = fit_penalty(model, pref, lm_unit, lb_unit, diff_row, len(models), p_bounds, short_floor, signed,
                          no_short_credit=repeated)
        smooth = fit_penalty(model, pref, lm_unit, lb_unit, diff_row, len(models), p_bounds, short_floor, signed,
                             length_term=False)
        p_cal, p_smooth = pen.p_cal, smooth.p_cal
        theta = {mm: float(pen.theta[mcode[mm]]) for mm in models}
        gamma, p_exp, converged, at_bound, cal_fit = pen.gamma, pen.p, pen.converged, pen.at_bound, pen
        strength_from = f"every model in the database together (--joint, {len(models)} models)"
    else:
        ref_rows = None
        if choice == "verdicts":
            gm = np.concatenate([np.full(sel_of[g].size, j) for j, g in enumerate(gamed_models)])
            gs = np.concatenate([sel_of[g] for g in gamed_models])
            ref_rows = (gm, pref[gs], lm_unit[gs], lb_unit[gs], diff_row[gs])
            strength_from = f"the judge's verdicts on the gamed baselines {' and '.join(gamed_models)}"
        elif choice == "alpaca-eval" and length_unit == "chars":
            gm, yy, lm_g, lb_g, dd = [], [], [], [], []
            for j, (gp, _, gd, keys) in enumerate(gamed):
                g = ref.GAMED[j]
                gm.append(np.full(len(keys), j)), yy.append(gp), dd.append(gd)
                lm_g.append([packaged.lengths[g][k] for k in keys]), lb_g.append([packaged.lengths[ref.BASELINE][k] for k in keys])
            ref_rows = (np.concatenate(gm), np.concatenate(yy), np.concatenate(lm_g).astype(float),
                        np.concatenate(lb_g).astype(float), np.concatenate(dd))
            strength_from = ("the gamed baselines' soft verdicts of the packaged AlpacaEval regulariser (characters)"
                             if weights is None else
                             f"the gamed baselines' soft verdicts of the AlpacaEval regulariser with the GLM weights "
                             f"from {weights_path} (--lc-weights; characters)")
        if ref_rows is not None:
            ref_fit = fit_penalty(ref_rows[0], ref_rows[1], ref_rows[2], ref_rows[3], ref_rows[4], 2, p_bounds,
                                  short_floor, signed)
            gamma, p_exp, converged, at_bound, cal_fit = (ref_fit.gamma, ref_fit.p, ref_fit.converged, ref_fit.at_bound,
                                                          ref_fit)
        else:  # no reference: the judge's length preference from the models here (said in the output)
            strength_from = (f"the {len(models)} models in the database (no gamed baselines: the calibrated column "
                             "depends on the model pool)")
            ref_rows, cal_pool = (), True
            notes.append("calibrated: no gamed baselines to estimate the judge's length preference from (their verdicts, "
                         "or AlpacaEval's packaged regulariser with --length-unit chars): gamma and p are fitted on every "
                         "model here together, so the calibrated column changes when models are added or removed "
                         "(raw and LC do not)")
            pool_fit = fit_penalty(model, pref, lm_unit, lb_unit, diff_row, len(models), p_bounds, short_floor, signed,
                                   no_short_credit=repeated)
            gamma, p_exp, converged, at_bound, cal_fit = (pool_fit.gamma, pool_fit.p, pool_fit.converged,
                                                          pool_fit.at_bound, pool_fit)
        if ref_rows is not None:
            offs = gamma * _pen(lm_unit, lb_unit, p_exp, short_floor, repeated)
            per = fit_strength_many([(pref[sel_of[mm]], offs[sel_of[mm]], diff_row[sel_of[mm]]) for mm in models])
            for mm, (th, ps) in zip(models, per):
                sel = sel_of[mm]
                p_cal[sel] = expit(th + ps * diff_row[sel])
                theta[mm] = th
        smooth = fit_strength_many([(pref[sel_of[mm]], 0.0, diff_row[sel_of[mm]]) for mm in models])
        for mm, (th, ps) in zip(models, smooth):
            sel = sel_of[mm]
            p_smooth[sel] = expit(th + ps * diff_row[sel])

    # ---- a fit the verdicts do not identify gives no calibrated column at all (nothing from noise)
    ident = winrate_identification(cal_fit, signed=signed)
    cal_ok = ident["identified"]
    if not cal_ok:
        p_cal[:] = np.nan
        notes.append("calibrated: not identified, no calibrated win rate is shown: " + "; ".join(ident["reasons"]))
    bound_caveats = [c for c in ident["caveats"] if "bound" in c]  # p at a bound (gamma at one is a reason above)
    if bound_caveats:
        notes.append("calibrated: " + "; ".join(bound_caveats))

    # ---- a model flagged for degenerate answers (empty, constant, truncated) gains nothing: its calibrated
    # column is its raw one (the length-free fit, whose mean is the raw win rate), whatever the length term says
    no_gain = [mm for mm in models if cal_ok and mm != baseline
               and any(f["code"] in guards.NO_GAIN_CODES for f in degenerate.get(mm, []))]
    for mm in no_gain:
        p_cal[sel_of[mm]] = p_smooth[sel_of[mm]]
    if no_gain:
        notes.append(f"calibrated: {len(no_gain)} model(s) flagged for empty, constant or truncated answers ({', '.join(no_gain)}) gain "
                     f"nothing from the calibration: their calibrated win rate is their raw one (gaming guard)")

    # ---- per-model rows, bootstrap CIs shared by instruction (Poisson weights keyed by content)
    boot_w = item_weights(items, n_bootstrap, seed) if n_bootstrap > 0 else np.zeros((0, len(items)))
    per_model_pred = {}
    board_rows = []
    no_ci = {"LC": 0, "calibrated": 0}
    all_items = set(gamed_outputs.get(baseline, {})) or set(items)
    all_codes = np.arange(len(items))
    for mm in models:
        sel = sel_of[mm]
        h2h = head_to_head(pref[sel])
        lc = lc_of.get(mm)
        p_lc = lc.p_lc if lc is not None else np.full(sel.size, 0.5)
        # a model that answered every instruction, in order, reads the weights as they are (no copy)
        w_sel = (boot_w if sel.size == len(items) and np.array_equal(item[sel], all_codes)
                 else np.take(boot_w, item[sel], axis=1))
        # (an unidentified calibration's NaN column would drop every row: the raw column stands in, its CI unused)
        ci_raw, ci_lc, ci_cal = bootstrap_means(np.stack([pref[sel], p_lc, p_cal[sel] if cal_ok else pref[sel]], 1), w_sel)
        # a fitted column whose prediction is the same on every instruction (no difficulty term, weights held fixed)
        # has a zero-width bootstrap interval: it measures nothing, so it is not shown (counted in a note)
        if ci_lc is not None and ci_lc[1] - ci_lc[0] <= ZERO_WIDTH:
            ci_lc, no_ci["LC"] = None, no_ci["LC"] + 1
        if cal_ok and ci_cal is not None and ci_cal[1] - ci_cal[0] <= ZERO_WIDTH:
            ci_cal, no_ci["calibrated"] = None, no_ci["calibrated"] + 1
        per_model_pred[mm] = {"items": item[sel], "raw": p_smooth[sel], "lc": p_lc, "calibrated": p_cal[sel]}
        n_missing = len(all_items - {items[i] for i in item[sel]})
        flags, codes = [], []
        if len(sel) < min_items:
            flags.append(f"few verdicts (<{min_items})"), codes.append("few")
        if n_missing:
            flags.append(f"{n_missing} items without a verdict"), codes.append("missing")
        for f in degenerate.get(mm, []):  # empty, constant, far-short (one wording)
            flags.append(f["message"]), codes.append(guards.SHORT_CODES.get(f["code"], f["code"]))
        if mm in gamed_models and gamed and choice == "verdicts":
            flags.append("gamed baseline (LC regulariser)"), codes.append("gamed")
        n_short, n_long = int(np.sum(tanh_len[sel] > 0)), int(np.sum(tanh_len[sel] < 0))
        lc_ok = not (len(sel) > 1 and min(n_short, n_long) < LC_MIN_SIDE)
        if not lc_ok:  # no LC figure at all: a zero-width CI from such a fit is not a measurement
            side = "longer" if n_long < n_short else "shorter"
            flags.append(f"LC not identified: {min(n_short, n_long)} of {len(sel)} answers {side} than the baseline's "
                         "(LC is read at equal length, outside the data: the length term and the model's bias cannot "
                         "be told apart); no LC win rate is shown")
            codes.append("lc-unidentified")
        if not cal_ok:
            flags.append("calibrated not identified: " + "; ".join(ident["reasons"])), codes.append("cal-unidentified")
        if any(at_bound.values()):
            flags.append("calibration fit at a bound: " + "; ".join(
                x for x in ident["reasons"] + ident["caveats"] if "bound" in x)), codes.append("bound")
        lc_wr = (lc.lc_win_rate if lc is not None else 50.0) if lc_ok else None
        board_rows.append({
            "model": mm, **h2h, "mode": "community", "avg_length": int(np.mean(lm_chars[sel])),
            "length_controlled_winrate": lc_wr,
            "lc_standard_error": (float(100 * np.std(p_lc, ddof=1) / np.sqrt(p_lc.size))
                                  if p_lc.size > 1 and lc_ok else None),
            "calibrated_win_rate": (float(100 * np.nanmean(p_cal[sel])) if sel.size else float("nan")) if cal_ok else None,
            "win_rate_ci": ci_raw, "length_controlled_winrate_ci": ci_lc if lc_ok else None,
            "calibrated_win_rate_ci": ci_cal if cal_ok else None,
            "n_items": int(len(sel)), "n_missing": n_missing, "n_verdicts": int(data.n_verdicts[sel].sum()),
            "avg_length_unit": "chars",
            "lc_weights": None if lc is None or not lc_ok else {"w_len": lc.w_len, "w_diff": lc.w_diff, "w_bias": lc.w_bias,
                                                                "C": lc.C},
            "calibrated_strength": theta.get(mm) if cal_ok else None, "flags": flags, "flag_codes": codes,
        })
    for col, k in no_ci.items():
        if k:
            notes.append(f"{col} CI not shown for {k} model(s): the fitted prediction is the same on every instruction "
                         f"(no instruction difficulty; the fitted weights are held fixed), so the bootstrap over "
                         f"instructions gives a zero-width interval, which is no measure of uncertainty")
    nb = len(all_items)
    board_rows.append({
        "model": baseline, "win_rate": 50.0, "standard_error": 0.0, "n_wins": 0, "n_wins_base": 0, "n_draws": nb,
        "n_total": nb, "discrete_win_rate": 50.0, "mode": "community",
        "avg_length": int(np.mean(list(gamed_outputs[baseline].values()))) if gamed_outputs.get(baseline) else None,
        "length_controlled_winrate": 50.0, "lc_standard_error": None, "calibrated_win_rate": 50.0 if cal_ok else None,
        "win_rate_ci": None, "length_controlled_winrate_ci": None, "calibrated_win_rate_ci": None,
        "n_items": nb, "n_missing": 0, "n_verdicts": 0, "avg_length_unit": "chars", "lc_weights": None,
        "calibrated_strength": None, "flags": ["baseline (50% by construction)"] + (
            [] if cal_ok else ["calibrated not identified: " + "; ".join(ident["reasons"])]),
        "flag_codes": ["baseline"] + ([] if cal_ok else ["cal-unidentified"]),
    })
    # ranks on the displayed values (WIN_RATE_DECIMALS): rows shown alike share a rank; no value, no rank
    for col, key in (("raw", "win_rate"), ("lc", "length_controlled_winrate"), ("calibrated", "calibrated_win_rate")):
        for r, k in zip(board_rows, shown_ranks([r[key] for r in board_rows], WIN_RATE_DECIMALS)):
            r[f"rank_{col}"] = k
    for r in board_rows:
        r["rank_change_lc"] = rank_change(r["rank_raw"], r["rank_lc"])
        r["rank_change_calibrated"] = rank_change(r["rank_raw"], r["rank_calibrated"])
    if sort_by == "model":
        board_rows.sort(key=lambda r: r["model"])
    else:
        board_rows.sort(key=lambda r: (-(r[sort_by] if r[sort_by] is not None and r[sort_by] == r[sort_by] else -np.inf),
                                       r["model"]))

    spreads = []
    by_model = {r["model"]: r for r in board_rows}
    for stem, longer, shorter in verbosity_families(models):
        entry = {"family": stem, "longer": longer, "shorter": shorter}
        for col, key in (("raw", "win_rate"), ("lc", "length_controlled_winrate"), ("calibrated", "calibrated_win_rate")):
            a, b = by_model[longer][key], by_model[shorter][key]
            pl, ps = per_model_pred[longer], per_model_pred[shorter]
            common, il, isr = np.intersect1d(pl["items"], ps["items"], return_indices=True)
            entry["n_common_items"] = int(common.size)
            if a is None or b is None:  # a column not identified for either variant: no spread from it
                entry[f"spread_{col}"] = entry[f"implied_verbosity_win_rate_{col}"] = None
                continue
            entry[f"spread_{col}"] = a - b
            entry[f"implied_verbosity_win_rate_{col}"] = implied_verbosity_win_rate(pl[col][il], ps[col][isr])
        spreads.append(entry)

    comparison = None
    external, no_score = external
    if external is not None:
        matched = [r for r in board_rows if r["model"] in external]
        comparison = {"file": str(compare_to), "n_matched": len(matched),
                      "unmatched_here": sorted(r["model"] for r in board_rows
                                               if r["model"] not in external and r["model"] not in no_score),
                      "unmatched_there": sorted(set(external) - set(by_model)),
                      "no_score_there": sorted(no_score)}
        if no_score:
            shown = ", ".join(f"{mm} (line {ln})" for mm, ln in list(no_score.items())[:10])
            more = f" and {len(no_score) - 10} more" if len(no_score) > 10 else ""
            notes.append(f"--compare-to: {len(no_score)} models of {compare_to} have an empty score cell and were left "
                         f"out of the correlations: {shown}{more}")
        for col, key in (("raw", "win_rate"), ("lc", "length_controlled_winrate"), ("calibrated", "calibrated_win_rate")):
            have = [r for r in matched if r[key] is not None]
            comparison[col] = rank_correlation([r[key] for r in have], [external[r["model"]] for r in have],
                                               n_bootstrap, seed)
            if col == "calibrated" and not cal_ok:
                comparison[col]["undefined"] = "the calibrated column is not identified (see the notes)"
            elif len(have) < len(matched):
                comparison[col]["left_out"] = sorted(r["model"] for r in matched if r[key] is None)

    left_out = dict(data.left_out)
    nan_pref = int(np.sum(~np.isfinite(pref)))
    if nan_pref:
        left_out["no usable preference"] = nan_pref
    used_codes = sorted({c for r in board_rows for c in r["flag_codes"]}, key=list(FLAG_LEGEND).index)
    return {
        "mode": "win_rate", "task_family": fam, "judge": judge_name, "baseline": baseline,
        "length_unit": length_unit, "tokenizer": tokenizer, "sort_by": sort_by, "joint": joint,
        "calibration": {"method": "polylog_pairwise", "gamma": gamma, "p": p_exp, "p_bounds": list(p_bounds),
                        "short_floor": short_floor, "signed": signed, "l_ref": "the baseline's answer to the same item",
                        "strength_from": strength_from, "pool_dependent": cal_pool, "converged": converged,
                        "at_bound": at_bound, "identified": cal_ok, "identification": ident},
        "rank_decimals": WIN_RATE_DECIMALS,
        "lc": {"regulariser": reg_label, "regulariser_source": choice,
               "weights_file": str(weights_path) if weights is not None and choice == "alpaca-eval" else None,
               "gamed_baselines": gamed_models if choice == "verdicts"
               else (list(ref.GAMED) if choice == "alpaca-eval" else []), "lambda": glm_lc.GAMED_LAMBDA,
               "difficulty": diff_source, "length_unit": "chars"},
        "n_bootstrap": n_bootstrap, "seed": seed,
        "ci": "95% percentile Poisson bootstrap over instructions (weights seeded by --seed and each instruction's "
              "content key, shared by every model), fitted weights held fixed",
        "rows": board_rows, "verbosity_spreads": spreads, "comparison": comparison,
        "flag_legend": {c: FLAG_LEGEND[c] for c in used_codes},
        "left_out": left_out, "notes": notes,
    }


SOURCE_WEIGHTS_FILE = "AlpacaEval GLM weights of the gamed baselines from {} (--lc-weights), on the packaged instructions"


def _pen(len_model, len_baseline, p, floor, no_short_credit):
    """gamma-free penalty of :func:`judgecal.calibrate.winrate_penalty.pair_penalty` with the
    no-brevity-credit rows floored at 0 (the same rule as fit_penalty)."""
    r = np.maximum(np.log(np.maximum(len_model, 1.0) / np.maximum(len_baseline, 1.0)), np.log(floor))
    r = np.where(no_short_credit, np.maximum(r, 0.0), r)
    return np.sign(r) * np.abs(r) ** p
