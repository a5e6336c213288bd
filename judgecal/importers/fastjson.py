"""Read only the named fields of every record of a large JSON array file.

AlpacaEval's annotations.json files are about 90% token log-probabilities (``raw_completion``'s
``logprobs``) that no importer reads: building Python objects for them cost more than the rest
of an import. :func:`read_json_fields` parses the file with msgspec, builds Python objects only
for the fields a :class:`msgspec.Struct` schema names, and gives each record its 1-based line,
exactly as :func:`judgecal.importers.records.read_json_array` does.

The values are the objects Python's json module builds for them (a schema's fields are typed
``Any``), so the importers' checks and messages are the same on both paths. Whatever msgspec
reads differently from Python's json module, or refuses, is handed to
:func:`~judgecal.importers.records.read_json_array`, whose FILE:LINE errors and results are the
reference: invalid JSON, NaN/Infinity, numbers out of range, unpaired surrogates, deep nesting,
text that is not UTF-8; a record that does not fit the schema (not an object, a field of
another shape) is decoded by Python's json module alone.
"""

from __future__ import annotations

import hashlib
import json
import re
import typing
from pathlib import Path
from collections.abc import Iterator
from typing import Any

import msgspec

from judgecal.importers.records import FileDigest, Record, read_bytes, read_json_array

_WS = re.compile(rb"[ \t\r\n]*")
_BOM = b"\xef\xbb\xbf"
_RAW_LIST = msgspec.json.Decoder(list[msgspec.Raw])


class JsonArray:
    """The elements of a JSON array file (``objects``) and their 1-based lines (``line(k)``),
    counted only when first asked for (an import that reports nothing never needs them)."""

    def __init__(self, objects: list[Any], lines: list[int] | None = None, data: bytes | None = None,
                 digest: FileDigest | None = None):
        self.objects = objects
        self._lines = lines
        self._data = data
        self.digest = digest  # SHA-256 and size of the bytes parsed (None: not computed)

    def __len__(self) -> int:
        return len(self.objects)

    def line(self, k: int) -> int:
        """The line on which element ``k`` starts."""
        if self._lines is None:
            self._lines = _element_lines(self._data)
            self._data = None
        return self._lines[k]

    def __iter__(self) -> Iterator[tuple[int, Any]]:
        """(line, element) pairs."""
        for k, obj in enumerate(self.objects):
            yield self.line(k), obj


def _element_lines(data: bytes) -> list[int]:
    """The line on which each element of the JSON array ``data`` (valid JSON) starts."""
    pos = _WS.match(data, 0).end() + 1  # past the '['
    line, counted = 1, 0
    out = []
    for raw in _RAW_LIST.decode(data):
        pos = _WS.match(data, pos).end()
        line += data.count(b"\n", counted, pos)
        counted = pos
        out.append(line)
        pos = _WS.match(data, pos + len(raw)).end() + 1  # past the ',' (or the closing ']')
    return out


def read_json_fields(path: Path, schema: type[Record]) -> JsonArray:
    """Every element of the JSON array in ``path``, with its line: an object is read as a
    ``schema`` (a :class:`~judgecal.importers.records.Record`: only its fields are decoded, an
    absent field reads as absent, a null one as None), other elements as Python's json
    module decodes them (so is an object whose fields do not fit the schema: a dict).

    ``schema``: a Record whose fields default to ``msgspec.UNSET`` and are typed ``Any`` (or
    a Record of the same kind, or a union with one). Same errors as
    :func:`~judgecal.importers.records.read_json_array` (InputError naming FILE:LINE), which
    reads any file this fast path cannot."""
    data = read_bytes(path)
    digest = FileDigest(hashlib.sha256(data).hexdigest(), len(data))  # the file's content as parsed, read once
    if data.startswith(_BOM):
        data = data[len(_BOM):]
    if not data.isascii():
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            return _reference(path)
    try:  # the whole file in one call: every element an object of the schema's shape
        records = msgspec.json.Decoder(list[schema]).decode(data)
        if not _keys_once(data, records, schema):
            return _reference(path)
        return JsonArray(records, data=data, digest=digest)
    except msgspec.ValidationError:
        pass  # an element of another shape: element by element below
    except (msgspec.DecodeError, RecursionError, MemoryError):
        return _reference(path)
    try:
        raws = _RAW_LIST.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError, MemoryError):
        return _reference(path)
    decoder = msgspec.json.Decoder(schema)
    out: list[Any] = []
    for raw in raws:
        try:
            record = decoder.decode(raw)
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
            try:
                record = json.loads(bytes(raw))
            except (ValueError, RecursionError):
                return _reference(path)
        out.append(record)
    if not _keys_once(data, out, schema):
        return _reference(path)
    return JsonArray(out, data=data, digest=digest)


_KEY_PATTERNS: dict[frozenset, re.Pattern] = {}
_NESTED: dict[type, tuple[int, ...]] = {}


def _nested_fields(schema: type[Record]) -> tuple[int, ...]:
    """Positions of ``schema``'s fields whose type names a :class:`Record` (a nested schema)."""
    if schema not in _NESTED:
        hints = typing.get_type_hints(schema)
        _NESTED[schema] = tuple(
            i for i, name in enumerate(schema.__struct_fields__)
            if any(isinstance(t, type) and issubclass(t, Record) for t in (hints[name], *typing.get_args(hints[name]))))
    return _NESTED[schema]


def _keys_once(data: bytes, records: list[Any], schema: type[Record]) -> bool:
    """Whether no record gives one of the schema's fields twice, nor one of a nested schema's
    (msgspec, like Python's json module, keeps the last value silently; the reference path
    refuses it at FILE:LINE). False also when a record was decoded by Python's json module (an
    element of another shape): the reference path then checks every key at every depth.

    A field's name in quotes (``"preference"``) can only be a string token of the file: a key,
    or a value equal to the name (inside a string a quote is escaped). So when the file holds
    exactly as many such tokens as the records have fields set, no key is given twice; any
    other count sends the file to the reference path (which refuses a repeated key, or finds
    none and reads the same values). One regular-expression pass over the bytes: about 0.1 s
    for AlpacaEval's 26 shared files (100 MB)."""
    unset = msgspec.UNSET
    astuple = msgspec.structs.astuple
    nested = _nested_fields(schema)  # positions of the fields that may hold a Record
    n = len(schema.__struct_fields__)
    types = {schema}
    expected = 0
    for r in records:
        if type(r) is not schema:
            return False
        t = astuple(r)
        expected += n - t.count(unset)  # the fields set (C-level count: ~3 ms for 20,000 records)
        for i in nested:
            v = t[i]
            if isinstance(v, Record):
                types.add(type(v))
                expected += len(v.__struct_fields__) - astuple(v).count(unset)
    key = frozenset(types)
    pattern = _KEY_PATTERNS.get(key)
    if pattern is None:
        names = {n for t in types for n in t.__struct_encode_fields__}
        alternatives = b"|".join(re.escape(n.encode()) for n in sorted(names, key=len, reverse=True))
        pattern = _KEY_PATTERNS[key] = re.compile(b'"(?:' + alternatives + b')"')
    return len(pattern.findall(data)) == expected


def _reference(path: Path) -> JsonArray:
    pairs = read_json_array(path)
    return JsonArray([obj for _, obj in pairs], [line for line, _ in pairs])
