"""A local judge without generation: the verdict distribution from one forward pass.

``judgecal rate --local MODEL`` renders the judge prompt exactly as the served path sends it,
applies the model's chat template as ``transformers serve`` does
(``apply_chat_template(messages, add_generation_prompt=True)``), appends the fixed verdict
prefix the prompt asks the judge to begin with (``[[`` for the MT-Bench ``[[rating]]``
prompts, ``Rating: `` for a few-shot prompt whose answers read ``Rating: 9``:
:func:`verdict_prefix`), and scores every verdict of the scale as a whole continuation after
it with judgecal's own log-likelihood scorer (:class:`judgecal.loglik.hf.HFScorer`: the
context once, all its continuations packed in the same row, batched across items, shared
prompt prefixes computed once). A verdict's continuation is its text plus what closes it
(``]]`` after ``[[``, else the chat template's end of turn), so ``1]]`` and ``10]]`` are
different continuations and a multi-token verdict is exact.

What a row gets (:func:`judgecal.judge.distribution.from_logliks`): ``p_v = exp(ll_v)``
normalised over the scale, ``outside`` = 1 - their sum, and ``greedy``: the verdict greedy
decoding after the prefix writes (:func:`greedy_verdict`: its tokens are the model's argmax,
whatever follows them; None when greedy decoding writes no verdict of the scale). With a
temperature-0 served judge that writes the prefix first, that is the served path's verdict.
It is usually the distribution's argmax too, but not always: when ``1`` is the likeliest
first token because it opens both 1 and 10, greedy decoding writes 1 or 10 even though 7
alone may be likelier than either.

torch/transformers are imported lazily (:mod:`judgecal.loglik.hf`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

from judgecal.errors import ModelError, UsageError
from judgecal.judge.prompts import Prompt

DEFAULT_PREFIX = "[["
PAIRWISE_LETTERS = ("A", "B", "C")
_MARK = "\u241fJUDGECAL-END-OF-TURN\u241f"
_POINT_SHOT = re.compile(r"^(?P<pre>.*?)(?P<v>[+-]?\d+)(?P<post>\s*\]\])?\s*$", re.S)
_PAIR_SHOT = re.compile(r"^(?P<pre>.*?)(?P<v>[ABC])(?P<post>\s*\]\])?\s*$", re.S)


def verdict_prefix(prompt: Prompt) -> str:
    """The text the judge's answer begins with before the verdict, for ``prompt``:

    1. the front matter field ``verdict_prefix`` when the template declares one;
    2. else, when the template has assistant turns (few-shot answers) that all end in a
       verdict, the text they all write before it (``Rating: 9`` and ``Rating: 2`` ->
       ``Rating: ``; ``[[9]]`` -> ``[[``);
    3. else ``[[`` (the MT-Bench ``[[rating]]`` / ``[[A]]`` format).

    The few-shot answers are rendered with placeholder variables; a template whose answers
    cannot be rendered that way falls back to 3. Raises InputError for a declared prefix that
    is not text."""
    declared = prompt.meta.get("verdict_prefix")
    if declared is not None:
        if not isinstance(declared, str):
            from judgecal.errors import InputError

            raise InputError("front matter field 'verdict_prefix' must be text", source=prompt.path)
        return declared
    shots = _shot_answers(prompt)
    if shots:
        pattern = _PAIR_SHOT if prompt.mode == "pairwise" else _POINT_SHOT
        found = [pattern.match(s) for s in shots]
        if all(found):
            prefixes = {m.group("pre") for m in found}  # type: ignore[union-attr]
            if len(prefixes) == 1:
                return prefixes.pop()
    return DEFAULT_PREFIX


def _shot_answers(prompt: Prompt) -> list[str]:
    try:
        msgs = prompt.render(question="?", response="?", reference="?", response_a="?", response_b="?")
    except Exception:  # noqa: BLE001 - a template that needs real variables for its shots: no shots known
        return []
    return [m["content"] for m in msgs if m["role"] == "assistant"]


def closing_for(prefix: str, end_of_turn: str) -> str:
    """What follows a verdict after ``prefix``: ``]]`` when the prefix opens ``[[``, else the
    chat template's ``end_of_turn``."""
    return "]]" if prefix.rstrip().endswith("[[") else end_of_turn


def greedy_verdict(greedy_run: Sequence[int], is_greedy: Sequence[bool], n_value: Sequence[Optional[int]]) -> Optional[int]:
    """The verdict greedy decoding writes after the prefix, whatever follows it (``7``, ``7.``,
    ``7/10`` all read 7, as the served path's parser reads them): among the verdicts whose own
    tokens are all the model's argmax (``greedy_run[j] >= n_value[j]``), the longest (greedy
    decoding that writes ``1`` then ``0`` wrote 10, not 1). A verdict whose token count is
    unknown (None) counts only when its whole continuation is greedy. None: greedy decoding
    writes no verdict of the scale. Pure."""
    best, best_n = None, -1
    for j, (run, whole, n) in enumerate(zip(greedy_run, is_greedy, n_value)):
        ok = whole if n is None else run >= n
        length = n if n is not None else run
        if ok and length > best_n:
            best, best_n = j, length
    return best


@dataclass
class Scored:
    """One row's reading: ``lls`` (nats, one per verdict, in the order of the keys) and
    ``greedy`` (index of the verdict greedy decoding writes, or None), or ``error`` (why the
    row could not be scored: a prompt longer than the model's positions)."""

    lls: Optional[list[float]] = None
    greedy: Optional[int] = None
    error: Optional[str] = None
    n_tokens: int = 0


class VerdictScorer:
    """The local model as a judge that reads its verdict distribution (module doc).

    ``folder``: a transformers model folder with a chat template. ``device``/``dtype``/
    ``forward``: as :class:`~judgecal.loglik.hf.HFScorer`, or an already loaded ``scorer``.
    Raises ModelError when the model cannot load or has no chat template."""

    def __init__(self, folder: str | Path | None = None, *, device: str = "cpu", dtype: str = "float32",
                 forward: str = "auto", scorer: Any = None, batch_size: int | str = "auto"):
        if scorer is None:
            from judgecal.loglik.hf import HFScorer

            if folder is None:
                raise UsageError("give a model folder")
            scorer = HFScorer(folder, device=device, dtype=dtype, forward=forward)
        self.scorer = scorer
        self.tok = scorer.tokenizer
        self.batch_size = batch_size
        self.share_prefixes = True  # contexts beginning alike share that prefix's computation (HFScorer.units)
        if not getattr(self.tok, "chat_template", None):
            raise ModelError(f"the tokenizer in {folder} has no chat template: the served path could not judge with it "
                             "either")
        self.end_of_turn = self._end_of_turn()
        self.stats: dict[str, Any] = {}

    def _end_of_turn(self) -> str:
        """The text the chat template writes right after an assistant message's content (its
        trailing whitespace dropped; the EOS token's text when the template writes nothing)."""
        text = self.tok.apply_chat_template([{"role": "user", "content": "?"}, {"role": "assistant", "content": _MARK}],
                                            tokenize=False)
        after = text.split(_MARK, 1)[1] if _MARK in text else ""
        after = after.rstrip()
        if not after:
            after = self.tok.eos_token or ""
        if not after:
            raise ModelError("the chat template writes no end of turn after an answer and the tokenizer has no EOS "
                             "token: a verdict without [[ ]] cannot be closed")
        return after

    def context(self, messages: list[dict[str, str]], prefix: str) -> str:
        """The text the served model continues (chat template with the generation prompt, as
        ``transformers serve`` applies it) followed by ``prefix``."""
        return self.tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True) + prefix

    def continuations(self, verdicts: Sequence[str], prefix: str) -> list[str]:
        """Each verdict's text followed by what closes it (:func:`closing_for`)."""
        close = closing_for(prefix, self.end_of_turn)
        return [v + close for v in verdicts]

    def _value_tokens(self, context: str, verdicts: Sequence[str], conts: Sequence[Sequence[int]]) -> list[Optional[int]]:
        """How many leading tokens of each verdict's continuation (after ``context``) are the
        verdict itself (what precedes the closing); None where the continuation does not begin
        with the verdict's own tokens (a token spanning verdict and closing). The same for
        every context: they all end with the same prefix."""
        alone = self.scorer.encoder.encode_groups([(context, list(verdicts))])[0].conts
        return [len(a) if list(c[:len(a)]) == list(a) and len(a) < len(c) else None for a, c in zip(alone, conts)]

    def score(self, contexts: Sequence[str], verdicts: Sequence[str], prefix: str, progress: Any = None) -> list[Scored]:
        """Score every verdict after every context in batched forward passes; one
        :class:`Scored` per context. A context too long for the model is that row's error
        (never silently truncated)."""
        from judgecal.loglik.hf import RunStats

        conts = self.continuations(verdicts, prefix)
        enc = self.scorer.encoder.encode_groups([(c, conts) for c in contexts])
        out: list[Scored] = [Scored() for _ in contexts]
        keep = []
        limit = self.scorer.max_length
        for i, g in enumerate(enc):
            n = len(g.ctx) + max(len(c) for c in g.conts)
            out[i].n_tokens = len(g.ctx)
            if n > limit:
                out[i].error = f"the prompt has {len(g.ctx)} tokens: over the model's {limit} positions"
            else:
                keep.append(i)
        if keep:
            stats = RunStats()
            n_value = self._value_tokens(contexts[keep[0]], verdicts, enc[keep[0]].conts)
            res = self.scorer.score_groups([enc[i] for i in keep], batch_size=self.batch_size, stats=stats,
                                           progress=progress, share_prefixes=self.share_prefixes)
            for i, row in zip(keep, res):
                out[i].lls = [s.ll for s in row]
                out[i].greedy = greedy_verdict([s.greedy_run for s in row], [s.is_greedy for s in row], n_value)
            for k in ("tokens", "padded_tokens", "forward_passes", "scored_rows"):
                self.stats[k] = self.stats.get(k, 0) + getattr(stats, k)
            self.stats["shared_prefix_tokens_saved"] = (self.stats.get("shared_prefix_tokens_saved", 0)
                                                        + stats.extra.get("shared_prefix_tokens_saved", 0))
        return out
