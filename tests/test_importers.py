"""Importers on real data (../shared/data): counts, idempotence, transactions, bad records."""

from __future__ import annotations

import json
import shutil

import pytest

from judgecal.views.stats import collect_stats


def _stats(url):
    return {s["task_family"]: s for s in collect_stats(url)}


def test_llmbar_real_counts_and_idempotence(db_url, data_dir, run_cli):
    r = run_cli("--database-url", db_url, "import", "llmbar", data_dir / "llmbar" / "Adversarial_Neighbor")
    assert r.exit_code == 0, r
    s = _stats(db_url)["llmbar/Adversarial_Neighbor"]
    assert (s["items"], s["responses"], s["expert_labels"]) == (134, 268, {"pairwise": 134})
    # GPT-4 left one score empty in this file: stored as unparsed, never as a low score
    assert s["ratings"] == {"GPT-4": {"ok": 267, "unparsed": 1}, "ChatGPT": {"ok": 268}}
    before = collect_stats(db_url)
    r = run_cli("--database-url", db_url, "import", "llmbar", data_dir / "llmbar" / "Adversarial_Neighbor")
    assert r.exit_code == 0 and "item +0" in r.stdout and "rating +0" in r.stdout
    assert collect_stats(db_url) == before


def test_corrupted_copy_is_refused_with_line_and_writes_nothing(sqlite_url, data_dir, tmp_path, run_cli):
    run_cli("--database-url", sqlite_url, "import", "llmbar", data_dir / "llmbar" / "Natural")
    before = collect_stats(sqlite_url)
    bad = tmp_path / "Natural"
    shutil.copytree(data_dir / "llmbar" / "Natural", bad)
    lines = (bad / "dataset.json").read_text().splitlines()
    target = next(i for i, l in enumerate(lines) if i > 400 and '"label"' in l)
    lines[target] = lines[target].replace('"label": 1', '"label": 3').replace('"label": 2', '"label": 3')
    (bad / "dataset.json").write_text("\n".join(lines))
    r = run_cli("--database-url", sqlite_url, "import", "llmbar", bad, "--task-family", "llmbar/Natural")
    assert r.exit_code == 2
    assert r.stderr.strip().count("\n") == 0
    assert "dataset.json:" in r.stderr and "label" in r.stderr
    line_no = int(r.stderr.split("dataset.json:")[1].split(":")[0])
    assert '"input"' in lines[line_no - 1] or lines[line_no - 1].strip() == "{"
    # a truncated file (invalid JSON) is refused too, with its line
    (bad / "dataset.json").write_text("\n".join(lines[: target + 3]))
    r = run_cli("--database-url", sqlite_url, "import", "llmbar", bad, "--task-family", "llmbar/Natural")
    assert r.exit_code == 2 and "invalid JSON" in r.stderr and "Traceback" not in r.output
    assert collect_stats(sqlite_url) == before


def test_bad_record_in_ratings_rolls_back_everything(sqlite_url, data_dir, tmp_path, run_cli):
    bad = tmp_path / "GPTInst"
    shutil.copytree(data_dir / "llmbar" / "Adversarial_GPTInst", bad)
    recs = json.loads((bad / "ratings_ChatGPT.json").read_text())
    recs[50]["results"][0]["score_1"] = ["11", "stop"]
    (bad / "ratings_ChatGPT.json").write_text(json.dumps(recs, indent=1))
    r = run_cli("--database-url", sqlite_url, "import", "llmbar", bad)
    assert r.exit_code == 2 and "ratings_ChatGPT.json:" in r.stderr and "outside the declared scale" in r.stderr
    assert collect_stats(sqlite_url) == []


def test_llmbar_results_as_python_literal_string(sqlite_url, data_dir, tmp_path, run_cli):
    folder = tmp_path / "lit"
    shutil.copytree(data_dir / "llmbar" / "Natural", folder)
    recs = json.loads((folder / "ratings_GPT-4.json").read_text())
    for rec in recs:
        rec["results"] = repr(rec["results"])
        rec["label"] = str(rec["label"])
    (folder / "ratings_GPT-4.json").write_text(json.dumps(recs))
    r = run_cli("--database-url", sqlite_url, "import", "llmbar", folder, "--task-family", "lit")
    assert r.exit_code == 0, r
    assert _stats(sqlite_url)["lit"]["ratings"]["GPT-4"] == {"ok": 200}


def test_pandalm_real(sqlite_url, data_dir, run_cli):
    r = run_cli("--database-url", sqlite_url, "import", "pandalm", data_dir / "pandalm" / "testset-v1.json")
    assert r.exit_code == 0, r
    assert r.stderr.count("record skipped") == 6 and "bool True" in r.stderr
    s = _stats(sqlite_url)["pandalm"]
    assert s["expert_labels"] == {"pairwise": (999 - 6) * 3}


def test_alpaca_eval_pairs(sqlite_url, data_dir, run_cli):
    d = data_dir / "alpaca_eval"
    r = run_cli("--database-url", sqlite_url, "import", "alpaca-eval", d / "gpt4_1106_preview.json",
                "--pair", d / "gpt4_1106_preview_concise.json", d / "gpt4_1106_preview_verbose.json")
    assert r.exit_code == 0, r
    s = _stats(sqlite_url)["alpaca_eval"]
    assert (s["items"], s["responses"], s["verbosity_pairs"]) == (805, 3 * 805, 805)


GOOD = [
    {"task_family": "mine", "prompt": "Say hi", "model": "m1", "response": "hi"},
    {"task_family": "mine", "prompt": "Say hi", "model": "m2", "response": "hello there, friend"},
]


