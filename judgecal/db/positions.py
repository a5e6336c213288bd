"""Read the pairs a judge judged in both orders, with the experts' labels, and the ratings of
expert-labelled pairs: plain Python rows for the position-bias section of the report and the
LLMBar parity check (no maths).

Every list comes in content order (item prompt SHA-256, then each answer's model and text
SHA-256), never row-id order, so it is the same in every database."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session, aliased

from judgecal.db import models as m

OUTCOME = {"a": 1.0, "b": 0.0, "tie": 0.5}


def _labels(s: Session, family_id: int) -> dict[tuple[int, int], str]:
    """{(response a id, response b id): expert preference 'a'|'b'|'tie'} of the family's pairwise
    expert labels, both orientations (the reversed pair gets the mirrored preference). Where
    several labels name one pair, the first by (annotator, source) is used."""
    E = m.ExpertLabel
    R = aliased(m.Response)
    q = (select(E.response_a_id, E.response_b_id, E.preference, E.annotator, E.source)
         .join(R, R.id == E.response_a_id).join(m.Item, m.Item.id == R.item_id)
         .where(E.kind == "pairwise", m.Item.task_family_id == family_id))
    out: dict[tuple[int, int], str] = {}
    flip = {"a": "b", "b": "a", "tie": "tie"}
    for a, b, pref, _, _ in sorted(s.execute(q), key=lambda r: (r[3], r[4])):
        out.setdefault((a, b), pref)
        out.setdefault((b, a), flip[pref])
    return out


def labelled_verdict_pairs(s: Session, family_id: int, judge_id: int) -> list[dict]:
    """The pairs (a, b) of the family that the judge judged (sample 0), one dict each:
    {"key": (item prompt SHA-256, a's model, a's text SHA-256, b's model, b's text SHA-256),
    "gold": 'a'|'b'|'tie'|None (expert label of the pair), "outcome": 1.0/0.0/0.5/None,
    "ab" / "ba" / "na": {"status", "verdict", "preference"} of the verdict shown in that order
    (absent when there is none), "len_a", "len_b" (characters), "resp_a", "resp_b" (the answers'
    response ids, to read their stored features; never a key of anything shown)}."""
    return labelled_verdict_pairs_by_judge(s, family_id, [judge_id]).get(judge_id, [])


def labelled_verdict_pairs_by_judge(s: Session, family_id: int, judge_ids) -> dict[int, list[dict]]:
    """{judge id: :func:`labelled_verdict_pairs` of that judge} for several judges of one family,
    read in one query (a family's page ranks every judge of the family); judges without a
    verdict there are absent."""
    PJ = m.PairwiseJudgment
    RA, RB = aliased(m.Response), aliased(m.Response)
    q = (select(PJ.judge_id, PJ.response_a_id, PJ.response_b_id, PJ.position, PJ.status, PJ.verdict, PJ.preference,
                m.Item.prompt_sha256, RA.model, RA.text_sha256, RB.model, RB.text_sha256, RA.n_chars, RB.n_chars)
         .join(RA, RA.id == PJ.response_a_id).join(RB, RB.id == PJ.response_b_id)
         .join(m.Item, m.Item.id == RA.item_id)
         .where(PJ.judge_id.in_(sorted(set(judge_ids))), PJ.sample_index == 0, m.Item.task_family_id == family_id))
    labels = _labels(s, family_id)
    by_judge: dict[int, dict[tuple[int, int], dict]] = {}
    for jid, a, b, pos, status, verdict, pref, item, ma, sa, mb, sb, la, lb in s.execute(q):
        pairs = by_judge.setdefault(jid, {})
        d = pairs.get((a, b))
        if d is None:
            gold = labels.get((a, b))
            d = pairs[(a, b)] = {"key": (item, ma, sa, mb, sb), "gold": gold,
                                 "outcome": None if gold is None else OUTCOME[gold], "len_a": la, "len_b": lb,
                                 "resp_a": a, "resp_b": b}
        d[pos] = {"status": status, "verdict": verdict, "preference": pref}
    return {jid: sorted(pairs.values(), key=lambda d: d["key"]) for jid, pairs in by_judge.items()}


def labelled_rating_pairs(s: Session, family_id: int, judge_id: int) -> list[dict]:
    """The family's expert-labelled pairs (a, b) whose two answers the (pointwise) judge rated
    (sample 0), one dict each: {"key" (as :func:`labelled_verdict_pairs`), "gold", "outcome",
    "raw_a", "raw_b" (the raw outputs), "score_a", "score_b" (None unless ok), "len_a", "len_b"
    (characters)}."""
    E = m.ExpertLabel
    RA, RB = aliased(m.Response), aliased(m.Response)
    q = (select(E.response_a_id, E.response_b_id, E.preference, E.annotator, E.source,
                m.Item.prompt_sha256, RA.model, RA.text_sha256, RB.model, RB.text_sha256, RA.n_chars, RB.n_chars)
         .join(RA, RA.id == E.response_a_id).join(RB, RB.id == E.response_b_id)
         .join(m.Item, m.Item.id == RA.item_id)
         .where(E.kind == "pairwise", m.Item.task_family_id == family_id))
    labels = {}
    lengths = {}
    for a, b, pref, ann, src, item, ma, sa, mb, sb, la, lb in sorted(s.execute(q), key=lambda r: (r[3], r[4])):
        labels.setdefault((a, b), (pref, (item, ma, sa, mb, sb)))
        lengths[(a, b)] = (la, lb)
    ids = sorted({x for k in labels for x in k})
    ratings: dict[int, tuple] = {}
    R = m.Rating
    for start in range(0, len(ids), 900):
        q = select(R.response_id, R.status, R.raw_output, R.score).where(
            R.judge_id == judge_id, R.sample_index == 0, R.response_id.in_(ids[start:start + 900]))
        for rid, status, raw, score in s.execute(q):
            ratings[rid] = (status, raw, score)
    out = []
    for (a, b), (gold, key) in labels.items():
        if a in ratings and b in ratings:
            (sa, ra, xa), (sb, rb, xb) = ratings[a], ratings[b]
            out.append({"key": key, "gold": gold, "outcome": OUTCOME[gold], "raw_a": ra, "raw_b": rb,
                        "score_a": xa if sa == "ok" else None, "score_b": xb if sb == "ok" else None,
                        "len_a": lengths[(a, b)][0], "len_b": lengths[(a, b)][1]})
    return sorted(out, key=lambda d: d["key"])


def judges_in_family(s: Session, family_id: int) -> list[tuple[m.Judge, str]]:
    """(judge, kind) of every judge with pairwise verdicts ("pairwise") or ratings ("pointwise")
    on the family's answers, by judge name then id."""
    PJ, R = m.PairwiseJudgment, m.Rating
    RA = aliased(m.Response)
    pj = (select(PJ.judge_id).join(RA, RA.id == PJ.response_a_id).join(m.Item, m.Item.id == RA.item_id)
          .where(m.Item.task_family_id == family_id).distinct())
    rt = (select(R.judge_id).join(RA, RA.id == R.response_id).join(m.Item, m.Item.id == RA.item_id)
          .where(m.Item.task_family_id == family_id).distinct())
    pair_ids, rate_ids = set(s.scalars(pj)), set(s.scalars(rt))
    judges = s.scalars(select(m.Judge).where(m.Judge.id.in_(pair_ids | rate_ids)))
    out = [(j, "pairwise" if j.id in pair_ids else "pointwise") for j in judges]
    return sorted(out, key=lambda t: (t[0].name, t[0].id))
