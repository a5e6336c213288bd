"""What a fit reads: a family's ratings, labels and lengths as the calibrate layer's arrays
(:func:`family_inputs`, :func:`load_inputs`), what it could not use (:func:`left_out`), and the
length units the nested selection tries (:func:`default_select_units`). Split out of
:mod:`judgecal.views.fitting`, which re-exports these names."""

from __future__ import annotations

from judgecal.calibrate.data import PairData, PointData, VerbosityData
from judgecal.calibrate.penalty import token_entropy
from judgecal.db.engine import session_scope
from judgecal.db.fitdata import FamilyRows, load_family
from judgecal.errors import FitError


def left_out(info: dict, status_counts: dict[str, int]) -> dict[str, int]:
    """{reason: count} of the rows a fit could not use: expert pairs, pointwise labels and
    verbosity pairs whose answers lack an ok rating by the judge, and the judge's unparsed,
    failed or unfinished ratings (each reason only when its count is > 0)."""
    out = {
        "expert-labelled pairs without an ok rating of both answers": info.get("pairs_total", 0) - info.get("pairs_used", 0),
        "pointwise expert labels without an ok rating": info.get("points_total", 0) - info.get("points_used", 0),
        "verbosity pairs without an ok rating of both answers": info.get("verbosity_total", 0) - info.get("verbosity_used", 0),
        "ratings unparsed (no score could be read)": status_counts.get("unparsed", 0),
        "ratings failed (the call failed after its retries)": status_counts.get("failed", 0),
        "ratings not finished (pending or running)": status_counts.get("pending", 0) + status_counts.get("running", 0),
    }
    return {k: int(v) for k, v in out.items() if v}


def _markdown(rows: FamilyRows, kept: list) -> dict:
    """{md_a, md_b} of the kept pairs (n, 3 Markdown counts each), or {} where an answer has no
    stored counts (the ``lc_glm_style`` candidate is then not offered)."""
    md = rows.md
    if not md or any(md.get(p[1]) is None or md.get(p[2]) is None for p in kept):
        return {}
    return {"md_a": [md[p[1]] for p in kept], "md_b": [md[p[2]] for p in kept]}


def family_inputs(rows: FamilyRows, density: bool = False) -> tuple[PairData | None, PointData | None, VerbosityData | None, dict]:
    """Arrays for the calibrate layer from loaded rows; pairs/labels/verbosity pairs whose
    responses lack an ok rating are dropped and counted in the returned info dict."""
    sc, ln = rows.score, rows.length
    ent = (lambda r: token_entropy(rows.text[r])) if density else None
    info = {"pairs_total": len(rows.pairs), "points_total": len(rows.points), "verbosity_total": len(rows.verbosity)}
    kept = [p for p in rows.pairs if p[1] in sc and p[2] in sc]
    pair = None
    if kept:
        pair = PairData(
            item_ids=[p[0] for p in kept], score_a=[sc[p[1]] for p in kept], score_b=[sc[p[2]] for p in kept],
            len_a=[ln[p[1]] for p in kept], len_b=[ln[p[2]] for p in kept], outcome=[p[3] for p in kept],
            density_a=[ent(p[1]) for p in kept] if ent else None, density_b=[ent(p[2]) for p in kept] if ent else None,
            **_markdown(rows, kept),
        )
    pts = [p for p in rows.points if p[1] in sc]
    point = None
    expert_scales = {(p[3], p[4]) for p in pts}
    if len(expert_scales) > 1:
        raise FitError(f"pointwise expert labels use several scales {sorted(expert_scales)}: import them on one scale")
    if pts:
        point = PointData(item_ids=[p[0] for p in pts], score=[sc[p[1]] for p in pts], length=[ln[p[1]] for p in pts],
                          expert=[p[2] for p in pts], density=[ent(p[1]) for p in pts] if ent else None)
        info["expert_scale"] = list(next(iter(expert_scales)))
    vk = [v for v in rows.verbosity if v[0] in sc and v[1] in sc]
    verb = None
    if vk:
        verb = VerbosityData(
            score_concise=[sc[v[0]] for v in vk], score_verbose=[sc[v[1]] for v in vk],
            len_concise=[ln[v[0]] for v in vk], len_verbose=[ln[v[1]] for v in vk],
            density_concise=[ent(v[0]) for v in vk] if ent else None,
            density_verbose=[ent(v[1]) for v in vk] if ent else None,
        )
    info.update(pairs_used=len(kept), points_used=len(pts), verbosity_used=len(vk))
    return pair, point, verb, info


def load_inputs(engine, fam_id, judge_id, *, length_unit, tokenizer, density, verbosity_family_id, url,
                 summary="greedy", risk_k=1.0, with_summaries=False):
    """(rows, pair, point, verbosity, info) of one family in one length unit; token lengths
    missing under ``tokenizer`` are computed and stored first (never silently left out).
    ``summary``/``risk_k``/``with_summaries``: as :func:`judgecal.db.fitdata.load_family`."""
    load = dict(length_unit=length_unit, tokenizer=tokenizer, with_text=density, verbosity_family_id=verbosity_family_id,
                summary=summary, risk_k=risk_k, with_summaries=with_summaries)
    with session_scope(engine) as s:
        rows = load_family(s, fam_id, judge_id, **load)
    if rows.missing_lengths and length_unit == "tokens":
        from judgecal.tokens import fill_lengths

        fill_lengths(tokenizer, url, response_ids=rows.missing_lengths)
        with session_scope(engine) as s:
            rows = load_family(s, fam_id, judge_id, **load)
    if rows.missing_lengths:
        raise FitError(f"{len(rows.missing_lengths)} rated responses have no length in {length_unit}"
                       f"{' (' + tokenizer + ')' if tokenizer else ''}: run `judgecal lengths`")
    pair, point, verb, info = family_inputs(rows, density)
    return rows, pair, point, verb, info


def default_select_units(length_unit: str) -> list[str]:
    """Length units tried by the nested selection: the fit's own, plus words (chars when the fit
    is in words)."""
    return [length_unit, "chars" if length_unit == "words" else "words"]
