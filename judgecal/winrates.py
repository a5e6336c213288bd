"""``judgecal leaderboard --baseline MODEL``: win rates against a baseline from pairwise verdicts.

Per model (one task family, one judge): the raw win rate (AlpacaEval's definition), the
length-controlled win rate (AlpacaEval 2.0's GLM, :mod:`judgecal.calibrate.glm_lc`), the
calibrated win rate (the seed's polynomial log-length penalty fitted on the judge's own
verdicts, with the gaming guard of :mod:`judgecal.calibrate.winrate_penalty`), each with a
bootstrap CI over instructions, ranks and rank changes; the verbosity spread of every
verbosity family (``X_verbose`` minus ``X_concise`` under each column) and the implied
verbosity win-rate; optionally rank correlations with an external ranking (``compare_to``)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
from sqlalchemy import select
from threadpoolctl import threadpool_limits

from judgecal.calibrate import glm_lc, guards
from judgecal.calibrate.ranking import ranks
from judgecal.calibrate.winrate import bootstrap_over_items, discrete_win_rate, rank_correlation, win_rate
from judgecal.calibrate.winrate_penalty import DEFAULT_FLOOR, DEFAULT_P_BOUNDS, fit_penalty, implied_verbosity_win_rate
from judgecal.db import boarddata
from judgecal.db import models as m
from judgecal.db import queries as q
from judgecal.db import verdicts as vq
from judgecal.db.engine import get_engine, session_scope
from judgecal.db.guarddata import answer_keys
from judgecal.errors import InputError, NotFoundError, UsageError
from judgecal.importers.records import read_csv_cells

COLUMNS = ("raw", "lc", "calibrated")
VERBOSE, CONCISE = "_verbose", "_concise"
#: a model whose most common answer covers at least this share of its items is flagged (one
#: definition for every mode: judgecal.calibrate.guards)
CONSTANT_SHARE = guards.CONSTANT_SHARE
#: --lc-weights: a larger weight (logit units) is refused (AlpacaEval's published weights are below 10)
MAX_GLM_WEIGHT = 1000.0
#: LC is flagged as not identified when fewer than this many of a model's answers lie on one side
#: of the baseline's length: AlpacaEval reads the GLM at equal length, and with (almost) every
#: answer on one side the length term and the model's bias cannot be told apart (on the shared
#: data the most one-sided real models have 8 of 805 answers longer than the baseline's)
LC_MIN_SIDE = 5
#: an answer given verbatim to at least this many instructions of one model earns no brevity credit
REPEATED_ANSWER = guards.REPEATED_ANSWER


def _pick_judge(s, judge: str | None) -> m.Judge:
    if judge:
        return q.judge_by_name(s, judge)
    found = vq.judges_with_verdicts(s)
    if not found:
        raise NotFoundError("no pairwise verdicts in the database: import AlpacaEval annotations "
                            "(`judgecal import alpaca-eval results/`) or run `judgecal rate --pairwise --baseline MODEL`")
    if len(found) > 1:
        names = ", ".join(f"{j.name} (id {j.id})" for j in found)
        raise UsageError(f"several judges have pairwise verdicts ({names}): choose one with --judge")
    return found[0]


def _pick_family(s, families: list[str]) -> tuple[int, str]:
    if len(families) > 1:
        raise UsageError("win-rate mode takes one --task-family at a time")
    if families:
        fid = q.family_ids(s, families)[0]
        return fid, families[0]
    counts = vq.verdict_counts(s)
    fids = sorted(fid for fid, by_judge in counts.items() if any(by_judge.values()))
    cands = []
    for fid in fids:
        name = s.get(m.TaskFamily, fid).name
        cands.append((fid, name))
    if len(cands) == 1:
        return cands[0]
    if not cands:
        raise NotFoundError("no pairwise verdicts in any task family")
    raise UsageError("pairwise verdicts in several task families (" + ", ".join(n for _, n in cands)
                     + "): choose one with --task-family")


def _table(path: Path) -> tuple[list[str], list[tuple[int, list[str | None]]]]:
    """The header (names stripped; a pandas index column's is empty) and the data records of
    a CSV file; a record with another number of fields than the header is an InputError
    naming FILE:LINE, so is a file without a header row."""
    records = list(read_csv_cells(path))
    if not records:
        raise InputError("empty CSV file (no header row)", source=str(path), line=1)
    (_, head), rows = records[0], records[1:]
    header = [(h or "").strip() for h in head]
    seen: dict[str, int] = {}
    for i, h in enumerate(header, start=1):
        if h and h in seen:
            raise InputError(f"column {h!r} appears twice in the header row (columns {seen[h]} and {i})",
                             source=str(path), line=records[0][0])
        seen.setdefault(h, i)
    for line, row in rows:
        if len(row) != len(header):
            raise InputError(f"row has {len(row)} fields, the header has {len(header)}", source=str(path), line=line)
    return header, rows


def read_weights(path: Path) -> dict[str, tuple[float, float, float]]:
    """AlpacaEval's GLM weights CSV (``length_controlled_v1/baseline_<model>.csv``, written by
    pandas: an unnamed index column of model names, then w_len, w_diff, w_bias): {model:
    (w_len, w_diff, w_bias)}.

    Read as RFC 4180 CSV (:func:`judgecal.importers.records.read_csv_cells`). Raises InputError
    naming FILE:LINE for a ragged row, an empty model name, a weight that is not a finite
    number or a model given twice (naming the earlier line), or for a file with fewer than 4
    columns or no data rows; the file for one that is not a readable regular UTF-8 file."""
    header, rows = _table(path)
    if len(header) < 4:
        raise InputError("expected AlpacaEval GLM weights: a model column and 3 weight columns", source=str(path), line=1)
    if not rows:
        raise InputError("no data rows (expected one row of weights per model)", source=str(path), line=2)
    out: dict[str, tuple[float, float, float]] = {}
    first: dict[str, int] = {}
    for line, cells in rows:
        name = (cells[0] or "").strip()
        if not name:
            raise InputError("empty model name", source=str(path), line=line)
        if name in first:
            raise InputError(f"model {name!r} appears twice (first on line {first[name]})", source=str(path), line=line)
        try:
            values = tuple(parse_number(c) for c in cells[1:4])
        except ValueError:
            raise InputError(f"expected three numbers after the model name, got {', '.join(repr(c) for c in cells[1:4])}",
                             source=str(path), line=line) from None
        if not all(np.isfinite(values)):
            raise InputError("the three weights must be finite numbers", source=str(path), line=line)
        if max(abs(v) for v in values) > MAX_GLM_WEIGHT:
            raise InputError(f"a weight of {max(values, key=abs):g} is not a GLM weight of AlpacaEval's (at most "
                             f"{MAX_GLM_WEIGHT:g} in absolute value, logit units; the published ones are below 10)",
                             source=str(path), line=line)
        first[name] = line
        out[name] = values  # type: ignore[assignment]
    return out


def parse_number(text: str | None) -> float:
    """A number written in a CSV cell (an optional sign, digits with an optional fraction,
    an optional exponent: ``12``, ``-0.5``, ``.5``, ``1e-05``; surrounding spaces allowed), as a float. Raises ValueError
    for anything else (``1_0``, ``nan``, ``inf``, ``0x1``, empty)."""
    t = (text or "").strip()
    if not _NUMBER.fullmatch(t):
        raise ValueError(t)
    return float(t)


_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def read_ranking(path: Path, column: str | None = None) -> tuple[dict[str, float], dict[str, int]]:
    """An external ranking CSV: a model column (``model``, else the first column, which may be
    a pandas index column without a name) and a score column (``column``, else ``score``,
    else the only other numeric column).

    Returns ({model: score}, {model: line} of the rows whose score cell is empty: they are
    left out of the correlations and reported, never dropped silently). Read as RFC 4180 CSV
    (:func:`judgecal.importers.records.read_csv_cells`). Raises InputError naming FILE:LINE for
    a ragged row, a quote never closed, an empty model name, a score that is not a finite
    number, a model given twice (naming the earlier line), or a file without data rows; the
    file for a missing or ambiguous score column."""
    header, records = _table(path)
    if not records:
        raise InputError("no data rows (a header row, then one row per model)", source=str(path), line=2)
    mi = header.index("model") if "model" in header else 0
    rows = [(line, cells) for line, cells in records]
    if column is not None:
        if column not in header:
            raise InputError(f"no column {column!r} (columns: {', '.join(h for h in header[:12] if h)})", source=str(path))
        si = header.index(column)
    elif "score" in header:
        si = header.index("score")
    else:
        def numeric(i: int) -> bool:
            vals = [(cells[i] or "").strip() for _, cells in rows]
            try:
                return any(vals) and all(parse_number(v) == parse_number(v) for v in vals if v)
            except ValueError:
                return False

        others = [i for i in range(len(header)) if i != mi and numeric(i)]
        if len(others) != 1:
            raise InputError(f"{'several' if others else 'no'} numeric score columns "
                             f"({', '.join(header[i] or f'column {i + 1}' for i in others[:8])}): "
                             "name one with --compare-column", source=str(path))
        si = others[0]
    if si == mi:
        raise InputError(f"column {header[si]!r} is the model column: name the score column with --compare-column",
                         source=str(path))
    scol = header[si]
    out: dict[str, float] = {}
    first: dict[str, int] = {}
    no_score: dict[str, int] = {}
    for line, cells in rows:
        name, val = (cells[mi] or "").strip(), (cells[si] or "").strip()
        if not name:
            raise InputError("empty model name", source=str(path), line=line)
        if name in first:
            raise InputError(f"model {name!r} appears twice (first on line {first[name]})", source=str(path), line=line)
        first[name] = line
        if not val:
            no_score[name] = line
            continue
        try:
            score = parse_number(val)
        except ValueError:
            raise InputError(f"column {scol!r}: {val[:40]!r} is not a number", source=str(path), line=line) from None
        if not np.isfinite(score):
            raise InputError(f"column {scol!r}: {val!r} is not a finite number", source=str(path), line=line)
        out[name] = score
    return out, no_score


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


def build_winrate_board(baseline: str, families=None, judge: str | None = None, url: str | None = None, *,
                        length_unit: str = "chars", tokenizer: str | None = None, n_bootstrap: int = 1000, seed: int = 0,
                        short_floor: float = DEFAULT_FLOOR, p_bounds: tuple[float, float] = DEFAULT_P_BOUNDS,
                        signed: bool = False, lc_weights: Path | None = None, compare_to: Path | None = None,
                        compare_column: str | None = None, min_items: int = 30) -> dict:
    """The win-rate leaderboard as a dict (docs/leaderboard.md lists every key).

    Raises NotFoundError (no verdicts, unknown baseline), UsageError (several judges/families,
    bad options), InputError (bad --lc-weights / --compare-to file)."""
    if length_unit not in vq.LENGTH_UNITS:
        raise UsageError(f"--length-unit must be one of {', '.join(vq.LENGTH_UNITS)}")
    if length_unit == "tokens" and not tokenizer:
        raise UsageError("--length-unit tokens needs --tokenizer NAME")
    weights = read_weights(Path(lc_weights)) if lc_weights else None
    external, no_score = read_ranking(Path(compare_to), compare_column) if compare_to else (None, {})
    engine = get_engine(url)
    with session_scope(engine) as s:
        jrow = _pick_judge(s, judge)
        fid, fam = _pick_family(s, list(families or []))
        data = vq.baseline_verdicts(s, fid, jrow.id, baseline, "chars")
        if not data.rows:
            known = sorted(s.scalars(select(m.Response.model).join(m.Item, m.Item.id == m.Response.item_id)
                                     .where(m.Item.task_family_id == fid).distinct()))
            hint = "" if baseline in known else f" (no model {baseline!r} in {fam}; models: {', '.join(known[:10])}{'...' if len(known) > 10 else ''})"
            if data.left_out:
                hint += " (left out: " + ", ".join(f"{n} {why}" for why, n in sorted(data.left_out.items())) + ")"
            raise NotFoundError(f"no usable verdicts of judge {jrow.name!r} against baseline {baseline!r} in {fam}{hint}")
        ids = sorted({r["response_id"] for r in data.rows} | {r["baseline_response_id"] for r in data.rows})
        words = {rid: k[3] for rid, k in answer_keys(s, [r["response_id"] for r in data.rows]).items()}
        for r in data.rows:  # whitespace words of the model's answer: empty answers earn no credit
            r["n_words"] = words.get(r["response_id"], 1)
        unit_len = boarddata.lengths(s, ids, length_unit, tokenizer) if length_unit != "chars" else None
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
    # thousands of tiny L-BFGS-B problems: BLAS threads only add synchronisation (measured 4x
    # slower with 2 threads on a busy 2-core machine), so the fits run single-threaded
    with threadpool_limits(1):
        return _compute(data, baseline, fam, jrow.name, length_unit, tokenizer, unit_len, gamed_models, gamed_outputs,
                        weights, (external, no_score), compare_to, n_bootstrap, seed, short_floor, p_bounds, signed, min_items)


def _compute(data, baseline, fam, judge_name, length_unit, tokenizer, unit_len, gamed_models, gamed_outputs, weights,
             external, compare_to, n_bootstrap, seed, short_floor, p_bounds, signed, min_items) -> dict:
    rows = data.rows
    notes: list[str] = []
    models = sorted({r["model"] for r in rows})
    mcode = {mm: i for i, mm in enumerate(models)}
    items = sorted({r["item_id"] for r in rows} | set(gamed_outputs.get(baseline, {})))
    icode = {it: i for i, it in enumerate(items)}
    n = len(rows)
    model = np.array([mcode[r["model"]] for r in rows])
    item = np.array([icode[r["item_id"]] for r in rows])
    pref = np.array([r["pref"] for r in rows], dtype=float)
    lm_chars = np.array([r["len_model"] for r in rows], dtype=float)
    lb_chars = np.array([r["len_baseline"] for r in rows], dtype=float)
    tanh_len = np.zeros(n)
    for mm, i in mcode.items():
        sel = model == i
        tanh_len[sel] = glm_lc.std_delta_len(lm_chars[sel], lb_chars[sel])
    difficulty = glm_lc.instruction_difficulty(item, model, pref, tanh_len, len(items), len(models))

    # gamed baselines for the LC regularisation
    gamed = []
    gamed_source = None
    if all(g in mcode for g in gamed_models):
        for g in gamed_models:
            sel = model == mcode[g]
            gamed.append((pref[sel], tanh_len[sel], difficulty[item[sel]]))
        gamed_source = "verdicts"
    elif weights is not None and all(g in weights for g in gamed_models) and all(gamed_outputs.get(g) for g in gamed_models):
        base_len = gamed_outputs.get(baseline, {})
        for g in gamed_models:
            common = [it for it in gamed_outputs[g] if it in base_len and it in icode]
            gt = glm_lc.std_delta_len([gamed_outputs[g][it] for it in common], [base_len[it] for it in common])
            gd = difficulty[[icode[it] for it in common]]
            gamed.append((glm_lc.gamed_from_weights(gt, gd, weights[g]), gt, gd))
        gamed_source = "published weights"
        notes.append(f"LC: the gamed baselines {', '.join(gamed_models)} have no verdicts here; their soft verdicts were "
                     "predicted from AlpacaEval's published GLM weights (--lc-weights) on their answers in the database")
    else:
        if weights is None:
            why = "no --lc-weights given"
        elif not all(g in weights for g in gamed_models):
            why = f"--lc-weights has no row for {', '.join(g for g in gamed_models if g not in weights)}"
        else:
            why = (f"the answers of {', '.join(g for g in gamed_models if not gamed_outputs.get(g))} are not in the "
                   "database (import their model_outputs.json, e.g. with --pair)")
        notes.append(f"LC: no verdicts of the gamed baselines {', '.join(gamed_models)} and {why}: "
                     "fitted WITHOUT AlpacaEval's regularisation towards the gamed baselines (LC can drift for "
                     "models whose answers are much shorter or longer than the baseline's)")
    notes.append("LC: instruction difficulty estimated from the verdicts in this database (AlpacaEval downloads its own)")

    # calibrated: the seed's penalty in the chosen unit
    if unit_len is not None:
        # a length of 0 (an empty answer) is a length, not a missing one (it was read as NaN,
        # which made the whole calibrated fit fail: every calibrated win rate 50%)
        lm_unit = np.array([unit_len.get(r["response_id"], np.nan) for r in rows], dtype=float)
        lb_unit = np.array([unit_len.get(r["baseline_response_id"], np.nan) for r in rows], dtype=float)
    else:
        lm_unit, lb_unit = lm_chars, lb_chars
    # empty answers, and answers repeated verbatim for several instructions of one model, earn no
    # credit for brevity (judgecal.calibrate.guards: the same rule as the score mode)
    g_model, g_item = [r["model"] for r in rows], [r["item_id"] for r in rows]
    g_key, g_words = [r["text_sha256"] for r in rows], [r.get("n_words", 1) for r in rows]
    repeated = guards.no_credit(g_model, g_item, g_key, g_words)
    if repeated.any():
        notes.append(f"calibrated: {int(repeated.sum())} verdicts on answers that are empty or repeated verbatim for "
                     f"{REPEATED_ANSWER} or more instructions earn no credit for brevity (gaming guard)")
    degenerate = guards.model_flags(g_model, g_item, g_key, g_words, lm_unit, lb_unit, floor=short_floor,
                                    reference="the baseline's length")
    pen = fit_penalty(model, pref, lm_unit, lb_unit, difficulty[item], len(models), p_bounds, short_floor, signed,
                      no_short_credit=repeated)
    smooth = fit_penalty(model, pref, lm_unit, lb_unit, difficulty[item], len(models), p_bounds, short_floor, signed,
                         length_term=False)

    per_model_pred = {}
    board_rows = []
    all_items = set(gamed_outputs.get(baseline, {})) or set(items)
    for mm in models:
        sel = np.flatnonzero(model == mcode[mm])
        lc = glm_lc.fit_lc(pref[sel], tanh_len[sel], difficulty[item[sel]], gamed=[] if mm == baseline else gamed)
        raw_wr, raw_ci = bootstrap_over_items(pref[sel], n_bootstrap, seed)
        _, lc_ci = bootstrap_over_items(lc.p_lc, n_bootstrap, seed)
        cal_wr, cal_ci = bootstrap_over_items(pen.p_cal[sel], n_bootstrap, seed)
        lc_wr = lc.lc_win_rate
        per_model_pred[mm] = {"items": item[sel], "raw": smooth.p_cal[sel], "lc": lc.p_lc, "calibrated": pen.p_cal[sel]}
        n_missing = len(all_items - {items[i] for i in item[sel]})
        flags = []
        if len(sel) < min_items:
            flags.append(f"few verdicts (<{min_items})")
        if n_missing:
            flags.append(f"{n_missing} items without a verdict")
        flags += [f["message"] for f in degenerate.get(mm, [])]  # empty, constant, far-short (one wording)
        if mm in gamed_models:
            flags.append("gamed baseline (LC regulariser)")
        n_short, n_long = int(np.sum(tanh_len[sel] > 0)), int(np.sum(tanh_len[sel] < 0))
        if len(sel) > 1 and min(n_short, n_long) < LC_MIN_SIDE:
            side = "longer" if n_long < n_short else "shorter"
            flags.append(f"LC not identified: {min(n_short, n_long)} of {len(sel)} answers {side} than the baseline's "
                         "(LC is read at equal length, outside the data: the length term and the model's bias cannot "
                         "be told apart)")
        board_rows.append({
            "model": mm, "n_items": int(len(sel)), "n_missing": n_missing,
            "n_verdicts": int(sum(rows[i]["n_verdicts"] for i in sel)),
            "win_rate": raw_wr, "win_rate_ci": raw_ci, "discrete_win_rate": discrete_win_rate(pref[sel]),
            "lc_win_rate": lc_wr, "lc_win_rate_ci": lc_ci,
            "calibrated_win_rate": cal_wr, "calibrated_win_rate_ci": cal_ci,
            "avg_length": float(np.mean(lm_chars[sel])), "avg_length_unit": "chars",
            "lc_weights": {"w_len": lc.w_len, "w_diff": lc.w_diff, "w_bias": lc.w_bias, "C": lc.C},
            "calibrated_strength": float(pen.theta[mcode[mm]]),
            "flags": flags,
        })
    board_rows.append({
        "model": baseline, "n_items": len(all_items), "n_missing": 0, "n_verdicts": 0,
        "win_rate": 50.0, "win_rate_ci": None, "discrete_win_rate": 50.0, "lc_win_rate": 50.0, "lc_win_rate_ci": None,
        "calibrated_win_rate": 50.0, "calibrated_win_rate_ci": None,
        "avg_length": float(np.mean(list(gamed_outputs[baseline].values()))) if gamed_outputs.get(baseline) else None,
        "avg_length_unit": "chars", "lc_weights": None, "calibrated_strength": None,
        "flags": ["baseline (50% by construction)"],
    })
    for col, key in (("raw", "win_rate"), ("lc", "lc_win_rate"), ("calibrated", "calibrated_win_rate")):
        rk = ranks([r[key] for r in board_rows])
        for r, k in zip(board_rows, rk):
            r[f"rank_{col}"] = int(k)
    for r in board_rows:
        r["rank_change_lc"] = r["rank_raw"] - r["rank_lc"]
        r["rank_change_calibrated"] = r["rank_raw"] - r["rank_calibrated"]
    board_rows.sort(key=lambda r: (r["rank_calibrated"], r["model"]))

    spreads = []
    by_model = {r["model"]: r for r in board_rows}
    for stem, longer, shorter in verbosity_families(models):
        entry = {"family": stem, "longer": longer, "shorter": shorter}
        for col, key in (("raw", "win_rate"), ("lc", "lc_win_rate"), ("calibrated", "calibrated_win_rate")):
            entry[f"spread_{col}"] = by_model[longer][key] - by_model[shorter][key]
            pl, ps = per_model_pred[longer], per_model_pred[shorter]
            common, il, isr = np.intersect1d(pl["items"], ps["items"], return_indices=True)
            entry[f"implied_verbosity_win_rate_{col}"] = implied_verbosity_win_rate(pl[col][il], ps[col][isr])
            entry["n_common_items"] = int(common.size)
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
        for col, key in (("raw", "win_rate"), ("lc", "lc_win_rate"), ("calibrated", "calibrated_win_rate")):
            comparison[col] = rank_correlation([r[key] for r in matched], [external[r["model"]] for r in matched],
                                               n_bootstrap, seed)

    left_out = dict(data.left_out)
    nan_pref = int(np.sum(~np.isfinite(pref)))
    if nan_pref:
        left_out["no usable preference"] = nan_pref
    return {
        "mode": "win_rate", "task_family": fam, "judge": judge_name, "baseline": baseline,
        "length_unit": length_unit, "tokenizer": tokenizer,
        "calibration": {"method": "polylog_pairwise", "gamma": pen.gamma, "p": pen.p, "p_bounds": list(p_bounds),
                        "short_floor": short_floor, "signed": signed, "l_ref": "the baseline's answer to the same item",
                        "converged": pen.converged, "at_bound": pen.at_bound},
        "lc": {"gamed_baselines": gamed_models, "gamed_source": gamed_source, "lambda": glm_lc.GAMED_LAMBDA,
               "difficulty": "estimated here", "length_unit": "chars"},
        "n_bootstrap": n_bootstrap, "seed": seed, "ci": "95% percentile bootstrap over instructions, fitted weights held fixed",
        "rows": board_rows, "verbosity_spreads": spreads, "comparison": comparison,
        "left_out": left_out, "notes": notes,
    }
