"""Read what the web view (``judgecal serve``) browses: judges, models, status counts, a page
of ratings, and the pairs of a judge audit. Plain Python rows, no maths.

Every list comes in content order (task family name, item prompt SHA-256, each answer's model
and text SHA-256, judge key, sample index), never row-id order, so a page shows the same rows
in every database holding the same data. Every query that returns rows to a page has a LIMIT;
long texts are cut in SQL (``substr``) to :data:`TEXT_LIMIT` characters.
"""

from __future__ import annotations

import datetime as dt
import sys
from dataclasses import dataclass, field

import numpy as np
from sqlalchemy import func, literal_column, or_, select
from sqlalchemy.orm import Session, aliased

from judgecal.db.models import as_utc, iso_utc
from judgecal.db import models as m
from judgecal.db.contentkey import family_range
from judgecal.db.queries import judge_labels

#: the most characters of one text (prompt, answer, judge output) a page receives
TEXT_LIMIT = 20000
#: the most rows one page of ratings or audit pairs may ask for
MAX_PAGE = 200
#: the most models the overview lists (the rest are counted)
MAX_MODELS = 500
CHUNK = 900  # bound parameters per IN (...) list (SQLite's old limit is 999)


def judge_ref(label_of: dict[int, str], names: dict[int, str], judge_id: int) -> str:
    """What a URL names a judge by: its name where no other judge has it and the name reads as
    a name (:func:`judgecal.db.queries.judge_by_name`), else ``id:N``: a judge named ``id:5``,
    ``name:x`` or ``7`` would be read as another judge's id or reference, and a name holding a
    control character cannot travel in a query string the pages accept."""
    name = names[judge_id]
    reads_as_name = not (name[:3].lower() == "id:" or name[:5].lower() == "name:" or name.strip() != name
                         or (name.isascii() and name.isdigit()) or any(ord(c) < 32 or ord(c) == 127 for c in name))
    return name if label_of[judge_id] == name and reads_as_name else f"id:{judge_id}"


def judges(s: Session, counts: dict[str, dict[int, int]] | None = None) -> list[dict]:
    """Every judge: id, name, label (``name (id N)`` where names are shared), ref (for URLs),
    model, mode, endpoint, prompt name, scale, ratings and pairwise verdicts stored; by name,
    then id. ``counts``: {"ratings": {judge id: n}, "verdicts": {judge id: n}} when the caller
    has counted them already (else they are counted here)."""
    label = judge_labels(s)
    rows = s.execute(select(m.Judge.id, m.Judge.name, m.Judge.model, m.Judge.mode, m.Judge.endpoint,
                            m.Judge.prompt_name, m.Judge.scale_min, m.Judge.scale_max)).all()
    names = {r[0]: r[1] for r in rows}
    if counts is not None:
        n_rat, n_ver = counts["ratings"], counts["verdicts"]
    else:
        n_rat = dict(s.execute(select(m.Rating.judge_id, func.count()).group_by(m.Rating.judge_id)).all())
        n_ver = dict(s.execute(select(m.PairwiseJudgment.judge_id, func.count())
                               .group_by(m.PairwiseJudgment.judge_id)).all())
    out = [{"id": jid, "name": name, "label": label[jid], "ref": judge_ref(label, names, jid), "model": model,
            "mode": mode, "endpoint": endpoint, "prompt": prompt, "scale": [lo, hi],
            "ratings": n_rat.get(jid, 0), "verdicts": n_ver.get(jid, 0)}
           for jid, name, model, mode, endpoint, prompt, lo, hi in rows]
    return sorted(out, key=lambda j: (j["name"], j["id"]))


def judge_presence(s: Session) -> dict[str, dict[int, int]]:
    """{"ratings": {judge id: 1}, "verdicts": {judge id: 1}} for the judges with at least one
    rating / pairwise verdict (:func:`judges`' ``counts`` where only their presence matters: one
    index probe per judge, not a pass over every row)."""
    out: dict[str, dict[int, int]] = {}
    for kind, T in (("ratings", m.Rating), ("verdicts", m.PairwiseJudgment)):
        has = select(T.id).where(T.judge_id == m.Judge.id).exists()
        out[kind] = {jid: 1 for jid in s.scalars(select(m.Judge.id).where(has))}
    return out


