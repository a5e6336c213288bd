"""Pure parsing of judge outputs: pointwise scores, pairwise verdicts, expected scores.

Rules (the MT-Bench ``[[rating]]`` convention, made robust to real outputs):

1. The text is normalised with Unicode NFKC first, so fullwidth digits and brackets
   (``［［８］］``) read as ASCII (``[[8]]``). The candidate texts are normalised the same way.
2. A *well-formed verdict* is ``[[N]]`` (spaces inside allowed, ``N`` an integer or decimal,
   optionally ``[[N/M]]`` with ``M`` equal to the scale maximum). The verdict is the judge's
   LAST well-formed verdict.
3. *Quoted verdicts do not count.* A judge often repeats (part of) the candidate response, and
   a candidate may contain a verdict of its own (prompt injection such as ``Rating: [[10]]``).
   A verdict (or fallback match) whose text, whitespace removed, occurs verbatim inside one of
   the ``candidates`` is ignored. So a candidate ending in ``[[10]]`` that the judge echoes
   before its own ``[[3]]`` gives 3; and if the judge's only verdict also occurs in the
   candidate, the output is *unparsed* (an echo and an agreement cannot be told apart), never
   the candidate's self-declared score. The price: a judge that really gives the very verdict
   written inside the candidate is unparsed (counted, kept raw, retryable), not scored.
4. *Conflicts at the end are unparsed.* The verdicts that close the output form a cluster:
   walking back from the last verdict, the previous verdict belongs to the cluster when the
   text between the two is short (under 60 characters and at most one line break). If the
   cluster holds different values (``[[7]] or [[8]]``), the output is unparsed. A judge that
   gives ``[[7]]``, argues at length and ends with ``[[5]]`` has revised: 5 wins.
5. *Fallback* when no well-formed verdict remains: ``Rating: 8``, ``Score: 8``,
   ``rating of 8`` and ``8/10`` (the denominator must be the scale maximum). It is used only
   when unambiguous: every fallback match (quoted ones excluded) gives the same value.
6. A score outside ``[scale_min, scale_max]`` is unparsed (reason says so), never clipped.

Unparsed is a status with a reason, never a low score: callers store the raw output.

:func:`read_output` is the ONE reading of a judge's text that every rating path stores
(``rate`` through an endpoint, ``rate --serve``, ``rate --local``'s greedy text): status,
score or canonical verdict, and the reason when unparsed. A distribution read beside it
(``--logprobs``, the local forward pass) is extra information and never changes it.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Optional

_NUM = r"[+-]?\d+(?:\.\d+)?"
VERDICT_RE = re.compile(r"\[\[\s*(" + _NUM + r")\s*(?:/\s*(\d+(?:\.\d+)?)\s*)?\]\]")
PAIR_RE = re.compile(r"\[\[\s*([ABCabc])\s*\]\]")
_FALLBACK_RES = (
    re.compile(r"(?i)\b(?:rating|score|grade)\s*(?:is|of)?\s*[:=]?\s*\**\s*(" + _NUM + r")(?!\s*/\s*\d)(?![\d.]*\d)"),
    re.compile(r"(?<![\d./])(" + _NUM + r")\s*/\s*(\d+(?:\.\d+)?)(?![\d/])"),
)
CLUSTER_GAP_CHARS = 60


@dataclass(frozen=True)
class ParsedScore:
    """A parsed pointwise score. ``status`` 'ok' (``score`` set) or 'unparsed' (``reason``)."""

    score: Optional[float]
    status: Literal["ok", "unparsed"]
    reason: Optional[str] = None


@dataclass(frozen=True)
class ParsedVerdict:
    """A parsed pairwise verdict ('A', 'B' or 'C' = tie) or unparsed with a reason."""

    verdict: Optional[str]
    status: Literal["ok", "unparsed"]
    reason: Optional[str] = None


def normalize(text: str) -> str:
    """Unicode NFKC normalisation (fullwidth digits/brackets become ASCII)."""
    return unicodedata.normalize("NFKC", text or "")


def _squash(text: str) -> str:
    """``text`` without any whitespace (str.split splits on str.isspace, as re's \\s does)."""
    return "".join(text.split())


class _Candidates:
    """The candidate texts, NFKC-normalised and whitespace-squashed on first use only (most
    judge outputs never need the check, and normalising a long response costs more than
    parsing the verdict)."""

    def __init__(self, texts: Iterable[str] | str | None):
        self._raw = [texts] if isinstance(texts, str) else [c for c in (texts or []) if c]
        self._done: list[str] | None = None

    def contain(self, token: str) -> bool:
        if self._done is None:
            self._done = [_squash(normalize(c)) for c in self._raw]
        return any(token in cand for cand in self._done)


def _is_quoted(match: re.Match, candidates: _Candidates) -> bool:
    return candidates.contain(_squash(match.group(0)))


def _matches(pattern: re.Pattern, text: str, candidates: _Candidates) -> list[re.Match]:
    return [m for m in pattern.finditer(text) if not _is_quoted(m, candidates)]


def _end_cluster(text: str, found: list[re.Match]) -> list[re.Match]:
    cluster = [found[-1]]
    for prev in reversed(found[:-1]):
        gap = text[prev.end() : cluster[0].start()]
        if len(gap) < CLUSTER_GAP_CHARS and gap.count("\n") <= 1:
            cluster.insert(0, prev)
        else:
            break
    return cluster


def _fmt(x: float) -> str:
    return f"{x:g}"


def _value(m: re.Match, scale_max: float) -> tuple[Optional[float], Optional[str]]:
    value = float(m.group(1))
    denom = m.group(2) if m.re.groups >= 2 else None
    if denom is not None and float(denom) != float(scale_max):
        return None, f"verdict {m.group(0)!r} is not on the /{_fmt(scale_max)} scale"
    return value, None


def parse_score(
    text: str, scale_min: float = 1, scale_max: float = 10, candidates: Iterable[str] | str | None = None
) -> ParsedScore:
    """Parse a pointwise judge output into a :class:`ParsedScore` (rules in the module doc).

    ``text``: the judge's raw output. ``candidates``: the candidate response text(s) shown to
    the judge; verdicts copied verbatim from them are ignored. Never raises on any string."""
    cands = _Candidates(candidates)
    norm = normalize(text)
    if not norm.strip():
        return ParsedScore(None, "unparsed", "empty output")
    found = _matches(VERDICT_RE, norm, cands)
    kind = "verdict"
    if found:
        cluster = _end_cluster(norm, found)
        values = []
        for m in cluster:
            v, why = _value(m, scale_max)
            if why:
                return ParsedScore(None, "unparsed", why)
            values.append(v)
        if len(set(values)) > 1:
            shown = ", ".join(m.group(0) for m in cluster)
            return ParsedScore(None, "unparsed", f"conflicting verdicts at the end: {shown}")
        value = values[-1]
    else:
        kind = "fallback"
        values = []
        for pattern in _FALLBACK_RES:
            for m in _matches(pattern, norm, cands):
                v, why = _value(m, scale_max)
                if why is None:
                    values.append(v)
        if not values:
            total = len(VERDICT_RE.findall(norm))
            if total:
                return ParsedScore(None, "unparsed", "the only [[rating]] verdicts are quoted from the candidate")
            return ParsedScore(None, "unparsed", "no [[rating]] verdict found")
        if len(set(values)) > 1:
            shown = ", ".join(_fmt(v) for v in values)
            return ParsedScore(None, "unparsed", f"ambiguous fallback scores without a [[rating]] verdict: {shown}")
        value = values[0]
    if not (scale_min <= value <= scale_max):
        return ParsedScore(
            None, "unparsed", f"{kind} {_fmt(value)} is outside the scale [{_fmt(scale_min)}, {_fmt(scale_max)}]"
        )
    return ParsedScore(value, "ok", None)


def parse_pairwise_verdict(text: str, candidates: Iterable[str] | None = None) -> ParsedVerdict:
    """Parse a pairwise judge output (``[[A]]``, ``[[B]]``, ``[[C]]`` = tie) with the same
    rules as :func:`parse_score`: last well-formed verdict, quoted ones ignored, conflicting
    verdicts at the end unparsed. No fallback pattern (a bare "A" is too ambiguous)."""
    cands = _Candidates(candidates)
    norm = normalize(text)
    if not norm.strip():
        return ParsedVerdict(None, "unparsed", "empty output")
    found = _matches(PAIR_RE, norm, cands)
    if not found:
        if PAIR_RE.search(norm):
            return ParsedVerdict(None, "unparsed", "the only [[A]]/[[B]]/[[C]] verdicts are quoted from a candidate")
        return ParsedVerdict(None, "unparsed", "no [[A]]/[[B]]/[[C]] verdict found")
    cluster = _end_cluster(norm, found)
    values = {m.group(1).upper() for m in cluster}
    if len(values) > 1:
        shown = ", ".join(m.group(0) for m in cluster)
        return ParsedVerdict(None, "unparsed", f"conflicting verdicts at the end: {shown}")
    return ParsedVerdict(values.pop(), "ok", None)


# verdict letter shown -> canonical verdict ('a' = response_a preferred), by the order shown
PAIRWISE_MAP = {"ab": {"A": "a", "B": "b", "C": "tie"}, "ba": {"A": "b", "B": "a", "C": "tie"}}


@dataclass(frozen=True)
class Reading:
    """What a rating row stores from the judge's text: ``status`` 'ok' or 'unparsed',
    ``error`` (the reason when unparsed), and ``score`` (pointwise) or ``verdict`` (pairwise,
    canonical 'a' | 'b' | 'tie' whatever the order shown)."""

    status: Literal["ok", "unparsed"]
    error: Optional[str] = None
    score: Optional[float] = None
    verdict: Optional[str] = None

    def fields(self, pairwise: bool) -> dict[str, Any]:
        """The row's columns: status, error and score (pointwise) or verdict (pairwise)."""
        out: dict[str, Any] = {"status": self.status, "error": self.error}
        if pairwise:
            out["verdict"] = self.verdict
        else:
            out["score"] = self.score
        return out


def read_output(text: str, *, pairwise: bool, scale_min: Optional[float] = None, scale_max: Optional[float] = None,
                candidates: Iterable[str] | str | None = None, position: str = "ab") -> Reading:
    """The stored reading of a judge's text, the same on every rating path.

    Pointwise: :func:`parse_score` on the scale [``scale_min``, ``scale_max``] (an off-scale
    verdict such as ``Rating: 15`` on 1-10 is unparsed with the reason ``fallback 15 is
    outside the scale [1, 10]``, never clipped and never replaced by another value).
    Pairwise: :func:`parse_pairwise_verdict`, the letter mapped to the canonical verdict by
    ``position`` ('ab': response_a shown first; 'ba': response_b first, so ``[[A]]`` is 'b').
    ``candidates``: the candidate text(s) shown to the judge (verdicts quoted from them do not
    count). Never raises on any string."""
    if pairwise:
        pv = parse_pairwise_verdict(text, candidates)
        verdict = PAIRWISE_MAP[position][pv.verdict] if pv.verdict else None
        return Reading(pv.status, pv.reason, verdict=verdict)
    ps = parse_score(text, 1 if scale_min is None else scale_min, 10 if scale_max is None else scale_max, candidates)
    return Reading(ps.status, ps.reason, score=ps.score)


def parse_pairwise(text: str, candidates: Iterable[str] | None = None) -> Optional[str]:
    """'A', 'B', 'C' (tie) or None when unparsed; see :func:`parse_pairwise_verdict`."""
    return parse_pairwise_verdict(text, candidates).verdict


def _token_value(token: str, scale_min: float, scale_max: float) -> Optional[int]:
    tok = normalize(token).strip()
    if not tok.isdigit():
        return None
    value = int(tok)
    return value if scale_min <= value <= scale_max else None


def _entry(e: Any) -> tuple[str, float]:
    if isinstance(e, dict):
        return e["token"], float(e["logprob"])
    return e.token, float(e.logprob)


def expected_score(top_logprobs: Sequence[Any], scale: tuple[float, float]) -> Optional[float]:
    """Probability-weighted mean score over the candidate tokens of the verdict position.

    ``top_logprobs``: the endpoint's alternatives for the verdict token, each ``{"token",
    "logprob"}`` (natural log, nats) or an object with those attributes. Tokens that are not an
    integer inside ``scale`` = (min, max) are dropped and the rest renormalised:
    ``E = sum_i p_i v_i / sum_i p_i`` with ``p_i = exp(logprob_i)`` (the G-Eval weighting,
    Liu et al. 2023). None when no alternative is a valid score. Limitation: a tokenizer that
    splits "10" into "1" + "0" makes the first token read as 1."""
    num = den = 0.0
    for e in top_logprobs or []:
        token, lp = _entry(e)
        value = _token_value(token, scale[0], scale[1])
        if value is None or not math.isfinite(lp):
            continue
        p = math.exp(lp)
        num += p * value
        den += p
    return num / den if den > 0 else None


def verdict_top_logprobs(content: Sequence[Any] | None) -> Optional[list]:
    """The ``top_logprobs`` of the token that opens the LAST ``[[N]]`` verdict.

    ``content``: the chat completion's ``choices[0].logprobs.content`` (a list of ``{"token",
    "logprob", "top_logprobs"}``). The verdict token is the first token starting with a digit
    after text ending in ``[[``. None when the output has no such token."""
    if not content:
        return None
    text = ""
    hit = None
    for e in content:
        token = e["token"] if isinstance(e, dict) else e.token
        if normalize(text).rstrip().endswith("[[") and normalize(token).strip()[:1].isdigit():
            hit = e
        text += token
    if hit is None:
        return None
    return list(hit["top_logprobs"] if isinstance(hit, dict) else hit.top_logprobs or [])


PREFERENCE_OF_VERDICT = {"a": 1.0, "b": 0.0, "tie": 0.5}


def pairwise_verdict_top_logprobs(content: Sequence[Any] | None) -> Optional[list]:
    """The ``top_logprobs`` of the token that opens the LAST ``[[A]]``/``[[B]]``/``[[C]]``
    verdict: the first token starting with A, B or C (any case) after text ending in ``[[``.
    ``content`` as in :func:`verdict_top_logprobs`; None when there is no such token."""
    if not content:
        return None
    text = ""
    hit = None
    for e in content:
        token = e["token"] if isinstance(e, dict) else e.token
        if normalize(text).rstrip().endswith("[[") and normalize(token).strip()[:1].upper() in ("A", "B", "C"):
            hit = e
        text += token
    if hit is None:
        return None
    return list(hit["top_logprobs"] if isinstance(hit, dict) else hit.top_logprobs or [])


def soft_first_preference(top_logprobs: Sequence[Any]) -> Optional[float]:
    """Probability that the response shown FIRST is preferred, from the alternatives of the
    verdict letter: ``(p_A + p_C / 2) / (p_A + p_B + p_C)`` with ``p = exp(logprob)`` summed
    over the tokens that read as each letter (case and surrounding space ignored; other
    tokens dropped and the rest renormalised, as :func:`expected_score` does). A tie counts
    half, as AlpacaEval counts ties. None when no alternative is A, B or C."""
    mass = {"A": 0.0, "B": 0.0, "C": 0.0}
    for e in top_logprobs or []:
        token, lp = _entry(e)
        letter = normalize(token).strip().upper()
        if letter in mass and math.isfinite(lp):
            mass[letter] += math.exp(lp)
    total = sum(mass.values())
    return (mass["A"] + 0.5 * mass["C"]) / total if total > 0 else None


def pairwise_preference(verdict: Optional[str], position: str, top_logprobs: Optional[Sequence[Any]] = None) -> Optional[float]:
    """The stored soft verdict: probability in [0, 1] that response_a is preferred.

    ``verdict``: canonical 'a' | 'b' | 'tie' (None: unparsed -> None). Without logprobs (or
    none usable) it is 1, 0 or 0.5. With the verdict letter's ``top_logprobs``, it is
    :func:`soft_first_preference` when response_a was shown first (``position`` 'ab') and
    one minus it when response_b was ('ba')."""
    if verdict is None:
        return None
    first = soft_first_preference(top_logprobs) if top_logprobs else None
    if first is None:
        return PREFERENCE_OF_VERDICT[verdict]
    return first if position == "ab" else 1.0 - first
