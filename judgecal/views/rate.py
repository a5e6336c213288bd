"""``judgecal rate``: collect judge ratings and pairwise verdicts, concurrently and resumably.

This module is the runner alone: the judge's identity, the calls (:mod:`judgecal.judge.client`),
the parsing (:mod:`judgecal.judge.parse`), the progress bar and the signals. Every SQL
statement of the work queue (work creation, stale-claim release, claims, writes, hand-back)
lives in :mod:`judgecal.db.queue`, shared by pointwise and pairwise rating. docs/rating.md
has the user's view.

1. The judge row: model + endpoint (credentials stripped) + prompt SHA-256 + sampling params
   (temperature, max_tokens) -> ``judge_key`` (SHA-256), get-or-create on the unique key.
2. Work rows (pending) for the selection: responses (pointwise); expert-labelled and
   verbosity pairs (``--pairwise``); or each selected model's response against the
   baseline model's response to the same item (``--pairwise --baseline MODEL``), both
   orders. Stale claims are released; ``retry_failed`` resets failed/unparsed rows.
3. Workers claim batches, render the prompt (a render error is that row's failure), call
   the endpoint (bounded, retried; while the endpoint is down, paused and retried for at
   most ``max_outage_s`` s: :class:`_Outage`), parse, and write in batches.
4. Ctrl-C / SIGTERM: what finished is written, every other claimed row goes back to
   'pending' (never 'failed'), and the summary says ``interrupted``; the CLI then exits with
   128 + the signal number. SIGKILL leaves 'running' rows that the next run on this host
   reclaims at once. At most the calls in flight are lost, never duplicated.

``--limit N`` caps the work created (the first N responses / pairs of the selection, by id);
a run also finishes pending rows that an earlier run of the same judge left in the selection.
"""

from __future__ import annotations

import asyncio
import math
import signal
import threading
import time
from typing import Any, Optional

from judgecal.db import models as m
from judgecal.db import queries
from judgecal.db import queue
from judgecal.db.engine import get_engine, session_scope
from judgecal.errors import ModelError, UsageError
from judgecal.judge import distribution, parse
from judgecal.judge.client import (
    CallResult,
    JudgeClient,
    check_top_logprobs,
    public_endpoint,
    resolve_api_key,
    resolve_base_url,
    sanitize,
    storable,
)
from judgecal.judge.prompts import Prompt, load_prompt
from judgecal.judge.sandbox import RENDER_TIME_LIMIT_S, RenderAborted

# seconds the writer waits for more results before a write (fewer, larger transactions: less
# CPU per rating on the client and the database; docs/performance.md)
WRITE_COALESCE_S = 0.05
PAIRWISE_MAP = parse.PAIRWISE_MAP  # verdict letter shown -> canonical verdict, by position
CONNECTION_ERROR = "connection error"  # how JudgeClient's reasons for an unreachable endpoint start
DEFAULT_MAX_OUTAGE_S = 120.0
# with --logprobs, per answered call: with / without logprobs; of those with: no verdict token in
# the output, no alternative of the verdict token on the scale, a distribution stored. refused:
# failed calls whose error says the endpoint refused the logprobs parameters
LOGPROB_COUNTS = ("with", "without", "no_verdict_token", "no_verdict_alternative", "distributions", "refused",
                  "dropped")  # dropped: tokens or alternatives not readable (NaN, a positive log-probability...)


def logprobs_refusal(error: Optional[str]) -> bool:
    """True when a failed call's reason says the endpoint refused the logprobs request (an
    HTTP 4xx that names logprobs / top_logprobs, as OpenAI's and vLLM's refusals do)."""
    e = (error or "").lower()
    return e.startswith("http 4") and "logprob" in e