def models(s: Session, limit: int = MAX_MODELS) -> tuple[list[dict], int]:
    """([{model, responses, families}] by model name, at most ``limit``), number of models."""
    total = s.scalar(select(func.count(func.distinct(m.Response.model)))) or 0
    q = (select(m.Response.model, func.count(), func.count(func.distinct(m.Item.task_family_id)))
         .join(m.Item, m.Item.id == m.Response.item_id)
         .group_by(m.Response.model).order_by(m.Response.model).limit(limit))
    return [{"model": mo, "responses": n, "families": f} for mo, n, f in s.execute(q)], int(total)


def status_counts(s: Session) -> dict[str, dict[str, int]]:
    """{"ratings": {status: n}, "verdicts": {status: n}} over the whole database."""
    rat = dict(s.execute(select(m.Rating.status, func.count()).group_by(m.Rating.status)).all())
    ver = dict(s.execute(select(m.PairwiseJudgment.status, func.count())
                         .group_by(m.PairwiseJudgment.status)).all())
    return {"ratings": {k: rat[k] for k in sorted(rat)}, "verdicts": {k: ver[k] for k in sorted(ver)}}


def mc_run_count(s: Session) -> int:
    return int(s.scalar(select(func.count()).select_from(m.McRun)) or 0)


def family_names(s: Session) -> list[str]:
    return list(s.scalars(select(m.TaskFamily.name).order_by(m.TaskFamily.name)))


# ---------------------------------------------------------------- ratings
@dataclass
class RatingFilter:
    """What a page of ratings is filtered by (None: no filter). ``since``/``until``: the
    rating's creation time, ``until`` exclusive."""

    family_id: int | None = None
    judge_id: int | None = None
    model: str | None = None
    status: str | None = None
    score_min: float | None = None
    score_max: float | None = None
    since: dt.datetime | None = None
    until: dt.datetime | None = None


def _rating_where(q, f: RatingFilter, postgresql: bool = False, family: str | None = None):
    """``q`` narrowed to the ratings matching ``f``; ``family``: the name of ``f.family_id`` (the
    caller reads it), whose ratings are a range of the stored content key (no join with the items)."""
    R = m.Rating
    if postgresql and (f.score_min is not None or f.score_max is not None):
        q = q.where(R.score != literal_column("'NaN'::float8"))  # PostgreSQL sorts NaN above every number
    if family is not None:
        low, high = family_range(family)
        q = q.where(R.content_key >= low, R.content_key < high)
    if f.judge_id is not None:
        q = q.where(R.judge_id == f.judge_id)
    if f.model is not None:
        q = q.where(m.Response.model == f.model)
    if f.status is not None:
        q = q.where(R.status == f.status)
    if f.score_min is not None:
        q = q.where(R.score >= f.score_min)
    if f.score_max is not None:
        q = q.where(R.score <= f.score_max)
    if f.since is not None:
        q = q.where(R.created_at >= f.since)
    if f.until is not None:
        q = q.where(R.created_at < f.until)
    return q


def rating_page(s: Session, f: RatingFilter, *, limit: int, offset: int) -> tuple[list[dict], int]:
    """(one page of ratings matching ``f``, how many match). Rows in content order (family,
    item prompt SHA-256, model, answer SHA-256, judge key, sample index; texts by code point):
    the order of the stored ``rating.content_key`` (:mod:`judgecal.db.contentkey`), read by
    walking its index. Texts cut to :data:`TEXT_LIMIT` characters in SQL.

    The page is chosen on the key and the rating id alone, and only its rows' texts are then
    read. A family filter is a range of the key; only a model filter joins the answers. Raises
    nothing for an unknown family id: the page is empty."""
    limit = max(1, min(int(limit), MAX_PAGE))
    R = m.Rating
    pg = s.get_bind().dialect.name == "postgresql"
    family = None
    if f.family_id is not None:
        family = s.scalar(select(m.TaskFamily.name).where(m.TaskFamily.id == f.family_id))
        if family is None:
            return [], 0
    counted = select(R.id)
    if f.model is not None:
        counted = counted.join(m.Response, m.Response.id == R.response_id)
    counted = _rating_where(counted, f, pg, family)
    total = s.scalar(select(func.count()).select_from(counted.subquery())) or 0
    page = counted.order_by(R.content_key).limit(limit).offset(max(0, int(offset)))
    return rating_rows(s, list(s.scalars(page))), int(total)


