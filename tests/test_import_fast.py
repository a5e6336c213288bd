"""The fast AlpacaEval import path (issue 10's speed goal) reads exactly what the careful one
reads: the msgspec reader against Python's json module, the fast record acceptor against the
FILE:LINE checks, the parsing workers against parsing in one process (both dialects), errors
at the first bad file with nothing written, a killed worker, Ctrl-C, the C word count, and
the constant columns written into the SQLite statement."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import msgspec
import pytest
from proc_helpers import children
from hypothesis import example, given, settings
from hypothesis import strategies as st
from sqlalchemy import Column, DateTime, Float, Integer, MetaData, String, Table, create_engine, text
from sqlalchemy.orm import Session

from judgecal.views import importing
from judgecal.db import queries as q
from judgecal.db.ingest import n_words
from judgecal.errors import InputError, WorkerError
from judgecal.importers import alpaca_eval, fastjson, parallel
from judgecal.importers.fastjson import read_json_fields
from judgecal.importers.records import DuplicateKey, Fields, read_json_array, unique_keys

FIELDS = alpaca_eval._Record.__struct_fields__


def _annotations(data_dir: Path) -> list[Path]:
    return sorted((data_dir / "alpaca_eval" / "results").glob("*/*/annotations.json"))


def _rec(i: int, **over) -> dict:
    r = {"instruction": f"question {i}", "output_1": f"base answer {i}", "generator_1": "base",
         "output_2": f"model answer {i}", "generator_2": "m", "annotator": "judge", "preference": 1.25,
         "time_per_example": 0.5, "dataset": "x",
         "raw_completion": {"logprobs": {"content": [{"token": "M", "logprob": -0.1, "bytes": [77]}]}, "text": "m"}}
    r.update(over)
    return r


def _view(obj):
    """An element as an importer reads it: the schema's fields (present or not, values) of an
    object, with raw_completion as the stored raw output; anything else as it is."""
    if not (isinstance(obj, dict) or isinstance(obj, alpaca_eval._Record)):
        return ("value", obj)
    return tuple((k, k in obj, alpaca_eval._raw_output(obj) if k == "raw_completion" else obj.get(k)) for k in FIELDS)


def _both(path: Path):
    """(lines, views) or the error message, by the reference reader and by the fast one."""
    out = []
    for read in (lambda: read_json_array(path), lambda: list(read_json_fields(path, alpaca_eval._Record))):
        try:
            pairs = read()
            out.append(([line for line, _ in pairs], [_view(o) for _, o in pairs]))
        except InputError as exc:
            out.append(str(exc))
    return out


ONE = json.dumps([_rec(1), _rec(2)], indent=2)
CASES = {
    "pretty": ONE.encode(),
    "bom_crlf": b"\xef\xbb\xbf" + ONE.replace("\n", "\r\n").encode(),
    "one_line": json.dumps([_rec(1), _rec(2), _rec(3)]).encode(),
    "non_ascii": json.dumps([_rec(1, output_2="café ☕ 😀 \u00a0 x")], ensure_ascii=False, indent=1).encode(),
    "nan_preference": ONE.replace('"preference": 1.25', '"preference": NaN', 1).encode(),
    "huge_float_skipped": ONE.replace('"logprob": -0.1', '"logprob": -1e400', 1).encode(),
    "huge_int": ONE.replace('"preference": 1.25', '"preference": 100000000000000000000000000000', 1).encode(),
    "surrogate_field": ONE.replace('"question 1"', '"question \\ud800 1"', 1).encode(),
    "surrogate_skipped": ONE.replace('"token": "M"', '"token": "\\udc00"', 1).encode(),
    "duplicate_keys": ONE.replace('"preference": 1.25', '"preference": 1.0, "preference": 2.0', 1).encode(),
    "number_element": b'[\n  1,\n  ' + json.dumps(_rec(1)).encode() + b"\n]",
    "list_raw_completion": json.dumps([_rec(1, raw_completion=[1, 2]), _rec(2, raw_completion="text")], indent=2).encode(),
    "message_content": json.dumps([_rec(1, raw_completion={"message": {"content": "b"}, "logprobs": None})]).encode(),
    "message_openai": json.dumps([_rec(1, raw_completion={"message": {"content": "b", "role": "assistant", "function_call": None,
                                                                      "tool_calls": None}, "logprobs": None})]).encode(),
    "message_repeat": ONE.replace('"text": "m"', '"message": {"content": "x", "role": "r", "content": null}', 1).encode(),
    "message_solidus_repeat": ONE.replace('"text": "m"', '"message": {"a/b": "x", "a\\/b": "y"}', 1).encode(),
    "message_name_in_value": ONE.replace('"text": "m"', '"message": {"content": "\\"content\\"", "role": "r"}', 1).encode(),
    "message_nested_repeat": ONE.replace('"text": "m"', '"message": {"tool_calls": [{"id": 1, "id": 2}]}', 1).encode(),
    "absent_and_null": json.dumps([{"instruction": "q", "output_1": None}, _rec(2)], indent=2).encode(),
    "empty": b"  [ ]  ",
    "trailing_comma": ONE[:-2].encode() + b",\n]",
    "trailing_data": ONE.encode() + b"\n{}",
    "not_utf8": ONE.replace('"m"', '"\udcff"').encode("utf-8", "surrogateescape"),
    "truncated": ONE[: len(ONE) // 2].encode(),
    "not_array": json.dumps(_rec(1)).encode(),
    "deep_skipped": ONE.replace('"logprobs": {', '"logprobs": {"deep": ' + "[" * 3000 + "]" * 3000 + ", ", 1).encode(),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_fast_reader_reads_what_json_module_reads(case, tmp_path):
    path = tmp_path / "annotations.json"
    path.write_bytes(CASES[case])
    reference, fast = _both(path)
    assert fast == reference


def test_fast_reader_line_numbers_on_real_file(data_dir):
    path = _annotations(data_dir)[0]
    reference, fast = _both(path)
    assert fast == reference and len(reference[0]) == 805


# --- the flat-object reader (raw_completion.message) decides nothing json.loads would decide otherwise


_keys = st.sampled_from(["content", "role", "a/b", "é", 'q"x', "back\\slash", ""])
_values = st.one_of(st.none(), st.integers(-2, 2), st.sampled_from(["", "content", '"content"', 'x": "y', "\\", "é", "a/b"]),
                    st.dictionaries(st.sampled_from(["content", "id"]), st.none(), max_size=2))


@settings(max_examples=1500, deadline=None)
@given(pairs=st.lists(st.tuples(_keys, _values, st.booleans(), st.booleans()), max_size=4), spaced=st.booleans())
@example(pairs=[("a/b", "x", True, False), ("a/b", "y", True, True)], spaced=False)
@example(pairs=[("é", "x", True, False), ("é", "y", False, False)], spaced=False)
@example(pairs=[("content", "M", True, False), ("role", "assistant", True, False), ("content", None, True, False)],
         spaced=True)
def test_flat_object_reads_what_json_module_reads(pairs, spaced):
    """Written as any JSON writer may write it (each key and value with non-ASCII escaped or
    not, the solidus escaped or not; spaces): ``_flat_object`` gives None (the careful decode
    decides) or exactly the dict json.loads gives, and never for an object that repeats a key."""
    sep = " : " if spaced else ":"

    def dump(x, ascii_only: bool, solidus: bool) -> str:
        out = json.dumps(x, ensure_ascii=ascii_only)
        return out.replace("/", "\\/") if solidus else out

    data = ("{" + ", ".join(dump(k, a, sl) + sep + dump(v, a, sl) for k, v, a, sl in pairs) + "}").encode()
    if fastjson._ASCII_ESCAPE.search(data):
        return  # such a file never reaches it (_keys_once sends it to the reference reader)
    got = fastjson._flat_object(data)
    if got is None:
        return
    try:
        expected = json.loads(data, object_pairs_hook=unique_keys)
    except DuplicateKey:
        pytest.fail(f"a repeated key read as {got!r}: {data!r}")
    assert got == expected and list(got) == list(expected)


# --- the fast record acceptor decides nothing the careful path would decide otherwise ----------

_names = st.sampled_from(["m", "gpt4_1106_preview", "", "  ", "a\x00b", "x" * 200, "x" * 201, "y" * 300, "y" * 301])
_texts = st.sampled_from(["an answer", "", " ", "with\x00nul", "é ☕", "z" * 5000])
_anything = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.floats(allow_nan=True, allow_infinity=True),
                      st.sampled_from(["1.5", " 2 ", "nan", "inf", "", "abc", "1e0"]), st.lists(st.integers(), max_size=2))


@settings(max_examples=600, deadline=None)
@given(instruction=st.one_of(_texts, _anything), g1=st.one_of(_names, _anything), g2=st.one_of(_names, _anything),
       ann=st.one_of(_names, _anything), o1=st.one_of(_texts, _anything), o2=st.one_of(_texts, _anything),
       pref=st.one_of(st.floats(0, 2.5), _anything), t=st.one_of(st.floats(-1, 1e16), _anything))
def test_fast_acceptor_agrees_with_careful_checks(instruction, g1, g2, ann, o1, o2, pref, t):
    rec = {"instruction": instruction, "generator_1": g1, "generator_2": g2, "annotator": ann, "output_1": o1,
           "output_2": o2, "preference": pref, "time_per_example": t}
    fast = alpaca_eval._clean(alpaca_eval._Record(**rec))
    if fast is None:
        return  # the careful path decides
    careful = alpaca_eval._careful(Fields(rec, "f.json", 1))  # must not raise
    assert fast == careful
    assert [type(x) for x in fast] == [type(x) for x in careful]


# --- workers ----------------------------------------------------------------------------------


def _dump(url: str) -> dict:
    engine = create_engine(url)
    with engine.connect() as c:
        out = {
            "responses": sorted(c.execute(text(
                "SELECT i.prompt, r.model, r.text, r.text_sha256, r.n_bytes, r.n_chars, r.n_words "
                "FROM response r JOIN item i ON i.id = r.item_id")).all()),
            "verdicts": sorted(c.execute(text(
                "SELECT a.model, b.model, i.prompt, v.preference, v.verdict, v.status, v.position, v.baseline_side, "
                "v.source, v.raw_output, v.error, v.latency_s, v.sample_index, v.attempts, j.name "
                "FROM pairwise_judgment v JOIN response a ON a.id = v.response_a_id "
                "JOIN response b ON b.id = v.response_b_id JOIN item i ON i.id = a.item_id "
                "JOIN judge j ON j.id = v.judge_id")).all(), key=repr),
        }
    engine.dispose()
    return out


def test_workers_store_what_one_process_stores(data_dir, db_url, tmp_path):
    files = _annotations(data_dir)[:5]
    one = f"sqlite:///{tmp_path / 'one.db'}"
    a = importing.import_alpaca_eval(files, [], None, one, workers=0)
    b = importing.import_alpaca_eval(files, [], None, db_url, workers=2)
    # where the files were parsed is the one difference, and it is said
    assert a.pop("parsing") == {"files": 5, "workers": 0, "in_process": 5, "reason": "--workers 0"}
    parsing = b.pop("parsing")
    assert parsing["files"] == 5 and parsing["workers"] == 2 and parsing["reason"] is None
    assert 0 <= parsing["in_process"] <= 5
    assert a == b
    assert a["added"]["pairwise_judgment"] == sum(len(json.loads(f.read_text())) for f in files) - sum(
        r["count"] for r in a["skipped"].values())
    assert _dump(one) == _dump(db_url)
    again = importing.import_alpaca_eval(files, [], None, db_url, workers=2)
    assert again["added"]["pairwise_judgment"] == 0 and again["added"]["response"] == 0


def _results_copy(data_dir: Path, tmp_path: Path, n: int) -> list[Path]:
    out = []
    for src in _annotations(data_dir)[:n]:
        dst = tmp_path / "results" / src.parent.parent.name / src.parent.name / "annotations.json"
        dst.parent.mkdir(parents=True)
        shutil.copyfile(src, dst)
        out.append(dst)
    return out


@pytest.mark.parametrize("workers", [0, 2])
def test_first_bad_file_in_order_is_reported_and_nothing_written(data_dir, tmp_path, workers):
    files = _results_copy(data_dir, tmp_path, 6)
    for k, field, value in ((1, "preference", 7), (4, "instruction", 3)):
        records = json.loads(files[k].read_text())
        records[10][field] = value
        files[k].write_text(json.dumps(records, indent=2))
    bad = read_json_array(files[1])[10][0]  # record 10's first line, as the careful reader counts it
    assert bad > 10
    url = f"sqlite:///{tmp_path / 'x.db'}"
    with pytest.raises(InputError) as err:
        importing.import_alpaca_eval([tmp_path / "results"], [], None, url, workers=workers)
    assert str(err.value).startswith(f"{files[1]}:{bad}: field 'preference' must be in [1, 2]")
    with sqlite3.connect(tmp_path / "x.db") as c:
        assert c.execute("SELECT count(*) FROM pairwise_judgment").fetchone()[0] == 0
        assert c.execute("SELECT count(*) FROM response").fetchone()[0] == 0


def test_killed_worker_is_one_error(tmp_path):
    """A worker that exits mid-file is one WorkerError naming the first file whose result
    never came, after the files before it in order. The exit happens in a worker only: this
    process parses a share of the files itself (any file, whatever the timing), and an exit
    here would end the test run. It waits, in its own file, until a worker has taken one."""
    files = [tmp_path / f"f{i}" for i in range(6)]
    me = os.getpid()
    taken = tmp_path / "taken"

    def fn(path: Path) -> str:
        if os.getpid() != me:  # a forked worker: it dies on the first file it takes
            taken.write_text(path.name)
            os._exit(7)
        deadline = time.monotonic() + 60
        while not taken.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        return path.name

    got = []
    with pytest.raises(WorkerError, match=r"/f(\d): the process parsing this file ended without an answer "
                                          r"\(it exited with status 7\)") as err:
        for value in parallel.map_files(fn, files, workers=2):
            got.append(value)
    assert taken.exists(), "no worker took a file"
    # the first file whose result never came: every file before it was parsed here, in order
    lost = int(err.value.args[0].split(": the process")[0][-1])
    assert got == [f"f{i}" for i in range(lost)]
    assert not children(os.getpid()), "a worker outlived map_files"


def _pid(path: Path) -> int:
    return os.getpid()


def test_in_process_fallback_is_counted_with_its_reason(tmp_path):
    """With another thread running, map_files starts no worker (a forked child would inherit
    its locks) and parses every file here: its stats say so, with the reason."""
    files = [tmp_path / f"f{i}" for i in range(4)]
    for f in files:
        f.write_text("x")
    stop = threading.Event()
    t = threading.Thread(target=stop.wait)
    t.start()
    try:
        stats: dict = {}
        pids = list(parallel.map_files(_pid, files, stats=stats))
    finally:
        stop.set()
        t.join()
    assert pids == [os.getpid()] * 4
    assert (stats["files"], stats["workers"], stats["in_process"]) == (4, 0, 4)
    assert "other thread(s) run in this process: a forked worker could inherit a lock" in stats["reason"]
    assert not children(os.getpid())
    # without other threads, too little to parse is the reason (no worker pays below 8 MB)
    if threading.active_count() == 1:
        stats = {}
        assert list(parallel.map_files(_pid, files, stats=stats)) == [os.getpid()] * 4
        assert stats == {"files": 4, "workers": 0, "in_process": 4, "reason": "0.0 MB in all: workers pay from 8 MB"}


def test_import_says_where_its_files_were_parsed(data_dir, tmp_path, run_cli):
    """The import's result and summary line count the files parsed in this process and why."""
    files = [str(f) for f in _annotations(data_dir)[:2]]
    r = run_cli("--database-url", f"sqlite:///{tmp_path / 'a.db'}", "import", "alpaca-eval", *files, "--workers", "0")
    assert r.exit_code == 0, r.output
    assert "  parsed 2 file(s) in this process (--workers 0)" in r.stdout.splitlines()
    r = run_cli("--database-url", f"sqlite:///{tmp_path / 'b.db'}", "import", "alpaca-eval", *files, "--workers", "1")
    assert r.exit_code == 0, r.output
    line = next(x for x in r.stdout.splitlines() if x.startswith("  parsed 2 file(s): "))
    by, here = line.split(": ", 1)[1].split(" by 1 worker process(es), ")
    assert int(by) + int(here.split()[0]) == 2, line


