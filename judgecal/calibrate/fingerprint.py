"""Fingerprint of the data a calibration was fitted on: the SHA-256 of a canonical JSON text.

Pure: records in, a hex digest out. The records come from the database layer
(:func:`judgecal.db.fitdata.fingerprint_records`) already free of row ids; lists are sorted here
too, so the digest does not depend on the order anything was read in, and the same data in
another database (SQLite, PostgreSQL, an export imported elsewhere) gives the same digest.
"""

from __future__ import annotations

import hashlib
import json

#: Prefix of every digest, naming the canonical form (a new form gets a new prefix).
VERSION = "fp1"


def _canonical(obj):
    """Numbers as floats (3 and 3.0 are the same score or length), dict keys as text; lists keep
    their order (a record's fields are positional)."""
    if isinstance(obj, dict):
        return {str(k): _canonical(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_canonical(v) for v in obj]
    if isinstance(obj, bool) or obj is None or isinstance(obj, str):
        return obj
    if isinstance(obj, (int, float)):
        return float(obj)
    raise TypeError(f"cannot fingerprint a {type(obj).__name__}")


def _text(obj) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=True, ensure_ascii=True)


def fingerprint(records: dict) -> str:
    """``"fp1:" + SHA-256`` of ``records`` ({name: list of records, or a plain value}) in
    canonical form: each top-level list sorted (records are a set: their order never counts),
    numbers as floats, keys sorted, no whitespace."""
    canon = {}
    for key, value in _canonical(records).items():
        canon[key] = sorted(value, key=_text) if isinstance(value, list) else value
    return f"{VERSION}:{hashlib.sha256(_text(canon).encode('ascii')).hexdigest()}"
