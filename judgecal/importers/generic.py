"""judgecal's generic JSONL / CSV formats for users' own data (docs/data-formats.md).

One record per line (JSONL) or row (CSV, header row required). ``kind`` selects the fields:

- ``responses``: ``prompt``, ``model``, ``response``; optional ``task_family`` (else
  ``--task-family``), ``item_id``, ``reference``.
- ``ratings``: a response's fields plus ``judge``, ``scale_min``, ``scale_max`` and ``score``
  (empty/absent -> the rating is stored ``unparsed``, or as given by ``status``); optional
  ``status`` (ok|unparsed|failed), ``raw_output``, ``error``, ``sample_index`` (default 0),
  ``judge_model``, ``judge_endpoint`` (default ``import``; stored without credentials, query
  string or fragment: :func:`judgecal.secrets.endpoint_without_secrets`), ``judge_prompt`` (default
  ``import``), ``judge_prompt_sha256``, ``judge_params`` (JSON object or its text),
  ``distribution`` (the judgment distribution, a JSON object or its text:
  :mod:`judgecal.judge.distribution`; not on a failed rating) and ``expected_score`` (its
  mean; derived from the distribution when absent, refused when it contradicts it); the call's
  provenance ``attempts``, ``latency_s``, ``prompt_tokens``, ``completion_tokens`` (what
  ``judgecal export ratings`` writes).
- ``labels``: pointwise (``model``, ``response``, ``score``, ``scale_min``, ``scale_max``) or
  pairwise (``model_a``, ``response_a``, ``model_b``, ``response_b``, ``preference`` a|b|tie);
  plus ``prompt``, optional ``task_family``, ``annotator`` (default ``expert``), ``source``
  (default ``user``).
- ``pairs``: verbosity pairs: ``prompt``, ``concise_model``, ``concise``, ``verbose_model``,
  ``verbose``; optional ``task_family``, ``source`` (where the pair came from; default the
  import's own, ``jsonl:pairs`` or ``csv:pairs``).
- ``verdicts``: pairwise judge verdicts: ``prompt``, ``model_a``, ``response_a``, ``model_b``,
  ``response_b``, ``judge``, and ``preference`` (soft: the probability in [0, 1] that
  response_a is preferred) and/or ``verdict`` (a|b|tie; tie = 0.5; given both, a preference of
  0 or 1 must be the verdict's side, while a soft preference strictly between 0 and 1 is the
  judge's probability and the verdict its answer, which may differ: a greedy 'tie' stored with
  preference 0.4976 by ``rate --pairwise --top-logprobs``); optional ``position``
  (ab|ba|na, default na = order shown not recorded), ``baseline`` (a|b: which side is the
  baseline model's answer), ``sample_index``, ``status`` (ok|unparsed|failed; a verdict
  without preference or verdict is stored ``unparsed``), ``raw_output``, ``error``,
  ``judge_model``, ``judge_endpoint``, ``judge_prompt``, ``judge_prompt_sha256``,
  ``judge_params``, ``source`` (default when the field is absent: this file's path; null in
  JSONL or an empty CSV cell: none, a verdict ``judgecal rate`` collected), ``latency_s``, ``attempts``,
  ``prompt_tokens``, ``completion_tokens``, ``distribution`` (P(a), P(b), P(tie) as the judge
  gave them; refused when it contradicts ``preference``) (what ``judgecal export verdicts``
  writes).
- ``calibrations``: what ``judgecal export calibrations`` writes (:mod:`judgecal.importers.calibrations`).

Names (task family, model, item id, annotator) are at most 200 characters, judge names,
models and prompt names 300, endpoints and label sources 500: longer values are refused
with FILE:LINE (PostgreSQL would refuse them; SQLite is held to the same rule).

Duplicates inside one file (docs/data-formats.md): a record that CONFLICTS with an earlier one
(the same rating -- response, judge, sample -- with another score/status/output; the same
label -- responses, annotator, source -- with another preference or score; the same verdict
-- responses, judge, sample, position -- with another outcome; the same item with another
item_id or reference; the same item_id on two prompts of a family) is refused with FILE:LINE
naming the earlier line, and nothing is imported. A record that REPEATS an earlier one
exactly is kept once, and the import warns with the count and their lines.
"""

