"""Parity with lm-evaluation-harness's own shipped multiple-choice tasks, 0-shot and 5-shot.

Data: local copies of real data (../shared/data/mc) in the layouts the shipped configs expect
(tests/test_mc_lmeval_layout.py says what each is built from). The reference is lm-eval 0.4.13
itself: ``simple_evaluate`` with its HF backend (``HFLM``) on the shipped task by name, the
same SmolLM2 folder, float32, CPU, lm-eval's default seeds; its ``datasets.load_dataset`` calls
are pointed at the local copies by judgecal's ``offline_data`` (only the ``path`` argument
changes). judgecal runs the same task with the data location given one of the ways a user
would: a YAML that ``include:``s the shipped config and overrides ``dataset_path`` (or
``dataset_path: json`` + ``data_files``), ``--data-dir``, ``--dataset``, or the datasets cache
with HF_DATASETS_OFFLINE.

Asserted for every task: every request (context, continuation) identical to lm-eval's, in the
same order; per-choice log-likelihoods within 1e-4 nats; acc and acc_norm (and
acc_mutual_info, the MMLU group average) identical to lm-eval's.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from test_mc_lmeval_layout import DATA, build_datasets_cache, build_hub_mirror, model_folder_or_skip  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.model]

lm_eval = pytest.importorskip("lm_eval")


@pytest.fixture(scope="module")
def folder():
    return model_folder_or_skip()


@pytest.fixture(scope="module")
def hub(folder, tmp_path_factory) -> Path:
    return build_hub_mirror(tmp_path_factory.mktemp("hub"))


@pytest.fixture(scope="module")
def hflm(folder):
    from lm_eval.models.huggingface import HFLM

    return HFLM(pretrained=str(folder), device="cpu", dtype="float32", batch_size=16)


@pytest.fixture(scope="module")
def scorer(folder):
    from judgecal.loglik.hf import HFScorer

    return HFScorer(folder, device="cpu", dtype="float32", forward="transformers")  # what --forward auto runs here


@pytest.fixture(scope="module")
def reference(hflm, hub):
    """lm-eval's own run of a shipped task (by name or YAML path), memoised per arguments."""
    import lm_eval.evaluator

    from judgecal.loglik.lmeval_tasks import offline_data, task_manager

    memo: dict = {}

    def run(spec: str, shots: int | None, limit: int | None):
        key = (spec, shots, limit)
        if key not in memo:
            with pytest.MonkeyPatch.context() as mp:
                mp.setattr(lm_eval.evaluator, "add_env_info", lambda storage: None)  # 4 s of `pip list` etc.
                with offline_data(hub):
                    memo[key] = lm_eval.simple_evaluate(model=hflm, tasks=[spec], num_fewshot=shots, limit=limit,
                                                        task_manager=task_manager(), log_samples=True)
        return memo[key]

    return run


def assert_parity(ours, ref, tasks, metrics=("acc", "acc_norm")):
    """Requests identical, lls within 1e-4 nats, metrics identical, task by task."""
    for t in tasks:
        theirs = sorted(ref["samples"][t], key=lambda s: s["doc_id"])
        mine = [it for it in ours.items if it.task == t]
        assert len(mine) == len(theirs) > 0
        assert [it.doc_id for it in mine] == [s["doc_id"] for s in theirs]
        assert [it.requests for it in mine] == [[tuple(a) for a in s["arguments"]] for s in theirs]
        ll_mine = np.array([c.ll for it in mine for c in it.choices]
                           + [c.ll_null for it in mine for c in it.choices if c.ll_null is not None])
        ll_theirs = np.array([r[0] for s in theirs for r in s["filtered_resps"][:len(mine[0].choices)]]
                             + [r[0] for s in theirs for r in s["filtered_resps"][len(mine[0].choices):]])
        assert ll_mine.shape == ll_theirs.shape
        assert np.max(np.abs(ll_mine - ll_theirs)) < 1e-4
        got = ours.diagnostics["by_task"][t]["metrics"]
        for m in metrics:
            if f"{m},none" in ref["results"][t]:
                assert got[m]["value"] == ref["results"][t][f"{m},none"], (t, m)
        # judgecal's own per-item predictions agree with lm-eval's per-item scores
        for it, s in zip(mine, theirs):
            assert float(it.predictions["acc"] in it.golds) == s["acc"]
            if "acc_norm" in s:
                assert float(it.predictions["acc_norm"] in it.golds) == s["acc_norm"]


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


