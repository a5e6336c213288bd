"""``judgecal import``: parse a file into records, then write them in ONE transaction.

A bad record aborts before anything is written (the parse runs first, over the whole file),
and a database error rolls the transaction back, so an import is all or nothing. Every
importer's files are looked up and recorded by the SHA-256 of their content in the same
transaction (:mod:`judgecal.db.filebook`): a content already imported from another path is
reported in the result's ``files`` ("already imported as FIRST"), not written again."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from pathlib import Path

from sqlalchemy.exc import SQLAlchemyError

from judgecal.db.engine import get_engine, held_interrupts, session_scope
from judgecal.errors import DatabaseError, InputError
from judgecal.db.filebook import FileBook
from judgecal.db.ingest import TABLES, Writer
from judgecal.importers import alpaca_eval, generic, llmbar, pandalm
from judgecal.importers.records import ImportBatch, bulk, check_text_path

commits = 0
"""Imports this process has committed. It counts an import before its Ctrl-C hold ends (a
Ctrl-C is held from the end of the writing, through the commit, until :func:`import_batches`
returns), so a command line can treat a Ctrl-C that comes later, once the handler in place
before is back, as one that came after the commit (:func:`judgecal.cli.main`: a warning, exit 0)."""


#: paths listed per reason in an import result's ``not_read`` (the count is of every one)
NOT_READ_SHOWN = 50


def import_batch(batch: ImportBatch, url: str | None = None, *, importer: str | None = None,
                 family: str | None = None) -> dict:
    """Write a parsed batch; returns what :func:`import_batches` returns."""
    return import_batches(batch.source, [batch], url, importer=importer, family=family)


def import_batches(source: str, batches: Iterable[ImportBatch] | Callable[[FileBook], Iterable[ImportBatch]],
                   url: str | None = None, *, importer: str | None = None, family: str | None = None) -> dict:
    """Write ``batches`` (one per file, parsed while earlier ones are written) in ONE
    transaction: an error raised while parsing or writing any of them rolls everything back.

    ``importer`` (with ``family``, the --task-family given): the files of the batches
    (:attr:`ImportBatch.files`) are looked up by the SHA-256 of their content and recorded in
    the same transaction (:class:`judgecal.db.filebook.FileBook`): a batch whose files were
    already imported from another path is not written (its warnings and skipped records are
    not reported either: nothing of it was read into the database). ``batches`` may be a
    callable that takes the FileBook (to leave such files unparsed) and returns the batches.

    Returns {"added": {table: n}, "warnings": [...], "skipped": {reason: {count, where}} (records
    left out), "stored_unparsed": {reason: {count, where}} (records stored unparsed although the
    file gave a score or verdict: :attr:`ImportBatch.unparsed`; ``where`` the first 20 FILE:LINE), "not_read": {reason: {count, where}} (files and folders of the input not read:
    :attr:`ImportBatch.not_read`; ``where`` lists the first :data:`NOT_READ_SHOWN` paths),
    "source": ..., "files": [one dict per file: file, sha256, bytes, status (new | again |
    changed | duplicate), already_imported_as and earlier_in_this_import (duplicate), before
    (changed): :meth:`judgecal.db.filebook.FileEntry.as_dict`]}."""
    global commits
    engine = get_engine(url)
    book: FileBook | None = None
    warnings: list[str] = []
    skipped_at: dict[str, list[str]] = {}
    not_read_at: dict[str, list[str]] = {}
    unparsed_at: dict[str, list[str]] = {}
    held: list = []  # a Ctrl-C that came during the commit (the import then completed)
    # from the end of the writing to the return, Ctrl-C is held: once the commit has begun the
    # import completes, and it must not be reported as interrupted between the commit and here
    hold = contextlib.ExitStack()
    with hold:
        try:
            with bulk(), session_scope(engine, held=held) as session:
                book = FileBook(session, importer, family) if importer is not None else None
                writer = Writer(session, book)
                if callable(batches):
                    batches = batches(book)
                for batch in batches:
                    if not writer.write(batch):
                        continue  # its files' content was imported before from another path (book.report)
                    warnings.extend(batch.warnings)
                    for reason, where in batch.skipped.items():
                        skipped_at.setdefault(reason, []).extend(where)
                    for reason, where in batch.not_read.items():
                        not_read_at.setdefault(reason, []).extend(where)
                    for reason, where in batch.unparsed.items():
                        unparsed_at.setdefault(reason, []).extend(where)
                hold.enter_context(held_interrupts(held))
            commits += 1
        except SQLAlchemyError as exc:  # the transaction is rolled back: nothing was written
            reason = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0]
            raise DatabaseError(f"{source}: the database refused the import, nothing was written: {reason}") from None
        finally:
            with held_interrupts(held):  # closing a SQLite file checkpoints it: after the commit, not a cut
                engine.dispose()
        if held:
            warnings.append("Ctrl-C came while the import was being committed: the commit had begun and completed, "
                            "so everything counted below was imported")
        files: list[dict] = []
        if book is not None:
            files, changed = book.report()
            warnings.extend(changed)
        skipped = {reason: {"count": len(where), "where": where[:20]} for reason, where in skipped_at.items()}
        for table, n in writer.already.items():
            if n:  # an earlier import (or an earlier file of this one) stored them with the same values
                skipped[f"already stored with the same values ({table} rows not added again)"] = {"count": n, "where": []}
        not_read = {reason: {"count": len(where), "where": where[:NOT_READ_SHOWN]} for reason, where in not_read_at.items()}
        unparsed = {reason: {"count": len(where), "where": where[:20]} for reason, where in unparsed_at.items()}
        return {"source": source, "added": writer.added, "warnings": warnings, "skipped": skipped,
                "not_read": not_read, "stored_unparsed": unparsed, "files": files}


def file_lines(result: dict) -> list[str]:
    """Lines for a terminal summary of an import's files (``result["files"]``): one line of
    counts, then one line per file already imported as another (not stored twice)."""
    files = result.get("files") or []
    if not files:
        return []
    n = {s: sum(f["status"] == s for f in files) for s in ("new", "again", "changed", "duplicate")}
    parts = [f"{n['new']} new"]
    if n["again"]:
        parts.append(f"{n['again']} imported before from the same path with the same content")
    if n["changed"]:
        parts.append(f"{n['changed']} imported before from the same path with other content (warnings above)")
    if n["duplicate"]:
        parts.append(f"{n['duplicate']} already imported as another file (not stored twice)")
    lines = [f"files: {len(files)} read (content SHA-256): {', '.join(parts)}"]
    for f in files:
        if f["status"] == "duplicate":
            here = ", earlier in this import" if f.get("earlier_in_this_import") else ""
            lines.append(f"already imported as {f['already_imported_as']}{here}: {f['file']} (the same content, "
                         f"SHA-256 {f['sha256'][:12]}...): nothing from it stored again")
    return lines


def parsing_line(result: dict) -> str | None:
    """One line saying where an import's files were parsed (``result["parsing"]``), None when
    no file was parsed: ``parsed 6 files in this process (--workers 0)`` or ``parsed 26 files:
    20 by 3 worker processes, 6 in this process``."""
    p = result.get("parsing") or {}
    if not p.get("files"):
        return None
    if not p.get("workers"):
        return f"parsed {p['files']} file(s) in this process ({p.get('reason') or 'no worker'})"
    return (f"parsed {p['files']} file(s): {p['files'] - p['in_process']} by {p['workers']} worker process(es), "
            f"{p['in_process']} in this process (while a worker's result was late)")


def import_llmbar(folder: Path, family: str | None = None, url: str | None = None) -> dict:
    """Import LLMBar: a set folder (dataset.json + ratings_*.json, or the repository's
    evaluators/<judge>/<protocol>/result.json: ratings and pairwise verdicts in both orders),
    the repository's Dataset/LLMBar folder or its root (every set). Family default:
    ``llmbar/<set>`` (``llmbar/Adversarial_<set>``). Written file by file in ONE transaction.
    The result also holds ``llmbar_statistics``: {"compared": statistics.json files compared,
    "equal": those whose every figure judgecal reproduced, "differ": [file: differences]}
    (:func:`judgecal.importers.llmbar.batches`)."""
    parity: list[dict] = []
    folder = Path(folder)
    try:
        resolved = folder.resolve()
    except (RuntimeError, OSError) as exc:  # a symlink loop (RuntimeError on Python 3.11) or an unreadable link
        raise InputError(f"{folder}: cannot be read as a folder ({exc})") from None
    check_text_path(resolved)  # its name names the set's task family
    name = resolved.name
    result = import_batches(f"llmbar/{name}", llmbar.batches(folder, family, parity, _gold_pairs(url)), url,
                            importer="llmbar", family=family)
    result["llmbar_statistics"] = {
        "compared": len(parity), "equal": sum(not p["differences"] for p in parity),
        "differ": [f"{p['file']}: {'; '.join(p['differences'])}" for p in parity if p["differences"]]}
    return result


def _gold_pairs(url: str | None):
    """LLMBar's stored gold pairs of a family (:func:`judgecal.db.queries.pair_label_texts`),
    read when the parser reaches the family's set (before its batches are written)."""
    from judgecal.db.queries import pair_label_texts

    def stored(family: str) -> list[tuple[str, str, str, str]]:
        with session_scope(get_engine(url)) as s:
            return pair_label_texts(s, family, "llmbar-gold")
    return stored


