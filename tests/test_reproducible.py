"""Identical inputs give identical numbers whatever the database (issue 18, item 5).

The same LLMBar files (llmbar/Natural and llmbar/Adversarial_GPTInst with GPT-4's ratings) are
fitted and reported four ways, with the same settings and ``--seed``:

(a) a fresh SQLite database;
(b) a fresh PostgreSQL database;
(c) SQLite holding other data first (another LLMBar set, and five prompts of another family),
    with the two sets imported in the other order, and each set's records reversed (so every
    item, response, label and rating gets other row ids);
(d) the ``judgecal export`` of (a) (responses, labels, ratings) imported into a fresh SQLite
    database.

``judgecal report --format json`` (the own entry of each family's fit and a transfer entry) and
``judgecal leaderboard --format json`` must be equal in all four once the volatile fields are
dropped: calibration ids and creation times. Every number, CI, recommendation and warning is
compared as it is.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

FAMILIES = ("Natural", "Adversarial_GPTInst")
JUDGE = "GPT-4"
FIT = ("--judge", JUDGE, "--length-unit", "words", "--bootstrap", "200", "--seed", "3", "--folds", "5")
VOLATILE = frozenset({"calibration_id", "created_at", "id", "mc_run"})


def _scrub(obj):
    """``obj`` without the volatile fields (ids, creation times), recursively."""
    if isinstance(obj, dict):
        return {k: _scrub(v) for k, v in obj.items() if k not in VOLATILE}
    if isinstance(obj, list):
        return [_scrub(v) for v in obj]
    return obj


def _reversed_set(src: Path, dst: Path) -> Path:
    """A copy of an LLMBar set folder (same folder name, hence the same task family) whose
    dataset.json and ratings_GPT-4.json hold the same records in reverse order."""
    dst.mkdir(parents=True)
    for name in ("dataset.json", f"ratings_{JUDGE}.json"):
        records = json.loads((src / name).read_text(encoding="utf-8"))
        (dst / name).write_text(json.dumps(records[::-1]), encoding="utf-8")
    return dst


def _llmbar_set(data_dir: Path, tmp_path: Path, name: str) -> Path:
    """An LLMBar set with only dataset.json and GPT-4's ratings (the judge the test fits)."""
    dst = tmp_path / "sets" / name
    dst.mkdir(parents=True)
    for f in ("dataset.json", f"ratings_{JUDGE}.json"):
        shutil.copy(data_dir / "llmbar" / name / f, dst / f)
    return dst


def _ok(r):
    assert r.exit_code == 0, r
    return r


def _fit_and_report(url: str) -> dict:
    """Fit both families, report every entry plus a transfer, and the score leaderboard."""
    ids = {}
    for name in FAMILIES:
        r = _ok(run_cli("--database-url", url, "fit", "--task-family", f"llmbar/{name}", *FIT, "--format", "json"))
        ids[name] = json.loads(r.stdout)["id"]
    out = {}
    fams = [a for name in FAMILIES for a in ("--task-family", f"llmbar/{name}")]
    r = _ok(run_cli("--database-url", url, "report", *fams, "--judge", JUDGE, "--format", "json", "--bootstrap", "200",
                    "--seed", "3"))
    out["report"] = json.loads(r.stdout)
    r = _ok(run_cli("--database-url", url, "report", "--calibration", ids["Natural"], "--task-family",
                    "llmbar/Adversarial_GPTInst", "--format", "json", "--bootstrap", "200", "--seed", "3"))
    out["transfer"] = json.loads(r.stdout)
    r = _ok(run_cli("--database-url", url, "leaderboard", *fams, "--judge", JUDGE, "--format", "json", "--bootstrap", "200",
                    "--seed", "3", "--min-ratings", "1"))
    out["leaderboard"] = json.loads(r.stdout)
    return _scrub(out)


