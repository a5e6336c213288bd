"""The judge audit: one family and one judge, pair by pair (``judgecal serve``'s ``/audit``).

Each pair of answers to one instruction, as the database holds it: the instruction, both
answers with their lengths, the judge's ratings of each answer (raw output, score) or its
verdicts in each order shown ('ab': answer a first, 'ba': b first), the expert label, and,
where the family has a calibration of the judge, the calibrated decision and whether the
calibration changed the raw one.

The pairs: the family's expert-labelled pairs, its concise/verbose (verbosity) pairs and the
pairs the judge gave verdicts on (sample 0), each pair once, oriented as its expert label
(else as its verdicts, else concise = a). Nothing is computed here that the fit does not
compute: a response's raw score is the mean of its ok ratings (:func:`judgecal.db.fitdata.load_family`,
as the fit reads it), the calibrated score is the stored calibration applied by
:func:`judgecal.views.fitting.apply_calibration` (as fitted, in its length unit), a decision
is :func:`judgecal.calibrate.metrics.order_credit` of the two scores and the expert agreement
:func:`judgecal.calibrate.metrics.expert_agreement`, so the audit's raw and calibrated agreement
over the expert pairs equal the fit's in-sample figures.

Filters (``filter=``): ``disagree`` (the judge's decision differs from the expert label),
``flips`` (the calibration changed the decision), ``ties`` (the judge tied, in its scores or
in a verdict), ``unparsed`` (a rating or verdict of the pair is unparsed or failed),
``inconsistent`` (the verdicts in the two orders differ), ``all``. Pages hold at most
:data:`judgecal.db.browse.MAX_PAGE` pairs, in content order (item prompt SHA-256, then each
answer's model and text SHA-256)."""

from __future__ import annotations

import math

from judgecal.db.models import iso_utc
from judgecal.calibrate.metrics import expert_agreement, order_credit
from judgecal.calibrate.penalty import token_entropy
from judgecal.db import browse
from judgecal.db import queries as q
from judgecal.db.engine import get_engine, session_scope
from judgecal.db.fitdata import load_family
from judgecal.errors import NotFoundError, UsageError
from judgecal.views.fitting import apply_calibration, load_calibrations, refuse_out_of_scope, staleness

FILTERS = ("all", "disagree", "flips", "ties", "unparsed", "inconsistent")
FILTER_TEXT = {
    "all": "every pair",
    "disagree": "the judge's decision differs from the expert label",
    "flips": "the calibration changed the judge's decision",
    "ties": "the judge tied (equal scores, or a tie verdict)",
    "unparsed": "a rating or verdict of the pair is unparsed or failed",
    "inconsistent": "the verdicts in the two orders differ (position bias)",
}
PER_PAGE = 25
DECISION = {1.0: "a", 0.5: "tie", 0.0: "b"}
OUTCOME_NAME = {1.0: "a", 0.0: "b", 0.5: "tie"}
MIRROR = {"a": "b", "b": "a", "tie": "tie", None: None}
MIRROR_POSITION = {"ab": "ba", "ba": "ab", "na": "na"}
BAD = ("unparsed", "failed")


def _decisions(score_a: list, score_b: list) -> list[str | None]:
    """'a' | 'b' | 'tie' per pair (None where a score is missing)."""
    have = [i for i, (x, y) in enumerate(zip(score_a, score_b)) if x is not None and y is not None]
    out: list[str | None] = [None] * len(score_a)
    if have:
        credit = order_credit([score_a[i] for i in have], [score_b[i] for i in have])
        for i, c in zip(have, credit):
            out[i] = DECISION[float(c)]
    return out


def _verdict_decision(verdicts: dict) -> str | None:
    """The judge's verdict over the orders shown: the one verdict where every usable order
    agrees, 'inconsistent' where they differ, None where none is usable."""
    found = {v for status, v in verdicts.values() if status == "ok" and v is not None}
    if not found:
        return None
    return found.pop() if len(found) == 1 else "inconsistent"