def import_autoj(path: Path, family: str | None = None, url: str | None = None) -> dict:
    """Import Auto-J's pairwise test file. Family default: ``autoj/<scenario>`` per record."""
    from judgecal.importers import autoj

    return import_batch(autoj.parse(Path(path), family), url, importer="autoj", family=family)


def import_judgebench(paths: list[Path], family: str | None = None, url: str | None = None) -> dict:
    """Import JudgeBench data and reward-model output files. Family default: ``judgebench``.
    A reward model named like an existing, different judge is refused (InputError)."""
    from judgecal.importers import judgebench

    batches = list(judgebench.batches([Path(p) for p in paths], family))  # one per file
    judgebench.refuse_judge_clashes(batches, url)
    return import_batches("judgebench", batches, url, importer="judgebench", family=family)


def import_pandalm(path: Path, family: str | None = None, url: str | None = None) -> dict:
    """Import the PandaLM test set. Family default: ``pandalm``."""
    pandalm.check_family(family)  # an empty --task-family is refused, not read as the default
    return import_batch(pandalm.parse(Path(path), "pandalm" if family is None else family), url, importer="pandalm",
                        family=family)


def import_alpaca_eval(paths: list[Path], pairs: list[tuple[Path, Path]], family: str | None = None,
                       url: str | None = None, *, workers: int | None = None) -> dict:
    """Import AlpacaEval model_outputs.json / annotations.json files or results folders, and
    verbosity pairs. Family default: ``alpaca_eval``. Files are parsed by up to ``workers``
    processes while earlier ones are written (None: automatic, 0: none;
    :mod:`judgecal.importers.parallel`); a file whose content was imported before from another
    path (or is an earlier file's of this import: a symbolic link, a copy) is not parsed.
    The result also holds ``parsing``: {files, workers, in_process, reason}
    (:func:`judgecal.importers.parallel.map_files`' stats: how many files this process parsed
    itself, and why no worker was started; :func:`parsing_line` words it)."""
    alpaca_eval.check_family(family)  # before the database is opened; an empty name is refused, not the default
    given, family = family, "alpaca_eval" if family is None else family

    def batches(book: FileBook):
        # a file whose content was imported before from another path is not parsed (a parsing
        # process's later batches may name its responses without their texts): the book is
        # asked about every file, in the listed order, before the first is parsed
        def skip(files: list[Path]) -> set[Path]:
            for p in files:
                check_text_path(p)  # before the book looks a path up
            book.presize([str(p) for p in files])  # files no other can equal are not read here
            entries = [(p, book.status(str(p))) for p in files]
            return {p for p, e in entries if e is not None and e.status == "duplicate"}

        return alpaca_eval.batches(list(paths), family, list(pairs), workers=workers, skip=skip, parsing=parsing)

    parsing: dict = {}
    result = import_batches("alpaca_eval", batches, url, importer="alpaca_eval", family=given)
    return {**result, "parsing": parsing}


def import_generic(path: Path, kind: str, fmt: str, family: str | None = None, url: str | None = None) -> dict:
    """Import a generic JSONL or CSV file of ``kind`` (responses, ratings, labels, pairs,
    verdicts). The result also holds ``records`` (read) and ``file``. A file without records
    (what ``judgecal export`` writes when there is nothing to export: JSONL without a line, CSV
    with its header row only) imports as nothing: ``records`` 0, every count 0, and the
    database is not opened (nothing written, the file's hash not recorded)."""
    batch = generic.parse(Path(path), kind, fmt=fmt, family=family)
    if batch.records == 0:
        result = {"source": batch.source, "added": dict.fromkeys(TABLES, 0), "warnings": batch.warnings,
                  "skipped": {}, "not_read": {}, "stored_unparsed": {}, "files": []}
    else:
        result = import_batch(batch, url, importer=f"{fmt}:{kind}", family=family)
    return {**result, "file": str(path), "records": batch.records}
