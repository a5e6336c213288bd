"""Async client for any OpenAI-compatible chat-completions endpoint, built for throughput and
for never losing a call.

- Transport: ``openai.AsyncOpenAI`` with ``openai.DefaultAioHttpClient()`` (the
  ``openai[aiohttp]`` extra): ~620 calls/s on 2 cores against ~330 with the default httpx
  transport. Calls go through the SDK's generic ``post("/chat/completions", cast_to=object)``
  rather than the typed ``chat.completions.create``: the same client, auth, errors and
  timeouts, without the typed request transform and response model, ~1090 calls/s against
  ~690 on the same stub (docs/performance.md); the JSON answer is checked by hand.
- Endpoint and key follow the SDK's conventions: ``OPENAI_BASE_URL``, ``OPENAI_API_KEY``;
  ``base_url=`` overrides. No key at all -> the placeholder ``"EMPTY"`` (local servers).
  Credentials in the URL (``http://user:pw@host/v1``) are sent as HTTP Basic auth
  (:func:`url_credentials`), never stored.
- The SDK's own retries are off (``max_retries=0``); :meth:`JudgeClient.complete` retries
  itself: up to ``max_attempts`` attempts (default 4) with exponential backoff and full jitter
  (``uniform(0, min(backoff_max, backoff_base * 2**(attempt-1)))``, the AWS "full jitter"
  scheme) on 408/409/429/5xx, timeouts and connection errors; a ``Retry-After`` header
  (seconds or an HTTP date, RFC 9110 section 10.2.3) replaces the backoff, capped at
  ``retry_after_max``. Other 4xx (bad request, auth, unknown model) fail at once.
- A malformed JSON body or an empty ``choices`` list is a failure that is retried once (a
  flaky proxy usually recovers; a server that always does it should not cost 4 attempts).
- Per-attempt timeout ``timeout`` seconds (default 60) enforced by ``asyncio.timeout``
  (``asyncio.wait_for`` on Python 3.10) whatever the transport does. Concurrency bounded by an ``asyncio.Semaphore`` held only
  during an attempt, not during the backoff sleep.
- After the cap, :meth:`complete` returns a failed :class:`CallResult` with the reason; it
  never raises for an endpoint problem. Every error text is passed through :func:`sanitize`,
  so the API key never reaches a message, log line or stored row.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import math
import os
import random
import re
import time
from dataclasses import dataclass
from typing import Any, Optional

import openai

from judgecal.errors import UsageError
from judgecal.secrets import endpoint_without_secrets

DEFAULT_BASE_URL = "https://api.openai.com/v1"
PLACEHOLDER_KEY = "EMPTY"
_timeout = getattr(asyncio, "timeout", None)
RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}
_KEY_RE = re.compile(r"(sk-[A-Za-z0-9_\-]{4,}|Bearer\s+[A-Za-z0-9_\-.=]{8,})")


def sanitize(text: str, secrets: tuple[str, ...] = ()) -> str:
    """``text`` with each secret replaced by ``***`` and anything shaped like an API key
    (``sk-...``, ``Bearer ...``) masked too."""
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, "***")
    return _KEY_RE.sub("***", text)


_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def storable(text: str) -> tuple[str, int]:
    """(``text`` with each character that no database stores alike replaced by U+FFFD, the
    number replaced): NUL (PostgreSQL refuses it in text) and an unpaired surrogate (not
    UTF-8; a Python str from JSON can hold one). For what an endpoint answers: the answer was
    parsed before this, the stored copy is what changes."""
    return _UNSTORABLE.subn("\ufffd", text)


def public_endpoint(url: str) -> str:
    """The endpoint URL as it is stored and shown: :func:`judgecal.secrets.endpoint_without_secrets`
    (credentials, query string and fragment dropped, trailing slash removed, an IPv6 host kept
    in brackets)."""
    return endpoint_without_secrets(url)


def url_credentials(url: str) -> tuple[str, Optional[dict[str, str]]]:
    """(``url`` without ``user:password@``, the HTTP headers that carry them) for an endpoint
    URL such as ``http://user:pw@host/v1``: the credentials become HTTP Basic authentication
    (RFC 7617: ``Authorization: Basic base64(user:password)``, percent-escapes decoded first),
    as curl and httpx read them; the OpenAI SDK drops the userinfo of its base URL, so without
    this every call went out unauthenticated. ``(url, None)`` when the URL holds none. The
    header replaces the SDK's ``Bearer`` API key (one Authorization header per request). The
    credentials are never stored: the stored endpoint is :func:`public_endpoint`'s."""
    import base64
    from urllib.parse import unquote, urlsplit, urlunsplit

    try:
        parts = urlsplit(url)
        user, password = parts.username, parts.password
    except ValueError:
        return url, None
    if user is None and password is None:
        return url, None
    host = parts.netloc.rsplit("@", 1)[1]
    token = base64.b64encode(f"{unquote(user or '')}:{unquote(password or '')}".encode("utf-8")).decode("ascii")
    return urlunsplit(parts._replace(netloc=host)), {"Authorization": f"Basic {token}"}


