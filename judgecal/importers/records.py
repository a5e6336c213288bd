"""Plain records produced by the importers: the batch an import writes, the fields of one
record with their checks, and the duplicate-key bookkeeping of one file. The line-aware JSON /
JSONL / CSV readers live in :mod:`judgecal.importers.filereading` (re-exported here).

Every check reports a bad record as ``InputError("FILE:LINE: reason")``."""

from __future__ import annotations

import gc
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Callable, Iterable
from contextlib import contextmanager
from typing import Any, Iterator, NamedTuple

import msgspec

from judgecal.errors import InputError, UsageError
from judgecal.importers.filereading import (  # noqa: F401 - re-exported: the importers' one module of records
    line_of,
    json_problem,
    read_json_array,
    array_line,
    MAX_FILE_BYTES,
    unstorable,
    check_text_path,
    read_bytes,
    FileDigest,
    file_digest,
    unreadable,
    byte_line,
    read_text,
    DuplicateKey,
    unique_keys,
    Repeated,
    TooLong,
    first_too_long,
    too_long_error,
    first_repeat,
    repeat_message,
    read_jsonl,
    neutralise_cell,
    restore_cell,
    read_csv,
    read_csv_cells,
    csv_line,
)


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
