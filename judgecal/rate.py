"""``judgecal rate``: collect judge ratings into the database, concurrently and resumably.

How a run works (docs/rating.md has the user's view):

1. The judge row: model + endpoint (credentials stripped) + prompt SHA-256 + sampling params
   (temperature, max_tokens) -> ``judge_key`` (SHA-256), get-or-create on the unique key.
2. Work rows: one ``rating`` row per (selected response, judge, sample index), or for
   ``pairwise`` one ``pairwise_judgment`` row per (pair, judge, sample, position 'ab'/'ba'),
   created with status 'pending' by INSERT ... ON CONFLICT DO NOTHING: re-running never adds a
   duplicate, and several processes may create the same work at once.
3. Stale claims are released: rows left 'running' by a process of this host that is gone
   (its pid is dead), or claimed longer ago than the lease (default
   ``max(300, 3 * timeout * max_attempts)`` s, for processes on other hosts).
   ``retry_failed`` also sets this judge's failed and unparsed rows of the selection back to
   'pending'.
4. Workers claim batches: ``UPDATE ... SET status='running', claimed_by=<host:pid:token>
   WHERE id IN (SELECT id ... WHERE status='pending' ORDER BY id LIMIT n FOR UPDATE SKIP
   LOCKED) RETURNING ...`` (PostgreSQL; on SQLite the statement is atomic under the database
   write lock). Every row is rated by exactly one worker.
5. Calls go through :class:`judgecal.judge.client.JudgeClient` (bounded, retried); outputs are
   parsed by :mod:`judgecal.judge.parse`; results are written in batches (executemany UPDATE
   by id, guarded by ``claimed_by``) as they complete. Ctrl-C / SIGTERM write what finished
   and release the rest; SIGKILL leaves 'running' rows that the next run on this host
   reclaims at once. At most the calls in flight are lost, never duplicated.

``--limit N`` caps the work created (the first N responses / pairs of the selection, by id);
a run also finishes pending rows that an earlier run of the same judge left in the selection.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import signal
import socket
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Optional

from sqlalchemy import bindparam, func, or_, select, true, update
from sqlalchemy.engine import Engine

from judgecal.db import models as m
from judgecal.db import queries
from judgecal.db.engine import get_engine, mask_url, session_scope
from judgecal.errors import DatabaseError, InputError, UsageError
from judgecal.judge import parse
from judgecal.judge.client import CallResult, JudgeClient, public_endpoint, resolve_api_key, resolve_base_url, sanitize
from judgecal.judge.prompts import Prompt, load_prompt

# seconds the writer waits for more results before a write (fewer, larger transactions: less
# CPU per rating on the client and the database; docs/performance.md)
WRITE_COALESCE_S = 0.05
PAIRWISE_MAP = {"ab": {"A": "a", "B": "b", "C": "tie"}, "ba": {"A": "b", "B": "a", "C": "tie"}}


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


def _dead_local_claimers(claimers: list[str]) -> list[str]:
    host = socket.gethostname()[:120]
    dead = []
    for c in claimers:
        parts = (c or "").rsplit(":", 2)
        if len(parts) == 3 and parts[0] == host and parts[1].isdigit() and not _pid_alive(int(parts[1])):
            dead.append(c)
    return dead


@dataclass
class _Plan:
    table: Any
    judge_id: int
    scope: Any  # extra WHERE restricting the table to the selection (or True)
    pairwise: bool
    me: str = field(default_factory=worker_id)


def _like(pattern: str) -> str:
    return pattern.replace("%", r"\%").replace("_", r"\_").replace("*", "%")


def _response_filter(session, families: list[str], model_filter: Optional[str], items: Optional[int] = None):
    """A SELECT of response ids in the selection (families by name, model exact or glob ``*``,
    only the first ``items`` items by id when given)."""
    q = select(m.Response.id).join(m.Item, m.Item.id == m.Response.item_id)
    if families:
        q = q.where(m.Item.task_family_id.in_(queries.family_ids(session, families)))
    if items is not None:
        first = select(m.Item.id).order_by(m.Item.id).limit(items)
        if families:
            first = first.where(m.Item.task_family_id.in_(queries.family_ids(session, families)))
        q = q.where(m.Item.id.in_(first.scalar_subquery()))
    if model_filter:
        q = q.where(m.Response.model.like(_like(model_filter), escape="\\") if "*" in model_filter
                    else m.Response.model == model_filter)
    return q


def _create_pointwise(session, plan: _Plan, sel, samples: int, limit: Optional[int]) -> Any:
    """Create the work rows; returns the keys (``(response_id,)``) of the responses this run's
    ``limit`` covers (None without a limit): ``--retry-failed`` resets only those."""
    q = sel.order_by(m.Response.id)
    if limit is not None:
        q = q.limit(limit)
    ids = list(session.scalars(q))
    now = m.utcnow()
    rows = [{"response_id": rid, "judge_id": plan.judge_id, "sample_index": k, "status": "pending", "attempts": 0,
             "created_at": now} for rid in ids for k in range(samples)]
    queries.insert_ignore(session, m.Rating, rows)
    return {(rid,) for rid in ids} if limit is not None else None


def _pairs(session, sel, limit: Optional[int]) -> list[tuple[int, int]]:
    E, V = m.ExpertLabel, m.VerbosityPair
    labelled = select(E.response_a_id, E.response_b_id).where(
        E.kind == "pairwise", E.response_a_id.is_not(None), E.response_b_id.is_not(None),
        or_(E.response_a_id.in_(sel), E.response_b_id.in_(sel))).order_by(E.id)
    verbose = select(V.concise_response_id, V.verbose_response_id).where(
        or_(V.concise_response_id.in_(sel), V.verbose_response_id.in_(sel))).order_by(V.id)
    pairs = dict.fromkeys(tuple(r) for q in (labelled, verbose) for r in session.execute(q))
    out = list(pairs)
    return out[:limit] if limit is not None else out


def _create_pairwise(session, plan: _Plan, sel, samples: int, limit: Optional[int]) -> Any:
    """As :func:`_create_pointwise`, for pairs: keys ``(response_a_id, response_b_id)``."""
    now = m.utcnow()
    pairs = _pairs(session, sel, limit)
    rows = [{"response_a_id": a, "response_b_id": b, "judge_id": plan.judge_id, "sample_index": k, "position": pos,
             "status": "pending", "attempts": 0, "created_at": now}
            for a, b in pairs for k in range(samples) for pos in ("ab", "ba")]
    queries.insert_ignore(session, m.PairwiseJudgment, rows)
    return set(pairs) if limit is not None else None


def _release_stale(engine: Engine, plan: _Plan, lease_s: float) -> int:
    T = plan.table
    with engine.begin() as conn:
        claimers = list(conn.scalars(select(T.claimed_by).where(T.judge_id == plan.judge_id, T.status == "running").distinct()))
        dead = _dead_local_claimers(claimers)
        cutoff = m.utcnow() - dt.timedelta(seconds=lease_s)
        cond = T.claimed_at < cutoff
        if dead:
            cond = or_(cond, T.claimed_by.in_(dead))
        res = conn.execute(update(T).where(T.judge_id == plan.judge_id, T.status == "running", cond)
                           .values(status="pending", claimed_by=None, claimed_at=None))
        return res.rowcount or 0


def _reset_failed(engine: Engine, plan: _Plan, limited: Optional[set] = None) -> int:
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


def _counts(engine: Engine, plan: _Plan) -> dict[str, int]:
    T = plan.table
    with engine.connect() as conn:
        q = select(T.status, func.count()).where(T.judge_id == plan.judge_id, plan.scope).group_by(T.status)
        return {s: n for s, n in conn.execute(q)}


def _claim(engine: Engine, plan: _Plan, n: int) -> list[dict]:
    """Claim up to n pending rows; returns dicts with the texts needed to render them."""
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
            return [{"id": i, "position": pos, "question": qn, "reference": ref, "a": ta, "b": tb}
                    for i, pos, qn, ref, ta, tb in conn.execute(q)]
        q = (select(T.id, I.prompt, I.reference, R.text).join(R, R.id == T.response_id).join(I, I.id == R.item_id)
             .where(T.id.in_(ids)))
        return [{"id": i, "question": qn, "reference": ref, "text": tx} for i, qn, ref, tx in conn.execute(q)]


def _write_cols(pairwise: bool) -> list[str]:
    cols = ["status", "raw_output", "error", "attempts", "latency_s", "prompt_tokens", "completion_tokens", "updated_at"]
    return cols + (["verdict"] if pairwise else ["score", "expected_score"])


def _write(engine: Engine, plan: _Plan, results: list[dict]) -> None:
    if not results:
        return
    T = plan.table
    cols = _write_cols(plan.pairwise)
    stmt = (update(T).where(T.id == bindparam("b_id"), T.claimed_by == plan.me, T.status == "running")
            .values({c: bindparam(f"b_{c}") for c in cols}))
    with engine.begin() as conn:
        conn.execute(stmt, [{f"b_{k}": v for k, v in r.items()} for r in results])


def _release_mine(engine: Engine, plan: _Plan) -> None:
    T = plan.table
    with engine.begin() as conn:
        conn.execute(update(T).where(T.claimed_by == plan.me, T.status == "running")
                     .values(status="pending", claimed_by=None, claimed_at=None))


class _ThreadStore:
    """Claims and writes for SQLite (and any database but PostgreSQL): the synchronous
    statements above, each in a worker thread so the event loop keeps serving calls."""

    def __init__(self, engine: Engine, plan: _Plan):
        self.engine, self.plan = engine, plan

    async def claim(self, n: int) -> list[dict]:
        return await asyncio.to_thread(_claim, self.engine, self.plan, n)

    async def write(self, results: list[dict]) -> None:
        await asyncio.to_thread(_write, self.engine, self.plan, results)

    async def aclose(self) -> None:
        pass


class _PgStore:
    """Claims and writes for PostgreSQL on one ``psycopg.AsyncConnection`` (autocommit) driven
    by the event loop itself: no worker thread, so no GIL hand-offs between the database
    driver and the HTTP client (profiled: with threads each claim/write waited for the GIL
    and the client lost 10-30 % of its throughput on 2 cores; docs/performance.md).

    Same guarantees as :func:`_claim` / :func:`_write`, each in ONE statement (so one round
    trip and one transaction):

    - claim: ``UPDATE t SET status='running', claimed_by, claimed_at FROM response, item
      WHERE t.id IN (SELECT id ... status='pending' ORDER BY id LIMIT n FOR UPDATE SKIP
      LOCKED) AND <join> RETURNING t.id, <texts>``;
    - write: ``UPDATE t SET <cols> = v.<cols> FROM unnest(<one array per column>) AS v
      WHERE t.id = v.id AND t.claimed_by = <me> AND t.status = 'running'``: fixed SQL text
      whatever the batch size, so psycopg prepares it server-side after 5 uses.

    Raises DatabaseError (masked URL) when the connection cannot be opened."""

    def __init__(self, engine: Engine, plan: _Plan, conn: Any):
        self.engine, self.plan, self.conn = engine, plan, conn
        T = plan.table.__table__
        cols = _write_cols(plan.pairwise)
        types = {c: T.c[c].type.compile(dialect=engine.dialect) for c in ["id", *cols]}
        arrays = ", ".join(f"%({c})s::{types[c]}[]" for c in ["id", *cols])
        sets = ", ".join(f"{c} = v.{c}" for c in cols)
        self._write_sql = (f"UPDATE {T.name} AS t SET {sets} FROM unnest({arrays}) AS v(id, {', '.join(cols)}) "
                           f"WHERE t.id = v.id AND t.claimed_by = %(me)s AND t.status = 'running'")
        self._cols = cols

    @classmethod
    async def open(cls, engine: Engine, plan: _Plan) -> "_PgStore":
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
        rows = await cur.fetchall()
        if self.plan.pairwise:
            return [{"id": i, "position": pos, "question": qn, "reference": ref, "a": ta, "b": tb}
                    for i, pos, qn, ref, ta, tb in rows]
        return [{"id": i, "question": qn, "reference": ref, "text": tx} for i, qn, ref, tx in rows]

    async def write(self, results: list[dict]) -> None:
        if not results:
            return
        params: dict[str, Any] = {c: [r[c] for r in results] for c in ["id", *self._cols]}
        params["me"] = self.plan.me
        await self.conn.execute(self._write_sql, params)

    async def aclose(self) -> None:
        await self.conn.close()


async def _open_store(engine: Engine, plan: _Plan):
    """The claim/write backend for this database (see :class:`_PgStore`, :class:`_ThreadStore`)."""
    if engine.dialect.name == "postgresql":
        return await _PgStore.open(engine, plan)
    return _ThreadStore(engine, plan)


class _Runner:
    """The async part: claim -> call -> parse -> batched write (the progress bar reads
    ``counts`` from :func:`_run_with_progress`)."""

    def __init__(self, engine, plan, prompt: Prompt, client_kw: dict, concurrency: int, key: str):
        self.engine, self.plan, self.prompt = engine, plan, prompt
        self.client_kw, self.concurrency, self.key = client_kw, concurrency, key
        self.pending_writes: list[dict] = []
        self.counts = {"ok": 0, "unparsed": 0, "failed": 0}
        self.attempts = 0
        self.claimed: set[int] = set()
        self.have_results = asyncio.Event()
        self.in_flight = 0  # rows claimed and not yet finished (a counter: O(1) per result)
        self.slot_free = asyncio.Event()
        self.store: Any = None

    def _row_result(self, row: dict, res: CallResult) -> dict:
        out: dict[str, Any] = {
            "id": row["id"], "attempts": res.attempts, "latency_s": res.latency_s, "prompt_tokens": res.prompt_tokens,
            "completion_tokens": res.completion_tokens, "updated_at": m.utcnow(),
            "raw_output": sanitize(res.text, (self.key,)) if res.text is not None else None,
        }
        if self.plan.pairwise:
            out["verdict"] = None
        else:
            out["score"] = out["expected_score"] = None
        if res.status != "ok":
            out.update(status="failed", error=res.error)
            return out
        if self.plan.pairwise:
            pv = parse.parse_pairwise_verdict(res.text, [row["a"], row["b"]])
            out.update(status=pv.status, error=pv.reason,
                       verdict=PAIRWISE_MAP[row["position"]][pv.verdict] if pv.verdict else None)
        else:
            ps = parse.parse_score(res.text, self.prompt.scale_min, self.prompt.scale_max, candidates=row["text"])
            out.update(status=ps.status, error=ps.reason, score=ps.score)
            top = parse.verdict_top_logprobs(res.logprobs) if res.logprobs else None
            if top:
                out["expected_score"] = parse.expected_score(top, (self.prompt.scale_min, self.prompt.scale_max))
        return out

    def _messages(self, row: dict) -> list[dict[str, str]]:
        if self.plan.pairwise:
            a, b = (row["a"], row["b"]) if row["position"] == "ab" else (row["b"], row["a"])
            return self.prompt.render(question=row["question"], reference=row["reference"], response_a=a, response_b=b)
        return self.prompt.render(question=row["question"], reference=row["reference"], response=row["text"])

    async def _one(self, client: JudgeClient, row: dict) -> None:
        try:
            messages = self._messages(row)
        except InputError as exc:
            res = CallResult(status="failed", error=f"cannot render the prompt: {exc}", attempts=0)
        else:
            res = await client.complete(messages)
        try:
            out = self._row_result(row, res)
        except Exception as exc:  # noqa: BLE001 - a parsing bug must not lose the call
            res = CallResult(status="failed", error=f"internal error while parsing: {type(exc).__name__}: {exc}",
                             attempts=res.attempts, text=res.text)
            out = self._row_result(row, res)
        self.attempts += res.attempts
        self.counts[out["status"]] += 1
        self.pending_writes.append(out)
        self.have_results.set()
        self.claimed.discard(row["id"])
        self.in_flight -= 1
        self.slot_free.set()

    def _count_text(self) -> str:
        c = self.counts
        return f"ok {c['ok']}  unparsed {c['unparsed']}  failed {c['failed']}"

    async def _flush(self) -> None:
        batch, self.pending_writes = self.pending_writes, []
        if not batch:
            return
        try:
            await self.store.write(batch)
        except BaseException:
            # not known to be written: the final flush in run() writes it (the UPDATE is
            # guarded by claimed_by/status='running', so writing it twice is harmless)
            self.pending_writes[:0] = batch
            raise

    async def _writer(self, done: asyncio.Event) -> None:
        """Write results in batches as they complete: once a result is waiting, the writer
        gathers more for at most WRITE_COALESCE_S (or until ``concurrency`` results wait),
        then writes them in one statement; while one batch is being written the next
        accumulates. A SIGKILL loses only the calls in flight and at most
        WRITE_COALESCE_S + one write's worth of finished results."""
        while not done.is_set():
            if not self.pending_writes:
                self.have_results.clear()
                waiter = asyncio.create_task(self.have_results.wait())
                stopper = asyncio.create_task(done.wait())
                await asyncio.wait({waiter, stopper}, return_when=asyncio.FIRST_COMPLETED)
                waiter.cancel()
                stopper.cancel()
            deadline = time.monotonic() + WRITE_COALESCE_S
            while (len(self.pending_writes) < self.concurrency and not done.is_set()
                   and (left := deadline - time.monotonic()) > 0):
                await asyncio.sleep(min(left, 0.005))
            await self._flush()

    async def run(self) -> None:
        batch_n = max(2 * self.concurrency, 32)
        done = asyncio.Event()
        self.store = await _open_store(self.engine, self.plan)
        writer = asyncio.create_task(self._writer(done))
        tasks: set[asyncio.Task] = set()
        try:
            async with JudgeClient(concurrency=self.concurrency, **self.client_kw) as client:
                while True:
                    while self.in_flight >= batch_n:
                        self.slot_free.clear()
                        await self.slot_free.wait()
                    rows = await self.store.claim(batch_n)
                    if not rows:
                        break
                    self.claimed.update(r["id"] for r in rows)
                    self.in_flight += len(rows)
                    for row in rows:
                        task = asyncio.create_task(self._one(client, row))
                        tasks.add(task)
                        task.add_done_callback(tasks.discard)
                if tasks:
                    await asyncio.gather(*tasks)
        finally:
            for t in list(tasks):
                t.cancel()
            done.set()
            writer_error: Optional[BaseException] = None
            try:
                await writer
            except asyncio.CancelledError:
                pass
            except Exception as exc:  # noqa: BLE001 - re-raised below, after the final flush
                writer_error = exc
            finally:
                await self.store.aclose()
            # whatever finished is written (on a fresh connection); the rest of our claims go
            # back to 'pending'
            batch, self.pending_writes = self.pending_writes, []
            _write(self.engine, self.plan, batch)
            _release_mine(self.engine, self.plan)
            if writer_error is not None:
                raise writer_error