# (task, shots, limit, how judgecal is told where the data are); the long few-shot parity runs
# (`long`: `make long`, run by CI after `make test`) are those of arc, hellaswag, piqa and
# winogrande: copa and mmlu_anatomy keep 5-shot parity inside `make test`
LONG = pytest.mark.long
CASES = [
    ("arc_easy", 0, 6, "yaml-include-by-file-name"),
    pytest.param("arc_easy", 5, 3, "datasets-cache", marks=LONG),
    ("arc_challenge", 0, 6, "data-dir"),
    pytest.param("arc_challenge", 5, 3, "data-dir", marks=LONG),
    ("hellaswag", 0, 6, "data-dir"),
    pytest.param("hellaswag", 5, 3, "data-dir", marks=LONG),
    ("piqa", 0, 6, "yaml-json-data-files"),
    pytest.param("piqa", 5, 3, "yaml-json-data-files", marks=LONG),
    ("copa", 0, 6, "dataset-map"),
    ("copa", 5, 3, "dataset-map"),
    ("mmlu_anatomy", 0, None, "data-dir"),
    ("mmlu_anatomy", 5, None, "data-dir"),
    ("winogrande", 0, None, "data-dir"),
    pytest.param("winogrande", 5, None, "data-dir", marks=LONG),
]


def _case_id(c) -> str:
    v = c.values if hasattr(c, "values") else c
    return f"{v[0]}-{v[1]}shot-{v[3]}"


@pytest.mark.parametrize("task,shots,limit,how", CASES, ids=[_case_id(c) for c in CASES])
def test_shipped_task_matches_lm_eval(task, shots, limit, how, hub, scorer, reference, tmp_path, monkeypatch):
    import datasets

    from judgecal.loglik.lmeval_tasks import score_lm_eval

    kw: dict = {}
    spec: str | Path = task
    if how == "yaml-include-by-file-name":  # a shipped file named by its file name alone
        spec = _write(tmp_path / "arc_easy_local.yaml",
                      f"include: arc_easy.yaml\ndataset_path: {hub / 'allenai' / 'ai2_arc'}\n")
    elif how == "yaml-json-data-files":  # the datasets library's json format, files relative to the YAML
        (tmp_path / "d").mkdir()
        for split in ("train", "validation"):
            shutil.copy(hub / "baber" / "piqa" / "default" / f"{split}.jsonl", tmp_path / "d" / f"piqa_{split}.jsonl")
        spec = _write(tmp_path / "piqa_local.yaml",
                      "include: piqa/piqa.yaml\ndataset_path: json\ndataset_kwargs:\n  data_files:\n"
                      "    train: d/piqa_train.jsonl\n    validation: d/piqa_validation.jsonl\n")
    elif how == "datasets-cache":
        cache = build_datasets_cache(hub, tmp_path / "hf_datasets_cache")
        monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(cache))
    elif how == "dataset-map":
        kw["datasets_map"] = {"aps/super_glue": hub / "aps" / "super_glue"}
    else:
        kw["data_dir"] = hub
    ours = score_lm_eval(spec, scorer=scorer, num_fewshot=shots, limit=limit, **kw)
    ref = reference(task, shots, limit)
    assert ours.task == task and ours.settings["num_fewshot"] == shots == ref["n-shot"][task]
    assert_parity(ours, ref, [task])
    first = ours.items[0].requests[0][0]
    assert first.count("\n\n") >= shots  # few-shot examples are really there
    assert ours.metrics["acc"]["source"] == "lm-eval" and ours.diagnostics["headline"][0] == "acc"
    assert ours.settings["lm_eval_version"] == lm_eval_version() and ours.settings["fewshot_seed"] == 1234


