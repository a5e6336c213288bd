"""Scoring through an OpenAI-compatible completions endpoint (vLLM, llama.cpp server, ...).

Each request sends ``prompt = context + continuation`` (trailing whitespace of the context
moved to the continuation, as lm-eval does) with ``echo=True, logprobs=1, max_tokens=1,
temperature=0``: the server returns the log-probability of every prompt token (the first is
null: nothing predicts it) followed by the one generated token, which is dropped. The
continuation's tokens are those whose ``text_offset`` reaches past the context's length.

The response is checked, so a server that does not really echo prompt log-probabilities fails
loudly (:class:`~judgecal.errors.EndpointError`) instead of scoring chance:
- ``logprobs`` with ``tokens``, ``token_logprobs`` and ``text_offset`` of equal length;
- the first log-probability null, all other prompt ones numbers;
- the echoed tokens cover the whole prompt (last one reaches its end) and at least one token
  belongs to the continuation;
- with ``usage.prompt_tokens``: exactly as many echoed log-probabilities as prompt tokens.
"""

from __future__ import annotations

from typing import Any, Sequence

from judgecal.errors import EndpointError, UsageError

PROMPTS_PER_REQUEST = 16


class CompletionsScorer:
    """Client for ``base_url`` (e.g. ``http://127.0.0.1:8000/v1``) serving ``model``.
    ``api_key`` defaults to ``OPENAI_API_KEY`` or a placeholder (local servers ignore it)."""

    def __init__(self, base_url: str, model: str, *, api_key: str | None = None, timeout: float = 120.0,
                 max_retries: int = 2):
        import os

        import openai

        self.model = model
        self.client = openai.OpenAI(base_url=base_url, api_key=api_key or os.environ.get("OPENAI_API_KEY") or "EMPTY",
                                    timeout=timeout, max_retries=max_retries)
        self.base_url = base_url

    def score_pairs(self, pairs: Sequence[tuple[str, str]]) -> list[tuple[float, int, bool | None]]:
        """Score ``(context, continuation)`` pairs. Returns ``(ll nats, n_tokens, is_greedy)``
        per pair (is_greedy None when the server gives no top log-probabilities). Raises
        EndpointError on unusable answers, UsageError for an empty context."""
        import openai

        prepared: list[tuple[str, int]] = []
        for ctx, cont in pairs:
            stripped = ctx.rstrip()
            if not stripped:
                raise UsageError("the completions backend cannot score an empty context "
                                 "(the first prompt token has no log-probability); give --null-context text")
            prepared.append((ctx + cont, len(stripped)))
        out: list[tuple[float, int, bool | None]] = []
        for s in range(0, len(prepared), PROMPTS_PER_REQUEST):
            chunk = prepared[s:s + PROMPTS_PER_REQUEST]
            try:
                resp = self.client.completions.create(model=self.model, prompt=[p for p, _ in chunk], echo=True,
                                                      logprobs=1, max_tokens=1, temperature=0.0)
            except openai.OpenAIError as exc:
                raise EndpointError(f"{self.base_url}: completions request failed: {exc}") from exc
            choices = sorted(resp.choices, key=lambda c: c.index)
            if len(choices) != len(chunk):
                raise EndpointError(f"{self.base_url}: {len(chunk)} prompts sent, {len(choices)} completions returned")
            echoed_total = 0
            for (prompt, boundary), choice in zip(chunk, choices):
                ll, ntok, greedy, n_echo = parse_echo(choice.logprobs, prompt, boundary, self.base_url)
                echoed_total += n_echo
                out.append((ll, ntok, greedy))
            usage = getattr(resp, "usage", None)
            if usage is not None and getattr(usage, "prompt_tokens", None) and usage.prompt_tokens != echoed_total:
                raise EndpointError(f"{self.base_url}: {echoed_total} prompt log-probabilities returned for "
                                    f"{usage.prompt_tokens} prompt tokens")
        return out


def _get(obj: Any, name: str) -> Any:
    return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)


def parse_echo(logprobs: Any, prompt: str, boundary: int, where: str = "endpoint") -> tuple[float, int, bool | None, int]:
    """From one completion's ``logprobs`` (echoed prompt + generated token), the continuation's
    summed log-probability (nats), its token count, whether it is greedy (None if unknown) and
    the number of echoed prompt tokens. ``boundary``: the context's length in characters.
    Raises EndpointError (module docstring lists the checks)."""
    if logprobs is None:
        raise EndpointError(f"{where}: no logprobs in the completion (does the server support echo + logprobs?)")
    tokens, lps, offsets = _get(logprobs, "tokens"), _get(logprobs, "token_logprobs"), _get(logprobs, "text_offset")
    top = _get(logprobs, "top_logprobs")
    if not tokens or lps is None or offsets is None or not (len(tokens) == len(lps) == len(offsets)):
        raise EndpointError(f"{where}: logprobs need tokens, token_logprobs and text_offset of equal length")
    n_echo = sum(1 for off in offsets if off < len(prompt))
    if n_echo == 0 or lps[0] is not None:
        raise EndpointError(f"{where}: the prompt was not echoed with log-probabilities "
                            "(first prompt token must have a null log-probability)")
    last_end = offsets[n_echo - 1] + len(tokens[n_echo - 1])
    if last_end < len(prompt):
        raise EndpointError(f"{where}: fewer prompt log-probabilities than prompt tokens "
                            f"(echo ends at character {last_end} of {len(prompt)})")
    cont_idx = [i for i in range(n_echo) if offsets[i] + len(tokens[i]) > boundary]
    if not cont_idx:
        raise EndpointError(f"{where}: no prompt token covers the continuation")
    if cont_idx[0] == 0:
        raise EndpointError(f"{where}: the continuation starts at the first prompt token (no log-probability)")
    vals = [lps[i] for i in cont_idx]
    if any(v is None for v in vals):
        raise EndpointError(f"{where}: null log-probability inside the prompt")
    greedy: bool | None = None
    if top is not None and len(top) >= n_echo and all(top[i] for i in cont_idx):
        greedy = all(max(top[i].items(), key=lambda kv: kv[1])[0] == tokens[i] for i in cont_idx)
    return float(sum(vals)), len(cont_idx), greedy, n_echo