class _Outage:
    """Pause-and-retry while the endpoint is down, for a bounded time.

    A call that ends failed with a connection error (refused, reset, unreachable: after the
    client's own retries) is not failed at once. :meth:`should_retry` (one caller at a time)
    first asks whether the endpoint came back after that call began (then the call is simply
    made again); otherwise it probes the endpoint (:meth:`JudgeClient.unreachable`). If the
    endpoint answers, the failure was the call's own and the row fails. If it does not, the
    endpoint is down: every caller waits while the probe is repeated with exponential backoff
    (``first_wait`` s doubling up to ``max_wait`` s) until the endpoint answers (the calls are
    made again) or ``max_outage_s`` seconds of waiting in the whole run are spent (then this
    and every later connection failure fails its row at once, with its reason)."""

    def __init__(self, max_outage_s: float, first_wait: float = 1.0, max_wait: float = 30.0, probe_timeout: float = 10.0):
        self.max_outage_s, self.first_wait, self.max_wait = max_outage_s, first_wait, max_wait
        self.probe_timeout = probe_timeout
        self.paused_s = 0.0
        self.pauses = 0
        self.gave_up = False
        self.last_reason: Optional[str] = None
        self.recovered_at = -math.inf
        self.lock = asyncio.Lock()

    async def should_retry(self, client: JudgeClient, started: float) -> bool:
        """True when a call begun at ``started`` (``time.monotonic()``) that failed on a
        connection error should be made again; False when its row fails."""
        async with self.lock:
            if self.recovered_at > started:
                return True
            if self.gave_up or self.max_outage_s <= 0:
                return False
            reason = await client.unreachable(min(self.probe_timeout, client.timeout))
            if reason is None:
                return False
            self.pauses += 1
            self.last_reason = reason
            wait = self.first_wait
            while True:
                left = self.max_outage_s - self.paused_s
                if left <= 0:
                    self.gave_up = True
                    return False
                step = min(wait, left)
                await asyncio.sleep(step)
                self.paused_s += step
                wait = min(2 * wait, self.max_wait)
                reason = await client.unreachable(min(self.probe_timeout, client.timeout))
                if reason is None:
                    self.recovered_at = time.monotonic()
                    return True
                self.last_reason = reason

    def summary(self) -> dict[str, Any]:
        return {"pauses": self.pauses, "paused_s": round(self.paused_s, 3), "gave_up": self.gave_up,
                "last_reason": self.last_reason}


def read_row_output(prompt: Prompt, row: dict, pairwise: bool, text: str,
                    dist: Optional[dict] = None) -> parse.Reading:
    """The stored reading (status, score or canonical verdict, reason) of the judge's ``text``
    for a claimed ``row``: :func:`judgecal.judge.parse.read_output` with the row's candidates
    (``text``; pairwise ``a``, ``b`` and ``position``) and the prompt's scale. Every rating
    path calls this, so the same text is stored alike whether an endpoint wrote it or the
    local model's greedy decoding did (:mod:`judgecal.views.rate_local`). ``dist``: the
    judgment's distribution when one was read (served ``--logprobs``, local forward): with
    less than :data:`judgecal.judge.distribution.MIN_IN_SCALE` of its probability on the scale
    the reading is unparsed, with the reason (:func:`judgecal.judge.distribution.too_little_on_scale`)."""
    if pairwise:
        reading = parse.read_output(text, pairwise=True, candidates=[row["a"], row["b"]], position=row["position"])
    else:
        reading = parse.read_output(text, pairwise=False, scale_min=prompt.scale_min, scale_max=prompt.scale_max,
                                    candidates=row["text"])
    why = distribution.too_little_on_scale(dist) if reading.status == "ok" else None
    if why is not None:
        return parse.Reading("unparsed", why)
    return reading


def render_row(prompt: Prompt, row: dict, pairwise: bool, time_limit_s: float, abort: Any = None) -> list[dict[str, str]]:
    """The chat messages of one claimed row (pairwise: response_a and response_b in the
    order shown, by ``position``). Raises what :meth:`Prompt.render` raises."""
    limits: dict[str, Any] = {"time_limit_s": time_limit_s, "abort": abort}
    if pairwise:
        a, b = (row["a"], row["b"]) if row["position"] == "ab" else (row["b"], row["a"])
        return prompt.render(question=row["question"], reference=row["reference"], response_a=a, response_b=b, **limits)
    return prompt.render(question=row["question"], reference=row["reference"], response=row["text"], **limits)


