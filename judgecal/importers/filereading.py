"""Line-aware JSON / JSON Lines / CSV readers and the file checks every importer shares: a
regular file of at most :data:`MAX_FILE_BYTES`, its SHA-256, repeated keys and over-long
integers found with their line, CSV cells neutralised for spreadsheets and written back.

Every reader reports a bad record as ``InputError("FILE:LINE: reason")``. Split out of
:mod:`judgecal.importers.records` (which re-exports these names)."""

from __future__ import annotations

import json
import os
import re
import stat
from functools import partial
from pathlib import Path
from collections.abc import Iterable
from typing import Any, Iterator, NamedTuple

from judgecal.errors import InputError


def line_of(text: str, offset: int) -> int:
    """1-based line number of a character offset (lines end at ``\\n``)."""
    return text.count("\n", 0, offset) + 1


def _json_error(path: Path, exc: BaseException, line: int | None) -> InputError:
    """A JSON parse failure as one InputError naming FILE:LINE (RecursionError: nesting too
    deep; ValueError: e.g. an integer literal over Python's 4300-digit limit; MemoryError)."""
    if isinstance(exc, RecursionError):
        reason = "JSON nested too deeply (over ~1000 levels)"
    elif isinstance(exc, MemoryError):
        reason = "a JSON value too large to load into memory"
    elif isinstance(exc, json.JSONDecodeError):
        reason = f"invalid JSON: {json_problem(exc)}"
    else:
        reason = f"invalid JSON value: {' '.join(str(exc).split())[:200]}"
    return InputError(reason, source=str(path), line=line)


def json_problem(exc: json.JSONDecodeError, doc: str = "the file") -> str:
    """What a JSONDecodeError says, as a whole sentence with its column: the json module's
    ``msg`` alone can end mid-sentence ("Unterminated string starting at")."""
    msg = exc.msg
    if msg.endswith(" at"):
        msg = f"{msg} column {exc.colno}"
    else:
        msg = f"{msg} (column {exc.colno})"
    if msg.startswith("Unterminated string") and exc.doc is not None and exc.doc.find('"', exc.pos + 1) < 0:
        msg += f" ({doc} ends inside it)"
    return msg[:1].lower() + msg[1:]


def read_json_array(path: Path, *, repeats: str = "refuse", too_long: list | None = None) -> list[tuple[int, Any]]:
    """The elements of a JSON file whose top level is an array, each with its 1-based line.

    Raises InputError naming FILE:LINE for invalid JSON, a top level that is not an array,
    an object that gives one key twice (at any depth: Python's json module would keep the last
    value silently), nesting too deep for the parser, or a literal too large (see
    :func:`_json_error`). ``repeats="mark"``: an object giving a key twice is not refused but
    read as a :class:`Repeated` dict that names the key (:func:`first_repeat`), for a caller
    that refuses repeats only in the parts it reads (judgecal.importers.fastjson). With
    ``too_long`` (a list), an integer literal over Python's digit limit is not refused either
    but read as a :class:`TooLong` (also appended to ``too_long``), for the same caller."""
    text = read_text(path)
    # a key given twice: FILE:LINE (or marked), never last-wins
    dec = json.JSONDecoder(object_pairs_hook=_mark_repeats if repeats == "mark" else unique_keys)
    if too_long is not None:
        dec = json.JSONDecoder(object_pairs_hook=dec.object_pairs_hook, parse_int=partial(_mark_int, too_long))
    pos = _skip_ws(text, 0)
    if pos >= len(text) or text[pos] != "[":
        raise InputError("expected a JSON array of records", source=str(path), line=line_of(text, pos))
    pos = _skip_ws(text, pos + 1)
    out: list[tuple[int, Any]] = []
    if pos < len(text) and text[pos] == "]":
        return out
    # line numbers counted incrementally: one pass over the text, not one per record (a
    # 3.7 MB AlpacaEval annotations file has 805 records: per-record counting was quadratic)
    line, counted = 1, 0
    while True:
        line += text.count("\n", counted, pos)
        counted = pos
        try:
            obj, end = dec.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            raise _json_error(path, exc, exc.lineno) from None
        except DuplicateKey as exc:
            raise InputError(str(exc), source=str(path), line=line) from None
        except (RecursionError, ValueError, MemoryError) as exc:
            raise _json_error(path, exc, line) from None
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


