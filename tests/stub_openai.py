"""A stub OpenAI-compatible server (aiohttp) on 127.0.0.1 for tests and benchmarks.

Endpoints: ``POST /v1/chat/completions``, ``POST /v1/completions``, ``GET /v1/models``,
``GET /stats`` (request counts as JSON).

Faults, per request (first match wins):
1. a marker ``{fault:NAME}`` anywhere in the request's messages/prompt (so a given response
   text always faults, whatever the order of requests);
2. ``script``: a dict {request index (0-based, over all chat/completions requests): NAME} or a
   list of NAMEs consumed in order (``ok`` = no fault).
NAMEs: ``500``, any other HTTP status number (``400``, ``503``...), ``echoauth`` (401 whose
message repeats the Authorization header), ``429`` (Retry-After: ``retry_after`` seconds), ``429date`` (Retry-After as an
HTTP date), ``hang`` (sleeps ``hang_s``, past the client's timeout), ``malformed`` (200 with a
body that is not JSON), ``empty`` (200 with ``choices: []``), ``close`` (drops the connection).

Answers: ``answer`` (default ``"The response is adequate.\\nRating: [[7]]"``); a marker
``{answer:TEXT}`` in the request overrides it. With ``logprobs: true`` the answer comes with
per-token logprobs: the digit (or the pairwise letter A/B/C) after ``[[`` gets ``top_logprobs``
from ``verdict_top``.

Use in-process (``with StubServer(latency=0.05) as s: s.base_url``) or as a process:
``python tests/stub_openai.py --port 0 --latency 0.05`` prints ``PORT <n>`` then serves.
"""

from __future__ import annotations

import argparse
import asyncio
import email.utils
import json
import math
import re
import threading
import time
from collections import Counter
from typing import Any

from aiohttp import web

DEFAULT_ANSWER = "The response is adequate.\nRating: [[7]]"
_FAULT_RE = re.compile(r"\{fault:([a-z0-9]+)\}")
_ANSWER_RE = re.compile(r"\{answer:([^}]*)\}")
_TOKEN_RE = re.compile(r"\s*\[\[|\]\]|\d|\s*\w+|\s*[^\w\s]|\s+")


