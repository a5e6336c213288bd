"""Integration: a real `transformers serve` with the pulled SmolLM2-135M-Instruct folder on CPU
rates 10 real LLMBar Natural responses into SQLite and into PostgreSQL through `judgecal rate`.

The 135M model often breaks the `[[rating]]` format: every call must be stored as ok or
unparsed with its raw output, and ok scores must lie within the prompt's scale."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

sys.path.insert(0, str(Path(__file__).resolve().parent))
from rate_helpers import NATURAL, REPO, PgDatabase, child_env, pg_available, rate_command  # noqa: E402

from judgecal import config  # noqa: E402

MODEL_DIR = config.default_model_dir()
TRANSFORMERS = Path(sys.executable).parent / "transformers"
FAMILY = "llmbar/Natural"

pytestmark = [
    pytest.mark.model,
    pytest.mark.slow,
    pytest.mark.skipif(not NATURAL.is_dir(), reason=f"real data folder {NATURAL} is absent"),
    pytest.mark.skipif(not (MODEL_DIR / "config.json").is_file(),
                       reason=f"model folder {MODEL_DIR} is absent: run `judgecal model pull`"),
    pytest.mark.skipif(not TRANSFORMERS.is_file(), reason="`transformers` CLI not installed (pip install 'judgecal[local]')"),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    port = _free_port()
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    log_path = tmp_path_factory.mktemp("serve") / "serve.log"
    log = open(log_path, "w")  # a file, not a pipe: an unread pipe fills up and blocks the server
    proc = subprocess.Popen([str(TRANSFORMERS), "serve", str(MODEL_DIR), "--device", "cpu", "--dtype", "float32",
                             "--host", "127.0.0.1", "--port", str(port)],
                            env=env, stdout=log, stderr=subprocess.STDOUT, text=True)
    base = f"http://127.0.0.1:{port}"
    deadline = time.time() + 180
    while time.time() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"transformers serve exited: {log_path.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(base + "/health", timeout=2):
                break
        except OSError:
            time.sleep(1)
    else:
        proc.kill()
        pytest.fail(f"transformers serve did not answer /health within 180 s: {log_path.read_text()[-2000:]}")
    try:
        yield base + "/v1"
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def _check(url: str, base_url: str) -> None:
    from judgecal import importing

    importing.import_llmbar(NATURAL, FAMILY, url)
    # the model name sent is the folder path (what `transformers serve <folder>` serves)
    res = subprocess.run(rate_command(url, judge=str(MODEL_DIR), base_url=base_url, task_families=[FAMILY], limit=10,
                                      concurrency=2, max_tokens=96, timeout=120),
                         env=child_env(), capture_output=True, text=True, timeout=900, cwd=REPO)
    assert res.returncode == 0, res.stderr[-3000:]
    summary = json.loads(res.stdout[res.stdout.index("{"):])
    eng = create_engine(url)
    with eng.connect() as conn:
        rows = conn.execute(text("SELECT status, score, raw_output, error FROM rating WHERE judge_id = :j"),
                            {"j": summary["judge_id"]}).all()
    eng.dispose()
    assert len(rows) == 10
    for r in rows:
        assert r.status in ("ok", "unparsed"), r  # the server answered every call
        assert r.raw_output is not None and r.raw_output.strip()
        if r.status == "ok":
            assert 1 <= r.score <= 10
        else:
            assert r.score is None and r.error


def test_local_server_sqlite(server, tmp_path):
    _check(f"sqlite:///{tmp_path / 'local.db'}", server)


@pytest.mark.postgres
@pytest.mark.skipif(not pg_available(), reason="PostgreSQL is not reachable on 127.0.0.1:5432")
def test_local_server_postgres(server):
    db = PgDatabase()
    try:
        _check(db.url, server)
    finally:
        db.drop()
