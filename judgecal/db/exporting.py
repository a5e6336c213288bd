"""Rows for ``judgecal export``, in judgecal's generic import format (docs/data-formats.md),
so an export imports into another database unchanged.

Every kind is a generator ``kind(session, families=None, judge_id=None)`` that STREAMS from the database (``yield_per``: a server-side cursor
on PostgreSQL, SQLite's own cursor), selecting plain columns rather than ORM objects, so the
memory an export needs does not grow with the number of rows (docs/performance.md). Each
kind also declares its columns in :data:`COLUMNS` (the CSV header, known before the first
row). ``families``: task family ids to keep (None: all; a label or verdict belongs to the
family of its first response's item); ``judge_id``: only that judge's rows, for the kinds in
:data:`JUDGED` (the others have no judge; :func:`judgecal.views.export.export` refuses ``--judge``
for them). Adding a kind = one generator + one entry in :data:`COLUMNS` and :data:`KINDS`.

Every kind is written in **content order**, never row-id order, so the same data gives the same
file in every database whatever the import order: by task family name, the item's prompt
SHA-256, then the rows' own natural keys (model and text SHA-256 of each response, judge key,
sample index, position, annotator, source), texts compared by code point on both dialects
(:func:`_by_code_point`). Ratings walk their stored ``content_key`` (the same order).
Calibrations are oldest first, then in that order."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Optional

from sqlalchemy import func, select
from sqlalchemy.orm import Session, aliased

from judgecal.db import models as m
from judgecal.db import queries as q

YIELD_PER = 2000
ITEM_COLUMNS = ["task_family", "prompt", "item_id", "reference"]
JUDGE_COLUMNS = ["judge", "judge_model", "judge_endpoint", "judge_prompt", "judge_prompt_sha256", "judge_params",
                 "scale_min", "scale_max"]
COLUMNS: dict[str, list[str]] = {
    "responses": ITEM_COLUMNS + ["model", "response"],
    "ratings": ITEM_COLUMNS + ["model", "response"] + JUDGE_COLUMNS
    + ["sample_index", "status", "score", "expected_score", "distribution", "raw_output", "error", "attempts", "latency_s",
       "prompt_tokens", "completion_tokens"],
    "labels": ITEM_COLUMNS + ["model", "response", "score", "scale_min", "scale_max", "model_a", "response_a", "model_b",
                              "response_b", "preference", "annotator", "source"],
    "pairs": ITEM_COLUMNS + ["concise_model", "concise", "verbose_model", "verbose", "source"],
    "verdicts": ITEM_COLUMNS + ["model_a", "response_a", "model_b", "response_b"] + JUDGE_COLUMNS
    + ["judge_mode", "sample_index", "position", "status", "verdict", "preference", "distribution", "baseline", "source",
       "raw_output", "error", "attempts", "latency_s", "prompt_tokens", "completion_tokens"],
}
#: a calibration's own columns (the ``calibration`` table but ids; its clipping scale is its judge's)
CALIBRATION_FIELDS = ["created_at", "method", "objective", "length_unit", "tokenizer", "l_ref", "gamma", "p", "p_min",
                      "p_max", "n", "converged", "loss", "folds", "n_bootstrap", "seed", "density_exemption", "params",
                      "metrics", "data", "judgecal_version"]
COLUMNS["calibrations"] = ["task_family"] + JUDGE_COLUMNS + ["judge_mode"] + CALIBRATION_FIELDS


def _item_cols(I=m.Item, F=m.TaskFamily):
    return (F.name, I.prompt, I.external_id, I.reference)


def _item_fields(fam, prompt, ext, ref) -> dict:
    out = {"task_family": fam, "prompt": prompt}
    if ext is not None:
        out["item_id"] = ext
    if ref is not None:
        out["reference"] = ref
    return out


def _by_code_point(s: Session, col):
    """``col`` for ORDER BY in code-point order: PostgreSQL's "C" collation (UTF-8 bytes, which
    compare as code points); SQLite's default BINARY already is."""
    return col.collate("C") if s.get_bind().dialect.name == "postgresql" else col


