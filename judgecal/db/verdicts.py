"""Read pairwise judge verdicts (``pairwise_judgment``) for win rates, position consistency and
stats: plain Python rows, no maths."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from sqlalchemy import func, select
from sqlalchemy.orm import Session, aliased

from judgecal.db import boarddata
from judgecal.db import models as m
from judgecal.db.queries import judge_labels

LENGTH_UNITS = ("chars", "words", "bytes", "tokens")


@dataclass
class BaselineVerdicts:
    """Verdicts of one judge on one family where one side is the baseline model's answer.

    ``rows``: one dict per (model, item): model, item_id (the item's prompt SHA-256: a content
    key, the same in every database), pref (mean P(model preferred) over the verdicts' samples
    and orders, None when none is usable), n_verdicts, len_model,
    len_baseline (in ``unit``; None when unknown), text_sha256 of the model's answer, the two
    response ids. ``left_out``: {reason: count} of verdict rows not used."""

    rows: list[dict] = field(default_factory=list)
    left_out: dict[str, int] = field(default_factory=dict)


def judges_with_verdicts(s: Session) -> list[m.Judge]:
    """Judges that have at least one pairwise verdict, by id."""
    ids = select(m.PairwiseJudgment.judge_id).distinct()
    return list(s.scalars(select(m.Judge).where(m.Judge.id.in_(ids)).order_by(m.Judge.id)))


def baseline_verdicts(s: Session, family_id: int, judge_id: int, baseline: str, unit: str = "chars",
                      tokenizer: str | None = None) -> BaselineVerdicts:
    """Every verdict of ``judge_id`` in the family that compares some model's answer with the
    ``baseline`` model's answer to the same item, oriented as P(model preferred), averaged per
    (model, item). Verdicts between two non-baseline models, of the baseline against itself,
    and unparsed/failed/pending ones are counted in ``left_out`` with their reason."""
    RA, RB = aliased(m.Response), aliased(m.Response)
    PJ = m.PairwiseJudgment
    q = (
        select(PJ.status, PJ.preference, RA.id, RA.model, RA.text_sha256, RB.id, RB.model, RB.text_sha256,
               m.Item.prompt_sha256, PJ.sample_index, PJ.position)
        .join(RA, RA.id == PJ.response_a_id)
        .join(RB, RB.id == PJ.response_b_id)
        .join(m.Item, m.Item.id == RA.item_id)
        .where(PJ.judge_id == judge_id, m.Item.task_family_id == family_id)
    )
    out = BaselineVerdicts()
    acc: dict[tuple[str, str], dict] = {}

    def leave(reason: str) -> None:
        out.left_out[reason] = out.left_out.get(reason, 0) + 1

    # content order (item, both answers, sample, position; unique per verdict): which answer
    # stands for a (model, item) and every sum below never depend on row ids or the dialect
    found = sorted(s.execute(q), key=lambda r: (r[8], r[3], r[4], r[6], r[7], r[9], r[10]))
    for status, pref, ida, ma, sha_a, idb, mb, sha_b, item, _, _ in found:
        if ma == baseline and mb == baseline:
            leave("the baseline against itself")
            continue
        if baseline not in (ma, mb):
            leave("neither answer is the baseline's")
            continue
        if status != "ok" or pref is None:
            leave(f"verdict {status}" if status != "ok" else "verdict without a preference")
            continue
        if ma == baseline:
            model, mid, sha, bid, p = mb, idb, sha_b, ida, 1.0 - pref
        else:
            model, mid, sha, bid, p = ma, ida, sha_a, idb, pref
        cur = acc.setdefault((model, item), {"model": model, "item_id": item, "prefs": [], "n_verdicts": 0,
                                             "resp": mid, "base": bid, "text_sha256": sha})
        cur["prefs"].append(p)
        cur["n_verdicts"] += 1
    ids = sorted({r["resp"] for r in acc.values()} | {r["base"] for r in acc.values()})
    lens = boarddata.lengths(s, ids, unit, tokenizer)
    for r in acc.values():
        out.rows.append({"model": r["model"], "item_id": r["item_id"], "pref": math.fsum(r["prefs"]) / r["n_verdicts"],
                         "n_verdicts": r["n_verdicts"], "len_model": lens.get(r["resp"]), "len_baseline": lens.get(r["base"]),
                         "text_sha256": r["text_sha256"],
                         "response_id": r["resp"], "baseline_response_id": r["base"]})
    out.rows.sort(key=lambda r: (r["model"], r["item_id"]))
    return out


def both_order_pairs(s: Session, family_ids: list[int], judge_id: int) -> list[dict]:
    """Pairs judged by ``judge_id`` in both orders ('ab' and 'ba', same sample index), with the
    canonical preference P(a preferred) of each order and the lengths (characters) of a and b;
    in content order (item prompt SHA-256, each answer's model and text SHA-256, sample index),
    as the position-consistency bootstrap resamples this list."""
    PJ = m.PairwiseJudgment
    RA, RB = aliased(m.Response), aliased(m.Response)
    q = (
        select(PJ.response_a_id, PJ.response_b_id, PJ.sample_index, PJ.position, PJ.preference, RA.n_chars, RB.n_chars,
               m.Item.prompt_sha256, RA.model, RA.text_sha256, RB.model, RB.text_sha256)
        .join(RA, RA.id == PJ.response_a_id)
        .join(RB, RB.id == PJ.response_b_id)
        .join(m.Item, m.Item.id == RA.item_id)
        .where(PJ.judge_id == judge_id, PJ.status == "ok", PJ.preference.is_not(None), PJ.position.in_(("ab", "ba")),
               m.Item.task_family_id.in_(family_ids))
    )
    by_key: dict[tuple, dict] = {}
    order: dict[tuple, tuple] = {}
    for a, b, k, pos, pref, la, lb, item, ma, sa, mb, sb in s.execute(q):
        d = by_key.setdefault((a, b, k), {"len_a": la, "len_b": lb})
        d[pos] = pref
        order[(a, b, k)] = (item, ma, sa, mb, sb, k)
    return [by_key[key] for key in sorted(by_key, key=order.__getitem__) if "ab" in by_key[key] and "ba" in by_key[key]]


def verdict_counts(s: Session) -> dict[int, dict[str, dict[str, int]]]:
    """{family id: {judge: {status: n}}} of pairwise verdicts (the judge's name, or ``name (id N)``
    where several judges share it: :func:`judgecal.db.queries.judge_labels`)."""
    RA = aliased(m.Response)
    PJ = m.PairwiseJudgment
    out: dict[int, dict[str, dict[str, int]]] = {}
    q = (
        select(m.Item.task_family_id, PJ.judge_id, PJ.status, func.count())
        .select_from(PJ)
        .join(RA, RA.id == PJ.response_a_id)
        .join(m.Item, m.Item.id == RA.item_id)
        .group_by(m.Item.task_family_id, PJ.judge_id, PJ.status)
    )
    label = judge_labels(s)
    for fid, judge_id, status, n in s.execute(q):
        out.setdefault(fid, {}).setdefault(label[judge_id], {})[status] = n
    return out


def unusable_verdicts(s: Session) -> dict[str, int]:
    """{status: n} of the stored pairwise verdicts that carry no preference (pending, running,
    unparsed, failed; or ok without one)."""
    PJ = m.PairwiseJudgment
    q = (select(PJ.status, func.count()).where((PJ.status != "ok") | PJ.preference.is_(None)).group_by(PJ.status))
    return {("ok without a preference" if status == "ok" else status): n for status, n in s.execute(q)}


def model_outputs(s: Session, family_id: int, models: list[str], unit: str = "chars",
                  tokenizer: str | None = None) -> dict[str, dict[int, float]]:
    """{model: {item key: length in unit}} of the given models' answers in the family, items
    keyed by their prompt SHA-256 (as :func:`baseline_verdicts` keys them); when a model has
    several answers to one item, the one whose text SHA-256 sorts first (content, not row ids)."""
    q = (
        select(m.Response.model, m.Item.prompt_sha256, m.Response.text_sha256, m.Response.id)
        .join(m.Item, m.Item.id == m.Response.item_id)
        .where(m.Item.task_family_id == family_id, m.Response.model.in_(models))
    )
    ids: dict[str, dict[str, int]] = {}
    for model, item, _, rid in sorted(s.execute(q), key=lambda r: (r[0], r[1], r[2])):
        ids.setdefault(model, {}).setdefault(item, rid)
    lens = boarddata.lengths(s, [r for d in ids.values() for r in d.values()], unit, tokenizer)
    return {model: {item: lens[r] for item, r in d.items() if r in lens} for model, d in ids.items()}


def verdict_lengths(s: Session, family_id: int, judge_id: int) -> list[tuple[float, int, int]]:
    """(P(a preferred), chars of a, chars of b) of every ok verdict of the judge in the family
    (sorted: the same list in every database)."""
    PJ = m.PairwiseJudgment
    RA, RB = aliased(m.Response), aliased(m.Response)
    q = (
        select(PJ.preference, RA.n_chars, RB.n_chars)
        .join(RA, RA.id == PJ.response_a_id)
        .join(RB, RB.id == PJ.response_b_id)
        .join(m.Item, m.Item.id == RA.item_id)
        .where(PJ.judge_id == judge_id, PJ.status == "ok", PJ.preference.is_not(None), m.Item.task_family_id == family_id)
    )
    return sorted(tuple(r) for r in s.execute(q))