def test_worker_exception_is_raised_at_its_turn(tmp_path):
    files = [tmp_path / f"f{i}" for i in range(8)]

    def fn(path: Path) -> str:
        if path.name in ("f2", "f5"):
            raise InputError("broken", source=str(path), line=4)
        return path.name

    got = []
    with pytest.raises(InputError) as err:
        for value in parallel.map_files(fn, files, workers=3):
            got.append(value)
    assert got == ["f0", "f1"] and str(err.value) == f"{files[2]}:4: broken" and err.value.line == 4


@pytest.mark.timeout(120)
@pytest.mark.parametrize("workers", [1, 3])
def test_slow_files_keep_the_order_and_the_lookahead(tmp_path, workers):
    """Slow files hold the others back without a hang (the caller stops reading a worker that
    is LOOKAHEAD results ahead), and results keep the files' order."""
    files = [tmp_path / f"f{i:02d}" for i in range(40)]

    def fn(path: Path) -> str:
        if path.name in ("f01", "f07", "f20"):
            time.sleep(0.3)
        return path.name

    assert list(parallel.map_files(fn, files, workers=workers)) == [f.name for f in files]


def test_no_workers_while_other_threads_run(data_dir):
    files = _annotations(data_dir)
    stop = threading.Event()
    t = threading.Thread(target=stop.wait)
    t.start()
    try:
        assert parallel.auto_workers(files) == 0
    finally:
        stop.set()
        t.join()
    expected = 0 if "fork" not in __import__("multiprocessing").get_all_start_methods() else min(
        max(parallel._cpus() - 1, 1), parallel.MAX_WORKERS)
    assert parallel.auto_workers(files) == expected
    assert parallel.auto_workers(files[:1]) == 0