def _differences(a, b, path="$", out=None, limit=12) -> list[str]:
    """Where two JSON values differ (at most ``limit`` places, for a readable failure)."""
    out = [] if out is None else out
    if len(out) >= limit:
        return out
    if type(a) is not type(b):
        out.append(f"{path}: {a!r} != {b!r}")
    elif isinstance(a, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                out.append(f"{path}.{k}: only in {'the reference' if k in a else 'this way'}")
            else:
                _differences(a[k], b[k], f"{path}.{k}", out, limit)
    elif isinstance(a, list) and len(a) != len(b):
        out.append(f"{path}: {len(a)} != {len(b)} elements")
    elif isinstance(a, list):
        for i, (x, y) in enumerate(zip(a, b)):
            _differences(x, y, f"{path}[{i}]", out, limit)
    elif a != b:
        out.append(f"{path}: {a!r} != {b!r}")
    return out[:limit]


def _same(reference: dict, got: dict) -> None:
    diff = _differences(reference, got)
    assert not diff, "differs from the fresh-SQLite reference:\n" + "\n".join(diff)


def run_cli(*args) -> "CliResult":
    """``judgecal ARGS`` in-process through the real entry point (as conftest's ``run_cli``;
    a plain function here, so that the module-scoped reference fixture can use it)."""
    from click.testing import CliRunner

    from conftest import CliResult
    from judgecal.cli import main

    runner = CliRunner()
    with runner.isolation() as streams:
        code = 0
        try:
            main([str(a) for a in args])
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return CliResult(code, streams[0].getvalue().decode(), streams[1].getvalue().decode())


@pytest.fixture(scope="module")
def way_a(tmp_path_factory, data_dir):
    """(a) fresh SQLite: the reference result, and its database URL for the export (d)."""
    tmp = tmp_path_factory.mktemp("way_a")
    url = f"sqlite:///{tmp / 'a.db'}"
    for name in FAMILIES:
        _ok(run_cli("--database-url", url, "import", "llmbar", _llmbar_set(data_dir, tmp, name)))
    return url, _fit_and_report(url)


def test_a_reference_is_complete(way_a):
    """The reference result holds what the other ways are compared on."""
    _, res = way_a
    entries = res["report"]["entries"]
    assert {e["task_family"] for e in entries} == {f"llmbar/{n}" for n in FAMILIES}
    assert all(e["fitted"] and e["params"]["gamma_ci"] for e in entries)
    assert [e["kind"] for e in res["transfer"]["entries"]] == ["transfer"]
    rows = res["leaderboard"]["rows"]
    assert rows and all(r["mean_raw_ci"] for r in rows)
    # a calibrated figure exactly where the applied calibrations are identified (issue 23: none from noise)
    assert all(bool(r["mean_calibrated_ci"]) != r["calibration_not_identified"] for r in rows)


@pytest.mark.postgres
def test_b_fresh_postgresql(way_a, pg_url, data_dir, tmp_path):
    for name in FAMILIES:
        _ok(run_cli("--database-url", pg_url, "import", "llmbar", _llmbar_set(data_dir, tmp_path, name)))
    got = _fit_and_report(pg_url)
    _same(way_a[1], got)


def test_c_other_data_and_other_order(way_a, data_dir, tmp_path):
    url = f"sqlite:///{tmp_path / 'c.db'}"
    # other data first: another LLMBar set (items, responses, labels, ratings of the same judge) ...
    _ok(run_cli("--database-url", url, "import", "llmbar", _llmbar_set(data_dir, tmp_path, "Adversarial_Neighbor")))
    # ... and five prompts of another family, rated by another judge
    other = tmp_path / "other.jsonl"
    other.write_text("".join(json.dumps({"task_family": "other", "prompt": f"prompt {i}", "model": "m",
                                         "response": "x " * (i + 1), "judge": "someone", "scale_min": 0,
                                         "scale_max": 10, "score": i}) + "\n" for i in range(5)), encoding="utf-8")
    _ok(run_cli("--database-url", url, "import", "jsonl", other, "--kind", "ratings"))
    # then the two sets in the other order, each with its records reversed
    for name in reversed(FAMILIES):
        _ok(run_cli("--database-url", url, "import", "llmbar",
                    _reversed_set(data_dir / "llmbar" / name, tmp_path / "reversed" / name)))
    got = _fit_and_report(url)
    _same(way_a[1], got)


def test_d_export_import_into_fresh_database(way_a, tmp_path):
    src, _ = way_a
    url = f"sqlite:///{tmp_path / 'd.db'}"
    for kind in ("responses", "labels", "ratings"):
        f = tmp_path / f"{kind}.jsonl"
        _ok(run_cli("--database-url", src, "export", kind, f, "--judge", JUDGE) if kind == "ratings"
            else run_cli("--database-url", src, "export", kind, f))
        _ok(run_cli("--database-url", url, "import", "jsonl", f, "--kind", kind))
    got = _fit_and_report(url)
    _same(way_a[1], got)
