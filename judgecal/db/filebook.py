"""The files of an import by the SHA-256 of their content (table ``imported_file``, migration 0005).

One content, one import: a file whose bytes were already imported from another path (a copy
under another name, a symbolic link, a folder linked to another) by the same importer with the
same ``--task-family`` option is recognised and its records are not written again; it is
reported as ``already imported as <first path>``. The same path with the same content is
read again as before (natural keys make that idempotent: its rows are counted as already
stored); the same path with other content is read as before too, and said so. Every row is
written in the import's own transaction (the caller's session), so a rolled-back import
leaves no hash behind (docs/data-formats.md, "One fact, one row").

Statuses of a file (:attr:`FileEntry.status`):

- ``new``: this content was not imported before (a row is recorded);
- ``again``: this path was imported before with this content (nothing recorded);
- ``changed``: this path was imported before with other content (a row is recorded for the new
  content; ``before``: the earlier SHA-256 and when it was imported);
- ``duplicate``: this content was imported before from another path, ``first`` (by an earlier
  import, or earlier in this one): the file's records are not written.
"""

from __future__ import annotations

import datetime as dt
import os
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from judgecal.db import models as m
from judgecal.db import queries as q
from judgecal.errors import InputError
from judgecal.importers.records import file_digest


def stat_is_file(mode: int) -> bool:
    """Whether a ``st_mode`` is a regular file's."""
    import stat

    return stat.S_ISREG(mode)


@dataclass
class FileEntry:
    """One file of an import: ``file`` as given, ``path`` absolute (symbolic links kept),
    ``sha256``/``n_bytes`` of its content, ``status`` (module doc), ``first``: the path the
    content was first imported from (``duplicate``), ``before``: (SHA-256, imported at) of
    the content this path held when it was imported before (``changed``)."""

    file: str
    path: str
    sha256: str | None  # None until known: a file no other can equal (:meth:`FileBook.presize`)
    n_bytes: int
    status: str
    first: str | None = None
    first_here: bool = False  # the first path is earlier in this import (not in the database yet)
    before: tuple[str, dt.datetime | None] | None = None
    recorded: bool = False

    def as_dict(self) -> dict:
        """The entry as the import result reports it (JSON-ready)."""
        out = {"file": self.file, "sha256": self.sha256, "bytes": self.n_bytes, "status": self.status}
        if self.first is not None:
            out["already_imported_as"] = self.first
            if self.first_here:
                out["earlier_in_this_import"] = True
        if self.before is not None:
            out["before"] = {"sha256": self.before[0],
                             "imported_at": self.before[1].isoformat() if self.before[1] is not None else None}
        return out


