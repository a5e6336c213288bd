"""AlpacaEval files (tatsu-lab/alpaca_eval): model outputs and pairwise judge annotations.

- ``results/<model>/model_outputs.json``: a JSON array of ``{dataset, instruction, output,
  generator}``; one file is one producing model (``generator``; mixed generators in one file
  are accepted and kept apart).
- ``results/<model>/<annotator>/annotations.json``: a JSON array of the annotator's pairwise
  verdicts, ``{instruction, output_1, generator_1, output_2, generator_2, annotator,
  preference, raw_completion, time_per_example, ...}``; ``output_1`` is the baseline's answer,
  ``output_2`` the model's, ``preference`` a float in [1, 2] (a number or a numeric string;
  2 = output_2 wins, 1.5 = tie; 0 is AlpacaEval's older encoding of a tie and is read as 1.5).
  Each verdict is stored as a ``pairwise_judgment`` with response_a = the model's answer,
  response_b = the baseline's, ``baseline_side`` 'b', ``preference`` = p - 1 (the probability
  that the model's answer is preferred), position 'na' (AlpacaEval's annotator randomises the
  order shown and does not record it). A null or empty preference is stored as an
  ``unparsed`` verdict and counted as skipped; a preference outside [1, 2] is a FILE:LINE error.
- A folder: every ``*/model_outputs.json`` and ``*/*/annotations.json`` below it (an AlpacaEval
  ``results/`` folder or one model's folder).

Items are matched by instruction text across files. ``pairs`` lists (concise file, verbose
file): for every instruction present in both, a verbosity pair (concise response, verbose
response) is recorded.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from functools import partial
from collections import Counter
from pathlib import Path
from typing import Any

import msgspec

from judgecal.errors import InputError
from judgecal.db.ingest import prepare
from judgecal.importers.fastjson import JsonArray, read_json_fields
from judgecal.importers.parallel import map_files
from judgecal.importers.records import (
    JUDGE_NAME_MAX,
    NAME_MAX,
    SOURCE_MAX,
    Fields,
    UnreadFields,
    ImportBatch,
    JudgeSpec,
    unstorable,
    RespRef,
    Seen,
    Verdict,
    Record,
    _JSON_NUMBER,
    check_family,
    file_digest,
    is_object,
    merge,
)

ANNOTATION_KEYS = ("output_1", "output_2", "generator_1", "generator_2")

_UNSET = msgspec.UNSET


class _Completion(Record):
    """The parts of ``raw_completion`` read (its ``logprobs`` are skipped unread); ``message``
    is read whole (a key given twice in it is refused, judgecal.importers.fastjson)."""

    text: Any = _UNSET
    message: msgspec.Raw | msgspec.UnsetType = _UNSET


class _Record(Record, forbid_unknown_fields=True):
    """The fields of an AlpacaEval record (model outputs or annotations): those this importer
    reads, and ``dataset``, ``datasplit``, ``price_per_example``, which it does not. A record
    with any other field is decoded as a dict (:func:`judgecal.importers.fastjson.read_json_fields`)
    and that field is reported (:class:`~judgecal.importers.records.UnreadFields`)."""

    dataset: Any = _UNSET
    datasplit: Any = _UNSET
    price_per_example: Any = _UNSET
    instruction: Any = _UNSET
    output: Any = _UNSET
    generator: Any = _UNSET
    output_1: Any = _UNSET
    output_2: Any = _UNSET
    generator_1: Any = _UNSET
    generator_2: Any = _UNSET
    annotator: Any = _UNSET
    preference: Any = _UNSET
    time_per_example: Any = _UNSET
    raw_completion: _Completion | str | None | msgspec.UnsetType = _UNSET


# AlpacaEval's annotator configurations (src/alpaca_eval/evaluators_configs): a folder of one
# of these names under a model's folder is a results/<model>/<annotator>/ layout
KNOWN_ANNOTATORS = frozenset({
    "weighted_alpaca_eval_gpt4_turbo", "alpaca_eval_gpt4_turbo_fn", "alpaca_eval_gpt4", "alpaca_eval_gpt4_fn",
    "alpaca_eval_cot_gpt4_turbo_fn", "alpaca_eval_clf_gpt4_turbo", "alpaca_eval_clf_cot_gpt4_turbo",
    "alpaca_eval_llama3_70b_fn", "alpaca_eval_gpt4o_fn", "weighted_alpaca_eval_gpt-4o-mini-2024-07-18",
    "alpaca_farm_greedy_gpt4", "alpaca_farm", "chatgpt_fn", "chatgpt", "claude", "gpt4", "gpt4_turbo",
    "aviary_gpt4", "guanaco_33b", "lmsys_gpt4", "oasst_pythia_12b", "stablelm_alpha_7b", "text_davinci_003",
    "improved_aviary_gpt4",
})
_NAMES = ("model_outputs.json", "annotations.json")


def _check_followable(path: Path) -> None:
    """Raise InputError naming ``path`` when it is a symbolic link that cannot be followed
    (to a missing file, or in a loop): a folder import must not skip it without a word."""
    try:
        path.stat()
    except OSError as exc:
        from judgecal.importers.records import unreadable

        raise InputError(unreadable(path, exc), source=str(path)) from None


def _scan(folder: Path) -> tuple[list[Path], list[Path]]:
    """(files read, files named model_outputs.json / annotations.json that are not read) below
    ``folder``: read are ``model_outputs.json``, ``*/model_outputs.json``, ``*/annotations.json``
    and ``*/*/annotations.json``; an entry of one of those names that is a symbolic link that
    cannot be followed raises InputError naming it."""
    found: set[Path] = set()

    def children(d: Path) -> list[Path]:
        try:
            return sorted(d.iterdir())
        except OSError:
            return []

    for c in children(folder):
        if c.name == "model_outputs.json":
            _check_followable(c)
            found.add(c)
        elif c.is_dir():
            for g in children(c):
                if g.name in _NAMES:
                    _check_followable(g)
                    found.add(g)
                elif g.is_dir():
                    for h in children(g):
                        if h.name == "annotations.json":
                            _check_followable(h)
                            found.add(h)
    others = sorted(p for name in _NAMES for p in folder.rglob(name) if p not in found)
    return sorted(found), others


def expand(paths: list[Path], warnings: list[str] | None = None, *, once: bool = True) -> list[Path]:
    """Files to read: each file as given; a folder becomes its ``model_outputs.json``,
    ``*/model_outputs.json``, ``*/annotations.json`` and ``*/*/annotations.json`` (sorted).
    Files of those names at other depths are not read: ``warnings`` gets one line naming
    them. ``once``: each content once (:func:`same_content_once`; False when the caller looks
    the files up by content itself, judgecal.db.filebook). Raises InputError for a missing
    path, a symbolic link that cannot be followed (named) or a folder without AlpacaEval files."""
    out: list[Path] = []
    for p in paths:
        p = Path(p)
        if p.is_dir():
            found, others = _scan(p)
            if others and warnings is not None:
                shown = ", ".join(str(x) for x in others[:5]) + (", ..." if len(others) > 5 else "")
                warnings.append(f"{p}: {len(others)} file(s) named model_outputs.json or annotations.json at another "
                                f"depth were not imported (a folder import reads model_outputs.json, "
                                f"*/model_outputs.json, */annotations.json and */*/annotations.json; "
                                f"give a file itself to import it): {shown}")
            if not found:
                raise InputError("no model_outputs.json or */annotations.json below this folder", source=str(p))
            out.extend(found)
        elif not os.path.lexists(p):
            raise InputError("no such file", source=str(p))
        else:
            _check_followable(p)
            out.append(p)
    # a path given twice, also spelt another way (A.json, ./A.json, /abs/A.json) or a file inside a folder also given
    first: dict[str, Path] = {}
    for p in out:
        first.setdefault(os.path.abspath(p), p)
    unique = list(first.values())
    if len(unique) < len(out) and warnings is not None:
        counts = Counter(os.path.abspath(p) for p in out)
        twice = [p for p in unique if counts[os.path.abspath(p)] > 1]
        shown = ", ".join(str(p) for p in twice[:5]) + (", ..." if len(twice) > 5 else "")
        warnings.append(f"{len(twice)} file(s) given more than once (as a path or inside a folder given): each was "
                        f"read once: {shown}")
    return same_content_once(unique, warnings) if once else unique


