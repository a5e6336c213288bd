"""Scoring through an OpenAI-compatible completions endpoint (vLLM, llama.cpp server, ...).

Each request sends ``prompt = context + continuation`` (16 a request; one a request from the
first refusal of a list on, as llama-cpp-python's server takes one) (trailing whitespace of the context
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
        #: prompts per request: :data:`PROMPTS_PER_REQUEST`, 1 after a server refused a list (``fallback`` says so)
        self.per_request = PROMPTS_PER_REQUEST
        self.fallback: str | None = None
        self.requests = 0
        #: echoed positions whose top log-probability names that position's token / the next prompt token
        self.top_same = 0
        self.top_next = 0

    def score_pairs(self, pairs: Sequence[tuple[str, str]]) -> list[tuple[float, int, bool | None]]:
        """Score ``(context, continuation)`` pairs. Returns ``(ll nats, n_tokens, is_greedy)``
        per pair (is_greedy None when the server gives no top log-probabilities). Prompts go
        :attr:`per_request` to a request; a server that answers a list of prompts with HTTP
        400/422/500/501 gets them one a request from then on (:attr:`fallback` says why; the
        run's stats and notes carry it). Raises EndpointError on unusable answers, UsageError
        for an empty context."""
        import openai

        prepared: list[tuple[str, int]] = []
        for ctx, cont in pairs:
            stripped = ctx.rstrip()
            if not stripped:
                raise UsageError("the completions backend cannot score an empty context "
                                 "(the first prompt token has no log-probability); give --null-context text")
            prepared.append((ctx + cont, len(stripped)))
        out: list[tuple[float, int, bool | None]] = []
        s = 0
        while s < len(prepared):
            chunk = prepared[s:s + self.per_request]
            try:
                resp = self.client.completions.create(model=self.model, prompt=[p for p, _ in chunk] if len(chunk) > 1
                                                      else chunk[0][0], echo=True, logprobs=1, max_tokens=1,
                                                      temperature=0.0)
            except openai.APIStatusError as exc:
                if len(chunk) > 1 and exc.status_code in (400, 422, 500, 501) and self.fallback is None:
                    # a server that takes one prompt a request (llama-cpp-python's asserts it: HTTP 500)
                    self.per_request = 1
                    self.fallback = (f"the server refused {len(chunk)} prompts in one request (HTTP "
                                     f"{exc.status_code}): one prompt per request")
                    continue
                raise EndpointError(f"{self.base_url}: completions request failed: {exc}") from exc
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
                same, nxt = top_alignment(choice.logprobs, n_echo)
                self.top_same += same
                self.top_next += nxt
            self._check_alignment()
            usage = getattr(resp, "usage", None)
            if usage is not None and getattr(usage, "prompt_tokens", None) and usage.prompt_tokens != echoed_total:
                raise EndpointError(f"{self.base_url}: {echoed_total} prompt log-probabilities returned for "
                                    f"{usage.prompt_tokens} prompt tokens")
            self.requests += 1
            s += len(chunk)
        self._check_alignment(final=True)
        return out


    def alignment_note(self) -> str | None:
        """A note where the echo's alignment could hardly be checked (fewer than :data:`SHIFT_MIN`
        positions whose top token is the position's own or the next: short prompts, or no top
        log-probabilities); None where it was."""
        seen = self.top_same + self.top_next
        if seen >= SHIFT_MIN:
            return None
        return (f"the echoed log-probabilities' alignment could hardly be checked ({seen} echoed positions with a "
                f"top token that is their own or the next prompt token; {SHIFT_MIN} wanted): a server that scores "
                "each token one position off (llama-cpp-python's echo) would not be caught")

    def _check_alignment(self, final: bool = False) -> None:
        """EndpointError when the echoed top log-probabilities name the *next* prompt token far
        more often than their own (:func:`top_alignment`): the server reports log p(token | the
        tokens up to and including it), one position off, as llama-cpp-python 0.3's echo does
        (abetlen/llama-cpp-python#1983, #1276); every score from it would be wrong. ``final`` (the
        end of a run): the next token winning at 2 positions or more suffices."""
        if (self.top_next >= SHIFT_MIN and self.top_next > SHIFT_RATIO * self.top_same) or \
                (final and self.top_next >= 2 and self.top_next > self.top_same):
            raise EndpointError(
                f"{self.base_url}: the echoed log-probabilities are one position off: at {self.top_next} echoed "
                f"positions the top log-probability names the next prompt token, at {self.top_same} its own token "
                "(the server scores each prompt token with the distribution that follows it, as llama-cpp-python's "
                "echo does: abetlen/llama-cpp-python#1983); its log-likelihoods would be wrong, so none is used")


#: :meth:`CompletionsScorer._check_alignment`: at least this many positions whose top token is the next
#: prompt token, and more than SHIFT_RATIO times those whose top token is their own (a correct server's
#: top token at a position is its own token wherever the model predicted it: tens of percent of positions;
#: the next token only where two prompt tokens repeat)
SHIFT_MIN = 8
SHIFT_RATIO = 3


def top_alignment(logprobs: Any, n_echo: int) -> tuple[int, int]:
    """(same, next): among echoed prompt positions 1..n_echo-2 with top log-probabilities, how
    many have as their top token the position's own token, and how many the next prompt token
    (counted only where the two tokens differ). 0, 0 without top log-probabilities."""
    tokens, top = _get(logprobs, "tokens"), _get(logprobs, "top_logprobs")
    if not top or not tokens:
        return 0, 0
    same = nxt = 0
    for i in range(1, min(n_echo - 1, len(top))):
        t = top[i]
        if not t or tokens[i] == tokens[i + 1]:
            continue
        best = max(t.items(), key=lambda kv: kv[1])[0]
        same += best == tokens[i]
        nxt += best == tokens[i + 1]
    return same, nxt


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
