"""Context/continuation tokenization, as lm-evaluation-harness splits a request.

Mirrors ``lm_eval/api/model.py`` (``TemplateLM.loglikelihood`` and ``_encode_pair``) and
``lm_eval/models/huggingface.py`` (``tok_encode``, ``prefix_token_id``) for causal models:

1. Trailing whitespace of the context moves to the front of the continuation.
2. The pair is encoded whole, the context alone, and the whole is split at the context's token
   count: ``cont = enc(ctx + cont)[len(enc(ctx)):]``.
3. Empty context: the context is the prefix token (BOS, else EOS) and the continuation is
   encoded without special tokens; if the continuation starts with that very token, its first
   token becomes the context instead.
4. Special tokens follow the tokenizer's default (``add_special_tokens=True``), except that a
   string that already starts with the BOS text gets none: a model that needs BOS gets exactly
   one.

Checked beyond lm-eval: when the whole encoding does not start with the context's encoding (a
token spans the boundary) or the split leaves an empty continuation, the continuation is
re-encoded on its own (no special tokens) after the context's tokens; such requests are counted
(``boundary_fixes``) rather than silently misaligned. lm-eval would keep the misaligned split
there, so these rare requests can differ from it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from judgecal.errors import InputError


@dataclass
class EncodedGroup:
    """One context and its continuations as token ids: ``ctx`` (non-empty), ``conts`` (each
    non-empty), and ``boundary_fixes`` (continuations re-encoded because a token spanned the
    context/continuation boundary)."""

    ctx: list[int]
    conts: list[list[int]]
    boundary_fixes: int = 0


class Encoder:
    """Tokenizes (context, continuations) groups with lm-eval's rules (module docstring).
    ``tokenizer`` is a Hugging Face tokenizer; ``prefix_token_id`` defaults to BOS, else EOS."""

    def __init__(self, tokenizer: Any, prefix_token_id: int | None = None):
        self.tok = tokenizer
        if prefix_token_id is None:
            prefix_token_id = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
        if prefix_token_id is None:
            raise InputError("the tokenizer has neither a BOS nor an EOS token to use as empty context")
        self.prefix_token_id = int(prefix_token_id)
        self._bos_text = tokenizer.decode([self.prefix_token_id])

    def _encode_many(self, texts: Sequence[str]) -> list[list[int]]:
        """``tok_encode`` for many strings (batched through the fast tokenizer)."""
        plain = [i for i, t in enumerate(texts) if not (self._bos_text and t.startswith(self._bos_text))]
        special = [i for i in range(len(texts)) if i not in set(plain)]
        out: list[list[int]] = [[] for _ in texts]
        if plain:
            for i, ids in zip(plain, self.tok([texts[i] for i in plain], add_special_tokens=True)["input_ids"]):
                out[i] = list(ids)
        if special:
            for i, ids in zip(special, self.tok([texts[i] for i in special], add_special_tokens=False)["input_ids"]):
                out[i] = list(ids)
        return out

    def tok_encode_many(self, texts: Sequence[str]) -> list[list[int]]:
        """Each text encoded whole as lm-eval's HFLM ``tok_encode`` encodes it (the tokenizer's
        special tokens, none when the text starts with the BOS text): the token lists of
        ``loglikelihood_rolling``. Pure apart from the tokenizer."""
        return self._encode_many(list(texts)) if texts else []

    def _encode_plain(self, texts: Sequence[str]) -> list[list[int]]:
        if not texts:
            return []
        return [list(x) for x in self.tok(list(texts), add_special_tokens=False)["input_ids"]]

    def encode_groups(self, groups: Sequence[tuple[str, Sequence[str]]]) -> list[EncodedGroup]:
        """Encode ``[(context, [continuation, ...]), ...]`` (continuations already carry the
        target delimiter). Returns one :class:`EncodedGroup` per group. Raises InputError when a
        continuation is empty or tokenizes to nothing."""
        prepared: list[tuple[str, list[str]]] = []
        for ctx, conts in groups:
            n_sp = len(ctx) - len(ctx.rstrip())
            if n_sp:
                conts = [ctx[-n_sp:] + c for c in conts]
                ctx = ctx[:-n_sp]
            for c in conts:
                if c == "":
                    raise InputError("empty continuation: nothing to score")
            prepared.append((ctx, list(conts)))
        # One batched tokenizer call for every string that needs the tokenizer's defaults.
        texts: list[str] = []
        for ctx, conts in prepared:
            if ctx:
                texts.append(ctx)
                texts.extend(ctx + c for c in conts)
        encoded = iter(self._encode_many(texts))
        result: list[EncodedGroup] = []
        refix: list[tuple[int, int, str]] = []
        for gi, (ctx, conts) in enumerate(prepared):
            if not ctx:
                conts_enc = self._encode_plain(conts)
                # lm-eval: the context is the prefix token; a continuation that itself starts
                # with that token uses it as context (``cont_enc[:1], cont_enc[1:]``): the
                # context is the same single token either way, so it stays shared.
                conts_enc = [ce[1:] if ce and ce[0] == self.prefix_token_id else ce for ce in conts_enc]
                ctx_enc = [self.prefix_token_id]
                if any(not ce for ce in conts_enc):
                    raise InputError("a continuation tokenizes to nothing")
                result.append(EncodedGroup(ctx_enc, conts_enc))
                continue
            ctx_enc = next(encoded)
            group = EncodedGroup(ctx_enc, [])
            n = len(ctx_enc)
            for ci, c in enumerate(conts):
                whole = next(encoded)
                cont = whole[n:]
                if whole[:n] != ctx_enc or not cont:
                    refix.append((gi, ci, c))
                    cont = []
                group.conts.append(cont)
            result.append(group)
        if refix:
            fixed = self._encode_plain([c for _, _, c in refix])
            for (gi, ci, c), ids in zip(refix, fixed):
                if not ids:
                    raise InputError(f"continuation {c!r} tokenizes to nothing")
                result[gi].conts[ci] = ids
                result[gi].boundary_fixes += 1
        return result