def _answer_order(s: Session, R) -> tuple:
    """The ORDER BY terms of a response: its model (code point), then its text SHA-256."""
    return (_by_code_point(s, R.model), R.text_sha256)


def _item_order(s: Session, I=m.Item, F=m.TaskFamily) -> tuple:
    """The ORDER BY terms of an item: its family's name (code point), then its prompt SHA-256."""
    return (_by_code_point(s, F.name), I.prompt_sha256)


def _stream(s: Session, q):
    return s.execute(q.execution_options(yield_per=YIELD_PER))


def _scope(q, families: Optional[list[int]], judge_col=None, judge_id: Optional[int] = None):
    """``q`` restricted to the task families (ids) and the judge, where given."""
    if families is not None:
        q = q.where(m.TaskFamily.id.in_(families))
    if judge_id is not None and judge_col is not None:
        q = q.where(judge_col == judge_id)
    return q


def responses(s: Session, families: Optional[list[int]] = None, judge_id: Optional[int] = None) -> Iterator[dict]:
    """Every response: task_family, prompt, model, response (+ item_id, reference), in content order."""
    R, I, F = m.Response, m.Item, m.TaskFamily
    q = (select(*_item_cols(), R.model, R.text).select_from(F).join(I, I.task_family_id == F.id).join(R, R.item_id == I.id)
         .order_by(*_item_order(s), *_answer_order(s, R)))
    q = _scope(q, families)
    for fam, prompt, ext, ref, model, text in _stream(s, q):
        yield {**_item_fields(fam, prompt, ext, ref), "model": model, "response": text}


def _judges(s: Session) -> dict[int, dict]:
    """{judge id: the judge's identity fields as exported} (judges are few: read once)."""
    return {j.id: {"judge": j.name, "judge_model": j.model, "judge_endpoint": j.endpoint, "judge_prompt": j.prompt_name,
                   "judge_prompt_sha256": j.prompt_sha256, "judge_params": q.canonical(j.params or {}),
                   "scale_min": j.scale_min, "scale_max": j.scale_max, "judge_mode": j.mode}
            for j in s.scalars(select(m.Judge))}


def ratings(s: Session, families: Optional[list[int]] = None, judge_id: Optional[int] = None) -> Iterator[dict]:
    """Every finished rating (ok, unparsed, failed), in content order (``rating.content_key``:
    the same file from the same data in every database, whatever the import order), with its judge's identity (model,
    endpoint, prompt name and SHA-256, parameters, scale), its expected score, its judgment
    distribution (None where none was read) and the call's provenance: attempts, latency_s,
    prompt_tokens, completion_tokens (as for verdicts)."""
    R, I, F, T = m.Response, m.Item, m.TaskFamily, m.Rating
    judges = _judges(s)
    q = (select(*_item_cols(), R.model, R.text, T.judge_id, T.sample_index, T.status, T.score, T.expected_score,
                T.distribution, T.raw_output, T.error, T.attempts, T.latency_s, T.prompt_tokens, T.completion_tokens)
         .select_from(F).join(I, I.task_family_id == F.id).join(R, R.item_id == I.id).join(T, T.response_id == R.id)
         .where(T.status.in_(("ok", "unparsed", "failed"))).order_by(T.content_key))
    q = _scope(q, families, T.judge_id, judge_id)
    for (fam, prompt, ext, ref, model, text, jid, sample, status, score, expected, dist, raw, error, attempts, latency, pt,
         ct) in _stream(s, q):
        judge = {k: v for k, v in judges[jid].items() if k != "judge_mode"}
        yield {**_item_fields(fam, prompt, ext, ref), "model": model, "response": text, **judge,
               "sample_index": sample, "status": status, "score": score, "expected_score": expected,
               "distribution": dist, "raw_output": raw, "error": error, "attempts": attempts, "latency_s": latency,
               "prompt_tokens": pt, "completion_tokens": ct}


