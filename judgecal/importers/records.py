"""Plain records produced by the importers, and line-aware JSON / JSONL / CSV readers.

Every reader reports a bad record as ``InputError("FILE:LINE: reason")``."""

from __future__ import annotations

import gc
import json
import math
import os
import re
import stat
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from collections.abc import Callable, Iterable
from contextlib import contextmanager
from typing import Any, Iterator, NamedTuple

import msgspec

from judgecal.errors import InputError, UsageError


class RespRef(NamedTuple):
    """A response by its natural key: task family, item prompt, producing model, text (a
    named tuple: hashed in C, which counts when an import holds tens of thousands)."""

    family: str
    prompt: str
    model: str
    text: str


class KnownRef(NamedTuple):
    """A response that an earlier batch of the same import carried in full, by its natural
    key (task family, item prompt, model, text SHA-256): what a parsing process sends instead
    of a text it has already sent (a baseline's answers recur in every AlpacaEval file)."""

    family: str
    prompt: str
    model: str
    text_sha256: str


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


class Verdict(NamedTuple):
    """A pairwise judge verdict to store: the judge (a pairwise JudgeSpec), responses ``a``
    and ``b`` (RespRef), then the ``pairwise_judgment`` columns in the order the writer
    inserts them (a named tuple: cheap to build, to pickle and to turn into a row)."""

    judge: JudgeSpec
    a: RespRef
    b: RespRef
    sample_index: int = 0
    position: str = "na"  # 'ab' | 'ba' | 'na' (order shown not recorded)
    status: str = "ok"
    verdict: str | None = None  # 'a' | 'b' | 'tie'
    preference: float | None = None  # P(a preferred), ties 0.5
    baseline_side: str | None = None  # 'a' | 'b' | None
    source: str | None = None
    raw_output: str | None = None
    error: str | None = None
    latency_s: float | None = None
    attempts: int = 0
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    distribution: dict | None = None  # the judgment distribution (judgecal.judge.distribution)


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
    # a verbosity pair's own source where the record names one (judgecal's pairs export); else the batch's
    pair_sources: dict[tuple[RespRef, RespRef], str] = field(default_factory=dict)
    # pairwise judge verdicts (Verdict; after unpickling, plain tuples of the same fields)
    verdicts: list[Verdict] = field(default_factory=list)
    # calibrations (judgecal.importers.calibrations.record), written by judgecal.db.ingest_calibrations
    calibrations: list[dict[str, Any]] = field(default_factory=list)
    # rows stored unparsed although the file gave them a score or verdict: {reason: [FILE:LINE, ...]}
    # (the generic importer: a distribution with less than MIN_IN_SCALE on the scale), reported by every output
    unparsed: dict[str, list[str]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    # rows of the input deliberately not imported: {reason: [FILE:LINE, ...]}, reported by every output
    skipped: dict[str, list[str]] = field(default_factory=dict)
    # files and folders of the input the importer did not read: {reason: [path, ...]}, reported
    # by every output ("not read: PATH (reason)"); nothing in a folder it was given is passed over
    not_read: dict[str, list[str]] = field(default_factory=dict)
    # the records read, where the importer counts them (the generic JSONL/CSV importer: 0 for an
    # export of nothing, which imports as nothing); None elsewhere
    records: int | None = None
    # response -> (text SHA-256, n_bytes, n_chars, n_words, then the Markdown counts of
    # judgecal.calibrate.style.COLUMNS), computed ahead by judgecal.db.ingest.prepare (in a
    # parsing process); the writer computes what is missing
    response_meta: dict[RespRef, tuple] = field(default_factory=dict)
    # responses (and item keys) an earlier batch of the same import from the same process
    # carried in full: a response is pickled as a KnownRef (no text), an item not at all
    # (ImportBatch.mark_sent)
    sent_before: set[tuple] = field(default_factory=set)
    # where the stored rows came from, for a FILE:LINE message when one conflicts with what the
    # database holds (judgecal.db.ingest): the file, and for "verdicts", "ratings",
    # "pair_labels" and "point_labels" a list parallel to that list: each row's line, or (when
    # ``origin_index``) the index of its element in the file's JSON array (:func:`array_line`),
    # or a (file, line) pair for rows read from several files (AlpacaEval's --pair batch)
    origin: str | None = None
    origin_index: bool = False
    at: dict[str, list[int]] = field(default_factory=dict)
    # the files (paths as given) whose records this batch holds: the writer looks their content
    # SHA-256 up (judgecal.db.filebook) and leaves out a batch whose every file's content was
    # already imported under another path
    files: list[str] = field(default_factory=list)
    # {file: (SHA-256, bytes)} of files a parsing process hashed (the writer then need not)
    digests: dict[str, tuple[str, int]] = field(default_factory=dict)

    def where(self, kind: str, i: int) -> tuple[str | None, int | None]:
        """(file, line) of row ``i`` of ``kind`` ("verdicts", ...), as far as known (error path only)."""
        marks = self.at.get(kind)
        if marks is not None and len(marks) == len(getattr(self, kind)) and isinstance(marks[i], tuple):
            return marks[i]  # rows from several files: (file, line) each
        if self.origin is None or marks is None or len(marks) != len(getattr(self, kind)):
            return self.origin, None
        n = marks[i]
        if self.origin_index:
            try:
                return self.origin, array_line(Path(self.origin), n)
            except Exception:  # the file changed since: the file alone
                return self.origin, None
        return self.origin, n

    def __getstate__(self) -> dict:
        # pickled compactly (a parsing process sends its batches to the writing one): every
        # RespRef and Verdict becomes a plain tuple (equal, hashed alike, read by position; a
        # named tuple costs a Python call per object to unpickle), a response's tuple shared by
        # the responses, their lengths and the verdicts; a response in ``sent_before`` travels
        # as a KnownRef (no text) and is left out of the responses
        meta = self.response_meta
        plain: dict[RespRef, tuple] = {}
        for r in self.responses:
            plain[r] = KnownRef(r[0], r[1], r[2], meta[r][0]) if r in self.sent_before and r in meta else tuple(r)
        state = dict(self.__dict__)
        state["responses"] = [x for x in plain.values() if type(x) is not KnownRef]
        state["response_meta"] = [(plain.get(r, r), m) for r, m in meta.items() if type(plain.get(r)) is not KnownRef]
        state["verdicts"] = [(v[0], plain.get(v[1], v[1]), plain.get(v[2], v[2])) + tuple(v[3:]) for v in self.verdicts]
        state["items"] = {k: v for k, v in self.items.items() if k not in self.sent_before}
        state["sent_before"] = set()
        return state

    def __setstate__(self, state: dict) -> None:
        state = dict(state)
        state["responses"] = dict.fromkeys(state["responses"])
        state["response_meta"] = dict(state["response_meta"])
        self.__dict__.update(state)

    def skip(self, reason: str, where: str) -> None:
        """Count a record left out of the import, with its reason and FILE:LINE."""
        self.skipped.setdefault(reason, []).append(where)

    def pass_over(self, reason: str, path: str) -> None:
        """Count a file or folder the import does not read, with its reason and path."""
        self.not_read.setdefault(reason, []).append(path)

    def add_item(self, family: str, prompt: str, *, external_id: str | None = None, reference: str | None = None) -> None:
        """Register an item (first occurrence wins for external id and reference)."""
        cur = self.items.get((family, prompt))
        if cur is None:
            self.items[(family, prompt)] = {"external_id": external_id, "reference": reference}
        elif cur["reference"] is None and reference is not None:
            cur["reference"] = reference

    def mark_sent(self, memo: set) -> None:
        """Put in ``sent_before`` the responses and items already in ``memo`` (those an earlier
        batch of this import, made by this process, carried), then add this batch's to it (an
        item written once is not written again: its first external id and reference stay).
        Only for a producer whose batches are written in the order they are made, each one
        before the next (judgecal.importers.parallel)."""
        self.sent_before = {r for r in self.responses if r in memo} | {k for k in self.items if k in memo}
        memo.update(self.responses)
        memo.update(self.items)

    def add_response(self, ref: RespRef) -> RespRef:
        """Register a response (and its item)."""
        self.add_item(ref.family, ref.prompt)
        self.responses[ref] = None
        return ref


@contextmanager
def bulk() -> Iterator[None]:
    """Pause Python's cyclic garbage collector while an import builds its objects.

    An import allocates hundreds of thousands of small containers (records, tuples, row
    dicts) and frees none: each allocation threshold crossed starts a collection that walks
    every tracked object again (measured: 40% of the parse time of AlpacaEval's annotations).
    None of them forms a reference cycle, so nothing is left uncollected: reference counting
    frees them. The collector's previous state is restored on exit."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def merge(source: str, batches: Iterable[ImportBatch]) -> ImportBatch:
    """One ImportBatch holding everything in ``batches``, in their order (an item's first
    external id and reference win, as :meth:`ImportBatch.add_item` keeps them)."""
    out = ImportBatch(source=source)
    batches = list(batches)
    origins = {b.origin for b in batches if b.origin is not None}
    if len(origins) == 1 and all(b.origin in (None, *origins) for b in batches):
        out.origin, out.origin_index = next(iter(origins)), any(b.origin_index for b in batches)
    for b in batches:
        if out.origin is not None:
            for kind in ("verdicts", "ratings", "pair_labels", "point_labels"):
                if getattr(b, kind):
                    out.at.setdefault(kind, []).extend(b.at.get(kind, ()))
        for (fam, prompt), extra in b.items.items():
            out.add_item(fam, prompt, **extra)
        out.files.extend(f for f in b.files if f not in out.files)
        out.digests.update(b.digests)
        out.responses.update(b.responses)
        out.response_meta.update(b.response_meta)
        out.pair_labels.extend(b.pair_labels)
        out.point_labels.extend(b.point_labels)
        out.ratings.extend(b.ratings)
        out.verbosity_pairs.extend(b.verbosity_pairs)
        out.pair_sources.update(b.pair_sources)
        out.verdicts.extend(b.verdicts)
        out.warnings.extend(b.warnings)
        for reason, where in b.skipped.items():
            out.skipped.setdefault(reason, []).extend(where)
        for reason, where in b.not_read.items():
            out.not_read.setdefault(reason, []).extend(where)
    return out


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
NAME_MAX = 200  # task family, model, item id, annotator
JUDGE_NAME_MAX = 300  # judge name and model, prompt name
SOURCE_MAX = 500  # label source, judge endpoint


class Record(msgspec.Struct, gc=False):
    """A JSON object read through a schema (:func:`judgecal.importers.fastjson.read_json_fields`):
    subclasses name the fields read, each defaulting to ``msgspec.UNSET`` (absent). Read like
    the dict Python's json module would give, restricted to those fields: ``get``, ``in``.
    Not tracked by the cyclic garbage collector (``gc=False``): decoded JSON holds no cycles."""

    def get(self, name: str, default: Any = None) -> Any:
        """The field's value (``default`` when the record does not have it)."""
        value = getattr(self, name, msgspec.UNSET) if name in self.__struct_fields__ else msgspec.UNSET
        return default if value is msgspec.UNSET else value

    def __contains__(self, name: object) -> bool:
        return name in self.__struct_fields__ and getattr(self, name) is not msgspec.UNSET


def is_object(value: Any) -> bool:
    """Whether a decoded JSON value is an object (a dict, or a :class:`Record`)."""
    return isinstance(value, (dict, Record))


# numbers given as text (CSV cells, numeric strings) must be JSON numbers (surrounding
# spaces allowed): Python's float() also reads "1_0", "infinity", " 0x1"... and int-like "1e3"
_JSON_NUMBER = re.compile(r"[ \t]*-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?[ \t]*")
_JSON_INTEGER = re.compile(r"[ \t]*-?(?:0|[1-9][0-9]*)[ \t]*")


def _show_number(value: object) -> str:
    """A number as an error message shows it: every digit a float has (``repr``), a long
    integer or text cut to 40 characters."""
    text = repr(value) if isinstance(value, float) else str(value)
    return text if len(text) <= 40 else f"{text[:20]}...({len(text)} characters)"


class Fields:
    """Typed access to one record's fields; every error names FILE:LINE and the field."""

    def __init__(self, obj: Any, source: str, line: int | Callable[[], int]):
        """``line``: the record's 1-based line, or a function giving it (called only when a
        message needs it)."""
        self.obj, self.source, self._line = obj, source, line
        if not isinstance(obj, (dict, Record)):
            raise InputError(f"expected a JSON object, got {type(obj).__name__}", source=source, line=self.line)

    @property
    def line(self) -> int:
        """The record's 1-based line."""
        if not isinstance(self._line, int):
            self._line = self._line()
        return self._line

    def fail(self, reason: str) -> InputError:
        return InputError(reason, source=self.source, line=self.line)

    def has(self, name: str) -> bool:
        return self.obj.get(name) is not None

    def text(self, name: str, *, required: bool = True, allow_empty: bool = True, max_len: int | None = None) -> str | None:
        """A string field (required unless told); a non-string value is an error, and so is
        a value longer than ``max_len`` characters (the database column's size: PostgreSQL
        refuses longer values, so they are refused here on every dialect alike)."""
        value = self.obj.get(name)
        if value is None:
            if required:
                raise self.fail(f"missing field {name!r}")
            return None
        if not isinstance(value, str):
            raise self.fail(f"field {name!r} must be a string, got {type(value).__name__} {json.dumps(value)[:40]}")
        problem = unstorable(value)
        if problem:
            raise self.fail(f"field {name!r} {problem}")
        if not allow_empty and not value.strip():
            raise self.fail(f"field {name!r} is empty")
        if max_len is not None and len(value) > max_len:
            raise self.fail(f"field {name!r} is {len(value)} characters long; at most {max_len} are stored")
        return value

    def name(self, name: str, *, required: bool = True, max_len: int = NAME_MAX) -> str | None:
        """A non-empty name field (model, task family, annotator, item id...) of at most
        ``max_len`` characters (default :data:`NAME_MAX`)."""
        return self.text(name, required=required, allow_empty=False, max_len=max_len)

    def family(self, name: str = "task_family", *, required: bool = False) -> str | None:
        """A task family field: a :meth:`name` that does not begin or end with white space
        (``' x '`` would be stored as a family apart from ``'x'``: refused at FILE:LINE)."""
        value = self.name(name, required=required)
        if value is not None and value != trim_name(value):
            raise self.fail(f"field {name!r} is {show_value(value)}: it begins or ends with white space or an invisible "
                            f"character, and a family is matched exactly (it would be another family than "
                            f"{show_value(trim_name(value))}); remove them")
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
        if isinstance(value, str) and not _JSON_NUMBER.fullmatch(value):
            raise self.fail(f"field {name!r} must be a number (JSON number syntax, e.g. 0.75 or 2), "
                            f"got {show_value(value)}")
        try:
            number = float(value)
        except OverflowError:  # an integer too large for a float (over ~1e308)
            number = float("inf")
        except (TypeError, ValueError):
            raise self.fail(f"field {name!r} must be a number, got {show_value(value)}") from None
        if number != number or abs(number) > 1e15:
            raise self.fail(f"field {name!r} must be a finite number of reasonable size, got {_show_number(value)}")
        return number

    def integer(self, name: str, *, required: bool = True) -> int | None:
        """An integer field (integral numeric strings accepted)."""
        value = self.obj.get(name)
        if isinstance(value, str) and _JSON_NUMBER.fullmatch(value) and not _JSON_INTEGER.fullmatch(value):
            raise self.fail(f"field {name!r} must be an integer (digits only), got {show_value(value)}")
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


#: Unicode's Default_Ignorable_Code_Point ranges (DerivedCoreProperties.txt) and U+2800 BRAILLE
#: PATTERN BLANK: characters a reader does not see
_IGNORABLE = ((0x00AD, 0x00AD), (0x034F, 0x034F), (0x061C, 0x061C), (0x115F, 0x1160), (0x17B4, 0x17B5),
              (0x180B, 0x180F), (0x200B, 0x200F), (0x202A, 0x202E), (0x2060, 0x206F), (0x2800, 0x2800),
              (0x3164, 0x3164), (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF), (0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8),
              (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A), (0xE0000, 0xE0FFF))


def _invisible(ch: str) -> bool:
    import unicodedata

    if ch.isspace() or unicodedata.category(ch) in ("Cc", "Cf", "Zs", "Zl", "Zp"):
        return True
    c = ord(ch)
    return any(lo <= c <= hi for lo, hi in _IGNORABLE)


def trim_name(name: str) -> str:
    """``name`` without the white space and invisible characters (format characters such as
    U+200B ZERO WIDTH SPACE, controls) at its ends: what a reader sees of it."""
    start, end = 0, len(name)
    while start < end and _invisible(name[start]):
        start += 1
    while end > start and _invisible(name[end - 1]):
        end -= 1
    return name[start:end]


def check_family(family: str | None) -> None:
    """Raise UsageError for a ``--task-family`` that is empty, longer than :data:`NAME_MAX`
    characters (the column's size: PostgreSQL would refuse it, SQLite store it) or begins or
    ends with white space (``' x '`` would be stored as a family apart from ``'x'``)."""
    if family is not None and (not family.strip() or len(family) > NAME_MAX):
        raise UsageError(f"--task-family must be a non-empty name of at most {NAME_MAX} characters"
                         + (f" (got {len(family)})" if family.strip() else ""))
    if family is not None and family != trim_name(family):
        raise UsageError(f"--task-family {family!r} begins or ends with white space or an invisible character: a "
                         f"family is matched exactly (it would be another family than {trim_name(family)!r}); "
                         "remove them")


#: a swapped twin's number agrees with the earlier line's when within this relative (or absolute) gap:
#: the rounding of 1 - p, never a different verdict
SWAP_TOLERANCE = 1e-9


def same_swapped(x: object, y: object) -> bool:
    """Whether two values of a pair fact (a verdict's preference, its distribution...) are the
    same, floats within :data:`SWAP_TOLERANCE` (relative or absolute: ``math.isclose``), dicts,
    lists and tuples element by element, anything else by ``==``. Booleans are not numbers here."""
    if isinstance(x, bool) or isinstance(y, bool):
        return type(x) is type(y) and x == y
    if isinstance(x, float) or isinstance(y, float):
        if not isinstance(x, (int, float)) or not isinstance(y, (int, float)):
            return x == y
        return math.isclose(x, y, rel_tol=SWAP_TOLERANCE, abs_tol=SWAP_TOLERANCE)
    if isinstance(x, dict) and isinstance(y, dict):
        return x.keys() == y.keys() and all(same_swapped(x[k], y[k]) for k in x)
    if isinstance(x, (list, tuple)) and isinstance(y, (list, tuple)):
        return type(x) is type(y) and len(x) == len(y) and all(same_swapped(a, b) for a, b in zip(x, y))
    return x == y


def show_value(value: object) -> str:
    """A value as an error message shows it (at most 80 characters)."""
    text = json.dumps(value, ensure_ascii=False, default=str) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


class Seen:
    """First line of every natural key met in a file, and the value it had: a conflict (the
    same key with another value) is refused at FILE:LINE naming the earlier line, an exact
    repeat is counted (:meth:`warn_repeats`). docs/data-formats.md, "Duplicates inside one
    file"."""

    def __init__(self) -> None:
        self.first: dict[tuple, tuple[Fields, object]] = {}
        self.repeats: list[int] = []

    def check(self, f: Fields, key: tuple, value: object, what: str, same: str | None = None) -> bool:
        """True the first time ``key`` is met; False for an exact repeat (counted); raises
        InputError at FILE:LINE when ``key`` came earlier with another value (``same``: what
        the key is, in the message; default ``what``)."""
        if key not in self.first:
            self.first[key] = (f, value)
            return True
        earlier, before = self.first[key]
        if before != value:
            raise f.fail(f"{what} conflicts with line {earlier.line} (same {same or what}, different values: {show_value(before)} "
                         f"there, {show_value(value)} here); remove one of them")
        self.repeats.append(f.line)
        return False

    def check_pair(self, f: Fields, kind: str, a, b, rest: tuple, value: object, what: str, *,
                   swap=None, swap_rest=None, swapped_is_conflict: bool = False) -> bool:
        """:meth:`check` for a fact about the pair (a, b) that a file may also give with its
        sides swapped, (b, a): one fact, one row (issue 23). ``swap(value)`` and
        ``swap_rest(rest)`` say what ``value`` and the rest of the key (``rest``: judge,
        position...) mean with the sides swapped. A swapped twin that agrees is an exact
        repeat (counted, kept once); one that disagrees -- or any swapped twin, with
        ``swapped_is_conflict`` (a verbosity pair: which response is the concise one?) -- is
        refused at FILE:LINE naming the earlier line. A swapped twin's numbers are compared
        within float rounding (:func:`same_swapped`): 1 - 0.574443 is 0.42555699999999996, not
        the 0.425557 a file writes."""
        pairs = self.__dict__.setdefault("_pairs", {})
        swapped = b < a  # the key holds the pair in one order, whatever the file's
        key = (kind, b, a, swap_rest(rest) if swap_rest else rest) if swapped else (kind, a, b, rest)
        meant = (swap(value) if swap else value) if swapped else value
        if key not in pairs:
            pairs[key] = (f, value, meant, swapped)
            return True
        earlier, given, before, was_swapped = pairs[key]
        if was_swapped == swapped:
            if given != value:
                raise f.fail(f"{what} conflicts with line {earlier.line} (same {what}, different values: "
                             f"{show_value(given)} there, {show_value(value)} here); remove one of them")
        elif swapped_is_conflict or not same_swapped(before, meant):
            there = swap(value) if swap else value  # (the sides differ from the earlier line's)
            why = ("the same two responses with their roles swapped" if swapped_is_conflict else
                   f"the same pair with its sides swapped: {show_value(value)} here is {show_value(there)} in "
                   f"line {earlier.line}'s order, which has {show_value(given)}")
            raise f.fail(f"{what} conflicts with line {earlier.line} ({why}); remove one of them")
        self.repeats.append(f.line)
        return False

    def warn_repeats(self, batch: ImportBatch, path: Path) -> None:
        """Add the one warning about exact repeats (count and first ten lines) to ``batch``."""
        if self.repeats:
            shown = ", ".join(str(x) for x in self.repeats[:10]) + (", ..." if len(self.repeats) > 10 else "")
            batch.warnings.append(f"{path}: {len(self.repeats)} record(s) repeat an earlier record exactly and were "
                                  f"imported once (lines {shown})")


class UnreadFields:
    """The fields of a real-data format's records that judgecal neither reads nor knows as the
    format's own (a misspelt ``preferance``, a field added by a later version): counted per
    name with the first line, and reported in one warning per file (:meth:`warn`), never passed
    over in silence. ``known``: every field the format's records carry, read or not."""

    def __init__(self, known: frozenset[str] | set[str]):
        self.known = frozenset(known)
        self.counts: dict[str, int] = {}
        self.first: dict[str, int | Callable[[], int]] = {}

    def note(self, obj: Any, line: int | Callable[[], int]) -> None:
        """Count the fields of the record ``obj`` (a dict; a :class:`Record` holds known fields
        only) that are not in ``known``; ``line``: its line, or a function giving it."""
        if isinstance(obj, dict) and not self.known.issuperset(obj):
            for key in obj:
                if key not in self.known:
                    self.counts[key] = self.counts.get(key, 0) + 1
                    self.first.setdefault(key, line)

    def warn(self, batch: ImportBatch, path: Path | str) -> None:
        """Add one warning naming each unread field, its count and its first line."""
        if not self.counts:
            return
        parts = []
        for key in sorted(self.counts, key=lambda k: (-self.counts[k], k))[:10]:
            line = self.first[key]
            parts.append(f"{show_value(key)} ({self.counts[key]} record(s), first at line "
                         f"{line if isinstance(line, int) else line()})")
        more = f" and {len(self.counts) - 10} more" if len(self.counts) > 10 else ""
        batch.warnings.append(f"{path}: field(s) this format does not have, not read: {', '.join(parts)}{more} "
                              f"(the format's fields: {', '.join(sorted(self.known))})")


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
