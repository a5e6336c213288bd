"""Write an :class:`~judgecal.importers.records.ImportBatch` with bulk, idempotent inserts.

Called inside one session/transaction: a failure anywhere rolls the whole import back.
Natural keys (item: family + prompt SHA-256; response: item + model + text SHA-256; label:
SHA-256 of its content, annotator and source; rating: response + judge + sample) make a second
import of the same file add nothing. Returns the number of rows added per table."""

from __future__ import annotations

import hashlib
import json
from itertools import filterfalse
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from judgecal.calibrate.style import COLUMNS as STYLE_COLUMNS
from judgecal.calibrate.style import style_counts
from judgecal.db import models as m
from judgecal.db import queries as q
from judgecal.db.filebook import FileBook
from judgecal.errors import InputError
from judgecal.importers.records import ImportBatch, JudgeSpec, KnownRef, RespRef, Verdict, same_swapped, show_value
from judgecal.judge.distribution import swap as swap_distribution


def lengths(text: str) -> dict[str, int]:
    """Length of ``text`` in UTF-8 bytes, characters (code points) and whitespace words."""
    data = text.encode("utf-8")
    return {"n_bytes": len(data), "n_chars": len(text), "n_words": n_words(text, data)}


# ASCII bytes -> b" " for what str.split() splits on (str.isspace: \t \n \v \f \r, \x1c-\x1f, space), b"x" else
_WORD_TABLE = bytes(0x20 if chr(b).isspace() else 0x78 for b in range(128)) + b"x" * 128


def n_words(text: str, data: bytes) -> int:
    """``len(text.split())``, the number of whitespace-separated words; ``data``: the text's
    UTF-8 bytes. An ASCII text is counted in C without building the words (runs of
    non-space bytes: each one begins the text or follows a space)."""
    if len(data) != len(text):  # not ASCII: Unicode spaces count too
        return len(text.split())
    marks = data.translate(_WORD_TABLE)
    return marks.count(b" x") + (marks[:1] == b"x")


_RESPONSE_COLUMNS = ("item_id", "model", "text", "text_sha256", "n_bytes", "n_chars", "n_words") + STYLE_COLUMNS + (
    "created_at",)
_VERDICT_COLUMNS = ("response_a_id", "response_b_id", "judge_id") + Verdict._fields[3:] + ("created_at", "updated_at")

# fields an older export (or a file from elsewhere) may leave out: absent there is not a contradiction
_UNSTATED_OK = frozenset({"expected_score", "distribution"})


def _agrees(names: tuple[str, ...], stored: tuple, given: tuple, swapped: bool = False) -> bool:
    """True when a stored row's values and a file's agree: equal, except that a field of
    :data:`_UNSTATED_OK` the file leaves out (None) agrees with any stored value. ``swapped``:
    the stored values were turned to the file's order (1 - p...), so numbers agree within float
    rounding (:func:`judgecal.importers.records.same_swapped`)."""
    same = same_swapped if swapped else (lambda a, b: a == b)
    return all(same(a, b) or (b is None and n in _UNSTATED_OK) for n, a, b in zip(names, stored, given))


_META_MEMO: dict[str, tuple] = {}
_META_MEMO_MAX = 50_000  # texts remembered by one process (a baseline's answers repeat in every file)


def text_meta(text: str) -> tuple:
    """(text SHA-256, n_bytes, n_chars, n_words, md_headers, md_list_ordered,
    md_list_unordered, md_bold) of a response text: its lengths and its Markdown counts
    (:func:`judgecal.calibrate.style.style_counts`), remembered for the texts met last in this
    process (:data:`_META_MEMO_MAX`)."""
    found = _META_MEMO.get(text)
    if found is None:
        data = text.encode("utf-8")
        found = (hashlib.sha256(data).hexdigest(), len(data), len(text), n_words(text, data), *style_counts(text))
        if len(_META_MEMO) >= _META_MEMO_MAX:
            _META_MEMO.clear()
        _META_MEMO[text] = found
    return found


def prepare(batch: ImportBatch) -> None:
    """Compute every response's text SHA-256, lengths and Markdown counts into
    ``batch.response_meta`` (done by a parsing process, so that the writing one does not)."""
    meta = batch.response_meta
    for ref in batch.responses:
        if ref not in meta:
            meta[ref] = text_meta(ref.text)


