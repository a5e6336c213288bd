"""The async judge client against the stub OpenAI-compatible server: retries, Retry-After,
timeouts, malformed bodies, bounded attempts, secrets never leaked."""

from __future__ import annotations

import asyncio
import email.utils
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from stub_openai import StubServer  # noqa: E402

from judgecal.judge.client import JudgeClient, public_endpoint, resolve_api_key, retry_after_seconds, sanitize

MSG = [{"role": "user", "content": "Rate this."}]


def run(coro):
    return asyncio.run(coro)


async def _calls(url, messages_list, **kw):
    kw.setdefault("backoff_base", 0.01)
    kw.setdefault("api_key", "sk-test-SECRET")
    async with JudgeClient("stub-judge", base_url=url, **kw) as c:
        return await asyncio.gather(*(c.complete(m) for m in messages_list)), c.total_attempts


def test_ok_call_records_usage_and_latency():
    with StubServer(latency=0.05) as s:
        (res,), n = run(_calls(s.base_url, [MSG]))
    assert res.status == "ok" and res.text.endswith("Rating: [[7]]")
    assert res.attempts == 1 and n == 1
    assert res.latency_s >= 0.05
    assert res.prompt_tokens == 2 and res.completion_tokens == 6  # stub counts whitespace words: "The response is adequate. Rating: [[7]]"
    assert s.bodies[0]["max_tokens"] == 512 and s.bodies[0]["temperature"] == 0.0
    assert "logprobs" not in s.bodies[0]


def test_500_then_429_then_ok_honours_retry_after():
    with StubServer(script=["500", "429", "ok"], retry_after=0.4) as s:
        t0 = time.perf_counter()
        (res,), n = run(_calls(s.base_url, [MSG], concurrency=1))
        elapsed = time.perf_counter() - t0
    assert res.status == "ok" and res.attempts == 3 and n == 3 and s.requests == 3
    assert elapsed >= 0.4  # the backoff alone (base 0.01 s) would be far shorter


def test_retry_after_http_date_and_seconds():
    now = 1_700_000_000.0
    date = email.utils.formatdate(now + 7, usegmt=True)
    assert retry_after_seconds({"retry-after": date}, now=now) == pytest.approx(7.0)
    assert retry_after_seconds({"retry-after": "3"}) == 3.0
    assert retry_after_seconds({"retry-after": "1.5"}) == 1.5
    assert retry_after_seconds({"retry-after": email.utils.formatdate(now - 60, usegmt=True)}, now=now) == 0.0
    assert retry_after_seconds({"retry-after": "soon"}) is None
    assert retry_after_seconds({}) is None


def test_attempts_are_capped_and_failure_has_a_reason():
    with StubServer(script=["503"] * 10) as s:
        (res,), n = run(_calls(s.base_url, [MSG], max_attempts=3))
    assert res.status == "failed" and res.attempts == 3 and s.requests == 3
    assert "HTTP 503" in res.error and "after 3 attempts" in res.error


def test_hang_past_timeout_fails_after_cap():
    with StubServer(script=["hang"] * 5, hang_s=5) as s:
        t0 = time.perf_counter()
        (res,), _ = run(_calls(s.base_url, [MSG], timeout=0.3, max_attempts=2))
        elapsed = time.perf_counter() - t0
    assert res.status == "failed" and res.attempts == 2 and s.requests == 2
    assert "timeout after 0.3 s" in res.error
    assert elapsed < 8.0  # two 5 s hangs would take 10 s: the 0.3 s timeout cut both


def test_malformed_and_empty_are_retried_once():
    with StubServer(script=["malformed", "ok"]) as s:
        (res,), _ = run(_calls(s.base_url, [MSG], concurrency=1))
    assert res.status == "ok" and res.attempts == 2
    with StubServer(script=["empty", "malformed", "ok"]) as s:
        (res,), _ = run(_calls(s.base_url, [MSG], concurrency=1))
    assert res.status == "failed" and res.attempts == 2 and s.requests == 2
    assert "malformed JSON" in res.error


def test_client_errors_are_not_retried():
    with StubServer(script=["400", "ok"]) as s:
        (res,), _ = run(_calls(s.base_url, [MSG]))
    assert res.status == "failed" and res.attempts == 1 and s.requests == 1 and "HTTP 400" in res.error


