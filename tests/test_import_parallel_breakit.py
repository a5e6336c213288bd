"""Break-it regressions of the parallel import: a killed worker (no hang: the file it held is
named, with its signal), SIGTERM and parent death (no worker left), Ctrl-C after the commit
(never "aborted" once committed) and Ctrl-C while the command line starts (no traceback).

The command-line tests run the real entry point (judgecal.entry.main) in a subprocess; a few
lines of set-up before it land the signal at an exact point (a patched function sends it), so
the windows are hit every time rather than by timing."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from proc_helpers import children

from judgecal.errors import WorkerError
from judgecal.importers import parallel

pytestmark = [
    pytest.mark.skipif("fork" not in __import__("multiprocessing").get_all_start_methods(), reason="needs fork"),
    pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc"),
]

PARENT = os.getpid()  # the test process: a parsed function exits or kills itself only in another (a worker)


def _annotations(folder: Path, n: int = 4, records: int = 40) -> list[Path]:
    files = []
    for i in range(n):
        recs = [{"instruction": f"q {j}", "output_1": f"base {j}", "generator_1": "base", "output_2": f"m{i} answer {j}",
                 "generator_2": f"m{i}", "annotator": "judge", "preference": 1.25} for j in range(records)]
        f = folder / f"a{i}.json"
        f.write_text(json.dumps(recs))
        files.append(f)
    return files


def _verdicts(db: Path) -> int:
    if not db.exists():
        return 0
    with sqlite3.connect(db) as c:
        try:
            return c.execute("SELECT count(*) FROM pairwise_judgment").fetchone()[0]
        except sqlite3.OperationalError:  # no tables: nothing was written
            return 0


def _run(setup: str, args: list[str], timeout: float = 60, **kw) -> subprocess.CompletedProcess:
    """``judgecal ARGS`` through the console entry point, after ``setup`` (Python) has run."""
    code = textwrap.dedent(setup) + "\nimport sys\nsys.argv = ['judgecal'] + %r\nfrom judgecal.entry import main\nmain()\n" % (args,)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, **kw)


def _state(pid: int) -> str | None:
    """A process's state letter (R, S, Z...), None when it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None




# --- D1: a killed worker ------------------------------------------------------------------------


def _dies_on_f05(path: Path) -> str:
    if os.getpid() == PARENT:  # this process parses a share too: slowly, so the workers fill up
        time.sleep(0.05)
    elif path.name == "f05":
        time.sleep(0.3)  # meanwhile the other workers run LOOKAHEAD results ahead and block
        os.kill(os.getpid(), signal.SIGKILL)
    return path.name


@pytest.mark.timeout(60)
@pytest.mark.parametrize("workers", [2, 3])
def test_a_worker_killed_while_the_others_are_full_is_one_error_not_a_hang(tmp_path, workers):
    """The worker holding the file needed next is killed while every other worker has
    LOOKAHEAD results waiting: the old loop waited on no pipe at all, forever."""
    files = [tmp_path / f"f{i:02d}" for i in range(40)]
    got = []
    t0 = time.monotonic()
    with pytest.raises(WorkerError) as err:
        for value in parallel.map_files(_dies_on_f05, files, workers=workers):
            got.append(value)
    assert time.monotonic() - t0 < 20
    msg = str(err.value)
    lost = int(msg.split(": the process")[0][-2:])
    assert lost <= 5 and got == [f"f{i:02d}" for i in range(lost)]
    assert msg.endswith("the process parsing this file ended without an answer (it was killed by signal 9 "
                        "(SIGKILL): killed from outside or out of memory): nothing was imported"), msg
    assert "0, 0" not in msg
    assert not children(os.getpid()), "a worker outlived map_files"


def test_a_worker_that_exits_names_its_status(tmp_path):
    files = [tmp_path / f"f{i}" for i in range(6)]
    taken = tmp_path / "taken"

    def fn(path: Path) -> str:
        # a worker exits on whichever file it takes (which files go to workers depends on timing:
        # with "only f3", the parent sometimes took f3); never this process (an exit here would
        # end the test run): it waits in its file until a worker has taken one
        if os.getpid() != PARENT:
            taken.write_text(path.name)
            os._exit(7)
        deadline = time.monotonic() + 60
        while not taken.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        return path.name

    with pytest.raises(WorkerError, match=r"ended without an answer \(it exited with status 7\)"):
        list(parallel.map_files(fn, files, workers=2))


