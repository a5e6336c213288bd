"""Defects a break-it pass found in ``mc score``'s lm-eval task support (issue 13), each
reproduced: include-path YAMLs (shipped ``include:`` fallback, YAMLs that do not load), a
``!function`` module that raises, a few-shot count larger than the few-shot split, ``--dataset``
keys and folders, non-multiple-choice tasks refused before their data are looked for, ``mc
compare`` across different ``--limit``s, every missing MMLU subject named, ``--loader native``
with a task name.

Errors that come before scoring need no model: they use a folder with only a ``config.json``
(enough for ``resolve_model``; loading it would fail), which also shows that the refusal comes
before any model is loaded. The few tests that score use SmolLM2 with ``--limit`` <= 5, 0-shot.
"""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path

import pytest

from judgecal.views import mc
from judgecal.errors import InputError, UsageError

lm_eval = pytest.importorskip("lm_eval")

from judgecal.loglik import lmeval_tasks as LT  # noqa: E402
from test_mc_lmeval_layout import DATA, build_hub_mirror  # noqa: E402


@pytest.fixture(scope="module")
def hub(tmp_path_factory) -> Path:
    if not DATA.exists():
        pytest.skip(f"real data folder absent: {DATA}")
    return build_hub_mirror(tmp_path_factory.mktemp("hub"))


@pytest.fixture()
def no_model(tmp_path) -> Path:
    """A folder resolve_model accepts (it has a config.json) but no model could be loaded from."""
    f = tmp_path / "not_a_model"
    f.mkdir()
    (f / "config.json").write_text("{}", encoding="utf-8")
    return f


@pytest.fixture(scope="module")
def folder():
    from judgecal import config
    from judgecal.localmodel import is_complete

    f = config.default_model_dir()
    if not is_complete(f):
        pytest.skip(f"SmolLM2 folder missing at {f}: run `judgecal model pull`")
    return f


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def _one_line_error(r, code: int = 2) -> str:
    assert r.exit_code == code, r
    assert r.stderr.startswith("error: ") and r.stderr.count("\n") == 1, r.stderr
    assert "Traceback" not in r.stderr
    return r.stderr


# ---------------------------------------------------------------- 1. include paths
def test_include_path_yaml_gets_the_shipped_include_fallback(hub, tmp_path):
    """`include: arc_easy.yaml` in an --include-path YAML: found among lm-eval's shipped tasks,
    as for --task FILE (lm-eval's index dropped the file without a word)."""
    inc = tmp_path / "inc2"
    _write(inc / "dup.yaml", "task: t_dup\ninclude: arc_easy.yaml\n")
    _write(inc / "grp.yaml", "group: g_dup\ntask:\n  - t_dup\naggregate_metric_list:\n  - metric: acc\n")
    lt = LT.load_tasks("t_dup", include_paths=[inc], data_dir=hub)
    assert lt.name == "t_dup" and lt.kind == "task" and list(lt.tasks) == ["t_dup"] and lt.notes == []
    task = lt.tasks["t_dup"]
    assert task.config.metadata["config_source"] == str((inc / "dup.yaml").resolve())
    ref = LT.load_tasks("arc_easy", data_dir=hub).tasks["arc_easy"]
    doc = task.eval_docs[0]
    assert task.doc_to_text(doc) == ref.doc_to_text(ref.eval_docs[0]) == (
        "Question: Which statement best explains why photosynthesis is the foundation of most food webs?\nAnswer:")
    assert task.doc_to_choice(doc) == ref.doc_to_choice(ref.eval_docs[0]) and task.doc_to_target(doc) == 0
    # as the same YAML given as a file
    assert LT.load_tasks(inc / "dup.yaml", data_dir=hub).config_sha256 == lt.config_sha256
    # a group of the include path can list it by name
    g = LT.load_tasks("g_dup", include_paths=[inc], data_dir=hub)
    assert g.kind == "group" and list(g.tasks) == ["t_dup"]