from __future__ import annotations

import json
from pathlib import Path

from judgecal.errors import InputError, UsageError
from judgecal.secrets import endpoint_without_secrets
from judgecal.judge.distribution import check as check_distribution
from judgecal.judge.distribution import expected as expected_of
from judgecal.judge.distribution import preference as dist_preference
from judgecal.judge.distribution import swap as swap_distribution
from judgecal.judge.distribution import MIN_IN_SCALE, too_little_on_scale
from judgecal.importers.records import (
    DuplicateKey,
    unique_keys,
    JUDGE_NAME_MAX,
    SOURCE_MAX,
    Fields,
    ImportBatch,
    JudgeSpec,
    RespRef,
    Seen,
    Verdict,
    check_family,
    read_csv,
    read_jsonl,
    show_value,
)

KINDS = ("responses", "ratings", "labels", "pairs", "verdicts")
_ITEM = {"task_family", "prompt", "item_id", "reference"}
FIELDS = {
    "responses": _ITEM | {"model", "response"},
    "ratings": _ITEM | {"model", "response", "judge", "score", "scale_min", "scale_max", "status", "raw_output", "error",
                        "sample_index", "judge_model", "judge_endpoint", "judge_prompt", "judge_prompt_sha256", "judge_params",
                        "expected_score", "distribution", "attempts", "latency_s", "prompt_tokens", "completion_tokens"},
    "labels": _ITEM | {"model", "response", "score", "scale_min", "scale_max", "model_a", "response_a", "model_b",
                       "response_b", "preference", "annotator", "source"},
    "pairs": _ITEM | {"concise_model", "concise", "verbose_model", "verbose", "source"},
    "verdicts": _ITEM | {"model_a", "response_a", "model_b", "response_b", "judge", "preference", "verdict", "position",
                         "baseline", "sample_index", "status", "raw_output", "error", "judge_model", "judge_endpoint",
                         "judge_prompt", "judge_prompt_sha256", "judge_params", "judge_mode", "scale_min", "scale_max",
                         "source", "latency_s", "attempts", "prompt_tokens", "completion_tokens", "distribution"},
}
POSITION = {"ab": "ab", "ba": "ba", "na": "na"}
SIDE = {"a": "a", "b": "b"}
PREFERENCE = {"a": "a", "b": "b", "tie": "tie"}
STATUS = {"ok": "ok", "unparsed": "unparsed", "failed": "failed"}
SWAP = {"a": "b", "b": "a", "tie": "tie", "ab": "ba", "ba": "ab", "na": "na", None: None}


def swap_verdict(value: dict) -> dict:
    """A verdict's values (status, verdict, preference, baseline_side, distribution...) with
    sides a and b swapped."""
    pref = value.get("preference")
    return {**value, "verdict": SWAP[value.get("verdict")], "baseline_side": SWAP[value.get("baseline_side")],
            "preference": None if pref is None else 1.0 - pref, "distribution": swap_distribution(value.get("distribution"))}


def _distribution(f: Fields, *, pairwise: bool, scale: tuple[float, float] | None = None) -> dict | None:
    """The ``distribution`` field: a JSON object (JSONL) or its JSON text (CSV), checked by
    :func:`judgecal.judge.distribution.check`; None when absent."""
    value = f.obj.get("distribution")
    if value is None or value == "":
        return None
    if isinstance(value, str):
        if len(value) > 100_000:
            raise f.fail("field 'distribution' is over 100,000 characters")
        try:
            value = json.loads(value, object_pairs_hook=unique_keys)
        except DuplicateKey as exc:  # (before ValueError: it is one) the last value would win silently
            raise f.fail(f"field 'distribution' (JSON text): {exc}") from None
        except (json.JSONDecodeError, RecursionError, ValueError):
            raise f.fail("field 'distribution' is not valid JSON") from None
    why = check_distribution(value, pairwise=pairwise, scale=scale)
    if why:
        raise f.fail(f"field 'distribution' {why}")
    return value