def same_content_once(files: list[Path], warnings: list[str] | None = None) -> list[Path]:
    """``files`` with each content once: a file that is the same file as an earlier one
    (a symbolic link, or a folder linked to another) or holds the same bytes (a copy under
    another name) is left out -- its records would be imported again, under another model
    name -- and ``warnings`` gets one line counting and naming them (issue 23). Only files
    whose size another file has are read and hashed (a copy has the size of its original)."""
    import hashlib

    out: list[Path] = []
    real: dict[str, Path] = {}
    digests: dict[str, Path] = {}
    dropped: list[str] = []
    sizes: dict[Path, int | None] = {}
    for p in files:
        try:
            sizes[p] = os.path.getsize(p) if os.path.isfile(p) else None
        except OSError:
            sizes[p] = None  # read below: the parser names the reason
    n_of_size: dict[int | None, int] = {}
    for size in sizes.values():
        n_of_size[size] = n_of_size.get(size, 0) + 1
    for p in files:
        r = os.path.realpath(p)
        if r in real:
            dropped.append(f"{p} (the same file as {real[r]})")
            continue
        if len(files) < 2 or not os.path.isfile(p):  # one file: nothing to compare; a device or FIFO: the parser refuses it
            out.append(p)
            continue
        if sizes[p] is not None and n_of_size[sizes[p]] == 1:  # no other file of its size: not a copy
            real[r] = p
            out.append(p)
            continue
        h = hashlib.sha256()
        try:
            with open(p, "rb") as fh:
                for chunk in iter(lambda: fh.read(1 << 20), b""):
                    h.update(chunk)
        except OSError:  # named by the parser, with its reason
            out.append(p)
            continue
        d = h.hexdigest()
        if d in digests:
            dropped.append(f"{p} (the same content as {digests[d]})")
            continue
        real[r], digests[d] = p, p
        out.append(p)
    if dropped and warnings is not None:
        shown = "; ".join(dropped[:5]) + ("; ..." if len(dropped) > 5 else "")
        warnings.append(f"{len(dropped)} file(s) not imported: the same file or content as one imported above "
                        f"(SHA-256 of the bytes; a symbolic link or a copy would import the same records again): {shown}")
    return out


