"""Judgment distributions: the probability a judge gives to every verdict, not only its greedy one.

A stored distribution (the ``distribution`` JSON column of ``rating`` and
``pairwise_judgment``; docs/rating.md) is a plain JSON object::

    {"probs": {"1": 0.01, "2": 0.0, ..., "10": 0.02},   # normalised over the scale (sum 1)
     "outside": 0.07,                                   # mass that fell outside the scale
     "source": "top_logprobs", "k": 20}                 # how it was read

- ``probs``: pointwise, one entry per integer of the judge's scale (keys the value as text,
  ``"1"`` .. ``"10"``), zero where the judge gave the value no visible probability; pairwise,
  the canonical verdicts ``"a"``, ``"b"``, ``"tie"`` (whatever the order shown: the row's
  ``position`` says which response came first). The entries sum to 1.
- ``outside``: the probability the judge gave to anything that is not a verdict of the scale
  at the verdict position (other tokens; with ``top_logprobs`` also every token the endpoint
  did not list), in [0, 1]. ``probs`` is the rest, renormalised.
- ``source``: ``"top_logprobs"`` (an API judge's alternatives for the verdict token; ``k``:
  how many the endpoint returned) or ``"forward"`` (judgecal's own forward pass of the local
  model, :mod:`judgecal.loglik.verdicts`: every verdict of the scale scored as a whole
  continuation after the verdict prefix, so multi-token verdicts such as ``10`` = ``1`` + ``0``
  are exact; ``prefix``: that prefix; ``greedy``: the verdict stored from the greedy text
  that decoding after the prefix writes, read as a served answer is read; None when that text
  is unparsed or its verdict is not a key, e.g. ``Rating: 15`` or ``Rating: 7.5``).

Pure functions; no I/O. :func:`expected` is the distribution's mean (the ``expected_score``
column), :func:`argmax` its mode.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Optional

from judgecal.judge.parse import PAIRWISE_MAP, _entry, normalize

PAIRWISE_KEYS = ("a", "b", "tie")
#: A judgment whose distribution puts less than this share of its probability on the verdicts
#: of the scale (``1 - outside``) is unparsed, whatever its text says (:func:`too_little_on_scale`):
#: the judge all but never writes a verdict there, so the verdict its text holds is no reading of
#: its judgment. SmolLM2-135M's ordinary readings keep at least ~0.45 on the scale (the rest is
#: continuations such as "10.5" or "10/10"); one that left the scale kept 2e-8.
MIN_IN_SCALE = 0.01
#: ``--summary mean`` / ``risk``: a scored row whose distribution puts at least this share outside
#: the scale is counted and warned about (its mean is over the in-scale rest, renormalised).
LARGE_OUTSIDE = 0.5
LETTERS = PAIRWISE_MAP  # verdict letter shown -> canonical verdict, by position
MAX_SCALE_VALUES = 1001  # integers a pointwise scale may hold for a distribution
SUM_TOLERANCE = 1e-6


def scale_values(scale_min: float, scale_max: float) -> list[int]:
    """The integers of the scale [``scale_min``, ``scale_max``], in order (the verdicts a
    pointwise distribution is over). Raises ValueError when there are none or more than
    :data:`MAX_SCALE_VALUES`."""
    lo, hi = math.ceil(scale_min), math.floor(scale_max)
    if hi < lo:
        raise ValueError(f"the scale [{scale_min:g}, {scale_max:g}] holds no integer verdict")
    if hi - lo + 1 > MAX_SCALE_VALUES:
        raise ValueError(f"the scale [{scale_min:g}, {scale_max:g}] holds {hi - lo + 1} integers; a distribution "
                         f"is kept over at most {MAX_SCALE_VALUES}")
    return list(range(lo, hi + 1))


def _finish(mass: dict[str, float], total: float, extra: dict[str, Any]) -> Optional[dict[str, Any]]:
    inside = sum(mass.values())
    if not inside > 0:
        return None
    outside = min(1.0, max(0.0, total - inside)) if total is not None else None
    return {"probs": {k: v / inside for k, v in mass.items()}, "outside": outside, **extra}


def from_top_logprobs(top: Sequence[Any], scale_min: float, scale_max: float) -> Optional[dict[str, Any]]:
    """The pointwise distribution from the ``top_logprobs`` of the verdict token (each
    ``{"token", "logprob"}`` in nats, or an object with those attributes): ``p = exp(logprob)``
    summed per scale value over the tokens that read as it (NFKC, surrounding space ignored,
    as :func:`judgecal.judge.parse.expected_score` reads them), normalised over the scale;
    ``outside`` = 1 - the scale's mass (unlisted tokens count as outside). None when no
    alternative is a value of the scale. Limitation: a tokenizer that splits ``10`` into
    ``1`` + ``0`` makes the first token read as 1 (the forward path has no such limit)."""
    values = scale_values(scale_min, scale_max)
    mass = {str(v): 0.0 for v in values}
    n = 0
    for e in top or []:
        token, lp = _entry(e)
        n += 1
        tok = normalize(token).strip()
        if not tok.isdecimal() or not math.isfinite(lp):
            continue
        key = str(int(tok))
        if key in mass:
            mass[key] += math.exp(lp)
    return _finish(mass, 1.0, {"source": "top_logprobs", "k": n})


def pairwise_from_top_logprobs(top: Sequence[Any], position: str) -> Optional[dict[str, Any]]:
    """The pairwise distribution from the ``top_logprobs`` of the verdict letter: the mass of
    the tokens reading as A, B and C (case and space ignored, as
    :func:`judgecal.judge.parse.soft_first_preference` reads them), mapped to the canonical
    verdicts by ``position`` ('ab': A = a; 'ba': A = b), normalised; ``outside`` as in
    :func:`from_top_logprobs`. None when no alternative is A, B or C."""
    letters = LETTERS[position]
    mass = {k: 0.0 for k in PAIRWISE_KEYS}
    n = 0
    for e in top or []:
        token, lp = _entry(e)
        n += 1
        letter = normalize(token).strip().upper()
        if letter in letters and math.isfinite(lp):
            mass[letters[letter]] += math.exp(lp)
    return _finish(mass, 1.0, {"source": "top_logprobs", "k": n})


def from_logliks(keys: Sequence[str], lls: Sequence[float], *, prefix: str, greedy: Optional[str]) -> Optional[dict[str, Any]]:
    """A distribution from the log-likelihood (nats) of each verdict, scored as a whole
    continuation after the verdict prefix (``keys[i]`` has ``lls[i]``): ``p_i = exp(ll_i)``
    normalised over the keys, ``outside`` = 1 - their sum. ``greedy``: the key the row stores
    from its greedy text (None: that text is unparsed or its verdict is no key). Exact in
    float64 whatever the magnitudes (log-sum-exp). None when every ll is -inf."""
    finite = [ll for ll in lls if math.isfinite(ll)]
    if not finite:
        return None
    top = max(finite)
    scaled = [math.exp(ll - top) if math.isfinite(ll) else 0.0 for ll in lls]
    z = sum(scaled)
    inside = math.exp(top) * z  # the scale's share of all probability (<= 1 up to rounding)
    probs = {k: s / z for k, s in zip(keys, scaled)}
    return {"probs": probs, "outside": min(1.0, max(0.0, 1.0 - inside)), "source": "forward", "prefix": prefix,
            "greedy": greedy}


def too_little_on_scale(dist: Optional[Mapping[str, Any]]) -> Optional[str]:
    """The reason a judgment with distribution ``dist`` is unparsed because less than
    :data:`MIN_IN_SCALE` of its probability is on the scale (``1 - outside``), or None (no
    distribution, ``outside`` unknown, or enough on the scale). Local (forward) and served
    (top_logprobs) distributions alike: :func:`judgecal.views.rate.read_row_output` applies it."""
    if not dist:
        return None
    out = dist.get("outside")
    if out is None or not isinstance(out, (int, float)) or not math.isfinite(out):
        return None
    inside = 1.0 - float(out)
    if inside >= MIN_IN_SCALE:
        return None
    hint = (" (a --verdict-prefix that stops short of where the verdict starts, e.g. without its trailing space, "
            "does this)" if dist.get("source") == "forward" else "")
    return (f"only {inside:.2g} of the judge's probability is on a verdict of the scale at the verdict position "
            f"({float(out):.8g} outside; below {MIN_IN_SCALE:g}): the verdict its text holds is no reading of "
            f"its judgment{hint}")


def expected(dist: Optional[Mapping[str, Any]]) -> Optional[float]:
    """The mean of a pointwise distribution, ``sum_v p_v v`` (None without one)."""
    if not dist or not dist.get("probs"):
        return None
    return float(sum(p * float(k) for k, p in dist["probs"].items()))


def argmax(dist: Optional[Mapping[str, Any]]) -> Optional[str]:
    """The most probable key of ``probs`` (the first in order on a tie); None without one."""
    if not dist or not dist.get("probs"):
        return None
    best, best_p = None, -1.0
    for k, p in dist["probs"].items():
        if p > best_p:
            best, best_p = k, p
    return best


def preference(dist: Optional[Mapping[str, Any]]) -> Optional[float]:
    """P(response_a preferred) of a pairwise distribution, ties counted half:
    ``p_a + p_tie / 2`` (None without one)."""
    if not dist or not dist.get("probs"):
        return None
    p = dist["probs"]
    return float(min(1.0, max(0.0, p.get("a", 0.0) + 0.5 * p.get("tie", 0.0))))


def score_key(score: float) -> Optional[str]:
    """The ``probs`` key of a pointwise score (``7.0`` -> ``"7"``); None when the score is not
    an integer (``7.5``: no verdict of the distribution)."""
    return str(int(score)) if math.isfinite(score) and float(score).is_integer() else None


def swap(dist: Optional[Mapping[str, Any]]) -> Optional[dict[str, Any]]:
    """A pairwise distribution with sides a and b swapped (the same judgment of (b, a)): the
    ``probs`` keys and the ``greedy`` verdict exchanged (``tie`` and the rest unchanged)."""
    if dist is None:
        return None
    flip = {"a": "b", "b": "a"}
    probs = dist.get("probs") or {}
    out = {**dist, "probs": {flip.get(k, k): v for k, v in probs.items()}}
    if isinstance(dist.get("greedy"), str):
        out["greedy"] = flip.get(dist["greedy"], dist["greedy"])
    return out


DIST_KEYS = frozenset({"probs", "outside", "source", "k", "prefix", "greedy"})


def check(value: Any, *, pairwise: bool, scale: Optional[tuple[float, float]] = None) -> Optional[str]:
    """Why ``value`` is not a valid stored distribution (None when it is): a JSON object with
    the keys of the module doc only; ``probs`` an object of probabilities in [0, 1] summing to
    1 (within 1e-6) over scale integers (pointwise, ``scale`` = (min, max)) or a/b/tie
    (pairwise); ``outside`` a probability or null; ``source``/``prefix``/``greedy`` text or
    null; ``k`` a non-negative integer or null."""
    if not isinstance(value, dict):
        return f"must be a JSON object, got {type(value).__name__}"
    unknown = sorted(set(value) - DIST_KEYS)
    if unknown:
        return f"has unknown key(s) {', '.join(map(repr, unknown))} (known: {', '.join(sorted(DIST_KEYS))})"
    probs = value.get("probs")
    if not isinstance(probs, dict) or not probs:
        return "needs 'probs', a non-empty JSON object"
    allowed = set(PAIRWISE_KEYS) if pairwise else None
    if not pairwise and scale is not None:
        try:
            allowed = {str(v) for v in scale_values(*scale)}
        except ValueError as exc:
            return str(exc)
    for k, p in probs.items():
        if allowed is not None and k not in allowed:
            what = "a, b, tie" if pairwise else f"the integers of the scale {scale[0]:g}-{scale[1]:g}"  # type: ignore[index]
            return f"'probs' key {k!r} is not a verdict ({what})"
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not (0.0 <= p <= 1.0):
            return f"'probs' value of {k!r} must be a probability in [0, 1], got {p!r}"
    if abs(sum(probs.values()) - 1.0) > SUM_TOLERANCE:
        return f"'probs' must sum to 1, sums to {sum(probs.values())!r}"
    out = value.get("outside")
    if out is not None and (isinstance(out, bool) or not isinstance(out, (int, float)) or not 0.0 <= out <= 1.0):
        return f"'outside' must be a probability in [0, 1] or null, got {out!r}"
    for key in ("source", "prefix", "greedy"):
        v = value.get(key)
        if v is not None and not isinstance(v, str):
            return f"{key!r} must be text or null, got {v!r}"
        if isinstance(v, str) and (len(v) > 200 or "\x00" in v):
            return f"{key!r} must be at most 200 characters without NUL"
    k = value.get("k")
    if k is not None and (isinstance(k, bool) or not isinstance(k, int) or not 0 <= k < 2**31):
        return f"'k' must be a non-negative integer or null, got {k!r}"
    return None
