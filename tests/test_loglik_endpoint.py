"""The completions backend against a stub OpenAI-compatible server on 127.0.0.1 (aiohttp).

The stub tokenizes on word boundaries (each token = optional leading space + non-spaces) and
gives token i the log-probability -0.5 * len(token) (the first token null), so the expected
log-likelihood of any continuation is known by hand.
"""

from __future__ import annotations

import asyncio
import re
import socket
import threading

import pytest
from aiohttp import web

from judgecal.errors import EndpointError
from judgecal.loglik.endpoint import CompletionsScorer
from judgecal.loglik.score import score_task
from judgecal.loglik.tasks import McItem, McTask

TOKEN = re.compile(r"\s*\S+|\s+")


def _logprobs(prompt: str, mode: str) -> tuple[dict, int]:
    toks = TOKEN.findall(prompt)
    offs, o = [], 0
    for t in toks:
        offs.append(o)
        o += len(t)
    lps = [None] + [-0.5 * len(t) for t in toks[1:]]
    top = [None] + [{t: lp} for t, lp in zip(toks[1:], lps[1:])]
    n_prompt = len(toks)
    if mode == "short":  # a server that drops the last prompt log-probability
        toks, offs, lps, top = toks[:-1], offs[:-1], lps[:-1], top[:-1]
    if mode == "shifted":  # llama-cpp-python's echo: each position's top is the next token's distribution
        top = [None] + [{t: lp} for t, lp in zip(toks[2:] + ["<eos>"], lps[1:])]
    if mode == "noecho":
        toks, offs, lps, top = [], [], [], []
    toks, offs, lps, top = toks + [" X"], offs + [len(prompt)], lps + [-0.1], top + [{" X": -0.1}]
    return {"tokens": toks, "token_logprobs": lps, "text_offset": offs, "top_logprobs": top}, n_prompt


class Stub:
    def __init__(self, mode: str = "ok"):
        self.mode = mode
        self.requests: list[dict] = []
        self.loop = asyncio.new_event_loop()
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        self.port = s.getsockname()[1]
        s.close()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.ready = threading.Event()
        self.thread.start()
        self.ready.wait(10)

    async def handle(self, request):
        body = await request.json()
        self.requests.append(body)
        if self.mode == "single" and isinstance(body["prompt"], list) and len(body["prompt"]) > 1:
            return web.json_response({"error": {"message": ""}}, status=500)  # llama-cpp-python's assert
        prompts = body["prompt"] if isinstance(body["prompt"], list) else [body["prompt"]]
        choices, total = [], 0
        for i, p in enumerate(prompts):
            lp, n = _logprobs(p, self.mode)
            total += n
            choices.append({"index": i, "text": " X", "logprobs": lp, "finish_reason": "length"})
        return web.json_response({"id": "c", "object": "text_completion", "created": 0, "model": body["model"],
                                  "choices": choices,
                                  "usage": {"prompt_tokens": total, "completion_tokens": len(prompts),
                                            "total_tokens": total + len(prompts)}})

    def _run(self):
        asyncio.set_event_loop(self.loop)
        app = web.Application()
        app.router.add_post("/v1/completions", self.handle)
        self.runner = web.AppRunner(app)
        self.loop.run_until_complete(self.runner.setup())
        self.loop.run_until_complete(web.TCPSite(self.runner, "127.0.0.1", self.port).start())
        self.ready.set()
        self.loop.run_forever()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}/v1"

    def stop(self):
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(5)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


@pytest.fixture
def stub():
    servers = []

    def make(mode="ok"):
        servers.append(Stub(mode))
        return servers[-1]

    yield make
    for s in servers:
        s.stop()


def test_scores_known_values(stub):
    s = stub()
    sc = CompletionsScorer(s.url, "stub-model", api_key="k", max_retries=0)
    out = sc.score_pairs([("Question: sky?\nAnswer:", " blue sky"), ("Q  ", "long answer")])
    # " blue" (5 chars) + " sky" (4): -2.5 - 2.0
    assert out[0] == (pytest.approx(-4.5), 2, True)
    # trailing spaces of the context move to the continuation: "  long" (6) + " answer" (7)
    assert out[1] == (pytest.approx(-6.5), 2, True)
    body = s.requests[0]
    assert body["echo"] is True and body["max_tokens"] == 1 and body["logprobs"] == 1


