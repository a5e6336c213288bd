"""Shared helpers of the ``test_rate_*`` files: the real data folder, a PostgreSQL database
per test session, and the ``judgecal rate`` command line."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
from judgecal.config import shared_data_dir  # noqa: E402
DATA = shared_data_dir()
NATURAL = DATA / "llmbar" / "Natural"
PG_ADMIN = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"


def rate_command(db_url: str, **opts) -> list[str]:
    """argv of ``python -m judgecal --database-url URL rate ... --format json`` for run_rate options."""
    argv = [sys.executable, "-m", "judgecal", "--database-url", db_url, "rate"]
    for key, value in opts.items():
        flag = "--" + key.replace("_", "-")
        if key == "task_families":
            for fam in value:
                argv += ["--task-family", fam]
        elif value is True:
            argv.append(flag)
        elif value is not False and value is not None:
            argv += [flag, str(value)]
    return argv + ["--format", "json"]


def child_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONPATH=str(REPO))
    env.update(extra)
    return env


def run_rate_process(db_url: str, timeout: float = 300, env: dict | None = None, **opts) -> subprocess.CompletedProcess:
    return subprocess.run(rate_command(db_url, **opts), capture_output=True, text=True, timeout=timeout,
                          env=env or child_env(), cwd=REPO)


class PgDatabase:
    """A fresh PostgreSQL database ``judgecal_test_<random>``; dropped by :meth:`drop`."""

    def __init__(self) -> None:
        from sqlalchemy import create_engine, text

        self.name = f"judgecal_test_{uuid.uuid4().hex[:10]}"
        self._admin = create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT")
        with self._admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{self.name}"'))
        self.url = f"postgresql+psycopg://postgres@127.0.0.1:5432/{self.name}"

    def drop(self) -> None:
        from sqlalchemy import text

        with self._admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)'))
        self._admin.dispose()


def pg_available() -> bool:
    try:
        from sqlalchemy import create_engine, text

        eng = create_engine(PG_ADMIN, connect_args={"connect_timeout": 3})
        with eng.connect() as conn:
            conn.execute(text("SELECT 1"))
        eng.dispose()
        return True
    except Exception:  # noqa: BLE001 - any failure means "not available"
        return False