def rating_rows(s: Session, ids: list[int]) -> list[dict]:
    """The rows of the ratings ``ids`` (at most :data:`MAX_PAGE`), in the order given: {task_family,
    item (external id, else the prompt SHA-256's first 12), prompt and answer (first 300
    characters), model, n_words, n_chars, judge (label), judge_id, sample_index, status, score,
    raw_output (cut to :data:`TEXT_LIMIT`), error, created_at (ISO 8601, UTC)}."""
    ids = list(ids)[:MAX_PAGE]
    if not ids:
        return []
    R = m.Rating
    q = (select(R.id, m.TaskFamily.name, m.Item.external_id, func.substr(m.Item.prompt, 1, 300), m.Response.model,
                func.substr(m.Response.text, 1, 300), m.Response.n_words, m.Response.n_chars, R.judge_id,
                R.sample_index, R.status, R.score, func.substr(R.raw_output, 1, TEXT_LIMIT), R.error, R.created_at,
                m.Item.prompt_sha256)
         .join(m.Response, m.Response.id == R.response_id)
         .join(m.Item, m.Item.id == m.Response.item_id)
         .join(m.TaskFamily, m.TaskFamily.id == m.Item.task_family_id)
         .where(R.id.in_(ids)))
    label = judge_labels(s)
    by_id = {}
    for rid, fam, ext, prompt, model, text, words, chars, jid, k, status, score, raw, error, created, sha in s.execute(q):
        by_id[rid] = {"task_family": fam, "item": ext or sha[:12], "prompt": prompt, "model": model, "answer": text,
                      "n_words": words, "n_chars": chars, "judge": label[jid], "judge_id": jid, "sample_index": k,
                      "status": status, "score": score, "raw_output": raw, "error": error,
                      "created_at": iso_utc(created)}
    return [by_id[i] for i in ids if i in by_id]


_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
_MICROSECOND = dt.timedelta(microseconds=1)


def _utc_us(value: dt.datetime) -> int:
    """Microseconds since the epoch of a stored time (:func:`judgecal.db.models.as_utc`), exact."""
    return (as_utc(value) - _EPOCH) // _MICROSECOND


@dataclass
class RatingIndex:
    """Every rating's filter columns, in content order (family name, item prompt SHA-256, model,
    answer SHA-256, judge key, sample index; texts compared by code point, on every database:
    the stored ``rating.content_key``, :mod:`judgecal.db.contentkey`):
    what ``judgecal serve``'s ratings list cuts any filter and page from without a query over
    the ratings (:func:`rating_index`). One entry per rating: ``id`` (int64), ``family_id``,
    ``judge_id`` (int64), ``model`` (int32 code into ``models``), ``status`` (int8 code into
    :data:`judgecal.db.models.RATING_STATUSES`), ``score`` (float64, NaN where NULL),
    ``created_us`` (int64 microseconds since 1970-01-01 UTC). About 40 bytes a rating."""

    id: np.ndarray
    family_id: np.ndarray
    judge_id: np.ndarray
    model: np.ndarray
    models: dict[str, int]
    status: np.ndarray
    score: np.ndarray
    created_us: np.ndarray

    @property
    def nbytes(self) -> int:
        """Bytes of the arrays and of the model-name table (what a cache of indexes counts)."""
        names = sys.getsizeof(self.models) + sum(sys.getsizeof(k) + sys.getsizeof(v) for k, v in self.models.items())
        return names + sum(v.nbytes for v in vars(self).values() if isinstance(v, np.ndarray))

    def select(self, f: RatingFilter) -> np.ndarray:
        """Positions (content order) of the ratings matching ``f``, as :func:`rating_page`'s
        WHERE reads it (a NULL score matches no score bound; ``until`` exclusive)."""
        keep = np.ones(len(self.id), dtype=bool)
        if f.family_id is not None:
            keep &= self.family_id == f.family_id
        if f.judge_id is not None:
            keep &= self.judge_id == f.judge_id
        if f.model is not None:
            code = self.models.get(f.model)
            if code is None:
                return np.zeros(0, dtype=np.int64)
            keep &= self.model == code
        if f.status is not None:
            keep &= self.status == m.RATING_STATUSES.index(f.status)
        with np.errstate(invalid="ignore"):
            if f.score_min is not None:
                keep &= self.score >= f.score_min
            if f.score_max is not None:
                keep &= self.score <= f.score_max
        if f.since is not None:
            keep &= self.created_us >= _utc_us(f.since)
        if f.until is not None:
            keep &= self.created_us < _utc_us(f.until)
        return np.flatnonzero(keep)


