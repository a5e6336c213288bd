"""Per-response rows for the leaderboard: producing model, family, judge score, status,
length in a unit, text (for the density exemption), and multiple-choice runs per model."""

from __future__ import annotations

from collections import defaultdict

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from judgecal.db import models as m
from judgecal.db.fitdata import LENGTH_COLUMNS


def rated_responses(s: Session, family_ids: list[int], judge_id: int) -> list[dict]:
    """One dict per response of the families with at least one finished rating by the judge:
    response_id, family_id, model, score (mean of ok ratings or None), n_ok, n_unparsed, n_failed."""
    stats = (
        select(
            m.Rating.response_id,
            func.avg(m.Rating.score).filter(m.Rating.status == "ok"),
            func.count().filter(m.Rating.status == "ok"),
            func.count().filter(m.Rating.status == "unparsed"),
            func.count().filter(m.Rating.status == "failed"),
        )
        .where(m.Rating.judge_id == judge_id)
        .group_by(m.Rating.response_id)
        .subquery()
    )
    q = (
        select(m.Response.id, m.Item.task_family_id, m.Response.model, *list(stats.c)[1:])
        .join(stats, stats.c.response_id == m.Response.id)
        .join(m.Item, m.Item.id == m.Response.item_id)
        .where(m.Item.task_family_id.in_(family_ids))
    )
    out = []
    for rid, fid, model, score, n_ok, n_unp, n_fail in s.execute(q):
        out.append({"response_id": rid, "family_id": fid, "model": model, "score": None if score is None else float(score),
                    "n_ok": n_ok, "n_unparsed": n_unp, "n_failed": n_fail})
    return out


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
    """(concise response id, verbose response id) of the families."""
    q = (
        select(m.VerbosityPair.concise_response_id, m.VerbosityPair.verbose_response_id)
        .join(m.Item, m.Item.id == m.VerbosityPair.item_id)
        .where(m.Item.task_family_id.in_(family_ids))
    )
    return [tuple(r) for r in s.execute(q)]


def mc_runs_by_model(s: Session) -> dict[str, list[m.McRun]]:
    """{model: [McRun, newest first]}."""
    out: dict[str, list[m.McRun]] = defaultdict(list)
    for run in s.scalars(select(m.McRun).order_by(m.McRun.id.desc())):
        out[run.model].append(run)
    return dict(out)
