"""Degenerate answers that a length calibration must never reward: empty answers, the same text
given to many items, answers far below the reference length. Pure (no I/O); one definition for
every mode (fit, report, the score leaderboard, the win-rate leaderboard, ``check``).

Per response (:func:`no_credit`): an answer earns **no length credit at all** (its penalty is
clipped at >= 0, so its calibrated score is at most its raw score; :func:`judgecal.calibrate.
penalty.calibrate` ``no_credit``) when it is

* empty: no whitespace-separated word (``len(text.split()) == 0``: empty or whitespace only), or
* repeated: the same text that its model gave to at least :data:`REPEATED_ANSWER` different
  items (an answer that does not depend on the instruction); in the score mode "the same" is
  the same template (:func:`template_key`: digits, case and whitespace normalised), in the
  win-rate mode the same bytes.

Answers far below the reference length are handled by the short-side floor of the penalty
(:data:`judgecal.calibrate.penalty.DEFAULT_SHORT_FLOOR`): their credit saturates at the floor.

Per model (:func:`model_flags`), flags ``{"code", "message"}``:

* ``empty_answers``: at least :data:`EMPTY_SHARE` of the model's answers are empty;
* ``constant_answers``: one non-empty text covers at least :data:`CONSTANT_SHARE` of the model's
  answers (on two or more items);
* ``truncated_answers``: the median ratio L / L_ref of the model's non-empty answers is at or
  below the floor squared (1/16 with the default floor: a few words where the reference writes a
  page, as AlpacaEval's ``gpt4_gamed`` at 0.00 of the baseline's length);
* ``far_short_answers``: that median is below the floor but not below its square (a concise
  model: AlpacaEval's ``alpaca-7b`` or ``gpt-3.5-turbo-1106_concise`` sit at 0.16-0.18 of the
  baseline's length).

A model flagged empty, constant or truncated (:data:`NO_GAIN_CODES`) gains nothing from a
calibration in either leaderboard: its calibrated score (win rate) is its raw one. In the
win-rate board, whose reference is one (often verbose) baseline's answer, a far-short model keeps
the floor's capped credit: AlpacaEval's concise models sit there, and a truncating model cannot
be told from them by length alone (it is flagged; ``check`` fails on every flag). In the score
board the reference is the family's median answer: a far-short model is an outlier of its own
family and gains nothing either (:data:`SCORE_NO_GAIN_CODES`).

The same messages are used by every output (score and win-rate leaderboards, fit, report), so a
reader sees one wording. ``reference`` names what L_ref is ("L_ref" in the score mode, "the
baseline's length" in the win-rate mode).
"""

from __future__ import annotations

import hashlib
import re
from collections import defaultdict
from typing import Sequence

import numpy as np

from judgecal.calibrate.penalty import DEFAULT_SHORT_FLOOR, check_floor

#: An answer given verbatim to at least this many items of one model earns no length credit.
REPEATED_ANSWER = 3
#: A model whose most common (non-empty) answer covers at least this share of its items is flagged.
CONSTANT_SHARE = 0.5
#: A model with at least this share of empty answers is flagged (every empty answer earns no credit).
EMPTY_SHARE = 0.05
#: The flag codes, in the order they are listed.
CODES = ("empty_answers", "constant_answers", "truncated_answers", "far_short_answers")
#: A model flagged with one of these gains nothing from a calibration in either leaderboard (its
#: calibrated score or win rate is its raw one); far-short answers keep the floor's capped credit.
NO_GAIN_CODES = frozenset({"empty_answers", "constant_answers", "truncated_answers"})
#: The score leaderboard's L_ref is the family's median answer, not one verbose baseline: a model
#: whose median answer is below the floor of it is an outlier of its own family and gains nothing too.
SCORE_NO_GAIN_CODES = NO_GAIN_CODES | {"far_short_answers"}
#: The short code of each flag that the boards' tables and Markdown show (legends in the views).
SHORT_CODES = {"empty_answers": "empty", "constant_answers": "constant", "truncated_answers": "truncated",
               "far_short_answers": "far-short"}


_DIGITS = re.compile(r"\d+")
# ASCII texts (the usual case) in one pass over bytes: A-Z lower-cased, every digit made "0" (runs of
# "0" are then runs of digits, collapsed below), and \x1c-\x1f made spaces (str.split splits on them,
# bytes.split does not); the same key as the str path, faster (the score board keys every answer)
_ASCII_TEMPLATE = bytes(c + 32 if 65 <= c <= 90 else 48 if 48 <= c <= 57 else 32 if 0x1C <= c <= 0x1F else c
                        for c in range(256))
_ASCII_KEEP = bytes(c + 32 if 65 <= c <= 90 else 32 if 0x1C <= c <= 0x1F else c for c in range(256))  # no digit folding
_ZERO_RUNS = re.compile(rb"0{2,}")  # a run of digits, each made "0" above, is one "0" (as _DIGITS does)