class StubServer:
    """The stub server; see the module doc. Attributes after start: ``port``, ``base_url``
    (``http://127.0.0.1:PORT/v1``). ``counts``: Counter of fault names served (``ok``
    included), ``requests``: total requests to the completion endpoints, ``bodies``: the last
    JSON bodies received (up to ``keep_bodies``), ``auth``: Authorization headers seen.
    ``require_auth``: the Authorization header every completion call must carry (else 401,
    counted in ``unauthorised``), for a server behind HTTP Basic auth."""

    def __init__(
        self,
        *,
        latency: float = 0.0,
        answer: str = DEFAULT_ANSWER,
        script: dict[int, str] | list[str] | None = None,
        retry_after: float = 1,
        hang_s: float = 30.0,
        verdict_top: dict[str, float] | None = None,
        keep_bodies: int = 50,
        port: int = 0,
        require_auth: str | None = None,
    ):
        self.latency = latency
        self.answer = answer
        self.script = script
        self.retry_after = retry_after
        self.hang_s = hang_s
        self.verdict_top = verdict_top or {"7": math.log(0.6), "8": math.log(0.3), "x": math.log(0.1)}
        self.keep_bodies = keep_bodies
        self.port = port
        self.require_auth = require_auth  # an Authorization header every call must carry, else 401
        self.unauthorised = 0
        self.requests = 0
        self.counts: Counter[str] = Counter()
        self.bodies: list[dict] = []
        self.auth: set[str] = set()
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None

    # -- app ----------------------------------------------------------------------------
    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_post("/v1/completions", self._completions)
        app.router.add_get("/v1/models", self._models)
        app.router.add_get("/stats", self._stats)
        return app

    def _fault_for(self, body_text: str) -> tuple[int, str]:
        with self._lock:
            index = self.requests
            self.requests += 1
        marker = _FAULT_RE.search(body_text)
        if marker:
            return index, marker.group(1)
        if isinstance(self.script, dict):
            return index, self.script.get(index, "ok")
        if isinstance(self.script, list) and index < len(self.script):
            return index, self.script[index]
        return index, "ok"

    async def _common(self, request: web.Request) -> tuple[dict | None, str, web.StreamResponse | None]:
        raw = await request.text()
        try:
            body = json.loads(raw)
        except json.JSONDecodeError:
            return None, "bad", web.json_response({"error": {"message": "bad JSON"}}, status=400)
        self.auth.add(request.headers.get("Authorization", ""))
        if self.require_auth is not None and request.headers.get("Authorization") != self.require_auth:
            self.unauthorised += 1
            return body, "401", web.json_response({"error": {"message": "authentication required"}}, status=401,
                                                  headers={"WWW-Authenticate": 'Basic realm="stub"'})
        if len(self.bodies) < self.keep_bodies:
            self.bodies.append(body)
        _, fault = self._fault_for(raw)
        with self._lock:
            self.counts[fault] += 1
        if self.latency:
            await asyncio.sleep(self.latency)
        if fault == "500":
            return body, fault, web.json_response({"error": {"message": "internal error", "type": "server_error"}}, status=500)
        if fault == "429":
            return body, fault, web.json_response(
                {"error": {"message": "rate limited", "type": "rate_limit"}}, status=429,
                headers={"Retry-After": str(self.retry_after)})
        if fault == "429date":
            when = email.utils.formatdate(time.time() + self.retry_after, usegmt=True)
            return body, fault, web.json_response({"error": {"message": "rate limited"}}, status=429, headers={"Retry-After": when})
        if fault == "echoauth":  # a careless server that echoes the credentials in its error
            auth = request.headers.get("Authorization", "")
            return body, fault, web.json_response({"error": {"message": f"invalid key {auth}"}}, status=401)
        if fault.isdigit():
            return body, fault, web.json_response({"error": {"message": f"stub status {fault}"}}, status=int(fault))
        if fault == "hang":
            await asyncio.sleep(self.hang_s)
        if fault == "malformed":
            return body, fault, web.Response(text='{"id": "x", "choices": [{"mess', content_type="application/json")
        if fault == "empty":
            return body, fault, web.json_response({"id": "stub", "object": "chat.completion", "created": 0,
                                                   "model": body.get("model", "stub"), "choices": []})
        if fault == "close":
            assert request.transport is not None
            request.transport.close()
            return body, fault, web.Response(status=500)
        return body, fault, None

    def _answer(self, raw: str) -> str:
        m = _ANSWER_RE.search(raw)
        return m.group(1).replace("\\n", "\n") if m else self.answer

    def _logprobs(self, text: str) -> dict[str, Any]:
        content = []
        prev = ""
        for tok in _TOKEN_RE.findall(text):
            top: list[dict[str, Any]] = []
            lp = -0.05
            if prev.strip() == "[[" and (tok.isdigit() or tok in ("A", "B", "C")):
                top = [{"token": t, "logprob": v, "bytes": list(t.encode())} for t, v in self.verdict_top.items()]
                lp = self.verdict_top.get(tok, -5.0)
            content.append({"token": tok, "logprob": lp, "bytes": list(tok.encode()), "top_logprobs": top})
            prev = tok
        return {"content": content, "refusal": None}

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        body, fault, early = await self._common(request)
        if early is not None:
            return early
        assert body is not None
        raw = json.dumps(body.get("messages", []))
        text = self._answer(raw)
        choice: dict[str, Any] = {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
        if body.get("logprobs"):
            choice["logprobs"] = self._logprobs(text)
        prompt_tokens = sum(len(str(m.get("content", "")).split()) for m in body.get("messages", []))
        return web.json_response({
            "id": "chatcmpl-stub", "object": "chat.completion", "created": int(time.time()),
            "model": body.get("model", "stub"), "choices": [choice],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": len(text.split()),
                      "total_tokens": prompt_tokens + len(text.split())},
        })

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        body, fault, early = await self._common(request)
        if early is not None:
            return early
        assert body is not None
        prompt = body.get("prompt", "")
        prompts = prompt if isinstance(prompt, list) else [prompt]
        choices = []
        for i, p in enumerate(prompts):
            text = "" if body.get("max_tokens", 16) == 0 else self._answer(str(p))
            full = (str(p) if body.get("echo") else "") + text
            tokens = _TOKEN_RE.findall(full)
            offsets, pos = [], 0
            for t in tokens:
                offsets.append(pos)
                pos += len(t)
            logprobs = None
            if body.get("logprobs") is not None:
                # deterministic: -0.1 nats per character of the token
                lps = [-0.1 * len(t) for t in tokens]
                logprobs = {"tokens": tokens, "token_logprobs": [None] + lps[1:] if lps else [],
                            "top_logprobs": [{t: lp} for t, lp in zip(tokens, lps)], "text_offset": offsets}
            choices.append({"index": i, "text": full, "logprobs": logprobs, "finish_reason": "length"})
        return web.json_response({"id": "cmpl-stub", "object": "text_completion", "created": int(time.time()),
                                  "model": body.get("model", "stub"), "choices": choices,
                                  "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})

    async def _models(self, request: web.Request) -> web.StreamResponse:
        return web.json_response({"object": "list", "data": [{"id": "stub", "object": "model", "owned_by": "stub"}]})

    async def _stats(self, request: web.Request) -> web.StreamResponse:
        return web.json_response({"requests": self.requests, "counts": dict(self.counts)})

    # -- lifecycle ----------------------------------------------------------------------
    async def _start(self) -> None:
        self._runner = web.AppRunner(self.app(), access_log=None, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self.port, backlog=1024)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> "StubServer":
        """Serve in a background thread (own event loop); returns once listening."""
        ready = threading.Event()
        errors: list[BaseException] = []

        def run() -> None:
            self._loop = asyncio.new_event_loop()
            asyncio.set_event_loop(self._loop)
            try:
                self._loop.run_until_complete(self._start())
            except BaseException as exc:  # pragma: no cover - reported to the caller
                errors.append(exc)
                ready.set()
                return
            ready.set()
            self._loop.run_forever()
            pending = [t for t in asyncio.all_tasks(self._loop) if not t.done()]
            for task in pending:
                task.cancel()
            self._loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            self._loop.run_until_complete(self._runner.cleanup())  # type: ignore[union-attr]
            self._loop.close()

        self._thread = threading.Thread(target=run, name="stub-openai", daemon=True)
        self._thread.start()
        ready.wait(10)
        if errors:
            raise errors[0]
        return self

    def stop(self) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(10)

    def __enter__(self) -> "StubServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--latency", type=float, default=0.0)
    ap.add_argument("--answer", default=DEFAULT_ANSWER)
    ap.add_argument("--script", default=None, help="comma-separated fault names, consumed in order")
    ap.add_argument("--retry-after", type=float, default=1)
    args = ap.parse_args()
    server = StubServer(latency=args.latency, answer=args.answer, retry_after=args.retry_after,
                        script=args.script.split(",") if args.script else None, port=args.port)

    async def serve() -> None:
        await server._start()
        print(f"PORT {server.port}", flush=True)
        await asyncio.Event().wait()

    try:
        asyncio.run(serve())
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
