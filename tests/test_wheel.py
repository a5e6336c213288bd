"""The built wheel ships migrations/ and prompts/: an installed judgecal migrates a database."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_wheel_installs_and_migrates(tmp_path):
    dist = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(dist), str(REPO)],
                   check=True, capture_output=True)
    wheel = next(dist.glob("judgecal-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    assert "judgecal/_migrations/env.py" in names
    assert any(n.startswith("judgecal/_migrations/versions/") and n.endswith(".py") for n in names)
    assert "judgecal/_prompts/pointwise_v1.md" in names
    # AlpacaEval reference data for the default LC (issue 20), with its licence
    assert {"judgecal/data/alpaca_eval/instructions.csv", "judgecal/data/alpaca_eval/LICENSE",
            "judgecal/data/alpaca_eval/length_controlled_v1_baseline_gpt4_1106_preview.csv"} <= set(names)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    vpy = venv / "bin" / "python"
    subprocess.run([str(vpy), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)], check=True)
    # the dependencies come from the test environment's site-packages (appended after the
    # fresh venv's own, so the installed wheel, not the checkout, provides judgecal)
    site = subprocess.run([str(vpy), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    Path(site, "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    db = tmp_path / "w.db"
    env = {"PATH": "/usr/bin:/bin", "JUDGECAL_HOME": str(tmp_path / "home")}
    r = subprocess.run([str(venv / "bin" / "judgecal"), "--database-url", f"sqlite:///{db}", "db", "upgrade"],
                       capture_output=True, text=True, env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "at revision 0001" in r.stdout or "at revision" in r.stdout
    where = subprocess.run([str(vpy), "-c", "import judgecal.config as c; print(c.__file__); print(c.migrations_dir()); print(c.prompts_dir())"],
                           capture_output=True, text=True, env=env, cwd=tmp_path, check=True).stdout.split()
    assert where[0].startswith(str(venv)) and where[1].endswith("_migrations") and where[2].endswith("_prompts")
    r = subprocess.run([str(vpy), "-m", "judgecal", "--database-url", f"sqlite:///{db}", "db", "current"],
                       capture_output=True, text=True, env=env, cwd=tmp_path)
    assert r.returncode == 0 and "up to date" in r.stdout