def test_mixed_faults_nothing_lost_and_bounded():
    faults = ["500", "429", "hang", "malformed", "empty", "close", "ok", "503"]
    messages = [[{"role": "user", "content": f"item {i} {{fault:{faults[i % len(faults)]}}}"}] for i in range(40)]
    # a timeout far above a loaded machine's answer time: only the hangs outlast it
    with StubServer(hang_s=5, retry_after=0.05) as s:
        results, attempts = run(_calls(s.base_url, messages, concurrency=8, timeout=2.0, max_attempts=3))
    assert len(results) == 40
    for i, r in enumerate(results):
        fault = faults[i % len(faults)]
        if fault == "ok":
            assert r.status == "ok" and r.attempts == 1
        else:  # the marker makes every attempt fail the same way
            assert r.status == "failed" and r.error, (fault, r)
            assert r.attempts == (2 if fault in ("malformed", "empty") else 3), (fault, r)
    assert attempts == s.requests <= 40 * 3


def test_logprobs_requested_only_when_asked():
    with StubServer() as s:
        (res,), _ = run(_calls(s.base_url, [MSG], logprobs=True))
    assert s.bodies[0]["logprobs"] is True and s.bodies[0]["top_logprobs"] == 20  # the most the API returns (issue 22)
    verdict = [t for t in res.logprobs if t["top_logprobs"]]
    assert verdict[0]["token"] == "7" and {a["token"] for a in verdict[0]["top_logprobs"]} == {"7", "8", "x"}


def test_secret_never_in_errors(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-SECRET")
    with StubServer(script=["echoauth"]) as s:
        (res,), _ = run(_calls(s.base_url, [MSG], api_key=None))
    assert "Bearer sk-test-SECRET" in s.auth  # the key was really sent
    assert res.status == "failed" and "HTTP 401" in res.error
    assert "SECRET" not in res.error and "***" in res.error
    # a connection error to a closed port
    (res,), _ = run(_calls("http://127.0.0.1:9/v1", [MSG], api_key=None, max_attempts=1))
    assert res.status == "failed" and "SECRET" not in res.error


def test_key_and_endpoint_helpers(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert resolve_api_key() == "EMPTY"
    assert public_endpoint("https://user:pw@example.com:8443/v1/?api-key=abc") == "https://example.com:8443/v1"
    assert sanitize("key sk-test-SECRET and Bearer abcdefghijkl", ("sk-test-SECRET",)) == "key *** and ***"


def test_read_completion_checks_the_json_answer():
    from judgecal.judge.client import _BadBody, _read_completion

    ok = {"choices": [{"message": {"content": "[[7]]"},
                       "logprobs": {"content": [{"token": "7", "logprob": -0.1,
                                                 "top_logprobs": [{"token": "7", "logprob": -0.1},
                                                                  {"token": "8", "logprob": -2.4}]}]}}],
          "usage": {"prompt_tokens": 120, "completion_tokens": 5}}
    r = _read_completion(ok, 0.25, want_logprobs=True)
    assert (r.status, r.text, r.prompt_tokens, r.completion_tokens, r.latency_s) == ("ok", "[[7]]", 120, 5, 0.25)
    assert r.logprobs == [{"token": "7", "logprob": -0.1, "top_logprobs": [{"token": "7", "logprob": -0.1},
                                                                           {"token": "8", "logprob": -2.4}]}]
    assert _read_completion(ok, 0.1, want_logprobs=False).logprobs is None
    odd_usage = {"choices": [{"message": {"content": "x"}}], "usage": {"prompt_tokens": True, "completion_tokens": "5"}}
    r = _read_completion(odd_usage, 0.1, want_logprobs=False)
    assert (r.prompt_tokens, r.completion_tokens) == (None, None)
    for bad, why in [("<html>busy</html>", "not a JSON object"), ({"error": "x"}, "without a 'choices' list"),
                     ({"choices": []}, "empty 'choices'"), ({"choices": [{"message": {"content": None}}]}, "no message content"),
                     ({"choices": [{"message": "hi"}]}, "no message content"), ({"choices": ["x"]}, "choices")]:
        with pytest.raises(_BadBody, match=why):
            _read_completion(bad, 0.1, want_logprobs=False)


def test_refused_connection_is_a_connection_error_not_a_timeout():
    """The aiohttp transport reports a refused connection as a connect timeout within ms."""
    import asyncio
    import socket

    from judgecal.judge.client import JudgeClient

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]

    async def go():
        async with JudgeClient("m", base_url=f"http://127.0.0.1:{port}/v1", timeout=30, max_attempts=2,
                               backoff_base=0.01) as c:
            return await c.complete([{"role": "user", "content": "hi"}])

    res = asyncio.run(go())
    assert res.status == "failed" and res.attempts == 2
    assert res.error.startswith("connection error:") and "timeout" not in res.error, res.error
