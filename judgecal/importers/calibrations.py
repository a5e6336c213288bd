"""``judgecal import jsonl|csv --kind calibrations``: the calibrations ``judgecal export
calibrations`` writes, read back (docs/data-formats.md, "Calibrations").

One record per line (JSONL) or row (CSV): ``task_family``; the judge's identity as ratings
and verdicts carry it (``judge``, ``judge_model``, ``judge_endpoint`` -- stored without
secrets --, ``judge_prompt``, ``judge_prompt_sha256``, ``judge_params``, ``scale_min``,
``scale_max``, ``judge_mode`` pointwise|pairwise); ``created_at`` (ISO 8601 with an offset:
when the calibration was fitted; with the family and the judge, a calibration's natural key);
the fit: ``method`` (default polylog), ``objective`` (pairwise|pointwise), ``length_unit``
(tokens|words|chars|bytes), ``tokenizer``, ``l_ref`` (> 0), ``gamma`` (>= 0), ``p``, ``p_min``,
``p_max`` (p_min <= p <= p_max), ``n``, ``converged``, ``loss``, ``folds``, ``n_bootstrap``,
``seed``, ``density_exemption`` (booleans: JSON true/false, CSV true/false/True/False),
``params``, ``metrics``, ``data`` (JSON objects, or their JSON text in CSV) and
``judgecal_version``. The clipping scale of the stored row is the judge's scale.

A record that conflicts with an earlier one of the file (the same family, judge and
``created_at`` with other values) is refused at FILE:LINE; an exact repeat is kept once and
counted. Writing (:mod:`judgecal.db.ingest_calibrations`): a calibration already stored with
the same values is counted, not added; one stored with other values is refused at FILE:LINE.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

from judgecal.importers.records import DuplicateKey, Fields, ImportBatch, Seen, read_csv, read_jsonl, unique_keys

FIELDS = frozenset({"task_family", "judge", "judge_model", "judge_endpoint", "judge_prompt", "judge_prompt_sha256",
                    "judge_params", "scale_min", "scale_max", "judge_mode", "created_at", "method", "objective",
                    "length_unit", "tokenizer", "l_ref", "gamma", "p", "p_min", "p_max", "n", "converged", "loss",
                    "folds", "n_bootstrap", "seed", "density_exemption", "params", "metrics", "data",
                    "judgecal_version"})
OBJECTIVES = {"pairwise": "pairwise", "pointwise": "pointwise"}
UNITS = {u: u for u in ("tokens", "words", "chars", "bytes")}
MODES = {"pointwise": "pointwise", "pairwise": "pairwise"}
_BOOL = {True: True, False: False, "true": True, "false": False, "True": True, "False": False}
#: the columns compared when a calibration is met again (in the file or in the database)
VALUE_FIELDS = ("method", "objective", "length_unit", "tokenizer", "l_ref", "gamma", "p", "p_min", "p_max", "n",
                "converged", "loss", "folds", "n_bootstrap", "seed", "density_exemption", "params", "metrics", "data",
                "judgecal_version")


def canonical_json(value) -> str:
    """A JSON value as canonical text (keys sorted), to compare stored and given objects
    (NaN, which is not equal to itself, compares equal as text)."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def _object(f: Fields, name: str) -> dict:
    value = f.obj.get(name)
    if value is None or value == "":
        raise f.fail(f"missing field {name!r} (a JSON object)")
    if isinstance(value, str):
        try:
            value = json.loads(value, object_pairs_hook=unique_keys)
        except DuplicateKey as exc:
            raise f.fail(f"field {name!r} (JSON text): {exc}") from None
        except (json.JSONDecodeError, RecursionError, ValueError):
            raise f.fail(f"field {name!r} is not valid JSON") from None
    if not isinstance(value, dict):
        raise f.fail(f"field {name!r} must be a JSON object")
    return value


def _boolean(f: Fields, name: str, default: bool | None = None) -> bool:
    value = f.obj.get(name)
    if value is None or value == "":
        if default is None:
            raise f.fail(f"missing field {name!r} (true or false)")
        return default
    try:
        return _BOOL[value]
    except (KeyError, TypeError):
        raise f.fail(f"field {name!r} must be true or false, got {value!r}") from None