def write_batch(session: Session, batch: ImportBatch) -> dict[str, int]:
    """Insert everything in ``batch`` that is not there yet; {table: rows added}."""
    writer = Writer(session)
    writer.write(batch)
    return writer.added


#: the tables an import adds rows to, in the order its summary counts them (``Writer.added``)
TABLES = ("task_family", "item", "response", "expert_label", "rating", "verbosity_pair", "pairwise_judgment")


class Writer:
    """Writes the ImportBatches of one import (one per file) in one session/transaction,
    remembering the ids of families, items, responses and judges met in earlier batches (a
    baseline's answers repeated in every annotations file are inserted and looked up once).
    ``added``: {table: rows added} over every batch written."""

    def __init__(self, session: Session, book: FileBook | None = None):
        self.session = session
        self.book = book  # the import's files by content (None: not looked up; judgecal.db.filebook)
        self.added: dict[str, int] = dict.fromkeys(TABLES, 0)
        self.fam_ids: dict[str, int] = {}
        self.item_of: dict[tuple[str, str], int] = {}
        self.resp_ids: dict[RespRef, int] = {}
        self.by_key: dict[tuple[int, str, str], int] = {}  # (item id, model, text SHA-256) -> response id
        self.judges: dict[JudgeSpec, int] = {}
        self.renamed: dict[tuple[str, str], None] = {}  # (name given, name of the stored judge of that identity)
        self.shared_name: dict[str, tuple[int, list[int]]] = {}  # name: (new judge id, ids that had it before)
        # rows the database already held with the same values (not added again): {table: n}
        self.already: dict[str, int] = dict.fromkeys(("rating", "expert_label", "pairwise_judgment"), 0)
        # judge id -> whether it had no pairwise verdict when this import first met it; for such a
        # judge, the response-a ids of the verdicts this import wrote (the only stored ones)
        self._fresh_judge: dict[int, bool] = {}
        self._a_written: dict[int, set[int]] = {}

    def _count(self, table: str, n: int) -> None:
        self.added[table] += n

    def write(self, batch: ImportBatch) -> bool:
        """Insert everything in ``batch`` that is not there yet (counted in ``added``) and
        record its files' content hashes. False (nothing written) when every file of the
        batch holds content already imported from another path (:meth:`FileBook.skips`)."""
        book = self.book
        if book is not None and batch.files:
            if book.skips(batch.files):
                return False
            self._write(batch)
            book.record(batch.files, batch.digests)
        else:
            self._write(batch)
        for given, stored in self.renamed:  # once per import: the first batch that met it says so
            batch.warnings.append(
                f"judge {given!r} has the identity of the stored judge {stored!r} (the same model, endpoint, prompt, "
                f"mode, scale and parameters; a name is not part of a judge's identity): its rows are filed under "
                f"{stored!r}; to keep them apart give another judge_model, endpoint or prompt")
        self.renamed = {}
        for name, (new_id, before) in self.shared_name.items():
            batch.warnings.append(
                f"judge {name!r} is a new judge (id {new_id}: another model, endpoint, prompt, mode, scale or parameters) "
                f"with the name of the stored judge{'s' if len(before) > 1 else ''} {', '.join(f'id {i}' for i in before)}: "
                f"a name that several judges share resolves to the one with data where a command looks, else it is "
                f"refused listing them (--judge id:{new_id} names this one); give the records another judge name to keep "
                f"names apart")
        self.shared_name = {}
        return True

    def _write(self, batch: ImportBatch) -> None:
        session, now = self.session, m.utcnow()
        # every response's item is in batch.items (ImportBatch.add_response)
        families = {fam for fam, _ in batch.items}.difference(self.fam_ids)
        if families:
            for fam in sorted(families):
                found = session.scalar(select(m.TaskFamily.id).where(m.TaskFamily.name == fam))
                if found is None:  # counted by the insert itself: a concurrent import's row is not counted here
                    self._count("task_family", q.insert_ignore(session, m.TaskFamily, [
                        {"name": fam, "l_ref": None, "created_at": m.utcnow()}]))
                    found = q.family_id(session, fam)
                self.fam_ids[fam] = found
        fam_ids = self.fam_ids

        item_rows = []
        for fam, prompt in filterfalse(self.item_of.__contains__, batch.items):  # the items not written yet
            extra = batch.items[(fam, prompt)]
            item_rows.append(
                {
                    "task_family_id": fam_ids[fam],
                    "prompt": prompt,
                    "prompt_sha256": q.sha256_text(prompt),
                    "external_id": extra["external_id"],
                    "reference": extra["reference"],
                    "source": batch.source,
                    "created_at": now,
                }
            )
        self._count("item", q.insert_ignore(session, m.Item, item_rows))
        item_of = self.item_of
        for fam, fid in fam_ids.items():
            hashes = {r["prompt_sha256"]: r["prompt"] for r in item_rows if r["task_family_id"] == fid}
            if hashes:
                for sha, iid in q.item_ids(session, fid, hashes).items():
                    item_of[(fam, hashes[sha])] = iid

        resp_rows = []
        key_of_ref: dict[RespRef, tuple[int, str, str]] = {}
        meta = batch.response_meta
        for ref in filterfalse(self.resp_ids.__contains__, batch.responses):  # the responses not written yet
            family, prompt, model, text = ref  # a RespRef, or the plain tuple an unpickled batch holds
            sha, *counts = meta.get(ref) or text_meta(text)  # lengths, then the Markdown counts
            key = (item_of[(family, prompt)], model, sha)
            key_of_ref[ref] = key
            resp_rows.append((key[0], model, text, sha, *counts, now))
        self._count("response", q.insert_ignore_rows(session, m.Response, _RESPONSE_COLUMNS, resp_rows))
        needs_ids = batch.pair_labels or batch.point_labels or batch.ratings or batch.verbosity_pairs or batch.verdicts
        if needs_ids and key_of_ref:
            ids = q.response_ids(session, key_of_ref.values())
            self.by_key.update(ids)
            for ref, key in key_of_ref.items():
                self.resp_ids[ref] = ids[key]

        def rid(x, ids=self.resp_ids, slow=self._rid) -> int:
            if type(x) is not KnownRef:
                found = ids.get(x)
                if found is not None:
                    return found
            return slow(x)

        self._write_rest(batch, rid, now)
        if batch.calibrations:
            from judgecal.db.ingest_calibrations import write_calibrations

            write_calibrations(self, batch)

    def _rid(self, x: RespRef | KnownRef) -> int:
        """The id of a response this import wrote without recording it, or that a batch
        names by KnownRef: by its natural key, from this import's lookups or the database."""
        family, prompt, model, last = x
        key = (self.item_of[(family, prompt)], model, last if type(x) is KnownRef else text_meta(last)[0])
        found = self.by_key.get(key)
        if found is None:
            found = self.by_key[key] = q.response_ids(self.session, [key])[key]
        return found

    def _judge_id(self, spec: JudgeSpec) -> int:
        if spec not in self.judges:
            named_before = set(self.session.scalars(select(m.Judge.id).where(m.Judge.name == spec.name))) if spec.name else set()
            row = q.get_or_create_judge(
                self.session,
                name=spec.name,
                model=spec.model,
                endpoint=spec.endpoint,
                prompt_name=spec.prompt_name,
                prompt_sha256=spec.prompt_sha256 or q.sha256_text(spec.prompt_name),
                mode=spec.mode,
                params=json.loads(spec.params_json),
                scale_min=spec.scale_min,
                scale_max=spec.scale_max,
            )
            if spec.name and row.name != spec.name:  # a judge's name is not part of its identity: said, not dropped
                self.renamed.setdefault((spec.name, row.name), None)
            elif named_before and row.id not in named_before:  # a second judge of that name: said, never silent
                self.shared_name.setdefault(row.name, (row.id, sorted(named_before)))
            self.judges[spec] = row.id
        return self.judges[spec]

    def _write_rest(self, batch: ImportBatch, rid, now) -> None:
        session = self.session
        item_of = self.item_of
        judge_id = self._judge_id
        label_rows: list[dict[str, Any]] = []
        for i, (a, b, pref, annotator, source) in enumerate(batch.pair_labels):
            ra, rb = rid(a), rid(b)
            label_rows.append(
                {
                    "_at": ("pair_labels", i),
                    "label_key": q.key_of("pairwise", ra, rb, annotator, source),
                    "kind": "pairwise",
                    "response_a_id": ra,
                    "response_b_id": rb,
                    "preference": pref,
                    "annotator": annotator,
                    "source": source,
                    "created_at": now,
                }
            )
        for i, (ref, score, lo, hi, annotator, source) in enumerate(batch.point_labels):
            r = rid(ref)
            label_rows.append(
                {
                    "_at": ("point_labels", i),
                    "label_key": q.key_of("pointwise", r, annotator, source),
                    "kind": "pointwise",
                    "response_id": r,
                    "score": score,
                    "scale_min": lo,
                    "scale_max": hi,
                    "annotator": annotator,
                    "source": source,
                    "created_at": now,
                }
            )
        label_rows = self._label_twins(batch, label_rows)
        added = _insert_labels(session, label_rows)
        self._count("expert_label", added)
        if added < len(label_rows):
            self._check_labels(batch, label_rows, added)

        rating_rows = []
        for r in batch.ratings:
            rating_rows.append(
                {
                    "response_id": rid(r["response"]),
                    "judge_id": judge_id(r["judge"]),
                    "sample_index": r["sample_index"],
                    "status": r["status"],
                    "score": r["score"],
                    "expected_score": r.get("expected_score"),
                    "distribution": r.get("distribution"),
                    "raw_output": r["raw_output"],
                    "error": r["error"],
                    "attempts": r.get("attempts") or 0,
                    "latency_s": r.get("latency_s"),
                    "prompt_tokens": r.get("prompt_tokens"),
                    "completion_tokens": r.get("completion_tokens"),
                    "created_at": now,
                    "updated_at": now,
                }
            )
        added = q.insert_ignore(session, m.Rating, rating_rows)
        self._count("rating", added)
        if added < len(rating_rows):
            self._check_ratings(batch, rating_rows, added)

        pair_rows = []
        for c, v in batch.verbosity_pairs:
            pair_rows.append(
                {
                    "item_id": item_of[(c[0], c[1])],
                    "concise_response_id": rid(c),
                    "verbose_response_id": rid(v),
                    "source": batch.pair_sources.get((c, v), batch.source),
                    "created_at": now,
                }
            )
        self._pair_twins(batch, pair_rows)
        self._count("verbosity_pair", q.insert_ignore(session, m.VerbosityPair, pair_rows))

        verdict_rows = []
        judge_of: dict[int, int] = {}  # id(JudgeSpec) -> judge id: a spec's own hash is a Python call
        stamps = (now, now)
        for v in batch.verdicts:  # Verdict fields: judge, a, b, then the columns in _VERDICT_COLUMNS' order
            jid = judge_of.get(id(v[0]))
            if jid is None:
                jid = judge_of[id(v[0])] = judge_id(v[0])
            verdict_rows.append((rid(v[1]), rid(v[2]), jid) + v[3:] + stamps)
        verdict_rows = self._verdict_twins(batch, verdict_rows)
        added = q.insert_ignore_rows(session, m.PairwiseJudgment, _VERDICT_COLUMNS, verdict_rows)
        for r in verdict_rows:  # (a superset of the rows inserted: some may have been there)
            if self._fresh_judge.get(r[2]):
                self._a_written.setdefault(r[2], set()).add(r[0])
        self._count("pairwise_judgment", added)
        if added < len(verdict_rows):
            self._check_verdicts(batch, verdict_rows, added)

    # ---- rows the database ignored: the same values are counted, other values refused
    # (a later import must not silently keep what an earlier one stored; docs/data-formats.md)

    def _stored(self, table, key_cols: tuple[str, ...], value_cols: tuple[str, ...], keys: list[tuple],
                by: str, extra: tuple[str, ...] = (), judge_at: int | None = None) -> dict[tuple, tuple]:
        """{key: (values..., extra...)} of the stored rows of ``table`` whose ``key_cols``
        are among ``keys``, looked up by the column ``by`` (the first key column) and, when
        ``judge_at`` gives the position of ``judge_id`` in the key, by the keys' judges (a
        response judged by dozens of judges is not read dozens of times over)."""
        out: dict[tuple, tuple] = {}
        wanted = set(keys)
        firsts = sorted({k[0] for k in wanted})
        cols = [table.c[c] for c in key_cols + value_cols + extra]
        nk = len(key_cols)
        conn = self.session.connection()
        judges = sorted({k[judge_at] for k in wanted}) if judge_at is not None else []
        for start in range(0, len(firsts), 900):
            stmt = select(*cols).where(table.c[by].in_(firsts[start:start + 900]))
            if judges and len(judges) <= 100:
                # judge_id + 0: a filter on the rows the ``by`` index finds, never a reason for
                # SQLite to read every verdict of the judge instead (once per file of an import)
                stmt = stmt.where((table.c.judge_id + 0).in_(judges))
            for row in conn.execute(stmt):
                key = tuple(row[:nk])
                if key in wanted:
                    out[key] = tuple(row[nk:])
        return out

    def _refuse(self, batch: ImportBatch, kind: str, i: int, what: str, names: tuple[str, ...],
                stored: tuple, given: tuple, stored_source: str | None) -> None:
        file, line = batch.where(kind, i)
        differ = [(n, a, b) for n, a, b in zip(names, stored, given) if a != b]
        old = ", ".join(f"{n} {show_value(a)}" for n, a, _ in differ)
        new = ", ".join(f"{n} {show_value(b)}" for n, _, b in differ)
        origin = f" (imported from {stored_source})" if stored_source else ""
        note = (" (judgecal stores AlpacaEval's preference minus 1: P(output_2 preferred))"
                if batch.source == "alpaca_eval" and any(n == "preference" for n, _, _ in differ) else "")
        raise InputError(f"this {what} is already stored with {old}{origin}; this file gives {new}{note}: an import "
                         "never changes a stored value (remove the record, or import into another --task-family or "
                         "database); nothing was imported", source=file or batch.source, line=line)

    # ---- one fact, one row (issue 23): a pair stored with its sides swapped, a file's labels
    # already stored from another file (a copy under another name), a verbosity pair reversed

    def _label_twins(self, batch: ImportBatch, rows: list[dict]) -> list[dict]:
        """``rows`` without the labels already stored as another row: a pairwise label whose
        pair is stored with its sides swapped by the same annotator and source (the same
        meaning: counted as already stored; another meaning: refused at FILE:LINE), and every
        label of a file whose labels are all stored from ONE other source with the same
        meaning (the same file's content under another name: counted, not stored twice)."""
        if not rows:
            return rows
        ids = sorted({r[c] for r in rows for c in ("response_a_id", "response_b_id", "response_id") if r.get(c)})
        t = m.ExpertLabel.__table__
        stored: dict[tuple, list[tuple]] = {}  # (kind, response(s), annotator) -> [(value, source)]
        conn = self.session.connection()
        for start in range(0, len(ids), 900):
            part = ids[start:start + 900]
            stmt = select(t.c.kind, t.c.response_id, t.c.response_a_id, t.c.response_b_id, t.c.preference, t.c.score,
                          t.c.scale_min, t.c.scale_max, t.c.annotator, t.c.source).where(
                t.c.response_id.in_(part) | t.c.response_a_id.in_(part))
            for kind, r, ra, rb, pref, score, lo, hi, annotator, source in conn.execute(stmt):
                key = ("pairwise", ra, rb, annotator) if kind == "pairwise" else ("pointwise", r, annotator)
                stored.setdefault(key, []).append((pref if kind == "pairwise" else (score, lo, hi), source))
        keep: list[dict] = []
        copies: dict[str, int] = {}  # another source -> labels of this batch it holds with the same meaning
        for r in rows:
            if r["kind"] == "pairwise":
                same = stored.get(("pairwise", r["response_a_id"], r["response_b_id"], r["annotator"]), [])
                twin = [(_SWAP[v], src) for v, src in
                        stored.get(("pairwise", r["response_b_id"], r["response_a_id"], r["annotator"]), [])]
                value = r["preference"]
            else:
                same, twin = stored.get(("pointwise", r["response_id"], r["annotator"]), []), []
                value = (r["score"], r["scale_min"], r["scale_max"])
            mine = [v for v, src in twin if src == r["source"]]
            if mine:
                if mine[0] != value:
                    kind, i = r["_at"]
                    file, line = batch.where(kind, i)
                    raise InputError(
                        f"this pairwise label is already stored with its sides swapped (source {r['source']!r}, "
                        f"annotator {r['annotator']!r}) meaning preference {show_value(mine[0])} in this file's "
                        f"order; this file gives {show_value(value)}: one pair, one label (remove one of them); "
                        "nothing was imported", source=file or batch.source, line=line)
                self.already["expert_label"] += 1
                continue
            for v, src in same + twin:
                if src != r["source"] and v == value:
                    copies[src] = copies.get(src, 0) + 1
            keep.append(r)
        copy_of = [src for src, n in copies.items() if n == len(keep)] if keep else []
        if copy_of:
            batch.skip(f"labels already imported from {copy_of[0]} (this file's labels are that file's content under "
                       "another name: not stored twice)", f"{batch.origin or batch.source}: {len(keep)} labels")
            self.already["expert_label"] += len(keep)
            return []
        return keep

    def _pair_twins(self, batch: ImportBatch, rows: list[dict]) -> None:
        """Refuse a verbosity pair stored the other way round (its concise response stored as
        the verbose one): one pair, one row."""
        if not rows:
            return
        t = m.VerbosityPair.__table__
        mine = {(r["verbose_response_id"], r["concise_response_id"]): i for i, r in enumerate(rows)}
        for j, r in enumerate(rows):  # in this batch too: `--pair C V --pair V C` stored both rows
            i = mine.get((r["concise_response_id"], r["verbose_response_id"]))
            if i is not None and i != j:
                file, line = batch.where("verbosity_pairs", max(i, j))
                first_file, first_line = batch.where("verbosity_pairs", min(i, j))
                raise InputError(
                    "this verbosity pair is given again with concise and verbose the other way round (at "
                    f"{first_file or batch.source}{f':{first_line}' if first_line else ''}): one pair, one row "
                    "(which one is concise?); "
                    "nothing was imported", source=file or batch.source, line=line)
        firsts = sorted({k[0] for k in mine})
        conn = self.session.connection()
        for start in range(0, len(firsts), 900):
            stmt = select(t.c.concise_response_id, t.c.verbose_response_id, t.c.source).where(
                t.c.concise_response_id.in_(firsts[start:start + 900]))
            for c, v, source in conn.execute(stmt):
                i = mine.get((c, v))
                if i is not None:
                    file, line = batch.where("verbosity_pairs", i)
                    raise InputError(
                        "this verbosity pair is already stored with concise and verbose the other way round"
                        f"{f' (imported from {source})' if source else ''}: one pair, one row (which one is concise?); "
                        "nothing was imported", source=file or batch.source, line=line)

    def _verdict_twins(self, batch: ImportBatch, rows: list[tuple]) -> list[tuple]:
        """``rows`` without the verdicts stored with their sides swapped (b, a; position ab <->
        ba, na stays; verdict, preference and baseline side swapped): the same meaning is
        counted as already stored, another is refused at FILE:LINE."""
        self._verdict_at = None  # row i of the rows kept is row _verdict_at[i] of batch.verdicts (None: the same)
        if not rows:
            return rows
        cols = _VERDICT_COLUMNS
        key_at = [cols.index(c) for c in ("response_a_id", "response_b_id", "judge_id", "sample_index", "position")]
        names = ("status", "verdict", "preference", "baseline_side", "raw_output", "error", "distribution")
        val_at = [cols.index(c) for c in names]
        twins = [(r[key_at[1]], r[key_at[0]], r[key_at[2]], r[key_at[3]], _SWAP[r[key_at[4]]]) for r in rows]
        table = m.PairwiseJudgment.__table__
        if self._only_written(table, {t[2] for t in twins}):  # every stored verdict of these judges is this import's
            twins_at = [t for t in twins if t[0] in self._a_written.get(t[2], ())]
            if not twins_at:  # no twin can be stored: nothing to look up
                return rows
        stored = self._stored(table, tuple(cols[i] for i in key_at), names, twins, "response_a_id", ("source",),
                              judge_at=2)
        if not stored:
            return rows
        keep, self._verdict_at = [], []
        for i, (twin, r) in enumerate(zip(twins, rows)):
            have = stored.get(twin)
            if have is None:
                keep.append(r)
                self._verdict_at.append(i)
                continue
            status, verdict, pref, side, raw, error, dist, source = have
            meant = (status, _SWAP[verdict], None if pref is None else 1.0 - pref, _SWAP[side], raw, error,
                     swap_distribution(dist))
            given = tuple(r[j] for j in val_at)
            if not _agrees(names, meant, given, swapped=True):
                file, line = batch.where("verdicts", i)
                origin = f" (imported from {source})" if source else ""
                differ = [(n, a, b) for n, a, b in zip(names, meant, given)
                          if not (same_swapped(a, b) or (b is None and n in _UNSTATED_OK))]
                raise InputError(
                    f"this verdict is already stored with its sides swapped{origin}; in this file's order it differs in "
                    + ", ".join(f"{n} (stored {show_value(a)}, this file {show_value(b)})" for n, a, b in differ)
                    + ": one pair, one verdict per judge, sample and order shown; nothing was imported",
                    source=file or batch.source, line=line)
            self.already["pairwise_judgment"] += 1
        return keep

    def _only_written(self, table, judges: set[int]) -> bool:
        """Whether none of ``judges`` had a pairwise verdict when this import first met it (its
        stored verdicts are then the ones this import wrote, whose response-a ids
        ``_a_written`` holds). Asked once per judge, before any verdict of it is written."""
        for j in judges:
            if j not in self._fresh_judge:
                self._fresh_judge[j] = self.session.connection().execute(
                    select(table.c.id).where(table.c.judge_id == j).limit(1)).first() is None
        return all(self._fresh_judge[j] for j in judges)

    def _check_verdicts(self, batch: ImportBatch, rows: list[tuple], added: int) -> None:
        cols = _VERDICT_COLUMNS
        key_at = [cols.index(c) for c in ("response_a_id", "response_b_id", "judge_id", "sample_index", "position")]
        names = ("status", "verdict", "preference", "baseline_side", "raw_output", "error", "distribution")
        val_at = [cols.index(c) for c in names]
        keys = [tuple(r[i] for i in key_at) for r in rows]
        table = m.PairwiseJudgment.__table__
        stored = self._stored(table, tuple(cols[i] for i in key_at), names, keys, "response_a_id", ("source",), judge_at=2)
        for i, (key, r) in enumerate(zip(keys, rows)):
            have = stored.get(key)
            given = tuple(r[j] for j in val_at)
            if have is not None and not _agrees(names, have[:-1], given):
                at = self._verdict_at[i] if self._verdict_at is not None else i
                self._refuse(batch, "verdicts", at, "verdict", names, have[:-1], given, have[-1])
        self.already["pairwise_judgment"] += len(rows) - added

    def _check_ratings(self, batch: ImportBatch, rows: list[dict], added: int) -> None:
        key_cols = ("response_id", "judge_id", "sample_index")
        names = ("status", "score", "raw_output", "error", "expected_score", "distribution")
        keys = [tuple(r[c] for c in key_cols) for r in rows]
        stored = self._stored(m.Rating.__table__, key_cols, names, keys, "response_id", judge_at=1)
        for i, (key, r) in enumerate(zip(keys, rows)):
            have, given = stored.get(key), tuple(r[c] for c in names)
            if have is not None and not _agrees(names, have, given):
                self._refuse(batch, "ratings", i, "rating", names, have, given, None)
        self.already["rating"] += len(rows) - added

    def _check_labels(self, batch: ImportBatch, rows: list[dict], added: int) -> None:
        names = ("preference", "score", "scale_min", "scale_max")
        keys = [(r["label_key"],) for r in rows]
        stored = self._stored(m.ExpertLabel.__table__, ("label_key",), names, keys, "label_key")
        for key, r in zip(keys, rows):
            have, given = stored.get(key), tuple(r.get(c) for c in names)
            if have is not None and have != given:
                kind, j = r["_at"]
                self._refuse(batch, kind, j, "label", names, have, given, None)
        self.already["expert_label"] += len(rows) - added


_SWAP = {"a": "b", "b": "a", "tie": "tie", "ab": "ba", "ba": "ab", "na": "na", None: None}


def _insert_labels(session: Session, rows: list[dict[str, Any]]) -> int:
    # pairwise and pointwise rows have different column sets: insert them separately
    pair = [{k: v for k, v in r.items() if k != "_at"} for r in rows if r["kind"] == "pairwise"]
    point = [{k: v for k, v in r.items() if k != "_at"} for r in rows if r["kind"] == "pointwise"]
    return q.insert_ignore(session, m.ExpertLabel, pair) + q.insert_ignore(session, m.ExpertLabel, point)
