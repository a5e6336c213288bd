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

import json
import re
from pathlib import Path
from typing import Any

import msgspec

from judgecal.importers.records import Record, read_bytes, read_json_array

_WS = re.compile(rb"[ \t\r\n]*")
_BOM = b"\xef\xbb\xbf"
_RAW_LIST = msgspec.json.Decoder(list[msgspec.Raw])


def read_json_fields(path: Path, schema: type[Record]) -> list[tuple[int, Any]]:
    """(line, record) for every element of the JSON array in ``path``; an object is read as a
    ``schema`` (a :class:`~judgecal.importers.records.Record`: only its fields are decoded, an
    absent field reads as absent, a null one as None), other elements are returned as Python's
    json module decodes them (as is an object whose fields do not fit the schema: a dict).

    ``schema``: a Record whose fields default to ``msgspec.UNSET`` and are typed ``Any`` (or
    a Record of the same kind, or a union with one). Same errors as
    :func:`~judgecal.importers.records.read_json_array` (InputError naming FILE:LINE), which
    reads any file this fast path cannot."""
    data = read_bytes(path)
    if data.startswith(_BOM):
        data = data[len(_BOM):]
    if not data.isascii():
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            return read_json_array(path)
    try:
        raws = _RAW_LIST.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError, MemoryError):
        return read_json_array(path)
    decoder = msgspec.json.Decoder(schema)
    pos = _WS.match(data, 0).end() + 1  # past the '['
    line, counted = 1, 0
    out: list[tuple[int, Any]] = []
    for raw in raws:
        pos = _WS.match(data, pos).end()
        n = len(raw)
        if data[pos : pos + 1] != bytes(memoryview(raw)[:1]):
            return read_json_array(path)  # not where it was expected: let the reference reader decide
        line += data.count(b"\n", counted, pos)
        counted = pos
        try:
            record = decoder.decode(raw)
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
            try:
                record = json.loads(bytes(raw))
            except (ValueError, RecursionError):
                return read_json_array(path)
        out.append((line, record))
        pos = _WS.match(data, pos + n).end() + 1  # past the ',' (or the closing ']')
    return out
