"""Rows for ``judgecal export``, in judgecal's generic import format (docs/data-formats.md),
so an export imports into another database unchanged."""

from __future__ import annotations

from collections.abc import Iterator

from sqlalchemy import select
from sqlalchemy.orm import Session, aliased

from judgecal.db import models as m


def _base():
    return (
        select(m.TaskFamily.name, m.Item.prompt, m.Item.external_id, m.Item.reference, m.Response.model, m.Response.text)
        .join(m.Item, m.Item.task_family_id == m.TaskFamily.id)
        .join(m.Response, m.Response.item_id == m.Item.id)
    )


def _item_fields(fam, prompt, ext, ref) -> dict:
    out = {"task_family": fam, "prompt": prompt}
    if ext is not None:
        out["item_id"] = ext
    if ref is not None:
        out["reference"] = ref
    return out


def responses(s: Session) -> Iterator[dict]:
    """Every response: task_family, prompt, model, response (+ item_id, reference)."""
    for fam, prompt, ext, ref, model, text in s.execute(_base().order_by(m.Response.id)):
        yield {**_item_fields(fam, prompt, ext, ref), "model": model, "response": text}


def ratings(s: Session) -> Iterator[dict]:
    """Every finished rating (ok, unparsed, failed) with its judge's identity."""
    q = (
        _base()
        .add_columns(m.Judge, m.Rating)
        .join(m.Rating, m.Rating.response_id == m.Response.id)
        .join(m.Judge, m.Judge.id == m.Rating.judge_id)
        .where(m.Rating.status.in_(("ok", "unparsed", "failed")))
        .order_by(m.Rating.id)
    )
    for fam, prompt, ext, ref, model, text, judge, r in s.execute(q):
        yield {
            **_item_fields(fam, prompt, ext, ref),
            "model": model,
            "response": text,
            "judge": judge.name,
            "judge_model": judge.model,
            "judge_endpoint": judge.endpoint,
            "judge_prompt": judge.prompt_name,
            "judge_prompt_sha256": judge.prompt_sha256,
            "judge_params": judge.params or {},
            "scale_min": judge.scale_min,
            "scale_max": judge.scale_max,
            "sample_index": r.sample_index,
            "status": r.status,
            "score": r.score,
            "raw_output": r.raw_output,
            "error": r.error,
        }


def labels(s: Session) -> Iterator[dict]:
    """Every expert label, pointwise and pairwise."""
    ra, rb, rp = aliased(m.Response), aliased(m.Response), aliased(m.Response)
    q = (
        select(m.ExpertLabel, ra, rb, rp)
        .outerjoin(ra, ra.id == m.ExpertLabel.response_a_id)
        .outerjoin(rb, rb.id == m.ExpertLabel.response_b_id)
        .outerjoin(rp, rp.id == m.ExpertLabel.response_id)
        .order_by(m.ExpertLabel.id)
    )
    items = _items(s)
    for label, a, b, p in s.execute(q):
        first = a if label.kind == "pairwise" else p
        fam, prompt, ext, ref = items[first.item_id]
        row = _item_fields(fam, prompt, ext, ref)
        if label.kind == "pairwise":
            row.update(model_a=a.model, response_a=a.text, model_b=b.model, response_b=b.text, preference=label.preference)
        else:
            row.update(model=p.model, response=p.text, score=label.score, scale_min=label.scale_min, scale_max=label.scale_max)
        row.update(annotator=label.annotator, source=label.source)
        yield row


def pairs(s: Session) -> Iterator[dict]:
    """Every verbosity pair."""
    rc, rv = aliased(m.Response), aliased(m.Response)
    q = (
        select(m.VerbosityPair.item_id, rc.model, rc.text, rv.model, rv.text)
        .join(rc, rc.id == m.VerbosityPair.concise_response_id)
        .join(rv, rv.id == m.VerbosityPair.verbose_response_id)
        .order_by(m.VerbosityPair.id)
    )
    items = _items(s)
    for item_id, cm, ct, vm, vt in s.execute(q):
        yield {**_item_fields(*items[item_id]), "concise_model": cm, "concise": ct, "verbose_model": vm, "verbose": vt}


def _items(s: Session) -> dict[int, tuple]:
    q = select(m.Item.id, m.TaskFamily.name, m.Item.prompt, m.Item.external_id, m.Item.reference).join(
        m.TaskFamily, m.TaskFamily.id == m.Item.task_family_id
    )
    return {row[0]: tuple(row[1:]) for row in s.execute(q)}