def resolve_base_url(base_url: Optional[str] = None) -> str:
    """``base_url``, else ``OPENAI_BASE_URL``, else the OpenAI API URL."""
    return base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL


def resolve_api_key(api_key: Optional[str] = None) -> str:
    """``api_key``, else ``OPENAI_API_KEY``, else the placeholder ``"EMPTY"``."""
    return api_key or os.environ.get("OPENAI_API_KEY") or PLACEHOLDER_KEY


@dataclass
class CallResult:
    """One logical call after its retries.

    ``status``: 'ok' (``text`` set) or 'failed' (``error`` says why). ``attempts``: HTTP
    attempts made (>= 1). ``latency_s``: seconds of the last attempt. Token counts as the
    endpoint reported them (None when it did not). ``logprobs``: the chosen message's
    ``logprobs.content`` as plain dicts when requested and returned."""

    status: str
    text: Optional[str] = None
    error: Optional[str] = None
    attempts: int = 0
    latency_s: Optional[float] = None
    prompt_tokens: Optional[int] = None
    completion_tokens: Optional[int] = None
    logprobs: Optional[list[dict[str, Any]]] = None
    logprobs_dropped: int = 0  # tokens or alternatives left out: not a text token with a finite log-probability <= 0


class _BadBody(Exception):
    pass


def retry_after_seconds(headers: Any, now: Optional[float] = None) -> Optional[float]:
    """Seconds to wait from a ``Retry-After`` header value (delta-seconds or HTTP date), or
    None when absent or unreadable. Negative waits become 0."""
    if headers is None:
        return None
    value = headers.get("retry-after") if hasattr(headers, "get") else None
    if value is None:
        return None
    value = str(value).strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def _read_completion(resp: Any, latency: float, want_logprobs: bool) -> CallResult:
    """A chat-completions JSON answer (a dict) -> an ok CallResult. Raises _BadBody when it
    is not a JSON object, has no ``choices``, or no string message content."""
    if not isinstance(resp, dict):
        raise _BadBody(f"the endpoint answered with {type(resp).__name__}, not a JSON object: {str(resp)[:120]!r}")
    choices = resp.get("choices")
    if not choices or not isinstance(choices, list) or not isinstance(choices[0], dict):
        raise _BadBody("the endpoint answered with an empty 'choices' list" if isinstance(choices, list)
                       else "the endpoint answered without a 'choices' list")
    message = choices[0].get("message")
    text = message.get("content") if isinstance(message, dict) else None
    if not isinstance(text, str):
        raise _BadBody("the endpoint answered with no message content")
    usage = resp.get("usage") if isinstance(resp.get("usage"), dict) else {}
    lp, dropped = None, 0
    logprobs = choices[0].get("logprobs")
    content = logprobs.get("content") if want_logprobs and isinstance(logprobs, dict) else None
    if isinstance(content, list) and content:
        lp = []
        for t in content:
            if not _usable_logprob(t):
                dropped += 1
                continue
            top = t.get("top_logprobs")
            alts = [a for a in top if _usable_logprob(a)] if isinstance(top, list) else []
            dropped += (len(top) if isinstance(top, list) else 0) - len(alts)
            lp.append({"token": t["token"], "logprob": float(t["logprob"]),
                       "top_logprobs": [{"token": a["token"], "logprob": float(a["logprob"])} for a in alts]})
        lp = lp or None
    return CallResult(status="ok", text=text, latency_s=latency, logprobs=lp, logprobs_dropped=dropped,
                      prompt_tokens=_int_or_none(usage.get("prompt_tokens")),
                      completion_tokens=_int_or_none(usage.get("completion_tokens")))


def _usable_logprob(entry: Any) -> bool:
    """Whether a logprobs entry can be read: an object with a text ``token`` and a ``logprob``
    that is a finite number <= 0 nats (a probability <= 1; 1e-6 of rounding allowed). NaN, a
    positive log-probability, a number as the token: left out and counted
    (:attr:`CallResult.logprobs_dropped`), never read as a probability."""
    if not isinstance(entry, dict) or not isinstance(entry.get("token"), str):
        return False
    lp = entry.get("logprob")
    return isinstance(lp, (int, float)) and not isinstance(lp, bool) and math.isfinite(lp) and lp <= 1e-6


