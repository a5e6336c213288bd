"""`judgecal mc` as a drop-in for an lm-eval run (issue 24): stable task-config hashes across
processes, several tasks and groups in one call, lm-eval's results and samples files, the
``judgecal`` model name from lm-eval's own command line.

Data: the local copies of real data built by tests/test_mc_lmeval_layout.py. References are
lm-eval 0.4.13's own runs (``HFLM`` on the same SmolLM2 folder, or lm-eval's own files), never
hard-coded figures. Kept small (a few items per task, ``limit``) for the test suite's time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from test_mc_lmeval_layout import DATA, build_hub_mirror  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.model]

lm_eval = pytest.importorskip("lm_eval")


@pytest.fixture(scope="module")
def folder():
    from judgecal import config
    from judgecal.localmodel import is_complete

    f = config.default_model_dir()
    if not is_complete(f):
        pytest.skip(f"SmolLM2 folder missing at {f}: run `judgecal model pull`")
    if not DATA.exists():
        pytest.skip(f"real data folder absent: {DATA}")
    return f


@pytest.fixture(scope="module")
def hub(folder, tmp_path_factory) -> Path:
    return build_hub_mirror(tmp_path_factory.mktemp("hub"))


def _env() -> dict:
    return {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(Path(__file__).resolve().parents[1])}


# ---------------------------------------------------------------- (1) stable hashes
HASH_SCRIPT = """
import json, sys
from judgecal.cli import main
from judgecal.loglik.lmeval_tasks import load_tasks
hub, url, folder = sys.argv[1:4]
hashes = {t: load_tasks(t, data_dir=hub).config_sha256 for t in ("winogrande", "hellaswag", "copa")}
print(json.dumps(hashes))
try:
    main(["--database-url", url, "mc", "score", "--model", folder, "--task", "copa", "--data-dir", hub,
          "--limit", "2", "--format", "json"])
except SystemExit as exc:
    assert not exc.code, exc.code
"""


def test_config_hashes_stable_across_processes_and_identical_runs_compare_equal(hub, folder, run_cli, tmp_path):
    """Tasks whose configs hold Python functions (winogrande, hellaswag, copa; some nested in
    fewshot_config) hash the same in another process; two identical runs, one per process,
    compare with no difference at all."""
    from judgecal.loglik.lmeval_tasks import load_tasks

    url = f"sqlite:///{tmp_path / 'mc.db'}"
    other = subprocess.run([sys.executable, "-c", HASH_SCRIPT, str(hub), url, str(folder)], capture_output=True,
                           text=True, env=_env(), timeout=600)
    assert other.returncode == 0, other.stderr[-2000:]
    theirs = json.loads(other.stdout.splitlines()[0])
    mine = {t: load_tasks(t, data_dir=hub).config_sha256 for t in theirs}
    assert mine == theirs
    a = json.loads(other.stdout.split("\n", 1)[1])
    b = run_cli("--database-url", url, "mc", "score", "--model", str(folder), "--task", "copa", "--data-dir", str(hub),
                "--limit", "2", "--format", "json")
    assert b.exit_code == 0, b
    b = json.loads(b.stdout)
    assert a["settings"]["task_config_sha256"] == b["settings"]["task_config_sha256"] == mine["copa"]
    cmp = run_cli("--database-url", url, "mc", "compare", str(a["run_id"]), str(b["run_id"]), "--format", "json")
    assert cmp.exit_code == 0 and cmp.stderr == "", cmp
    cmp = json.loads(cmp.stdout)
    assert "warning" not in cmp and cmp["same_items"] and cmp["same_dataset"]
    assert all(d["delta"] == 0 for d in cmp["deltas"].values())


def test_stable_value_has_no_memory_addresses():
    import functools

    from judgecal.loglik.lmeval_tasks import stable_value

    def f(doc):
        return doc["x"]

    class Metric:
        def __call__(self, x):
            return x

    v = stable_value({"a": [f, functools.partial(f, 1)], "b": {"c": Metric(), "d": object()}})
    text = json.dumps(v)
    assert "0x" not in text and "return doc[\\\"x\\\"]" in text
    assert v["a"][0]["function"].endswith("test_stable_value_has_no_memory_addresses.<locals>.f")