def _model_of_results_folder(path: Path, annotators: set[str]) -> str | None:
    """``<model>`` of an AlpacaEval ``results/<model>/<annotator>/annotations.json`` (None for
    another layout): the file is named annotations.json and its folder is named after the
    annotator, one its records name (``annotators``) or a known AlpacaEval annotator
    configuration (:data:`KNOWN_ANNOTATORS`). Otherwise the model is the records' own
    ``generator_2`` (a folder name does not rename it)."""
    if path.name != "annotations.json" or len(path.parts) < 3:
        return None
    annotator_folder = path.parent.name
    if annotator_folder not in annotators and annotator_folder not in KNOWN_ANNOTATORS:
        return None
    model = path.parent.parent.name
    return model if model.strip() and model not in (".", "..") else None


def _files(paths: list[Path], pairs: list[tuple[Path, Path]], warnings: list[str] | None = None,
           once: bool = True) -> list[Path]:
    for concise, verbose in pairs:
        if Path(concise) == Path(verbose) or os.path.realpath(concise) == os.path.realpath(verbose):
            raise InputError("--pair names the same file twice: a verbosity pair needs a concise and a verbose "
                             "model_outputs.json (two different files)", source=str(concise))
    pair_files = [Path(p) for pair in pairs for p in pair]
    for p in pair_files:
        if not os.path.lexists(p):
            raise InputError("no such file", source=str(p))
    first: dict[str, Path] = {}  # a --pair file also given as a path (spelt either way) is read once
    for p in expand(list(paths), warnings, once=once) + pair_files:
        first.setdefault(os.path.abspath(p), p)
    return list(first.values())


def parse(paths: list[Path], family: str, pairs: list[tuple[Path, Path]] = ()) -> ImportBatch:
    """Parse AlpacaEval output and annotation files (and the files named in ``pairs``) into
    one batch, in this process (:func:`batches` gives one batch per file, in parallel).

    Returns an ImportBatch (responses, verbosity pairs, pairwise verdicts; skipped records
    counted with reason and FILE:LINE). Raises InputError naming FILE:LINE for a bad record."""
    return merge("alpaca_eval", batches(paths, family, pairs, workers=0))


