"""The rating work queue: the SQL of ``judgecal rate`` (work creation, claims, writes, release).

Pointwise ratings (table ``rating``) and pairwise verdicts (table ``pairwise_judgment``) share
this one queue; :mod:`judgecal.views.rate` is the runner alone (calls, parsing, progress) and never
writes SQL. How the queue works (docs/rating.md has the user's view):

1. Work rows: one ``rating`` row per (selected response, judge, sample index), or for
   pairwise one ``pairwise_judgment`` row per (pair, judge, sample, position 'ab'/'ba'),
   created with status 'pending' by INSERT ... ON CONFLICT DO NOTHING: re-running never adds a
   duplicate, and several processes may create the same work at once. Pairs come from the
   expert-labelled and verbosity pairs of the selection (:func:`create_pairwise`), or, with a
   baseline model, from each selected response and the baseline's response to the SAME item
   (:func:`create_baseline_pairs`: response_a = the model's, response_b = the baseline's,
   ``baseline_side`` = 'b').
2. Stale claims are released (:func:`release_stale`): rows left 'running' by a process of
   this host that is gone (its pid is dead), or claimed longer ago than the lease.
3. Workers claim batches: ``UPDATE ... SET status='running', claimed_by=<host:pid:token>
   WHERE id IN (SELECT id ... WHERE status='pending' ORDER BY id LIMIT n FOR UPDATE SKIP
   LOCKED) RETURNING ...`` (PostgreSQL; on SQLite the statement is atomic under the database
   write lock). Every row is rated by exactly one worker.
4. Results are written in batches (UPDATE by id, guarded by ``claimed_by`` and
   ``status='running'``, so a row another worker took over is never overwritten); on exit the
   rows this worker still holds go back to 'pending' (:func:`release_mine`).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import socket
import uuid
from dataclasses import dataclass, field
from typing import Any, Optional

from sqlalchemy import JSON, and_, bindparam, func, or_, select, true, update
from sqlalchemy.engine import Engine

from judgecal.db import models as m
from judgecal.db import queries
from judgecal.db.engine import mask_url
from judgecal.errors import DatabaseError


def worker_id() -> str:
    """``<host>:<pid>:<random token>``: who claimed a row (the pid lets a later run on the
    same host see that the claimer is dead)."""
    return f"{socket.gethostname()[:120]}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def dead_local_claimers(claimers: list[str]) -> list[str]:
    """The claimer ids (see :func:`worker_id`) of processes of this host that are gone."""
    host = socket.gethostname()[:120]
    dead = []
    for c in claimers:
        parts = (c or "").rsplit(":", 2)
        if len(parts) == 3 and parts[0] == host and parts[1].isdigit() and not _pid_alive(int(parts[1])):
            dead.append(c)
    return dead


@dataclass
class Plan:
    """One run's slice of the queue: ``table`` (:class:`~judgecal.db.models.Rating` or
    :class:`~judgecal.db.models.PairwiseJudgment`), the judge, ``scope`` (an extra WHERE
    restricting the table to the selection, or ``true()``), and ``me`` (this worker's id)."""

    table: Any
    judge_id: int
    scope: Any
    pairwise: bool
    me: str = field(default_factory=worker_id)


def response_selection(session, families: list[str], model_filter: Optional[str], items: Optional[int] = None,
                       *, exclude_model: Optional[str] = None):
    """A SELECT of response ids in the selection: families by name (all when empty), model
    by :func:`judgecal.db.queries.model_filter_clause` (exact, or a glob with ``*``), only the
    first ``items`` items by id when given, never the responses of ``exclude_model``.
    Raises NotFoundError for an unknown family."""
    q = select(m.Response.id).join(m.Item, m.Item.id == m.Response.item_id)
    if families:
        q = q.where(m.Item.task_family_id.in_(queries.family_ids(session, families)))
    if items is not None:
        first = select(m.Item.id).order_by(m.Item.id).limit(items)
        if families:
            first = first.where(m.Item.task_family_id.in_(queries.family_ids(session, families)))
        q = q.where(m.Item.id.in_(first.scalar_subquery()))
    if model_filter is not None:  # '' is refused there, never read as "no filter"
        q = q.where(queries.model_filter_clause(m.Response.model, model_filter, session.get_bind().dialect.name))
    if exclude_model is not None:
        q = q.where(m.Response.model != exclude_model)
    return q


def selection_is_empty(session, selection) -> bool:
    """True when the SELECT of :func:`response_selection` finds no response."""
    return session.execute(selection.limit(1)).first() is None


def plan_for(session, *, judge_id: int, pairwise: bool, selection, filtered: bool,
             baseline: Optional[str] = None) -> Plan:
    """The :class:`Plan` of a run. ``filtered``: the selection is narrower than the whole
    database (a family, model or item restriction). Pairwise runs without ``baseline`` see
    the rows without a baseline relation; with ``baseline`` only this baseline's rows
    (``baseline_side`` 'b', response_b one of the baseline model's responses)."""
    table = m.PairwiseJudgment if pairwise else m.Rating
    conds = []
    if filtered or baseline is not None:
        conds.append(table.response_a_id.in_(selection) if pairwise else table.response_id.in_(selection))
    if pairwise:
        T = m.PairwiseJudgment
        if baseline is None:
            conds.append(T.baseline_side.is_(None))
        else:
            conds.append(T.baseline_side == "b")
            conds.append(T.response_b_id.in_(select(m.Response.id).where(m.Response.model == baseline)))
    return Plan(table=table, judge_id=judge_id, scope=and_(*conds) if conds else true(), pairwise=pairwise)


def create_pointwise(session, plan: Plan, sel, samples: int, limit: Optional[int]) -> Optional[set]:
    """Create the pending rows; returns the keys (``(response_id,)``) of the responses this
    run's ``limit`` covers (None without a limit): ``--retry-failed`` resets only those."""
    q = sel.order_by(m.Response.id)
    if limit is not None:
        q = q.limit(limit)
    ids = list(session.scalars(q))
    now = m.utcnow()
    rows = [{"response_id": rid, "judge_id": plan.judge_id, "sample_index": k, "status": "pending", "attempts": 0,
             "created_at": now} for rid in ids for k in range(samples)]
    queries.insert_ignore(session, m.Rating, rows)
    return {(rid,) for rid in ids} if limit is not None else None


def labelled_pairs(session, sel, limit: Optional[int]) -> list[tuple[int, int]]:
    """(response_a_id, response_b_id) of the expert-labelled pairwise labels and the
    verbosity pairs (concise, verbose) touching the selection, labels first, by id, each
    pair once; the first ``limit`` when given."""
    E, V = m.ExpertLabel, m.VerbosityPair
    labelled = select(E.response_a_id, E.response_b_id).where(
        E.kind == "pairwise", E.response_a_id.is_not(None), E.response_b_id.is_not(None),
        or_(E.response_a_id.in_(sel), E.response_b_id.in_(sel))).order_by(E.id)
    verbose = select(V.concise_response_id, V.verbose_response_id).where(
        or_(V.concise_response_id.in_(sel), V.verbose_response_id.in_(sel))).order_by(V.id)
    pairs = dict.fromkeys(tuple(r) for q in (labelled, verbose) for r in session.execute(q))
    out = list(pairs)
    return out[:limit] if limit is not None else out


def _insert_pairs(session, plan: Plan, pairs: list[tuple[int, int]], samples: int, baseline_side: Optional[str]) -> None:
    now = m.utcnow()
    rows = [{"response_a_id": a, "response_b_id": b, "judge_id": plan.judge_id, "sample_index": k, "position": pos,
             "status": "pending", "attempts": 0, "created_at": now, "baseline_side": baseline_side}
            for a, b in pairs for k in range(samples) for pos in ("ab", "ba")]
    queries.insert_ignore(session, m.PairwiseJudgment, rows)


def create_pairwise(session, plan: Plan, sel, samples: int, limit: Optional[int]) -> Optional[set]:
    """As :func:`create_pointwise`, for the labelled and verbosity pairs
    (:func:`labelled_pairs`), both positions; keys ``(response_a_id, response_b_id)``."""
    pairs = labelled_pairs(session, sel, limit)
    _insert_pairs(session, plan, pairs, samples, None)
    return set(pairs) if limit is not None else None


@dataclass
class BaselinePairs:
    """What :func:`baseline_pairs` found: ``pairs`` (model response id, baseline response
    id), ``no_baseline`` (selected responses whose item has no response by the baseline, left
    out), ``items_with_several`` (items where the baseline has several responses: the first
    by id is used), ``baseline_items`` (items the baseline answered, in the whole database)."""

    baseline: str
    pairs: list[tuple[int, int]]
    no_baseline: int
    items_with_several: int
    baseline_items: int  # items the baseline answered


def baseline_pairs(session, sel, baseline: str, limit: Optional[int]) -> BaselinePairs:
    """Pair each selected response (never the baseline's own) with the baseline model's
    response to the same item, by response id; the first ``limit`` pairs when given."""
    R = m.Response
    base = {}
    several = set()
    for item_id, rid in session.execute(select(R.item_id, R.id).where(R.model == baseline).order_by(R.id)):
        if item_id in base:
            several.add(item_id)
        else:
            base[item_id] = rid
    pairs, missing = [], 0
    for rid, item_id in session.execute(select(R.id, R.item_id).where(R.id.in_(sel), R.model != baseline).order_by(R.id)):
        if item_id in base:
            pairs.append((rid, base[item_id]))
        else:
            missing += 1
    if limit is not None:
        pairs = pairs[:limit]
    return BaselinePairs(baseline, pairs, missing, len(several), len(base))


def create_baseline_pairs(session, plan: Plan, found: BaselinePairs, samples: int, limit: Optional[int]) -> Optional[set]:
    """Create both positions of every pair of ``found`` with ``baseline_side`` 'b'. A row of
    the same pair, judge, sample and position made earlier without a baseline relation (an
    expert-labelled pair that happens to be model vs baseline) is the same judgment: it is
    marked ``baseline_side`` 'b' rather than duplicated. Keys as :func:`create_pairwise`."""
    _insert_pairs(session, plan, found.pairs, samples, "b")
    T = m.PairwiseJudgment
    wanted = set(found.pairs)
    candidates = select(T.id, T.response_a_id, T.response_b_id).where(
        T.judge_id == plan.judge_id, T.baseline_side.is_(None),
        T.response_b_id.in_(select(m.Response.id).where(m.Response.model == found.baseline)))
    ids = [i for i, a, b in session.execute(candidates) if (a, b) in wanted]
    for start in range(0, len(ids), 500):
        session.execute(update(T).where(T.id.in_(ids[start:start + 500])).values(baseline_side="b")
                        .execution_options(synchronize_session=False))
    return set(found.pairs) if limit is not None else None


def release_stale(engine: Engine, plan: Plan, lease_s: float) -> int:
    """Set back to 'pending' this judge's rows claimed by a dead process of this host or
    claimed more than ``lease_s`` seconds ago; returns how many."""
    T = plan.table
    with engine.begin() as conn:
        claimers = list(conn.scalars(select(T.claimed_by).where(T.judge_id == plan.judge_id, T.status == "running").distinct()))
        dead = dead_local_claimers(claimers)
        cutoff = m.utcnow() - dt.timedelta(seconds=lease_s)
        cond = T.claimed_at < cutoff
        if dead:
            cond = or_(cond, T.claimed_by.in_(dead))
        res = conn.execute(update(T).where(T.judge_id == plan.judge_id, T.status == "running", cond)
                           .values(status="pending", claimed_by=None, claimed_at=None))
        return res.rowcount or 0


def reset_failed(engine: Engine, plan: Plan, limited: Optional[set] = None) -> int:
    """Set this judge's failed and unparsed rows of the selection back to 'pending' (with a
    ``--limit``, only the rows whose keys are in ``limited``); returns how many."""
    T = plan.table
    cond = [T.judge_id == plan.judge_id, T.status.in_(("failed", "unparsed")), plan.scope]
    values = dict(status="pending", claimed_by=None, claimed_at=None, error=None)
    with engine.begin() as conn:
        if limited is None:
            return conn.execute(update(T).where(*cond).values(**values)).rowcount or 0
        keys = (T.response_a_id, T.response_b_id) if plan.pairwise else (T.response_id,)
        ids = [row[0] for row in conn.execute(select(T.id, *keys).where(*cond)) if tuple(row[1:]) in limited]
        for start in range(0, len(ids), 500):
            conn.execute(update(T).where(T.id.in_(ids[start:start + 500])).values(**values))
        return len(ids)


def counts(engine: Engine, plan: Plan) -> dict[str, int]:
    """{status: rows} of this judge's rows in the plan's scope."""
    T = plan.table
    with engine.connect() as conn:
        q = select(T.status, func.count()).where(T.judge_id == plan.judge_id, plan.scope).group_by(T.status)
        return {s: n for s, n in conn.execute(q)}


def _rows_of(pairwise: bool, rows) -> list[dict]:
    if pairwise:
        return [{"id": i, "position": pos, "question": qn, "reference": ref, "a": ta, "b": tb}
                for i, pos, qn, ref, ta, tb in rows]
    return [{"id": i, "question": qn, "reference": ref, "text": tx} for i, qn, ref, tx in rows]


def claim(engine: Engine, plan: Plan, n: int) -> list[dict]:
    """Claim up to n pending rows; returns dicts with the texts needed to render them:
    pointwise ``{id, question, reference, text}``, pairwise ``{id, position, question,
    reference, a, b}`` (``a``/``b``: the texts of response_a/response_b)."""
    T = plan.table
    sub = select(T.id).where(T.judge_id == plan.judge_id, T.status == "pending", plan.scope).order_by(T.id).limit(n)
    if engine.dialect.name == "postgresql":
        sub = sub.with_for_update(skip_locked=True)
    now = m.utcnow()
    with engine.begin() as conn:
        ids = list(conn.scalars(update(T).where(T.id.in_(sub)).values(status="running", claimed_by=plan.me, claimed_at=now)
                                .returning(T.id)))
        if not ids:
            return []
        R, I = m.Response, m.Item
        if plan.pairwise:
            RB = m.Response.__table__.alias("rb")
            q = (select(T.id, T.position, I.prompt, I.reference, R.text, RB.c.text)
                 .join(R, R.id == T.response_a_id).join(I, I.id == R.item_id).join(RB, RB.c.id == T.response_b_id)
                 .where(T.id.in_(ids)))
        else:
            q = (select(T.id, I.prompt, I.reference, R.text).join(R, R.id == T.response_id).join(I, I.id == R.item_id)
                 .where(T.id.in_(ids)))
        return _rows_of(plan.pairwise, conn.execute(q))


def write_cols(pairwise: bool) -> list[str]:
    """The columns a result dict carries besides ``id``."""
    cols = ["status", "raw_output", "error", "attempts", "latency_s", "prompt_tokens", "completion_tokens", "updated_at"]
    return cols + (["verdict", "preference", "distribution"] if pairwise else ["score", "expected_score", "distribution"])


def _value(result: dict, col: str) -> Any:
    """A result's value for ``col``; a result without a distribution has none (None)."""
    return result.get(col) if col == "distribution" else result[col]


def write(engine: Engine, plan: Plan, results: list[dict]) -> None:
    """Write finished results (dicts with ``id`` and :func:`write_cols`) to the rows this
    worker still holds (others are left alone)."""
    if not results:
        return
    T = plan.table
    cols = write_cols(plan.pairwise)
    stmt = (update(T).where(T.id == bindparam("b_id"), T.claimed_by == plan.me, T.status == "running")
            .values({c: bindparam(f"b_{c}") for c in cols}))
    with engine.begin() as conn:
        conn.execute(stmt, [{f"b_{k}": _value(r, k) for k in ("id", *cols)} for r in results])


def release_mine(engine: Engine, plan: Plan) -> int:
    """Hand every row this worker still holds back to 'pending'; returns how many."""
    T = plan.table
    with engine.begin() as conn:
        res = conn.execute(update(T).where(T.claimed_by == plan.me, T.status == "running")
                           .values(status="pending", claimed_by=None, claimed_at=None))
        return res.rowcount or 0


class ThreadStore:
    """Claims and writes for SQLite (and any database but PostgreSQL): the synchronous
    statements above, each in a worker thread so the event loop keeps serving calls."""

    def __init__(self, engine: Engine, plan: Plan):
        self.engine, self.plan = engine, plan

    async def claim(self, n: int) -> list[dict]:
        import asyncio

        return await asyncio.to_thread(claim, self.engine, self.plan, n)

    async def write(self, results: list[dict]) -> None:
        import asyncio

        await asyncio.to_thread(write, self.engine, self.plan, results)

    async def aclose(self) -> None:
        pass


class PgStore:
    """Claims and writes for PostgreSQL on one ``psycopg.AsyncConnection`` (autocommit) driven
    by the event loop itself: no worker thread, so no GIL hand-offs between the database
    driver and the HTTP client (profiled: with threads each claim/write waited for the GIL
    and the client lost 10-30 % of its throughput on 2 cores; docs/performance.md).

    Same guarantees as :func:`claim` / :func:`write`, each in ONE statement (so one round
    trip and one transaction):

    - claim: ``UPDATE t SET status='running', claimed_by, claimed_at FROM response, item
      WHERE t.id IN (SELECT id ... status='pending' ORDER BY id LIMIT n FOR UPDATE SKIP
      LOCKED) AND <join> RETURNING t.id, <texts>``;
    - write: ``UPDATE t SET <cols> = v.<cols> FROM unnest(<one array per column>) AS v
      WHERE t.id = v.id AND t.claimed_by = <me> AND t.status = 'running'``: fixed SQL text
      whatever the batch size, so psycopg prepares it server-side after 5 uses.

    Raises DatabaseError (masked URL) when the connection cannot be opened."""

    def __init__(self, engine: Engine, plan: Plan, conn: Any):
        self.engine, self.plan, self.conn = engine, plan, conn
        T = plan.table.__table__
        cols = write_cols(plan.pairwise)
        types = {c: T.c[c].type.compile(dialect=engine.dialect) for c in ["id", *cols]}
        # JSON values travel as their text (psycopg adapts no dict by itself): text[] cast to json[]
        self._json = [c for c in cols if isinstance(T.c[c].type, JSON)]
        arrays = ", ".join(f"%({c})s::text[]::{types[c]}[]" if c in self._json else f"%({c})s::{types[c]}[]"
                           for c in ["id", *cols])
        sets = ", ".join(f"{c} = v.{c}" for c in cols)
        self._write_sql = (f"UPDATE {T.name} AS t SET {sets} FROM unnest({arrays}) AS v(id, {', '.join(cols)}) "
                           f"WHERE t.id = v.id AND t.claimed_by = %(me)s AND t.status = 'running'")
        self._cols = cols

    @classmethod
    async def open(cls, engine: Engine, plan: Plan) -> "PgStore":
        import psycopg

        cargs, cparams = engine.dialect.create_connect_args(engine.url)
        cparams.pop("context", None)  # SQLAlchemy's adapters map: plain psycopg types suffice here
        try:
            conn = await psycopg.AsyncConnection.connect(*cargs, autocommit=True, **cparams)
        except psycopg.Error as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise DatabaseError(f"cannot connect to {mask_url(engine.url)}: {first}") from None
        return cls(engine, plan, conn)

    def _claim_statement(self, n: int):
        T, plan = self.plan.table, self.plan
        sub = (select(T.id).where(T.judge_id == plan.judge_id, T.status == "pending", plan.scope).order_by(T.id).limit(n)
               .with_for_update(skip_locked=True))
        # aliases, so that the scope's own subqueries on response/item never correlate to these
        R, I = m.Response.__table__.alias("claim_r"), m.Item.__table__.alias("claim_i")
        stmt = (update(T).where(T.id.in_(sub)).values(status="running", claimed_by=plan.me, claimed_at=m.utcnow()))
        if plan.pairwise:
            RB = m.Response.__table__.alias("claim_rb")
            return (stmt.where(R.c.id == T.response_a_id, I.c.id == R.c.item_id, RB.c.id == T.response_b_id)
                    .returning(T.id, T.position, I.c.prompt, I.c.reference, R.c.text, RB.c.text))
        return (stmt.where(R.c.id == T.response_id, I.c.id == R.c.item_id)
                .returning(T.id, I.c.prompt, I.c.reference, R.c.text))

    async def claim(self, n: int) -> list[dict]:
        compiled = self._claim_statement(n).compile(dialect=self.engine.dialect,
                                                    compile_kwargs={"render_postcompile": True})
        cur = await self.conn.execute(str(compiled), compiled.params)
        return _rows_of(self.plan.pairwise, await cur.fetchall())

    async def write(self, results: list[dict]) -> None:
        if not results:
            return
        params: dict[str, Any] = {c: [_value(r, c) for r in results] for c in ["id", *self._cols]}
        for c in self._json:
            params[c] = [None if v is None else json.dumps(v) for v in params[c]]
        params["me"] = self.plan.me
        await self.conn.execute(self._write_sql, params)

    async def aclose(self) -> None:
        await self.conn.close()


async def open_store(engine: Engine, plan: Plan):
    """The claim/write backend for this database (see :class:`PgStore`, :class:`ThreadStore`)."""
    if engine.dialect.name == "postgresql":
        return await PgStore.open(engine, plan)
    return ThreadStore(engine, plan)