def test_include_path_yaml_that_does_not_load_is_reported(hub, tmp_path):
    broken = tmp_path / "incbroken"
    _write(broken / "bad.yaml", "task: x_broken\ndoc_to_text: [unclosed\n")
    _write(broken / "template.yaml", "output_type: multiple_choice\n")  # no task key: a template, left alone
    # another task is requested: it runs, with a note naming the file and line
    lt = LT.load_tasks("arc_easy", include_paths=[broken], data_dir=hub)
    assert len(lt.notes) == 1
    assert lt.notes[0].startswith("1 YAML file(s) in the include path(s) do not load and were skipped")
    assert f"{(broken / 'bad.yaml').resolve()}:3: invalid YAML" in lt.notes[0]
    # the task the broken file defines: refused, naming the file
    with pytest.raises(InputError, match=r"--task 'x_broken': .*bad\.yaml:3: invalid YAML.*defines 'x_broken' and "
                                         r"does not load"):
        LT.load_tasks("x_broken", include_paths=[broken], data_dir=hub)
    # a broken override of a shipped task is refused, not replaced by the shipped one in silence
    shadow = tmp_path / "incshadow"
    _write(shadow / "arc_easy.yaml", "task: arc_easy\ninclude: arc_easy.yaml\ndoc_to_text: '{{question'\n  bad: [\n")
    with pytest.raises(InputError, match=r"--task 'arc_easy': .*arc_easy\.yaml:\d+: invalid YAML.*lm-eval would "
                                         r"silently use the definition in .*lm_eval/tasks/arc/arc_easy\.yaml"):
        LT.load_tasks("arc_easy", include_paths=[shadow], data_dir=hub)
    # an unknown name says that some include-path YAMLs do not load
    with pytest.raises(InputError, match=r"neither a file nor.*1 YAML file\(s\) in --include-path do not load: "
                                         r".*bad\.yaml:3"):
        LT.load_tasks("no_such_task_here", include_paths=[broken])
    # an include that is found nowhere is a load failure too
    _write(broken / "noinc.yaml", "task: x_noinc\ninclude: no_such_include.yaml\n")
    LT._task_manager.cache_clear()
    with pytest.raises(InputError, match=r"noinc\.yaml: include 'no_such_include\.yaml' not found"):
        LT.load_tasks("x_noinc", include_paths=[broken])


@pytest.mark.slow
@pytest.mark.model
def test_cli_include_path_task_runs_and_skipped_yaml_is_in_every_format(hub, folder, run_cli, tmp_path):
    inc = tmp_path / "inc2"
    _write(inc / "dup.yaml", "task: t_dup\ninclude: arc_easy.yaml\n")
    _write(inc / "bad.yaml", "task: x_broken\ndoc_to_text: [unclosed\n")
    url = f"sqlite:///{tmp_path / 'mc.db'}"
    base = ["--database-url", url, "mc", "score", "--model", str(folder), "--include-path", str(inc),
            "--data-dir", str(hub), "--limit", "2"]
    r = run_cli(*base, "--task", "t_dup", "--format", "json")
    assert r.exit_code == 0, r
    out = json.loads(r.stdout)
    assert out["task"] == "t_dup" and out["n_items"] == 2
    skipped = [n for n in out["diagnostics"]["notes"] if "do not load and were skipped" in n]
    assert len(skipped) == 1 and f"{(inc / 'bad.yaml').resolve()}:3: invalid YAML" in skipped[0]
    t = run_cli(*base, "--task", "arc_easy")
    assert t.exit_code == 0, t
    assert "do not load and were skipped" in t.stdout and "bad.yaml:3" in t.stdout