#: the reason counted (``batch.unparsed``, the import's ``stored_unparsed``) for a rating or verdict
#: given as ok whose distribution has less than MIN_IN_SCALE on the scale
OFF_SCALE = (f"less than {MIN_IN_SCALE:g} of the distribution's probability on the scale: stored unparsed "
             "(score or verdict dropped), as `rate --logprobs` stores such a judgment")


def _off_scale(status: str, dist: dict | None, error: str | None) -> str | None:
    """The error to store when a rating or verdict given as ``ok`` has a distribution with
    less than :data:`judgecal.judge.distribution.MIN_IN_SCALE` on the scale (it is then stored
    unparsed; the caller counts it in ``batch.unparsed`` under :data:`OFF_SCALE`), else None.
    The stored error is the file's own error, if any, then the reason rate gives
    (:func:`judgecal.judge.distribution.too_little_on_scale`)."""
    why = too_little_on_scale(dist) if status == "ok" else None
    if why is None:
        return None
    return f"{error}; {why}" if error else why


def parse(path: Path, kind: str, *, fmt: str, family: str | None = None) -> ImportBatch:
    """Parse a generic JSONL (``fmt='jsonl'``) or CSV (``fmt='csv'``) file of ``kind``; the
    batch's ``records`` counts the records read. A file without records is what ``judgecal
    export`` writes when there is nothing to export (JSONL: no line; CSV: the header row only):
    it parses as an empty batch (``records`` 0; a CSV header naming fields ``kind`` does not use
    is a warning, as for any record), so every export imports back. A CSV file without even a
    header row is refused (:func:`read_csv`). Raises UsageError for a bad kind or --task-family,
    InputError naming FILE:LINE for a bad or conflicting record (module doc)."""
    if kind == "calibrations":  # no item: a format of its own (judgecal.importers.calibrations)
        from judgecal.importers import calibrations

        check_family(family)
        return calibrations.parse(Path(path), fmt=fmt, family=family)
    if kind not in KINDS:
        raise UsageError(f"--kind must be one of {', '.join(KINDS)}, calibrations, got {kind!r}")
    check_family(family)
    path = Path(path)
    batch = ImportBatch(source=f"{fmt}:{kind}")
    n = 0
    unknown: dict[str, int] = {}
    seen = Seen()
    items: dict[tuple, tuple[int, dict]] = {}
    ids: dict[tuple[str, str], tuple[int, str]] = {}
    handler = {"responses": _response, "ratings": _rating, "labels": _label, "pairs": _pair, "verdicts": _verdict}[kind]
    batch.origin = str(path)
    batch.files = [str(path)]
    rows = [(name, getattr(batch, name), batch.at.setdefault(name, []))
            for name in ("verdicts", "ratings", "pair_labels", "point_labels", "verbosity_pairs")]
    blank: list[int] = []
    header: list[str] = []  # a CSV file's columns (read even when it holds no data row)
    for line, obj in (read_jsonl(path, blank) if fmt == "jsonl" else read_csv(path, blank, header)):
        f = Fields(obj, str(path), line)
        for key in obj:
            if key not in FIELDS[kind] and key not in unknown:
                unknown[key] = line
        fam = f.family() or family
        if family is not None and fam != family:  # an explicit option is never silently overridden by a record
            raise f.fail(f"the record's task_family {fam!r} conflicts with --task-family {family!r}: give the option "
                         "only for records without a task_family, or remove the field")
        if not fam:
            raise f.fail("missing field 'task_family' (or pass --task-family)")
        prompt = f.text("prompt", allow_empty=False)
        ext, ref = f.name("item_id", required=False), f.text("reference", required=False)
        if ext is not None or ref is not None:
            _check_item(f, items, ids, fam, prompt, ext, ref)
            batch.add_item(fam, prompt, external_id=ext, reference=ref)
        handler(batch, f, fam, prompt, seen)
        for _, stored, at in rows:  # each row's line, for a conflict with the database (judgecal.db.ingest)
            if len(at) < len(stored):
                at.append(line)
        n += 1
    batch.records = n
    if n == 0:  # an export of nothing (JSONL: no line; CSV: the header row only) imports as nothing
        unknown = {h: 1 for h in header if h not in FIELDS[kind]}
    if unknown:
        first = min(unknown.values())
        batch.warnings.append(
            f"{path}:{first}: fields not used by --kind {kind} were ignored: {', '.join(sorted(unknown))} "
            "(is --kind right? fields: docs/data-formats.md)")
    seen.warn_repeats(batch, path)
    if blank:
        shown = ", ".join(str(x) for x in blank[:10]) + (", ..." if len(blank) > 10 else "")
        batch.warnings.append(f"{path}: {len(blank)} blank line(s) skipped (lines {shown})")
    return batch


