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

from judgecal.errors import InputError
from judgecal.importers.records import (FileDigest, Record, TooLong, unique_keys, first_repeat, first_too_long,
                                       read_bytes, read_json_array, repeat_message, too_long_error)

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
            return _reference(path, schema)
    try:  # the whole file in one call: every element an object of the schema's shape
        records = msgspec.json.Decoder(list[schema]).decode(data)
        if not _keys_once(data, records, schema):
            return _reference(path, schema)
        return JsonArray(records, data=data, digest=digest)
    except msgspec.ValidationError:
        pass  # an element of another shape: element by element below
    except (msgspec.DecodeError, RecursionError, MemoryError):
        return _reference(path, schema)
    try:
        raws = _RAW_LIST.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError, MemoryError):
        return _reference(path, schema)
    decoder = msgspec.json.Decoder(schema)
    out: list[Any] = []
    for raw in raws:
        try:
            record = decoder.decode(raw)
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
            try:
                record = json.loads(bytes(raw))
            except (ValueError, RecursionError):
                return _reference(path, schema)
        out.append(record)
    if not _keys_once(data, out, schema):
        return _reference(path, schema)
    return JsonArray(out, data=data, digest=digest)


_KEY_PATTERNS: dict[frozenset, re.Pattern] = {}
_KINDS: dict[type, tuple[tuple, tuple]] = {}
#: a \\u escape of a printable ASCII character: JSON writers escape only quotes, backslashes,
#: control and non-ASCII characters, so a key spelt "pref\\u0065rence" would escape the count below
_ASCII_ESCAPE = re.compile(rb"\\u00[2-7][0-9a-fA-F]")


def _kinds(schema: type[Record]) -> tuple[tuple[tuple[int, str, type], ...], tuple[tuple[int, str], ...]]:
    """((position, name, nested schema) of ``schema``'s fields whose type names a
    :class:`Record`, (position, name) of those typed :class:`msgspec.Raw`: read whole, checked
    at every depth)."""
    if schema not in _KINDS:
        hints = typing.get_type_hints(schema)
        nested, raw = [], []
        for i, name in enumerate(schema.__struct_fields__):
            types = (hints[name], *typing.get_args(hints[name]))
            sub = [t for t in types if isinstance(t, type) and issubclass(t, Record)]
            if sub:
                nested.append((i, name, sub[0]))
            if any(t is msgspec.Raw for t in types):
                raw.append((i, name))
        _KINDS[schema] = (tuple(nested), tuple(raw))
    return _KINDS[schema]


_FLAT = msgspec.json.Decoder(dict[str, str | None])
#: a key whose quoted spelling is the only one a JSON writer can give it, given that the file
#: escapes no printable ASCII character (:data:`_ASCII_ESCAPE`): printable ASCII, no quote,
#: backslash or solidus (``"a\\/b"`` is ``"a/b"`` too)
_PLAIN_KEY = re.compile(r"[ !#-.0-\[\]-~]*")


def _flat_object(data: bytes) -> dict | None:
    """The JSON object ``data`` as a dict when every value is a string or null (no nested
    object that could hide a repeated key) and each key occurs once: its quoted name, plain
    (:data:`_PLAIN_KEY`), appears exactly once in the bytes (a key given twice appears
    twice; a string value holding the name only adds occurrences). None otherwise, for the
    careful decode to decide. An OpenAI chat ``message`` (``content``, ``role``,
    ``function_call``: null, ``tool_calls``: null) is read here in about a tenth of the time
    Python's json module with a repeat check takes."""
    try:
        obj = _FLAT.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    for key in obj:
        if not _PLAIN_KEY.fullmatch(key) or data.count(b'"%s"' % key.encode()) != 1:
            return None
    return obj


def _decode_raw(record: Record, raw_fields: tuple[tuple[int, str], ...], values: tuple) -> bool:
    """Decode ``record``'s :class:`msgspec.Raw` fields in place, refusing a key given twice at
    any depth, or a value Python's json module refuses (False: the reference path names it
    at FILE:LINE). A flat object of plain keys is read by :func:`_flat_object` (the same
    dict), anything else by Python's json module with a repeat check. Only for a file in
    which no printable ASCII character is escaped (:func:`_keys_once` checks that first)."""
    for i, name in raw_fields:
        raw = values[i]
        if isinstance(raw, msgspec.Raw):
            data = bytes(raw)
            obj = _flat_object(data)
            if obj is None:
                try:
                    obj = json.loads(data, object_pairs_hook=unique_keys)
                except (ValueError, RecursionError):  # a repeat, or a value Python's json refuses (a
                    return False  # 5,000-digit integer): the reference path names it at FILE:LINE
            setattr(record, name, obj)
    return True