def batches(paths: list[Path], family: str, pairs: list[tuple[Path, Path]] = (),
            workers: int | None = None,
            skip: Callable[[list[Path]], set[Path]] | None = None, parsing: dict | None = None) -> Iterator[ImportBatch]:
    """One ImportBatch per file, in the order the files are listed (folders expanded, sorted),
    then one with the verbosity pairs of ``pairs``. Files are parsed by up to ``workers``
    processes (None: as many as :func:`judgecal.importers.parallel.map_files` picks; 0: in
    this process) while the caller writes the batches already parsed. ``skip``: called once
    with every file to read, in the listed order, before any is parsed; the files it returns
    are neither parsed nor yielded (a ``--pair`` file is parsed here for its pairs, its batch
    not yielded); with ``skip``, files are not deduplicated by content here (the caller does it).
    ``parsing``: filled with where the files were parsed (``map_files``' ``stats``: files,
    workers, in_process, reason).
    Raises InputError naming FILE:LINE for a bad record (the first bad file in the listed order)."""
    check_family(family)
    notes: list[str] = []
    files = _files(paths, pairs, notes, once=skip is None)
    if notes:
        yield ImportBatch(source="alpaca_eval", warnings=notes)
    left_out = skip(list(files)) if skip is not None else set()
    pair_files = {os.path.abspath(p) for pair in pairs for p in pair}
    by_file: dict[str, dict[str, tuple[RespRef, int]]] = {}  # model-outputs file (abspath) -> {instruction: (response, line)}
    for path in files:
        if path in left_out and os.path.abspath(path) in pair_files:  # its pairs are needed, its records are not written
            seen = parse_file(path, family)[1]
            if seen is not None:
                by_file[os.path.abspath(path)] = seen
    files = [p for p in files if p not in left_out]
    sent: set[RespRef] = set()  # per process: the responses its earlier batches carried (ImportBatch.mark_sent)
    for path, (batch, seen) in zip(files, map_files(parse_file, files, family, sent, workers=workers, stats=parsing)):
        if seen is not None:
            by_file[os.path.abspath(path)] = seen
        yield batch
    if pairs:
        batch = ImportBatch(source="alpaca_eval")
        at = batch.at.setdefault("verbosity_pairs", [])
        for concise, verbose in pairs:
            for p in (concise, verbose):
                if os.path.abspath(p) not in by_file:
                    raise InputError("--pair takes two model_outputs.json files; this one holds annotations", source=str(p))
            c, v = by_file[os.path.abspath(concise)], by_file[os.path.abspath(verbose)]
            common = [k for k in c if k in v]
            if not common:
                raise InputError(f"no instruction in common with {verbose}: cannot form verbosity pairs", source=str(concise))
            same = [k for k in common if c[k][0].text == v[k][0].text and c[k][0].model == v[k][0].model]
            if len(same) == len(common):
                raise InputError(f"every response is the same in {verbose}: a verbosity pair needs two different "
                                 "responses (is it the same file twice?)", source=str(concise))
            for k in common:
                (cr, line), (vr, _) = c[k], v[k]
                if cr.text == vr.text and cr.model == vr.model:
                    batch.skip("--pair: the concise and verbose responses are the same response (no pair)",
                               f"{concise} / {verbose}: {k[:60]!r}")
                    continue
                batch.verbosity_pairs.append((batch.add_response(cr), batch.add_response(vr)))
                at.append((str(concise), line))  # a conflict with a stored pair names the concise file's line
        yield batch


def parse_file(path: Path, family: str, sent: set | None = None) -> tuple[ImportBatch, dict[str, RespRef] | None]:
    """One AlpacaEval file: its batch (response lengths and hashes computed,
    :func:`judgecal.db.ingest.prepare`) and, for a model-outputs file, {instruction:
    (response, line)} (None for an annotations file). ``sent``: the responses this process's earlier batches of
    the same import carried (updated; :meth:`ImportBatch.mark_sent`), None to carry all.
    Raises InputError naming FILE:LINE for a bad record."""
    batch = ImportBatch(source="alpaca_eval", files=[str(path)])
    records = read_json_fields(path, _Record)
    seen: dict[str, tuple[RespRef, int]] | None = None
    if not records:
        batch.warnings.append(f"{path}: an empty JSON array: nothing to import from this file")
        return batch, None
    unread = UnreadFields(_Record.__struct_fields__)
    for k, obj in enumerate(records.objects):
        if type(obj) is dict:  # a Record holds known fields only
            unread.note(obj, partial(records.line, k))
    unread.warn(batch, path)
    first = records.objects[0]
    if is_object(first) and any(k in first for k in ANNOTATION_KEYS + ("preference",)):
        if path.name == "model_outputs.json":
            batch.warnings.append(f"{path}:{records.line(0)}: this model_outputs.json holds annotation records "
                                  "(output_1/output_2/preference): read as pairwise verdicts")
        _annotations(batch, path, records, family)
    else:
        seen = {}
        for line, obj in records:
            f = Fields(obj, str(path), line)
            if f.has("output_1") or f.has("output_2"):
                raise f.fail("an annotation record in a model-outputs file (the first record has no "
                             "output_1/output_2/generator_1/generator_2)")
            instruction = f.text("instruction", allow_empty=False)
            ref = batch.add_response(RespRef(family, instruction, f.name("generator"), f.text("output")))
            if instruction in seen:
                raise f.fail("instruction appears twice in this file (one output per instruction expected)")
            seen[instruction] = (ref, line)
    prepare(batch)
    # here, in a parsing process where there is one (judgecal.db.filebook); of the bytes parsed when they were
    # read once (the fast path), else read again
    digest = records.digest if getattr(records, "digest", None) is not None else file_digest(path)
    if digest is not None:
        batch.digests[str(path)] = tuple(digest)
    if sent is not None:
        batch.mark_sent(sent)
    return batch, seen