_KILL_A_WORKER = """
import os, signal, time
from judgecal.importers import alpaca_eval
parent = os.getpid()
parse = alpaca_eval.parse_file
def parse_file(path, *args):
    # a worker dies on whichever file it takes (which files go to workers depends on timing:
    # the parent, slowed down, leaves them several)
    if os.getpid() != parent:
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(0.2)
    return parse(path, *args)
alpaca_eval.parse_file = parse_file
"""


@pytest.mark.timeout(120)
def test_cli_killed_worker_exit_1_one_line_nothing_written(tmp_path):
    files = _annotations(tmp_path, n=6)
    db = tmp_path / "x.db"
    r = _run(_KILL_A_WORKER, ["--database-url", f"sqlite:///{db}", "import", "alpaca-eval", *map(str, files),
                              "--workers", "2"])
    assert r.returncode == 1, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr
    assert "the process parsing this file ended without an answer (it was killed by signal 9 (SIGKILL)" in lines[0]
    assert _verdicts(db) == 0


# --- D2: SIGTERM, parent death ----------------------------------------------------------------


_SLOW = """
import os, sys, time
from judgecal.importers import parallel
parent = os.getpid()
def fn(path):
    time.sleep(0.05 if os.getpid() == parent else 30)
    return path
sys.stdout.write("start\\n"); sys.stdout.flush()
for _ in parallel.map_files(fn, [f"f{i}" for i in range(8)], workers=3):
    pass
"""


def _start_slow(setup: str = "") -> tuple[subprocess.Popen, set[int]]:
    proc = subprocess.Popen([sys.executable, "-c", setup + _SLOW], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    assert proc.stdout.readline() == b"start\n"
    deadline = time.monotonic() + 20
    kids: set[int] = set()
    while len(kids) < 3 and time.monotonic() < deadline:
        kids = children(proc.pid)
        time.sleep(0.02)
    assert len(kids) == 3, "the workers did not start"
    time.sleep(0.2)  # the workers are in fn now
    return proc, kids


def _wait_gone(kids: set[int], ok_states: str = "") -> dict[int, str | None]:
    left: dict[int, str | None] = {}
    for _ in range(100):
        left = {k: s for k in kids if (s := _state(k)) is not None and s not in ok_states}
        if not left:
            break
        time.sleep(0.05)
    return left


@pytest.mark.timeout(60)
def test_sigterm_to_the_importer_alone_ends_and_reaps_its_workers():
    proc, kids = _start_slow()
    os.kill(proc.pid, signal.SIGTERM)  # the parent alone, not its group
    proc.wait(timeout=20)
    assert proc.returncode == -signal.SIGTERM
    assert not _wait_gone(kids), "a worker outlived (or was not reaped by) the importer"


@pytest.mark.timeout(60)
def test_sigterm_to_the_whole_group_leaves_nothing():
    proc, kids = _start_slow()
    os.killpg(proc.pid, signal.SIGTERM)
    proc.wait(timeout=20)
    assert proc.returncode == -signal.SIGTERM
    assert not _wait_gone(kids), "a worker was left (running or a zombie)"


@pytest.mark.timeout(60)
def test_workers_die_with_a_killed_importer():
    """SIGKILL to the importer: its workers, busy parsing, die too (PR_SET_PDEATHSIG)."""
    proc, kids = _start_slow()
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=20)
    # nobody reaps them here but PID 1 (which may not): gone or a zombie, never running
    left = _wait_gone(kids, ok_states="Z")
    for k in left:
        os.kill(k, signal.SIGKILL)
    assert not left, "a worker kept running after its parent was killed"


_BLOCKED = """
import os, sys, time
from judgecal.importers import parallel
parallel._load_libc = lambda: None  # no PR_SET_PDEATHSIG: the pipes alone must end the workers
parent = os.getpid()
def fn(path):
    if os.getpid() == parent:
        time.sleep(30)  # this process parses the first file and reads nothing meanwhile
    return "x" * 300_000  # the workers fill their pipes and block writing
sys.stdout.write("start\\n"); sys.stdout.flush()
for _ in parallel.map_files(fn, [f"f{i}" for i in range(60)], workers=3):
    pass
"""


@pytest.mark.timeout(60)
def test_workers_blocked_writing_end_when_the_importer_dies():
    """Each worker used to inherit the read ends of the pipes forked before it, so a write to
    a dead importer never failed: the workers blocked forever, reparented to PID 1."""
    proc = subprocess.Popen([sys.executable, "-c", _BLOCKED], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    assert proc.stdout.readline() == b"start\n"
    deadline = time.monotonic() + 20
    kids: set[int] = set()
    while len(kids) < 3 and time.monotonic() < deadline:
        kids = children(proc.pid)
        time.sleep(0.02)
    assert len(kids) == 3
    time.sleep(1.0)  # they are blocked writing by now
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=20)
    left = _wait_gone(kids, ok_states="Z")
    for k in left:
        os.kill(k, signal.SIGKILL)
    assert not left, "a worker kept running after its parent was killed"


