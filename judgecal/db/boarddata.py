"""Per-response rows for the leaderboard: producing model, family, judge score, status,
length in a unit, text (for the density exemption), and multiple-choice runs per model."""

from __future__ import annotations

import math
from collections import defaultdict

from sqlalchemy import select
from sqlalchemy.orm import Session, aliased

from judgecal.db import models as m
from judgecal.db.fitdata import LENGTH_COLUMNS

#: Rows fetched at a time where a board streams the ratings (a server-side cursor on PostgreSQL).
YIELD_PER = 20000


def _streamed(s: Session, q):
    """The rows of Core select ``q`` in the session's transaction, fetched :data:`YIELD_PER` at a
    time (a server-side cursor on PostgreSQL: memory bounded by the batch, not the result)."""
    for part in s.connection().execute(q.execution_options(yield_per=YIELD_PER)).partitions():
        yield from part


def rated_responses(s: Session, family_ids: list[int], judge_id: int, summary: str = "greedy",
                    risk_k: float = 1.0) -> list[dict]:
    """One dict per response of the families with at least one finished rating by the judge:
    response_id, family_id, family (name), model, item_sha256, text_sha256, score (mean of ok
    ratings or None), n_ok, n_unparsed, n_failed, n_no_distribution, n_large_outside (ok ratings
    read from a distribution that puts at least
    :data:`judgecal.judge.distribution.LARGE_OUTSIDE` of its mass outside the scale; 0 under
    ``greedy``), and the response's item_id
    and stored lengths n_words, n_chars, n_bytes (read with the ratings in the same query, so
    that the board needs no second lookup of every answer by id: :func:`unit_lengths`).

    ``summary`` (:mod:`judgecal.calibrate.summaries`): each ok rating counts as its greedy score
    or the mean / risk-averse (``risk_k``) summary of its stored distribution; an ok rating
    without one counts in ``n_no_distribution`` and not in ``score`` (the caller refuses).

    In content order (model, family name, item prompt SHA-256, text SHA-256), never row-id or
    dialect order; the mean is computed here (``math.fsum`` of the scores), the same float on
    SQLite and PostgreSQL: the leaderboard's bootstrap resamples this order."""
    from judgecal.calibrate.summaries import large_outside, rating_value

    q = (
        select(m.Response.id, m.Item.task_family_id, m.TaskFamily.name, m.Response.model, m.Item.prompt_sha256,
               m.Response.text_sha256, m.Rating.status, m.Rating.score,
               m.Rating.distribution if summary != "greedy" else m.Rating.id,
               m.Response.item_id, m.Response.n_words, m.Response.n_chars, m.Response.n_bytes)
        .join(m.Response, m.Response.id == m.Rating.response_id)
        .join(m.Item, m.Item.id == m.Response.item_id)
        .join(m.TaskFamily, m.TaskFamily.id == m.Item.task_family_id)
        .where(m.Rating.judge_id == judge_id, m.Item.task_family_id.in_(family_ids))
    )
    by_resp: dict[int, dict] = {}
    ok: dict[int, list[float]] = defaultdict(list)
    for rid, fid, fam, model, item_sha, text_sha, status, score, dist, item_id, words, chars, nbytes in _streamed(s, q):
        r = by_resp.get(rid)
        if r is None:
            r = by_resp[rid] = {"response_id": rid, "family_id": fid, "family": fam, "model": model,
                                "item_sha256": item_sha, "text_sha256": text_sha, "score": None,
                                "n_ok": 0, "n_unparsed": 0, "n_failed": 0, "n_no_distribution": 0, "n_large_outside": 0,
                                "item_id": item_id, "n_words": words, "n_chars": chars, "n_bytes": nbytes}
        if status in ("ok", "unparsed", "failed"):
            r[f"n_{status}"] += 1
        if status == "ok" and score is not None and summary != "greedy":
            score = rating_value(score, dist, summary, risk_k)
            if score is None:
                r["n_no_distribution"] += 1
            elif large_outside(dist):
                r["n_large_outside"] += 1
        if status == "ok" and score is not None:
            ok[rid].append(float(score))
    for rid, scores in ok.items():
        by_resp[rid]["score"] = math.fsum(scores) / len(scores)
    return sorted(by_resp.values(), key=lambda r: (r["model"], r["family"], r["item_sha256"], r["text_sha256"]))