def array_line(path: Path, k: int) -> int:
    """The line on which element ``k`` of the JSON array file ``path`` starts (reads the file
    again: for an error message only)."""
    return read_json_array(path)[k][0]


def _skip_ws(text: str, pos: int) -> int:
    n = len(text)
    while pos < n and text[pos] in " \t\r\n":
        pos += 1
    return pos


MAX_FILE_BYTES = 2 * 1024**3  # the largest file an importer reads (2 GiB; docs/data-formats.md)


def _not_regular(mode: int) -> str | None:
    """What a non-regular file is (None for a regular file)."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def unstorable(text: str) -> str | None:
    """Why no database stores ``text`` alike ("contains a NUL character (PostgreSQL cannot
    store it)", "contains an unpaired surrogate (not valid Unicode text)"), None when it can
    be stored: the reason an importer gives at FILE:LINE for a text field."""
    if "\x00" in text:
        return "contains a NUL character (PostgreSQL cannot store it)"
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return "contains an unpaired surrogate (not valid Unicode text)"
    return None


def check_text_path(path: Path | str) -> None:
    """Raise InputError naming ``path`` when its name is not UTF-8 text: a file system allows
    any bytes in a name, but an import stores the path (its source, the file book) as text."""
    try:
        str(path).encode("utf-8")
    except UnicodeEncodeError:
        bad = os.fsencode(str(path)).decode("utf-8", "backslashreplace")
        raise InputError(f"the path is not UTF-8 text (as bytes: {bad}): judgecal stores a file's path as text; rename it",
                         source=str(path)) from None


def read_bytes(path: Path) -> bytes:
    """The bytes of a file, as :func:`read_text` reads it (no decoding).

    Only a regular file of at most :data:`MAX_FILE_BYTES` bytes is read: a device
    (``/dev/zero`` would be read until memory runs out), a FIFO (would wait for a writer
    forever), a socket or a folder is refused from its ``stat`` BEFORE it is opened (a
    symlink is followed first), and the opened file is checked again (it cannot be swapped
    in between). Raises InputError naming the file for those, a missing or unreadable (a
    symlink loop, no permission...) file, and a path that is not UTF-8 text (:func:`check_text_path`)."""
    src = str(path)
    try:
        st = os.stat(path)
    except OSError as exc:
        raise InputError(unreadable(path, exc), source=src) from None
    check_text_path(src)
    kind = _not_regular(st.st_mode)
    if kind == "a folder":
        raise InputError("is a folder, expected a file", source=src)
    if kind:
        raise InputError(f"is {kind}, not a regular file: judgecal reads only regular files", source=src)
    if st.st_size > MAX_FILE_BYTES:
        raise InputError(f"the file has {st.st_size:,} bytes; judgecal reads files of at most {MAX_FILE_BYTES:,} "
                         "bytes (2 GiB): split it", source=src)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except OSError as exc:
        raise InputError(f"cannot read the file: {exc.strerror or exc}", source=src) from None
    try:
        kind = _not_regular(os.fstat(fd).st_mode)
        if kind:
            raise InputError(f"is {kind}, not a regular file: judgecal reads only regular files", source=src)
        with os.fdopen(fd, "rb") as f:
            fd = -1
            data = f.read(MAX_FILE_BYTES + 1)
        if len(data) > MAX_FILE_BYTES:
            raise InputError(f"the file has more than {MAX_FILE_BYTES:,} bytes; judgecal reads files of at most "
                             f"{MAX_FILE_BYTES:,} bytes (2 GiB): split it", source=src)
        return data
    except MemoryError:
        raise InputError("file too large to load into memory", source=src) from None
    except OSError as exc:
        raise InputError(f"cannot read the file: {exc.strerror or exc}", source=src) from None
    finally:
        if fd >= 0:
            os.close(fd)


class FileDigest(NamedTuple):
    """A file's content by its SHA-256 (hex) and size in bytes."""

    sha256: str
    n_bytes: int