# ---------------------------------------------------------------- 2. !function modules that raise
def test_function_module_that_raises_names_yaml_and_module(hub, tmp_path, run_cli, no_model):
    d = tmp_path / "fn"
    utils = _write(d / "utils.py", 'x = 1\nraise RuntimeError("boom")\n\ndef process_docs(ds):\n    return ds\n')
    y = _write(d / "fn.yaml", "task: t_fn\ninclude: arc_easy.yaml\nprocess_docs: !function utils.process_docs\n")
    want = (f"{y.resolve()}: !function utils.process_docs: importing {utils.resolve()} raised RuntimeError: boom "
            f"(at {utils.resolve()}:2)")
    with pytest.raises(InputError) as info:  # --task FILE
        LT.load_tasks(y, data_dir=hub)
    assert str(info.value) == want
    with pytest.raises(InputError) as info:  # the same YAML found by name in --include-path
        LT.load_tasks("t_fn", include_paths=[d], data_dir=hub)
    assert str(info.value) == want
    r = run_cli("mc", "score", "--model", str(no_model), "--task", str(y), "--data-dir", str(hub))
    assert _one_line_error(r) == f"error: {want}\n"
    # an include lm-eval finds itself (absolute path): the module is imported by lm-eval's factory
    d2 = tmp_path / "fn2"
    d2.mkdir()
    shutil.copy(utils, d2 / "utils.py")
    y2 = _write(d2 / "fn.yaml", f"task: t_fn2\ninclude: {LT.shipped_tasks_dir() / 'arc' / 'arc_easy.yaml'}\n"
                                "process_docs: !function utils.process_docs\n")
    with pytest.raises(InputError, match=rf"^{y2.resolve()}: !function utils\.process_docs: importing "
                                         rf"{(d2 / 'utils.py').resolve()} raised RuntimeError: boom"):
        LT.load_tasks("t_fn2", include_paths=[d2], data_dir=hub)
    # sys.exit in the module is caught too (it would end judgecal with the module's code)
    d3 = tmp_path / "fn3"
    _write(d3 / "utils.py", "import sys\nsys.exit(3)\n")
    y3 = _write(d3 / "fn.yaml", "task: t_fn3\ninclude: arc_easy.yaml\nprocess_docs: !function utils.process_docs\n")
    with pytest.raises(InputError, match=r"fn3/fn\.yaml: !function utils\.process_docs: importing .*fn3/utils\.py "
                                         r"raised SystemExit: 3"):
        LT.load_tasks(y3, data_dir=hub)


def test_function_that_raises_while_building_names_its_line(hub, tmp_path):
    d = tmp_path / "fnrun"
    utils = _write(d / "utils.py", 'def process_docs(ds):\n    raise ValueError("bad docs")\n')
    y = _write(d / "fn.yaml", f"task: t_fnrun\ninclude: {LT.shipped_tasks_dir() / 'arc' / 'arc_easy.yaml'}\n"
                              "process_docs: !function utils.process_docs\n")
    for spec, kw in ((y, {}), ("t_fnrun", {"include_paths": [d]})):
        with pytest.raises(InputError) as info:
            LT.load_tasks(spec, data_dir=hub, **kw)
        msg = str(info.value)
        assert msg.endswith(f"lm-eval could not build task 't_fnrun': ValueError: bad docs (at {utils.resolve()}:2)")
        assert msg.startswith(str(y.resolve()) if kw else str(y))


# ---------------------------------------------------------------- 3. few-shot larger than the split
def test_num_fewshot_larger_than_the_split_is_refused_before_the_model(hub, no_model, run_cli):
    with pytest.raises(InputError) as info:
        LT.score_lm_eval("arc_easy", no_model, num_fewshot=100000, data_dir=hub)
    assert str(info.value) == ("--num-fewshot 100000: task 'arc_easy' has only 500 document(s) in its few-shot split "
                               "'train'; at most 500 shot(s) are possible")
    r = run_cli("mc", "score", "--model", str(no_model), "--task", "mmlu_anatomy", "--data-dir", str(hub),
                "--num-fewshot", "6")
    assert _one_line_error(r) == ("error: --num-fewshot 6: task 'mmlu_anatomy' has only 5 document(s) in its few-shot "
                                  "split 'dev'; at most 5 shot(s) are possible\n")