def unit_lengths(s: Session, rows: list[dict], family_id: int, judge_id: int, unit: str,
                 tokenizer: str | None) -> dict[int, float]:
    """:func:`lengths` of the ``rows`` of :func:`rated_responses` (those of one family), without
    looking each id up again: words, characters and bytes are the stored lengths read with the
    ratings; tokens are read in one query over the family's responses rated by the judge (a join,
    not ``IN`` lists of ids). The same {response id: float} as :func:`lengths` of their ids."""
    if unit != "tokens":
        col = {"words": "n_words", "chars": "n_chars", "bytes": "n_bytes"}[unit]
        return {r["response_id"]: float(r[col]) for r in rows}
    want = {r["response_id"] for r in rows}
    rated = select(m.Rating.response_id).where(m.Rating.judge_id == judge_id)
    q = (select(m.TokenLength.response_id, m.TokenLength.n_tokens)
         .join(m.Response, m.Response.id == m.TokenLength.response_id)
         .join(m.Item, m.Item.id == m.Response.item_id)
         .where(m.TokenLength.tokenizer == tokenizer, m.Item.task_family_id == family_id,
                m.TokenLength.response_id.in_(rated)))
    found = {r: float(n) for r, n in _streamed(s, q) if r in want}
    return {r["response_id"]: found[r["response_id"]] for r in rows if r["response_id"] in found}


def lengths(s: Session, response_ids: list[int], unit: str, tokenizer: str | None) -> dict[int, float]:
    """{response id: length in ``unit``} (tokens: under ``tokenizer``; missing ones absent)."""
    out: dict[int, float] = {}
    for start in range(0, len(response_ids), 5000):
        part = response_ids[start : start + 5000]
        if unit == "tokens":
            q = select(m.TokenLength.response_id, m.TokenLength.n_tokens).where(
                m.TokenLength.tokenizer == tokenizer, m.TokenLength.response_id.in_(part))
        else:
            q = select(m.Response.id, LENGTH_COLUMNS[unit]).where(m.Response.id.in_(part))
        out.update({r: float(n) for r, n in s.execute(q)})
    return out


def texts(s: Session, response_ids: list[int]) -> dict[int, str]:
    """{response id: text}."""
    out: dict[int, str] = {}
    for start in range(0, len(response_ids), 5000):
        part = response_ids[start : start + 5000]
        out.update(dict(s.execute(select(m.Response.id, m.Response.text).where(m.Response.id.in_(part))).all()))
    return out


def verbosity_pairs(s: Session, family_ids: list[int]) -> list[tuple[int, int]]:
    """(concise response id, verbose response id) of the families, in content order (family,
    item prompt SHA-256, then each answer's model and text SHA-256; sorted here, as text
    collation differs between dialects)."""
    C, V = aliased(m.Response), aliased(m.Response)
    q = (
        select(m.VerbosityPair.concise_response_id, m.VerbosityPair.verbose_response_id, m.TaskFamily.name,
               m.Item.prompt_sha256, C.model, C.text_sha256, V.model, V.text_sha256)
        .join(m.Item, m.Item.id == m.VerbosityPair.item_id)
        .join(m.TaskFamily, m.TaskFamily.id == m.Item.task_family_id)
        .join(C, C.id == m.VerbosityPair.concise_response_id)
        .join(V, V.id == m.VerbosityPair.verbose_response_id)
        .where(m.Item.task_family_id.in_(family_ids))
    )
    return [(r[0], r[1]) for r in sorted(s.execute(q), key=lambda r: tuple(r[2:]))]


def mc_runs_by_model(s: Session) -> dict[str, list[m.McRun]]:
    """{model: [McRun, newest first]}."""
    out: dict[str, list[m.McRun]] = defaultdict(list)
    for run in s.scalars(select(m.McRun).order_by(m.McRun.id.desc())):
        out[run.model].append(run)
    return dict(out)
