"""Read pairwise verdicts as battles between models (``judgecal bt``): every verdict of one
judge in one task family, whatever the two models (not only against a baseline), as numpy
columns in content order. No maths."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from sqlalchemy import func, select
from sqlalchemy.orm import Session, aliased

from judgecal.calibrate.style import style_counts
from judgecal.db import models as m

_CREDIT = {"a": 1.0, "b": 0.0, "tie": 0.5}


@dataclass
class Battles:
    """The battles of one judge in one family, one per usable verdict, in content order (item
    prompt SHA-256, each answer's model and text SHA-256, sample, position: the same in every
    database). ``models`` (sorted names) and ``a``, ``b`` (n,) codes into it (a: the verdict's
    response a); ``items`` (sorted prompt SHA-256) and ``item`` (n,) codes; ``preference`` (n,)
    the stored soft verdict P(a preferred); ``verdict_credit`` (n,) the verdict read as a=1,
    b=0, tie=0.5; ``resp_a``, ``resp_b`` (n,) the two answers' response ids; ``baseline_side`` {model: verdicts naming it the baseline}; ``left_out``
    {reason: verdicts not used}."""

    models: list[str] = field(default_factory=list)
    items: list[str] = field(default_factory=list)
    a: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    b: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    item: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    preference: np.ndarray = field(default_factory=lambda: np.zeros(0))
    verdict_credit: np.ndarray = field(default_factory=lambda: np.zeros(0))
    resp_a: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    resp_b: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    baseline_side: dict[str, int] = field(default_factory=dict)
    left_out: dict[str, int] = field(default_factory=dict)

    def __len__(self) -> int:
        return int(self.a.size)


def verdict_scopes(s: Session) -> list[tuple[int, int, int]]:
    """[(task family id, judge id, ok verdicts with a preference)] of every family and judge
    with pairwise verdicts, by family then judge."""
    PJ = m.PairwiseJudgment
    RA = aliased(m.Response)
    q = (select(m.Item.task_family_id, PJ.judge_id, func.count())
         .select_from(PJ).join(RA, RA.id == PJ.response_a_id).join(m.Item, m.Item.id == RA.item_id)
         .where(PJ.status == "ok", PJ.preference.is_not(None))
         .group_by(m.Item.task_family_id, PJ.judge_id).order_by(m.Item.task_family_id, PJ.judge_id))
    return [tuple(r) for r in s.execute(q)]


def battles(s: Session, family_id: int, judge_id: int) -> Battles:
    """Every verdict of ``judge_id`` in the family as a battle between the two answers' models.
    Left out and counted: verdicts not ok (pending, running, unparsed, failed), ok ones without
    a preference, and those whose two answers are the same model's."""
    PJ = m.PairwiseJudgment
    RA, RB = aliased(m.Response), aliased(m.Response)
    q = (select(m.Item.prompt_sha256, RA.model, RA.text_sha256, RB.model, RB.text_sha256, PJ.sample_index, PJ.position,
                PJ.status, PJ.preference, PJ.verdict, PJ.baseline_side, RA.id, RB.id)
         .join(RA, RA.id == PJ.response_a_id).join(RB, RB.id == PJ.response_b_id)
         .join(m.Item, m.Item.id == RA.item_id)
         .where(PJ.judge_id == judge_id, m.Item.task_family_id == family_id))
    rows = sorted(s.connection().execute(q).all(), key=lambda r: tuple("" if v is None else v for v in r[:7]))
    out = Battles()
    left: dict[str, int] = {}
    use = []
    for r in rows:
        item, ma, _, mb, _, _, _, status, pref, verdict, side, ra, rb = r
        if side is not None:
            name = ma if side == "a" else mb
            out.baseline_side[name] = out.baseline_side.get(name, 0) + 1
        reason = (f"verdict {status}" if status != "ok" else "verdict without a preference" if pref is None
                  else "both answers are one model's" if ma == mb else None)
        if reason:
            left[reason] = left.get(reason, 0) + 1
            continue
        use.append((item, ma, mb, float(pref), _CREDIT.get(verdict, np.nan), ra, rb))
    out.left_out = left
    if not use:
        return out
    out.models = sorted({u[1] for u in use} | {u[2] for u in use})
    out.items = sorted({u[0] for u in use})
    mcode = {n: i for i, n in enumerate(out.models)}
    icode = {k: i for i, k in enumerate(out.items)}
    out.a = np.fromiter((mcode[u[1]] for u in use), dtype=np.int64, count=len(use))
    out.b = np.fromiter((mcode[u[2]] for u in use), dtype=np.int64, count=len(use))
    out.item = np.fromiter((icode[u[0]] for u in use), dtype=np.int64, count=len(use))
    out.preference = np.array([u[3] for u in use], dtype=float)
    out.verdict_credit = np.array([u[4] for u in use], dtype=float)
    out.resp_a = np.array([u[5] for u in use], dtype=np.int64)
    out.resp_b = np.array([u[6] for u in use], dtype=np.int64)
    return out


def answer_style(s: Session, response_ids, unit: str, tokenizer: str | None) -> dict[int, tuple[float, int, int, int]]:
    """{response id: (length in ``unit``, headers, list items (ordered + unordered), bold spans)}
    of the answers, the Markdown counts summed as Arena-Hard-Auto's style control sums them
    (``judgecal.calibrate.style``; a row another client wrote without the stored counts is
    counted from its text). ``unit``: "chars", "words", "bytes" (stored on ``response``) or
    "tokens" (``token_length`` under ``tokenizer``: answers without one are absent)."""
    R = m.Response
    ids = sorted({int(i) for i in response_ids})
    col = {"chars": R.n_chars, "words": R.n_words, "bytes": R.n_bytes}.get(unit)
    out: dict[int, tuple[float, int, int, int]] = {}
    for start in range(0, len(ids), 900):
        part = ids[start:start + 900]
        q = select(R.id, R.md_headers, R.md_list_ordered, R.md_list_unordered, R.md_bold,
                   col if col is not None else R.n_chars).where(R.id.in_(part))
        rows = s.execute(q).all()
        missing = [r[0] for r in rows if any(v is None for v in r[1:5])]
        texts = dict(s.execute(select(R.id, R.text).where(R.id.in_(missing))).all()) if missing else {}
        toks = {}
        if unit == "tokens":
            toks = dict(s.execute(select(m.TokenLength.response_id, m.TokenLength.n_tokens).where(
                m.TokenLength.tokenizer == tokenizer, m.TokenLength.response_id.in_(part))).all())
        for rid, h, o, u, bo, n in rows:
            if rid in texts:
                h, o, u, bo = style_counts(texts[rid])
            length = toks.get(rid) if unit == "tokens" else n
            if length is None:
                continue
            out[rid] = (float(length), int(h), int(o) + int(u), int(bo))
    return out