class FileBook:
    """The files one import reads, looked up and recorded in ``session`` (the import's
    transaction) under ``importer`` (``alpaca_eval``, ``llmbar``, ``autoj``, ``judgebench``,
    ``pandalm``, ``jsonl:<kind>``, ``csv:<kind>``) and ``family_option`` (the
    ``--task-family`` given; None: none)."""

    def __init__(self, session: Session, importer: str, family_option: str | None):
        self.session = session
        self.importer = importer
        self.family = family_option or ""
        self.entries: dict[str, FileEntry] = {}  # absolute path -> entry, in the order met
        self._first_of: dict[str, str] = {}  # SHA-256 -> the first path of this import holding it

    def _where(self, t):
        return (t.c.importer == self.importer) & (t.c.family_option == self.family)

    def presize(self, files: list[str]) -> None:
        """Give an entry without reading it to each of ``files`` (the files of one import, in
        their order) that no other content can equal: its size is that of no file this
        importer recorded with this ``--task-family`` and of no other of ``files`` (a copy has
        its original's size). Such a file is ``new``, or ``changed`` when its path was imported
        before; its SHA-256 is taken when it is recorded (:meth:`record`: from the batch, which
        a parsing process hashed, or read then). The others are left to :meth:`status`."""
        sizes: dict[str, int] = {}
        for f in files:
            try:
                st = os.stat(f)
            except OSError:
                continue  # the importer names the reason
            if os.path.abspath(f) not in self.entries and stat_is_file(st.st_mode):
                sizes[f] = st.st_size
        t = m.ImportedFile.__table__
        conn = self.session.connection()
        stored = set(conn.execute(select(t.c.n_bytes).where(self._where(t)).distinct()).scalars())
        count: dict[int, int] = {}
        for n in sizes.values():
            count[n] = count.get(n, 0) + 1
        for f, n in sizes.items():
            if n in stored or count[n] > 1:
                continue
            path = os.path.abspath(f)
            entry = FileEntry(file=str(f), path=path, sha256=None, n_bytes=n, status="new")
            prev = conn.execute(select(t.c.sha256, t.c.created_at).where(self._where(t) & (t.c.path == path))
                                .order_by(t.c.id.desc()).limit(1)).first()
            if prev is not None:  # another size: other content
                entry.status, entry.before = "changed", (prev.sha256, prev.created_at)
            self.entries[path] = entry

    def status(self, file: str) -> FileEntry | None:
        """The entry of ``file`` (looked up once per path: hashed, then asked of the database
        and of this import's earlier files). None when the file cannot be read (the importer
        names the reason)."""
        path = os.path.abspath(file)
        found = self.entries.get(path)
        if found is not None:
            return found
        digest = file_digest(path)
        if digest is None:
            return None
        t = m.ImportedFile.__table__
        conn = self.session.connection()
        row = conn.execute(select(t.c.path).where(self._where(t) & (t.c.sha256 == digest.sha256))
                           .order_by(t.c.id).limit(1)).first()
        entry = FileEntry(file=str(file), path=path, sha256=digest.sha256, n_bytes=digest.n_bytes, status="new")
        if row is not None:
            if row.path == path:
                entry.status = "again"
            else:
                entry.status, entry.first = "duplicate", row.path
        elif digest.sha256 in self._first_of:
            entry.status, entry.first, entry.first_here = "duplicate", self._first_of[digest.sha256], True
        else:
            prev = conn.execute(select(t.c.sha256, t.c.created_at).where(self._where(t) & (t.c.path == path))
                                .order_by(t.c.id.desc()).limit(1)).first()
            if prev is not None:
                entry.status, entry.before = "changed", (prev.sha256, prev.created_at)
        if entry.status != "duplicate":
            self._first_of.setdefault(digest.sha256, path)
        self.entries[path] = entry
        return entry

    def skips(self, files: list[str]) -> bool:
        """Whether a batch holding the records of ``files`` is left out: every one of them is
        a ``duplicate`` (a batch of several files of which some are new is written whole)."""
        if not files:
            return False
        got = [self.status(f) for f in files]
        return all(e is not None and e.status == "duplicate" for e in got)

    def record(self, files: list[str], digests: dict[str, tuple[str, int]] | None = None) -> None:
        """Record the content of each ``new`` or ``changed`` file among ``files`` (once);
        ``digests``: {file: (SHA-256, bytes)} a parsing process computed (else read here when
        not known yet). Raises InputError when another import recorded the same content from
        another path meanwhile (the caller's transaction is then rolled back: nothing imported)."""
        t = m.ImportedFile.__table__
        for f in files:
            e = self.status(f)
            if e is None or e.recorded or e.status not in ("new", "changed"):
                continue
            if e.sha256 is None:
                got = (digests or {}).get(f) or file_digest(e.path)
                if got is None:  # gone since it was parsed: nothing to record it by
                    continue
                e.sha256, e.n_bytes = got[0], got[1]
            added = q.insert_ignore(self.session, m.ImportedFile, [{
                "importer": self.importer, "family_option": self.family, "sha256": e.sha256, "path": e.path,
                "n_bytes": e.n_bytes, "created_at": m.utcnow()}])
            if not added:
                other = self.session.connection().execute(
                    select(t.c.path).where(self._where(t) & (t.c.sha256 == e.sha256))).scalar()
                if other != e.path:
                    raise InputError(f"another import recorded the same content meanwhile, as {other}: nothing was "
                                     "imported (run the import again: this file is then counted as already imported)",
                                     source=e.file)
            e.recorded = True

    def report(self) -> tuple[list[dict], list[str]]:
        """(one dict per file, in the order met: :meth:`FileEntry.as_dict`; the warnings for
        the files whose path held other content when it was imported before)."""
        warnings = []
        for e in self.entries.values():
            if e.status == "changed":
                sha, when = e.before
                at = f" on {when:%Y-%m-%d %H:%M} UTC" if when is not None else ""
                warnings.append(f"{e.file}: this path was imported before with other content (SHA-256 {sha[:12]}...{at}); "
                                "read again as any file: new records added, the same ones counted, other values refused")
        return [e.as_dict() for e in self.entries.values()], warnings