def file_digest(path: Path | str) -> FileDigest | None:
    """The SHA-256 and size of the bytes of ``path`` (read in 1 MiB chunks; a symbolic link is
    followed). None when it is not a regular file or cannot be read: the importer that reads
    it names the reason (:func:`read_bytes`)."""
    import hashlib

    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return None
        h, n = hashlib.sha256(), 0
        with open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
                n += len(chunk)
    except OSError:
        return None
    return FileDigest(h.hexdigest(), n)


def unreadable(path: Path | str, exc: OSError) -> str:
    """Why ``path`` cannot be opened, in words: a missing file, a symbolic link to a missing
    file or one in a loop (named so), or the system's reason."""
    import errno

    if isinstance(exc, FileNotFoundError) or exc.errno == errno.ENOENT:
        if os.path.islink(path):
            return f"a symbolic link to {os.readlink(path)!r}, which does not exist"
        return "no such file"
    if exc.errno == errno.ELOOP:
        return "a symbolic link in a loop (it leads back to itself): cannot be followed"
    return f"cannot read the file: {exc.strerror or exc}"


def byte_line(data: bytes, offset: int) -> int:
    """1-based line of a byte offset (lines end at ``\\n``)."""
    return data.count(b"\n", 0, offset) + 1


def read_text(path: Path) -> str:
    """File text as UTF-8 (a BOM is dropped), byte for byte: line ends are NOT translated
    (``\\r\\n`` stays ``\\r\\n`` inside a CSV field). Reads what :func:`read_bytes` reads;
    raises InputError naming the file for what it refuses and for text that is not UTF-8."""
    data = read_bytes(path)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        start = exc.start + (3 if data.startswith(b"\xef\xbb\xbf") else 0)  # utf-8-sig counts after the BOM
        raise InputError(f"not UTF-8 text ({exc.reason} at byte {start})", source=str(path),
                         line=byte_line(data, start)) from None
    except MemoryError:
        raise InputError("file too large to load into memory", source=str(path)) from None


class DuplicateKey(ValueError):
    """A JSON object that gives one key twice (the json module would keep the last value silently)."""


def unique_keys(pairs: list[tuple[str, Any]]) -> dict:
    """``object_pairs_hook`` for ``json.loads``: the object as a dict, or DuplicateKey when it
    gives a key twice (the json module would keep the last value silently)."""
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise DuplicateKey(repeat_message(key))
            seen.add(key)
    return obj


class Repeated(dict):
    """A decoded JSON object that gave a key twice (``repeated``: every such key, in the order
    of their second occurrence); its value is the last one given, as Python's json module reads
    it (:func:`read_json_array`, ``repeats="mark"``)."""

    __slots__ = ("repeated",)


def _mark_repeats(pairs: list[tuple[str, Any]]) -> dict:
    obj = dict(pairs)
    if len(obj) == len(pairs):
        return obj
    seen: set[str] = set()
    twice: dict[str, None] = {}
    for key, _ in pairs:
        if key in seen:
            twice[key] = None
        seen.add(key)
    marked = Repeated(obj)
    marked.repeated = tuple(twice)
    return marked


class TooLong:
    """An integer literal with more digits than Python converts (``sys.get_int_max_str_digits``),
    read by :func:`read_json_array` with ``too_long``; ``message``: Python's own reason."""

    __slots__ = ("message",)

    def __init__(self, message: str):
        self.message = message

    def __repr__(self) -> str:
        return f"TooLong({self.message[:40]!r})"


def _mark_int(found: list, literal: str) -> int | TooLong:
    try:
        return int(literal)
    except ValueError as exc:
        marker = TooLong(str(exc))
        found.append(marker)
        return marker


def _walk(value: Any) -> Iterator[Any]:
    """``value`` (a decoded JSON value) and every value it holds, depth first, in order."""
    yield value
    inner = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
    for v in inner:
        yield from _walk(v)


def first_too_long(value: Any) -> TooLong | None:
    """The first :class:`TooLong` in a decoded JSON value, at any depth (None when none)."""
    return next((v for v in _walk(value) if isinstance(v, TooLong)), None)


def too_long_error(path: Path, marker: TooLong, line: int) -> InputError:
    """The error :func:`read_json_array` raises for the literal ``marker`` stands for."""
    return _json_error(path, ValueError(marker.message), line)


