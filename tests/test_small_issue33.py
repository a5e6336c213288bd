"""Issue 33, the small items: nothing in an LLMBar repository passed over without a word (the
published layout's Dataset/CaseStudy and Dataset/Processed), an export of nothing imports back
(every kind, JSONL and CSV), and one fit gives the raw judge's figure one CI wherever it is
printed."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from db_helpers import count_rows
from judgecal.importers import llmbar

KINDS = ("ratings", "labels", "pairs", "responses", "verdicts")
TABLES = ("task_family", "item", "response", "expert_label", "rating", "verbosity_pair", "pairwise_judgment",
          "imported_file")


# ----------------------------------------------------------------------------- LLMBar: not read, never passed over
def _set(folder: Path, recs: list[dict]) -> None:
    folder.mkdir(parents=True)
    (folder / "dataset.json").write_text(json.dumps(recs, indent=1))


def _published_layout(root: Path) -> Path:
    """LLMBar's published repository layout (princeton-nlp/LLMBar README, "Data"), small: the
    LLMBar sets, the case-study and processed sets beside them, the code, and a few strays."""
    rec = lambda i, tag: {"input": f"{tag} q{i}", "output_1": f"a{i}", "output_2": f"bb{i}", "label": 1 + i % 2}
    _set(root / "Dataset" / "LLMBar" / "Natural", [rec(i, "nat") for i in range(3)])
    _set(root / "Dataset" / "LLMBar" / "Adversarial" / "Neighbor", [rec(i, "nb") for i in range(2)])
    (root / "Dataset" / "LLMBar" / "Adversarial" / "Drafts").mkdir()  # no dataset.json
    (root / "Dataset" / "LLMBar" / "notes.txt").write_text("x")
    _set(root / "Dataset" / "CaseStudy" / "Constraint", [rec(i, "cs") for i in range(2)])
    _set(root / "Dataset" / "CaseStudy" / "Base-9", [rec(i, "b9") for i in range(2)])
    mt = root / "Dataset" / "Processed" / "MT-Bench"
    _set(mt, [rec(i, "mt") for i in range(2)])
    (mt / "evaluators" / "GPT-4" / "Vanilla").mkdir(parents=True)
    (mt / "evaluators" / "GPT-4" / "Vanilla" / "result.json").write_text(json.dumps(
        [dict(rec(i, "mt"), results=[{"swap = False": {"completion": ["Output (a)", "stop"], "winner": "1"},
                                      "swap = True": {"completion": ["Output (a)", "stop"], "winner": "1"}}])
         for i in range(2)]))
    (root / "LLMEvaluator").mkdir()
    (root / "LLMEvaluator" / "evaluate.py").write_text("print('x')\n")
    (root / "README.md").write_text("# LLMBar\n")
    (root / "LICENSE").write_text("MIT\n")
    return root


def test_llmbar_root_counts_case_study_processed_and_every_other_entry(tmp_path, sqlite_url, run_cli):
    """From the repository root, Dataset/CaseStudy and Dataset/Processed (and the code, README,
    LICENSE, entries that are not sets) were passed over without a word: each is now a
    'not read: PATH (reason)' line of the summary and a not_read entry of the JSON, and nothing
    of them is imported."""
    root = _published_layout(tmp_path / "LLMBar")
    r = run_cli("--database-url", sqlite_url, "import", "llmbar", root)
    assert r.exit_code == 0, r
    ds = root / "Dataset"
    expected = {  # path: the start of its reason
        root / "LICENSE": "not LLMBar data", root / "README.md": "not LLMBar data",
        root / "LLMEvaluator": "LLMBar's evaluation code",
        ds / "CaseStudy": "not an LLMBar evaluation set: the paper's case-study sets",
        ds / "Processed": "not an LLMBar evaluation set: other meta-evaluation benchmarks",
        ds / "LLMBar" / "notes.txt": "not an LLMBar set", ds / "LLMBar" / "Adversarial" / "Drafts": "not an LLMBar set"}
    lines = [ln.strip() for ln in r.stdout.splitlines() if ln.strip().startswith("not read:")]
    assert len(lines) == len(expected), r.stdout
    for path, why in expected.items():
        assert any(ln.startswith(f"not read: {path} ({why}") for ln in lines), (path, lines)
    # JSON (a second import of the same folder adds nothing and reports the same entries)
    r = run_cli("--database-url", sqlite_url, "import", "llmbar", root, "--format", "json")
    assert r.exit_code == 0, r
    out = json.loads(r.stdout)
    assert sum(out["added"].values()) == 0
    got = {p: reason for reason, entry in out["not_read"].items() for p in entry["where"]}
    assert sum(e["count"] for e in out["not_read"].values()) == len(expected) == len(got)
    assert {Path(p) for p in got} == set(expected)
    assert all(got[str(p)].startswith(why) for p, why in expected.items())
    assert got[str(ds / "CaseStudy")] == llmbar.CASE_STUDY and got[str(ds / "Processed")] == llmbar.PROCESSED
    # only LLMBar's sets were imported: 3 + 2 pairs
    assert count_rows(sqlite_url, "task_family") == 2 and count_rows(sqlite_url, "expert_label") == 5
    assert count_rows(sqlite_url, "pairwise_judgment") == 0
    # from Dataset/ the same two folders are named (the root's entries are not under it)
    sets, not_read = llmbar.find_sets(ds)
    assert [f for _, f in sets] == ["llmbar/Adversarial_Neighbor", "llmbar/Natural"]
    assert {Path(p) for p, _ in not_read} == {ds / "CaseStudy", ds / "Processed", ds / "LLMBar" / "notes.txt",
                                              ds / "LLMBar" / "Adversarial" / "Drafts"}
    # the hint holds: given itself, a case-study or processed folder imports its sets as llmbar/<set>
    assert [f for _, f in llmbar.set_folders(ds / "CaseStudy")] == ["llmbar/Base-9", "llmbar/Constraint"]
    assert [f for _, f in llmbar.set_folders(ds / "Processed" / "MT-Bench")] == ["llmbar/MT-Bench"]


def test_llmbar_shared_repository_copy_names_its_license(repo):
    """The shared copy has neither CaseStudy nor Processed: its LICENSE is the one entry not read."""
    sets, not_read = llmbar.find_sets(repo)
    assert len(sets) == 3
    assert not_read == [(str(repo / "LICENSE"), llmbar.NOT_DATA)]


def test_llmbar_evaluators_file_is_counted(tmp_path):
    """A file named evaluators in a set folder was passed over silently (it is not the folder)."""
    folder = tmp_path / "S"
    _set(folder, [{"input": "q", "output_1": "a", "output_2": "bb", "label": "1"}])
    (folder / "evaluators").write_text("x")
    batch = llmbar.parse_any(folder)
    assert [p for ps in batch.not_read.values() for p in ps] == [str(folder / "evaluators")]
    assert batch.skipped == {}


# ----------------------------------------------------------------------------- an export of nothing imports back
@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_an_export_of_nothing_imports_as_zero_records(db_url, run_cli, tmp_path, fmt):
    """`export pairs` of an empty database could not be imported back ('no records', exit 2):
    every round-trip kind, in both formats, now imports as 0 records, exit 0, nothing written."""
    r = run_cli("--database-url", db_url, "db", "upgrade")
    assert r.exit_code == 0, r
    for kind in KINDS:
        path = tmp_path / f"{kind}.{fmt}"
        r = run_cli("--database-url", db_url, "export", kind, path)
        assert r.exit_code == 0 and f"wrote 0 {kind} rows" in r.stdout, r
        text = path.read_text()
        assert (text == "") if fmt == "jsonl" else (text.count("\n") == 1 and "prompt" in text), (kind, text)
        r = run_cli("--database-url", db_url, "import", fmt, path, "--kind", kind)
        assert r.exit_code == 0, (kind, r)
        assert f"imported {fmt}:{kind}: 0 records in {path}" in r.stdout and "nothing written" in r.stdout, r.stdout
        assert "warning" not in r.stderr, (kind, r.stderr)  # the export's own header is the kind's
        r = run_cli("--database-url", db_url, "import", fmt, path, "--kind", kind, "--format", "json")
        out = json.loads(r.stdout)
        assert r.exit_code == 0 and out["records"] == 0 and sum(out["added"].values()) == 0, r
        assert out["warnings"] == [] and out["files"] == []
    for table in TABLES:  # nothing written, not even the files' hashes
        assert count_rows(db_url, table) == 0, table


def test_empty_file_rules(sqlite_url, run_cli, tmp_path):
    """A CSV file without a header row is not an export (judgecal writes the header even for
    nothing): it stays an error, naming why. A header of another kind is a warning. An empty
    JSONL file reads as an export of nothing."""
    empty_csv, empty_jsonl = tmp_path / "e.csv", tmp_path / "e.jsonl"
    empty_csv.write_bytes(b"")
    empty_jsonl.write_bytes(b"")
    r = run_cli("--database-url", sqlite_url, "import", "csv", empty_csv, "--kind", "pairs")
    assert r.exit_code == 2 and f"{empty_csv}:1: empty CSV file (no header row)" in r.stderr, r
    assert "writes its header row even when there is nothing to export" in r.stderr
    r = run_cli("--database-url", sqlite_url, "import", "jsonl", empty_jsonl, "--kind", "pairs")
    assert r.exit_code == 0 and "0 records" in r.stdout, r
    ratings = tmp_path / "ratings.csv"
    assert run_cli("--database-url", sqlite_url, "export", "ratings", ratings).exit_code == 0
    r = run_cli("--database-url", sqlite_url, "import", "csv", ratings, "--kind", "pairs", "--format", "json")
    assert r.exit_code == 0, r
    out = json.loads(r.stdout)
    assert out["records"] == 0 and len(out["warnings"]) == 1
    assert "fields not used by --kind pairs were ignored: " in out["warnings"][0] and "judge" in out["warnings"][0]


# ----------------------------------------------------------------------------- one CI for the raw figure
def test_one_raw_ci_unit():
    from judgecal.views.fitting import one_raw_ci

    ev = {"kind": "pairwise", "summary": "greedy",
          "methods": {"raw": {"agreement": 0.92, "agreement_ci": [0.875, 0.955], "agreement_cv": 0.92,
                              "agreement_cv_ci": [0.87, 0.95]},
                      "polylog": {"agreement": 0.93, "agreement_ci": [0.8, 0.99]}},
          "selection": {"decision": "keep raw", "raw": 0.92, "raw_ci": [0.875, 0.96], "nested": 0.92,
                        "nested_ci": [0.875, 0.96], "procedure": 0.92, "procedure_ci": [0.86, 0.97],
                        "procedure_gain_ci": [-0.03, 0.03]},
          "summaries": {"summaries": {"greedy": {"figure_cv": 0.92, "figure_cv_ci": [0.88, 0.96]},
                                      "mean": {"figure_cv": 0.92, "figure_cv_ci": [0.86, 0.97]}}}}
    one_raw_ci(ev)
    raw = ev["methods"]["raw"]
    assert raw["agreement_ci"] == raw["agreement_cv_ci"] == [0.87, 0.95]
    sel = ev["selection"]
    assert sel["raw_ci"] == sel["nested_ci"] == [0.87, 0.95] and sel["raw_ci_source"] == "methods.raw.agreement_cv_ci"
    assert ev["summaries"]["summaries"]["greedy"]["figure_cv_ci"] == [0.87, 0.95]
    # other quantities keep their own CIs, even at the same value
    assert sel["procedure_ci"] == [0.86, 0.97] and ev["methods"]["polylog"]["agreement_ci"] == [0.8, 0.99]
    assert ev["summaries"]["summaries"]["mean"]["figure_cv_ci"] == [0.86, 0.97]
    # a selection whose raw figure is another (other rows) keeps its own; a calibrate decision's nested too
    ev2 = {"kind": "pairwise", "methods": {"raw": {"agreement": 0.9, "agreement_ci": [0.8, 0.95]}},
           "selection": {"decision": "calibrate", "raw": 0.91, "raw_ci": [0.8, 0.96], "nested": 0.9,
                         "nested_ci": [0.7, 0.99]}}
    one_raw_ci(ev2)
    assert ev2["selection"]["raw_ci"] == [0.8, 0.96] and ev2["selection"]["nested_ci"] == [0.7, 0.99]
    # pointwise: the in-sample Spearman CI (there is no CV CI)
    ev3 = {"kind": "pointwise", "methods": {"raw": {"spearman": 0.5, "spearman_ci": [0.3, 0.6], "spearman_cv": 0.5}},
           "selection": {"decision": "keep raw", "raw": 0.5, "raw_ci": [0.31, 0.62], "nested": 0.5,
                         "nested_ci": [0.31, 0.62]}}
    one_raw_ci(ev3)
    assert ev3["selection"]["raw_ci"] == ev3["selection"]["nested_ci"] == [0.3, 0.6]
    assert ev3["selection"]["raw_ci_source"] == "methods.raw.spearman_ci"


_CI = r"(\d\.\d{3}) \[(\d\.\d{3}), (\d\.\d{3})\]"


def test_one_fit_prints_one_ci_for_the_raw_figure(data_dir, sqlite_url, run_cli):
    """The issue's run: `fit --task-family llmbar/Natural --judge GPT-4 --bootstrap 500 --seed 0`
    printed raw agreement 0.920 [0.875, 0.955] in the methods table and 'keep raw (raw agreement
    0.920 [0.875, 0.960])' in the recommendation: two bootstraps of one figure. Now one CI, in
    the fit's JSON and in the report's table, Markdown and JSON."""
    r = run_cli("--database-url", sqlite_url, "import", "llmbar", data_dir / "llmbar" / "Natural")
    assert r.exit_code == 0, r
    r = run_cli("--database-url", sqlite_url, "fit", "--task-family", "llmbar/Natural", "--judge", "GPT-4",
                "--bootstrap", "500", "--seed", "0", "--format", "json")
    assert r.exit_code == 0, r
    fit = json.loads(r.stdout)
    raw, sel = fit["methods"]["raw"], fit["selection"]
    assert sel["decision"] == "keep raw" and sel["raw"] == raw["agreement"] == raw["agreement_cv"]
    ci = raw["agreement_cv_ci"]
    assert raw["agreement_ci"] == ci and sel["raw_ci"] == ci and sel["nested_ci"] == ci, (raw, sel)
    assert sel["raw_ci_source"] == "methods.raw.agreement_cv_ci"
    want = (f"{raw['agreement']:.3f}", f"{ci[0]:.3f}", f"{ci[1]:.3f}")
    for fmt in ("table", "markdown"):
        r = run_cli("--database-url", sqlite_url, "report", "--calibration", str(fit["id"]), "--format", fmt)
        assert r.exit_code == 0, r
        row = next(ln for ln in r.stdout.splitlines() if "raw (no calibration)" in ln)
        assert re.findall(_CI, row)[:2] == [want, want], (fmt, row)  # agreement, agreement (CV)
        said = re.findall(r"raw agreement " + _CI, r.stdout)
        assert said and set(said) == {want}, (fmt, said)
    r = run_cli("--database-url", sqlite_url, "report", "--calibration", str(fit["id"]), "--format", "json")
    entry = json.loads(r.stdout)["entries"][0]
    assert entry["selection"]["raw_ci"] == entry["methods"]["raw"]["agreement_ci"] == ci
    assert entry["recommendation"]["nested_ci"] == ci
