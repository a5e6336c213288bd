"""Shared fixtures: real data folder, fresh SQLite and PostgreSQL databases, the CLI runner.

PostgreSQL tests use the real server on 127.0.0.1:5432 (trust auth); each test session gets
its own fresh database, dropped at the end. When ``CI`` is set they must run: an unreachable
server fails them instead of skipping."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

REPO = Path(__file__).resolve().parents[1]
from judgecal.config import shared_data_dir  # noqa: E402
DATA = shared_data_dir()
PG_ADMIN_URL = os.environ.get("JUDGECAL_TEST_PG_ADMIN", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres")


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """../shared/data; skipped outside CI when absent, a failure in CI."""
    if not DATA.is_dir():
        if os.environ.get("CI"):
            pytest.fail(f"{DATA} is missing (the real data sets must exist in CI)")
        pytest.skip(f"{DATA} is absent")
    return DATA


@pytest.fixture(scope="session")
def repo(data_dir) -> Path:
    """The LLMBar repository layout in the shared data (required: a missing folder fails)."""
    root = data_dir / "llmbar_repo"
    if not root.is_dir():
        pytest.fail(f"{root} is missing (the shared data must hold the LLMBar repository layout)")
    return root


@pytest.fixture()
def home(tmp_path, monkeypatch) -> Path:
    """A fresh JUDGECAL_HOME (the default SQLite database lives there)."""
    h = tmp_path / "home"
    monkeypatch.setenv("JUDGECAL_HOME", str(h))
    monkeypatch.delenv("JUDGECAL_DATABASE_URL", raising=False)
    return h


@pytest.fixture()
def sqlite_url(tmp_path) -> str:
    return f"sqlite:///{tmp_path / 'test.db'}"


def _pg_admin_engine():
    from sqlalchemy import create_engine

    return create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")


@pytest.fixture(scope="session")
def pg_server():
    """The admin engine of the real PostgreSQL server (skipped outside CI if it is down)."""
    from sqlalchemy import text

    engine = _pg_admin_engine()
    try:
        with engine.connect() as conn:
            conn.execute(text("select 1"))
    except Exception as exc:  # noqa: BLE001
        if os.environ.get("CI"):
            pytest.fail(f"PostgreSQL on 127.0.0.1:5432 is not reachable in CI: {exc}")
        pytest.skip(f"PostgreSQL on 127.0.0.1:5432 is not reachable: {exc}")
    yield engine
    engine.dispose()


def _fresh_pg(pg_server) -> tuple[str, str]:
    from sqlalchemy import text

    name = f"judgecal_test_{uuid.uuid4().hex[:12]}"
    with pg_server.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    return name, PG_ADMIN_URL.rsplit("/", 1)[0] + f"/{name}"


def _drop_pg(pg_server, name: str) -> None:
    from sqlalchemy import text

    with pg_server.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@pytest.fixture()
def pg_url(pg_server):
    """URL of a brand-new PostgreSQL database, dropped after the test."""
    name, url = _fresh_pg(pg_server)
    yield url
    _drop_pg(pg_server, name)


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def db_url(request, tmp_path):
    """A fresh database URL of each dialect in turn."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'test.db'}"
        return
    server = request.getfixturevalue("pg_server")
    name, url = _fresh_pg(server)
    yield url
    _drop_pg(server, name)


class CliResult:
    def __init__(self, exit_code: int, stdout: str, stderr: str):
        self.exit_code, self.stdout, self.stderr = exit_code, stdout, stderr

    @property
    def output(self) -> str:
        return self.stdout + self.stderr

    def __repr__(self) -> str:
        return f"CliResult(exit_code={self.exit_code}, stdout={self.stdout[-2000:]!r}, stderr={self.stderr[-2000:]!r})"


@pytest.fixture()
def run_cli():
    """Run ``judgecal ARGS`` in-process through the real entry point (error handling included)."""
    from judgecal.cli import main

    def run(*args: str, env: dict | None = None) -> CliResult:
        runner = CliRunner()
        with runner.isolation(env=env) as streams:
            code = 0
            try:
                main([str(a) for a in args])
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            out_stream, err_stream = streams[0], streams[1]
        return CliResult(code, out_stream.getvalue().decode(), err_stream.getvalue().decode())

    return run