@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc")
def test_ctrl_c_during_parallel_import(data_dir, tmp_path):
    """Ctrl-C while files are parsed and written: exit 130, nothing written, no worker left."""
    results = tmp_path / "results"
    for copy in range(3):  # three times the real folder (as three sets of models): long enough to interrupt
        for src in _annotations(data_dir):
            dst = results / f"{src.parent.parent.name}_{copy}" / src.parent.name / "annotations.json"
            dst.parent.mkdir(parents=True)
            dst.symlink_to(src)
    db = tmp_path / "x.db"
    exe = Path(sys.executable).with_name("judgecal")
    subprocess.run([exe, "--database-url", f"sqlite:///{db}", "stats"], check=True, capture_output=True)
    proc = subprocess.Popen([exe, "--database-url", f"sqlite:///{db}", "import", "alpaca-eval", str(results)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    kids: set[int] = set()
    first_seen = None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        kids |= children(proc.pid)
        if kids and first_seen is None:
            first_seen = time.monotonic()
        if first_seen is not None and time.monotonic() - first_seen > 0.4:
            break
        time.sleep(0.005)
    wal = Path(f"{db}-wal")
    if proc.poll() is not None or (wal.exists() and wal.stat().st_size > 100_000):
        proc.kill()
        pytest.skip("the import reached its commit before it could be interrupted")
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert err.decode().strip() in ("interrupted", "aborted") and b"Traceback" not in err
    assert kids, "the import ran no parsing worker"
    for _ in range(100):
        if not any(Path(f"/proc/{k}").exists() for k in kids):
            break
        time.sleep(0.05)
    assert not any(Path(f"/proc/{k}").exists() for k in kids), "a parsing worker outlived the import"
    with sqlite3.connect(db) as c:
        assert c.execute("SELECT count(*) FROM pairwise_judgment").fetchone()[0] == 0


def test_ctrl_c_during_a_commit_is_held_and_reported():
    """held_interrupts holds a SIGINT sent inside it. The SIGINT is sent in a child process:
    in this one it would end the test run if the handler were not in place."""
    code = textwrap.dedent("""
        import os, signal, time
        from judgecal.db.engine import held_interrupts
        held = []
        before = signal.getsignal(signal.SIGINT)
        with held_interrupts(held):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)  # delivered here, and held
        print(held == [signal.SIGINT], signal.getsignal(signal.SIGINT) is before)
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["True", "True"]


# --- the C word count and the statement's constants -----------------------------------------------


@pytest.mark.parametrize("text,words", [("", 0), ("   ", 0), ("a", 1), (" a  b\tc\n", 3), ("a\x1cb\x1fc", 3),
                                        ("a\x0bb\x0cc\rd", 4), ("é b", 2), ("a\u00a0b", 2), ("a\x85b", 2)])
def test_n_words_known_answers(text, words):
    assert n_words(text, text.encode()) == words == len(text.split())


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet=st.sampled_from(" \t\n\x0b\x0c\r\x1c\x1d\x1e\x1f\x00ab.\x85\xa0\u2003é"), max_size=40))
def test_n_words_is_str_split(text):
    assert n_words(text, text.encode()) == len(text.split())


def test_constant_columns_are_stored_as_bound_values(tmp_path):
    md = MetaData()
    table = Table("t", md, Column("id", Integer, primary_key=True), Column("n", Integer), Column("x", Float),
                  Column("s", String), Column("at", DateTime))
    engine = create_engine(f"sqlite:///{tmp_path / 't.db'}")
    md.create_all(engine)
    now = __import__("datetime").datetime(2026, 12, 1, 10, 0, 0, 123456)
    cols = ["n", "x", "s", "at"]
    sets = [
        [(5, 1.5, "a", now), (5, 2.5, "b", now)],  # constant int, shared timestamp
        [(None, None, None, now), (None, None, "c", now)],  # constant NULLs
        [(True, 1, "d", now), (True, 2.0, "e", now)],  # a boolean column, ints and floats in a Float column
        [(1, 1.0, "f", now), (1.0, 1.0, "g", now)],  # 1 and 1.0: not the same column value type
        [(2**62, 0.1, "h", now)],  # one row: every column constant
    ]
    model = type("M", (), {"__table__": table})
    for rows in sets:
        with Session(engine) as s, s.begin():
            s.execute(text("DELETE FROM t"))
            q.insert_ignore_rows(s, model, cols, rows)
            ours = s.execute(text("SELECT typeof(n), n, typeof(x), x, s, at FROM t ORDER BY id")).all()
            s.execute(text("DELETE FROM t"))
            raw = s.connection().connection.driver_connection
            raw.executemany("INSERT INTO t (n, x, s, at) VALUES (?, ?, ?, ?)",
                            [(n, None if x is None else float(x), st_, at.isoformat(" ")) for n, x, st_, at in rows])
            plain = s.execute(text("SELECT typeof(n), n, typeof(x), x, s, at FROM t ORDER BY id")).all()
        assert ours == plain, rows
    engine.dispose()


def test_msgspec_is_a_declared_dependency():
    import tomllib

    deps = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())["project"]["dependencies"]
    assert any(d.startswith("msgspec") for d in deps) and msgspec.__version__


def test_cli_workers_option(data_dir, tmp_path, run_cli):
    files = [str(f) for f in _annotations(data_dir)[:3]]
    outs = []
    for workers in ("0", "2"):
        url = f"sqlite:///{tmp_path / f'w{workers}.db'}"
        r = run_cli("--database-url", url, "import", "alpaca-eval", "--workers", workers, *files, "--format", "json")
        assert r.exit_code == 0, r
        outs.append(json.loads(r.stdout))
    assert outs[0].pop("parsing") == {"files": 3, "workers": 0, "in_process": 3, "reason": "--workers 0"}
    assert outs[1].pop("parsing")["workers"] == 2
    assert outs[0] == outs[1] and outs[0]["added"]["pairwise_judgment"] > 2000
    r = run_cli("--database-url", f"sqlite:///{tmp_path / 'x.db'}", "import", "alpaca-eval", "--workers", "65", *files)
    assert r.exit_code == 2 and "--workers" in r.stderr and "Traceback" not in r.stderr