#: An answer of fewer whitespace words than this keeps its numbers in its template: its number
#: is what it says ("The answer is 417.", "417 apples"), not a counter around a text.
TEMPLATE_MIN_WORDS = 8
# the number that ends an answer (only punctuation, brackets, quotes or spaces after it): the
# answer's result ("... so the answer is 417.", "#### 12"), kept in its template; a number with
# a decimal or thousands separator is one number ("12.5", "1,024")
_FINAL_NUMBER = re.compile(r"\d(?:[\d.,]*\d)?(?=[^\w]*\Z)")
_FINAL_NUMBER_B = re.compile(rb"\d(?:[\d.,]*\d)?(?=[^\w]*\Z)")


def _ascii_norm(raw: bytes, fold: bool) -> bytes:
    if not fold:  # lower-case and spaces only
        return b" ".join(raw.translate(_ASCII_KEEP).split())
    return _ZERO_RUNS.sub(b"0", b" ".join(raw.translate(_ASCII_TEMPLATE).split()))


def template_key(text: str | None) -> str:
    """SHA-256 of a text's template: lower-cased, whitespace collapsed, and every run of digits
    replaced by ``0``, so that answers differing only in a number, case or spacing ("Here is my
    answer to request 7: ...") count as the same answer (the score mode's repeated-answer and
    constant-answer guards; issue 18) - except the digits that are the answer (issue 35): an
    answer of fewer than :data:`TEMPLATE_MIN_WORDS` words keeps every number ("The answer is
    417." and "The answer is 12." are two answers), and the number that ends an answer (only
    punctuation, brackets, quotes or spaces after it: "..., so the answer is 417.") is kept."""
    text = text or ""
    if text.isascii():
        raw = text.encode("ascii")
        if len(raw.translate(_ASCII_KEEP).split()) < TEMPLATE_MIN_WORDS:  # (\x1c-\x1f split words, as in str)
            norm = _ascii_norm(raw, False)
        else:
            m = _FINAL_NUMBER_B.search(raw)
            norm = (_ascii_norm(raw, True) if m is None else
                    _ascii_norm(raw[:m.start()], True) + b"\x1e" + _ascii_norm(raw[m.start():], False))
        return hashlib.sha256(norm).hexdigest()
    low = text.lower()
    if len(low.split()) < TEMPLATE_MIN_WORDS:
        norm = " ".join(low.split())
    else:
        m = _FINAL_NUMBER.search(low)
        head, tail = (low, None) if m is None else (low[:m.start()], low[m.start():])
        norm = " ".join(_DIGITS.sub("0", head).split())
        if tail is not None:
            norm += "\x1e" + " ".join(tail.split())
    return hashlib.sha256(norm.encode("utf-8")).hexdigest()


def text_key(text: str | None) -> str:
    """SHA-256 of a response's UTF-8 text (how the database keys responses: ``text_sha256``)."""
    return hashlib.sha256((text or "").encode("utf-8")).hexdigest()


def n_words(text: str | None) -> int:
    """Whitespace words of a text (``len(text.split())``, the stored ``n_words``)."""
    return len((text or "").split())


def _codes(values: Sequence) -> tuple[np.ndarray, list]:
    """(int64 code of each value, in order of first appearance; the distinct values in that order).
    An integer array (codes already, e.g. the win-rate board's) is coded without a Python loop."""
    if isinstance(values, np.ndarray) and values.dtype.kind in "iu":
        distinct, first, inverse = np.unique(values.reshape(-1), return_index=True, return_inverse=True)
        by_first = np.argsort(first, kind="stable")
        rank = np.empty_like(by_first)
        rank[by_first] = np.arange(by_first.size)
        return rank[inverse].astype(np.int64), distinct[by_first].tolist()
    seq = values if isinstance(values, (list, tuple)) else list(values)
    distinct = list(dict.fromkeys(seq))
    index = {v: k for k, v in enumerate(distinct)}
    return np.fromiter(map(index.__getitem__, seq), dtype=np.int64, count=len(seq)), distinct