def judge_audit(family: str, judge: str, url: str | None = None, *, filter: str = "all", page: int = 1,
                per_page: int = PER_PAGE, calibration: str = "latest") -> dict:
    """One page of the audit of ``judge`` on ``family`` (module doc) as a dict:

    task_family, judge (name), judge_id, judge_mode, scale, calibration ({id, length_unit,
    tokenizer, stale, created_at} or None), filter, filter_text, page, per_page, pages, total
    (pairs passing the filter), counts ({filter: pairs}), agreement ({"raw", "calibrated", "n"}:
    expert agreement over the expert pairs both of whose answers have a score; None where it
    does not apply), left_out ({reason: count}), and rows: one dict per pair of the page with
    kind ("expert" | "verbosity" | "verdicts"), item ({prompt, external_id, prompt_sha256,
    cut}), a / b ({model, text, cut, n_chars, n_words, n_bytes, length (in the calibration's
    unit), score (mean of ok ratings), calibrated, ratings [{sample_index, status, score,
    raw_output, error}]}), gold (expert label 'a'|'b'|'tie'|None), raw_decision,
    calibrated_decision, changed, verdicts ({position: {status, verdict, preference,
    raw_output, error}}, oriented to this pair's a and b), verdict_decision, decision (the
    judge's: from its scores where it rated both answers, else from its verdicts), flags
    (the filters the pair passes).

    ``calibration``: "latest" (the newest of the family and judge, if any), "none", or an id
    of this family and judge. Raises NotFoundError, UsageError."""
    if filter not in FILTERS:
        raise UsageError(f"filter must be one of {', '.join(FILTERS)}, got {filter!r}")
    from judgecal.views.browse import check_page

    check_page(page, per_page)
    engine = get_engine(url)
    with session_scope(engine) as s:
        fam_id = q.family_id(s, family)
        jrow = q.judge_by_name(s, judge)
        jinfo = {"judge": jrow.name, "judge_id": jrow.id, "judge_mode": jrow.mode,
                 "scale": [jrow.scale_min, jrow.scale_max]}
    engine.dispose()
    cal = None
    if str(calibration) != "none":
        if str(calibration) == "latest":
            found = load_calibrations([family], f"id:{jrow.id}", "latest", url)
        else:
            if not str(calibration).isdigit():
                raise UsageError(f"calibration must be an id, 'latest' or 'none', got {calibration!r}")
            found = load_calibrations(None, None, str(calibration), url)
            refuse_out_of_scope(found, [family], f"id:{jrow.id}", url)
        cal = found[0][0] if found else None
    unit, tok = (cal.length_unit, cal.tokenizer) if cal is not None else ("words", None)

    engine = get_engine(url)
    with session_scope(engine) as s:
        rows = load_family(s, fam_id, jrow.id, length_unit=unit, tokenizer=tok,
                           with_text=bool(cal is not None and cal.density_exemption))
        vidx = browse.verdict_index(s, fam_id, jrow.id)
        if not rows.ratings and not vidx.pairs:
            raise NotFoundError(f"judge {jrow.name!r} has no ratings and no pairwise verdicts in task family "
                                f"{family!r} (see `judgecal stats`)")
        gold_of = {(a, b): OUTCOME_NAME[o] for _, a, b, o in rows.pairs}
        # each pair once, oriented as its expert label, else its verdicts, else concise = a
        pairs: dict[frozenset, dict] = {}
        for (a, b), g in gold_of.items():
            pairs.setdefault(frozenset((a, b)), {"a": a, "b": b, "kind": "expert", "gold": g, "verdicts": {}})
        for (a, b), by_pos in sorted(vidx.pairs.items(), key=lambda kv: (vidx.key_of[kv[0][0]], vidx.key_of[kv[0][1]])):
            p = pairs.setdefault(frozenset((a, b)), {"a": a, "b": b, "kind": "verdicts", "gold": None, "verdicts": {}})
            same = p["a"] == a
            for pos, (status, verdict) in by_pos.items():
                p["verdicts"][pos if same else MIRROR_POSITION[pos]] = (status, verdict if same else MIRROR[verdict])
        for c, v in rows.verbosity:
            pairs.setdefault(frozenset((c, v)), {"a": c, "b": v, "kind": "verbosity", "gold": None, "verdicts": {}})
        missing = sorted({x for p in pairs.values() for x in (p["a"], p["b"])} - set(rows.key_of) - set(vidx.key_of))
        extra = browse.response_keys(s, missing) if missing else {}
    engine.dispose()
    key_of = {**{r: e["key"] for r, e in extra.items()}, **vidx.key_of, **rows.key_of}
    ordered = sorted(pairs.values(), key=lambda p: (key_of[p["a"]], key_of[p["b"]]))

    # judge decisions: raw scores (mean of ok ratings), calibrated scores where a calibration applies
    score = rows.score
    calibrated: dict[int, float] = {}
    left: dict[str, int] = {}
    if cal is not None and score:
        have = sorted(r for r in score if r in rows.length)
        if len(have) < len(score):
            left["rated answers without a length in the calibration's unit (no calibrated score)"] = len(score) - len(have)
        if have:
            dens = [token_entropy(rows.text[r]) for r in have] if cal.density_exemption else None
            vals = apply_calibration(cal, [score[r] for r in have], [rows.length[r] for r in have], dens)
            calibrated = {r: float(v) for r, v in zip(have, vals)}
    raw_dec = _decisions([score.get(p["a"]) for p in ordered], [score.get(p["b"]) for p in ordered])
    cal_dec = (_decisions([calibrated.get(p["a"]) for p in ordered], [calibrated.get(p["b"]) for p in ordered])
               if calibrated else [None] * len(ordered))
    status_of: dict[int, set] = {}
    for rid, _, status, _ in rows.ratings:
        status_of.setdefault(rid, set()).add(status)
    for i, p in enumerate(ordered):
        p["raw_decision"], p["calibrated_decision"] = raw_dec[i], cal_dec[i]
        p["changed"] = raw_dec[i] is not None and cal_dec[i] is not None and raw_dec[i] != cal_dec[i]
        p["verdict_decision"] = _verdict_decision(p["verdicts"])
        p["decision"] = raw_dec[i] if raw_dec[i] is not None else p["verdict_decision"]
        bad = (status_of.get(p["a"], set()) | status_of.get(p["b"], set())) & set(BAD) or \
            any(status in BAD for status, _ in p["verdicts"].values())
        p["flags"] = [name for name, hit in (
            ("disagree", p["gold"] is not None and p["decision"] in ("a", "b", "tie") and p["decision"] != p["gold"]),
            ("flips", p["changed"]),
            ("ties", raw_dec[i] == "tie" or any(v == "tie" for st, v in p["verdicts"].values() if st == "ok")),
            ("unparsed", bool(bad)),
            ("inconsistent", p["verdict_decision"] == "inconsistent"),
        ) if hit]
    counts = {f: (len(ordered) if f == "all" else sum(f in p["flags"] for p in ordered)) for f in FILTERS}
    chosen = ordered if filter == "all" else [p for p in ordered if filter in p["flags"]]

    agreement = None
    expert = [p for p in ordered if p["gold"] is not None and p["a"] in score and p["b"] in score]
    if expert:
        outcome = [{"a": 1.0, "b": 0.0, "tie": 0.5}[p["gold"]] for p in expert]
        raw_ag = expert_agreement([score[p["a"]] for p in expert], [score[p["b"]] for p in expert], outcome)
        both = [i for i, p in enumerate(expert) if p["a"] in calibrated and p["b"] in calibrated]
        cal_ag = (expert_agreement([calibrated[expert[i]["a"]] for i in both], [calibrated[expert[i]["b"]] for i in both],
                                   [outcome[i] for i in both]) if calibrated and both else None)
        agreement = {"raw": raw_ag, "calibrated": cal_ag, "n": len(expert),
                     "n_calibrated": len(both) if calibrated else 0}
    n_no_score = sum(1 for p in ordered if p["gold"] is not None and (p["a"] not in score or p["b"] not in score)
                     and rows.ratings)
    if n_no_score:
        left["expert pairs without an ok rating of both answers (no raw decision)"] = n_no_score

    total = len(chosen)
    pages = max(1, math.ceil(total / per_page))
    if page > pages:
        raise UsageError(f"page {page} is past the last page ({pages}) of {total} pairs")
    shown = chosen[(page - 1) * per_page: page * per_page]

    engine = get_engine(url)
    with session_scope(engine) as s:
        detail = browse.pair_details(s, jrow.id, [(p["a"], p["b"]) for p in shown])
    engine.dispose()
    out_rows = []
    for p in shown:
        ra, rb = detail["responses"].get(p["a"], {}), detail["responses"].get(p["b"], {})
        item = detail["items"].get(ra.get("item_id"), {})
        ver = {}
        for (va, vb), by_pos in detail["verdicts"].items():
            if {va, vb} != {p["a"], p["b"]}:
                continue
            same = va == p["a"]
            for pos, d in by_pos.items():
                ver[pos if same else MIRROR_POSITION[pos]] = {**d, "verdict": d["verdict"] if same else MIRROR[d["verdict"]],
                                                              "preference": d["preference"] if same or d["preference"] is None
                                                              else 1.0 - d["preference"]}

        def side(rid: int, r: dict) -> dict:
            return {**r, "length": rows.length.get(rid), "score": score.get(rid), "calibrated": calibrated.get(rid),
                    "ratings": detail["ratings"].get(rid, [])}

        out_rows.append({"kind": p["kind"], "item": item,
                         "a": side(p["a"], ra), "b": side(p["b"], rb), "gold": p["gold"],
                         "raw_decision": p["raw_decision"], "calibrated_decision": p["calibrated_decision"],
                         "changed": p["changed"], "verdicts": {k: ver[k] for k in ("ab", "ba", "na") if k in ver},
                         "verdict_decision": p["verdict_decision"], "decision": p["decision"], "flags": p["flags"]})
    cal_info = None
    if cal is not None:
        fresh = staleness([(cal, family, jrow.name)], url)
        cal_info = {"id": cal.id, "length_unit": cal.length_unit, "tokenizer": cal.tokenizer, "stale": fresh[cal.id],
                    "created_at": iso_utc(cal.created_at),
                    "density_exemption": bool(cal.density_exemption)}
    return {"task_family": family, **jinfo, "calibration": cal_info, "length_unit": unit, "filter": filter,
            "filter_text": FILTER_TEXT[filter], "page": page, "per_page": per_page, "pages": pages, "total": total,
            "counts": counts, "agreement": agreement, "left_out": left, "rows": out_rows}
