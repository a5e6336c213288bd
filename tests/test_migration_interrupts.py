"""Issue 35 item 4: an interrupt never lies about a migration.

`judgecal db downgrade 0001 --yes` (and `db upgrade`) run in a child process through the real
console entry point (judgecal.entry.main); a few lines of set-up before it (the mechanism of
tests/test_import_parallel_breakit.py) send SIGINT or SIGTERM to that child at one exact step:
after the losses are counted, after each migration step, just before and just after the
database commit, after the view returns, after the outcome is printed, after the signal hold
ends, at the interpreter's exit. Whatever the step, what the command printed (exit status,
revision, ``lost:`` lines) must be what the database holds, read afterwards: before the
commit, rolled back ("interrupted before the commit", exit 130, the revision it is still
at); from the commit on, done (the outcome of an uninterrupted run, exit 0, a warning naming
the signal). Used to print ``aborted`` (exit 130) after a committed downgrade, and a traceback
after a committed upgrade. On SQLite and PostgreSQL. Signals go only to the child."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from judgecal.db import migrate

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGTERM"), reason="needs POSIX signals")

INITIAL = "0001"
HEAD = migrate.head_revision()
#: migration steps between the initial revision and head (each a revision Alembic runs)
N_STEPS = len(list(__import__("alembic.script", fromlist=["ScriptDirectory"]).ScriptDirectory
                   .from_config(migrate.alembic_config()).iterate_revisions(HEAD, INITIAL))) - 1

_KILL = """
import os, signal, time
SIG = signal.{sig}
def kill():
    os.kill(os.getpid(), SIG)
    time.sleep(0.05)
"""

#: where the signal lands: the set-up (Python) run in the child before judgecal's entry point
_AT = {
    # downgrade only: the losses are counted, nothing has run yet
    "counted": """
from judgecal.db import migrate
impl = migrate.downgrade_losses
def patched(*a, **k):
    out = impl(*a, **k)
    kill()
    return out
migrate.downgrade_losses = patched
""",
    # the N-th migration step has run (its version stamped), inside the transaction
    "step": """
from alembic.runtime.migration import HeadMaintainer
impl = HeadMaintainer.update_to_step
calls = [0]
def patched(self, step):
    impl(self, step)
    calls[0] += 1
    if calls[0] == {n}:
        kill()
HeadMaintainer.update_to_step = patched
""",
    # every step has run; the signal comes just before / just after the database's COMMIT
    "before_commit": """
from alembic.runtime.migration import HeadMaintainer
from sqlalchemy.engine.default import DefaultDialect
armed = []
step = HeadMaintainer.update_to_step
def stepped(self, s):
    step(self, s)
    armed.append(1)
HeadMaintainer.update_to_step = stepped
commit = DefaultDialect.do_commit
def patched(self, conn):
    if armed:
        kill()
    commit(self, conn)
DefaultDialect.do_commit = patched
""",
    "after_commit": """
from alembic.runtime.migration import HeadMaintainer
from sqlalchemy.engine.default import DefaultDialect
armed = []
step = HeadMaintainer.update_to_step
def stepped(self, s):
    step(self, s)
    armed.append(1)
HeadMaintainer.update_to_step = stepped
commit = DefaultDialect.do_commit
def patched(self, conn):
    commit(self, conn)
    if armed:
        del armed[:]
        kill()
DefaultDialect.do_commit = patched
""",
    # the view has returned the outcome (not printed yet)
    "after_return": """
from judgecal.views import dbadmin
for name in ("upgrade", "downgrade"):
    def make(impl):
        def patched(*a, **k):
            out = impl(*a, **k)
            kill()
            return out
        return patched
    setattr(dbadmin, name, make(getattr(dbadmin, name)))
""",
    # the outcome is printed; the hold is still on
    "after_output": """
from judgecal.views import dbadmin
impl = dbadmin.held_note
def patched(hold):
    kill()
    return impl(hold)
dbadmin.held_note = patched
""",
    # the hold is over (the command returns)
    "after_hold": """