class _Runner:
    """The async part: claim -> render -> call -> parse -> batched write (the progress bar
    reads ``counts`` from :func:`_run_with_progress`).

    Every claimed row ends in exactly one of three ways: a result (ok, unparsed or failed
    with its reason: a call that failed after its retries, a template that cannot be
    rendered for this row, an internal error while parsing), written to the database; or,
    when the run is cancelled (Ctrl-C, SIGTERM) before the row finished, no result: the row
    is handed back to 'pending' by :func:`judgecal.db.queue.release_mine`. Rows still
    waiting for a connection slot are cancelled BEFORE the HTTP client is closed, so none of
    them fails on a closed client."""

    def __init__(self, engine, plan, prompt: Prompt, client_kw: dict, concurrency: int, key: str,
                 max_outage_s: float = 120.0, render_time_limit_s: float = RENDER_TIME_LIMIT_S):
        self.engine, self.plan, self.prompt = engine, plan, prompt
        self.client_kw, self.concurrency, self.key = client_kw, concurrency, key
        self.pending_writes: list[dict] = []
        self.counts = {"ok": 0, "unparsed": 0, "failed": 0}
        self.failed_by_cause = {"endpoint": 0, "render": 0, "internal": 0}
        self.attempts = 0
        self.claimed: set[int] = set()
        self.have_results = asyncio.Event()
        self.in_flight = 0  # rows claimed and not yet finished (a counter: O(1) per result)
        self.slot_free = asyncio.Event()
        self.store: Any = None
        self.outage = _Outage(max_outage_s)
        self.released = 0
        self.replaced = 0  # rows whose raw output or error held a NUL or unpaired surrogate (_storable)
        self.render_time_limit_s = render_time_limit_s
        # with --logprobs: what the endpoint gave (see logprobs_summary); None without
        self.logprobs: Optional[dict[str, int]] = (dict.fromkeys(LOGPROB_COUNTS, 0) if client_kw.get("logprobs")
                                                   else None)
        # set by the SIGINT/SIGTERM handler: a render in progress (which holds the event loop)
        # stops at its next step, and the row goes back to 'pending' like any unfinished row
        self.abort = threading.Event()

    def _storable(self, out: dict, endpoint: bool) -> None:
        """The texts in ``out`` (raw_output, error) made storable on every dialect
        (:func:`judgecal.judge.client.storable`); a row whose text came from the endpoint and
        needed it is counted (``replaced``, reported by :func:`notices`), a template's or
        judgecal's own error is not (no call was answered)."""
        n = 0
        for key in ("raw_output", "error"):
            if out.get(key):
                out[key], k = storable(out[key])
                n += k
        if n and endpoint:
            self.replaced += 1

    def _row_result(self, row: dict, res: CallResult, endpoint: bool = True) -> dict:
        """The row's stored values from ``res``; ``endpoint``: whether ``res`` is the endpoint's
        answer (False: a render or internal failure made here)."""
        out: dict[str, Any] = {
            "id": row["id"], "attempts": res.attempts, "latency_s": res.latency_s, "prompt_tokens": res.prompt_tokens,
            "completion_tokens": res.completion_tokens, "updated_at": m.utcnow(),
            "raw_output": sanitize(res.text, (self.key,)) if res.text is not None else None,
        }
        if self.plan.pairwise:
            out["verdict"] = out["preference"] = None
        else:
            out["score"] = out["expected_score"] = None
        out["distribution"] = None
        if res.status != "ok":
            out.update(status="failed", error=res.error)
            if self.logprobs is not None and logprobs_refusal(res.error):
                self.logprobs["refused"] += 1
            self._storable(out, endpoint)
            return out
        if self.plan.pairwise:
            top = parse.pairwise_verdict_top_logprobs(res.logprobs) if res.logprobs else None
            dist = distribution.pairwise_from_top_logprobs(top, row["position"]) if top else None
        else:
            top = parse.verdict_top_logprobs(res.logprobs) if res.logprobs else None
            dist = distribution.from_top_logprobs(top, self.prompt.scale_min, self.prompt.scale_max) if top else None
        reading = read_row_output(self.prompt, row, self.plan.pairwise, res.text, dist)
        out.update(reading.fields(self.plan.pairwise))
        if self.plan.pairwise:
            verdict = reading.verdict
            out.update(distribution=dist,
                       preference=parse.pairwise_preference(verdict, row["position"], top if verdict else None))
        else:
            out.update(distribution=dist, expected_score=distribution.expected(dist))
        self._storable(out, endpoint)
        if self.logprobs is not None:
            lp = self.logprobs
            lp["without" if not res.logprobs else "with"] += 1
            lp["dropped"] = lp.get("dropped", 0) + res.logprobs_dropped
            if res.logprobs and top is None:
                lp["no_verdict_token"] += 1
            elif top is not None and dist is None:
                lp["no_verdict_alternative"] += 1
            elif dist is not None:
                lp["distributions"] += 1
        return out

    def _safe_result(self, row: dict, res: CallResult) -> tuple[dict, str]:
        try:
            return self._row_result(row, res), "endpoint"
        except Exception as exc:  # noqa: BLE001 - a parsing bug must not lose the call
            res = CallResult(status="failed", error=f"internal error while parsing: {type(exc).__name__}: {exc}",
                             attempts=res.attempts, text=res.text)
            return self._row_result(row, res), "internal"

    def _messages(self, row: dict) -> list[dict[str, str]]:
        return render_row(self.prompt, row, self.plan.pairwise, self.render_time_limit_s, self.abort)

    async def _rate_row(self, client: JudgeClient, row: dict) -> tuple[dict, str]:
        if self.abort.is_set():
            raise asyncio.CancelledError()
        try:
            messages = self._messages(row)
        except RenderAborted:  # a signal stopped the render: the row is not finished, it goes back
            raise asyncio.CancelledError() from None
        except Exception as exc:  # noqa: BLE001 - InputError or anything a template raises: this row's failure
            reason = " ".join(str(exc).split()) or type(exc).__name__
            failed = CallResult(status="failed", error=f"cannot render the prompt: {reason}")
            return self._row_result(row, failed, endpoint=False), "render"
        attempts = 0
        while True:
            started = time.monotonic()
            res = await client.complete(messages)
            attempts += res.attempts
            if (res.status == "failed" and (res.error or "").startswith(CONNECTION_ERROR)
                    and await self.outage.should_retry(client, started)):
                continue
            res.attempts = attempts
            return self._safe_result(row, res)

    def _slot_done(self) -> None:
        self.in_flight -= 1
        self.slot_free.set()

    async def _one(self, client: JudgeClient, row: dict) -> None:
        try:
            out, cause = await self._rate_row(client, row)
        except asyncio.CancelledError:
            # not finished: the row stays claimed and goes back to 'pending' at the end of run()
            self._slot_done()
            raise
        except Exception as exc:  # noqa: BLE001 - never a lost row or a hung run
            out = self._row_result(row, CallResult(status="failed", error=f"internal error: {type(exc).__name__}: {exc}"),
                                   endpoint=False)
            cause = "internal"
        self.attempts += out["attempts"]
        self.counts[out["status"]] += 1
        if out["status"] == "failed":
            self.failed_by_cause[cause] += 1
        self.pending_writes.append(out)
        self.have_results.set()
        self.claimed.discard(row["id"])
        self._slot_done()

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
        self.store = await queue.open_store(self.engine, self.plan)
        writer = asyncio.create_task(self._writer(done))
        tasks: set[asyncio.Task] = set()
        try:
            async with JudgeClient(concurrency=self.concurrency, **self.client_kw) as client:
                try:
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
                    # cancelled (Ctrl-C, SIGTERM) or failed: stop every row still queued or in
                    # flight while the client is still open, so none fails on a closed client
                    pending = list(tasks)
                    for t in pending:
                        t.cancel()
                    if pending:
                        await asyncio.gather(*pending, return_exceptions=True)
        finally:
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
            queue.write(self.engine, self.plan, batch)
            self.released = queue.release_mine(self.engine, self.plan)
            if writer_error is not None:
                raise writer_error


