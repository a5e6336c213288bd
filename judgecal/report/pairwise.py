"""Tables of the pairwise-judge section of the report (pure formatting): position bias, agreement
with the experts by order shown and LLMBar's own figures (:func:`rows`); the judge comparison
per task family (:func:`comparison_rows`); length and position together
(:func:`length_position_rows`)."""

from __future__ import annotations

from judgecal.report.tables import Col

#: Columns of the position-bias table (:func:`rows`) for a terminal (:class:`Col`: level 0
#: always shown, 1 while the width allows, in priority order; ``report --wide``: all)
COLS = [
    Col("task family", "task_family", 0, "name"), Col("judge", "judge", 0, "name"),
    Col("verdicts", "n_verdicts", 1, priority=3), Col("pairs in both orders", "n_pairs", 1, priority=3),
    Col("consistent", "consistent", 0, "ci"), Col("flip rate", "flip_rate", 1, "ci", priority=4),
    Col("first-position preference", "first_position_preference", 1, "ci", priority=1),
    Col("agreement, a first", "agreement_ab", 1, "ci", priority=4),
    Col("agreement, b first", "agreement_ba", 1, "ci", priority=4),
    Col("agreement, both orders (tie)", "agreement_combined", 0, "ci"),
    Col("agreement, soft average", "agreement_soft", 1, "ci", priority=5),
    Col("LLMBar: average / both / equal", "llmbar", 1, "text", priority=5), Col("rank", "rank", 1, priority=2),
    Col("longer preferred (pairs)", "longer_preferred", 1, "ci", priority=2),
]
COLUMNS = [c.header for c in COLS]


def _f(x, ci=None) -> str:
    if x is None:
        return "-"
    return f"{x:.3f}" + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "")


def _agreement(e: dict, mode: str) -> str:
    ea = (e.get("expert_agreement") or {}).get(mode)
    if not ea or ea["agreement"] is None:
        return "-"
    return f"{_f(ea['agreement'], ea['ci'])} (n={ea['n']})"


def _llmbar(e: dict) -> str:
    lf = e.get("llmbar_figures")
    if not lf:
        return "-"
    def count(text):
        return text.split(" = ")[0].replace(" ", "")
    return f"{float(lf['correct_average'].rstrip('%')):.1f}% / {count(lf['correct_both'])} / {count(lf['equal'])}"


def _rank(e: dict) -> str:
    c = e.get("comparison")
    return "-" if not c else f"{c['rank']} of {c['n_judges']}"


def rows(section: list[dict]) -> list[list[str]]:
    """Table rows (strings) of the pairwise-judge section, one per entry of
    :func:`judgecal.views.pairwise_report.collect_pairwise`; shares to 3 decimals, 95% CIs in
    brackets; LLMBar's figures as its statistics.json defines them; the judge's rank in its
    family's judge comparison (its gap to the best: :func:`comparison_rows`; docs/report.md)."""
    out = []
    for e in section:
        out.append([e["task_family"], e["judge"], str(e["n_verdicts"]), str(e["n_pairs"]),
                    _f(e["consistent"], e["consistent_ci"]), _f(e["flip_rate"], e["flip_rate_ci"]),
                    _f(e["first_position_preference"], e["first_position_preference_ci"]),
                    _agreement(e, "ab"), _agreement(e, "ba"), _agreement(e, "combined"), _agreement(e, "soft"),
                    _llmbar(e), _rank(e), f"{_f(e['longer_preferred'])} ({e['n_length_pairs']})"])
    return out


#: Columns of the judge comparison table (one row per entry with a comparison).
COMPARISON_COLS = [
    Col("task family", "task_family", 0, "name"), Col("rank", "rank", 0), Col("judge", "judge", 0, "name"),
    Col("agreement, both orders (pairs compared)", "agreement", 0, "ci"),
    Col("gap to best, points [paired 95% CI]", "gap_to_best", 0, "ci"),
    Col("best judge of the family", "best", 1, "name", priority=2), Col("below the best?", "below", 1, "text", priority=1),
]
COMPARISON_COLUMNS = [c.header for c in COMPARISON_COLS]


def _below(ci) -> str:
    if not ci:
        return "- (no CI)"
    if ci[1] < 0:
        return "yes: CI below 0"
    if ci[0] > 0:
        return "no: CI above 0"
    return "no: CI includes 0"