def lm_eval_version():
    from importlib.metadata import version

    return version("lm_eval")


def test_winogrande_is_the_multiple_input_form(hub, scorer):
    """Several contexts (the sentence up to the blank, each option filled in), one continuation."""
    from judgecal.loglik.lmeval_tasks import score_lm_eval

    ours = score_lm_eval("winogrande", scorer=scorer, num_fewshot=0, limit=1, data_dir=hub)
    it = ours.items[0]
    assert it.requests == [("The trophy doesn't fit into the brown suitcase because the trophy", " is too large."),
                           ("The trophy doesn't fit into the brown suitcase because the suitcase", " is too large.")]
    assert it.golds == [0] and len(it.choices) == 2


@pytest.mark.long  # 57 subjects through lm-eval and judgecal: 4 min (make long)
def test_mmlu_group_weighted_as_lm_eval(hub, scorer, reference):
    """The whole MMLU group (57 subjects, 4 subgroups), 0-shot: every subject's requests and
    the size-weighted group averages identical to lm-eval's."""
    from judgecal.loglik.lmeval_tasks import score_lm_eval

    ours = score_lm_eval("mmlu", scorer=scorer, num_fewshot=0, data_dir=hub)
    ref = reference("mmlu", 0, None)
    subjects = [t for t in ref["samples"]]
    assert len(subjects) == 57 and len(ours.items) == sum(1 + k % 3 for k in range(57))
    assert_parity(ours, ref, subjects, metrics=("acc",))
    for g in ("mmlu", "mmlu_stem", "mmlu_humanities", "mmlu_other", "mmlu_social_sciences"):
        assert ours.diagnostics["groups"][g]["metrics"]["acc"]["value"] == pytest.approx(
            ref["results"][g]["acc,none"], abs=1e-12)
    assert ours.metrics["acc"]["value"] == pytest.approx(ref["results"]["mmlu"]["acc,none"], abs=1e-12)
    assert ours.metrics["acc"]["source"] == "lm-eval" and ours.settings["lm_eval_kind"] == "group"
    # weight_by_size: the group acc is the item-weighted mean of the subjects
    bt = ours.diagnostics["by_task"]
    weighted = sum(v["metrics"]["acc"]["value"] * v["n"] for v in bt.values()) / sum(v["n"] for v in bt.values())
    assert ours.metrics["acc"]["value"] == pytest.approx(weighted, abs=1e-12)
    assert "letter-key" in " ".join(ours.diagnostics["notes"])


def test_acc_mutual_info_uses_lm_eval_unconditional_context(hub, hflm, scorer, tmp_path):
    """An ARC YAML whose metric_list names acc_mutual_info: lm-eval's own ("", " choice")
    requests, scored by judgecal, give lm-eval's acc_mutual_info."""
    import lm_eval.evaluator

    from judgecal.loglik.lmeval_tasks import offline_data, score_lm_eval, shipped_tasks_dir, task_manager

    y = _write(tmp_path / "arc_pmi.yaml",
               f"include: {shipped_tasks_dir() / 'arc' / 'arc_easy.yaml'}\ntask: arc_easy_pmi\n"
               f"dataset_path: {hub / 'allenai' / 'ai2_arc'}\nmetric_list:\n  - metric: acc\n  - metric: acc_norm\n"
               "  - metric: acc_mutual_info\n")
    ours = score_lm_eval(y, scorer=scorer, limit=6)
    with pytest.MonkeyPatch.context() as mp, offline_data():  # offline_data: a cache keyed by the files
        mp.setattr(lm_eval.evaluator, "add_env_info", lambda storage: None)
        ref = lm_eval.simple_evaluate(model=hflm, tasks=[str(y)], limit=6, log_samples=True,
                                      task_manager=task_manager(include_defaults=False))
    assert_parity(ours, ref, ["arc_easy_pmi"], metrics=("acc", "acc_norm", "acc_mutual_info"))
    it = ours.items[0]
    assert it.requests[4:] == [("", " " + c) for c in ref["samples"]["arc_easy_pmi"][0]["doc"]["choices"]["text"]]
    assert ours.metrics["acc_mutual_info"]["value"] == ref["results"]["arc_easy_pmi"]["acc_mutual_info,none"]
    assert [c.ll_null is not None for c in it.choices] == [True] * 4
    assert it.predictions["acc_pmi"] is not None and "acc_pmi" not in ours.metrics