def labels(s: Session, families: Optional[list[int]] = None, judge_id: Optional[int] = None) -> Iterator[dict]:
    """Every expert label, pointwise and pairwise, in content order: the first response's item,
    kind, the responses (b's NULL for every pointwise label), annotator, source (unique, as the
    label key is)."""
    E, I, F = m.ExpertLabel, m.Item, m.TaskFamily
    ra, rb, rp = aliased(m.Response), aliased(m.Response), aliased(m.Response)
    # the item is the first response's (response_a for pairwise, response for pointwise)
    first = aliased(m.Response)
    q = (select(E.kind, E.score, E.scale_min, E.scale_max, E.preference, E.annotator, E.source,
                ra.model, ra.text, rb.model, rb.text, rp.model, rp.text, *_item_cols())
         .select_from(E)
         .outerjoin(ra, ra.id == E.response_a_id).outerjoin(rb, rb.id == E.response_b_id)
         .outerjoin(rp, rp.id == E.response_id)
         .join(first, first.id == func.coalesce(E.response_a_id, E.response_id))
         .join(I, I.id == first.item_id).join(F, F.id == I.task_family_id)
         .order_by(*_item_order(s), E.kind, *_answer_order(s, first), _by_code_point(s, rb.model), rb.text_sha256,
                   _by_code_point(s, E.annotator), _by_code_point(s, E.source)))
    q = _scope(q, families)
    for kind, score, lo, hi, pref, annotator, source, am, at, bm, bt, pm, pt, fam, prompt, ext, ref in _stream(s, q):
        row = _item_fields(fam, prompt, ext, ref)
        if kind == "pairwise":
            row.update(model_a=am, response_a=at, model_b=bm, response_b=bt, preference=pref)
        else:
            row.update(model=pm, response=pt, score=score, scale_min=lo, scale_max=hi)
        row.update(annotator=annotator, source=source)
        yield row


def pairs(s: Session, families: Optional[list[int]] = None, judge_id: Optional[int] = None) -> Iterator[dict]:
    """Every verbosity pair, with its source (the importer or file it came from), in content
    order: item, concise response, verbose response (unique)."""
    V, I, F = m.VerbosityPair, m.Item, m.TaskFamily
    rc, rv = aliased(m.Response), aliased(m.Response)
    q = (select(*_item_cols(), rc.model, rc.text, rv.model, rv.text, V.source).select_from(V)
         .join(rc, rc.id == V.concise_response_id).join(rv, rv.id == V.verbose_response_id)
         .join(I, I.id == V.item_id).join(F, F.id == I.task_family_id)
         .order_by(*_item_order(s), *_answer_order(s, rc), *_answer_order(s, rv)))
    q = _scope(q, families)
    for fam, prompt, ext, ref, cm, ct, vm, vt, source in _stream(s, q):
        yield {**_item_fields(fam, prompt, ext, ref), "concise_model": cm, "concise": ct, "verbose_model": vm, "verbose": vt,
               "source": source}