def _connection_failure(exc: BaseException) -> Optional[str]:
    """The reason when a "timeout" is really a failed connection: the aiohttp transport reports
    a refused or unreachable host as a connect timeout (httpx ConnectTimeout -> the SDK's
    APITimeoutError) within milliseconds. Walks the cause chain for an OSError that is not a
    timeout; None for a genuine timeout."""
    seen = 0
    cause: Optional[BaseException] = exc
    while cause is not None and seen < 10:
        if isinstance(cause, OSError) and not isinstance(cause, TimeoutError):
            return f"{type(cause).__name__}: {cause}"
        cause = cause.__cause__ or cause.__context__
        seen += 1
    return None


MIN_TOP_LOGPROBS, MAX_TOP_LOGPROBS = 1, 20  # the chat-completions API's range is 0..20; 0 lists no alternative


def check_top_logprobs(n: Any) -> None:
    """Raise UsageError unless ``n`` is an integer the chat-completions API accepts for
    ``top_logprobs`` and that lists at least one alternative: 1..20 (OpenAI refuses more
    than 20; 0 would return no distribution)."""
    if isinstance(n, bool) or not isinstance(n, int) or not MIN_TOP_LOGPROBS <= n <= MAX_TOP_LOGPROBS:
        raise UsageError(f"--top-logprobs must be an integer from {MIN_TOP_LOGPROBS} to {MAX_TOP_LOGPROBS} (the chat-completions "
                         f"API returns at most {MAX_TOP_LOGPROBS} alternatives; 0 would give no distribution), got {n!r}")


#: the largest token count stored (an int column on both dialects: PostgreSQL's int4)
MAX_TOKENS_STORED = 2**31 - 1


