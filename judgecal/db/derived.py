"""Results computed when the data is written, read back by the pages (issue 32, item 5).

What a page cannot compute in 300 ms (the report's pairwise-judge summary over every judge, a
judge's page, a win-rate board: bootstraps, fits, nested selection) is computed by ``judgecal db
refresh`` and stored in ``derived_result`` (migration 0006). A stored result is read back only
when all of these hold, else the function computes it as before (and nothing is said: the figures
are the same, only slower):

- the database's **content generation** (:func:`generation`) is the one it was computed at. The
  generation is moved by database triggers on every insert, update and delete of a content table,
  by any client, judgecal or not (SQLite: a row trigger adds 1 to ``content_state.generation``;
  PostgreSQL: a statement trigger appends a row to ``content_change``; the generation is
  ``content_state.generation`` plus that table's row count, and :func:`write` moves the rows into
  the number, so the table stays small). A result can therefore never outlive a change of the
  rows it was computed from.
  If the triggers are not all there (a database restored without them, a table rebuilt), there
  is no generation and nothing stored is read;
- the **key** matches: SHA-256 of the function's kind, its parameters (canonical JSON) and
  judgecal's code (:func:`code_fingerprint`: the package's source files), so another seed, another
  bootstrap count or another version of the maths never reads it.

Values are tagged JSON text (:func:`encode` / :func:`decode`): tuples, dicts with non-string
keys, NaN and infinities come back as they were computed (no pickle: a shared database is not
trusted code).

Why a generation and not a fingerprint of the rows read at request time: hashing the rows a
page reads costs more than the page's budget (on the team's SQLite database, the 59,545
verdicts with their answers' content keys take 175-265 ms to read and hash; docs/performance.md),
while the generation is one row (SQLite) or one count (PostgreSQL)."""

from __future__ import annotations

import contextlib
import contextvars
import functools
import hashlib
import inspect
import json
import math
from collections.abc import Iterator
from pathlib import Path

from sqlalchemy import text

#: the content tables whose triggers move the generation (migration 0006)
CONTENT_TABLES = ('task_family', 'item', 'response', 'token_length', 'judge', 'rating', 'pairwise_judgment',
                  'expert_label', 'verbosity_pair', 'calibration', 'mc_run', 'mc_item_result')

_RECORDING: contextvars.ContextVar[dict | None] = contextvars.ContextVar("judgecal_derived_recording", default=None)
_MISSING = object()


# ---------------------------------------------------------------- generation
def generation(conn) -> str | None:
    """The database's content generation as text (``sqlite:N``, ``pg:N``), or None where it
    cannot be trusted (a trigger of migration 0006 missing or disabled, the tables absent, another
    dialect). ``conn``: a SQLAlchemy Connection or Session. Equal values mean no content table was
    written in between (on PostgreSQL, no writing statement committed in between)."""
    bind = getattr(conn, "bind", None) or getattr(conn, "engine", None)
    dialect = bind.dialect.name if bind is not None else conn.dialect.name
    try:
        if dialect == "sqlite":
            n = conn.execute(text("SELECT count(*) FROM sqlite_master WHERE type = 'trigger' "
                                  "AND name LIKE 'jc_gen_%'")).scalar_one()
            if n != 3 * len(CONTENT_TABLES):
                return None
            return f"sqlite:{conn.execute(text('SELECT generation FROM content_state WHERE id = 1')).scalar_one()}"
        if dialect == "postgresql":
            n = conn.execute(text("SELECT count(*) FROM pg_trigger WHERE tgname LIKE 'jc\\_gen\\_%' "
                                  "AND NOT tgisinternal AND tgenabled <> 'D'")).scalar_one()
            if n != len(CONTENT_TABLES):
                return None
            # one statement, one snapshot: the rows compacted into content_state (write) plus those since
            return "pg:" + str(conn.execute(text("SELECT (SELECT generation FROM content_state WHERE id = 1) "
                                                 "+ (SELECT count(*) FROM content_change)")).scalar_one())
    except Exception:  # noqa: BLE001 - no tables (a database behind 0006): nothing stored is read
        return None
    return None


def store_state(url: str | None, *, engine=None) -> dict | None:
    """What the store holds for the database at ``url`` (None: the default database), read
    through a read-only connection (a missing SQLite file is not created): {"rows": number of
    stored results, "stored": the generation they were computed at (None without rows; ``write``
    keeps one generation), "current": :func:`generation` (None where it cannot be trusted),
    "stale": rows are stored and their generation is not the current one}. None where the
    database cannot be read (no file, a server that does not answer, tables behind migration
    0006): nothing stored there. Costs a connection and three small queries. ``engine``: an
    engine to read through instead (kept open: ``judgecal serve``'s pinned one)."""
    from judgecal.db import engine as eng

    own = engine is None
    if own:
        try:
            engine = eng.create(eng.read_only_url(url))
        except Exception:  # noqa: BLE001 - no database file, another backend: nothing is stored there
            return None
    try:
        with engine.connect() as conn:
            n, stored = conn.execute(text("SELECT count(*), max(generation) FROM derived_result")).one()
            current = generation(conn)
    except Exception:  # noqa: BLE001 - unreachable, or behind 0006 (no derived_result table)
        return None
    finally:
        if own:
            engine.dispose()
    n = int(n or 0)
    return {"rows": n, "stored": stored if n else None, "current": current,
            "stale": bool(n) and stored != current}


