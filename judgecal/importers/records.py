"""Plain records produced by the importers, and line-aware JSON / JSONL / CSV readers.

Every reader reports a bad record as ``InputError("FILE:LINE: reason")``."""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from judgecal.errors import InputError


@dataclass(frozen=True)
class RespRef:
    """A response by its natural key: task family, item prompt, producing model, text."""

    family: str
    prompt: str
    model: str
    text: str


@dataclass(frozen=True)
class JudgeSpec:
    """Identity of a judge whose scores are imported (not collected by ``judgecal rate``)."""

    name: str
    model: str
    endpoint: str
    prompt_name: str
    scale_min: float
    scale_max: float
    mode: str = "pointwise"
    prompt_sha256: str | None = None  # default: SHA-256 of prompt_name (imported protocols)
    params_json: str = "{}"  # sampling parameters as canonical JSON


@dataclass
class ImportBatch:
    """Everything one import adds. Items are keyed by (family, prompt)."""

    source: str
    items: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    responses: dict[RespRef, None] = field(default_factory=dict)
    # pair_labels: (a, b, preference, annotator, source)
    pair_labels: list[tuple[RespRef, RespRef, str, str, str]] = field(default_factory=list)
    # point_labels: (response, score, scale_min, scale_max, annotator, source)
    point_labels: list[tuple[RespRef, float, float, float, str, str]] = field(default_factory=list)
    ratings: list[dict[str, Any]] = field(default_factory=list)
    verbosity_pairs: list[tuple[RespRef, RespRef]] = field(default_factory=list)
    # pairwise judge verdicts: dicts with judge (JudgeSpec, mode pairwise), a, b (RespRef),
    # position ('ab' | 'ba' | 'na'), sample_index, status, verdict, preference (P(a preferred)),
    # baseline_side ('a' | 'b' | None), raw_output, error, latency_s, source
    verdicts: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    # rows of the input deliberately not imported: {reason: [FILE:LINE, ...]}, reported by every output
    skipped: dict[str, list[str]] = field(default_factory=dict)

    def skip(self, reason: str, where: str) -> None:
        """Count a record left out of the import, with its reason and FILE:LINE."""
        self.skipped.setdefault(reason, []).append(where)

    def add_item(self, family: str, prompt: str, *, external_id: str | None = None, reference: str | None = None) -> None:
        """Register an item (first occurrence wins for external id and reference)."""
        cur = self.items.setdefault((family, prompt), {"external_id": external_id, "reference": reference})
        if cur["reference"] is None and reference is not None:
            cur["reference"] = reference

    def add_response(self, ref: RespRef) -> RespRef:
        """Register a response (and its item)."""
        self.add_item(ref.family, ref.prompt)
        self.responses[ref] = None
        return ref


def line_of(text: str, offset: int) -> int:
    """1-based line number of a character offset."""
    return text.count("\n", 0, offset) + 1


def read_json_array(path: Path) -> list[tuple[int, Any]]:
    """The elements of a JSON file whose top level is an array, each with its 1-based line.

    Raises InputError naming FILE:LINE for invalid JSON or a top level that is not an array."""
    text = read_text(path)
    dec = json.JSONDecoder()
    pos = _skip_ws(text, 0)
    if pos >= len(text) or text[pos] != "[":
        raise InputError("expected a JSON array of records", source=str(path), line=line_of(text, pos))
    pos = _skip_ws(text, pos + 1)
    out: list[tuple[int, Any]] = []
    if pos < len(text) and text[pos] == "]":
        return out
    # line numbers counted incrementally (one pass over the text, not one per record)
    line, counted = 1, 0
    while True:
        try:
            obj, end = dec.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            raise InputError(f"invalid JSON: {exc.msg}", source=str(path), line=exc.lineno) from None
        line += text.count("\n", counted, pos)
        counted = pos
        out.append((line, obj))
        pos = _skip_ws(text, end)
        if pos < len(text) and text[pos] == ",":
            pos = _skip_ws(text, pos + 1)
            continue
        if pos < len(text) and text[pos] == "]":
            rest = _skip_ws(text, pos + 1)
            if rest != len(text):
                raise InputError("unexpected data after the JSON array", source=str(path), line=line_of(text, rest))
            return out
        raise InputError("invalid JSON: expected ',' or ']' between records", source=str(path), line=line_of(text, pos))


def _skip_ws(text: str, pos: int) -> int:
    n = len(text)
    while pos < n and text[pos] in " \t\r\n":
        pos += 1
    return pos