def judge_params(temperature: float, max_tokens: int) -> dict[str, Any]:
    """The sampling parameters that are part of a judge's identity."""
    return {"temperature": float(temperature), "max_tokens": int(max_tokens)}


LOCAL_ENDPOINT = "judgecal-forward"  # the endpoint of a --local judge's identity: no server, judgecal's forward pass
LOCAL_DEVICES = ("cpu", "cuda")
LOCAL_DTYPES = ("float32", "bfloat16", "float16")


def local_params(prefix: str, dtype: str) -> dict[str, Any]:
    """What a --local judge's identity holds besides the model and prompt: how the verdict is
    read (a forward pass after ``prefix``; the greedy text, of at most ``greedy_max_tokens``
    tokens after it, read as a served answer) and the dtype the model ran in."""
    from judgecal.loglik.verdicts import GREEDY_MAX_TOKENS

    return {"method": "forward", "verdict_prefix": prefix, "greedy_max_tokens": GREEDY_MAX_TOKENS, "dtype": dtype}


def _check_local_options(*, base_url, samples, temperature, logprobs, device, dtype) -> None:
    """Refuse what --local cannot honour (one line each)."""
    if base_url is not None:
        raise UsageError("--local reads the verdict distribution from the local model, with no endpoint: drop --base-url")
    if samples != 1:
        raise UsageError("--samples: the local distribution is deterministic, one reading per response (drop --samples)")
    if temperature != 0:
        raise UsageError("--temperature: the local path stores the whole distribution and its greedy verdict; "
                         "sampling does not apply (drop --temperature)")
    if device not in LOCAL_DEVICES:
        raise UsageError(f"--local-device must be one of {', '.join(LOCAL_DEVICES)}, got {device!r}")
    if dtype not in LOCAL_DTYPES:
        raise UsageError(f"--local-dtype must be one of {', '.join(LOCAL_DTYPES)}, got {dtype!r}")


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
    baseline: Optional[str] = None,
    timeout: float = 60.0,
    max_attempts: int = 4,
    logprobs: bool = False,
    top_logprobs: int = 20,
    database_url: Optional[str] = None,
    progress: bool = True,
    lease_s: Optional[float] = None,
    max_outage_s: float = DEFAULT_MAX_OUTAGE_S,
    render_time_limit_s: float = RENDER_TIME_LIMIT_S,
    local: Optional[str] = None,
    local_device: str = "cpu",
    local_dtype: str = "float32",
    verdict_prefix: Optional[str] = None,
    local_scorer: Any = None,
) -> dict[str, Any]:
    """Rate the selection with one judge; returns a summary dict (JSON-serialisable).

    ``judge``: model name sent to the endpoint; ``judge_name``: the name reports show, stored
    when the judge is first stored (default ``identity_model``, else ``judge``; with ``local``
    "<folder> forward"); a name given for a judge already stored under another name is refused
    (UsageError, nothing rated): the summary's ``judge_name`` is always the stored one. ``endpoint_id`` / ``identity_model``: what the judge's
    identity records instead of the endpoint URL and the model name sent (a local server on a
    random port serving a folder is the same judge every run). ``items``: only the responses of the first N items (by id) of the selection,
    so all responses to the same prompts are rated together. ``base_url``: endpoint (else
    ``OPENAI_BASE_URL``); key from ``OPENAI_API_KEY`` (placeholder "EMPTY" when unset).
    ``prompt``: built-in name or template path (default pointwise_v1, or pairwise_v1 with
    ``pairwise``). ``samples``: sample indexes 0..K-1 per response. ``timeout``: seconds per
    attempt. ``lease_s``: age after which another host's 'running' claim is taken over.
    ``baseline`` (implies ``pairwise``): compare each selected response (the baseline's own
    excepted) with the baseline model's response to the same item, in both orders
    (response_a = the model's, response_b = the baseline's, ``baseline_side`` 'b').
    ``max_outage_s``: seconds the run may wait, in all, for an endpoint that stopped
    answering before connection failures fail their rows (0: never wait).
    ``render_time_limit_s``: seconds one row's prompt may take to render (the sandbox's
    size and step limits apply too: :mod:`judgecal.judge.sandbox`); a row over it fails
    with the reason, counted under ``failed_by_cause.render``.
    ``logprobs``: ask for the ``top_logprobs`` (1..20, default 20) alternatives of every
    output token and store the verdict's distribution (:mod:`judgecal.judge.distribution`)
    and its mean (``expected_score``); the summary's ``logprobs`` counts the calls answered
    with and without them (:func:`notices` words the ones without).
    ``local``: no endpoint: the local model (``smollm2`` or a transformers folder) reads
    each row's verdict distribution from one forward pass of the rendered prompt plus
    ``verdict_prefix`` (default: :func:`judgecal.loglik.verdicts.verdict_prefix` of the
    prompt), batched (:mod:`judgecal.views.rate_local`), on ``local_device`` in
    ``local_dtype``; ``local_scorer``: an already loaded
    :class:`~judgecal.loglik.verdicts.VerdictScorer` of that model (tests, benchmarks).

    Summary keys: judge_id, judge_key, judge, judge_name, endpoint, prompt, prompt_sha256,
    mode, baseline, worker, this_run (ok/unparsed/failed/attempts), logprobs (None, or with
    --logprobs: top_logprobs, with, without, no_verdict_token, no_verdict_alternative,
    distributions, refused), local (None, or the local model, device, dtype, forward,
    verdict_prefix, load_s and work counts), failed_by_cause
    (endpoint: the call failed; render: the template failed on the row; internal), outage
    (pauses, paused_s, gave_up, last_reason), interrupted (None, 'SIGINT' or 'SIGTERM'),
    handed_back (rows put back to 'pending' at the end), totals (rows of the selection by
    status), skipped (pairwise --baseline: no_baseline, items_with_several), elapsed_s,
    ratings_per_s, released_stale (claims of dead workers of this host, or older than the lease,
    taken back before the run), released_after (the same, after the run), lease_s, reset_failed.
    Raises UsageError for bad options, InputError for a bad prompt file, NotFoundError for an
    unknown task family, DatabaseError for an unreachable database. Endpoint failures never raise: they are rows."""
    if samples < 1 or concurrency < 1 or max_attempts < 1 or max_tokens < 1 or timeout <= 0:
        raise UsageError("--samples, --concurrency, --max-attempts, --max-tokens must be >= 1 and --timeout > 0")
    if (limit is not None and limit < 1) or (items is not None and items < 1):
        raise UsageError("--limit and --items must be >= 1")
    if not max_outage_s >= 0 or math.isinf(max_outage_s):
        raise UsageError("--max-outage must be a finite number of seconds >= 0")
    if not render_time_limit_s > 0 or math.isinf(render_time_limit_s):
        raise UsageError("the render time limit must be a finite number of seconds > 0")
    if local is not None:
        _check_local_options(base_url=base_url, samples=samples, temperature=temperature, logprobs=logprobs,
                             device=local_device, dtype=local_dtype)
    elif verdict_prefix is not None:
        raise UsageError("--verdict-prefix applies to --local only (an endpoint generates its own verdict)")
    if logprobs:
        check_top_logprobs(top_logprobs)
    if not judge.strip():
        raise UsageError("--judge needs the judge model's name")
    if model_filter is not None:
        queries.check_model_filter(model_filter)  # an empty filter is refused before any work
    if baseline is not None:
        if not baseline.strip():
            raise UsageError("--baseline needs a model name")
        pairwise = True
    tmpl = load_prompt(prompt or ("pairwise_v1" if pairwise else "pointwise_v1"))
    if (tmpl.mode == "pairwise") != pairwise:
        raise UsageError(f"prompt {tmpl.name!r} is a {tmpl.mode} prompt: "
                         + ("add --pairwise (or --baseline) or pass a pointwise prompt" if not pairwise
                            else "pass a pairwise prompt such as pairwise_v1, or drop --pairwise"))
    folder = prefix = None
    if local is not None:
        from judgecal import localmodel
        from judgecal.loglik.verdicts import verdict_prefix as default_prefix

        folder = localmodel.resolve_model(local)
        if local_scorer is None and not localmodel.has_chat_template(folder):
            raise ModelError(f"{folder}: the tokenizer has no chat template (the served path needs one too)")
        prefix = verdict_prefix if verdict_prefix is not None else default_prefix(tmpl)
        if "\x00" in prefix or len(prefix) > 200:
            raise UsageError("--verdict-prefix must be at most 200 characters without NUL")
        if not pairwise:
            try:
                distribution.scale_values(tmpl.scale_min, tmpl.scale_max)
            except ValueError as exc:
                raise UsageError(f"prompt {tmpl.name!r}: {exc}") from None
        endpoint_id, identity_model = LOCAL_ENDPOINT, folder.name
    asked_name = judge_name  # given by the caller (--judge-name), not a default
    judge_name = judge_name or (f"{folder.name} forward" if local is not None else identity_model or judge)
    url = resolve_base_url(base_url)
    key = resolve_api_key()
    endpoint = public_endpoint(endpoint_id or url)  # what is stored and shown: no credentials, query or fragment
    lease = lease_s if lease_s is not None else max(300.0, 3 * timeout * max_attempts)
    engine = get_engine(database_url)
    skipped: dict[str, int] = {}
    try:
        with session_scope(engine) as session:
            jrow = queries.get_or_create_judge(
                session, model=identity_model or judge, endpoint=endpoint, prompt_name=tmpl.name, prompt_sha256=tmpl.sha256,
                mode=tmpl.mode,
                params=local_params(prefix, local_dtype) if local is not None else judge_params(temperature, max_tokens),
                scale_min=tmpl.scale_min if tmpl.scale_min is not None else 0.0,
                scale_max=tmpl.scale_max if tmpl.scale_max is not None else 1.0, name=judge_name)
            judge_id, judge_key = jrow.id, jrow.judge_key
            if asked_name is not None and jrow.name != asked_name:  # a name is stored once, with the judge
                raise UsageError(f"--judge-name {asked_name!r}: this judge (id {jrow.id}: model {jrow.model}, prompt "
                                 f"{jrow.prompt_name}, endpoint {jrow.endpoint}) is stored under the name {jrow.name!r}, "
                                 "which a rating run does not change: drop --judge-name, or give "
                                 f"--judge-name {jrow.name!r}")
            judge_name = jrow.name  # what is stored (and shown by every report)
            sel = queue.response_selection(session, list(task_families or ()), model_filter, items, exclude_model=baseline)
            if model_filter is not None and queue.selection_is_empty(session, sel):  # (the judge row is rolled back)
                where = f" in task families {', '.join(task_families)}" if task_families else ""
                raise UsageError(f"--model-filter {model_filter!r} matches no response{where}: nothing to rate (the "
                                 "filter is exact, or a glob with *, case-sensitive; `judgecal stats` lists the models)")
            plan = queue.plan_for(session, judge_id=judge_id, pairwise=pairwise, selection=sel,
                                  filtered=bool(task_families or model_filter is not None or items), baseline=baseline)
            if baseline is not None:
                found = queue.baseline_pairs(session, sel, baseline, limit)
                if not found.baseline_items:
                    raise UsageError(f"--baseline {baseline!r}: no response by this model in the database "
                                     "(the name must match exactly; see `judgecal stats`)")
                skipped = {"no_baseline": found.no_baseline, "items_with_several": found.items_with_several}
                limited = queue.create_baseline_pairs(session, plan, found, samples, limit)
            elif pairwise:
                limited = queue.create_pairwise(session, plan, sel, samples, limit)
            else:
                limited = queue.create_pointwise(session, plan, sel, samples, limit)
        released = queue.release_stale(engine, plan, lease)
        reset = queue.reset_failed(engine, plan, limited) if retry_failed else 0
        before = queue.counts(engine, plan)
        todo = before.get("pending", 0)
        if local is not None:
            from judgecal.views import rate_local

            runner, interrupted, elapsed = rate_local.run(
                engine, plan, tmpl, folder=folder, prefix=prefix, device=local_device, dtype=local_dtype,
                scorer=local_scorer, todo=todo, show=progress, render_time_limit_s=render_time_limit_s)
        else:
            client_kw = dict(model=judge, base_url=url, timeout=timeout, max_attempts=max_attempts,
                             temperature=temperature, max_tokens=max_tokens, logprobs=logprobs,
                             top_logprobs=top_logprobs)
            start = time.perf_counter()
            runner, interrupted = _run_with_progress(engine, plan, tmpl, client_kw, concurrency, key, todo, progress,
                                                     max_outage_s, render_time_limit_s)
            elapsed = time.perf_counter() - start
        # another worker of this host that died while this run went on left its claims: take
        # them back now (they show as pending, and the note says to run again)
        released_after = 0 if interrupted else queue.release_stale(engine, plan, lease)
        totals = queue.counts(engine, plan)
    finally:
        engine.dispose()
    n_done = sum(runner.counts.values())
    return {
        "judge_id": judge_id, "judge_key": judge_key, "judge": judge, "judge_name": judge_name, "endpoint": endpoint, "prompt": tmpl.name,
        "prompt_sha256": tmpl.sha256, "mode": tmpl.mode, "baseline": baseline, "worker": plan.me,
        "this_run": dict(runner.counts, attempts=runner.attempts),
        "logprobs": dict(runner.logprobs, top_logprobs=top_logprobs) if getattr(runner, "logprobs", None) is not None
        else None,
        "local": getattr(runner, "local_summary", None),
        "failed_by_cause": dict(runner.failed_by_cause),
        "outage": runner.outage.summary(),
        "interrupted": interrupted, "handed_back": runner.released,
        "raw_output_replaced": getattr(runner, "replaced", 0),
        "totals": {s: totals.get(s, 0) for s in m.RATING_STATUSES},
        "skipped": skipped,
        "released_stale": released, "released_after": released_after, "lease_s": lease, "reset_failed": reset,
        "elapsed_s": round(elapsed, 3), "ratings_per_s": round(n_done / elapsed, 2) if elapsed > 0 else None,
    }


