"""A local judge from one forward pass: the verdict distribution, and the greedy text it writes.

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

What a row gets: the distribution (:func:`judgecal.judge.distribution.from_logliks`):
``p_v = exp(ll_v)`` normalised over the scale, ``outside`` = 1 - their sum; and the **greedy
text** (:attr:`Scored.text`): the prefix and what greedy decoding writes after it, up to the
end of turn or :data:`GREEDY_MAX_TOKENS` tokens, decoded as ``transformers serve`` decodes an
answer (special tokens skipped). The text is what the row's status and score come from, read
by the same parser as a served judge's answer (:func:`judgecal.judge.parse.read_output`), so
``Rating: 15`` on a 1-10 scale is unparsed on both paths. Where the forward pass already
shows the whole greedy text (a verdict closed by the end of turn whose every token is the
argmax: ``Rating: 7<|im_end|>``), nothing is generated; otherwise the row is decoded greedily
from its context alone (no batch, no padding), a few tokens. The greedy verdict is not always
the distribution's argmax: when ``1`` is the likeliest first token because it opens both 1 and
10, greedy decoding writes 1 or 10 even though 7 alone may be likelier than either.

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


GREEDY_MAX_TOKENS = 16  # tokens greedy decoding may write after the verdict prefix (the local judge's text)


@dataclass
class Scored:
    """One row's reading: ``lls`` (nats, one per verdict, in the order of the keys), ``text``
    (the greedy text: the verdict prefix and what greedy decoding writes after it, the end of
    turn excluded), ``completion_tokens`` (the tokens greedy decoding wrote after the context,
    the end of turn included when reached) and ``generated`` (True when the text needed
    decoding steps, False when the forward pass showed it whole); or ``error`` (why the row
    could not be scored: a prompt longer than the model's positions). ``n_tokens``: the
    context's tokens."""

    lls: Optional[list[float]] = None
    text: Optional[str] = None
    completion_tokens: int = 0
    generated: bool = False
    error: Optional[str] = None
    n_tokens: int = 0


def answer_text(context: str, prefix: str, written: str) -> str:
    """The judge's answer when greedy decoding wrote ``written`` after ``context`` with its
    trailing whitespace removed (the scorer's context ends without it; the whitespace, such as
    the space of ``Rating: ``, opens what is written): the text from where ``prefix`` begins in
    ``context``. Pure."""
    stripped = context.rstrip()
    return (stripped + written)[len(context) - len(prefix):]


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
            res = self.scorer.score_groups([enc[i] for i in keep], batch_size=self.batch_size, stats=stats,
                                           progress=progress, share_prefixes=self.share_prefixes)
            ends_turn = closing_for(prefix, self.end_of_turn) == self.end_of_turn
            for i, row in zip(keep, res):
                out[i].lls = [s.ll for s in row]
                whole = [j for j, s in enumerate(row) if s.is_greedy] if ends_turn else []
                if whole:  # greedy decoding writes this verdict, then ends the turn: the text is known
                    j = whole[0]
                    written = conts[j][: len(conts[j]) - len(self.end_of_turn)]
                    if contexts[i] != contexts[i].rstrip():
                        written = contexts[i][len(contexts[i].rstrip()):] + written
                    out[i].text = answer_text(contexts[i], prefix, written)
                    out[i].completion_tokens = len(enc[i].conts[j])
                else:
                    ids, n = self.greedy(enc[i].ctx, min(GREEDY_MAX_TOKENS, limit - len(enc[i].ctx)))
                    out[i].text = answer_text(contexts[i], prefix, self.tok.decode(ids, skip_special_tokens=True))
                    out[i].completion_tokens, out[i].generated = n, True
                    self.stats["generated_rows"] = self.stats.get("generated_rows", 0) + 1
                    self.stats["generated_tokens"] = self.stats.get("generated_tokens", 0) + n
            for k in ("tokens", "padded_tokens", "forward_passes", "scored_rows"):
                self.stats[k] = self.stats.get(k, 0) + getattr(stats, k)
            self.stats["shared_prefix_tokens_saved"] = (self.stats.get("shared_prefix_tokens_saved", 0)
                                                        + stats.extra.get("shared_prefix_tokens_saved", 0))
        return out

    def stop_ids(self) -> set[int]:
        """The token ids that end an answer: the model's generation config's EOS tokens (what
        ``transformers serve`` stops at), the tokenizer's EOS and the end-of-turn text when it
        is one token."""
        ids: set[int] = set()
        cfg = getattr(self.scorer.model, "generation_config", None)
        eos = getattr(cfg, "eos_token_id", None)
        for v in (eos if isinstance(eos, (list, tuple)) else [eos]):
            if v is not None:
                ids.add(int(v))
        if self.tok.eos_token_id is not None:
            ids.add(int(self.tok.eos_token_id))
        eot = self.tok.encode(self.end_of_turn, add_special_tokens=False)
        if len(eot) == 1:
            ids.add(int(eot[0]))
        return ids

    def greedy(self, ctx: Sequence[int], max_new_tokens: int) -> tuple[list[int], int]:
        """Greedy decoding after the token ids ``ctx``, one sequence alone (no padding), at most
        ``max_new_tokens`` tokens, stopping at :meth:`stop_ids`. Returns the tokens written
        before the stop and how many were written (the stop included)."""
        torch = self.scorer.torch
        if max_new_tokens < 1:
            return [], 0
        from transformers import GenerationConfig

        stop = sorted(self.stop_ids())
        pad = self.tok.pad_token_id if self.tok.pad_token_id is not None else (stop[0] if stop else 0)
        config = GenerationConfig(max_new_tokens=max_new_tokens, do_sample=False, num_beams=1, eos_token_id=stop or None,
                                  pad_token_id=pad)
        with torch.inference_mode():
            ids = torch.tensor([list(ctx)], dtype=torch.long, device=self.scorer.device)
            out = self.scorer.model.generate(ids, attention_mask=torch.ones_like(ids), generation_config=config)
        written = [int(t) for t in out[0, len(ctx):].tolist()]
        cut = next((k for k, t in enumerate(written) if t in stop), None)
        n = len(written) if cut is None else cut + 1
        return (written if cut is None else written[:cut]), n