def _preference(f: Fields) -> float | None:
    """AlpacaEval preference in [1, 2] (None when null/empty); 0 (older tie encoding) -> 1.5."""
    value = f.obj.get("preference")
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    p = f.number("preference")
    if p == 0:
        return 1.5
    if not 1.0 <= p <= 2.0:
        raise f.fail(f"field 'preference' must be in [1, 2] (2 = output_2 preferred), got {p!r}")
    return p


def _raw_output(obj: dict) -> str | None:
    """The judge's raw output of an annotation record: ``raw_completion`` when it is a string,
    else its ``text``, else its ``message.content`` (None when none is a string)."""
    rc = obj.get("raw_completion")
    if is_object(rc):
        text = rc.get("text")
        if text is None and is_object(rc.get("message")):
            text = rc.get("message").get("content")
        return text if isinstance(text, str) else None
    return rc if isinstance(rc, str) else None


def _storable_raw_output(obj: dict, f: Fields) -> str | None:
    """:func:`_raw_output`, refused at FILE:LINE as every text field is when no database could
    store it alike: a NUL character (PostgreSQL refuses it), an unpaired surrogate (not UTF-8)."""
    raw = _raw_output(obj)
    problem = unstorable(raw) if raw is not None else None
    if problem:
        rc = obj.get("raw_completion")
        name = ("raw_completion" if isinstance(rc, str) else "raw_completion.text" if isinstance(rc.get("text"), str)
                else "raw_completion.message.content")
        raise f.fail(f"field {name!r} {problem}")
    return raw


def _clean(r: _Record) -> tuple | None:
    """The values of a record that passes every check the careful path (:class:`Fields`)
    makes, read without it: (instruction, generator_1, generator_2, annotator, preference,
    output_1, output_2, time_per_example). None for anything else (a missing, null, empty,
    oversized or non-string field, a preference that is not a number in [1, 2] (a JSON number,
    or a string of one), a negative
    time...), which the careful path then reads, accepts or refuses with its FILE:LINE message.
    A fast path only: it decides nothing the careful path would decide otherwise."""
    instruction, g1, g2, ann = r.instruction, r.generator_1, r.generator_2, r.annotator
    o1, o2, pref, t = r.output_1, r.output_2, r.preference, r.time_per_example
    if not (type(instruction) is str and type(g1) is str and type(g2) is str and type(ann) is str
            and type(o1) is str and type(o2) is str):
        return None
    if (not instruction.strip() or not g1.strip() or not g2.strip() or not ann.strip()
            or len(g1) > NAME_MAX or len(g2) > NAME_MAX or len(ann) > JUDGE_NAME_MAX):
        return None
    if "\x00" in instruction or "\x00" in o1 or "\x00" in o2 or "\x00" in g1 or "\x00" in g2 or "\x00" in ann:
        return None
    if type(pref) is str:  # a number written as text, read as Fields.number reads it
        if not _JSON_NUMBER.fullmatch(pref):
            return None
        pref = float(pref)
    elif type(pref) is not float and type(pref) is not int:
        return None
    if not 1.0 <= pref <= 2.0:
        return None
    if t is not None and t is not _UNSET and not (type(t) in (float, int) and 0.0 <= t <= 1e15):
        return None
    return instruction, g1, g2, ann, float(pref), o1, o2, (None if t is None or t is _UNSET else float(t))