def read_text(path: Path) -> str:
    """File text as UTF-8 (BOM allowed). Raises InputError for a missing or undecodable file."""
    try:
        return Path(path).read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise InputError("no such file", source=str(path)) from None
    except IsADirectoryError:
        raise InputError("is a folder, expected a file", source=str(path)) from None
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text ({exc.reason} at byte {exc.start})", source=str(path)) from None


def read_jsonl(path: Path) -> Iterator[tuple[int, dict]]:
    """(line, object) for every non-blank line of a JSONL file; each must be a JSON object."""
    for lineno, line in enumerate(read_text(path).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"invalid JSON: {exc.msg} (column {exc.colno})", source=str(path), line=lineno) from None
        if not isinstance(obj, dict):
            raise InputError(f"expected a JSON object, got {type(obj).__name__}", source=str(path), line=lineno)
        yield lineno, obj


def read_csv(path: Path) -> Iterator[tuple[int, dict]]:
    """(line, row dict) for every data row of a CSV file with a header row. Empty cells are
    None. The line is the physical line where the row starts (quoted newlines counted)."""
    text = read_text(path)
    reader = csv.reader(text.splitlines(keepends=True))
    try:
        header = next(reader)
    except StopIteration:
        raise InputError("empty CSV file (no header row)", source=str(path), line=1) from None
    except csv.Error as exc:
        raise InputError(f"invalid CSV: {exc}", source=str(path), line=1) from None
    header = [h.strip() for h in header]
    while True:
        start = reader.line_num + 1
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            raise InputError(f"invalid CSV: {exc}", source=str(path), line=start) from None
        if not any(cell.strip() for cell in row):
            continue
        if len(row) != len(header):
            raise InputError(
                f"row has {len(row)} fields, the header has {len(header)}", source=str(path), line=start
            )
        yield start, {k: (v if v != "" else None) for k, v in zip(header, row)}


class Fields:
    """Typed access to one record's fields; every error names FILE:LINE and the field."""

    def __init__(self, obj: Any, source: str, line: int):
        if not isinstance(obj, dict):
            raise InputError(f"expected a JSON object, got {type(obj).__name__}", source=source, line=line)
        self.obj, self.source, self.line = obj, source, line

    def fail(self, reason: str) -> InputError:
        return InputError(reason, source=self.source, line=self.line)

    def has(self, name: str) -> bool:
        return self.obj.get(name) is not None

    def text(self, name: str, *, required: bool = True, allow_empty: bool = True) -> str | None:
        """A string field (required unless told); a non-string value is an error."""
        value = self.obj.get(name)
        if value is None:
            if required:
                raise self.fail(f"missing field {name!r}")
            return None
        if not isinstance(value, str):
            raise self.fail(f"field {name!r} must be a string, got {type(value).__name__} {json.dumps(value)[:40]}")
        if "\x00" in value:
            raise self.fail(f"field {name!r} contains a NUL character (PostgreSQL cannot store it)")
        if not value.isascii():
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                raise self.fail(f"field {name!r} contains an unpaired surrogate (not valid Unicode text)") from None
        if not allow_empty and not value.strip():
            raise self.fail(f"field {name!r} is empty")
        return value

    def number(self, name: str, *, required: bool = True) -> float | None:
        """A numeric field; numeric strings (as CSV gives) are accepted; NaN/inf are errors."""
        value = self.obj.get(name)
        if value is None:
            if required:
                raise self.fail(f"missing field {name!r}")
            return None
        if isinstance(value, bool):
            raise self.fail(f"field {name!r} must be a number, got a boolean")
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise self.fail(f"field {name!r} must be a number, got {json.dumps(value)[:40]}") from None
        if number != number or abs(number) > 1e15:
            raise self.fail(f"field {name!r} must be a finite number of reasonable size, got {value}")
        return number

    def integer(self, name: str, *, required: bool = True) -> int | None:
        """An integer field (integral numeric strings accepted)."""
        number = self.number(name, required=required)
        if number is None:
            return None
        if number != int(number):
            raise self.fail(f"field {name!r} must be an integer, got {number}")
        if not 0 <= number < 2**31:
            raise self.fail(f"field {name!r} must be between 0 and {2**31 - 1}, got {int(number)}")
        return int(number)

    def choice(self, name: str, allowed: dict[str, str], *, required: bool = True) -> str | None:
        """A field whose (string or integer) value must be one of ``allowed`` (mapped to its value)."""
        value = self.obj.get(name)
        if value is None:
            if required:
                raise self.fail(f"missing field {name!r}")
            return None
        key = str(value).strip().lower()
        if key not in allowed:
            raise self.fail(f"field {name!r}: unknown value {json.dumps(value)} (expected one of {', '.join(allowed)})")
        return allowed[key]
