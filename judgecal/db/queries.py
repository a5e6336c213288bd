"""Dialect-aware bulk writes and the lookups every workflow shares (no business logic)."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Callable, Iterable, Sequence
from itertools import chain
from operator import itemgetter
from typing import Any

from sqlalchemy import JSON, CheckConstraint, Float, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from judgecal.db import models as m
from judgecal.errors import ChoiceError, NotFoundError, UsageError
from judgecal.secrets import endpoint_without_secrets

CHUNK = 5000


def sha256_text(text: str) -> str:
    """Hex SHA-256 of the UTF-8 bytes of ``text``."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def key_of(*parts: Any) -> str:
    """A stable hex SHA-256 natural key of JSON-serialisable parts."""
    return sha256_text(json.dumps(parts, sort_keys=True, ensure_ascii=False, default=str))


def _insert(session: Session, model):
    name = session.get_bind().dialect.name
    if name == "postgresql":
        return postgresql.insert(model)
    if name == "sqlite":
        return sqlite.insert(model)
    raise UsageError(f"unsupported database dialect {name!r}: use SQLite or PostgreSQL")


def insert_ignore(session: Session, model, rows: Sequence[dict], *, chunk: int = CHUNK) -> int:
    """INSERT ... ON CONFLICT DO NOTHING of ``rows`` (dicts with the same columns) in bulk
    (:func:`insert_ignore_rows`). Returns the number of rows actually inserted."""
    if not rows:
        return 0
    cols = list(rows[0].keys())
    get = itemgetter(*cols) if len(cols) > 1 else (lambda r: (r[cols[0]],))
    return insert_ignore_rows(session, model, cols, [get(r) for r in rows], chunk=chunk)


def insert_ignore_rows(session: Session, model, columns: Sequence[str], rows: Sequence[tuple], *, chunk: int = CHUNK) -> int:
    """INSERT ... ON CONFLICT DO NOTHING of ``rows`` (tuples of the values of ``columns``, in
    that order) in bulk.

    SQLite: one executemany per chunk. PostgreSQL: COPY into a temporary table, then one
    INSERT ... SELECT ... ON CONFLICT DO NOTHING (psycopg's COPY is an order of magnitude
    faster than multi-row VALUES statements). Returns the number of rows actually inserted
    (existing natural keys are skipped)."""
    if not rows:
        return 0
    table = model.__table__
    conn = session.connection()
    cols = list(columns)
    if conn.dialect.name == "postgresql":
        return _pg_copy_insert(conn, table, cols, rows)
    if conn.dialect.name == "sqlite":
        return _sqlite_executemany(conn, table, cols, rows, chunk)
    added = 0
    stmt = _insert(session, table).on_conflict_do_nothing()
    for start in range(0, len(rows), chunk):
        result = conn.execute(stmt, [dict(zip(cols, r)) for r in rows[start : start + chunk]])
        added += max(result.rowcount or 0, 0)
    return added


_SQLITE_ROWS_PER_INSERT = 64  # rows per INSERT statement (_sqlite_executemany)
_SQLITE_MAX_PARAMS = 999  # bound parameters per statement that every SQLite build allows (3.32+: 32,766)
_SQLITE_NUMBERS = (float, int, type(None))  # what a Float column's bind processor leaves as it is (for SQLite)


