"""judgecal's generic JSONL / CSV formats for users' own data (docs/data-formats.md).

One record per line (JSONL) or row (CSV, header row required). ``kind`` selects the fields:

- ``responses``: ``prompt``, ``model``, ``response``; optional ``task_family`` (else
  ``--task-family``), ``item_id``, ``reference``.
- ``ratings``: a response's fields plus ``judge``, ``scale_min``, ``scale_max`` and ``score``
  (empty/absent -> the rating is stored ``unparsed``, or as given by ``status``); optional
  ``status`` (ok|unparsed|failed), ``raw_output``, ``error``, ``sample_index`` (default 0),
  ``judge_model``, ``judge_endpoint`` (default ``import``), ``judge_prompt`` (default
  ``import``), ``judge_prompt_sha256``, ``judge_params`` (JSON object or its text).
- ``labels``: pointwise (``model``, ``response``, ``score``, ``scale_min``, ``scale_max``) or
  pairwise (``model_a``, ``response_a``, ``model_b``, ``response_b``, ``preference`` a|b|tie);
  plus ``prompt``, optional ``task_family``, ``annotator`` (default ``expert``), ``source``
  (default ``user``).
- ``pairs``: verbosity pairs: ``prompt``, ``concise_model``, ``concise``, ``verbose_model``,
  ``verbose``; optional ``task_family``.
- ``verdicts``: pairwise judge verdicts: ``prompt``, ``model_a``, ``response_a``, ``model_b``,
  ``response_b``, ``judge``, and ``preference`` (soft: the probability in [0, 1] that
  response_a is preferred) and/or ``verdict`` (a|b|tie; tie = 0.5); optional ``position``
  (ab|ba|na, default na = order shown not recorded), ``baseline`` (a|b: which side is the
  baseline model's answer), ``sample_index``, ``status`` (ok|unparsed|failed; a verdict
  without preference or verdict is stored ``unparsed``), ``raw_output``, ``error``,
  ``judge_model``, ``judge_endpoint``, ``judge_prompt``, ``judge_prompt_sha256``.
"""

from __future__ import annotations

import json
from pathlib import Path

from judgecal.errors import InputError, UsageError
from judgecal.importers.records import Fields, ImportBatch, JudgeSpec, RespRef, read_csv, read_jsonl

KINDS = ("responses", "ratings", "labels", "pairs", "verdicts")
_ITEM = {"task_family", "prompt", "item_id", "reference"}
FIELDS = {
    "responses": _ITEM | {"model", "response"},
    "ratings": _ITEM | {"model", "response", "judge", "score", "scale_min", "scale_max", "status", "raw_output", "error",
                        "sample_index", "judge_model", "judge_endpoint", "judge_prompt", "judge_prompt_sha256", "judge_params"},
    "labels": _ITEM | {"model", "response", "score", "scale_min", "scale_max", "model_a", "response_a", "model_b",
                       "response_b", "preference", "annotator", "source"},
    "pairs": _ITEM | {"concise_model", "concise", "verbose_model", "verbose"},
    "verdicts": _ITEM | {"model_a", "response_a", "model_b", "response_b", "judge", "preference", "verdict", "position",
                         "baseline", "sample_index", "status", "raw_output", "error", "judge_model", "judge_endpoint",
                         "judge_prompt", "judge_prompt_sha256"},
}
POSITION = {"ab": "ab", "ba": "ba", "na": "na"}
SIDE = {"a": "a", "b": "b"}
PREFERENCE = {"a": "a", "b": "b", "tie": "tie"}
STATUS = {"ok": "ok", "unparsed": "unparsed", "failed": "failed"}


def parse(path: Path, kind: str, *, fmt: str, family: str | None = None) -> ImportBatch:
    """Parse a generic JSONL (``fmt='jsonl'``) or CSV (``fmt='csv'``) file of ``kind``."""
    if kind not in KINDS:
        raise UsageError(f"--kind must be one of {', '.join(KINDS)}, got {kind!r}")
    path = Path(path)
    reader = read_jsonl if fmt == "jsonl" else read_csv
    batch = ImportBatch(source=f"{fmt}:{kind}")
    n = 0
    unknown: dict[str, int] = {}
    for line, obj in reader(path):
        f = Fields(obj, str(path), line)
        for key in obj:
            if key not in FIELDS[kind] and key not in unknown:
                unknown[key] = line
        fam = f.text("task_family", required=False) or family
        if not fam:
            raise f.fail("missing field 'task_family' (or pass --task-family)")
        prompt = f.text("prompt", allow_empty=False)
        ext, ref = f.text("item_id", required=False), f.text("reference", required=False)
        if ext is not None or ref is not None:
            batch.add_item(fam, prompt, external_id=ext, reference=ref)
        {"responses": _response, "ratings": _rating, "labels": _label, "pairs": _pair, "verdicts": _verdict}[kind](
            batch, f, fam, prompt)
        n += 1
    if n == 0:
        raise InputError("no records", source=str(path))
    if unknown:
        first = min(unknown.values())
        batch.warnings.append(
            f"{path}:{first}: fields not used by --kind {kind} were ignored: {', '.join(sorted(unknown))} "
            "(is --kind right? fields: docs/data-formats.md)")
    return batch


def _ref(batch: ImportBatch, f: Fields, fam: str, prompt: str, model_key: str, text_key: str) -> RespRef:
    return batch.add_response(RespRef(fam, prompt, f.text(model_key, allow_empty=False), f.text(text_key)))