def test_score_task_endpoint_with_pmi(stub):
    s = stub()
    task = McTask("t", [McItem("Q: a?\nAnswer:", ("no", "yes sir"), 1)], " ")
    res = score_task(task, base_url=s.url, endpoint_model="stub-model", null_context="Answer:", api_key="k")
    ch = res.items[0].choices
    assert ch[0].ll == pytest.approx(-1.5) and ch[1].ll == pytest.approx(-4.0)  # " no"; " yes" + " sir"
    assert ch[1].ll_null == pytest.approx(-4.0)  # the stub ignores context
    assert res.items[0].predictions["acc"] == 0
    assert res.items[0].predictions["acc_per_token"] == 0  # -1.5/1 vs -4.0/2
    assert res.backend == "openai-completions"


def test_short_echo_fails_loudly(stub):
    s = stub("short")
    sc = CompletionsScorer(s.url, "stub-model", api_key="k", max_retries=0)
    with pytest.raises(EndpointError, match="fewer prompt log-probabilities"):
        sc.score_pairs([("Question: sky?\nAnswer:", " blue")])


def test_no_echo_fails_loudly(stub):
    s = stub("noecho")
    sc = CompletionsScorer(s.url, "stub-model", api_key="k", max_retries=0)
    with pytest.raises(EndpointError, match="not echoed"):
        sc.score_pairs([("Question: sky?\nAnswer:", " blue")])


def test_unreachable_endpoint():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    sc = CompletionsScorer(f"http://127.0.0.1:{port}/v1", "m", api_key="k", max_retries=0, timeout=2)
    with pytest.raises(EndpointError, match="completions request failed"):
        sc.score_pairs([("Q:", " a")])


def test_a_server_that_takes_one_prompt_a_request(stub):
    # llama-cpp-python's server asserts len(prompt) <= 1 (HTTP 500 for a list): judgecal sends one a
    # request from then on and says so in the run's notes and stats
    s = stub("single")
    task = McTask("t", [McItem("Q: a?\nAnswer:", ("no", "yes sir"), 1), McItem("Q: b?\nAnswer:", ("x", "y z"), 0)], " ")
    res = score_task(task, base_url=s.url, endpoint_model="stub-model", null_context=None, api_key="k")
    ch = res.items[0].choices
    assert ch[0].ll == pytest.approx(-1.5) and ch[1].ll == pytest.approx(-4.0)
    assert res.items[1].choices[1].ll == pytest.approx(-2.0)  # " y" + " z"
    assert res.stats["prompts_per_request"] == 1 and res.stats["http_requests"] == 4 and res.stats["requests"] == 4
    assert any("one prompt per request" in n and "HTTP 500" in n for n in res.diagnostics["notes"])
    # the refused list (the client's own retries of an HTTP 500 included), then the 4 prompts one by one
    lists = [r for r in s.requests if isinstance(r["prompt"], list)]
    assert lists and s.requests[:len(lists)] == lists
    assert [r["prompt"] for r in s.requests[len(lists):]] == lists[0]["prompt"]


def test_an_echo_one_position_off_is_refused(stub):
    s = stub("shifted")
    sc = CompletionsScorer(s.url, "stub-model", api_key="k", max_retries=0)
    pairs = [(f"Question number {i}: what colour is the sky at noon?\nAnswer:", " a deep blue colour") for i in range(3)]
    with pytest.raises(EndpointError, match="one position off"):
        sc.score_pairs(pairs)
    # the same prompts from a server whose top tokens are their own positions' tokens score
    ok = CompletionsScorer(stub().url, "stub-model", api_key="k", max_retries=0)
    assert len(ok.score_pairs(pairs)) == 3 and ok.top_next == 0 and ok.top_same > 20