#: bytes a :class:`RatingIndex` holds per rating (its arrays; the model names come on top)
RATING_INDEX_BYTES = 41


def rating_index_bytes_at_most(s: Session) -> int:
    """An upper bound of the arrays' bytes of :func:`rating_index` (highest rating id x
    :data:`RATING_INDEX_BYTES`), read by one index probe: whether the index could be kept is
    known before it is computed."""
    return int(s.scalar(select(func.max(m.Rating.id))) or 0) * RATING_INDEX_BYTES


def rating_index(s: Session, chunk: int = 50_000) -> RatingIndex:
    """The :class:`RatingIndex` of every rating in the database: one streamed query in the
    order of the stored content key (the order :func:`rating_page` reads), model names coded
    as they arrive (each kept once). Takes seconds on a million ratings (docs/performance.md)."""
    R = m.Rating
    statuses = {st: i for i, st in enumerate(m.RATING_STATUSES)}
    q = (select(R.id, m.Item.task_family_id, m.Response.model, R.judge_id, R.status, R.score, R.created_at)
         .join(m.Response, m.Response.id == R.response_id)
         .join(m.Item, m.Item.id == m.Response.item_id)
         .order_by(R.content_key))
    models: dict[str, int] = {}
    cols: list[list] = [[] for _ in range(7)]
    for part in s.connection().execute(q).partitions(chunk):
        ids, fams, ms, js, sts, scores, created = zip(*part)
        cols[0].append(np.array(ids, dtype=np.int64))
        cols[1].append(np.array(fams, dtype=np.int64))
        cols[2].append(np.array([models.setdefault(x, len(models)) for x in ms], dtype=np.int32))
        cols[3].append(np.array(js, dtype=np.int64))
        cols[4].append(np.array([statuses[x] for x in sts], dtype=np.int8))
        cols[5].append(np.array([np.nan if x is None else x for x in scores], dtype=np.float64))
        cols[6].append(np.array([_utc_us(x) for x in created], dtype=np.int64))
    if not cols[0]:
        empty = np.zeros(0, dtype=np.int64)
        return RatingIndex(empty, empty, empty, empty.astype(np.int32), {}, empty.astype(np.int8),
                           empty.astype(np.float64), empty)
    ids, fams, ms, js, sts, scores, created = (np.concatenate(c) for c in cols)
    return RatingIndex(id=ids, family_id=fams, judge_id=js, model=ms, models=dict(models), status=sts,
                       score=scores, created_us=created)


# ---------------------------------------------------------------- judge audit
@dataclass
class VerdictIndex:
    """A judge's pairwise verdicts (sample 0) on one family, light (no texts): ``pairs``
    {(a, b): {position: (status, verdict)}}, ``key_of`` {response id: (item prompt SHA-256,
    model, text SHA-256)}, ``chars``/``words`` {response id: length}."""

    pairs: dict[tuple[int, int], dict[str, tuple[str, str | None]]] = field(default_factory=dict)
    key_of: dict[int, tuple[str, str, str]] = field(default_factory=dict)
    chars: dict[int, int] = field(default_factory=dict)
    words: dict[int, int] = field(default_factory=dict)