def _response(batch, f, fam, prompt):
    _ref(batch, f, fam, prompt, "model", "response")


def _scale(f: Fields) -> tuple[float, float]:
    lo, hi = f.number("scale_min"), f.number("scale_max")
    if not lo < hi:
        raise f.fail(f"scale_min {lo:g} must be below scale_max {hi:g}")
    return lo, hi


def _rating(batch, f, fam, prompt):
    ref = _ref(batch, f, fam, prompt, "model", "response")
    lo, hi = _scale(f)
    params = f.obj.get("judge_params")
    if isinstance(params, str):
        try:
            params = json.loads(params)
        except json.JSONDecodeError:
            raise f.fail("field 'judge_params' is not valid JSON") from None
    if params is not None and not isinstance(params, dict):
        raise f.fail("field 'judge_params' must be a JSON object")
    name = f.text("judge", allow_empty=False)
    judge = JudgeSpec(
        name=name,
        model=f.text("judge_model", required=False) or name,
        endpoint=f.text("judge_endpoint", required=False) or "import",
        prompt_name=f.text("judge_prompt", required=False) or "import",
        prompt_sha256=f.text("judge_prompt_sha256", required=False),
        params_json=json.dumps(params or {}, sort_keys=True),
        scale_min=lo,
        scale_max=hi,
    )
    score = f.number("score", required=False)
    status = f.choice("status", STATUS, required=False) or ("ok" if score is not None else "unparsed")
    if status == "ok":
        if score is None:
            raise f.fail("status 'ok' needs a 'score'")
        if not lo <= score <= hi:
            raise f.fail(f"score {score:g} is outside the declared scale {lo:g}-{hi:g}")
    elif score is not None:
        raise f.fail(f"status {status!r} must not carry a 'score'")
    batch.ratings.append(
        {
            "judge": judge,
            "response": ref,
            "sample_index": f.integer("sample_index", required=False) or 0,
            "status": status,
            "score": score,
            "raw_output": f.text("raw_output", required=False),
            "error": f.text("error", required=False),
        }
    )


def _label(batch, f, fam, prompt):
    annotator = f.text("annotator", required=False) or "expert"
    source = f.text("source", required=False) or "user"
    if f.has("preference") or f.has("response_a"):
        a = _ref(batch, f, fam, prompt, "model_a", "response_a")
        b = _ref(batch, f, fam, prompt, "model_b", "response_b")
        if a == b:
            raise f.fail("response_a and response_b are the same response")
        batch.pair_labels.append((a, b, f.choice("preference", PREFERENCE), annotator, source))
    else:
        ref = _ref(batch, f, fam, prompt, "model", "response")
        lo, hi = _scale(f)
        score = f.number("score")
        if not lo <= score <= hi:
            raise f.fail(f"score {score:g} is outside the declared scale {lo:g}-{hi:g}")
        batch.point_labels.append((ref, score, lo, hi, annotator, source))


def _pair(batch, f, fam, prompt):
    c = _ref(batch, f, fam, prompt, "concise_model", "concise")
    v = _ref(batch, f, fam, prompt, "verbose_model", "verbose")
    if c == v:
        raise f.fail("the concise and verbose responses are the same response")
    batch.verbosity_pairs.append((c, v))


def _verdict(batch, f, fam, prompt):
    a = _ref(batch, f, fam, prompt, "model_a", "response_a")
    b = _ref(batch, f, fam, prompt, "model_b", "response_b")
    if a == b:
        raise f.fail("response_a and response_b are the same response")
    name = f.text("judge", allow_empty=False)
    judge = JudgeSpec(name=name, model=f.text("judge_model", required=False) or name,
                      endpoint=f.text("judge_endpoint", required=False) or "import",
                      prompt_name=f.text("judge_prompt", required=False) or "import",
                      prompt_sha256=f.text("judge_prompt_sha256", required=False), scale_min=0.0, scale_max=1.0,
                      mode="pairwise")
    pref = f.number("preference", required=False)
    verdict = f.choice("verdict", PREFERENCE, required=False)
    if pref is not None and not 0.0 <= pref <= 1.0:
        raise f.fail(f"field 'preference' must be a probability in [0, 1] (P(response_a preferred)), got {pref:g}")
    if pref is not None and verdict is not None:
        implied = "a" if pref > 0.5 else "b" if pref < 0.5 else "tie"
        if implied != verdict:
            raise f.fail(f"verdict {verdict!r} contradicts preference {pref:g} (which means {implied!r})")
    if pref is None and verdict is not None:
        pref = {"a": 1.0, "b": 0.0, "tie": 0.5}[verdict]
    if verdict is None and pref is not None:
        verdict = "a" if pref > 0.5 else "b" if pref < 0.5 else "tie"
    status = f.choice("status", STATUS, required=False) or ("ok" if pref is not None else "unparsed")
    if status == "ok" and pref is None:
        raise f.fail("status 'ok' needs a 'preference' or a 'verdict'")
    if status != "ok" and pref is not None:
        raise f.fail(f"status {status!r} must not carry a preference or verdict")
    batch.verdicts.append({
        "judge": judge, "a": a, "b": b, "position": f.choice("position", POSITION, required=False) or "na",
        "sample_index": f.integer("sample_index", required=False) or 0, "status": status, "verdict": verdict,
        "preference": pref, "baseline_side": f.choice("baseline", SIDE, required=False), "source": str(f.source),
        "raw_output": f.text("raw_output", required=False), "error": f.text("error", required=False),
    })