def comparison_rows(section: list[dict]) -> list[list[str]]:
    """Rows of the judge comparison table: per task family (in the section's order, best first)
    every judge with a comparison (:func:`judgecal.calibrate.position.compare_judges` on the
    pairs every judge of the family judged): its rank, its agreement with the experts from both
    orders combined (a tie when they disagree) on those pairs, its gap to the family's best judge
    in agreement points with the paired 95% bootstrap CI (the same pair resamples for every
    judge), the best judge named, and whether the CI puts the judge below the best."""
    out = []
    for e in section:
        c = e.get("comparison")
        if not c:
            continue
        agreement = f"{c['agreement']:.3f} (n={c['n_pairs']})"
        if e["judge"] == c["best"]:  # another judge of equal agreement shares rank 1 but is compared with it
            gap, below = "0 (the best)", "-"
        else:
            gap, below = _pts(c["gap_to_best"], c["gap_to_best_ci"]), _below(c["gap_to_best_ci"])
        out.append([e["task_family"], f"{c['rank']} of {c['n_judges']}", e["judge"], agreement, gap, c["best"], below])
    return out


#: Columns of the "length and position together" table (entries with "length_and_position").
LP_COLS = [
    Col("task family", "task_family", 0, "name"), Col("judge", "judge", 0, "name"), Col("pairs", "pairs", 1, "text", priority=3),
    Col("plain judge (a first)", "raw", 0, "ci"), Col("b first", "raw_ba", 1, "ci", priority=4),
    Col("both orders (tie)", "raw_combined", 1, "ci", priority=1), Col("a first + polylog", "polylog_ab", 1, "ci", priority=3),
    Col("both orders + polylog", "polylog_combined", 1, "ci", priority=2),
    Col("a first + LC GLM", "lc_glm_ab", 1, "ci", priority=3), Col("both orders + LC GLM", "lc_glm_combined", 1, "ci", priority=2),
    Col("shorter answer (no judge)", "shorter_answer", 1, "ci", priority=4),
    Col("both orders + length beats each alone?", "together", 1, "text", priority=2),
    Col("recommendation", "recommendation", 0, "text"),
]
LP_COLUMNS = [c.header for c in LP_COLS]


def _pts(g, ci) -> str:
    return f"{100 * g:+.1f}" + (f" [{100 * ci[0]:+.1f}, {100 * ci[1]:+.1f}]" if ci else "")


def _oos(lp: dict, name: str) -> str:
    c = lp["candidates"].get(name)
    if c is None:
        return "-"
    if name == "raw":
        return _f(c["agreement"], c["ci"])
    return f"{c['agreement']:.3f} ({_pts(c['gain'], c['gain_ci'])})"


def _together(lp: dict) -> str:
    parts = []
    for m, label in (("polylog", "polylog"), ("lc_glm", "LC GLM")):
        t = lp["together"].get(m)
        if not t:
            parts.append(f"{label}: -")
            continue
        vp, vl = t["vs_position_alone"], t["vs_length_alone"]
        parts.append(f"{label}: {'yes' if t['beats_both'] else 'no'} ({_pts(vp['gain'], vp['gain_ci'])} vs both orders, "
                     f"{_pts(vl['gain'], vl['gain_ci'])} vs a first + {label})")
    return "; ".join(parts)


def _recommendation(lp: dict) -> str:
    sel = lp.get("selection")
    if not sel:
        return "-"
    if sel["decision"] == "keep raw":
        return f"keep raw: {sel['reason']} (candidate {sel['candidate']})"
    text = f"{sel['recommended']}: {sel['nested']:.3f} ({_pts(sel['nested_gain'], sel['nested_gain_ci'])})"
    fit = lp.get("recommended_fit") or {}
    if fit.get("reverses_judge"):
        text += "; reverses the judge's verdicts (theta < 0: the length term does the agreeing)"
    return text


def length_position_rows(section: list[dict]) -> list[list[str]]:
    """Rows of the "length and position together" table, one per entry of the pairwise section
    that has "length_and_position" (``report --length-position``): out-of-sample agreement with
    the experts of each candidate (shares to 3 decimals) with its paired gain over the plain
    judge (a shown first, raw) in agreement points and 95% CI; whether both orders + a length
    calibration beat both orders alone AND a first + the same length calibration (both paired
    CIs above zero); the nested selection's recommendation ("keep raw" unless the CI clears
    zero; docs/report.md)."""
    out = []
    for e in section:
        if "length_and_position" not in e:
            continue
        lp = e["length_and_position"]
        if lp is None:
            out.append([e["task_family"], e["judge"], "too few pairs in both orders"] + ["-"] * (len(LP_COLUMNS) - 3))
            continue
        n = f"{lp['n_pairs']}" + (f" ({lp['n_left_out']} left out)" if lp["n_left_out"] else "")
        sa = lp["shorter_answer"]
        out.append([e["task_family"], e["judge"], n, _oos(lp, "raw"), _oos(lp, "raw[ba]"), _oos(lp, "raw[combined]"),
                    _oos(lp, "polylog[ab]"), _oos(lp, "polylog[combined]"), _oos(lp, "lc_glm[ab]"),
                    _oos(lp, "lc_glm[combined]"), f"{sa['agreement']:.3f} ({_pts(sa['gain'], sa['gain_ci'])})",
                    _together(lp), _recommendation(lp)])
    return out