def verdict_index(s: Session, family_id: int, judge_id: int) -> VerdictIndex:
    """The judge's sample-0 verdicts on the family (:class:`VerdictIndex`)."""
    PJ = m.PairwiseJudgment
    RA, RB = aliased(m.Response), aliased(m.Response)
    q = (select(PJ.response_a_id, PJ.response_b_id, PJ.position, PJ.status, PJ.verdict, m.Item.prompt_sha256,
                RA.model, RA.text_sha256, RA.n_chars, RA.n_words, RB.model, RB.text_sha256, RB.n_chars, RB.n_words)
         .join(RA, RA.id == PJ.response_a_id).join(RB, RB.id == PJ.response_b_id)
         .join(m.Item, m.Item.id == RA.item_id)
         .where(PJ.judge_id == judge_id, PJ.sample_index == 0, m.Item.task_family_id == family_id))
    out = VerdictIndex()
    for part in s.connection().execute(q).partitions(20000):  # Core rows, converted 20,000 at a time
        for a, b, pos, status, verdict, item, ma, sa, ca, wa, mb, sb, cb, wb in part:
            out.pairs.setdefault((a, b), {})[pos] = (status, verdict)
            out.key_of[a], out.key_of[b] = (item, ma, sa), (item, mb, sb)
            out.chars[a], out.chars[b], out.words[a], out.words[b] = ca, cb, wa, wb
    return out


def expert_pairs(s: Session, family_id: int) -> dict[tuple[int, int], str]:
    """{(response a, response b): 'a'|'b'|'tie'} of the family's pairwise expert labels; where
    several labels name one pair, the first by (annotator, source)."""
    E = m.ExpertLabel
    R = aliased(m.Response)
    q = (select(E.response_a_id, E.response_b_id, E.preference, E.annotator, E.source)
         .join(R, R.id == E.response_a_id).join(m.Item, m.Item.id == R.item_id)
         .where(E.kind == "pairwise", m.Item.task_family_id == family_id))
    out: dict[tuple[int, int], str] = {}
    for a, b, pref, _, _ in sorted(s.execute(q), key=lambda r: (r[3], r[4], r[0], r[1])):
        out.setdefault((a, b), pref)
    return out


def response_keys(s: Session, ids) -> dict[int, dict]:
    """{response id: {"key": (item prompt SHA-256, model, text SHA-256), "chars", "words"}}."""
    ids = sorted(set(ids))
    out: dict[int, dict] = {}
    for start in range(0, len(ids), CHUNK):
        q = (select(m.Response.id, m.Item.prompt_sha256, m.Response.model, m.Response.text_sha256, m.Response.n_chars,
                    m.Response.n_words)
             .join(m.Item, m.Item.id == m.Response.item_id).where(m.Response.id.in_(ids[start:start + CHUNK])))
        for rid, item, model, sha, chars, words in s.execute(q):
            out[rid] = {"key": (item, model, sha), "chars": chars, "words": words}
    return out