def judge_params(temperature: float, max_tokens: int) -> dict[str, Any]:
    """The sampling parameters that are part of a judge's identity."""
    return {"temperature": float(temperature), "max_tokens": int(max_tokens)}


def run_rate(
    *,
    judge: str,
    base_url: Optional[str] = None,
    prompt: Optional[str] = None,
    task_families: tuple[str, ...] | list[str] = (),
    model_filter: Optional[str] = None,
    samples: int = 1,
    temperature: float = 0.0,
    max_tokens: int = 512,
    concurrency: int = 16,
    limit: Optional[int] = None,
    items: Optional[int] = None,
    judge_name: Optional[str] = None,
    endpoint_id: Optional[str] = None,
    identity_model: Optional[str] = None,
    retry_failed: bool = False,
    pairwise: bool = False,
    timeout: float = 60.0,
    max_attempts: int = 4,
    logprobs: bool = False,
    database_url: Optional[str] = None,
    progress: bool = True,
    lease_s: Optional[float] = None,
) -> dict[str, Any]:
    """Rate the selection with one judge; returns a summary dict (JSON-serialisable).

    ``judge``: model name sent to the endpoint; ``judge_name``: the name reports show (default
    ``judge``). ``endpoint_id`` / ``identity_model``: what the judge's
    identity records instead of the endpoint URL and the model name sent (a local server on a
    random port serving a folder is the same judge every run). ``items``: only the responses of the first N items (by id) of the selection,
    so all responses to the same prompts are rated together. ``base_url``: endpoint (else
    ``OPENAI_BASE_URL``); key from ``OPENAI_API_KEY`` (placeholder "EMPTY" when unset).
    ``prompt``: built-in name or template path (default pointwise_v1, or pairwise_v1 with
    ``pairwise``). ``samples``: sample indexes 0..K-1 per response. ``timeout``: seconds per
    attempt. ``lease_s``: age after which another host's 'running' claim is taken over.
    Summary keys: judge_id, judge_key, judge, endpoint, prompt, prompt_sha256, mode, this_run
    (ok/unparsed/failed/attempts), totals (rows of the selection by status), elapsed_s,
    ratings_per_s, released_stale, reset_failed, worker. Raises UsageError for bad options,
    InputError for a bad prompt file, NotFoundError for an unknown task family,
    DatabaseError for an unreachable database. Endpoint failures never raise: they are rows."""
    if samples < 1 or concurrency < 1 or max_attempts < 1 or max_tokens < 1 or timeout <= 0:
        raise UsageError("--samples, --concurrency, --max-attempts, --max-tokens must be >= 1 and --timeout > 0")
    if (limit is not None and limit < 1) or (items is not None and items < 1):
        raise UsageError("--limit and --items must be >= 1")
    tmpl = load_prompt(prompt or ("pairwise_v1" if pairwise else "pointwise_v1"))
    if (tmpl.mode == "pairwise") != pairwise:
        raise UsageError(f"prompt {tmpl.name!r} is a {tmpl.mode} prompt: "
                         + ("drop --pairwise or pass a pointwise prompt" if not pairwise else "pass a pairwise prompt such as pairwise_v1"))
    url = resolve_base_url(base_url)
    key = resolve_api_key()
    endpoint = endpoint_id or public_endpoint(url)
    lease = lease_s if lease_s is not None else max(300.0, 3 * timeout * max_attempts)
    engine = get_engine(database_url)
    try:
        with session_scope(engine) as session:
            jrow = queries.get_or_create_judge(
                session, model=identity_model or judge, endpoint=endpoint, prompt_name=tmpl.name, prompt_sha256=tmpl.sha256,
                mode=tmpl.mode, params=judge_params(temperature, max_tokens),
                scale_min=tmpl.scale_min if tmpl.scale_min is not None else 0.0,
                scale_max=tmpl.scale_max if tmpl.scale_max is not None else 1.0, name=judge_name or judge)
            judge_id, judge_key = jrow.id, jrow.judge_key
            sel = _response_filter(session, list(task_families or ()), model_filter, items)
            table = m.PairwiseJudgment if pairwise else m.Rating
            if task_families or model_filter:
                scope = (table.response_a_id.in_(sel) if pairwise else table.response_id.in_(sel))
            else:
                scope = true()
            plan = _Plan(table=table, judge_id=judge_id, scope=scope, pairwise=pairwise)
            limited = (_create_pairwise if pairwise else _create_pointwise)(session, plan, sel, samples, limit)
        released = _release_stale(engine, plan, lease)
        reset = _reset_failed(engine, plan, limited) if retry_failed else 0
        before = _counts(engine, plan)
        todo = before.get("pending", 0)
        client_kw = dict(model=judge, base_url=url, timeout=timeout, max_attempts=max_attempts,
                         temperature=temperature, max_tokens=max_tokens, logprobs=logprobs)
        start = time.perf_counter()
        runner = _run_with_progress(engine, plan, tmpl, client_kw, concurrency, key, todo, progress)
        elapsed = time.perf_counter() - start
        totals = _counts(engine, plan)
    finally:
        engine.dispose()
    n_done = sum(runner.counts.values())
    return {
        "judge_id": judge_id, "judge_key": judge_key, "judge": judge, "judge_name": judge_name or judge, "endpoint": endpoint, "prompt": tmpl.name,
        "prompt_sha256": tmpl.sha256, "mode": tmpl.mode, "worker": plan.me,
        "this_run": dict(runner.counts, attempts=runner.attempts),
        "totals": {s: totals.get(s, 0) for s in m.RATING_STATUSES},
        "released_stale": released, "reset_failed": reset,
        "elapsed_s": round(elapsed, 3), "ratings_per_s": round(n_done / elapsed, 2) if elapsed > 0 else None,
    }