def _check_item(f: Fields, items: dict, ids: dict, fam: str, prompt: str, ext: str | None, ref: str | None) -> None:
    """An item's item_id and reference must agree wherever the item appears; an item_id names
    one prompt per family."""
    line, cur = items.setdefault((fam, prompt), (f.line, {"item_id": None, "reference": None}))
    for name, value in (("item_id", ext), ("reference", ref)):
        if value is None:
            continue
        if cur[name] is None:
            cur[name] = value
        elif cur[name] != value:
            raise f.fail(f"the item's {name} conflicts with line {line} ({show_value(cur[name])} there, {show_value(value)} here)")
    if ext is not None:
        where, other = ids.setdefault((fam, ext), (f.line, prompt))
        if other != prompt:
            raise f.fail(f"item_id {ext!r} names another prompt on line {where} (one item_id, one prompt per family)")


def _ref(batch: ImportBatch, f: Fields, fam: str, prompt: str, model_key: str, text_key: str) -> RespRef:
    return batch.add_response(RespRef(fam, prompt, f.name(model_key), f.text(text_key)))


def _response(batch, f, fam, prompt, seen):
    ref = _ref(batch, f, fam, prompt, "model", "response")
    seen.check(f, ("response", ref), None, "response")


def _scale(f: Fields) -> tuple[float, float]:
    lo, hi = f.number("scale_min"), f.number("scale_max")
    if not lo < hi:
        raise f.fail(f"scale_min {lo:g} must be below scale_max {hi:g}")
    return lo, hi


def _params(f: Fields) -> str:
    params = f.obj.get("judge_params")
    if isinstance(params, str):
        try:
            params = json.loads(params, object_pairs_hook=unique_keys)
        except DuplicateKey as exc:
            raise f.fail(f"field 'judge_params' (JSON text): {exc}") from None
        except (json.JSONDecodeError, RecursionError, ValueError):
            raise f.fail("field 'judge_params' is not valid JSON") from None
    if params is not None and not isinstance(params, dict):
        raise f.fail("field 'judge_params' must be a JSON object")
    return json.dumps(params or {}, sort_keys=True)


def _judge(f: Fields, lo: float, hi: float, mode: str = "pointwise") -> JudgeSpec:
    name = f.name("judge", max_len=JUDGE_NAME_MAX)
    return JudgeSpec(
        name=name,
        model=f.name("judge_model", required=False, max_len=JUDGE_NAME_MAX) or name,
        # stored without credentials, query string or fragment, as `judgecal rate` stores it
        endpoint=endpoint_without_secrets(f.name("judge_endpoint", required=False, max_len=SOURCE_MAX) or "") or "import",
        prompt_name=f.name("judge_prompt", required=False, max_len=JUDGE_NAME_MAX) or "import",
        prompt_sha256=f.name("judge_prompt_sha256", required=False, max_len=64),
        params_json=_params(f),
        scale_min=lo,
        scale_max=hi,
        mode=mode,
    )


def _judge_key(judge: JudgeSpec) -> tuple:
    return (judge.name, judge.model, judge.endpoint, judge.prompt_name, judge.prompt_sha256, judge.params_json,
            judge.scale_min, judge.scale_max, judge.mode)


def _call_fields(f: Fields) -> dict:
    """The call's provenance of a rating or verdict, as ``judgecal rate`` stored it and
    ``judgecal export`` writes it: ``attempts`` (HTTP attempts, default 0: imported, never
    called), ``latency_s`` (seconds of the last attempt), ``prompt_tokens`` and
    ``completion_tokens`` (the endpoint's usage); none may be negative."""
    out = {"attempts": f.integer("attempts", required=False) or 0, "latency_s": f.number("latency_s", required=False),
           "prompt_tokens": f.integer("prompt_tokens", required=False),
           "completion_tokens": f.integer("completion_tokens", required=False)}
    for name, value in out.items():
        if value is not None and value < 0:
            raise f.fail(f"field {name!r} must be >= 0, got {value!r}")
    return out