def _int_or_none(value: Any) -> Optional[int]:
    """A usage count the endpoint reported, when it is one: an integer from 0 to
    :data:`MAX_TOKENS_STORED`; anything else (a float, text, a boolean, a negative or huge
    number) is None, stored as NULL (the rating itself is kept)."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_TOKENS_STORED:
        return value
    return None


class JudgeClient:
    """Bounded, retried chat completions against one endpoint and model.

    Use as ``async with JudgeClient(...) as c: result = await c.complete(messages)``.
    ``temperature``/``max_tokens`` are sent with every call; ``logprobs=True`` adds
    ``logprobs=True, top_logprobs=<top_logprobs>`` (default 20, the most OpenAI returns;
    not every server supports it: see :data:`MAX_TOP_LOGPROBS`)."""

    def __init__(
        self,
        model: str,
        *,
        base_url: Optional[str] = None,
        api_key: Optional[str] = None,
        concurrency: int = 16,
        timeout: float = 60.0,
        max_attempts: int = 4,
        temperature: float = 0.0,
        max_tokens: int = 512,
        logprobs: bool = False,
        top_logprobs: int = 20,
        backoff_base: float = 0.5,
        backoff_max: float = 30.0,
        retry_after_max: float = 120.0,
        extra_body: Optional[dict[str, Any]] = None,
        transport: str = "aiohttp",
    ):
        if max_attempts < 1:
            raise ValueError("max_attempts must be >= 1")
        check_top_logprobs(top_logprobs)
        self.model = model
        self.base_url = resolve_base_url(base_url)
        self._key = resolve_api_key(api_key)
        self.endpoint = public_endpoint(self.base_url)
        self.timeout = float(timeout)
        self.max_attempts = int(max_attempts)
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.logprobs = logprobs
        self.top_logprobs = int(top_logprobs)
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.retry_after_max = retry_after_max
        self.extra_body = extra_body
        self.concurrency = int(concurrency)
        self._sem = asyncio.Semaphore(self.concurrency)
        http_client = openai.DefaultAioHttpClient() if transport == "aiohttp" else None
        # credentials in the URL (http://user:pw@host/v1) go as HTTP Basic auth (url_credentials)
        plain_url, auth_headers = url_credentials(self.base_url)
        self._url_secrets: tuple[str, ...] = ()
        if auth_headers:  # the password and its Basic token never reach a message
            from urllib.parse import unquote, urlsplit

            self._url_secrets = tuple(x for x in (auth_headers["Authorization"].split(" ", 1)[1],
                                                  unquote(urlsplit(self.base_url).password or "")) if x)
        self._client = openai.AsyncOpenAI(
            base_url=plain_url, api_key=self._key, max_retries=0, timeout=self.timeout, http_client=http_client,
            default_headers=auth_headers,
        )
        self.total_attempts = 0

    async def __aenter__(self) -> "JudgeClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the HTTP connections."""
        await self._client.close()

    def _clean(self, text: str) -> str:
        return sanitize(text, (self._key, *self._url_secrets))

    def _backoff(self, attempt: int) -> float:
        return random.uniform(0, min(self.backoff_max, self.backoff_base * 2 ** (attempt - 1)))

    async def _attempt(self, messages: list[dict[str, str]]) -> CallResult:
        body: dict[str, Any] = {"model": self.model, "messages": messages, "temperature": self.temperature,
                                "max_tokens": self.max_tokens}
        if self.logprobs:
            body.update(logprobs=True, top_logprobs=self.top_logprobs)
        if self.extra_body:
            body.update(self.extra_body)
        start = time.perf_counter()
        # The SDK's generic request method (its documented route for any endpoint): same client,
        # auth, base URL, timeouts and error types as chat.completions.create, without the
        # typed request transform and response model that cost ~40% of the client's CPU per
        # call (docs/performance.md); the JSON answer is checked by _read_completion.
        call = self._client.post("/chat/completions", cast_to=object, body=body)
        if _timeout is not None:  # Python >= 3.11: no extra task per call (asyncio.wait_for makes one)
            async with _timeout(self.timeout):
                resp = await call
        else:
            resp = await asyncio.wait_for(call, self.timeout)
        latency = time.perf_counter() - start
        return _read_completion(resp, latency, self.logprobs)

    async def unreachable(self, timeout: float = 10.0) -> Optional[str]:
        """Probe the endpoint with ``GET <base_url>/models``: None when it answers HTTP at all
        (any status, any body: the server is up), else the sanitised reason it could not be
        reached (refused or dropped connection, no answer within ``timeout`` seconds). Used
        to tell an endpoint that is down from a call that failed on its own. Never raises
        but for cancellation."""
        call = self._client.get("/models", cast_to=object)
        try:
            if _timeout is not None:
                async with _timeout(timeout):
                    await call
            else:
                await asyncio.wait_for(call, timeout)
        except asyncio.CancelledError:
            raise
        except openai.APIStatusError:
            return None
        except (asyncio.TimeoutError, openai.APITimeoutError) as exc:
            refused = _connection_failure(exc)
            return self._clean(refused)[:300] if refused else f"no answer within {timeout:g} s"
        except openai.APIConnectionError as exc:
            return self._clean(str(_connection_failure(exc) or exc))[:300]
        except Exception:  # noqa: BLE001 - it answered something: it is up
            return None
        return None

    async def complete(self, messages: list[dict[str, str]]) -> CallResult:
        """One logical call with retries; never raises for endpoint problems (returns a
        failed CallResult with a sanitised reason). Cancellation propagates."""
        bad_bodies = 0
        attempt = 0
        last_error = "no attempt made"
        while attempt < self.max_attempts:
            attempt += 1
            wait: Optional[float] = None
            async with self._sem:
                self.total_attempts += 1
                try:
                    result = await self._attempt(messages)
                    result.attempts = attempt
                    return result
                except asyncio.CancelledError:
                    raise
                except (asyncio.TimeoutError, openai.APITimeoutError) as exc:
                    refused = _connection_failure(exc)
                    last_error = (f"connection error: {self._clean(refused)[:300]}" if refused
                                  else f"timeout after {self.timeout:g} s")
                except openai.APIStatusError as exc:
                    code = exc.status_code
                    last_error = f"HTTP {code}: {self._clean(str(exc))[:300]}"
                    if code not in RETRY_STATUS and code < 500:
                        return CallResult(status="failed", error=last_error, attempts=attempt)
                    ra = retry_after_seconds(getattr(exc.response, "headers", None))
                    if ra is not None:
                        wait = min(ra, self.retry_after_max) + random.uniform(0, 0.1)
                except openai.APIConnectionError as exc:
                    last_error = f"connection error: {self._clean(str(exc))[:300]}"
                except (_BadBody, json.JSONDecodeError, openai.APIResponseValidationError, UnicodeDecodeError) as exc:
                    kind = "malformed JSON body" if isinstance(exc, (json.JSONDecodeError, UnicodeDecodeError)) else "unusable body"
                    last_error = f"{kind}: {self._clean(str(exc))[:300]}"
                    bad_bodies += 1
                    if bad_bodies > 1:
                        break
                except Exception as exc:  # noqa: BLE001 - an unexpected client error must not kill the run
                    last_error = f"{type(exc).__name__}: {self._clean(str(exc))[:300]}"
                    return CallResult(status="failed", error=last_error, attempts=attempt)
            if attempt < self.max_attempts:
                await asyncio.sleep(wait if wait is not None else self._backoff(attempt))
        tries = f"{attempt} attempt" + ("s" if attempt != 1 else "")
        return CallResult(status="failed", error=f"{last_error} (after {tries})", attempts=attempt)
