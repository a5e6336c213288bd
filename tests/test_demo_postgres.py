"""`make demo` (the whole main job on real input) with JUDGECAL_DATABASE_URL pointing at a fresh
PostgreSQL database, on a smaller real subset so that it fits in the test run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from judgecal import config

REPO = Path(__file__).resolve().parents[1]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.model,
    pytest.mark.postgres,
    pytest.mark.skipif(not (config.default_model_dir() / "config.json").is_file(),
                       reason="model folder absent: run `judgecal model pull`"),
]


@pytest.mark.long  # the whole make demo on PostgreSQL: 5 min (make long)
def test_make_demo_on_postgres(pg_url, data_dir, tmp_path):
    venv = Path(sys.executable).parent.parent
    env = dict(os.environ, JUDGECAL_DATABASE_URL=pg_url)
    cmd = ["make", "-C", str(REPO), "demo", f"VENV={venv}", f"DEMO_DIR={tmp_path / 'demo'}", f"DATA={data_dir}",
           "DEMO_ITEMS_ALPACA=4", "DEMO_ITEMS_LLMBAR=14", "DEMO_MC_LIMIT=10"]
    # the venv is already built: make must not rebuild it (its stamp is older than pyproject.toml
    # only in a hand-made venv)
    (venv / ".installed").touch()
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1500)
    assert r.returncode == 0, (r.stdout[-3000:], r.stderr[-3000:])
    assert "Traceback" not in r.stderr
    assert (tmp_path / "demo" / "report" / "report.html").stat().st_size > 10_000
    eng = create_engine(pg_url)
    with eng.connect() as c:
        families = c.execute(text("select count(*) from task_family")).scalar()
        local = c.execute(text("select count(*) from rating r join judge j on j.id = r.judge_id "
                               "where j.name = 'smollm2-135m-instruct' and r.status in ('ok', 'unparsed')")).scalar()
        fits = c.execute(text("select count(distinct judge_id) from calibration")).scalar()
        runs = c.execute(text("select count(*) from mc_run")).scalar()
    eng.dispose()
    assert families == 5
    assert local == 4 * 2 + 14 * 2  # every call of the local judge is stored
    assert fits >= 2 and runs == 1
    assert "leaderboard: judge smollm2-135m-instruct" in r.stdout
    assert "judgecal check" in r.stdout