def no_credit(model: Sequence, item: Sequence, key: Sequence, words: Sequence) -> np.ndarray:
    """Per response, True when it earns no length credit (module doc): empty, or its model gave
    the same text (``key``: the text or any identity of it, e.g. its SHA-256) to at least
    :data:`REPEATED_ANSWER` different items. All arguments shape (n,). Returns bool (n,)."""
    words = np.asarray(words, dtype=float).reshape(-1)
    (mo, _), (it, _), (k, _) = _codes(model), _codes(item), _codes(key)
    if not mo.size:
        return words == 0
    _, pair = np.unique(mo * (k.max() + 1) + k, return_inverse=True)  # (model, text) codes
    span = it.max() + 1
    distinct = np.unique(pair * span + it)  # distinct (model, text, item)
    n_items = np.bincount(distinct // span, minlength=int(pair.max()) + 1)
    return (words == 0) | (n_items[pair] >= REPEATED_ANSWER)


def model_flags(model: Sequence, item: Sequence, key: Sequence, words: Sequence, length=None, l_ref=None,
                floor: float | None = DEFAULT_SHORT_FLOOR, reference: str = "L_ref",
                floor_applied: bool = True, far_short_gains: bool = True) -> dict[str, list[dict]]:
    """{model: [{"code", "message", "value"}]} for the models with degenerate answers (module doc).

    Args:
        model, item, key, words: shape (n,) per response: producing model, item, text identity
            (text or SHA-256), number of whitespace words.
        length: shape (n,) lengths in one unit (None: no far-short check); ``l_ref``: the
            reference length, a number or shape (n,) per response (win-rate mode: the
            baseline's answer to the same item) in the same unit.
        floor: the short-side floor (a ratio in (0, 1]); None: no far-short check.
        reference: how messages name L_ref.
        floor_applied: False when the calibration applied has no floor (stored before it existed):
            the far-short message says so instead of "credit capped".
        far_short_gains: False where far-short answers gain nothing (the score board,
            :data:`SCORE_NO_GAIN_CODES`): the message says "no gain from the calibration".
    Returns: only models with at least one flag; flags in :data:`CODES` order. ``value`` is the
    share (empty, constant) or the median length ratio (far short)."""
    floor = check_floor(floor)
    words = np.asarray(words, dtype=float).reshape(-1)
    (mc, names), (kc, _), (ic, _) = _codes(model), _codes(key), _codes(item)
    ratio = None
    if length is not None and l_ref is not None and floor is not None:
        le = np.maximum(np.asarray(length, dtype=float).reshape(-1), 1.0)
        ref = np.maximum(np.broadcast_to(np.asarray(l_ref, dtype=float), le.shape), 1.0)
        ratio = le / ref
    order = np.argsort(mc, kind="stable")  # each model's rows, in their order
    bounds = np.searchsorted(mc[order], np.arange(len(names) + 1))
    out: dict[str, list[dict]] = {}
    for c, mo in enumerate(names):  # models in order of first appearance
        idx = order[bounds[c]:bounds[c + 1]]
        n = int(idx.size)
        flags = []
        n_empty = int(np.sum(words[idx] == 0))
        if n_empty and n_empty / n >= EMPTY_SHARE:
            flags.append({"code": "empty_answers", "value": n_empty / n,
                          "message": f"empty answers: {n_empty} of {n} (no length credit)"})
        full = idx[words[idx] > 0]
        if full.size:  # the most common non-empty text (the first met of equally common ones)
            texts, first, counts = np.unique(kc[full], return_index=True, return_counts=True)
            tied = np.flatnonzero(counts == counts.max())
            j = tied[np.argmin(first[tied])]
            top, count = texts[j], int(counts[j])
            n_items = int(np.unique(ic[idx[kc[idx] == top]]).size)
            if n > 1 and n_items >= 2 and count / n >= CONSTANT_SHARE:
                flags.append({"code": "constant_answers", "value": count / n,
                              "message": f"same answer to {count / n:.0%} of items ({count} of {n}; no length credit)"})
        if ratio is not None:  # over the non-empty answers (empty ones have their own flag)
            r = ratio[full]
            r = r[np.isfinite(r)]
            if r.size:
                med = float(np.median(r))
                if med <= floor * floor:
                    flags.append({"code": "truncated_answers", "value": med,
                                  "message": f"truncated answers: median {med:.3f} of {reference}, at or below {floor * floor:g} "
                                             f"(the floor squared; no gain from the calibration)"})
                elif med < floor:
                    cap = ("no gain from the calibration" if not far_short_gains else
                           f"credit capped at {floor:g} of {reference}" if floor_applied else
                           "this calibration has no floor: refit to cap their credit")
                    flags.append({"code": "far_short_answers", "value": med,
                                  "message": f"answers below the short-side floor: median {med:.2f} of {reference} "
                                             f"({cap})"})
        if flags:
            out[mo] = flags
    return out


def family_flags(per_model: dict[str, list[dict]]) -> list[dict]:
    """One flag per code over all models of a family (fit, report, check): ``{"code", "message",
    "models"}``, the message listing each flagged model with its own message
    (``"empty-model: empty answers: 30 of 30 (no length credit)"``, several joined by "; ")."""
    by_code: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for mo in sorted(per_model):
        for f in per_model[mo]:
            by_code[f["code"]].append((mo, f["message"]))
    return [{"code": code, "models": [mo for mo, _ in by_code[code]],
             "message": "; ".join(f"{mo}: {msg}" for mo, msg in by_code[code])}
            for code in CODES if by_code.get(code)]