def _write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.mark.parametrize(
    "bad,reason",
    [
        ({"task_family": "mine", "prompt": "x", "model": "m"}, "missing field 'response'"),
        ({"task_family": "mine", "prompt": "x", "model": "m", "response": 3}, "field 'response' must be a string"),
        ({"prompt": "x", "model": "m", "response": "r"}, "task_family"),
    ],
)
def test_generic_bad_records(sqlite_url, tmp_path, run_cli, bad, reason):
    f = _write_jsonl(tmp_path / "r.jsonl", GOOD + [bad])
    r = run_cli("--database-url", sqlite_url, "import", "jsonl", f, "--kind", "responses")
    assert r.exit_code == 2
    assert f"r.jsonl:3: " in r.stderr and reason in r.stderr, r
    assert collect_stats(sqlite_url) == []


def test_generic_labels_pairs_ratings_jsonl_and_csv(db_url, tmp_path, run_cli):
    labels = _write_jsonl(tmp_path / "labels.jsonl", [
        {"task_family": "mine", "prompt": "Say hi", "model_a": "m1", "response_a": "hi",
         "model_b": "m2", "response_b": "hello there, friend", "preference": "a"},
        {"task_family": "mine", "prompt": "Say hi", "model": "m1", "response": "hi", "score": 4, "scale_min": 1, "scale_max": 5},
    ])
    r = run_cli("--database-url", db_url, "import", "jsonl", labels, "--kind", "labels")
    assert r.exit_code == 0, r
    csv_file = tmp_path / "ratings.csv"
    csv_file.write_text(
        "task_family,prompt,model,response,judge,score,scale_min,scale_max\n"
        'mine,Say hi,m1,hi,myjudge,7,1,10\n'
        'mine,Say hi,m2,"hello there, friend",myjudge,,1,10\n'
    )
    r = run_cli("--database-url", db_url, "import", "csv", csv_file, "--kind", "ratings")
    assert r.exit_code == 0, r
    pairs = _write_jsonl(tmp_path / "pairs.jsonl", [
        {"task_family": "mine", "prompt": "Say hi", "concise_model": "m1", "concise": "hi",
         "verbose_model": "m2", "verbose": "hello there, friend"}])
    assert run_cli("--database-url", db_url, "import", "jsonl", pairs, "--kind", "pairs").exit_code == 0
    s = _stats(db_url)["mine"]
    assert s["responses"] == 2 and s["items"] == 1 and s["verbosity_pairs"] == 1
    assert s["expert_labels"] == {"pairwise": 1, "pointwise": 1}
    assert s["ratings"] == {"myjudge": {"ok": 1, "unparsed": 1}}
    bad = tmp_path / "bad.csv"
    bad.write_text("task_family,prompt,model,response,judge,score,scale_min,scale_max\nmine,Say hi,m1,hi,j,11,1,10\n")
    r = run_cli("--database-url", db_url, "import", "csv", bad, "--kind", "ratings")
    assert r.exit_code == 2 and "bad.csv:2: score 11 is outside the declared scale 1-10" in r.stderr
    bad = _write_jsonl(tmp_path / "bad.jsonl", [{"task_family": "mine", "prompt": "Say hi", "model_a": "m1", "response_a": "hi",
                                                  "model_b": "m2", "response_b": "yo", "preference": "maybe"}])
    r = run_cli("--database-url", db_url, "import", "jsonl", bad, "--kind", "labels")
    assert r.exit_code == 2 and "bad.jsonl:1: field 'preference': unknown value" in r.stderr


def test_missing_file_and_not_json(sqlite_url, tmp_path, run_cli):
    r = run_cli("--database-url", sqlite_url, "import", "pandalm", tmp_path / "nope.json")
    assert r.exit_code == 2 and "nope.json: no such file" in r.stderr
    f = tmp_path / "x.jsonl"
    f.write_text('{"prompt": "a", "model": "m", "response": "r"}\nnot json\n')
    r = run_cli("--database-url", sqlite_url, "import", "jsonl", f, "--kind", "responses", "--task-family", "t")
    assert r.exit_code == 2 and "x.jsonl:2: invalid JSON" in r.stderr


def test_small_imports_report_true_counts_and_bad_text(db_url, tmp_path, run_cli):
    f = _write_jsonl(tmp_path / "r.jsonl", GOOD)
    r = run_cli("--database-url", db_url, "import", "jsonl", f, "--kind", "responses")
    assert r.exit_code == 0 and "item +1" in r.stdout and "response +2" in r.stdout, r
    bad = _write_jsonl(tmp_path / "nul.jsonl", [dict(GOOD[0], response="a\u0000b")])
    r = run_cli("--database-url", db_url, "import", "jsonl", bad, "--kind", "responses")
    assert r.exit_code == 2 and "nul.jsonl:1: field 'response' contains a NUL character" in r.stderr
    bad = _write_jsonl(tmp_path / "idx.jsonl", [dict(GOOD[0], judge="j", score=3, scale_min=1, scale_max=5, sample_index=-1)])
    r = run_cli("--database-url", db_url, "import", "jsonl", bad, "--kind", "ratings")
    assert r.exit_code == 2 and "idx.jsonl:1: field 'sample_index' must be between 0 and" in r.stderr


def test_unknown_fields_warn_that_the_kind_may_be_wrong(sqlite_url, tmp_path, run_cli):
    rows = [dict(GOOD[0], judge="j", score=3, scale_min=1, scale_max=5)]
    f = _write_jsonl(tmp_path / "ratings.jsonl", rows)
    r = run_cli("--database-url", sqlite_url, "import", "jsonl", f, "--kind", "responses")
    assert r.exit_code == 0
    assert "ratings.jsonl:1: fields not used by --kind responses were ignored: judge, scale_max, scale_min, score" in r.stderr