# ---------------------------------------------------------------- code and keys
#: what the stored results are computed by: the maths, the queries, the views, the packaged data
CODE_PARTS = ("calibrate", "db", "views", "data")


@functools.lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """SHA-256 of the judgecal source and data files the stored results are computed by
    (:data:`CODE_PARTS` and the package's top-level modules; paths and bytes, in path order),
    computed once per process: a stored result is never read by another version of that code."""
    root = Path(__file__).resolve().parents[1]
    files = [p for p in root.glob("*.py")] + [p for part in CODE_PARTS for p in (root / part).rglob("*")
                                             if p.is_file() and "__pycache__" not in p.parts]
    h = hashlib.sha256()
    for path in sorted(files):
        h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def result_key(kind: str, params: dict) -> str:
    """The stored key of ``kind`` called with ``params`` by this code (:func:`code_fingerprint`).
    Raises TypeError for a parameter that is not plain data (then nothing is stored)."""
    canon = json.dumps(_plain(params), sort_keys=True, separators=(",", ":"), allow_nan=True)
    return hashlib.sha256(f"{kind}\0{canon}\0{code_fingerprint()}".encode()).hexdigest()


def _plain(x):
    if x is None or isinstance(x, (bool, int, float, str)):
        return x
    if type(x).__module__ == "numpy":  # arrays and scalars: their values
        return _plain(x.tolist())
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    raise TypeError(f"not plain data: {type(x).__name__}")


# ---------------------------------------------------------------- values
def encode(value) -> str:
    """``value`` as tagged JSON text: tuples as ``{"__t": [...]}``, dicts with a non-string key
    (or a key ``__t``/``__d``/``__a``) as ``{"__d": [[k, v], ...]}``, numpy arrays as ``{"__a":
    [dtype, shape, base64 bytes]}``, numpy scalars as Python numbers,
    NaN and infinities as JSON's NaN/Infinity. Raises TypeError for anything else."""
    return json.dumps(_enc(value), allow_nan=True, separators=(",", ":"))


def _enc(x):
    import numpy as np

    if x is None or isinstance(x, (bool, str)):
        return x
    if isinstance(x, np.ndarray):  # its dtype, shape and bytes (little-endian dtypes: numpy's own)
        import base64

        return {"__a": [x.dtype.str, list(x.shape), base64.b64encode(np.ascontiguousarray(x).tobytes()).decode()]}
    if isinstance(x, np.bool_):
        return bool(x)
    if isinstance(x, (int, np.integer)):
        return int(x)
    if isinstance(x, (float, np.floating)):
        return float(x)
    if isinstance(x, tuple):
        return {"__t": [_enc(v) for v in x]}
    if isinstance(x, list):
        return [_enc(v) for v in x]
    if isinstance(x, dict):
        if all(isinstance(k, str) for k in x) and not {"__t", "__d", "__a"} & x.keys():
            return {k: _enc(v) for k, v in x.items()}
        return {"__d": [[_enc(k), _enc(v)] for k, v in x.items()]}
    raise TypeError(f"cannot store a {type(x).__name__}")


def decode(data: str):
    """The value :func:`encode` wrote."""
    return _dec(json.loads(data))


def _dec(x):
    if isinstance(x, list):
        return [_dec(v) for v in x]
    if isinstance(x, dict):
        if len(x) == 1 and "__t" in x:
            return tuple(_dec(v) for v in x["__t"])
        if len(x) == 1 and "__d" in x:
            return {_key(_dec(k)): _dec(v) for k, v in x["__d"]}
        if len(x) == 1 and "__a" in x:
            import base64

            import numpy as np

            dtype, shape, data = x["__a"]
            return np.frombuffer(base64.b64decode(data), dtype=np.dtype(dtype)).reshape(shape).copy()
        return {k: _dec(v) for k, v in x.items()}
    return x


def _key(k):
    return tuple(_key(v) for v in k) if isinstance(k, (list, tuple)) else k