def _sqlite_executemany(conn, table, cols: list[str], rows: Sequence[tuple], chunk: int) -> int:
    # the DB-API executemany with each column's own bind processor: SQLAlchemy's per-row
    # parameter handling costs more than SQLite's insert itself
    first = rows[0]
    # one timestamp for a whole import: formatted once, as SQLAlchemy's SQLite DateTime reads it
    # (always with the microseconds: '00:00:00+00:00' would compare as text below '00:00:00.000000')
    stamps = {i: v.isoformat(" ", timespec="microseconds") for i, v in enumerate(first)
              if isinstance(v, dt.datetime) and all(r[i] is v for r in rows)}
    procs = [(i, p) for i, c in enumerate(cols)
             if i not in stamps and (p := table.c[c].type.bind_processor(conn.dialect)) is not None
             and not (isinstance(table.c[c].type, Float) and all(type(r[i]) in _SQLITE_NUMBERS for r in rows))]
    # a column holding one integer or NULL in every row is written once into the statement
    # (a number or NULL made here: no text of the input enters it), and so are the
    # timestamps; each row keeps the other values, in their order
    fixed = dict(stamps)
    for i, v in enumerate(first):
        if i not in fixed and (v is None or (type(v) is int and -(2**63) <= v < 2**63)):
            column = list(map(itemgetter(i), rows))
            if column.count(v) == len(rows) and set(map(type, column)) == {type(v)}:
                fixed[i] = "NULL" if v is None else str(v)
    procs = [(i, p) for i, p in procs if i not in fixed]
    values = ["?"] * len(cols)
    for i, literal in fixed.items():
        values[i] = f"'{literal}'" if i in stamps else literal
    keep = [i for i in range(len(cols)) if i not in fixed]
    if fixed and not procs:
        convert = itemgetter(*keep) if len(keep) > 1 else (lambda r: tuple(r[i] for i in keep))
    elif fixed or procs:
        def convert(r: tuple) -> tuple:
            out = list(r)
            for i, p in procs:
                out[i] = p(out[i])
            return tuple(out[i] for i in keep)
    else:
        convert = None
    head = f'INSERT INTO "{table.name}" ({", ".join(chr(34) + c + chr(34) for c in cols)}) VALUES '
    one = f'({", ".join(values)})'
    sql = f"{head}{one} ON CONFLICT DO NOTHING"
    # several rows per statement (a multi-row VALUES) into a table with CHECK constraints:
    # SQLite evaluates a CHECK's IN list by building a small table of its values once per
    # statement run, i.e. once per row of an executemany of one-row statements;
    # pairwise_judgment's five CHECKs (three IN lists) were most of its insert time. The rows
    # go in in the same order, each conflict is skipped as before, and rowcount still counts
    # the rows inserted. A table without CHECKs keeps one row per statement: measured, long
    # texts (response) went in slower several to a statement (docs/performance.md)
    checked = any(isinstance(c, CheckConstraint) for c in table.constraints)
    group = max(1, min(_SQLITE_ROWS_PER_INSERT, _SQLITE_MAX_PARAMS // max(len(keep), 1))) if checked else 1
    multi = f"{head}{', '.join([one] * group)} ON CONFLICT DO NOTHING" if group > 1 else None
    cur = conn.connection.driver_connection.cursor()
    added = 0
    try:
        for start in range(0, len(rows), chunk):
            part = rows[start : start + chunk]
            if convert is not None:
                part = [convert(r) for r in part]
            full = len(part) - len(part) % group if multi else 0
            if full:
                cur.executemany(multi, [tuple(chain.from_iterable(part[i : i + group])) for i in range(0, full, group)])
                added += max(cur.rowcount, 0)
            if full < len(part):
                cur.executemany(sql, part[full:])
                added += max(cur.rowcount, 0)
    finally:
        cur.close()
    return added


def _pg_copy_insert(conn, table, cols: list[str], rows: Sequence[tuple]) -> int:
    from psycopg.types.json import Jsonb

    json_at = [i for i, c in enumerate(cols) if isinstance(table.c[c].type, JSON)]
    # a JSON(none_as_null=True) column stores None as SQL NULL (as SQLAlchemy's own binds do), not JSON null
    null_at = {i for i in json_at if table.c[cols[i]].type.none_as_null}
    tmp = f"tmp_{table.name}_import"
    quoted = ", ".join(f'"{c}"' for c in cols)
    raw = conn.connection.driver_connection
    with raw.cursor() as cur:
        cur.execute(f'CREATE TEMP TABLE IF NOT EXISTS "{tmp}" (LIKE "{table.name}" INCLUDING DEFAULTS) ON COMMIT DROP')
        cur.execute(f'TRUNCATE "{tmp}"')
        with cur.copy(f'COPY "{tmp}" ({quoted}) FROM STDIN') as copy:
            for row in rows:
                if json_at:
                    row = list(row)
                    for i in json_at:
                        row[i] = None if row[i] is None and i in null_at else Jsonb(row[i])
                copy.write_row(row)
        cur.execute(f'INSERT INTO "{table.name}" ({quoted}) SELECT {quoted} FROM "{tmp}" ON CONFLICT DO NOTHING')
        added = cur.rowcount
        cur.execute(f'TRUNCATE "{tmp}"')
    return max(added, 0)


def check_model_filter(pattern: str) -> None:
    """Raise UsageError for an empty or blank ``--model-filter`` (no model name is empty,
    and an empty filter must never be read as "no filter")."""
    if not pattern.strip():
        raise UsageError(f"--model-filter {pattern!r}: an empty filter matches no model name (give a model name or a "
                         "glob such as 'gpt-*'; leave the option out for every model)")


def model_filter_clause(column, pattern: str, dialect: str):
    """A WHERE clause matching ``column`` against a ``--model-filter`` value, with one meaning
    on every dialect: ``*`` matches any run of characters (also none); every other character,
    ``_``, ``%``, ``?``, ``[`` and ``\\`` included, stands for itself; the match is
    case-sensitive. Without ``*`` it is an exact comparison. ``dialect``: the database's
    dialect name (``session.get_bind().dialect.name``).

    SQLite: ``GLOB`` (case-sensitive, unlike SQLite's ``LIKE``) with ``?`` and ``[`` written as
    the one-character classes ``[?]`` and ``[[]``. Other dialects: ``LIKE ... ESCAPE '\\'``
    with ``%``, ``_`` and ``\\`` escaped. Raises UsageError for an empty (or blank) pattern:
    no model has an empty name, and an empty filter must not be read as "no filter"."""
    from sqlalchemy import func, literal

    check_model_filter(pattern)
    if "*" not in pattern:
        return column == pattern
    if dialect == "sqlite":
        glob = "".join({"?": "[?]", "[": "[[]"}.get(ch, ch) for ch in pattern)
        return func.glob(literal(glob), column) == 1
    like = pattern.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_").replace("*", "%")
    return column.like(like, escape="\\")


def family_id(session: Session, name: str, *, create: bool = False, l_ref: float | None = None) -> int:
    """The id of the task family ``name``; created when ``create`` (else NotFoundError)."""
    found = session.scalar(select(m.TaskFamily.id).where(m.TaskFamily.name == name))
    if found is not None:
        if l_ref is not None:
            session.get(m.TaskFamily, found).l_ref = l_ref
        return found
    if not create:
        raise NotFoundError(f"task family {name!r} does not exist (see `judgecal stats`)")
    insert_ignore(session, m.TaskFamily, [{"name": name, "l_ref": l_ref, "created_at": m.utcnow()}])
    return session.scalar(select(m.TaskFamily.id).where(m.TaskFamily.name == name))


def families_exist(session: Session, families: Iterable[str]) -> None:
    """Nothing when every named task family exists; else NotFoundError naming the missing ones
    (in the order given)."""
    given = list(dict.fromkeys(families))
    known = set(session.scalars(select(m.TaskFamily.name).where(m.TaskFamily.name.in_(given)))) if given else set()
    missing = [f for f in given if f not in known]
    if missing:
        raise NotFoundError(f"task famil{'y' if len(missing) == 1 else 'ies'} {', '.join(map(repr, missing))} "
                            f"do{'es' if len(missing) == 1 else ''} not exist (see `judgecal stats`)")


def one_family(session: Session, families: list[str], board: str) -> None:
    """Nothing when at most one family is given; else raises NotFoundError naming the families
    that do not exist (a choice must never link to a missing one), or
    :class:`~judgecal.errors.ChoiceError` with one option per family, in the order given
    (``board``: what takes one family at a time, e.g. "win-rate mode")."""
    if len(families) <= 1:
        return
    given = list(dict.fromkeys(families))
    families_exist(session, given)
    raise ChoiceError(f"{board} takes one --task-family at a time (given: {', '.join(given)})",
                      [{"label": f"task family {f}", "params": {"family": f}} for f in given])


def family_ids(session: Session, names: Iterable[str] | None) -> list[int]:
    """Ids of the named families, in the order given (all families when ``names`` is empty or
    None: by name, compared by code point, never by id, so every database holding the same
    families lists them alike)."""
    names = list(names or [])
    if not names:
        rows = session.execute(select(m.TaskFamily.id, m.TaskFamily.name)).all()
        return [fid for fid, _ in sorted(rows, key=lambda r: r[1])]
    return [family_id(session, n) for n in names]


def item_ids(session: Session, fam_id: int, prompt_hashes: Iterable[str]) -> dict[str, int]:
    """{prompt_sha256: item id} for the given hashes in a family."""
    hashes = list(set(prompt_hashes))
    out: dict[str, int] = {}
    for start in range(0, len(hashes), CHUNK):
        part = hashes[start : start + CHUNK]
        q = select(m.Item.prompt_sha256, m.Item.id).where(
            m.Item.task_family_id == fam_id, m.Item.prompt_sha256.in_(part)
        )
        out.update(dict(session.execute(q).all()))
    return out


def response_ids(session: Session, keys: Iterable[tuple[int, str, str]]) -> dict[tuple[int, str, str], int]:
    """{(item_id, model, text_sha256): response id} for the given natural keys."""
    wanted = set(keys)
    items = sorted({k[0] for k in wanted})
    out: dict[tuple[int, str, str], int] = {}
    if not items:
        return out
    q = select(m.Response.item_id, m.Response.model, m.Response.text_sha256, m.Response.id)
    models = sorted({k[1] for k in wanted})
    if len(models) <= 8:  # a file's few models: their responses in the items' id range
        q = q.where(m.Response.model.in_(models), m.Response.item_id.between(items[0], items[-1]))
    elif len(items) < 900:
        q = q.where(m.Response.item_id.in_(items))
    else:  # a range scan beats thousands of bound parameters
        q = q.where(m.Response.item_id.between(items[0], items[-1]))
    for item_id, model, sha, rid in session.connection().execute(q).all():  # Core: no ORM row loading
        if (item_id, model, sha) in wanted:
            out[(item_id, model, sha)] = rid
    return out


def judge_by_name(session: Session, name: str, among: Iterable[int] | Callable[[], Iterable[int]] | None = None,
                  scope: str = "") -> m.Judge:
    """The judge called ``name``: ``id:N`` (its id), ``name:X`` (its name or model, never an
    id), or a plain name, model or numeric id (digits 0-9 only: '²' is a name). A plain number that is both a judge's name (or
    model) and another judge's id is refused as ambiguous (``id:N`` or ``name:N`` chooses).

    Several judges may share a name (a name is not part of a judge's identity: model, endpoint,
    prompt, mode, parameters, scale). ``among``: the ids of the judges that have data where the
    caller looks, or a function returning them, called only when several judges share the name
    (finding them reads every rating of the place: :func:`judges_with_data`), (``scope`` says
    where, e.g. "with ratings in alpaca_eval"); a shared name
    resolves to the one judge of that name among them. Raises NotFoundError when none matches
    (or, with ``among`` and ``scope``, when several share the name and none is among them) and :class:`~judgecal.errors.ChoiceError` (a UsageError) when several still do: its message
    and options list each one's id and what tells them apart."""
    if name[:3].lower() == "id:":
        number = name[3:].strip()
        if not (number.isascii() and number.isdigit()) or int(number) > 2**31 - 1:  # '²'.isdigit(), int('²') fails
            raise UsageError(f"judge {name!r}: id: takes a judge's numeric id (e.g. id:5)")
        judge = session.get(m.Judge, int(number))
        if judge is None:
            raise NotFoundError(f"no judge with id {number}")
        return judge
    by_id = None
    if name[:5].lower() == "name:":
        name = name[5:]
    elif name.isascii() and name.isdigit() and int(name) <= 2**31 - 1:
        by_id = session.get(m.Judge, int(name))
    named = list(session.scalars(select(m.Judge).where((m.Judge.name == name) | (m.Judge.model == name)).limit(1)))
    if by_id is not None:
        if named and named[0].id != by_id.id:
            raise UsageError(f"judge {name!r} is ambiguous: judge {by_id.id} has that id ({describe_judge(by_id)}) and "
                             f"judge {named[0].id} that name or model; write id:{name} or name:{name}")
        if not named:
            return by_id
    found = list(session.scalars(select(m.Judge).where(m.Judge.name == name).order_by(m.Judge.id)))
    if not found:
        found = list(session.scalars(select(m.Judge).where(m.Judge.model == name).order_by(m.Judge.id)))
    if not found:
        known = ", ".join(sorted(set(session.scalars(select(m.Judge.name))))) or "none"
        raise NotFoundError(f"no judge named {name!r} (known judges: {known})")
    if len(found) > 1 and among is not None:
        inside = set(among() if callable(among) else among)
        hits = [j for j in found if j.id in inside]
        if len(hits) == 1:
            return hits[0]
        if not hits and scope:  # a choice between judges that all lack the data would only lead to another error
            raise NotFoundError(f"no judge named {name!r} {scope} (judges of that name: "
                                + "; ".join(f"id:{j.id} ({describe_judge(j)})" for j in found) + ")")
        found = hits or found
    if len(found) > 1:
        raise ambiguous_judge(name, found, scope)
    return found[0]


def judges_with_data(session: Session, family_ids: Iterable[int] | None = None) -> set[int]:
    """Ids of the judges with at least one rating or pairwise verdict (in the task families
    ``family_ids``; anywhere when None): the ``among`` of :func:`judge_by_name` for a command
    that reads a judge's ratings or verdicts."""
    fams = None if family_ids is None else list(family_ids)
    out: set[int] = set()
    for judge_col, resp_col in ((m.Rating.judge_id, m.Rating.response_id),
                                (m.PairwiseJudgment.judge_id, m.PairwiseJudgment.response_a_id)):
        stmt = select(judge_col).distinct()
        if fams is not None:
            stmt = (stmt.join(m.Response, m.Response.id == resp_col).join(m.Item, m.Item.id == m.Response.item_id)
                    .where(m.Item.task_family_id.in_(fams)))
        out.update(session.scalars(stmt))
    return out


def ambiguous_judge(name: str, found: list[m.Judge], scope: str = "") -> ChoiceError:
    """The error for a judge name that several judges share: lists each one's id, identity and
    what tells them apart, with the ``id:N`` that chooses it (``options``)."""
    ids = "; ".join(f"{j.id} ({describe_judge(j)})" for j in found)
    differ = judge_differences(found)
    where = f" {scope}" if scope else ""
    return ChoiceError(f"judge name {name!r} is ambiguous: {len(found)} judges{where} share it; pass one of the ids "
                       f"(--judge id:N): {ids} (what tells them apart: "
                       + "; ".join(f"{j.id}: {differ[j.id]}" for j in found) + ")",
                       [{"label": f"{j.name} (id {j.id}): {differ[j.id] or describe_judge(j)}",
                         "params": {"judge": f"id:{j.id}"}} for j in found])


def describe_judge(judge: m.Judge) -> str:
    """What tells a judge from another of the same name: model, mode, endpoint, prompt (name
    and the first 12 hex digits of its SHA-256), sampling parameters (canonical JSON), scale."""
    params = json.dumps(canonical(judge.params or {}), ensure_ascii=False, separators=(",", ":"))
    return (f"model {judge.model}, {judge.mode}, endpoint {judge.endpoint}, prompt {judge.prompt_name} "
            f"sha256 {judge.prompt_sha256[:12]}, params {params}, scale [{judge.scale_min:g}, {judge.scale_max:g}]")


def judge_reference(session: Session, judge: m.Judge) -> str:
    """What ``--judge`` and a URL name ``judge`` by: its name where no other judge has it and
    the name reads as a name, else ``id:N`` (:func:`judgecal.db.browse.judge_ref`)."""
    from judgecal.db.browse import judge_ref

    names = dict(session.execute(select(m.Judge.id, m.Judge.name).where(m.Judge.name == judge.name)).all())
    label = {jid: (name if len(names) == 1 else f"{name} (id {jid})") for jid, name in names.items()}
    return judge_ref(label, names, judge.id)


def judge_labels(session: Session) -> dict[int, str]:
    """{judge id: label}: the judge's name, or ``name (id N)`` where several judges share it."""
    rows = session.execute(select(m.Judge.id, m.Judge.name)).all()
    count: dict[str, int] = {}
    for _, name in rows:
        count[name] = count.get(name, 0) + 1
    return {jid: (name if count[name] == 1 else f"{name} (id {jid})") for jid, name in rows}


def canonical(obj: Any) -> Any:
    """A JSON value with every object's keys in sorted order (nested ones too), so that it
    serialises to the same bytes however it was built: ``{"temperature": 0, "max_tokens": 9}``
    -> ``{"max_tokens": 9, "temperature": 0}``."""
    if isinstance(obj, dict):
        return {k: canonical(obj[k]) for k in sorted(obj)}
    if isinstance(obj, list):
        return [canonical(v) for v in obj]
    return obj


def identity_params(obj: Any) -> Any:
    """A judge's sampling parameters as they count for its identity: :func:`canonical` with every
    number (not a boolean) as a float, so ``{"temperature": 0}`` and ``{"temperature": 0.0}``
    (JSON makes no difference between them) are the same judge."""
    if isinstance(obj, dict):
        return {k: identity_params(obj[k]) for k in sorted(obj)}
    if isinstance(obj, list):
        return [identity_params(v) for v in obj]
    if isinstance(obj, (int, float)) and not isinstance(obj, bool):
        return float(obj)
    return obj


def get_or_create_judge(session: Session, **fields: Any) -> m.Judge:
    """The Judge row with these identity fields (model, endpoint, prompt_name, prompt_sha256,
    mode, params, scale_min, scale_max, name); inserted on first use. The key is the SHA-256
    of the identity (name excluded) with the parameters as :func:`identity_params` gives them
    (0 and 0.0 are one value), so the same settings always map to one row. ``params`` is
    stored canonical (keys sorted: :func:`canonical`) as first given, so exports of it are
    byte-stable. ``endpoint`` is stored as :func:`judgecal.secrets.endpoint_without_secrets`
    gives it (credentials, query string and fragment dropped), whoever calls. A row stored before parameters were compared this way (its key made from the
    parameters as given) is found by its identity fields and reused."""
    # the last guard of every path that stores a judge: its endpoint never holds a secret
    fields = dict(fields, params=canonical(fields.get("params") or {}),
                  endpoint=endpoint_without_secrets(fields["endpoint"]))
    ident = {k: fields[k] for k in ("model", "endpoint", "prompt_sha256", "mode", "params", "scale_min", "scale_max")}
    ident["params"] = identity_params(ident["params"])
    judge_key = key_of(ident)
    found = session.scalar(select(m.Judge).where(m.Judge.judge_key == judge_key))
    if found is not None:
        return found
    J = m.Judge
    for row in session.scalars(select(J).where(J.model == fields["model"], J.endpoint == fields["endpoint"],
                                               J.prompt_sha256 == fields["prompt_sha256"], J.mode == fields["mode"],
                                               J.scale_min == fields["scale_min"], J.scale_max == fields["scale_max"])
                               .order_by(J.id)):
        if identity_params(row.params or {}) == ident["params"]:
            return row
    row = dict(fields, judge_key=judge_key, created_at=m.utcnow())
    row.setdefault("name", fields["model"])
    insert_ignore(session, m.Judge, [row])
    return session.scalar(select(m.Judge).where(m.Judge.judge_key == judge_key))


IDENTITY_FIELDS = ("model", "mode", "endpoint", "prompt_name", "prompt_sha256", "params", "scale_min", "scale_max")


def judge_differences(judges: Iterable[m.Judge]) -> dict[int, str]:
    """{judge id: what tells it from the other judges given} - only the identity fields whose
    values differ among them (model, mode, endpoint, prompt name, prompt SHA-256 (12 hex digits),
    parameters as canonical JSON, scale), e.g. ``"mode pairwise"``; "" for a single judge."""
    judges = list(judges)

    def show(j, f):
        v = getattr(j, f)
        if f == "params":
            return json.dumps(canonical(v or {}), ensure_ascii=False, separators=(",", ":"))
        if f == "prompt_sha256":
            return v[:12]
        if f in ("scale_min", "scale_max"):
            return f"{v:g}"
        return str(v)

    differ = [f for f in IDENTITY_FIELDS if len({show(j, f) for j in judges}) > 1]
    return {j.id: ", ".join(f"{f.replace('_', ' ')} {show(j, f)}" for f in differ) for j in judges}


def shared_name_differences(session: Session) -> dict[int, str]:
    """{judge id: :func:`judge_differences` among the judges of its name} for every judge whose
    name another judge shares (what ``stats`` prints beside ``name (id N)``)."""
    by_name: dict[str, list[m.Judge]] = {}
    for j in session.scalars(select(m.Judge).order_by(m.Judge.id)):
        by_name.setdefault(j.name, []).append(j)
    out: dict[int, str] = {}
    for group in by_name.values():
        if len(group) > 1:
            out.update(judge_differences(group))
    return out


def pair_label_texts(session: Session, family: str, annotator: str) -> list[tuple[str, str, str, str]]:
    """(prompt, response a's text, response b's text, preference 'a' | 'b' | 'tie') of every
    pairwise expert label of ``annotator`` in task family ``family`` (empty when the family is
    not stored), in content order (prompt, texts). An LLMBar import reads them to know a pair
    given again with its outputs swapped (judgecal.importers.llmbar: one pair, one label)."""
    from sqlalchemy.orm import aliased

    ra, rb = aliased(m.Response), aliased(m.Response)
    rows = session.execute(
        select(m.Item.prompt, ra.text, rb.text, m.ExpertLabel.preference)
        .join(ra, ra.id == m.ExpertLabel.response_a_id).join(rb, rb.id == m.ExpertLabel.response_b_id)
        .join(m.Item, m.Item.id == ra.item_id).join(m.TaskFamily, m.TaskFamily.id == m.Item.task_family_id)
        .where(m.TaskFamily.name == family, m.ExpertLabel.kind == "pairwise", m.ExpertLabel.annotator == annotator)
    ).all()
    return sorted((p, a, b, pref) for p, a, b, pref in rows)
