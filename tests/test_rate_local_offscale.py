"""Integration (issue 33 item 5, "one parser for every path"): where SmolLM2-135M-Instruct's greedy
text is off the scale, ``rate --local`` and ``rate --serve`` (a real ``transformers serve`` that
judgecal starts and stops) store the same row: the same raw text, ``unparsed``, no score, the
same reason. Before the fix the local path stored the verdict its first tokens spelled
(``Rating: 10.5 out of 10`` -> 10; ``Rating: 125`` -> 1).

The responses are real: LLMBar Natural answers (dataset.json indexes below) on which SmolLM2 with
the two-shot prompt ``pointwise_fewshot_v1`` (scale 1-10) writes an off-scale rating, plus the
answers rated in scale as controls (found by decoding all 200 Natural answers greedily: these
two are the only off-scale texts)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

sys.path.insert(0, str(Path(__file__).resolve().parent))
from proc_helpers import children  # noqa: E402
from rate_helpers import REPO, child_env, rate_command  # noqa: E402

from judgecal import config  # noqa: E402

MODEL_DIR = config.default_model_dir()
FAMILY = "llmbar/Natural"
# (dataset.json index, output) -> SmolLM2's greedy text with pointwise_fewshot_v1 (float32, CPU)
OFF_SCALE = {(21, 2): "Rating: 10.5 out of 10", (33, 2): "Rating: 125"}
CONTROLS = {(21, 1): "Rating: 9", (91, 1): "Rating: 1.5"}  # 1.5: in scale, but no verdict of the distribution

pytestmark = [
    pytest.mark.model,
    pytest.mark.slow,
    pytest.mark.skipif(not (MODEL_DIR / "config.json").is_file(),
                       reason=f"model folder {MODEL_DIR} is absent: run `judgecal model pull`"),
]


def _rows(url: str, judge_id: int) -> dict[str, tuple]:
    eng = create_engine(url)
    with eng.connect() as conn:
        rows = conn.execute(text(
            "SELECT r.model, g.status, g.score, g.error, g.raw_output, g.expected_score, g.distribution "
            "FROM rating g JOIN response r ON r.id = g.response_id WHERE g.judge_id = :j"), {"j": judge_id}).all()
    eng.dispose()
    return {r[0]: (r[1], r[2], r[3], r[4], r[5], json.loads(r[6]) if isinstance(r[6], str) else r[6]) for r in rows}


def _serve(url: str) -> tuple[dict, set[int]]:
    """``judgecal rate --serve smollm2`` in a child process; returns its summary and the ids of
    the processes it started (the server), watched while it ran."""
    argv = rate_command(url, serve="smollm2", judge="smollm2", prompt="pointwise_fewshot_v1", task_families=[FAMILY],
                        max_tokens=24, concurrency=1, timeout=120)
    started: set[int] = set()
    with subprocess.Popen(argv, env=child_env(), cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True) as proc:
        deadline = time.monotonic() + 900
        while proc.poll() is None:
            started |= children(proc.pid)
            assert time.monotonic() < deadline, "rate --serve did not finish in 900 s"
            time.sleep(0.2)
        out, err = proc.communicate()
    assert proc.returncode == 0, err[-3000:]
    return json.loads(out[out.index("{"):]), started


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_off_scale_greedy_text_is_stored_alike_local_and_served(tmp_path, data_dir, run_cli):
    from judgecal.views import importing

    url = f"sqlite:///{tmp_path / 'offscale.db'}"
    items = json.loads((data_dir / "llmbar" / "Natural" / "dataset.json").read_text(encoding="utf-8"))
    wanted = {**OFF_SCALE, **CONTROLS}
    rows = [{"task_family": FAMILY, "prompt": items[i]["input"], "model": f"item{i}_output_{k}",
             "response": items[i][f"output_{k}"]} for i, k in sorted(wanted)]
    path = tmp_path / "responses.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    importing.import_generic(path, "responses", "jsonl", url=url)

    r = run_cli("--database-url", url, "rate", "--local", "smollm2", "--task-family", FAMILY,
                "--prompt", "pointwise_fewshot_v1", "--format", "json")
    assert r.exit_code == 0, r
    summary = json.loads(r.stdout[r.stdout.index("{"):])
    assert summary["this_run"]["unparsed"] == len(OFF_SCALE) and summary["this_run"]["failed"] == 0
    assert summary["local"]["generated_rows"] >= len(OFF_SCALE)  # an off-scale text is decoded, not read off the verdicts
    local = _rows(url, summary["judge_id"])

    served_summary, started = _serve(url)
    assert started, "rate --serve started no process"
    assert not [p for p in started if _alive(p)], "the transformers serve process outlived rate --serve"
    served = _rows(url, served_summary["judge_id"])
    assert set(local) == set(served) == {f"item{i}_output_{k}" for i, k in wanted}

    for (i, k), greedy in wanted.items():
        model = f"item{i}_output_{k}"
        status, score, error, raw, expected, dist = local[model]
        s_status, s_score, s_error, s_raw, *_ = served[model]
        assert raw == greedy, (model, raw)  # the greedy text this test was written for
        assert s_raw == raw, (model, s_raw, raw)  # the served judge wrote the same text
        assert (status, score, error) == (s_status, s_score, s_error), model
        # the distribution stays, as extra information
        assert dist["source"] == "forward" and expected is not None
        if (i, k) in OFF_SCALE:
            assert status == "unparsed" and score is None and "outside the scale [1, 10]" in error, error
            assert dist["greedy"] is None
        else:
            assert status == "ok" and score == float(raw.split()[-1])
            assert dist["greedy"] == (f"{score:g}" if score.is_integer() else None)