def _rating(batch, f, fam, prompt, seen):
    ref = _ref(batch, f, fam, prompt, "model", "response")
    lo, hi = _scale(f)
    judge = _judge(f, lo, hi)
    score = f.number("score", required=False)
    status = f.choice("status", STATUS, required=False) or ("ok" if score is not None else "unparsed")
    if status == "ok":
        if score is None:
            raise f.fail("status 'ok' needs a 'score'")
        if not lo <= score <= hi:
            raise f.fail(f"score {score:g} is outside the declared scale {lo:g}-{hi:g}")
    elif score is not None:
        raise f.fail(f"status {status!r} must not carry a 'score'")
    dist = _distribution(f, pairwise=False, scale=(lo, hi))
    expected = f.number("expected_score", required=False)
    if status == "failed" and (dist is not None or expected is not None):
        raise f.fail("a failed rating carries no 'distribution' or 'expected_score' (the call gave no answer)")
    if expected is not None and not lo <= expected <= hi:
        raise f.fail(f"expected_score {expected:g} is outside the declared scale {lo:g}-{hi:g}")
    if dist is not None:
        mean = expected_of(dist)
        if expected is None:
            expected = mean
        elif abs(expected - mean) > 1e-6 * max(1.0, abs(mean)):
            raise f.fail(f"expected_score {expected!r} contradicts the distribution, whose mean is {mean!r}")
    error = f.text("error", required=False)
    off = _off_scale(status, dist, error)
    if off is not None:  # as rate --logprobs: no score from outside the scale
        status, score, error = "unparsed", None, off
    row = {
        "judge": judge,
        "response": ref,
        "sample_index": f.integer("sample_index", required=False) or 0,
        "status": status,
        "score": score,
        "raw_output": f.text("raw_output", required=False),
        "error": error,
        "expected_score": expected,
        "distribution": dist,
        **_call_fields(f),
    }
    value = {k: row[k] for k in ("status", "score", "raw_output", "error", "expected_score", "distribution")}
    if seen.check(f, ("rating", ref, _judge_key(judge), row["sample_index"]), value, "rating"):
        batch.ratings.append(row)
        if off is not None:
            batch.unparsed.setdefault(OFF_SCALE, []).append(f"{f.source}:{f.line}")


def _label(batch, f, fam, prompt, seen):
    annotator = f.name("annotator", required=False) or "expert"
    source = f.name("source", required=False, max_len=SOURCE_MAX) or "user"
    if f.has("preference") or f.has("response_a"):
        a = _ref(batch, f, fam, prompt, "model_a", "response_a")
        b = _ref(batch, f, fam, prompt, "model_b", "response_b")
        if a == b:
            raise f.fail("response_a and response_b are the same response")
        pref = f.choice("preference", PREFERENCE)
        if seen.check_pair(f, "pairwise label", a, b, (annotator, source), pref, "pairwise label", swap=SWAP.get):
            batch.pair_labels.append((a, b, pref, annotator, source))
    else:
        ref = _ref(batch, f, fam, prompt, "model", "response")
        lo, hi = _scale(f)
        score = f.number("score")
        if not lo <= score <= hi:
            raise f.fail(f"score {score:g} is outside the declared scale {lo:g}-{hi:g}")
        if seen.check(f, ("pointwise label", ref, annotator, source), (score, lo, hi), "pointwise label"):
            batch.point_labels.append((ref, score, lo, hi, annotator, source))


def _pair(batch, f, fam, prompt, seen):
    c = _ref(batch, f, fam, prompt, "concise_model", "concise")
    v = _ref(batch, f, fam, prompt, "verbose_model", "verbose")
    if c == v:
        raise f.fail("the concise and verbose responses are the same response")
    source = f.name("source", required=False, max_len=SOURCE_MAX)
    if seen.check_pair(f, "pair", c, v, (), None, "verbosity pair", swapped_is_conflict=True):
        batch.verbosity_pairs.append((c, v))
        if source:  # where the pair came from (what `export pairs` writes); default: this import (jsonl:pairs)
            batch.pair_sources[(c, v)] = source