from judgecal._cli import db
impl = db._migrate
def patched(run):
    impl(run)
    kill()
db._migrate = patched
""",
    # the interpreter exits
    "at_exit": """
import atexit
atexit.register(kill)
""",
}

BEFORE_COMMIT = {"counted", "step"}  # rolled back: nothing changed
HELD = {"before_commit", "after_commit", "after_return", "after_output"}  # the hold names the signal


def _setup(at: str, sig: str) -> str:
    name, _, n = at.partition(":")
    return _KILL.format(sig=sig) + _AT[name].replace("{n}", n or "0")


def _judgecal(setup: str, url: str, args: list[str], timeout: float = 120) -> subprocess.CompletedProcess:
    code = (textwrap.dedent(setup) + "\nimport sys\nsys.argv = ['judgecal'] + %r\nfrom judgecal.entry import main\nmain()\n"
            % (["--database-url", url, *args],))
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    env.pop("JUDGECAL_DATABASE_URL", None)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, env=env)


def _revision(url: str) -> str | None:
    e = create_engine(url)
    try:
        with e.connect() as c:
            return migrate.current_revision(c)
    finally:
        e.dispose()


def _ratings(folder: Path) -> Path:
    recs = [{"task_family": "t", "prompt": f"q{i}", "model": "m", "response": f"answer {i} " + "w " * i, "judge": "J",
             "scale_min": 1, "scale_max": 10, "score": 1 + i % 10, "raw_output": f"[[{1 + i % 10}]]"} for i in range(12)]
    path = folder / "ratings.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return path


class _Dialect:
    """Clones of one database state per run: SQLite files are copied, PostgreSQL databases are
    made from a template database (CREATE DATABASE ... TEMPLATE)."""

    def __init__(self, kind: str, folder: Path, admin=None):
        self.kind, self.folder, self.admin = kind, folder, admin
        self.made: list[str] = []

    def new(self) -> str:
        name = f"judgecal_test_{uuid.uuid4().hex[:12]}"
        if self.kind == "sqlite":
            return f"sqlite:///{self.folder / (name + '.db')}"
        with self.admin.connect() as c:
            c.execute(text(f'CREATE DATABASE "{name}"'))
        self.made.append(name)
        return self._url(name)

    def _url(self, name: str) -> str:
        return str(self.admin.url.set(database=name).render_as_string(hide_password=False))

    def clone(self, url: str) -> str:
        name = f"judgecal_test_{uuid.uuid4().hex[:12]}"
        if self.kind == "sqlite":
            src = Path(url.split("///", 1)[1])
            dst = self.folder / (name + ".db")
            shutil.copyfile(src, dst)
            return f"sqlite:///{dst}"
        source = url.rsplit("/", 1)[1]
        with self.admin.connect() as c:
            c.execute(text(f'CREATE DATABASE "{name}" TEMPLATE "{source}"'))
        self.made.append(name)
        return self._url(name)

    def drop_all(self) -> None:
        if self.admin is None:
            return
        with self.admin.connect() as c:
            for name in self.made:
                c.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def states(request, tmp_path_factory):
    """{direction: (url of the database before it, the revision reached, the outcome an
    uninterrupted run prints)} on one dialect: downgrade 0001 --yes from head with rows (its
    ``lost:`` lines), upgrade head from 0001 (the rows the downgrade left)."""
    from judgecal.views import importing

    folder = tmp_path_factory.mktemp("migint")
    admin = request.getfixturevalue("pg_server") if request.param == "postgresql" else None
    d = _Dialect(request.param, folder, admin)
    try:
        at_head = d.new()
        importing.import_generic(_ratings(folder), "ratings", "jsonl", None, at_head)
        assert _revision(at_head) == HEAD
        out = {}
        ref_url = d.clone(at_head)
        ref = _judgecal("", ref_url, ["db", "downgrade", INITIAL, "--yes"])
        assert ref.returncode == 0 and "lost: " in ref.stdout, ref
        out["downgrade"] = (at_head, INITIAL, ref.stdout.replace(_masked(ref_url), "URL"))
        at_initial = d.clone(at_head)
        assert _judgecal("", at_initial, ["db", "downgrade", INITIAL, "--yes"]).returncode == 0
        ref_url = d.clone(at_initial)
        ref = _judgecal("", ref_url, ["db", "upgrade"])
        assert ref.returncode == 0, ref
        out["upgrade"] = (at_initial, HEAD, ref.stdout.replace(_masked(ref_url), "URL"))
        d.states = out
        yield d
    finally:
        d.drop_all()


def _masked(url: str) -> str:
    from judgecal.db.engine import mask_url

    return mask_url(url)


CASES = ([("downgrade", "counted")] + [(direction, f"step:{n}") for direction in ("downgrade", "upgrade")
                                       for n in range(1, N_STEPS + 1)]
         + [(direction, at) for direction in ("downgrade", "upgrade")
            for at in ("before_commit", "after_commit", "after_return", "after_output", "after_hold", "at_exit")])


@pytest.mark.timeout(600)
@pytest.mark.parametrize("direction,at", CASES)
def test_ctrl_c_at_every_step_reports_what_the_database_holds(states, direction, at):
    start, target, reference = states.states[direction]
    url = states.clone(start)
    before = _revision(url)
    args = ["db", "downgrade", INITIAL, "--yes"] if direction == "downgrade" else ["db", "upgrade"]
    r = _judgecal(_setup(at, "SIGINT"), url, args)
    now = _revision(url)
    assert "Traceback" not in r.stderr and "aborted" not in r.stderr, r
    if at.partition(":")[0] in BEFORE_COMMIT:
        assert r.returncode == 130, r
        assert r.stdout == "" and now == before
        assert r.stderr.strip() == (f"interrupted before the commit: the migration was rolled back, nothing changed; "
                                    f"{_masked(url)}: at revision {now} (head {HEAD})"), r
        return
    # from the commit on: done, reported as an uninterrupted run reports it (the lost: lines included)
    assert r.returncode == 0, r
    assert now == target
    assert r.stdout.replace(_masked(url), "URL") == reference
    assert re.search(rf": at revision {now} \(head {HEAD}\)\n\Z", r.stdout)
    if at.partition(":")[0] in HELD:
        assert "SIGINT came while the migration was being committed" in r.stderr, r
    elif at == "after_hold":
        assert "Ctrl-C came after the migration was committed" in r.stderr, r
    else:  # at exit: the outcome was reported and the console script ignores a late Ctrl-C
        assert r.stderr == "", r


@pytest.mark.timeout(600)
@pytest.mark.parametrize("direction,at", [("downgrade", "step:1"), ("downgrade", "before_commit"),
                                          ("downgrade", "after_commit"), ("upgrade", "after_output"),
                                          ("upgrade", "after_hold")])
def test_sigterm_reports_what_the_database_holds(states, direction, at):
    """SIGTERM before the commit ends the process (the transaction rolls back: nothing changed,
    nothing printed); from the commit until the outcome is printed it is held, so the outcome
    is printed and true; after that it ends the process, the outcome already printed."""
    start, target, reference = states.states[direction]
    url = states.clone(start)
    before = _revision(url)
    args = ["db", "downgrade", INITIAL, "--yes"] if direction == "downgrade" else ["db", "upgrade"]
    r = _judgecal(_setup(at, "SIGTERM"), url, args)
    now = _revision(url)
    assert "Traceback" not in r.stderr, r
    if at.partition(":")[0] in BEFORE_COMMIT:
        assert r.returncode == -signal.SIGTERM and r.stdout == "" and now == before, r
        return
    assert now == target
    assert r.stdout.replace(_masked(url), "URL") == reference
    if at in HELD:
        assert r.returncode == 0 and "SIGTERM came while the migration was being committed" in r.stderr, r
    else:  # the hold is over: SIGTERM ends the process, after the true outcome was printed
        assert r.returncode == -signal.SIGTERM, r
