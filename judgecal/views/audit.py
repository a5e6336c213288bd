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
answer's model and text SHA-256).

Drilling down (issue 32): ``model=`` keeps the pairs one of whose answers is that model's
(the name exactly as stored; a model with no answer in the audit's pairs is a NotFoundError);
each row then says which side is the model's (``model_side``: 'a', 'b', or 'both' where both
answers are its own), the counts are those of the model's pairs, and three more filters
apply: ``won`` (the judge's decision favours the model's answer), ``lost`` (it favours the
other) and ``won_longer`` (won, and the model's answer has more characters than the other).
A pair whose two answers are both the model's is neither won nor lost. ``q=`` keeps the pairs
whose instruction or either answer contains the text, case-insensitively for the ASCII
letters A-Z and exactly for every other character, the same on SQLite and PostgreSQL
(:func:`judgecal.db.browse.search_family`). Both are masks over the :class:`AuditIndex`
(models and lengths are kept in it; ``q`` costs one search of the family's texts)."""

from __future__ import annotations

import bisect
import math
import sys
from dataclasses import dataclass, fields

import numpy as np

from judgecal.db.models import iso_utc
from judgecal.calibrate.metrics import expert_agreement, order_credit
from judgecal.calibrate.penalty import token_entropy
from judgecal.db import browse
from judgecal.db import queries as q
from judgecal.db.derived import stored
from judgecal.db.engine import get_engine, session_scope
from judgecal.db.fitdata import load_family
from judgecal.errors import NotFoundError, UsageError
from judgecal.views.fitting import apply_calibration, load_calibrations, refuse_out_of_scope, staleness

FILTERS = ("all", "disagree", "flips", "ties", "unparsed", "inconsistent")
#: the filters said of one model's answers: they need ``model``
MODEL_FILTERS = ("won", "lost", "won_longer")
ALL_FILTERS = FILTERS + MODEL_FILTERS
#: the longest ``q`` (characters)
MAX_Q = 500
FILTER_TEXT = {
    "all": "every pair",
    "disagree": "the judge's decision differs from the expert label",
    "flips": "the calibration changed the judge's decision",
    "ties": "the judge tied (equal scores, or a tie verdict)",
    "unparsed": "a rating or verdict of the pair is unparsed or failed",
    "inconsistent": "the verdicts in the two orders differ (position bias)",
    "won": "the judge's decision favours the model's answer",
    "lost": "the judge's decision favours the other answer",
    "won_longer": "won, and the model's answer is longer (characters) than the other",
}
PER_PAGE = 25
DECISION = {1.0: "a", 0.5: "tie", 0.0: "b"}
OUTCOME_NAME = {1.0: "a", 0.0: "b", 0.5: "tie"}
MIRROR = {"a": "b", "b": "a", "tie": "tie", None: None}
MIRROR_POSITION = {"ab": "ba", "ba": "ab", "na": "na"}
BAD = ("unparsed", "failed")


def _decisions(score_a: list, score_b: list) -> list[str | None]:
    """'a' | 'b' | 'tie' per pair (None where a score is missing or not a finite number)."""
    have = [i for i, (x, y) in enumerate(zip(score_a, score_b))
            if x is not None and y is not None and math.isfinite(x) and math.isfinite(y)]
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


#: the decisions and labels an index stores as small integer codes (0: none)
CODES = (None, "a", "b", "tie", "inconsistent")
CODE = {v: i for i, v in enumerate(CODES)}
KINDS = ("expert", "verbosity", "verdicts")
#: one bit per filter other than 'all', in FILTERS order
BIT = {f: 1 << i for i, f in enumerate(FILTERS[1:])}


@dataclass
class AuditIndex:
    """Everything an audit page needs that is not a text, computed once for a family, a judge
    and a calibration (:func:`audit_index`); :func:`audit_page` cuts any filter and page out of
    it, so a server can keep it (``judgecal serve`` does, until the database changes) and every
    filter and page of the audit costs one read of that page's texts.

    ``head``: the page dict's fields that do not depend on the filter or page (task_family,
    judge, judge_id, judge_mode, scale, calibration, length_unit, counts, agreement, left_out).
    One entry per pair, in content order: ``a``, ``b`` (response ids, int64), ``kind``
    (index into :data:`KINDS`), ``gold``, ``raw``, ``cal``, ``vdec``, ``dec`` (the expert
    label, raw, calibrated, verdict and judge decisions as :data:`CODES` indices, int8),
    ``changed`` (bool), ``flags`` (:data:`BIT` mask, uint8), ``item`` (the item id, int64),
    ``ma``, ``mb`` (each answer's model as an index into ``models``, int32), ``ca``, ``cb``
    (each answer's length in characters, int32, -1 where unknown). ``models``: the names of
    the models whose answers the pairs hold, sorted by code point. Per response, ``rid``
    (sorted int64) and ``values`` (3 x n float64: raw score, length in the calibration's
    unit, calibrated score; NaN where there is none)."""

    head: dict
    a: np.ndarray
    b: np.ndarray
    kind: np.ndarray
    gold: np.ndarray
    raw: np.ndarray
    cal: np.ndarray
    vdec: np.ndarray
    dec: np.ndarray
    changed: np.ndarray
    flags: np.ndarray
    rid: np.ndarray
    values: np.ndarray
    item: np.ndarray
    ma: np.ndarray
    mb: np.ndarray
    ca: np.ndarray
    cb: np.ndarray
    models: list[str]

    @property
    def nbytes(self) -> int:
        """Bytes of the arrays and of the model names (what a cache of indexes counts)."""
        names = sys.getsizeof(self.models) + sum(sys.getsizeof(x) for x in self.models)
        return names + sum(v.nbytes for v in vars(self).values() if isinstance(v, np.ndarray))

    def model_code(self, model: str) -> int | None:
        """The index of ``model`` in ``models`` (exact match), None where no pair holds its answer."""
        i = bisect.bisect_left(self.models, model)
        return i if i < len(self.models) and self.models[i] == model else None

    def value(self, which: int, rid: int) -> float | None:
        """Row ``which`` of ``values`` (0 score, 1 length, 2 calibrated) for response ``rid``;
        None where it has none."""
        i = int(np.searchsorted(self.rid, rid))
        if i >= len(self.rid) or self.rid[i] != rid:
            return None
        v = float(self.values[which, i])
        return None if math.isnan(v) else v


def _check_filter(filter: str, model: str | None = None) -> None:
    if filter not in ALL_FILTERS:
        raise UsageError(f"filter must be one of {', '.join(ALL_FILTERS)}, got {filter!r}")
    if filter in MODEL_FILTERS and model is None:
        raise UsageError(f"--filter {filter} needs --model NAME: {', '.join(MODEL_FILTERS)} are said of one model's answers")


def check_request(filter: str, model: str | None, q: str | None) -> tuple[str | None, str | None]:
    """Refuse a filter, model or ``q`` the audit cannot read (UsageError, one line) before any
    index is computed; returns (model, q) as the audit reads them (:func:`_check_search`)."""
    model, q = _check_search(model, q)
    _check_filter(filter, model)
    return model, q


def _check_search(model: str | None, q: str | None) -> tuple[str | None, str | None]:
    """(model, q) as the audit reads them: ``model`` exactly as given (a name is matched as
    stored), None where empty; ``q`` without the spaces around it, None where blank. Raises
    UsageError for a NUL in either or a ``q`` over :data:`MAX_Q` characters."""
    if model is not None and (model == "" or not model.strip()):
        model = None
    if model is not None and "\x00" in model:
        raise UsageError("model holds a control character (NUL)")
    if q is not None:
        q = q.strip() or None
    if q is not None:
        if len(q) > MAX_Q:
            raise UsageError(f"q is {len(q)} characters long: at most {MAX_Q}")
        if any(ord(c) < 32 for c in q):
            raise UsageError("q holds a control character")
    return model, q


def _check_calibration(calibration) -> None:
    if str(calibration) not in ("latest", "none") and not str(calibration).isdigit():
        raise UsageError(f"calibration must be an id, 'latest' or 'none', got {calibration!r}")


def judge_audit(family: str, judge: str, url: str | None = None, *, filter: str = "all", page: int = 1,
                per_page: int = PER_PAGE, calibration: str = "latest", model: str | None = None,
                q: str | None = None, index: AuditIndex | None = None) -> dict:
    """One page of the audit of ``judge`` on ``family`` (module doc) as a dict:

    task_family, judge (name), judge_id, judge_mode, scale, calibration ({id, length_unit,
    tokenizer, stale, created_at, density_exemption, identified, not_identified_reasons, advice
    ("calibrate" | "keep raw" | None), recommended} or None), model, q (as given, None where not), filter,
    filter_text, page, per_page, pages, total (pairs passing the filter), counts ({filter:
    pairs}; with ``model`` or ``q``, of the pairs they keep; with ``model`` also won, lost and
    won_longer), agreement ({"raw", "calibrated", "n"}:
    expert agreement over the expert pairs both of whose answers have a score; None where it
    does not apply), left_out ({reason: count}), and rows: one dict per pair of the page with
    kind ("expert" | "verbosity" | "verdicts"), item ({prompt, external_id, prompt_sha256,
    cut}), a / b ({model, text, cut, n_chars, n_words, n_bytes, length (in the calibration's
    unit), score (mean of ok ratings), calibrated, ratings [{sample_index, status, score,
    raw_output, error}]}), gold (expert label 'a'|'b'|'tie'|None), raw_decision,
    calibrated_decision, changed, verdicts ({position: {status, verdict, preference,
    raw_output, error}}, oriented to this pair's a and b), verdict_decision, decision (the
    judge's: from its scores where it rated both answers, else from its verdicts), flags
    (the filters the pair passes), model_side ('a' | 'b' | 'both': the model's answer; None
    without ``model``). The agreement and left_out are the whole audit's, whatever the filters.

    ``model``: only the pairs holding an answer of that model (exact name); ``q``: only the
    pairs whose instruction or either answer contains the text (module doc).

    ``calibration``: "latest" (the newest of the family and judge, if any), "none", or an id
    of this family and judge. ``index``: the :func:`audit_index` of the same family, judge and
    calibration on the same data, where the caller kept one (else it is computed). Raises
    NotFoundError, UsageError."""
    from judgecal.views.browse import check_page

    model, q = check_request(filter, model, q)  # checked before the index is computed (seconds on a big family)
    check_page(page, per_page)
    _check_calibration(calibration)
    if index is None:
        index = audit_index(family, judge, url, calibration=calibration)
    return audit_page(index, url, filter=filter, page=page, per_page=per_page, model=model, q=q)


def audit_index(family: str, judge: str, url: str | None = None, *, calibration: str = "latest") -> AuditIndex:
    """The :class:`AuditIndex` of ``judge`` on ``family`` under ``calibration`` (see
    :func:`judge_audit`): reads every rating and verdict of the judge on the family, so it
    takes seconds on a family of 100,000s of pairs (docs/performance.md), unless ``judgecal db
    refresh`` stored it for the current data (:mod:`judgecal.db.derived`). Raises
    NotFoundError, UsageError."""
    _check_calibration(calibration)
    return AuditIndex(**_stored_index(family, judge, url, calibration=str(calibration)))


@stored("audit_index")
def _stored_index(family: str, judge: str, url: str | None = None, *, calibration: str = "latest") -> dict:
    index = compute_audit_index(family, judge, url, calibration=calibration)
    return {f.name: getattr(index, f.name) for f in fields(index)}


def compute_audit_index(family: str, judge: str, url: str | None = None, *, calibration: str = "latest") -> AuditIndex:
    """:func:`audit_index` computed from the rows, never read from the store."""
    _check_calibration(calibration)
    engine = get_engine(url)
    with session_scope(engine) as s:
        fam_id = q.family_id(s, family)
        jrow = q.judge_by_name(s, judge, lambda: q.judges_with_data(s, [fam_id]), f"with ratings or verdicts in {family}")
        jinfo = {"judge": jrow.name, "judge_id": jrow.id, "judge_mode": jrow.mode,
                 "scale": [jrow.scale_min, jrow.scale_max]}
    engine.dispose()
    cal = None
    if str(calibration) != "none":
        if str(calibration) == "latest":
            found = load_calibrations([family], f"id:{jrow.id}", "latest", url)
        else:
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
        answers = browse.family_answers(s, fam_id)  # item and characters of each answer
    engine.dispose()
    key_of = {**{r: e["key"] for r, e in extra.items()}, **vidx.key_of, **rows.key_of}
    chars_of = {**{r: e["chars"] for r, e in extra.items()}, **vidx.chars}
    del vidx, extra
    ordered = sorted(pairs.values(), key=lambda p: (key_of[p["a"]], key_of[p["b"]]))
    del pairs
    # each answer's model (a code into the sorted names), characters and item
    model_names = sorted({key_of[x][1] for p in ordered for x in (p["a"], p["b"])})
    code_of = {name: i for i, name in enumerate(model_names)}
    n = len(ordered)
    ma, mb = (np.fromiter((code_of[key_of[p[side]][1]] for p in ordered), dtype=np.int32, count=n) for side in "ab")

    def chars(rid: int) -> int:
        c = answers[rid][1] if rid in answers else chars_of.get(rid)
        return -1 if c is None else int(c)

    ca, cb = (np.fromiter((chars(p[side]) for p in ordered), dtype=np.int32, count=n) for side in "ab")
    item = np.fromiter((answers[p["a"]][0] if p["a"] in answers else answers[p["b"]][0] if p["b"] in answers else -1
                        for p in ordered), dtype=np.int64, count=n)
    del key_of, chars_of, answers, code_of

    # judge decisions: raw scores (mean of ok ratings), calibrated scores where a calibration applies
    # a score that is not a number (PostgreSQL can hold NaN; no importer writes one) gives no decision
    score = {r: v for r, v in rows.score.items() if math.isfinite(v)}
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
    idx = {name: np.zeros(n, dtype=np.int8) for name in ("kind", "gold", "raw", "cal", "vdec", "dec")}
    changed_a = np.zeros(n, dtype=bool)
    flags_a = np.zeros(n, dtype=np.uint8)
    counts = {f: 0 for f in FILTERS}
    counts["all"] = n
    for i, p in enumerate(ordered):
        rd, cd = raw_dec[i], cal_dec[i]
        changed = rd is not None and cd is not None and rd != cd
        vd = _verdict_decision(p["verdicts"])
        decision = rd if rd is not None else vd
        bad = (status_of.get(p["a"], set()) | status_of.get(p["b"], set())) & set(BAD) or \
            any(status in BAD for status, _ in p["verdicts"].values())
        mask = 0
        for name, hit in (
                ("disagree", p["gold"] is not None and decision in ("a", "b", "tie") and decision != p["gold"]),
                ("flips", changed),
                ("ties", rd == "tie" or any(v == "tie" for st, v in p["verdicts"].values() if st == "ok")),
                ("unparsed", bool(bad)),
                ("inconsistent", vd == "inconsistent")):
            if hit:
                mask |= BIT[name]
                counts[name] += 1
        idx["kind"][i], idx["gold"][i] = KINDS.index(p["kind"]), CODE[p["gold"]]
        idx["raw"][i], idx["cal"][i], idx["vdec"][i], idx["dec"][i] = CODE[rd], CODE[cd], CODE[vd], CODE[decision]
        changed_a[i], flags_a[i] = changed, mask

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

    cal_info = None
    if cal is not None:
        fresh = staleness([(cal, family, jrow.name)], url)
        ident = (cal.metrics or {}).get("identification") or {}
        sel = (cal.metrics or {}).get("selection") or {}
        cal_info = {"id": cal.id, "length_unit": cal.length_unit, "tokenizer": cal.tokenizer, "stale": fresh[cal.id],
                    "created_at": iso_utc(cal.created_at),
                    "density_exemption": bool(cal.density_exemption),
                    # what the page must say wherever it applies the calibration (issue 32)
                    "identified": ident.get("identified") if ident else None,
                    "not_identified_reasons": list(ident.get("reasons") or []) if ident else [],
                    "advice": sel.get("decision"), "recommended": sel.get("recommended")}
    rid = np.array(sorted(set(score) | set(rows.length) | set(calibrated)), dtype=np.int64)
    values = np.full((3, len(rid)), np.nan)
    for row, d in enumerate((score, rows.length, calibrated)):
        if d:
            ids = np.fromiter(d.keys(), dtype=np.int64, count=len(d))
            values[row, np.searchsorted(rid, ids)] = np.fromiter(d.values(), dtype=np.float64, count=len(d))
    head = {"task_family": family, "family_id": fam_id, **jinfo, "calibration": cal_info, "length_unit": unit,
            "counts": counts, "agreement": agreement, "left_out": left}
    return AuditIndex(head=head, a=np.fromiter((p["a"] for p in ordered), dtype=np.int64, count=n),
                      b=np.fromiter((p["b"] for p in ordered), dtype=np.int64, count=n), **idx,
                      changed=changed_a, flags=flags_a, rid=rid, values=values, item=item, ma=ma, mb=mb, ca=ca, cb=cb,
                      models=model_names)


def _selection(index: AuditIndex, s, model: str | None, q: str | None) -> tuple[np.ndarray, dict | None]:
    """(bool mask of the pairs ``model`` and ``q`` keep, {"side": 'a'/'b'/'both' codes (1, 2, 3;
    0 elsewhere), "won", "lost", "won_longer": bool masks} or None without ``model``).
    Raises NotFoundError for a model no pair holds an answer of."""
    keep = np.ones(len(index.a), dtype=bool)
    by_model = None
    if model is not None:
        code = index.model_code(model)
        if code is None:
            import difflib

            h = index.head
            close = difflib.get_close_matches(model, index.models, n=3, cutoff=0.6)
            raise NotFoundError(f"no answers of model {model!r} in {h['task_family']} (the pairs audited for judge "
                                f"{h['judge']!r} hold answers of {len(index.models)} models, names matched exactly as "
                                f"stored)" + (f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""))
        is_a, is_b = index.ma == code, index.mb == code
        keep &= is_a | is_b
        one_a, one_b = is_a & ~is_b, is_b & ~is_a  # a pair of two of its own answers is neither won nor lost
        won = (one_a & (index.dec == CODE["a"])) | (one_b & (index.dec == CODE["b"]))
        lost = (one_a & (index.dec == CODE["b"])) | (one_b & (index.dec == CODE["a"]))
        known = (index.ca >= 0) & (index.cb >= 0)
        longer = known & ((one_a & (index.ca > index.cb)) | (one_b & (index.cb > index.ca)))
        by_model = {"side": is_a.astype(np.int8) + 2 * is_b.astype(np.int8), "won": won, "lost": lost,
                    "won_longer": won & longer}
    if q is not None:
        rids, items = browse.search_family(s, index.head["family_id"], q)
        hit = np.zeros(len(index.a), dtype=bool)
        if rids:
            found = np.fromiter(rids, dtype=np.int64, count=len(rids))
            hit |= np.isin(index.a, found) | np.isin(index.b, found)
        if items:
            hit |= np.isin(index.item, np.fromiter(items, dtype=np.int64, count=len(items)))
        keep &= hit
    return keep, by_model


SIDE = {1: "a", 2: "b", 3: "both"}


def audit_page(index: AuditIndex, url: str | None = None, *, filter: str = "all", page: int = 1,
               per_page: int = PER_PAGE, model: str | None = None, q: str | None = None) -> dict:
    """One page of an :class:`AuditIndex` as :func:`judge_audit` returns it: the pairs passing
    ``filter`` (and ``model`` and ``q``), page ``page`` of ``per_page``, with their texts,
    ratings and verdicts read for that page only. Raises UsageError (a page past the last, a
    model filter without a model), NotFoundError (a model without answers in the pairs)."""
    from judgecal.views.browse import page_span

    model, q = check_request(filter, model, q)
    engine = get_engine(url)
    with session_scope(engine) as s:
        if model is None and q is None:
            keep, by_model = None, None
            counts = dict(index.head["counts"])
        else:
            keep, by_model = _selection(index, s, model, q)
            counts = {"all": int(np.count_nonzero(keep))}
            for f in FILTERS[1:]:
                counts[f] = int(np.count_nonzero(keep & ((index.flags & BIT[f]) != 0)))
            if by_model is not None:
                for f in MODEL_FILTERS:
                    counts[f] = int(np.count_nonzero(keep & by_model[f]))
        if filter == "all":
            mask = keep
        elif filter in MODEL_FILTERS:
            mask = keep & by_model[filter]
        else:
            mask = (index.flags & BIT[filter]) != 0
            if keep is not None:
                mask &= keep
        chosen = np.arange(len(index.a)) if mask is None else np.flatnonzero(mask)
        total = len(chosen)
        pages, shown = page_span(total, page, per_page, "pairs")
        shown = [int(i) for i in chosen[shown]]
        pairs = [(int(index.a[i]), int(index.b[i])) for i in shown]
        detail = browse.pair_details(s, index.head["judge_id"], pairs)
    engine.dispose()
    out_rows = []
    for i, (pa, pb) in zip(shown, pairs):
        ra, rb = detail["responses"].get(pa, {}), detail["responses"].get(pb, {})
        item = detail["items"].get(ra.get("item_id"), {})
        ver = {}
        for (va, vb), by_pos in detail["verdicts"].items():
            if {va, vb} != {pa, pb}:
                continue
            same = va == pa
            for pos, d in by_pos.items():
                ver[pos if same else MIRROR_POSITION[pos]] = {**d, "verdict": d["verdict"] if same else MIRROR[d["verdict"]],
                                                              "preference": d["preference"] if same or d["preference"] is None
                                                              else 1.0 - d["preference"]}

        def side(rid: int, r: dict) -> dict:
            return {**r, "length": index.value(1, rid), "score": index.value(0, rid),
                    "calibrated": index.value(2, rid), "ratings": detail["ratings"].get(rid, [])}

        out_rows.append({"kind": KINDS[index.kind[i]], "item": item,
                         "a": side(pa, ra), "b": side(pb, rb), "gold": CODES[index.gold[i]],
                         "raw_decision": CODES[index.raw[i]], "calibrated_decision": CODES[index.cal[i]],
                         "changed": bool(index.changed[i]), "verdicts": {k: ver[k] for k in ("ab", "ba", "na") if k in ver},
                         "verdict_decision": CODES[index.vdec[i]], "decision": CODES[index.dec[i]],
                         "flags": [f for f in FILTERS[1:] if index.flags[i] & BIT[f]]
                         + ([f for f in MODEL_FILTERS if by_model[f][i]] if by_model is not None else []),
                         "model_side": SIDE[int(by_model["side"][i])] if by_model is not None else None})
    h = index.head
    return {"task_family": h["task_family"], "judge": h["judge"], "judge_id": h["judge_id"],
            "judge_mode": h["judge_mode"], "scale": h["scale"], "calibration": h["calibration"],
            "length_unit": h["length_unit"], "model": model, "q": q, "filter": filter,
            "filter_text": FILTER_TEXT[filter], "page": page,
            "per_page": per_page, "pages": pages, "total": total, "counts": counts,
            "agreement": h["agreement"], "left_out": dict(h["left_out"]), "rows": out_rows}