def first_repeat(value: Any, names: Iterable[str] | None = None, *, deep: bool = False) -> str | None:
    """The first key ``value`` (a decoded JSON value) gives twice: at its own level, among
    ``names`` only when given (a repeat of another key before it does not hide it); with
    ``deep``, in every object it holds too. None when none."""
    if isinstance(value, Repeated):
        for key in value.repeated:
            if names is None or key in names:
                return key
    if deep:
        # in every object ``value`` holds (its own level was asked above, among ``names``)
        return next((v.repeated[0] for v in _walk(value) if isinstance(v, Repeated) and v is not value), None)
    return None


def repeat_message(key: str, where: str = "one JSON object") -> str:
    """The one-line reason for a key given twice (the same words in every importer)."""
    return f"field {key!r} appears twice in {where}: which value is meant?"


def read_jsonl(path: Path, blank: list[int] | None = None) -> Iterator[tuple[int, dict]]:
    """(line, object) for every non-blank line of a JSONL file; each must be a JSON object.
    ``blank``: the blank lines skipped are appended to it (the end of the last line is not one).

    Records are split on ``\\n`` only (JSON Lines): a raw U+2028, U+2029 or U+0085 inside a
    string is part of the string, a ``\\r`` before the ``\\n`` is whitespace."""
    lines = read_text(path).split("\n")
    if lines and not lines[-1]:
        lines.pop()  # the file's final line end
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            if blank is not None:
                blank.append(lineno)
            continue
        try:
            obj = json.loads(line, object_pairs_hook=unique_keys)
        except json.JSONDecodeError as exc:
            raise InputError(f"invalid JSON: {json_problem(exc, 'the line')}", source=str(path), line=lineno) from None
        except DuplicateKey as exc:
            raise InputError(str(exc), source=str(path), line=lineno) from None
        except (RecursionError, ValueError, MemoryError) as exc:
            raise _json_error(path, exc, lineno) from None
        if not isinstance(obj, dict):
            raise InputError(f"expected a JSON object, got {type(obj).__name__}", source=str(path), line=lineno)
        yield lineno, obj


_CSV_STOP = re.compile(r"[,\r\n]")
# CSV cells that a spreadsheet would run as a formula: judgecal's CSV export writes them with a
# leading apostrophe, and read_csv takes exactly one apostrophe off again (docs/data-formats.md)
_FORMULA = re.compile(r"'*[=+\-@\t\r]")


def neutralise_cell(value: str) -> str:
    """The CSV form of a text cell: one ``'`` prepended when the text starts with ``=``, ``+``,
    ``-``, ``@``, a tab or a carriage return (after any apostrophes), so a spreadsheet shows it
    as text instead of running it as a formula (OWASP "CSV injection"). :func:`read_csv` undoes
    it (:func:`restore_cell`), so a judgecal CSV export re-imports byte for byte."""
    return "'" + value if _FORMULA.match(value) else value


def restore_cell(value: str) -> str:
    """Inverse of :func:`neutralise_cell`: one leading ``'`` dropped when what follows it is
    apostrophes then ``=``, ``+``, ``-``, ``@``, a tab or a carriage return."""
    return value[1:] if value.startswith("'") and _FORMULA.match(value, 1) else value


def _csv_records(text: str, path: str) -> Iterator[tuple[int, list[str | None]]]:
    """(line where the record starts, cells) for every record of RFC 4180 CSV text.

    Records end at ``\\n``, ``\\r\\n`` or ``\\r`` outside quotes; a quoted field keeps every
    character between its quotes as it is (``\\r\\n``, U+2028... included; ``""`` is one
    quote). A quoted empty field ``""`` is the empty string, an unquoted empty field is None.
    A quote left open at the end of the file raises InputError naming the line where that
    field started; text after a closing quote other than a comma or a line end raises too."""
    n = len(text)
    pos = 0
    line = 1
    while pos < n:
        start_line = line
        cells: list[str | None] = []
        while True:
            if pos < n and text[pos] == '"':
                field_line = line
                chunks = []
                j = pos + 1
                while True:
                    q = text.find('"', j)
                    if q < 0:
                        raise InputError("a quoted field is never closed (a quote is missing)", source=path, line=field_line)
                    chunks.append(text[j:q])
                    if q + 1 < n and text[q + 1] == '"':
                        chunks.append('"')
                        j = q + 2
                        continue
                    break
                value = "".join(chunks)
                line += value.count("\n")
                pos = q + 1
                if pos < n and text[pos] not in ",\r\n":
                    raise InputError(f"unexpected text {text[pos:pos + 10]!r} after a closing quote (a field that contains "
                                     "quotes must double them: \"\")", source=path, line=line)
                cells.append(value)
            else:
                m = _CSV_STOP.search(text, pos)
                end = m.start() if m else n
                cells.append(text[pos:end] or None)
                pos = end
            if pos < n and text[pos] == ",":
                pos += 1
                continue
            break
        if pos < n and text[pos] == "\r":  # CRLF, or a bare CR (not counted as a line: lines end at LF)
            pos += 1
            if pos < n and text[pos] == "\n":
                pos += 1
                line += 1
        elif pos < n and text[pos] == "\n":
            pos += 1
            line += 1
        yield start_line, cells