def pair_details(s: Session, judge_id: int, pairs: list[tuple[int, int]]) -> dict:
    """What one page of audit pairs shows, at most :data:`MAX_PAGE` pairs: {"responses": {id:
    {model, text (cut), n_chars, n_words, n_bytes, item_id}}, "items": {id: {prompt (cut),
    external_id, reference (cut), prompt_sha256}}, "ratings": {response id: [{sample_index, status, score,
    raw_output (cut), error}] by sample}, "verdicts": {(a, b): {position: {status, verdict,
    preference, raw_output (cut), error}}} (sample 0)}."""
    pairs = list(pairs)[:MAX_PAGE]
    ids = sorted({x for p in pairs for x in p})
    out: dict = {"responses": {}, "items": {}, "ratings": {}, "verdicts": {}}
    if not ids:
        return out
    R = m.Response
    for rid, model, text, chars, words, nbytes, item in s.execute(
            select(R.id, R.model, func.substr(R.text, 1, TEXT_LIMIT), R.n_chars, R.n_words, R.n_bytes, R.item_id)
            .where(R.id.in_(ids)).limit(2 * MAX_PAGE)):
        out["responses"][rid] = {"model": model, "text": text, "n_chars": chars, "n_words": words, "n_bytes": nbytes,
                                 "item_id": item, "cut": chars is not None and chars > TEXT_LIMIT}
    items = sorted({r["item_id"] for r in out["responses"].values()})
    for iid, prompt, ext, ref, plen, sha in s.execute(
            select(m.Item.id, func.substr(m.Item.prompt, 1, TEXT_LIMIT), m.Item.external_id,
                   func.substr(m.Item.reference, 1, TEXT_LIMIT), func.length(m.Item.prompt), m.Item.prompt_sha256)
            .where(m.Item.id.in_(items)).limit(2 * MAX_PAGE)):
        out["items"][iid] = {"prompt": prompt, "external_id": ext, "reference": ref, "prompt_sha256": sha,
                             "cut": plen is not None and plen > TEXT_LIMIT}
    Ra = m.Rating
    for rid, k, status, score, raw, error in s.execute(
            select(Ra.response_id, Ra.sample_index, Ra.status, Ra.score, func.substr(Ra.raw_output, 1, TEXT_LIMIT),
                   func.substr(Ra.error, 1, 2000))
            .where(Ra.judge_id == judge_id, Ra.response_id.in_(ids))
            .order_by(Ra.response_id, Ra.sample_index).limit(20 * MAX_PAGE)):
        out["ratings"].setdefault(rid, []).append({"sample_index": k, "status": status, "score": score,
                                                   "raw_output": raw, "error": error})
    PJ = m.PairwiseJudgment
    wanted = set(pairs)
    for a, b, pos, status, verdict, pref, raw, error in s.execute(
            select(PJ.response_a_id, PJ.response_b_id, PJ.position, PJ.status, PJ.verdict, PJ.preference,
                   func.substr(PJ.raw_output, 1, TEXT_LIMIT), func.substr(PJ.error, 1, 2000))
            .where(PJ.judge_id == judge_id, PJ.sample_index == 0, PJ.response_a_id.in_(ids), PJ.response_b_id.in_(ids))
            .order_by(PJ.response_a_id, PJ.response_b_id, PJ.position).limit(8 * MAX_PAGE * MAX_PAGE)):
        if (a, b) in wanted:
            out["verdicts"].setdefault((a, b), {})[pos] = {"status": status, "verdict": verdict, "preference": pref,
                                                          "raw_output": raw, "error": error}
    return out


def baseline_models(s: Session) -> list[dict]:
    """[{task_family, judge_id, judge (label), judge_ref, model, verdicts}]: the models whose
    answers hold the baseline side of a judge's pairwise verdicts (``baseline_side``), per
    family and judge, by family, judge label, then model."""
    PJ = m.PairwiseJudgment
    out: dict[tuple[str, int, str], int] = {}
    for side, col in (("a", PJ.response_a_id), ("b", PJ.response_b_id)):
        R = aliased(m.Response)
        q = (select(m.TaskFamily.name, PJ.judge_id, R.model, func.count())
             .select_from(PJ).join(R, R.id == col).join(m.Item, m.Item.id == R.item_id)
             .join(m.TaskFamily, m.TaskFamily.id == m.Item.task_family_id)
             .where(PJ.baseline_side == side).group_by(m.TaskFamily.name, PJ.judge_id, R.model))
        for fam, jid, model, n in s.execute(q):
            out[(fam, jid, model)] = out.get((fam, jid, model), 0) + n
    label = judge_labels(s)
    names = {jid: name for jid, name in s.execute(select(m.Judge.id, m.Judge.name))}
    rows = [{"task_family": f, "judge_id": jid, "judge": label[jid], "judge_ref": judge_ref(label, names, jid),
             "model": mo, "verdicts": n} for (f, jid, mo), n in out.items()]
    return sorted(rows, key=lambda r: (r["task_family"], r["judge"], r["model"]))


