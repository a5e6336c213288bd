"""docs/quickstart.md: every `$ judgecal ...` line of its console blocks runs verbatim."""

from __future__ import annotations

import json
import math
import os
import random
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def documented_commands() -> list[str]:
    text = (REPO / "docs" / "quickstart.md").read_text()
    blocks = re.findall(r"```console\n(.*?)```", text, re.S)
    return [line[2:].strip() for block in blocks for line in block.splitlines() if line.startswith("$ ")]


def write_user_files(folder: Path, seed: int = 0) -> None:
    """60 prompts; a concise and a padded answer each; a judge that rewards length; experts
    that prefer the better answer whatever its length."""
    rng = random.Random(seed)
    filler = "Certainly! Great question. As mentioned, it is worth noting that, in general, ".split()
    ratings, labels, pairs = [], [], []
    for i in range(60):
        prompt = f"Support question number {i}: how do I fix problem {i}?"
        core = " ".join(rng.choice("open settings security reset restart update cache account".split()) for _ in range(rng.randint(5, 15)))
        short = f"{core}."
        long_ = " ".join(rng.choice(filler) for _ in range(rng.randint(40, 160))) + " " + core + "."
        q_short, q_long = rng.gauss(6, 1.5), rng.gauss(6, 1.5)
        for model, text, q in (("support-bot-v2", short, q_short), ("support-bot-v1", long_, q_long)):
            s = q + 0.9 * math.log(len(text.split()) / 30) + rng.gauss(0, 0.5)
            ratings.append({"prompt": prompt, "model": model, "response": text, "judge": "my-judge",
                            "score": round(min(10, max(1, s)), 1), "scale_min": 1, "scale_max": 10})
        labels.append({"prompt": prompt, "model_a": "support-bot-v2", "response_a": short, "model_b": "support-bot-v1",
                       "response_b": long_, "preference": "a" if q_short >= q_long else "b"})
        pairs.append({"prompt": prompt, "concise_model": "support-bot-v2", "concise": short,
                      "verbose_model": "support-bot-v1", "verbose": long_})
    for name, rows in (("ratings", ratings), ("labels", labels), ("pairs", pairs)):
        (folder / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest.mark.slow
def test_quickstart_commands_run_verbatim(tmp_path):
    commands = documented_commands()
    assert len(commands) >= 8 and all(c.startswith("judgecal ") for c in commands)
    write_user_files(tmp_path)
    env = dict(os.environ, JUDGECAL_HOME=str(tmp_path / "home"), PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    env.pop("JUDGECAL_DATABASE_URL", None)
    outputs = {}
    for cmd in commands:
        r = subprocess.run(shlex.split(cmd), cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
        allowed = (0, 1) if cmd.startswith("judgecal check") else (0,)
        assert r.returncode in allowed, f"{cmd}: exit {r.returncode}\n{r.stderr}"
        assert "Traceback" not in r.stderr
        outputs[cmd.split()[1]] = r.stdout
    assert (tmp_path / "report" / "report.html").stat().st_size > 10_000
    assert "| support-bot-v2 |" in outputs["leaderboard"]
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    entry = report["entries"][0]
    assert entry["task_family"] == "support" and entry["n"] == 60
    # the planted judge rewards length: the raw verbosity win-rate is far above one half,
    # and the fitted penalty brings it down
    raw = entry["methods"]["raw"]["verbosity_win_rate"]
    cal = entry["methods"]["polylog"]["verbosity_win_rate"]
    assert raw > 0.6 and cal < raw