def _keys_once(data: bytes, records: list[Any], schema: type[Record]) -> bool:
    """Whether no record gives a key twice in the parts it reads: the schema's fields, a nested
    schema's fields, and (decoded here, in place) every key of a field typed
    :class:`msgspec.Raw`. msgspec, like Python's json module, keeps the last value silently;
    the reference path refuses it at FILE:LINE. False also when a record was decoded by
    Python's json module (an element of another shape), or when the file escapes a printable
    ASCII character (``\\u0065``: a key could be spelt so): the reference path then decides.

    A field's name in quotes (``"preference"``) can only be a string token of the file: a key,
    or a value equal to the name (inside a string a quote is escaped). So when the file holds
    exactly as many such tokens as the records have fields set, no key is given twice; any
    other count sends the file to the reference path (which refuses a repeated key, or finds
    none and reads the same values). Two regular-expression passes over the bytes: about 0.1 s
    for AlpacaEval's 26 shared files (100 MB)."""
    if _ASCII_ESCAPE.search(data):
        return False
    unset = msgspec.UNSET
    astuple = msgspec.structs.astuple
    nested, raw_fields = _kinds(schema)
    n = len(schema.__struct_fields__)
    types = {schema}
    expected = 0
    for r in records:
        if type(r) is not schema:
            return False
        t = astuple(r)
        expected += n - t.count(unset)  # the fields set (C-level count: ~3 ms for 20,000 records)
        if raw_fields and not _decode_raw(r, raw_fields, t):
            return False
        for i, _, _ in nested:
            v = t[i]
            if isinstance(v, Record):
                types.add(type(v))
                vt = astuple(v)
                expected += len(vt) - vt.count(unset)
                inner = _kinds(type(v))[1]
                if inner and not _decode_raw(v, inner, vt):
                    return False
    key = frozenset(types)
    pattern = _KEY_PATTERNS.get(key)
    if pattern is None:
        names = {n for t in types for n in t.__struct_encode_fields__}
        alternatives = b"|".join(re.escape(n.encode()) for n in sorted(names, key=len, reverse=True))
        pattern = _KEY_PATTERNS[key] = re.compile(b'"(?:' + alternatives + b')"')
    return len(pattern.findall(data)) == expected


def _too_long_read(obj: Any, subs: dict[str, type[Record]]) -> TooLong | None:
    """A :class:`TooLong` integer in a part of ``obj`` (an element of the array) that the fast
    path reads: anywhere except under a key that a nested schema (``subs``: {field: schema})
    does not name, which msgspec skips unread (token log-probabilities)."""
    if not isinstance(obj, dict):
        return first_too_long(obj)
    for key, value in obj.items():
        sub = subs.get(key)
        if sub is not None and isinstance(value, dict):
            for inner, v in value.items():
                if inner in sub.__struct_fields__:
                    found = first_too_long(v)
                    if found is not None:
                        return found
            continue
        found = first_too_long(value)
        if found is not None:
            return found
    return None


def _reference(path: Path, schema: type[Record]) -> JsonArray:
    """The file read by Python's json module (the reference), refusing at FILE:LINE a key given
    twice in the parts the fast path reads (:func:`_keys_once`): the record itself, the fields of
    a nested schema, everything inside a field typed :class:`msgspec.Raw`; a repeat elsewhere
    (inside token log-probabilities, which no importer reads) is read as the fast path reads it;
    so is an integer over Python's digit limit (refused in the parts read, skipped elsewhere:
    :func:`_too_long_read`)."""
    too_long: list = []
    pairs = read_json_array(path, repeats="mark", too_long=too_long)
    nested, raw_fields = _kinds(schema)
    subs = {name: sub for _, name, sub in nested}
    for line, obj in pairs:
        if too_long:
            marker = _too_long_read(obj, subs)
            if marker is not None:
                raise too_long_error(path, marker, line)
        if not isinstance(obj, dict):
            continue
        found = first_repeat(obj)
        for _, name in raw_fields:
            found = found or first_repeat(obj.get(name), deep=True)
        for _, name, sub_schema in nested:
            sub = obj.get(name)
            if isinstance(sub, dict):
                found = found or first_repeat(sub, sub_schema.__struct_fields__)
                for _, inner in _kinds(sub_schema)[1]:
                    found = found or first_repeat(sub.get(inner), deep=True)
        if found is not None:
            raise InputError(repeat_message(found), source=str(path), line=line)
    return JsonArray([obj for _, obj in pairs], [line for line, _ in pairs])