def family_answers(s: Session, family_id: int) -> dict[int, tuple[int, int | None]]:
    """{response id: (item id, length in characters)} of every response of the family: what the
    judge audit's index keeps per pair besides the models (the ``model`` filter's ``won_longer``
    and the ``q`` search's items). One streamed query, no texts."""
    R = m.Response
    q = (select(R.id, R.item_id, R.n_chars).join(m.Item, m.Item.id == R.item_id)
         .where(m.Item.task_family_id == family_id))
    out: dict[int, tuple[int, int | None]] = {}
    for part in s.connection().execute(q).partitions(50_000):
        for rid, item, chars in part:
            out[rid] = (item, chars)
    return out


_UPPER = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_ASCII_LOWER = str.maketrans(_UPPER, _UPPER.lower())


def ascii_fold(text: str) -> str:
    """``text`` with the ASCII letters A-Z lowered and every other character as it is: the case
    folding of :func:`search_family`, the same on every database."""
    return text.translate(_ASCII_LOWER)


def _folded(column, dialect: str):
    """SQL of ``column`` with A-Z lowered and nothing else changed (:func:`ascii_fold`): SQLite's
    ``lower()`` folds the ASCII letters only; PostgreSQL's would fold every letter its locale
    knows (É to é, İ to i, the Kelvin sign to k), so there ``translate()`` lowers A-Z alone."""
    from sqlalchemy import Text

    if dialect == "sqlite":
        return func.lower(column, type_=Text)
    return func.translate(column, _UPPER, _UPPER.lower(), type_=Text)


def search_family(s: Session, family_id: int, text: str) -> tuple[set[int], set[int]]:
    """(ids of the family's responses whose text contains ``text``, ids of its items whose
    prompt contains it), case-insensitively for the ASCII letters A-Z and exactly for every
    other character, on SQLite and PostgreSQL alike (:func:`ascii_fold`: 'Python' finds
    'PYTHON', 'Café' finds 'CAFé' but not 'CAFÉ'). ``%``, ``_`` and ``/`` are literal
    characters (LIKE with ``autoescape``). Texts are searched whole (not cut)."""
    dialect = s.get_bind().dialect.name
    needle = ascii_fold(text)
    R = m.Response
    rq = (select(R.id).join(m.Item, m.Item.id == R.item_id)
          .where(m.Item.task_family_id == family_id, _folded(R.text, dialect).contains(needle, autoescape=True)))
    iq = select(m.Item.id).where(m.Item.task_family_id == family_id,
                                 _folded(m.Item.prompt, dialect).contains(needle, autoescape=True))
    return set(s.scalars(rq)), set(s.scalars(iq))


def model_audit_scope(s: Session, model: str) -> tuple[set[int], set[tuple[int, int]]]:
    """Where a judge audit holds an answer of ``model`` (exact name), as the audit builds its
    pairs (:func:`judgecal.views.audit.compute_audit_index`): (the family ids whose
    expert-labelled pairwise or concise/verbose pairs hold one of its answers: every judge's
    audit of them holds it; {(family id, judge id)} whose sample-0 verdicts hold one). The
    ``/audit`` choice page narrows its options with it."""
    ids = select(m.Response.id).where(m.Response.model == model)
    RA = aliased(m.Response)
    EL, VP, PJ = m.ExpertLabel, m.VerbosityPair, m.PairwiseJudgment
    expert = (select(m.Item.task_family_id).select_from(EL).join(RA, RA.id == EL.response_a_id)
              .join(m.Item, m.Item.id == RA.item_id)
              .where(EL.kind == "pairwise", or_(EL.response_a_id.in_(ids), EL.response_b_id.in_(ids))).distinct())
    verbosity = (select(m.Item.task_family_id).select_from(VP).join(m.Item, m.Item.id == VP.item_id)
                 .where(or_(VP.concise_response_id.in_(ids), VP.verbose_response_id.in_(ids))).distinct())
    verdicts = (select(m.Item.task_family_id, PJ.judge_id).select_from(PJ).join(RA, RA.id == PJ.response_a_id)
                .join(m.Item, m.Item.id == RA.item_id)
                .where(PJ.sample_index == 0, or_(PJ.response_a_id.in_(ids), PJ.response_b_id.in_(ids))).distinct())
    every_judge = set(s.scalars(expert)) | set(s.scalars(verbosity))
    return every_judge, {(f, j) for f, j in s.execute(verdicts)}
