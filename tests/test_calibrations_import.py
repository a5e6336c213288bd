"""`judgecal export calibrations` imports back (issue 35 item 2): every field survives, an
identical re-import adds nothing, a conflicting one is refused with one FILE:LINE line. The
byte-identical move across dialects is in tests/test_export_round_trip.py."""

from __future__ import annotations

import json

import pytest


@pytest.fixture()
def fitted(sqlite_url, data_dir, run_cli):
    url = sqlite_url
    assert run_cli("--database-url", url, "import", "llmbar", data_dir / "llmbar" / "Natural").exit_code == 0
    r = run_cli("--database-url", url, "fit", "--task-family", "llmbar/Natural", "--judge", "GPT-4", "--length-unit",
                "words", "--bootstrap", "10", "--folds", "3", "--seed", "4", "--format", "json")
    assert r.exit_code == 0, r.stderr
    return url, json.loads(r.stdout)


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_calibrations_import_back_and_again(fitted, tmp_path, run_cli, fmt):
    url, fit = fitted
    out = tmp_path / f"cal.{fmt}"
    assert run_cli("--database-url", url, "export", "calibrations", out).exit_code == 0
    fresh = f"sqlite:///{tmp_path / 'fresh.db'}"
    r = run_cli("--database-url", fresh, "import", fmt, out, "--kind", "calibrations", "--format", "json")
    assert r.exit_code == 0, r.stderr
    res = json.loads(r.stdout)
    assert res["added"]["calibration"] == 1 and res["added"]["task_family"] == 1 and res["records"] == 1
    listed = json.loads(run_cli("--database-url", fresh, "fit", "--list", "--format", "json").stdout)
    assert len(listed) == 1
    moved, = listed
    for key in ("task_family", "judge", "created_at", "gamma", "p", "l_ref", "length_unit", "objective", "n", "loss",
                "gamma_ci", "p_ci", "agreement_raw", "agreement_cv_calibrated", "identification", "selection",
                "comparison", "fingerprint", "summary", "n_bootstrap", "seed", "folds", "judgecal_version"):
        assert moved[key] == fit[key], key
    # identical re-import, into the copy and into the source: nothing added, counted as already stored
    for target in (fresh, url):
        r = run_cli("--database-url", target, "import", fmt, out, "--kind", "calibrations", "--format", "json")
        res = json.loads(r.stdout)
        assert r.exit_code == 0 and res["added"]["calibration"] == 0
        assert res["skipped"]["already stored with the same values (calibration rows not added again)"]["count"] == 1


def test_a_conflicting_calibration_is_refused_at_its_line(fitted, tmp_path, run_cli):
    url, fit = fitted
    out = tmp_path / "cal.jsonl"
    assert run_cli("--database-url", url, "export", "calibrations", out).exit_code == 0
    row = json.loads(out.read_text(encoding="utf-8"))
    other = dict(row, created_at="2020-01-02T03:04:05+00:00")
    changed = dict(row, gamma=row["gamma"] + 0.25)
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(other) + "\n" + json.dumps(changed) + "\n", encoding="utf-8")
    r = run_cli("--database-url", url, "import", "jsonl", bad, "--kind", "calibrations")
    assert r.exit_code != 0 and "\n" not in r.stderr.strip() and "Traceback" not in r.stderr
    assert r.stderr.startswith(f"error: {bad}:2: this calibration (fitted at {fit['created_at']}) is already stored "
                               f"with gamma {row['gamma']!r}; this file gives gamma {row['gamma'] + 0.25!r}"), r.stderr
    listed = json.loads(run_cli("--database-url", url, "fit", "--list", "--format", "json").stdout)
    assert len(listed) == 1  # nothing was imported (not even line 1)
    # inside one file: the same family, judge and created_at twice with other values
    twice = tmp_path / "twice.jsonl"
    twice.write_text(json.dumps(other) + "\n" + json.dumps(dict(other, p_max=1.75)) + "\n", encoding="utf-8")
    r = run_cli("--database-url", url, "import", "jsonl", twice, "--kind", "calibrations")
    assert r.exit_code != 0 and r.stderr.startswith(f"error: {twice}:2: calibration conflicts with line 1"), r.stderr
    # a field missing, a bad value: one line naming the file, line and field
    for rec, message in ((({k: v for k, v in row.items() if k != "p_min"}), "missing field 'p_min'"),
                         (dict(row, created_at="yesterday"), "field 'created_at' is not an ISO 8601 time"),
                         (dict(row, converged="maybe"), "field 'converged' must be true or false"),
                         (dict(row, metrics=[1]), "field 'metrics' must be a JSON object")):
        one = tmp_path / "one.jsonl"
        one.write_text(json.dumps(rec) + "\n", encoding="utf-8")
        r = run_cli("--database-url", url, "import", "jsonl", one, "--kind", "calibrations")
        assert r.exit_code != 0 and r.stderr.startswith(f"error: {one}:1: ") and message in r.stderr, r.stderr
    # another created_at is another calibration: added beside the first, the judge's identity kept
    other_file = tmp_path / "other.jsonl"
    other_file.write_text(json.dumps(other) + "\n", encoding="utf-8")
    r = run_cli("--database-url", url, "import", "jsonl", other_file, "--kind", "calibrations", "--format", "json")
    assert r.exit_code == 0 and json.loads(r.stdout)["added"]["calibration"] == 1
    judges = {(c["judge"], c["created_at"]) for c in json.loads(
        run_cli("--database-url", url, "fit", "--list", "--format", "json").stdout)}
    assert judges == {("GPT-4", fit["created_at"]), ("GPT-4", "2020-01-02T03:04:05+00:00")}