def same(a, b) -> bool:
    """True when two results are equal value for value (NaN equal to NaN; a tuple equal to the
    list of the same values is not: the types must match too)."""
    if type(a).__module__ == "numpy" or type(b).__module__ == "numpy":
        import numpy as np

        a, b = np.asarray(a), np.asarray(b)
        return a.dtype == b.dtype and a.shape == b.shape and bool(
            np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"))
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if type(a) is not type(b) and not (isinstance(a, (int, float)) and isinstance(b, (int, float))
                                       and not isinstance(a, bool) and not isinstance(b, bool)):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


# ---------------------------------------------------------------- reading and writing
def lookup(url: str | None, kind: str, key: str):
    """The stored value of ``key`` if it was computed at the database's current generation;
    else the module's ``_MISSING``. Any error reading it is a miss (the caller computes)."""
    from judgecal.db import engine as eng

    pinned = url is not None and url in eng._PINNED  # judgecal serve's engine: kept; else made and disposed here
    try:
        engine = eng.get_engine(url, check=False)  # a database behind 0006 has no generation: a miss
    except Exception:  # noqa: BLE001 - a miss: the function reports what is wrong with the database
        return _MISSING
    try:
        with engine.connect() as conn:
            gen = generation(conn)
            if gen is None:
                return _MISSING
            row = conn.execute(text("SELECT value FROM derived_result WHERE key = :k AND generation = :g"),
                               {"k": key, "g": gen}).first()
        return _MISSING if row is None else decode(row[0])
    except Exception:  # noqa: BLE001 - a miss: the page computes its figures as without the store
        return _MISSING
    finally:
        if not pinned:
            engine.dispose()


@contextlib.contextmanager
def recording() -> Iterator[dict]:
    """Within the block, every :func:`stored` function computes (never reads the store) and
    records {key: (kind, encoded value)} into the dict yielded (``judgecal db refresh``)."""
    records: dict = {}
    token = _RECORDING.set(records)
    try:
        yield records
    finally:
        _RECORDING.reset(token)


def write(engine, gen: str, records: dict) -> int:
    """Store ``records`` (from :func:`recording`) as computed at generation ``gen``, in one
    transaction that first checks the database is still at ``gen`` (else nothing is written and
    0 returned: the data changed while they were computed) and deletes the results of every
    other generation. Returns the number of results stored."""
    import datetime as dt

    from judgecal import __version__

    from sqlalchemy import bindparam

    now = dt.datetime.now(dt.timezone.utc)
    conn = engine.connect()
    try:
        with conn.begin() as tx:
            # a write first: on SQLite it takes the write lock, so the generation cannot move between
            # the check and the commit (on PostgreSQL a write committed after the check adds a row to
            # content_change, so what is stored here is never read at the new generation)
            conn.execute(text("DELETE FROM derived_result WHERE generation <> :g"), {"g": gen})
            if generation(conn) != gen:
                tx.rollback()
                return 0
            if conn.dialect.name == "postgresql":  # the log compacted into the count: the generation is unchanged
                conn.execute(text("WITH d AS (DELETE FROM content_change RETURNING 1) "
                                  "UPDATE content_state SET generation = generation + (SELECT count(*) FROM d) "
                                  "WHERE id = 1"))
            keys = list(records)
            for start in range(0, len(keys), 500):
                conn.execute(text("DELETE FROM derived_result WHERE key IN :ks").bindparams(bindparam("ks", expanding=True)),
                             {"ks": keys[start:start + 500]})
            if records:
                conn.execute(text("INSERT INTO derived_result (kind, key, generation, value, judgecal_version, "
                                  "created_at) VALUES (:kind, :key, :g, :value, :v, :t)"),
                             [{"kind": kind, "key": key, "g": gen, "value": value, "v": f"{__version__}+{code_fingerprint()[:12]}", "t": now}
                              for key, (kind, value) in records.items()])
    finally:
        conn.close()
    return len(records)


def stored(kind: str, *, unless=None):
    """Decorator: the function's result is read from the store when it was computed ahead at the
    current generation (:func:`lookup`), computed otherwise; within :func:`recording` it is
    computed and recorded. The key is made of every parameter except ``url`` (and ``step``);
    ``unless(params)`` true (e.g. a file given, whose content the key would not cover) or a
    parameter that is not plain data: always computed, never stored."""

    def wrap(fn):
        sig = inspect.signature(fn)

        @functools.wraps(fn)
        def call(*args, **kwargs):
            try:
                bound = sig.bind(*args, **kwargs)
                bound.apply_defaults()
                params = {k: v for k, v in bound.arguments.items() if k not in ("url", "step")}
                if unless is not None and unless(params):
                    return fn(*args, **kwargs)
                key = result_key(kind, params)
            except TypeError:
                return fn(*args, **kwargs)
            records = _RECORDING.get()
            if records is None:
                value = lookup(bound.arguments.get("url"), kind, key)
                return fn(*args, **kwargs) if value is _MISSING else value
            value = fn(*args, **kwargs)
            try:
                records[key] = (kind, encode(value))
            except TypeError:  # a value the store cannot hold: computed each time, as before
                pass
            return value

        call.compute = fn  # the function itself, never read from the store
        return call
    return wrap
