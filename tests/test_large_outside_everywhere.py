"""The large-outside-share note (issue 35 item 7) in every output that reads distributions
under ``--summary mean``: the score board (tests/test_issue35_scale.py), the win-rate board,
``fit`` (its warnings, stored with it), ``check`` (its rating_summary row) and ``report``."""

from __future__ import annotations

import json

NOTE = "come from distributions with 50% or more of their mass outside the scale"


def _jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _probs(v: int) -> dict:
    out = {str(k): 0.0 for k in range(1, 11)}
    out[str(v)] = 1.0
    return out


def test_fit_check_and_report_count_ratings_mostly_outside(tmp_path, sqlite_url, run_cli):
    url = sqlite_url
    ratings, labels = [], []
    for i in range(16):
        short, long = f"Short {i}.", f"Long answer {i}: " + "more words here " * (3 + i % 5)
        for model, text, score, outside in (("m_short", short, 4 + i % 3, 0.8 if i < 5 else 0.1),
                                            ("m_long", long, 6 + i % 4, 0.2)):
            ratings.append({"task_family": "f", "prompt": f"q{i}", "model": model, "response": text, "judge": "J",
                            "scale_min": 1, "scale_max": 10, "score": score, "raw_output": f"[[{score}]]",
                            "distribution": {"probs": _probs(score), "outside": outside, "source": "top_logprobs"}})
        labels.append({"task_family": "f", "prompt": f"q{i}", "model_a": "m_short", "response_a": short,
                       "model_b": "m_long", "response_b": long, "preference": "a" if i % 3 else "b"})
    for kind, rows in (("ratings", ratings), ("labels", labels)):
        assert run_cli("--database-url", url, "import", "jsonl", _jsonl(tmp_path / f"{kind}.jsonl", rows),
                       "--kind", kind).exit_code == 0
    r = run_cli("--database-url", url, "fit", "--task-family", "f", "--judge", "J", "--length-unit", "words",
                "--bootstrap", "0", "--folds", "2", "--summary", "mean", "--format", "json")
    assert r.exit_code == 0, r.stderr
    fit = json.loads(r.stdout)
    note = [w for w in fit["warnings"] if NOTE in w]
    assert note == [f"--summary mean: 5 of 32 ok ratings (m_short: 5) {NOTE}; their summary is read from the in-scale "
                    "rest, renormalised, so it says little about the judgment (--summary greedy reads the verdict written)"]
    r = run_cli("--database-url", url, "fit", "--task-family", "f", "--judge", "J", "--length-unit", "words",
                "--bootstrap", "0", "--folds", "2", "--format", "json")
    assert not [w for w in json.loads(r.stdout)["warnings"] if NOTE in w]  # greedy: nothing to say
    r = run_cli("--database-url", url, "check", "--judge", "J", "--summary", "mean", "--calibration", str(fit["id"]),
                "--format", "json")
    assert "5 of 32 ok ratings (m_short: 5)" in r.stdout, r.stdout
    r = run_cli("--database-url", url, "report", "--judge", "J", "--summary", "mean", "--bootstrap", "0",
                "--calibration", str(fit["id"]), "--format", "json")
    assert r.exit_code == 0, r.stderr
    assert "5 of 32 ok ratings (m_short: 5)" in r.stdout


def test_the_win_rate_board_counts_verdicts_mostly_outside(tmp_path, sqlite_url, run_cli):
    url = sqlite_url
    rows = []
    for i in range(12):
        for model, outside in (("m1", 0.7 if i < 4 else 0.0), ("m2", 0.0)):
            rows.append({"task_family": "f", "prompt": f"q{i}", "model_a": model, "response_a": f"{model} says {i}",
                         "model_b": "base", "response_b": f"base says {i}", "judge": "PJ", "baseline": "b",
                         "position": "ab", "preference": 0.75 if model == "m1" else 0.25,
                         "distribution": {"probs": {"a": 0.75 if model == "m1" else 0.25,
                                                    "b": 0.25 if model == "m1" else 0.75, "tie": 0.0},
                                          "outside": outside, "source": "top_logprobs"}})
    assert run_cli("--database-url", url, "import", "jsonl", _jsonl(tmp_path / "v.jsonl", rows), "--kind",
                   "verdicts").exit_code == 0
    args = ("--database-url", url, "leaderboard", "--baseline", "base", "--judge", "PJ", "--bootstrap", "0",
            "--format", "json")
    board = json.loads(run_cli(*args, "--summary", "mean").stdout)
    note = [n for n in board["notes"] if NOTE in n]
    assert note and note[0].startswith(f"--summary mean: 4 of 24 ok verdicts (m1: 4) {NOTE}"), board["notes"]
    assert not [n for n in json.loads(run_cli(*args).stdout)["notes"] if NOTE in n]
