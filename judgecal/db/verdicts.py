"""Read pairwise judge verdicts (``pairwise_judgment``) for win rates, position consistency and
stats: plain Python rows (win rates: numpy columns), no maths."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from sqlalchemy import case, func, select
from sqlalchemy.orm import Session, aliased

from judgecal.db import boarddata
from judgecal.db import models as m
from judgecal.db.queries import judge_labels

LENGTH_UNITS = ("chars", "words", "bytes", "tokens")


@dataclass
class BaselineVerdicts:
    """Verdicts of one judge on one family where one side is the baseline model's answer, one
    entry per (model, item), in (model, item) order, as columns of length n.

    ``models`` (sorted names) and ``model`` (n,) int codes into it; ``items`` (sorted item keys:
    the items' prompt SHA-256, a content key, the same in every database) and ``item`` (n,)
    codes into it; ``pref`` (n,) mean P(model preferred) over the verdicts' samples and orders;
    ``n_verdicts`` (n,) int; ``len_model``, ``len_baseline`` (n,) float lengths in the unit
    asked for (NaN when unknown); ``n_words`` (n,) int whitespace words of the model's answer;
    ``text_key`` (n,) int code of the model's answer's text SHA-256 (equal codes, equal texts);
    ``response_id``, ``baseline_response_id`` (n,) int row ids (valid in this database only).
    ``left_out``: {reason: count} of verdict rows not used."""

    models: list[str] = field(default_factory=list)
    items: list[str] = field(default_factory=list)
    model: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=int))
    item: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=int))
    pref: np.ndarray = field(default_factory=lambda: np.zeros(0))
    n_verdicts: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=int))
    len_model: np.ndarray = field(default_factory=lambda: np.zeros(0))
    len_baseline: np.ndarray = field(default_factory=lambda: np.zeros(0))
    n_words: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=int))
    text_key: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=int))
    response_id: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=int))
    baseline_response_id: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=int))
    left_out: dict[str, int] = field(default_factory=dict)
    #: ok verdicts without a stored distribution (counted only when a summary needs one)
    no_distribution: int = 0
    n_ok: int = 0
    #: ok verdicts read under a summary whose distribution puts at least LARGE_OUTSIDE of its
    #: mass outside a, b, tie (:func:`judgecal.calibrate.summaries.large_outside`), per model
    large_outside: dict[str, int] = field(default_factory=dict)

    def __len__(self) -> int:
        return int(self.model.size)


def judges_with_verdicts(s: Session) -> list[m.Judge]:
    """Judges that have at least one pairwise verdict, by id."""
    ids = select(m.PairwiseJudgment.judge_id).distinct()
    return list(s.scalars(select(m.Judge).where(m.Judge.id.in_(ids)).order_by(m.Judge.id)))


def judge_ids_with_verdicts(s: Session):
    """The set of the ids of the judges with at least one pairwise verdict (for
    :func:`judgecal.db.queries.judge_by_name`'s ``among``)."""
    return set(s.scalars(select(m.PairwiseJudgment.judge_id).distinct()))


def baseline_verdicts(s: Session, family_id: int, judge_id: int, baseline: str, unit: str = "chars",
                      tokenizer: str | None = None, summary: str = "greedy", risk_k: float = 1.0) -> BaselineVerdicts:
    """Every verdict of ``judge_id`` in the family that compares some model's answer with the
    ``baseline`` model's answer to the same item, oriented as P(model preferred), averaged per
    (model, item) (``math.fsum``: the same float in any order). Verdicts between two
    non-baseline models, of the baseline against itself, and unparsed/failed/pending ones are
    counted in ``left_out`` with their reason (in the content order of their first verdict).

    One query, the answers' lengths, word counts and content keys (:func:`content_keys`' order)
    read with the verdicts and each verdict oriented in SQL (which side is the baseline's). Where a (model, item) has several verdicts,
    the answers that stand for it are those of its first verdict in content order (item, both
    answers' model and text SHA-256, sample, position), never row ids or the dialect's order.
    Lengths in ``unit`` (tokens: under ``tokenizer``).

    ``summary`` (:mod:`judgecal.calibrate.summaries`): "greedy" reads the stored preference;
    "mean" / "risk-averse" (``risk_k``) the model's credit from the verdict's stored
    distribution, the risk taken from the model's side; ok verdicts without a distribution are
    counted in ``no_distribution`` (out of ``n_ok``) and left out (the caller refuses them)."""
    RA, RB = aliased(m.Response), aliased(m.Response)
    PJ = m.PairwiseJudgment
    a_base = RA.model == baseline
    mine = lambda a, b: case((a_base, b), else_=a)  # noqa: E731  (the model's side of a verdict)
    q = (
        select(PJ.id, PJ.status, PJ.preference, case((a_base, 1), else_=0), case((RB.model == baseline, 1), else_=0),
               mine(RA.model, RB.model), m.Item.prompt_sha256, mine(RA.text_sha256, RB.text_sha256),
               mine(RA.id, RB.id), mine(RB.id, RA.id), mine(RA.n_chars, RB.n_chars), mine(RB.n_chars, RA.n_chars),
               mine(RA.n_words, RB.n_words), PJ.distribution if summary != "greedy" else PJ.id,
               RA.model, RA.text_sha256, RB.model, RB.text_sha256, PJ.sample_index, PJ.position)
        .join(RA, RA.id == PJ.response_a_id)
        .join(RB, RB.id == PJ.response_b_id)
        .join(m.Item, m.Item.id == RA.item_id)
        .where(PJ.judge_id == judge_id, m.Item.task_family_id == family_id)
    )
    out = BaselineVerdicts()
    found = s.connection().execute(q).all()
    if not found:
        return out
    (_ids, status, pref, a_b, b_b, model, item_rows, sha, resp, base, len_m, len_b, words, dists,
     ma, sa, mb, sb, sample, pos) = zip(*found)
    n = len(found)

    def key(i: int) -> tuple:  # content_keys' order of verdict row i (of all rows), read with them
        return (item_rows[i], ma[i], sa[i], mb[i], sb[i], sample[i], pos[i])
    flip = np.array(a_b, dtype=bool)  # the baseline's answer is a: P(model preferred) = 1 - P(a preferred)
    b_b = np.array(b_b, dtype=bool)
    p = np.array(pref, dtype=float)  # None -> NaN
    ok = np.fromiter((x == "ok" for x in status), dtype=bool, count=n)
    if summary != "greedy":
        from judgecal.calibrate.summaries import large_outside, rating_value
        from judgecal.judge.distribution import swap

        for i in np.flatnonzero(ok & ~np.isnan(p)).tolist():
            out.n_ok += 1
            if large_outside(dists[i]):
                out.large_outside[model[i]] = out.large_outside.get(model[i], 0) + 1
            # the model's credit under the summary (risk from the model's side), stored as P(a) the flip undoes
            v = rating_value(p[i], swap(dists[i]) if flip[i] and dists[i] else dists[i], summary, risk_k, pairwise=True)
            if v is None:
                out.no_distribution += 1
            p[i] = np.nan if v is None else (1.0 - v if flip[i] else v)
    use = (flip != b_b) & ok & ~np.isnan(p)
    left = np.flatnonzero(~use).tolist()
    if left:
        counts: dict[str, int] = {}
        first: dict[str, tuple] = {}
        for i in left:
            reason = ("the baseline against itself" if flip[i] and b_b[i] else "neither answer is the baseline's"
                      if not (flip[i] or b_b[i]) else f"verdict {status[i]}" if status[i] != "ok"
                      else "verdict without a preference")
            counts[reason] = counts.get(reason, 0) + 1
            if reason not in first or key(i) < first[reason]:
                first[reason] = key(i)
        out.left_out = {reason: counts[reason] for reason in sorted(counts, key=first.__getitem__)}
    u = np.flatnonzero(use)
    if not u.size:
        return out
    pick = (lambda col: col) if u.size == n else (lambda col: [col[i] for i in u.tolist()])  # noqa: E731
    model, item, sha = pick(model), pick(item_rows), pick(sha)
    out.models, out.items = sorted(set(model)), sorted(set(item))
    mcode = {name: k for k, name in enumerate(out.models)}
    icode = {key: k for k, key in enumerate(out.items)}
    mc = np.fromiter(map(mcode.__getitem__, model), dtype=np.int64, count=u.size)
    ic = np.fromiter(map(icode.__getitem__, item), dtype=np.int64, count=u.size)
    pv = np.where(flip[u], 1.0 - p[u], p[u])
    group = mc * len(out.items) + ic
    order = np.argsort(group, kind="stable")
    sg = group[order]
    starts = np.flatnonzero(np.r_[True, sg[1:] != sg[:-1]])
    sizes = np.diff(np.r_[starts, sg.size])
    rep = order[starts]  # the verdict that stands for each (model, item): its first in content order
    mean = pv[rep]
    multi = np.flatnonzero(sizes > 1)
    if multi.size:
        # each group's first verdict in content order, without a tuple per verdict: its members' content
        # keys as codes (each column's distinct values in Python's order), sorted by group then key
        # (np.lexsort is stable: equal keys keep the members' order, as min() did)
        at_member = np.flatnonzero(np.repeat(sizes > 1, sizes))  # positions in `order` of the members
        members = order[at_member]  # their index in u
        rows = u[members].tolist()  # their index in the query's rows
        gid = np.repeat(np.arange(sizes.size), sizes)[at_member]

        def coded(column) -> np.ndarray:
            values = [column[i] for i in rows]
            rank = {v: k for k, v in enumerate(sorted(set(values)))}
            return np.fromiter(map(rank.__getitem__, values), dtype=np.int64, count=len(values))

        by_key = np.lexsort([coded(c) for c in (pos, sample, sb, mb, sa, ma, item_rows)] + [gid])
        firsts = np.flatnonzero(np.r_[True, gid[by_key][1:] != gid[by_key][:-1]])
        rep[multi] = members[by_key[firsts]]
        # the mean of each group's preferences: math.fsum (exact, then rounded once); for two values that
        # is their IEEE sum, rounded once too
        two = multi[sizes[multi] == 2]
        first_of = starts[two]
        mean[two] = (pv[order[first_of]] + pv[order[first_of + 1]]) / 2
        for g in multi[sizes[multi] > 2].tolist():
            mean[g] = math.fsum(pv[order[starts[g]:starts[g] + sizes[g]]].tolist()) / int(sizes[g])
    out.model, out.item, out.pref, out.n_verdicts = mc[rep], ic[rep], mean, sizes.astype(np.int64)
    at = u[rep]
    col = lambda values, dtype: np.array(values, dtype=dtype)[at]  # noqa: E731
    out.response_id, out.baseline_response_id = col(resp, np.int64), col(base, np.int64)
    out.n_words = col(words, np.int64)
    shas = [sha[j] for j in rep.tolist()]
    keys = {key: k for k, key in enumerate(dict.fromkeys(shas))}
    out.text_key = np.fromiter(map(keys.__getitem__, shas), dtype=np.int64, count=rep.size)
    if unit == "chars":
        out.len_model, out.len_baseline = col(len_m, float), col(len_b, float)
    else:
        lens = boarddata.lengths(s, sorted(set(out.response_id.tolist()) | set(out.baseline_response_id.tolist())),
                                 unit, tokenizer)
        out.len_model = np.array([lens.get(r, np.nan) for r in out.response_id.tolist()], dtype=float)
        out.len_baseline = np.array([lens.get(r, np.nan) for r in out.baseline_response_id.tolist()], dtype=float)
    return out


def content_keys(s: Session, verdict_ids: list[int]) -> dict[int, tuple]:
    """{verdict id: (item prompt SHA-256, answer a's model and text SHA-256, answer b's model and
    text SHA-256, sample index, position)}: the content order of pairwise verdicts (unique per
    judge), the same in every database."""
    RA, RB = aliased(m.Response), aliased(m.Response)
    PJ = m.PairwiseJudgment
    out: dict[int, tuple] = {}
    ids = sorted(set(verdict_ids))
    conn = s.connection()
    for start in range(0, len(ids), 5000):
        q = (select(PJ.id, m.Item.prompt_sha256, RA.model, RA.text_sha256, RB.model, RB.text_sha256, PJ.sample_index,
                    PJ.position)
             .join(RA, RA.id == PJ.response_a_id).join(RB, RB.id == PJ.response_b_id)
             .join(m.Item, m.Item.id == RA.item_id).where(PJ.id.in_(ids[start:start + 5000])))
        out.update((r[0], tuple(r[1:])) for r in conn.execute(q))
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


def families_with_verdicts(s: Session) -> list[int]:
    """Ids of the task families with at least one pairwise verdict (any judge, any status), by
    id: the families :func:`verdict_counts` lists, each found by its first verdict instead of a
    count of all of them."""
    RA = aliased(m.Response)
    PJ = m.PairwiseJudgment
    hit = (select(PJ.id).join(RA, RA.id == PJ.response_a_id).join(m.Item, m.Item.id == RA.item_id)
           .where(m.Item.task_family_id == m.TaskFamily.id).exists())
    return list(s.scalars(select(m.TaskFamily.id).where(hit).order_by(m.TaskFamily.id)))


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