def read_csv(path: Path, blank: list[int] | None = None, columns: list[str] | None = None) -> Iterator[tuple[int, dict]]:
    """(line, row dict) for every data row of a CSV file with a header row (RFC 4180, comma
    separated, UTF-8). Cells come back byte for byte (quoted line ends included); an
    unquoted empty cell is None, a quoted empty cell ``""`` the empty string; a cell that
    judgecal's export neutralised (:func:`neutralise_cell`) is restored. The line is the
    physical line where the row starts. ``columns``: the header's names are appended to it
    (a file holding its header row only has no data row to show them). Raises InputError
    naming FILE:LINE for an empty file (no header row: judgecal's CSV export always writes
    one, so such a file is not an export), a repeated or empty column name, a row with a
    different number of fields, a quote never closed (the line where that field started) or
    text after a closing quote."""
    text = read_text(path)
    records = _csv_records(text, str(path))
    try:
        first = next(records)
    except StopIteration:
        raise InputError("empty CSV file (no header row): judgecal's CSV export writes its header row even when there "
                         "is nothing to export, so this file is not one (cut short, or not the file you meant?)",
                         source=str(path), line=1) from None
    header = [(h or "").strip() for h in first[1]]
    seen: dict[str, int] = {}
    for i, h in enumerate(header, start=1):
        if not h:
            raise InputError(f"column {i} of the header row has no name", source=str(path), line=first[0])
        if h in seen:
            raise InputError(f"column {h!r} appears twice in the header row (columns {seen[h]} and {i})",
                             source=str(path), line=first[0])
        seen[h] = i
    if columns is not None:
        columns.extend(header)
    for start, row in records:
        if all(cell is None or not cell.strip() for cell in row):
            if blank is not None:
                blank.append(start)
            continue
        if len(row) != len(header):
            raise InputError(
                f"row has {len(row)} fields, the header has {len(header)}", source=str(path), line=start
            )
        yield start, {k: (restore_cell(v) if v else v) for k, v in zip(header, row)}


def read_csv_cells(path: Path) -> Iterator[tuple[int, list[str | None]]]:
    """(line, cells) for every record of a CSV file, the header row included and not checked
    (a pandas index column has an empty name): RFC 4180 as :func:`read_csv` reads it, blank
    records skipped, neutralised cells restored. Raises InputError naming FILE:LINE for a
    quote never closed or text after a closing quote."""
    for start, row in _csv_records(read_text(path), str(path)):
        if all(cell is None or not cell.strip() for cell in row):
            continue
        yield start, [restore_cell(v) if v else v for v in row]


# sizes of the database's name columns (judgecal.db.models; a test keeps them equal)


_QUOTE_CHARS = frozenset(',"\r\n')


def csv_line(cells: list[str | None]) -> str:
    """One RFC 4180 CSV record ending in CRLF: None is an empty cell; a string is quoted when
    it is empty or holds a comma, quote, CR or LF (quotes doubled), else written as it is."""
    out = []
    for c in cells:
        if c is None:
            out.append("")
        elif c == "" or not _QUOTE_CHARS.isdisjoint(c):
            out.append('"' + c.replace('"', '""') + '"')
        else:
            out.append(c)
    return ",".join(out) + "\r\n"