def _created_at(f: Fields) -> dt.datetime:
    text = f.name("created_at", max_len=64)
    try:
        when = dt.datetime.fromisoformat(text)
    except ValueError:
        raise f.fail(f"field 'created_at' is not an ISO 8601 time: {text!r}") from None
    if when.tzinfo is None:
        raise f.fail(f"field 'created_at' needs an offset (e.g. +00:00): {text!r}")
    return when.astimezone(dt.timezone.utc)


def record(f: Fields, family: str) -> dict:
    """One calibration record, checked: {"task_family", "judge" (JudgeSpec), "created_at"
    (aware UTC datetime), then the :data:`VALUE_FIELDS`}. Raises InputError at FILE:LINE."""
    from judgecal.importers.generic import _judge, _scale

    lo, hi = _scale(f)
    judge = _judge(f, lo, hi, f.choice("judge_mode", MODES, required=False) or "pointwise")
    out = {"task_family": family, "judge": judge, "created_at": _created_at(f),
           "method": f.name("method", required=False, max_len=50) or "polylog",
           "objective": f.choice("objective", OBJECTIVES), "length_unit": f.choice("length_unit", UNITS),
           "tokenizer": f.name("tokenizer", required=False, max_len=500)}
    for name in ("l_ref", "gamma", "p", "p_min", "p_max", "loss"):
        out[name] = f.number(name)
    for name in ("n", "folds", "n_bootstrap"):
        out[name] = f.integer(name)
        if out[name] < 0:
            raise f.fail(f"field {name!r} must be >= 0, got {out[name]}")
    out["seed"] = f.integer("seed", required=False)
    out["converged"] = _boolean(f, "converged")
    out["density_exemption"] = _boolean(f, "density_exemption", False)
    if not out["l_ref"] > 0:
        raise f.fail(f"l_ref must be above 0, got {out['l_ref']!r}")
    if out["gamma"] < 0:
        raise f.fail(f"gamma must be >= 0, got {out['gamma']!r}")
    if not out["p_min"] <= out["p"] <= out["p_max"]:
        raise f.fail(f"p {out['p']!r} must lie in [p_min, p_max] = [{out['p_min']!r}, {out['p_max']!r}]")
    for name in ("params", "metrics", "data"):
        out[name] = _object(f, name)
    out["judgecal_version"] = f.name("judgecal_version", max_len=50)
    return out


def parse(path: Path, *, fmt: str, family: str | None = None) -> ImportBatch:
    """Parse a calibrations file (module doc); ``batch.calibrations`` holds the records
    (:func:`record`), ``batch.records`` the count read. ``family``: the --task-family for
    records without one (a record naming another is refused). Raises InputError at FILE:LINE."""
    path = Path(path)
    batch = ImportBatch(source=f"{fmt}:calibrations")
    batch.origin, batch.files = str(path), [str(path)]
    at = batch.at.setdefault("calibrations", [])
    seen, unknown, blank, header, n = Seen(), {}, [], [], 0
    for line, obj in (read_jsonl(path, blank) if fmt == "jsonl" else read_csv(path, blank, header)):
        f = Fields(obj, str(path), line)
        for key in obj:
            if key not in FIELDS:
                unknown.setdefault(key, line)
        fam = f.family() or family
        if family is not None and fam != family:
            raise f.fail(f"the record's task_family {fam!r} conflicts with --task-family {family!r}: give the option "
                         "only for records without a task_family, or remove the field")
        if not fam:
            raise f.fail("missing field 'task_family' (or pass --task-family)")
        rec = record(f, fam)
        value = tuple(canonical_json(rec[k]) if k in ("params", "metrics", "data") else rec[k] for k in VALUE_FIELDS)
        if seen.check(f, ("calibration", fam, rec["judge"], rec["created_at"]), value, "calibration",
                      "family, judge and created_at"):
            batch.calibrations.append(rec)
            at.append(line)
        n += 1
    batch.records = n
    if n == 0:
        unknown = {h: 1 for h in header if h not in FIELDS}
    if unknown:
        batch.warnings.append(f"{path}:{min(unknown.values())}: fields not used by --kind calibrations were ignored: "
                              f"{', '.join(sorted(unknown))} (is --kind right? fields: docs/data-formats.md)")
    seen.warn_repeats(batch, path)
    if blank:
        shown = ", ".join(str(x) for x in blank[:10]) + (", ..." if len(blank) > 10 else "")
        batch.warnings.append(f"{path}: {len(blank)} blank line(s) skipped (lines {shown})")
    return batch
