"""Load what a calibration needs from the database: per-response judge scores and lengths,
expert-labelled pairs, pointwise expert labels, verbosity pairs (plain Python lists; the
calibrate layer turns them into arrays).

Reproducible whatever the database: nothing handed on depends on row ids or on the order a
dialect returns rows in. Items are named by their prompt's SHA-256 (unique in a family), every
list is ordered by content keys (item prompt SHA-256, response model + text SHA-256, the label's
values), and a response's score is the mean of its ok ratings computed here from the scores
sorted by sample index (``math.fsum``: exact, so SQLite and PostgreSQL give the same float).
Row ids serve only to join rows inside one load.

:func:`fingerprint_records` gives the content of what a fit used (ratings, labels, lengths,
verbosity pairs) as sorted plain records, for :func:`judgecal.calibrate.fingerprint.fingerprint`."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from sqlalchemy import select
from sqlalchemy.orm import Session

from judgecal.db import models as m

LENGTH_COLUMNS = {"words": m.Response.n_words, "chars": m.Response.n_chars, "bytes": m.Response.n_bytes}


@dataclass
class FamilyRows:
    """One family's data for one judge, keyed by response row id (valid inside this load only).

    ``score``: mean of the judge's ok ratings of a response (over samples); ``length``: in the
    requested unit; ``text`` only when asked for. ``item_of``: the item's prompt SHA-256 (the
    item key the calibrate layer groups folds and resamples by); ``key_of``: the response's
    content key (prompt SHA-256, model, text SHA-256); ``family_of``: the response's task family
    name. ``ratings``: (response, sample index, status, score) of every rating of the judge.
    ``pairs``, ``points`` and ``verbosity`` are in content order (module doc)."""

    score: dict[int, float] = field(default_factory=dict)
    n_samples: dict[int, int] = field(default_factory=dict)
    length: dict[int, float] = field(default_factory=dict)
    item_of: dict[int, str] = field(default_factory=dict)
    key_of: dict[int, tuple[str, str, str]] = field(default_factory=dict)
    family_of: dict[int, str] = field(default_factory=dict)
    model_of: dict[int, str] = field(default_factory=dict)
    text: dict[int, str] = field(default_factory=dict)
    #: the answer's Markdown counts (headers, list items ordered + unordered, bold spans: docs/style.md);
    #: None where a count is NULL (a row written by another client than judgecal after migration 0007)
    md: dict[int, tuple[int, int, int] | None] = field(default_factory=dict)
    ratings: list[tuple[int, int, str, float | None]] = field(default_factory=list)
    pairs: list[tuple[str, int, int, float]] = field(default_factory=list)  # item, a, b, outcome
    points: list[tuple[str, int, float, float, float]] = field(default_factory=list)  # item, resp, score, min, max
    verbosity: list[tuple[int, int]] = field(default_factory=list)  # concise, verbose
    missing_lengths: list[int] = field(default_factory=list)
    status_counts: dict[str, int] = field(default_factory=dict)
    length_unit: str = ""
    tokenizer: str | None = None
    summary: str = "greedy"
    #: ok ratings without a usable stored distribution (read only when a summary needs them)
    no_distribution: int = 0
    #: {summary: {response: mean over its ok ratings of that summary}} with ``with_summaries``
    #: and every ok rating carrying a distribution; None otherwise
    summaries: dict[str, dict[int, float]] | None = None
    #: {model: ok ratings whose distribution puts at least LARGE_OUTSIDE of its mass outside the
    #: scale} (:func:`judgecal.calibrate.summaries.large_outside`), counted under a summary other than greedy
    large_outside: dict[str, int] = field(default_factory=dict)


OUTCOME = {"a": 1.0, "b": 0.0, "tie": 0.5}


def response_ids_of_family(s: Session, family_id: int) -> list[int]:
    """Every response id of a family."""
    q = select(m.Response.id).join(m.Item, m.Item.id == m.Response.item_id).where(m.Item.task_family_id == family_id)
    return list(s.scalars(q))


def load_family(
    s: Session,
    family_id: int,
    judge_id: int,
    *,
    length_unit: str,
    tokenizer: str | None,
    with_text: bool = False,
    verbosity_family_id: int | None = None,
    summary: str = "greedy",
    risk_k: float = 1.0,
    with_summaries: bool = False,
) -> FamilyRows:
    """Scores of ``judge_id`` on ``family_id`` plus labels, verbosity pairs and lengths.

    ``length_unit`` 'tokens' reads ``token_length`` rows of ``tokenizer``; responses without
    one are listed in ``missing_lengths`` (the caller fills them and loads again).

    ``summary`` (:mod:`judgecal.calibrate.summaries`): each ok rating's number is its greedy
    ``score`` or the ``mean`` / ``risk-averse`` summary (``risk_k``) of its stored
    distribution (then ``ratings`` carry those numbers, so the fingerprint covers the
    distributions); ok ratings without one are counted in ``no_distribution`` and left out of
    ``score`` (the caller refuses them). ``with_summaries``: also fill ``summaries`` with every
    summary's per-response means (None when some ok rating lacks a distribution)."""
    from judgecal.calibrate.summaries import SUMMARIES, large_outside, rating_value

    rows = FamilyRows(length_unit=length_unit, tokenizer=tokenizer if length_unit == "tokens" else None,
                      summary=summary)
    fams = {family_id} | ({verbosity_family_id} if verbosity_family_id else set())
    base = (
        select(m.Response.id, m.Item.prompt_sha256, m.Response.model, m.Response.text_sha256, m.TaskFamily.name,
               m.Response.md_headers, m.Response.md_list_ordered, m.Response.md_list_unordered, m.Response.md_bold)
        .join(m.Item, m.Item.id == m.Response.item_id)
        .join(m.TaskFamily, m.TaskFamily.id == m.Item.task_family_id)
        .where(m.Item.task_family_id.in_(fams))
    )
    for rid, item_sha, model, text_sha, fam, h, lo, lu, b in s.execute(base):
        rows.md[rid] = None if None in (h, lo, lu, b) else (int(h), int(lo) + int(lu), int(b))
        rows.item_of[rid] = item_sha
        rows.key_of[rid] = (item_sha, model, text_sha)
        rows.model_of[rid] = model
        rows.family_of[rid] = fam
    ids = select(m.Response.id).join(m.Item, m.Item.id == m.Response.item_id).where(m.Item.task_family_id.in_(fams))
    need_dist = summary != "greedy" or with_summaries
    cols = [m.Rating.response_id, m.Rating.sample_index, m.Rating.status, m.Rating.score]
    q = select(*cols, m.Rating.distribution if need_dist else m.Rating.id).where(
        m.Rating.judge_id == judge_id, m.Rating.response_id.in_(ids))
    raw = sorted(((rid, int(k), status, None if score is None else float(score), dist if need_dist else None)
                  for rid, k, status, score, dist in s.execute(q)), key=lambda r: (rows.family_of[r[0]], rows.key_of[r[0]], r[1]))
    if need_dist:
        per: dict[str, dict[int, list[float]]] = {name: {} for name in SUMMARIES}
        for rid, _, status, score, dist in raw:
            if status != "ok" or score is None:
                continue
            vals = {name: rating_value(score, dist, name, risk_k) for name in SUMMARIES}
            if summary != "greedy" and large_outside(dist):  # read from a renormalised minority: said
                model = rows.model_of[rid]
                rows.large_outside[model] = rows.large_outside.get(model, 0) + 1
            if vals["mean"] is None:
                rows.no_distribution += 1
            for name, v in vals.items():
                if v is not None:
                    per[name].setdefault(rid, []).append(v)
        if with_summaries and rows.no_distribution == 0:
            rows.summaries = {name: {rid: math.fsum(v) / len(v) for rid, v in d.items()} for name, d in per.items()}
    if summary != "greedy":
        raw = [(rid, k, st, rating_value(sc, dist, summary, risk_k) if st == "ok" and sc is not None else sc, dist)
               for rid, k, st, sc, dist in raw]
    rows.ratings = [r[:4] for r in raw]
    ok: dict[int, list[float]] = {}
    for rid, _, status, score in rows.ratings:
        rows.status_counts[status] = rows.status_counts.get(status, 0) + 1
        if status == "ok" and score is not None:
            ok.setdefault(rid, []).append(score)
    for rid, scores in ok.items():  # the mean in Python: the same float on every dialect
        rows.score[rid] = math.fsum(scores) / len(scores)
        rows.n_samples[rid] = len(scores)
    if length_unit == "tokens":
        q = select(m.TokenLength.response_id, m.TokenLength.n_tokens).where(
            m.TokenLength.tokenizer == tokenizer, m.TokenLength.response_id.in_(ids)
        )
    else:
        q = select(m.Response.id, LENGTH_COLUMNS[length_unit]).where(m.Response.id.in_(ids))
    rows.length = {rid: float(n) for rid, n in s.execute(q)}
    if with_text:
        rows.text = dict(s.execute(select(m.Response.id, m.Response.text).where(m.Response.id.in_(ids))).all())

    key = rows.key_of
    fam_ids = select(m.Response.id).join(m.Item, m.Item.id == m.Response.item_id).where(m.Item.task_family_id == family_id)
    q = select(m.ExpertLabel.response_a_id, m.ExpertLabel.response_b_id, m.ExpertLabel.preference).where(
        m.ExpertLabel.kind == "pairwise", m.ExpertLabel.response_a_id.in_(fam_ids)
    )
    rows.pairs = sorted(((rows.item_of[a], a, b, OUTCOME[pref]) for a, b, pref in s.execute(q)),
                        key=lambda p: (key[p[1]], key[p[2]], p[3]))
    q = select(m.ExpertLabel.response_id, m.ExpertLabel.score, m.ExpertLabel.scale_min, m.ExpertLabel.scale_max).where(
        m.ExpertLabel.kind == "pointwise", m.ExpertLabel.response_id.in_(fam_ids)
    )
    rows.points = sorted(((rows.item_of[r], r, score, lo, hi) for r, score, lo, hi in s.execute(q)),
                         key=lambda p: (key[p[1]], p[2], p[3], p[4]))
    vfam = verbosity_family_id or family_id
    q = (
        select(m.VerbosityPair.concise_response_id, m.VerbosityPair.verbose_response_id)
        .join(m.Item, m.Item.id == m.VerbosityPair.item_id)
        .where(m.Item.task_family_id == vfam)
    )
    rows.verbosity = sorted(((c, v) for c, v in s.execute(q)), key=lambda p: (key[p[0]], key[p[1]]))
    needed = {r for r in rows.score}
    rows.missing_lengths = sorted(r for r in needed if r not in rows.length)
    return rows