def _careful(f: Fields) -> tuple:
    """The same values as :func:`_clean`, read through :class:`Fields` (every check, every
    FILE:LINE message); the annotator is None when the record names none."""
    instruction = f.text("instruction", allow_empty=False)
    base = f.name("generator_1")
    model = f.name("generator_2")
    annotator = f.text("annotator", required=False, max_len=JUDGE_NAME_MAX)
    pref = _preference(f)
    latency = f.number("time_per_example", required=False)
    if latency is not None and latency < 0:
        raise f.fail(f"field 'time_per_example' must be >= 0 seconds, got {latency!r}")
    annotator = annotator if annotator and annotator.strip() else None  # a blank name is no name: the default, counted
    return instruction, base, model, annotator, pref, f.text("output_1"), f.text("output_2"), latency


def _annotations(batch: ImportBatch, path: Path, records: JsonArray, family: str) -> None:
    annotators = {a for o in records.objects if is_object(o) and isinstance(a := o.get("annotator"), str) and a.strip()}
    folder_model = _model_of_results_folder(path, annotators)
    named = next((o.get("annotator") for o in records.objects
                  if is_object(o) and isinstance(o.get("annotator"), str) and o.get("annotator").strip()), None)
    default_annotator = named or (path.parent.name if folder_model else "alpaca_eval")
    unnamed: list[int] = []
    seen = Seen()
    renamed: dict[str, list[int]] = {}
    judges: dict[str, JudgeSpec] = {}
    src, source = str(path), str(path)[:SOURCE_MAX]
    line_of = records.line
    batch.origin, batch.origin_index = src, True
    at = batch.at.setdefault("verdicts", [])
    for k, obj in enumerate(records.objects):
        f = Fields(obj, src, partial(line_of, k))  # the line is counted only if a message needs it
        values = _clean(obj) if type(obj) is _Record else None
        instruction, base, model, annotator, pref, out1, out2, latency = values or _careful(f)
        if folder_model and model != folder_model and model != base:
            if len(folder_model) > NAME_MAX:
                raise f.fail(f"the results folder's name {folder_model[:40]!r}... (the model's name) is "
                             f"{len(folder_model)} characters long; at most {NAME_MAX} are stored")
            renamed.setdefault(model, []).append(f.line)
            model = folder_model
        if not annotator:
            unnamed.append(f.line)
            annotator = default_annotator
        if not seen.check(f, (annotator, model, instruction), pref, "verdict", same="annotator, model and instruction"):
            batch.skip("the same verdict appears twice in the file (first kept)", f"{path}:{f.line}")
            continue
        b = batch.add_response(RespRef(family, instruction, base, out1))
        a = batch.add_response(RespRef(family, instruction, model, out2))
        if model == base:
            # the baseline against itself: AlpacaEval's 50% by construction, no verdict to store
            batch.skip("the baseline compared with itself (win rate 50% by construction)", f"{path}:{f.line}")
            continue
        judge = judges.get(annotator)
        if judge is None:
            judge = judges[annotator] = JudgeSpec(name=annotator, model=annotator, endpoint="import:alpaca_eval",
                                                  prompt_name=annotator, scale_min=1.0, scale_max=2.0, mode="pairwise")
        raw = _storable_raw_output(obj, f)
        if pref is None:
            what = "null" if obj.get("preference") is None else "empty"
            batch.verdicts.append(Verdict(judge, a, b, status="unparsed", baseline_side="b", source=source, raw_output=raw,
                                          error=f"{what} preference in the annotations file", latency_s=latency))
            at.append(k)
            batch.skip(f"{what} preference (an unparsed verdict, left out of win rates)", f"{path}:{f.line}")
        else:
            soft = pref - 1.0
            batch.verdicts.append(Verdict(judge, a, b, verdict="a" if soft > 0.5 else "b" if soft < 0.5 else "tie",
                                          preference=soft, baseline_side="b", source=source, raw_output=raw,
                                          latency_s=latency))
            at.append(k)
    if unnamed:
        batch.warnings.append(f"{path}:{unnamed[0]}: {len(unnamed)} records without an annotator: filed under "
                              f"{default_annotator!r} (the file's {'first named annotator' if named else 'folder name'})")
    for name, lines in renamed.items():
        batch.warnings.append(
            f"{path}:{lines[0]}: generator_2 {name!r} differs from the results folder's model {folder_model!r} "
            f"in {len(lines)} records: stored as {folder_model!r} (the name AlpacaEval's leaderboard uses)")