def verdicts(s: Session, families: Optional[list[int]] = None, judge_id: Optional[int] = None) -> Iterator[dict]:
    """Every finished pairwise verdict (ok, unparsed, failed; collected or imported) with
    every column of ``pairwise_judgment`` but ids and claims: the two responses by their
    natural keys (item of response_a), the judge's identity (``judge_mode`` pairwise),
    sample_index, position, status, verdict, preference, distribution, baseline (the baseline_side column), source, raw_output,
    error, attempts, latency_s, prompt_tokens, completion_tokens. In content order: item, the two
    responses, judge key, sample index, position shown (unique)."""
    P, I, F, J = m.PairwiseJudgment, m.Item, m.TaskFamily, m.Judge
    ra, rb = aliased(m.Response), aliased(m.Response)
    judges = _judges(s)
    q = (select(*_item_cols(), ra.model, ra.text, rb.model, rb.text, P.judge_id, P.sample_index, P.position, P.status,
                P.verdict, P.preference, P.distribution, P.baseline_side, P.source, P.raw_output, P.error, P.attempts, P.latency_s,
                P.prompt_tokens, P.completion_tokens)
         .select_from(P).join(ra, ra.id == P.response_a_id).join(rb, rb.id == P.response_b_id)
         .join(I, I.id == ra.item_id).join(F, F.id == I.task_family_id)
         .join(J, J.id == P.judge_id)
         .where(P.status.in_(("ok", "unparsed", "failed")))
         .order_by(*_item_order(s), *_answer_order(s, ra), *_answer_order(s, rb), J.judge_key, P.sample_index,
                   P.position))
    q = _scope(q, families, P.judge_id, judge_id)
    for (fam, prompt, ext, ref, am, at, bm, bt, jid, sample, position, status, verdict, pref, dist, side, source, raw, error,
         attempts, latency, pt, ct) in _stream(s, q):
        yield {**_item_fields(fam, prompt, ext, ref), "model_a": am, "response_a": at, "model_b": bm, "response_b": bt,
               **judges[jid], "sample_index": sample, "position": position, "status": status, "verdict": verdict,
               "preference": pref, "distribution": dist, "baseline": side, "source": source, "raw_output": raw, "error": error,
               "attempts": attempts, "latency_s": latency, "prompt_tokens": pt, "completion_tokens": ct}


def calibrations(s: Session, families: Optional[list[int]] = None, judge_id: Optional[int] = None) -> Iterator[dict]:
    """Every stored calibration (oldest first, then by family, judge key, method, objective and
    length unit), every column of ``calibration`` but its id:
    the task family by name, the judge's identity (as ratings and verdicts carry it, with
    ``judge_mode``), ``created_at`` (ISO 8601 UTC, when it was fitted), the fitted parameters,
    bounds, fit diagnostics (n, converged, loss, folds, n_bootstrap, seed), ``params``,
    ``metrics`` (every method's figures, advice, identification, warnings) and ``data`` as
    stored, and the judgecal version that fitted it. The clipping scale (``scale_min``,
    ``scale_max``) is the judge's: ``fit`` takes it from the judge."""
    C, F = m.Calibration, m.TaskFamily
    judges = _judges(s)
    cols = [getattr(C, c) for c in CALIBRATION_FIELDS]
    J = m.Judge
    q = (select(F.name, C.judge_id, C.scale_min, C.scale_max, *cols).join(F, F.id == C.task_family_id)
         .join(J, J.id == C.judge_id)
         .order_by(C.created_at, _by_code_point(s, F.name), J.judge_key, C.method, C.objective, C.length_unit))
    q = _scope(q, families, C.judge_id, judge_id)
    for fam, jid, lo, hi, *values in _stream(s, q):
        judge = judges[jid]
        if (lo, hi) != (judge["scale_min"], judge["scale_max"]):  # never written by fit: refused, not mislabelled
            from judgecal.errors import InputError

            raise InputError(f"calibration of {fam!r} fitted at {m.iso_utc(values[0])} has the scale {lo:g}-{hi:g}, not "
                             f"its judge's {judge['scale_min']:g}-{judge['scale_max']:g}: it cannot be exported")
        row = dict(zip(CALIBRATION_FIELDS, values))
        row["created_at"] = m.iso_utc(row["created_at"])
        yield {"task_family": fam, **judge, **row}


KINDS = {"responses": responses, "ratings": ratings, "labels": labels, "pairs": pairs, "verdicts": verdicts,
         "calibrations": calibrations}
JUDGED = frozenset({"ratings", "verdicts", "calibrations"})  # the kinds whose rows have a judge
