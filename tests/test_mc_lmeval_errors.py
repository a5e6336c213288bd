"""lm-eval task loading without a model: refusals as one line, offline data, YAML resolution,
and the native loaders when lm-eval is absent."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

from judgecal.views import mc
from judgecal.errors import InputError, UsageError

lm_eval = pytest.importorskip("lm_eval")

from judgecal.loglik import lmeval_tasks as LT  # noqa: E402


def _yaml(tmp_path: Path, name: str, body: str) -> Path:
    p = tmp_path / name
    p.write_text(textwrap.dedent(body), encoding="utf-8")
    return p


def _rows(tmp_path: Path, rows: list[dict], name: str = "data.jsonl") -> Path:
    p = tmp_path / name
    p.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return p


ROWS = [{"question": "2+2?", "options": ["3", "4"], "answer": "4", "golds": [1]},
        {"question": "Sky?", "options": ["blue", "green"], "answer": "blue", "golds": [0, 1]},
        {"question": "Ice?", "options": ["cold", "hot"], "answer": "purple", "golds": [0, 5]}]


def test_yaml_with_function_process_docs_and_relative_data(tmp_path):
    """A task of one's own, as lm-eval reads it: !function beside the YAML, process_docs,
    data_files relative to the YAML; a numeric-list gold and a string gold as lm-eval scores them."""
    _rows(tmp_path, ROWS)
    (tmp_path / "utils.py").write_text(textwrap.dedent("""\
        def process_docs(ds):
            return ds.map(lambda d: {"question": d["question"].upper()})

        def choices(doc):
            return list(doc["options"])
        """))
    y = _yaml(tmp_path, "mine.yaml", """\
        task: my_mc
        task_alias: mine
        output_type: multiple_choice
        dataset_path: json
        dataset_kwargs:
          data_files:
            test: data.jsonl
        test_split: test
        process_docs: !function utils.process_docs
        description: "Answer.\\n\\n"
        doc_to_text: "Q: {{question}}\\nA:"
        doc_to_choice: !function utils.choices
        doc_to_target: answer
        metric_list:
          - metric: acc
        """)
    cfg = LT.load_task_file(y)
    assert callable(cfg["process_docs"]) and cfg["dataset_kwargs"]["data_files"]["test"] == str(tmp_path / "data.jsonl")
    lt = LT.load_tasks(y)
    assert lt.name == "my_mc" and lt.kind == "task" and len(lt.config_sha256) == 64
    task = lt.tasks["my_mc"]
    docs = list(task.eval_docs)
    assert docs[0]["question"] == "2+2?".upper()
    golds = [LT.lm_eval_gold(task, d, task.doc_to_choice(d)) for d in docs]
    # a string gold is looked up among the choices; one that is not a choice is never a hit
    assert golds == [([1], None), ([0], None), ([-100], "not_a_choice")]
    task.config.doc_to_target = "{{golds}}"  # a list renders to several golds, as lm-eval reads it
    golds = [LT.lm_eval_gold(task, d, task.doc_to_choice(d)) for d in docs]
    assert golds == [([1], None), ([0, 1], "several"), ([0, -100], "out_of_range")]


def test_unknown_name_missing_data_and_bad_files_are_one_line(tmp_path):
    with pytest.raises(InputError, match=r"--task 'arc_esy' is neither a file nor an lm-eval task.*closest: arc_easy"):
        LT.load_tasks("arc_esy")
    y = _yaml(tmp_path, "arc.yaml", "include: arc_easy.yaml\ndataset_path: nobody/no_such_dataset\n")
    (tmp_path / "mirror").mkdir()  # a --data-dir that does not exist is refused before (test_mc_lmeval_breakit.py)
    with pytest.raises(LT.DataNotFoundError) as info:
        LT.load_tasks(y, data_dir=tmp_path / "mirror")
    msg = str(info.value)
    assert "\n" not in msg and "lm-eval task 'arc_easy'" in msg and "dataset 'nobody/no_such_dataset' (config 'ARC-Easy')" in msg
    assert str(tmp_path / "mirror" / "nobody" / "no_such_dataset") in msg and "the datasets cache" in msg
    assert "nothing is downloaded" in msg
    bad = _yaml(tmp_path, "bad.yaml", "include: no_such_file.yaml\ntask: x\n")
    with pytest.raises(InputError, match=r"bad\.yaml: include 'no_such_file\.yaml' not found"):
        LT.load_tasks(bad)
    amb = _yaml(tmp_path, "amb.yaml", "include: default.yaml\ntask: x\n")
    with pytest.raises(InputError, match="is ambiguous"):
        LT.load_tasks(amb)
    broken = _yaml(tmp_path, "broken.yaml", "task: x\ndoc_to_text: [unclosed\n")
    with pytest.raises(InputError, match=r"broken\.yaml:\d+: invalid YAML"):
        LT.load_tasks(broken)
    nofn = _yaml(tmp_path, "nofn.yaml", "task: x\ndoc_to_text: !function nowhere.f\n")
    with pytest.raises(InputError, match=r"nofn\.yaml: !function"):
        LT.load_tasks(nofn)


def test_generation_task_is_refused(tmp_path):
    _rows(tmp_path, ROWS[:2])
    y = _yaml(tmp_path, "gen.yaml", """\
        task: my_gen
        output_type: generate_until
        dataset_path: json
        dataset_kwargs: {data_files: {test: data.jsonl}}
        test_split: test
        doc_to_text: "{{question}}"
        doc_to_target: "x"
        """)
    with pytest.raises(InputError, match=r"loglikelihood_rolling \(perplexity\) only; 1 task\(s\) of 'my_gen' are not: my_gen \(generate_until\)"):
        LT.load_tasks(y)


def test_fewshot_rules_follow_simple_evaluate(tmp_path):
    _rows(tmp_path, ROWS[:2])
    y = _yaml(tmp_path, "zero.yaml", """\
        task: fixed_zero
        output_type: multiple_choice
        dataset_path: json
        dataset_kwargs: {data_files: {test: data.jsonl}}
        test_split: test
        num_fewshot: 0
        doc_to_text: "{{question}}"
        doc_to_choice: options
        doc_to_target: 0
        """)
    lt = LT.load_tasks(y)
    notes = LT.apply_fewshot(lt, 5, 1234)
    assert lt.tasks["fixed_zero"].get_config("num_fewshot") == 0 and "fixes num_fewshot: 0" in notes["fixed_zero"]


def test_kind_and_option_checks_need_no_model(tmp_path):
    jsonl = _rows(tmp_path, [{"query": "q", "choices": ["a", "b"], "gold": 0}], "t.jsonl")
    y = _yaml(tmp_path, "t.yaml", "task: t\n")
    assert mc.task_kind(jsonl) == "native" and mc.task_kind(y) == "lm-eval" and mc.task_kind("arc_easy") == "lm-eval"
    assert mc.task_kind(y, "native") == "native"
    with pytest.raises(UsageError, match="not an lm-eval YAML"):
        mc.task_kind(jsonl, "lm-eval")
    with pytest.raises(InputError, match="does not exist"):
        mc.task_kind(tmp_path / "missing.jsonl")
    with pytest.raises(UsageError, match="--num-fewshot, --data-dir apply to lm-eval tasks"):
        mc.score(jsonl, "smollm2", given={"num_fewshot", "data_dir"}, store=False)
    with pytest.raises(UsageError, match="--prompt applies to judgecal task files only"):
        mc.score("arc_easy", "smollm2", given={"prompt"}, store=False)


def test_without_lm_eval_native_paths_keep_working(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "lm_eval", None)  # import lm_eval -> ImportError
    assert not LT.available()
    y = _yaml(tmp_path, "simple.yaml", """\
        task: simple
        output_type: multiple_choice
        dataset_path: json
        dataset_kwargs: {data_files: data.jsonl}
        doc_to_text: "{{question}}"
        doc_to_choice: options
        doc_to_target: answer
        """)
    _rows(tmp_path, ROWS[:2])
    assert mc.task_kind(y) == "native"
    with pytest.raises(UsageError, match=r"lm-eval task names need lm-evaluation-harness: .*judgecal\[lmeval\]"):
        mc.task_kind("arc_easy")
    with pytest.raises(UsageError, match=r"judgecal\[lmeval\]"):
        mc.task_kind(y, "lm-eval")


def test_cli_refusals_are_one_line(run_cli, tmp_path):
    r = run_cli("mc", "score", "--model", "smollm2", "--task", "arc_esy")
    assert r.exit_code == 2 and r.stderr.count("\n") == 1 and "closest: arc_easy" in r.stderr
    r = run_cli("mc", "score", "--model", "smollm2", "--task", "arc_easy", "--dataset", "nonsense")
    assert r.exit_code == 2 and "OWNER/NAME=FOLDER" in r.stderr
    jsonl = _rows(tmp_path, [{"query": "q", "choices": ["a", "b"], "gold": 0}], "t.jsonl")
    r = run_cli("mc", "score", "--model", "smollm2", "--task", str(jsonl), "--num-fewshot", "5")
    assert r.exit_code == 2 and "--num-fewshot applies to lm-eval tasks" in r.stderr