def _verdict(batch, f, fam, prompt, seen):
    a = _ref(batch, f, fam, prompt, "model_a", "response_a")
    b = _ref(batch, f, fam, prompt, "model_b", "response_b")
    if a == b:
        raise f.fail("response_a and response_b are the same response")
    mode = f.choice("judge_mode", {"pairwise": "pairwise"}, required=False) or "pairwise"
    lo = f.number("scale_min", required=False)
    hi = f.number("scale_max", required=False)
    lo, hi = 0.0 if lo is None else lo, 1.0 if hi is None else hi
    if not lo < hi:
        raise f.fail(f"scale_min {lo!r} must be below scale_max {hi!r} (defaults 0 and 1)")
    judge = _judge(f, lo, hi, mode)
    pref = f.number("preference", required=False)
    verdict = f.choice("verdict", PREFERENCE, required=False)
    if pref is not None and not 0.0 <= pref <= 1.0:
        raise f.fail(f"field 'preference' must be a probability in [0, 1] (P(response_a preferred)), got {pref!r}")
    if pref is not None and verdict is not None and pref in (0.0, 1.0) and verdict != ("a" if pref else "b"):
        # a hard preference is a side; a soft one (strictly between 0 and 1) is the judge's
        # probability, and the verdict its answer: a greedy 'tie' with P(a) + P(tie)/2 = 0.4976
        # is what `rate --pairwise --top-logprobs` stores (module doc)
        raise f.fail(f"verdict {verdict!r} contradicts preference {pref:g} (which means {'a' if pref else 'b'!r}: "
                     "a preference of 0 or 1 is a side, only a soft one may differ from the verdict)")
    if pref is None and verdict is not None:
        pref = {"a": 1.0, "b": 0.0, "tie": 0.5}[verdict]
    if verdict is None and pref is not None:
        verdict = "a" if pref > 0.5 else "b" if pref < 0.5 else "tie"
    status = f.choice("status", STATUS, required=False) or ("ok" if pref is not None else "unparsed")
    if status == "ok" and pref is None:
        raise f.fail("status 'ok' needs a 'preference' or a 'verdict'")
    if status != "ok" and pref is not None:
        raise f.fail(f"status {status!r} must not carry a preference or verdict")
    dist = _distribution(f, pairwise=True)
    if dist is not None:
        if status == "failed":
            raise f.fail("a failed verdict carries no 'distribution' (the call gave no answer)")
        implied = dist_preference(dist)
        if pref is not None and abs(pref - implied) > 1e-6:
            raise f.fail(f"preference {pref!r} contradicts the distribution, whose P(a) + P(tie)/2 is {implied!r}")
    error = f.text("error", required=False)
    off = _off_scale(status, dist, error)
    if off is not None:  # as rate --pairwise --logprobs: no verdict from outside the scale
        status, verdict, pref, error = "unparsed", None, None, off
    row = Verdict(
        judge, a, b, sample_index=f.integer("sample_index", required=False) or 0,
        position=f.choice("position", POSITION, required=False) or "na", status=status, verdict=verdict,
        preference=pref, baseline_side=f.choice("baseline", SIDE, required=False),
        # a source given as null (JSONL) or an empty cell (CSV) is a verdict judgecal rate
        # collected (source NULL, what `export verdicts` writes for it): kept so, not this file
        source=(f.name("source", required=False, max_len=SOURCE_MAX) or str(f.source)[:SOURCE_MAX]
                if "source" not in f.obj or f.obj["source"] is not None else None),
        raw_output=f.text("raw_output", required=False), error=error,
        **_call_fields(f), distribution=dist,
    )
    value = {k: getattr(row, k) for k in ("status", "verdict", "preference", "baseline_side", "raw_output", "error",
                                          "distribution")}
    if seen.check_pair(f, "verdict", a, b, (_judge_key(judge), row.sample_index, row.position), value, "verdict",
                       swap=swap_verdict, swap_rest=lambda r: (r[0], r[1], SWAP[r[2]])):
        batch.verdicts.append(row)
        if off is not None:
            batch.unparsed.setdefault(OFF_SCALE, []).append(f"{f.source}:{f.line}")
