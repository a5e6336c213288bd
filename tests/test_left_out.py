"""Rows a fit, report or leaderboard leaves out are counted with their reason in every output
(issue 11): real LLMBar data, where GPT-4's rating of one Adversarial_Neighbor output is empty."""

from __future__ import annotations

import json

import pytest

FAM = "llmbar/Adversarial_Neighbor"


@pytest.fixture()
def fitted(sqlite_url, data_dir, run_cli):
    assert run_cli("--database-url", sqlite_url, "db", "upgrade").exit_code == 0
    assert run_cli("--database-url", sqlite_url, "import", "llmbar", str(data_dir / "llmbar" / "Adversarial_Neighbor")).exit_code == 0
    r = run_cli("--database-url", sqlite_url, "fit", "--task-family", FAM, "--judge", "GPT-4", "--bootstrap", "20",
                "--length-unit", "words", "--no-nested", "--format", "json")
    assert r.exit_code == 0, r
    return sqlite_url, json.loads(r.stdout)


def test_fit_and_report_count_left_out_rows(fitted, run_cli, tmp_path):
    url, fit = fitted
    expected = ["left out: 1 expert-labelled pairs without an ok rating of both answers",
                "left out: 1 ratings unparsed (no score could be read)"]
    assert all(e in fit["warnings"] for e in expected)
    for fmt in ("json", "markdown"):
        r = run_cli("--database-url", url, "report", "--task-family", FAM, "--format", fmt)
        assert r.exit_code == 0, r
        assert all(e in r.stdout for e in expected), fmt
    r = run_cli("--database-url", url, "report", "--task-family", FAM, "--format", "html", "--out", str(tmp_path / "rep"))
    assert r.exit_code == 0, r
    page = (tmp_path / "rep" / "report.html").read_text()
    assert all(e in page for e in expected)
    r = run_cli("--database-url", url, "report", "--task-family", FAM)
    assert r.exit_code == 0 and expected[1] in " ".join(r.stdout.split())


def test_leaderboard_counts_left_out_rows(fitted, run_cli):
    url, _ = fitted
    r = run_cli("--database-url", url, "leaderboard", "--judge", "GPT-4", "--bootstrap", "0", "--format", "json")
    assert json.loads(r.stdout)["left_out"] == {"responses whose ratings are all unparsed or failed (no score)": 1}
    for fmt in ("table", "markdown"):
        r = run_cli("--database-url", url, "leaderboard", "--judge", "GPT-4", "--bootstrap", "0", "--format", fmt)
        assert "left out: 1 responses whose ratings are all unparsed or failed" in r.stdout, fmt
    r = run_cli("--database-url", url, "leaderboard", "--judge", "GPT-4", "--bootstrap", "0", "--format", "csv")
    assert "left out: 1 responses" in r.stderr