# --- D3: Ctrl-C after the commit --------------------------------------------------------------


_AT = {
    # the commit has returned and its own hold is over: the session is being closed
    "after_commit": """
from sqlalchemy.orm import Session
close = Session.close
def patched(self):
    os.kill(os.getpid(), signal.SIGINT); time.sleep(0.05)
    close(self)
Session.close = patched
""",
    # the import has returned (the hold is over) and is being reported
    "after_return": """
from judgecal.views import importing
impl = importing.import_batches
def patched(*a, **kw):
    out = impl(*a, **kw)
    os.kill(os.getpid(), signal.SIGINT); time.sleep(0.05)
    return out
importing.import_batches = patched
""",
    # the summary is printed
    "after_summary": """
from judgecal._cli import imports
impl = imports._print_import
def patched(*a, **kw):
    impl(*a, **kw)
    os.kill(os.getpid(), signal.SIGINT); time.sleep(0.05)
imports._print_import = patched
""",
}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("workers", ["0", "2"])
@pytest.mark.parametrize("at", sorted(_AT))
def test_ctrl_c_after_the_commit_reports_the_import_done(tmp_path, at, workers):
    files = _annotations(tmp_path)
    db = tmp_path / "x.db"
    r = _run("import os, signal, time\n" + _AT[at],
             ["--database-url", f"sqlite:///{db}", "import", "alpaca-eval", *map(str, files), "--workers", workers])
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert "aborted" not in r.stderr and "interrupted" not in r.stderr and "Traceback" not in r.stderr
    assert "imported alpaca_eval:" in r.stdout and "pairwise_judgment +160" in r.stdout
    assert "Ctrl-C came" in r.stderr and "import" in r.stderr
    assert _verdicts(db) == 160


@pytest.mark.timeout(60)
def test_ctrl_c_at_the_interpreters_shutdown_does_not_end_by_sigint(tmp_path):
    """After the summary, at exit: the process used to die by SIGINT (130, no message)."""
    files = _annotations(tmp_path)
    db = tmp_path / "x.db"
    setup = "import atexit, os, signal, time\natexit.register(lambda: (os.kill(os.getpid(), signal.SIGINT), time.sleep(0.05)))\n"
    r = _run(setup, ["--database-url", f"sqlite:///{db}", "import", "alpaca-eval", *map(str, files), "--workers", "2"])
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr and "imported alpaca_eval:" in r.stdout
    assert _verdicts(db) == 160


@pytest.mark.timeout(60)
def test_ctrl_c_before_the_commit_is_still_exit_130_nothing_written(tmp_path):
    files = _annotations(tmp_path)
    db = tmp_path / "x.db"
    setup = """
import os, signal, time
from judgecal.db.ingest import Writer
write = Writer.write
def patched(self, batch):
    write(self, batch)
    os.kill(os.getpid(), signal.SIGINT); time.sleep(0.05)
Writer.write = patched
"""
    r = _run(setup, ["--database-url", f"sqlite:///{db}", "import", "alpaca-eval", *map(str, files), "--workers", "2"])
    assert r.returncode == 130, r.stderr
    assert r.stderr.strip() == "aborted" and "imported" not in r.stdout
    assert _verdicts(db) == 0


# --- D18: Ctrl-C while the command line starts ------------------------------------------------


@pytest.mark.timeout(60)
@pytest.mark.parametrize("module", ["click", "rich.console", "sqlalchemy"])
def test_ctrl_c_while_modules_load_is_one_line(tmp_path, module):
    setup = f"""
import os, signal, sys, time
class Hook:
    def find_spec(self, name, path=None, target=None):
        if name == {module!r}:
            sys.meta_path.remove(self)
            os.kill(os.getpid(), signal.SIGINT); time.sleep(0.05)
        return None
sys.meta_path.insert(0, Hook())
"""
    r = _run(setup, ["--database-url", f"sqlite:///{tmp_path / 'x.db'}", "stats"])
    assert r.returncode == 130, r.stderr
    assert r.stderr.strip().splitlines()[-1] == "aborted" and "Traceback" not in r.stderr


def test_console_script_is_the_entry_module():
    exe = Path(sys.executable).with_name("judgecal")
    if exe.exists():
        assert "judgecal.entry" in exe.read_text(errors="replace")