def _run_with_progress(engine, plan, tmpl, client_kw, concurrency, key, todo, show,
                       max_outage_s: float = DEFAULT_MAX_OUTAGE_S,
                       render_time_limit_s: float = RENDER_TIME_LIMIT_S) -> tuple[_Runner, Optional[str]]:
    """Run the runner under a progress bar; returns it and the name of the signal that
    interrupted the run (SIGINT, SIGTERM) or None. Both signals cancel the run: finished
    results are written and the other claimed rows handed back to 'pending'.

    A render runs inside the event loop, so a signal that arrives during a slow render is
    seen by the loop only when the render ends: the Python-level handler therefore also sets
    the runner's ``abort`` event, which stops the render at its next step."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    console = Console(stderr=True)
    bar = Progress(TextColumn("rating"), BarColumn(), MofNCompleteColumn(),
                   TextColumn("{task.fields[rate]}"), TimeElapsedColumn(),
                   TextColumn("ETA"), TimeRemainingColumn(), TextColumn("{task.fields[counts]}"),
                   console=console, disable=not show, transient=False)
    runner = _Runner(engine, plan, tmpl, client_kw, concurrency, key, max_outage_s, render_time_limit_s)
    caught: list[str] = []
    with bar:
        task_id = bar.add_task("rating", total=todo, counts=runner._count_text(), rate="")
        t0 = time.perf_counter()

        async def main() -> None:
            loop = asyncio.get_running_loop()
            current = asyncio.current_task()

            def on_signal(sig: signal.Signals) -> None:
                if sig.name not in caught:
                    caught.append(sig.name)
                current.cancel()  # type: ignore[union-attr]

            def abort_renders(signum: int, frame: Any) -> None:
                # runs between two bytecodes of the main thread, even inside a render; the
                # loop still gets the signal through its wakeup fd and calls on_signal
                runner.abort.set()
                if signal.Signals(signum).name not in caught:
                    caught.append(signal.Signals(signum).name)

            for sig in (signal.SIGINT, signal.SIGTERM):
                try:
                    loop.add_signal_handler(sig, on_signal, sig)
                    signal.signal(sig, abort_renders)
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
        except KeyboardInterrupt:  # a Ctrl-C before the handlers were in place
            caught.append("SIGINT")
    if show:
        c = runner.counts
        console.print(f"rated {sum(c.values())}: ok {c['ok']}, unparsed {c['unparsed']}, failed {c['failed']} "
                      f"({runner.attempts} calls)", highlight=False)
    return runner, (caught[0] if caught else None)


def notices(summary: dict[str, Any]) -> list[str]:
    """Lines the CLI prints on stderr after a run whatever its exit status: with --logprobs,
    the answered calls that came back without logprobs (naming the endpoint: no distribution
    was stored for them) and the calls the endpoint refused for asking logprobs; the answers
    whose stored text had characters replaced (``raw_output_replaced``); the rows of the selection
    that another worker still holds ('running' in ``totals``) or that are pending again (handed
    back by, or taken back from, another worker after this run's last claim) when the run ends;
    nothing of that for a run that was itself interrupted (its own message says what to do)."""
    lp = summary.get("logprobs") or {}
    out = []
    answered = lp.get("with", 0) + lp.get("without", 0)
    if lp.get("without"):
        out.append(f"warning: the endpoint {summary['endpoint']} returned no logprobs for {lp['without']} of {answered} "
                   "answered call(s): no distribution or expected score was stored for them (the server does not "
                   "support logprobs, or ignores them: OpenAI and vLLM return them, `transformers serve` does not; "
                   "`rate --local` reads the local model's distribution without a server)")
    if lp.get("dropped"):
        out.append(f"warning: the endpoint {summary['endpoint']} returned {lp['dropped']} logprobs token(s) or "
                   "alternative(s) that are not a text token with a finite log-probability <= 0 (NaN, a positive "
                   "log-probability, a number as the token): they were left out of the distributions, which were "
                   "normalised over the rest")
    if lp.get("refused"):
        out.append(f"warning: the endpoint {summary['endpoint']} refused {lp['refused']} call(s) for asking logprobs "
                   f"(top_logprobs {lp.get('top_logprobs')}): try a smaller --top-logprobs, or rate without --logprobs")
    totals = summary.get("totals") or {}
    if totals.get("running") and not summary.get("interrupted"):
        lease = summary.get("lease_s")
        out.append(f"note: {totals['running']} row(s) of this selection are being rated by another worker (a live "
                   "process of this host, or a claim of another host younger than the lease"
                   + (f" of {lease:g} s" if lease else "") + "): they are not stored yet, so a fit or report run now "
                   "leaves them out (it counts them as not finished); wait for that worker, then run the same command "
                   "again to see the totals")
    if totals.get("pending") and not summary.get("interrupted"):
        n, dead = totals["pending"], min(summary.get("released_after") or 0, totals["pending"])
        died = "claimed by a worker of this host that died during this run"
        back = "handed back by another worker after this run took its last batch"
        why = died if dead == n else f"{dead} {died}, the rest {back}" if dead else back
        out.append(f"note: {n} row(s) of this selection are still pending ({why}): they are not rated, so a fit or "
                   "report run now leaves them out; run the same command again to rate them")
    if summary.get("raw_output_replaced"):
        out.append(f"warning: the endpoint {summary['endpoint']} gave {summary['raw_output_replaced']} answer(s) or "
                   "error(s) holding a NUL character or an unpaired surrogate, which no database stores alike: the "
                   "answer was read as given, its stored raw output (or error) has U+FFFD in their place")
    return out


def exit_status(summary: dict[str, Any]) -> tuple[int, Optional[str]]:
    """The CLI's exit status and stderr line for a :func:`run_rate` summary: 128 + the signal
    number when a signal interrupted the run (130 Ctrl-C, 143 SIGTERM); 1 when a row of this
    run failed (the endpoint failed the call, or the template failed on the row); else 0."""
    sig = summary.get("interrupted")
    if sig:
        back = summary.get("handed_back", 0)
        return 128 + int(getattr(signal, sig)), (f"interrupted by {sig}: finished results were written, {back} claimed "
                                                  "row(s) went back to 'pending'; run the same command again to go on")
    r, causes = summary["this_run"], summary.get("failed_by_cause", {})
    if not r["failed"]:
        return 0, None
    parts = [f"{n} {cause}" for cause, n in causes.items() if n]
    outage = summary.get("outage") or {}
    extra = (f"; the endpoint stayed unreachable after {outage['paused_s']:g} s of waiting ({outage.get('last_reason')})"
             if outage.get("gave_up") else "")
    export = "verdicts" if summary.get("mode") == "pairwise" else "ratings"  # pairwise rows are verdicts
    return 1, (f"error: {r['failed']} row(s) of this run failed ({', '.join(parts)}){extra}; the failed rows keep "
               f"the reason (`judgecal export {export}`), `--retry-failed` tries them again")