def _run_with_progress(engine, plan, tmpl, client_kw, concurrency, key, todo, show) -> _Runner:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    console = Console(stderr=True)
    bar = Progress(TextColumn("rating"), BarColumn(), MofNCompleteColumn(),
                   TextColumn("{task.fields[rate]}"), TimeElapsedColumn(),
                   TextColumn("ETA"), TimeRemainingColumn(), TextColumn("{task.fields[counts]}"),
                   console=console, disable=not show, transient=False)
    runner = _Runner(engine, plan, tmpl, client_kw, concurrency, key)
    with bar:
        task_id = bar.add_task("rating", total=todo, counts=runner._count_text(), rate="")
        t0 = time.perf_counter()

        async def main() -> None:
            loop = asyncio.get_running_loop()
            current = asyncio.current_task()
            try:
                loop.add_signal_handler(signal.SIGTERM, current.cancel)  # type: ignore[union-attr]
            except (NotImplementedError, RuntimeError, ValueError):
                pass

            def refresh() -> None:
                n = sum(runner.counts.values())
                bar.update(task_id, completed=n, counts=runner._count_text(),
                           rate=f"{n / max(time.perf_counter() - t0, 1e-9):.1f}/s")

            async def ticker() -> None:
                # the bar is refreshed from here, 5 times a second, not once per result
                while show:
                    await asyncio.sleep(0.2)
                    refresh()

            tick = asyncio.create_task(ticker())
            try:
                await runner.run()
            finally:
                tick.cancel()
                if show:
                    refresh()

        try:
            asyncio.run(main())
        except asyncio.CancelledError:
            pass
    if show:
        c = runner.counts
        console.print(f"rated {sum(c.values())}: ok {c['ok']}, unparsed {c['unparsed']}, failed {c['failed']} "
                      f"({runner.attempts} calls)", highlight=False)
    return runner