def fingerprint_records(rows: FamilyRows) -> dict:
    """The content a fit on ``rows`` used, free of row ids and sorted (identical in every
    database holding the same data): ``ratings`` [family, prompt SHA-256, model, text SHA-256,
    sample index, status, score] of every rating of the judge (a retried rating that turned ok,
    a new sample or a changed score changes it); ``pairwise`` [response a key, response b key,
    preference] and ``pointwise`` [response key, score, scale min, max] expert labels;
    ``lengths`` [response key, length] of the rated responses in the fit's unit (``unit``,
    ``tokenizer``); ``verbosity`` [concise key, verbose key]. A response key is [family,
    prompt SHA-256, model, text SHA-256]."""
    def k(rid: int) -> list:
        return [rows.family_of[rid], *rows.key_of[rid]]

    outcome = {v: p for p, v in OUTCOME.items()}
    num = lambda x: None if x is None else float(x)  # noqa: E731  (an integer read back is the same number)
    return {
        "unit": rows.length_unit, "tokenizer": rows.tokenizer,
        "ratings": sorted(k(r) + [i, st, sc] for r, i, st, sc in rows.ratings),
        "pairwise": sorted([k(a), k(b), outcome[o]] for _, a, b, o in rows.pairs),
        "pointwise": sorted([k(r), num(sc), num(lo), num(hi)] for _, r, sc, lo, hi in rows.points),
        "lengths": sorted([k(r), rows.length[r]] for r in rows.score if r in rows.length),
        "verbosity": sorted([k(c), k(v)] for c, v in rows.verbosity),
    }