def test_judgecal_lm_in_simple_evaluate(hub, scorer, reference):
    """lm-eval's own simple_evaluate accepts JudgecalLM (by object and by registry name)."""
    import lm_eval.evaluator
    from lm_eval.api.registry import get_model

    from judgecal.loglik.lmeval_lm import JudgecalLM
    from judgecal.loglik.lmeval_tasks import offline_data, task_manager

    assert get_model("judgecal") is JudgecalLM
    lm = JudgecalLM(scorer=scorer)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(lm_eval.evaluator, "add_env_info", lambda storage: None)
        with offline_data(hub):
            out = lm_eval.simple_evaluate(model=lm, tasks=["piqa"], limit=6, num_fewshot=0, task_manager=task_manager())
    ref = reference("piqa", 0, 6)
    for m in ("acc,none", "acc_norm,none"):
        assert out["results"]["piqa"][m] == ref["results"]["piqa"][m]
    ll_ours = [r[0] for s in out["samples"]["piqa"] for r in s["filtered_resps"]]
    ll_ref = [r[0] for s in ref["samples"]["piqa"] for r in s["filtered_resps"]]
    assert np.max(np.abs(np.array(ll_ours) - np.array(ll_ref))) < 1e-4
    assert lm.stats["distinct_requests"] == 12 and lm.stats["forward_passes"] >= 1
    with pytest.raises(NotImplementedError, match="generate_until"):
        lm.generate_until([])


def test_cli_stores_fewshot_provenance_and_compare_tells_runs_apart(hub, folder, run_cli, tmp_path):
    url = f"sqlite:///{tmp_path / 'mc.db'}"
    base = ["--database-url", url, "mc", "score", "--model", str(folder), "--task", "arc_challenge",
            "--data-dir", str(hub), "--limit", "2", "--format", "json"]
    a = run_cli(*base, "--num-fewshot", "1")
    assert a.exit_code == 0, a
    b = run_cli(*base, "--num-fewshot", "2", "--fewshot-seed", "7")
    assert b.exit_code == 0, b
    ra, rb = json.loads(a.stdout), json.loads(b.stdout)
    assert ra["settings"]["num_fewshot"] == 1 and ra["settings"]["fewshot_seed"] == 1234
    assert rb["settings"]["num_fewshot"] == 2 and rb["settings"]["fewshot_seed"] == 7
    for r in (ra, rb):
        assert r["settings"]["lm_eval_version"] == lm_eval_version() and len(r["settings"]["task_config_sha256"]) == 64
    assert ra["settings"]["task_config_sha256"] == rb["settings"]["task_config_sha256"]
    assert ra["settings"]["requests_sha256"] != rb["settings"]["requests_sha256"]
    from judgecal.views import mc

    stored = mc.load_run(ra["run_id"], url)
    assert stored["settings"]["num_fewshot"] == 1 and stored["task"] == "arc_challenge" and stored["n_items"] == 2
    assert stored["task_path"] is None and len(stored["dataset_sha256"]) == 64
    cmp = run_cli("--database-url", url, "mc", "compare", str(ra["run_id"]), str(rb["run_id"]), "--format", "json")
    assert cmp.exit_code == 0, cmp
    warning = json.loads(cmp.stdout)["warning"]
    assert "num_fewshot (1 vs 2)" in warning and "fewshot_seed (1234 vs 7)" in warning
    table = run_cli("--database-url", url, "mc", "score", "--model", str(folder), "--task", "arc_challenge",
                    "--data-dir", str(hub), "--limit", "1", "--num-fewshot", "1")
    assert table.exit_code == 0 and "arc_challenge, 1-shot, 1 items" in table.stdout
    assert "judgecal extras" in table.stdout and table.stderr == ""