def test_fewshot_from_the_evaluation_split_needs_one_more(tmp_path, no_model):
    rows = [{"q": f"q{i}", "options": ["a", "b"], "gold": 0} for i in range(4)]
    _write(tmp_path / "d.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    y = _write(tmp_path / "self.yaml", """\
        task: t_self
        output_type: multiple_choice
        dataset_path: json
        dataset_kwargs: {data_files: {test: d.jsonl}}
        test_split: test
        fewshot_split: test
        num_fewshot: 4
        doc_to_text: "{{q}}"
        doc_to_choice: options
        doc_to_target: gold
        """)
    with pytest.raises(InputError, match=r"^num_fewshot 4: task 't_self' has only 4 document\(s\) in its few-shot "
                                         r"split 'test' \(it is also the evaluation split.*at most 3 shot"):
        LT.score_lm_eval(y, no_model)
    lt = LT.load_tasks(y)
    LT.apply_fewshot(lt, 3, 1234)
    LT.check_fewshot_pool(lt)  # 3 + the scored document = 4: enough


# ---------------------------------------------------------------- 4. --dataset keys and folders
def test_dataset_keys_and_folders_are_checked(hub, tmp_path, run_cli, no_model):
    arc = hub / "allenai" / "ai2_arc"
    with pytest.raises(UsageError) as info:
        LT.load_tasks("arc_easy", datasets_map={"foo/bar": arc}, data_dir=hub)
    assert str(info.value) == "--dataset foo/bar: no task of 'arc_easy' reads that dataset; its tasks read allenai/ai2_arc"
    with pytest.raises(UsageError, match=r"^--dataset allenai/ai2_arc=\S*nowhere: \S*nowhere is not a folder$"):
        LT.load_tasks("arc_easy", datasets_map={"allenai/ai2_arc": tmp_path / "nowhere"})
    with pytest.raises(UsageError, match=r"^--data-dir \S*nowhere: not a folder$"):
        LT.load_tasks("arc_easy", data_dir=tmp_path / "nowhere")
    # a task whose data are local files reads no Hub dataset: every key is unknown
    rows = [{"q": "q", "options": ["a", "b"], "gold": 0}]
    _write(tmp_path / "d.jsonl", json.dumps(rows[0]) + "\n")
    y = _write(tmp_path / "local.yaml", """\
        task: t_local
        output_type: multiple_choice
        dataset_path: json
        dataset_kwargs: {data_files: {test: d.jsonl}}
        test_split: test
        doc_to_text: "{{q}}"
        doc_to_choice: options
        doc_to_target: gold
        """)
    with pytest.raises(UsageError, match=r"^--dataset allenai/ai2_arc: no task of 't_local' reads that dataset; "
                                         r"its tasks read no Hub dataset$"):
        LT.load_tasks(y, datasets_map={"allenai/ai2_arc": arc})
    r = run_cli("mc", "score", "--model", str(no_model), "--task", "copa", "--dataset", f"aps/super_glue={arc}",
                "--dataset", f"allenai/ai2_arc={arc}")
    assert _one_line_error(r) == ("error: --dataset allenai/ai2_arc: no task of 'copa' reads that dataset; "
                                  "its tasks read aps/super_glue\n")
    r = run_cli("mc", "score", "--model", str(no_model), "--task", "arc_easy", "--dataset",
                f"allenai/ai2_arc={tmp_path / 'gone'}")
    assert _one_line_error(r).endswith("gone is not a folder\n")


# ---------------------------------------------------------------- 5. output_type before data
def test_non_multiple_choice_tasks_are_refused_before_data_are_looked_for(tmp_path, run_cli, no_model):
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(InputError, match=r"multiple_choice or loglikelihood_rolling \(perplexity\) only; "
                                         r"1 task\(s\) of 'gsm8k' are not: gsm8k \(generate_until\)"):
        LT.load_tasks("gsm8k", data_dir=empty)  # no data anywhere: the output type is what is refused
    with pytest.raises(LT.DataNotFoundError, match="wikitext"):  # a perplexity task passes the type check
        LT.load_tasks("wikitext", data_dir=empty)
    with pytest.raises(InputError, match=r"2 task\(s\) of 'lambada' are not: lambada_openai \(loglikelihood\), "
                                         r"lambada_standard \(loglikelihood\)"):
        LT.load_tasks("lambada", data_dir=empty)  # a group
    y = _write(tmp_path / "gen.yaml", """\
        task: my_gen
        dataset_path: json
        dataset_kwargs: {data_files: {test: missing.jsonl}}
        test_split: test
        doc_to_text: "{{q}}"
        doc_to_target: "x"
        """)  # no output_type: lm-eval's default, generate_until; its data file does not exist
    with pytest.raises(InputError, match=r"gen\.yaml: judgecal mc scores output_type multiple_choice or loglikelihood_rolling.*"
                                         r"my_gen \(generate_until\)"):
        LT.load_tasks(y)
    r = run_cli("mc", "score", "--model", str(no_model), "--task", "gsm8k", "--data-dir", str(empty))
    assert "gsm8k (generate_until)" in _one_line_error(r)


# ---------------------------------------------------------------- 6. compare across --limit
@pytest.mark.slow
@pytest.mark.model
def test_compare_runs_with_different_limits(hub, folder, run_cli, tmp_path):
    """ARC-Easy items 1-4 vs 1-5 (SmolLM2, 0-shot): acc 0.75 -> 0.6, acc_norm 0.75 -> 0.8; the
    fifth item moves them apart, not the model: no opposite-directions diagnosis."""
    url = f"sqlite:///{tmp_path / 'mc.db'}"
    base = ["--database-url", url, "mc", "score", "--model", str(folder), "--task", "arc_easy", "--data-dir", str(hub),
            "--format", "json"]
    runs = [json.loads(run_cli(*base, "--limit", str(n)).stdout) for n in (4, 5)]
    assert [(r["metrics"]["acc"]["value"], r["metrics"]["acc_norm"]["value"]) for r in runs] == [(0.75, 0.75), (0.6, 0.8)]
    assert runs[0]["settings"]["documents"] == runs[1]["settings"]["documents"] == 300
    assert runs[0]["settings"]["documents_sha256"] == runs[1]["settings"]["documents_sha256"]
    cmp = mc.compare(runs[0]["run_id"], runs[1]["run_id"], url)
    assert cmp["same_dataset"] is False and cmp["same_items"] is False
    assert cmp["opposite_directions"] is False and "over different items" in cmp["opposite_directions_withheld"]
    assert cmp["warning"] == ("the runs scored different items of the same data (4 vs 5 items, --limit 4 vs 5): deltas "
                              "mix items; the acc/acc_norm opposite-directions diagnosis is withheld (the runs scored "
                              "different items)")
    t = run_cli("--database-url", url, "mc", "compare", str(runs[0]["run_id"]), str(runs[1]["run_id"]))
    assert t.exit_code == 0 and "opposite directions" not in t.stdout and "diagnosis is withheld" in t.stderr
    assert "dataset files" not in t.stderr


def test_item_set_wording():
    """How two stored runs' items differ, for each kind of stored hash (pure function on run dicts)."""
    def run(n, sha, fmt="lm-eval", limit=None, docs=None):
        return {"n_items": n, "dataset_sha256": sha,
                "settings": {"task_format": fmt, "limit": limit, **({"documents_sha256": docs} if docs else {})}}

    assert mc._item_sets(run(5, "a"), run(5, "a"), True) is None
    assert mc._item_sets(run(2, "f", "jsonl", 2), run(5, "f", "jsonl", 5), True) == (
        "the runs scored different numbers of items (2 vs 5) of the same dataset (--limit 2 vs 5)")
    assert mc._item_sets(run(5, "f", "jsonl"), run(5, "g", "jsonl"), False).startswith(
        "the runs scored different dataset files (SHA-256 differs; 5 vs 5 items)")
    assert mc._item_sets(run(5, "a", docs="D"), run(5, "b", docs="E"), False).startswith(
        "the runs scored different data (SHA-256 of the task's documents differs; 5 vs 5 items)")
    assert mc._item_sets(run(2, "a", limit=2), run(5, "b", limit=5), False).startswith(
        "the runs scored different item sets (2 vs 5 items, --limit 2 vs 5); whether their data differ too is unknown")


# ---------------------------------------------------------------- 7. minor
def test_every_missing_mmlu_subject_is_named(hub, tmp_path):
    partial = tmp_path / "partial"
    shutil.copytree(hub / "cais", partial / "cais")
    gone = ["anatomy", "astronomy", "virology"]
    for s in gone:
        shutil.rmtree(partial / "cais" / "mmlu" / s)
    with pytest.raises(LT.DataNotFoundError) as info:
        LT.load_tasks("mmlu", data_dir=partial)
    msg = str(info.value)
    assert "\n" not in msg
    assert msg.startswith("lm-eval task 'mmlu': 3 of 57 datasets not found offline: 'cais/mmlu' config(s) "
                          "'anatomy', 'astronomy', 'virology'; the first: dataset 'cais/mmlu' (config 'anatomy')")


def test_native_loader_with_a_task_name_says_it_needs_a_file(tmp_path):
    with pytest.raises(UsageError, match=r"^--loader native reads judgecal task files .* 'arc_easy' is not a file; "
                                         r"an lm-eval task name needs --loader auto or lm-eval$"):
        mc.task_kind("arc_easy", "native")
    with pytest.raises(InputError, match="task file does not exist"):
        mc.task_kind(tmp_path / "missing.jsonl", "native")


# ---------------------------------------------------------------- siblings
def test_unused_data_dir_is_noted_and_sources_recorded(hub, tmp_path):
    rows = [{"q": "q", "options": ["a", "b"], "gold": 0}]
    _write(tmp_path / "d.jsonl", json.dumps(rows[0]) + "\n")
    y = _write(tmp_path / "local.yaml", """\
        task: t_local2
        output_type: multiple_choice
        dataset_path: json
        dataset_kwargs: {data_files: {test: d.jsonl}}
        test_split: test
        doc_to_text: "{{q}}"
        doc_to_choice: options
        doc_to_target: gold
        """)
    lt = LT.load_tasks(y, data_dir=hub)
    assert lt.data_sources == {"json": "json"}
    assert lt.notes == [f"--data-dir {hub} was not used: no task read a dataset from it (read: json from json)"]
    lt = LT.load_tasks("arc_easy", data_dir=hub)
    assert lt.notes == [] and lt.data_sources == {"allenai/ai2_arc": str(hub / "allenai" / "ai2_arc")}


@pytest.mark.slow
@pytest.mark.model
def test_task_function_raising_while_requests_are_built_names_its_line(hub, folder, run_cli, tmp_path):
    """doc_to_text fails on the second document only: lm-eval's task build (which tries the
    first) passes, evaluate fails while it builds requests; one line with the function's line."""
    d = tmp_path / "fnreq"
    utils = _write(d / "utils.py", 'def text(doc):\n    if doc["id"] == "arc_1":\n        raise RuntimeError("no text")\n'
                                   '    return "Question: " + doc["question"] + "\\nAnswer:"\n')
    y = _write(d / "t.yaml", "task: t_fnreq\ninclude: arc_easy.yaml\ndoc_to_text: !function utils.text\n")
    r = run_cli("--database-url", f"sqlite:///{tmp_path / 'mc.db'}", "mc", "score", "--model", str(folder),
                "--task", str(y), "--data-dir", str(hub), "--limit", "2")
    assert _one_line_error(r) == (f"error: lm-eval could not run task 't_fnreq': RuntimeError: no text "
                                  f"(at {utils.resolve()}:3)\n")


def test_group_yaml_file_builds_its_members(hub, tmp_path):
    """A group config given as a file (lm-eval's TaskManager.load of the group dict passed the
    whole group config, aggregate_metric_list included, to each member's TaskConfig)."""
    g = _write(tmp_path / "grp" / "g.yaml", "group: my_group\ntask:\n  - arc_easy\n  - arc_challenge\n"
                                            "aggregate_metric_list:\n  - metric: acc\n")
    lt = LT.load_tasks(g, data_dir=hub)
    assert (lt.name, lt.kind, list(lt.tasks)) == ("my_group", "group", ["arc_easy", "arc_challenge"])
    assert lt.groups["my_group"].to_dict()["aggregate_metric_list"] == [
        {"metric": "acc", "filter_list": None, "aggregation": "mean", "weight_by_size": True}]
    assert lt.data_sources == {"allenai/ai2_arc": str(hub / "allenai" / "ai2_arc")}
    bad = _write(tmp_path / "grp2" / "g.yaml", "group: my_group2\ntask:\n  - arc_easy\n  - arc_esy\n")
    with pytest.raises(InputError, match=r"g\.yaml: group 'my_group2' lists 'arc_esy', which is no lm-eval task, "
                                         r"group or tag \(closest: arc_easy"):
        LT.load_tasks(bad, data_dir=hub)
