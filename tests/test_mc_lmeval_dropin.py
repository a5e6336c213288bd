"""`judgecal mc` as a drop-in for an lm-eval run (issue 24): stable task-config hashes across
processes, several tasks and groups in one call, lm-eval's results and samples files, the
``judgecal`` model name from lm-eval's own command line.

Data: the local copies of real data built by tests/test_mc_lmeval_layout.py. References are
lm-eval 0.4.13's own runs (``HFLM`` on the same SmolLM2 folder, or lm-eval's own files), never
hard-coded figures. Kept small (a few items per task, ``limit``) for the test suite's time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from test_mc_lmeval_layout import DATA, build_hub_mirror, model_folder_or_skip  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.model]

lm_eval = pytest.importorskip("lm_eval")


@pytest.fixture(scope="module")
def folder():
    return model_folder_or_skip()


@pytest.fixture(scope="module")
def hub(folder, tmp_path_factory) -> Path:
    return build_hub_mirror(tmp_path_factory.mktemp("hub"))


def _env() -> dict:
    return {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(Path(__file__).resolve().parents[1])}


# ---------------------------------------------------------------- (1) stable hashes
HASH_SCRIPT = """
import json, sys
from judgecal.cli import main
from judgecal.loglik.lmeval_tasks import load_tasks
hub, url, folder = sys.argv[1:4]
hashes = {t: load_tasks(t, data_dir=hub).config_sha256 for t in ("winogrande", "hellaswag", "copa")}
print(json.dumps(hashes))
try:
    main(["--database-url", url, "mc", "score", "--model", folder, "--task", "copa", "--data-dir", hub,
          "--limit", "2", "--format", "json"])
except SystemExit as exc:
    assert not exc.code, exc.code
"""


def test_config_hashes_stable_across_processes_and_identical_runs_compare_equal(hub, folder, run_cli, tmp_path):
    """Tasks whose configs hold Python functions (winogrande, hellaswag, copa; some nested in
    fewshot_config) hash the same in another process; two identical runs, one per process,
    compare with no difference at all."""
    from judgecal.loglik.lmeval_tasks import load_tasks

    url = f"sqlite:///{tmp_path / 'mc.db'}"
    other = subprocess.run([sys.executable, "-c", HASH_SCRIPT, str(hub), url, str(folder)], capture_output=True,
                           text=True, env=_env(), timeout=600)
    assert other.returncode == 0, other.stderr[-2000:]
    theirs = json.loads(other.stdout.splitlines()[0])
    mine = {t: load_tasks(t, data_dir=hub).config_sha256 for t in theirs}
    assert mine == theirs
    a = json.loads(other.stdout.split("\n", 1)[1])
    b = run_cli("--database-url", url, "mc", "score", "--model", str(folder), "--task", "copa", "--data-dir", str(hub),
                "--limit", "2", "--format", "json")
    assert b.exit_code == 0, b
    b = json.loads(b.stdout)
    assert a["settings"]["task_config_sha256"] == b["settings"]["task_config_sha256"] == mine["copa"]
    cmp = run_cli("--database-url", url, "mc", "compare", str(a["run_id"]), str(b["run_id"]), "--format", "json")
    assert cmp.exit_code == 0 and cmp.stderr == "", cmp
    cmp = json.loads(cmp.stdout)
    assert "warning" not in cmp and cmp["same_items"] and cmp["same_dataset"]
    assert all(d["delta"] == 0 for d in cmp["deltas"].values())


def test_stable_value_has_no_memory_addresses():
    import functools

    from judgecal.loglik.lmeval_tasks import stable_value

    def f(doc):
        return doc["x"]

    class Metric:
        def __call__(self, x):
            return x

    v = stable_value({"a": [f, functools.partial(f, 1)], "b": {"c": Metric(), "d": object()}})
    text = json.dumps(v)
    assert "0x" not in text and "return doc[\\\"x\\\"]" in text
    assert v["a"][0]["function"].endswith("test_stable_value_has_no_memory_addresses.<locals>.f")


# ---------------------------------------------------------------- (2, 3) several tasks, lm-eval's files
TASKS = "arc_easy,piqa,mmlu_stem"  # two tasks and a group (19 MMLU subjects, size-weighted average)


@pytest.fixture(scope="module")
def lm_eval_files(folder, hub, tmp_path_factory):
    """lm-eval's own run of the same tasks and items, its files written as lm-eval's CLI writes
    them (``simple_evaluate`` with an ``EvaluationTracker``; lm-eval's ``run.py``)."""
    import lm_eval.evaluator
    from lm_eval.loggers import EvaluationTracker
    from lm_eval.models.huggingface import HFLM

    from judgecal.loglik.lmeval_tasks import offline_data, task_manager

    out = tmp_path_factory.mktemp("lm_eval_out")
    tracker = EvaluationTracker(output_path=str(out))
    hflm = HFLM(pretrained=str(folder), device="cpu", dtype="float32", batch_size=16)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(lm_eval.evaluator, "add_env_info", lambda storage: None)  # 4 s of `pip list` etc.
        with offline_data(hub):
            results = lm_eval.simple_evaluate(model=hflm, model_args={"pretrained": str(folder)}, tasks=TASKS.split(","),
                                              limit=2, task_manager=task_manager(), log_samples=True,
                                              evaluation_tracker=tracker)
    samples = results.pop("samples")
    tracker.save_results_aggregated(results=results, samples=samples)
    for name in results["configs"]:
        tracker.save_results_samples(task_name=name, samples=samples[name])
    return _read_out(out)


def _read_out(out: Path) -> dict:
    [results] = list(out.rglob("results_*.json"))
    samples = {}
    for f in out.rglob("samples_*.jsonl"):
        task = f.name[len("samples_"):].rsplit("_", 1)[0]
        samples[task] = [json.loads(line) for line in f.read_text(encoding="utf-8").splitlines()]
    return {"dir": results.parent, "results": json.loads(results.read_text(encoding="utf-8")), "samples": samples}


def test_several_tasks_and_a_group_write_lm_eval_files(hub, folder, lm_eval_files, run_cli, tmp_path, monkeypatch):
    """`mc score --task arc_easy,piqa,mmlu_stem --output-path --log-samples`: one stored run,
    lm-eval's group aggregate, and results/samples files with lm-eval's keys and values."""
    import lm_eval.loggers.utils

    monkeypatch.setattr(lm_eval.loggers.utils, "add_env_info", lambda storage: None)
    url = f"sqlite:///{tmp_path / 'mc.db'}"
    out = tmp_path / "out"
    r = run_cli("--database-url", url, "mc", "score", "--model", str(folder), "--task", TASKS, "--data-dir", str(hub),
                "--limit", "2", "--output-path", str(out), "--log-samples", "--format", "json")
    assert r.exit_code == 0, r
    run = json.loads(r.stdout)
    mine, theirs = _read_out(out), lm_eval_files
    # the same folder layout: OUT/<model name sanitized>/results_<date>.json
    assert mine["dir"].name == theirs["dir"].name
    a, b = mine["results"], theirs["results"]
    assert set(a) == set(b) | {"judgecal"}
    for key in ("results", "groups", "group_subtasks", "configs", "versions", "n-shot", "higher_is_better", "n-samples",
                "task_hashes"):
        assert a[key] == b[key], key
    assert set(b["config"]) <= set(a["config"]) and a["config"]["model"] == "judgecal"
    for key in ("limit", "bootstrap_iters", "random_seed", "numpy_seed", "torch_seed", "fewshot_seed", "gen_kwargs"):
        assert a["config"][key] == b["config"][key], key
    assert a["model_name"] == b["model_name"] == str(folder)
    assert set(mine["samples"]) == set(theirs["samples"]) == set(b["configs"]) and len(b["configs"]) == 21
    for task, lines in theirs["samples"].items():
        got = sorted(mine["samples"][task], key=lambda s: s["doc_id"])
        lines = sorted(lines, key=lambda s: s["doc_id"])
        assert len(got) == len(lines) > 0
        for s_mine, s_ref in zip(got, lines):
            assert set(s_mine) == set(s_ref) | {"judgecal"}
            for k in s_ref:
                if k in ("resps", "filtered_resps"):
                    ll_a = np.array([float(x[0]) for x in s_mine["filtered_resps"]])
                    ll_b = np.array([float(x[0]) for x in s_ref["filtered_resps"]])
                    assert np.max(np.abs(ll_a - ll_b)) < 1e-4
                else:
                    assert s_mine[k] == s_ref[k], (task, k)
            extra = s_mine["judgecal"]
            assert len(extra["n_tokens"]) == len(s_ref["filtered_resps"]) and extra["predictions"]["acc"] is not None
    # judgecal's figures under their own key; the group's aggregate is lm-eval's
    jc = a["judgecal"]
    assert jc["run_id"] == run["run_id"] and "acc_bytes" in jc["metrics"] and "acc_bytes" in jc["extras_by_task"]["piqa"]
    assert run["diagnostics"]["groups"]["mmlu_stem"]["metrics"]["acc"]["value"] == b["groups"]["mmlu_stem"]["acc,none"]
    assert run["settings"]["lm_eval_kind"] == "list"
    assert [p["kind"] for p in run["settings"]["lm_eval_tasks"]] == ["task", "task", "group"]
    # the database keeps task, doc id and each request; `mc export` writes them
    exp = tmp_path / "items.jsonl"
    e = run_cli("--database-url", url, "mc", "export", str(run["run_id"]), str(exp))
    assert e.exit_code == 0, e
    rows = [json.loads(line) for line in exp.read_text(encoding="utf-8").splitlines()]
    assert len(rows) == run["n_items"] == sum(len(v) for v in theirs["samples"].values())
    by_key = {(row["task"], row["doc_id"]): row for row in rows}
    for task, lines in theirs["samples"].items():
        for s in lines:
            row = by_key[(task, s["doc_id"])]
            args = [[g["arg_0"], g["arg_1"]] for g in s["arguments"].values()]
            assert [list(x) for x in zip(row["contexts"], row["continuations"])] == args[:row["n_choices"]]
            assert row["gold"] == int(s["target"])
    csv = run_cli("--database-url", url, "mc", "export", str(run["run_id"]), str(tmp_path / "items.csv"))
    assert csv.exit_code == 0 and (tmp_path / "items.csv").read_text(encoding="utf-8").startswith("run_id,model,")


# ---------------------------------------------------------------- (4) from lm-eval itself
def test_simple_evaluate_example_in_docs_runs_offline_as_written(hub, folder, monkeypatch):
    """docs/mc.md's `simple_evaluate` example, run as written (only its two paths replaced):
    offline, on local data, and its figures are lm-eval's own for the same items (HFLM)."""
    import re

    import lm_eval.evaluator

    monkeypatch.setattr(lm_eval.evaluator, "add_env_info", lambda storage: None)  # 4 s of `pip list` etc.
    text = (Path(__file__).resolve().parents[1] / "docs" / "mc.md").read_text(encoding="utf-8")
    block = text[text.index("**From lm-eval itself.**"):]
    code = re.search(r"```python\n(.*?)```", block, re.S).group(1)
    assert "/path/to/model-folder" in code and "/data/hf-copies" in code
    code = code.replace("/path/to/model-folder", str(folder)).replace("/data/hf-copies", str(hub))
    code = code.replace("print(", "(lambda *a: None)(")
    scope: dict = {}
    exec(compile(code, "docs/mc.md", "exec"), scope)  # noqa: S102 - the documented example itself
    out, lm = scope["out"], scope["lm"]
    from lm_eval.models.huggingface import HFLM

    from judgecal.loglik.lmeval_tasks import offline_data, task_manager

    with offline_data(data_dir=hub):
        ref = lm_eval.simple_evaluate(model=HFLM(pretrained=str(folder), device="cpu", dtype="float32", batch_size=16),
                                      tasks=["arc_challenge"], num_fewshot=5, limit=10, task_manager=task_manager())
    for m in ("acc,none", "acc_norm,none"):
        assert out["results"]["arc_challenge"][m] == ref["results"]["arc_challenge"][m]
    assert out["n-samples"] == ref["n-samples"] and lm.stats["distinct_requests"] == 40


@pytest.fixture(scope="module")
def wheel_venv(tmp_path_factory) -> Path:
    """judgecal's wheel installed into a fresh virtualenv (dependencies from this one's
    site-packages, appended), as tests/test_wheel.py does."""
    import sysconfig
    import zipfile

    tmp = tmp_path_factory.mktemp("wheel")
    repo = Path(__file__).resolve().parents[1]
    subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(tmp / "dist"), str(repo)],
                   check=True, capture_output=True)
    wheel = next((tmp / "dist").glob("judgecal-*.whl"))
    assert "judgecal-lmeval.pth" in zipfile.ZipFile(wheel).namelist()
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    vpy = venv / "bin" / "python"
    subprocess.run([str(vpy), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)], check=True)
    site = subprocess.run([str(vpy), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    Path(site, "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return venv


def test_lm_eval_command_line_runs_model_judgecal(wheel_venv, hub, folder, tmp_path):
    """`python -m lm_eval run --model judgecal ...` in a virtualenv where judgecal's wheel is
    installed: lm-eval's unmodified CLI finds the name (the wheel's .pth), scores with
    JudgecalLM, and writes its results file; the values are those of `mc score` on the same items."""
    from lm_eval.tasks import __file__ as tasks_init

    shipped = Path(tasks_init).parent / "arc" / "arc_easy.yaml"
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    (tasks / "arc_easy_local.yaml").write_text(
        f"include: {shipped}\ntask: arc_easy_local\ndataset_path: {hub / 'allenai' / 'ai2_arc'}\n", encoding="utf-8")
    env = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/root"), "HF_HUB_OFFLINE": "1",
           "HF_DATASETS_OFFLINE": "1", "HF_DATASETS_CACHE": str(tmp_path / "hf_cache")}
    vpy = wheel_venv / "bin" / "python"
    where = subprocess.run([str(vpy), "-c", "import judgecal; print(judgecal.__file__)"], capture_output=True, text=True,
                           env=env, cwd=tmp_path, check=True).stdout.strip()
    assert where.startswith(str(wheel_venv))  # the wheel's judgecal, not the checkout
    r = subprocess.run([str(vpy), "-m", "lm_eval", "run", "--model", "judgecal", "--model_args",
                        f"pretrained={folder},dtype=float32", "--tasks", "arc_easy_local",  # no --device: as hf, cuda:0 or the CPU
                        "--include_path", str(tasks), "--limit", "3", "--output_path", str(tmp_path / "out")],
                       capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    [res_file] = list((tmp_path / "out").rglob("results_*.json"))
    theirs = json.loads(res_file.read_text(encoding="utf-8"))
    assert theirs["config"]["model"] == "judgecal" and theirs["config"]["judgecal_forward"] == "transformers"
    import torch

    assert theirs["config"]["judgecal_device"] == ("cuda:0" if torch.cuda.device_count() else "cpu")
    from judgecal.loglik.hf import HFScorer
    from judgecal.loglik.lmeval_tasks import score_lm_eval

    ours = score_lm_eval(tasks / "arc_easy_local.yaml", scorer=HFScorer(folder, forward="transformers"), limit=3)
    for m in ("acc", "acc_norm"):
        assert theirs["results"]["arc_easy_local"][f"{m},none"] == ours.metrics[m]["value"]


# ---------------------------------------------------------------- (5) small options
def test_small_options_honoured(hub, folder, run_cli, tmp_path):
    """--limit as a fraction, --seed, --metadata, --write-out, --dtype float16 and the `mc list`
    columns: each does what lm-eval's option does, or is refused with one line."""
    import math

    from judgecal.loglik.lmeval_tasks import load_tasks

    url = f"sqlite:///{tmp_path / 'mc.db'}"
    base = ["--database-url", url, "mc", "score", "--model", str(folder), "--task", "copa", "--data-dir", str(hub)]
    r = run_cli(*base, "--limit", "0.05", "--seed", "0,1234,1234,7", "--metadata", '{"note": "x"}', "--write-out",
                "--num-fewshot", "1", "--format", "json")
    assert r.exit_code == 0, r
    out = json.loads(r.stdout)
    n_docs = len(load_tasks("copa", data_dir=hub).tasks["copa"].eval_docs)
    assert out["n_items"] == math.ceil(0.05 * n_docs) and out["settings"]["limit"] == 0.05
    assert out["settings"]["fewshot_seed"] == 7 and out["settings"]["seeds"] == [0, 1234, 1234, 7]
    assert out["settings"]["metadata"] == {"note": "x"}
    assert "document 0; context prompt" in r.stderr  # lm-eval's own --write_out text
    plain = run_cli(*base, "--limit", "0.05", "--num-fewshot", "1", "--format", "json")
    plain = json.loads(plain.stdout)
    assert plain["settings"]["task_config_sha256"] != out["settings"]["task_config_sha256"]  # metadata is config
    cmp = run_cli("--database-url", url, "mc", "compare", str(plain["run_id"]), str(out["run_id"]), "--format", "json")
    warning = json.loads(cmp.stdout)["warning"]
    assert "seeds (" in warning and "metadata (None vs {'note': 'x'})" in warning and "fewshot_seed (1234 vs 7)" in warning
    listed = run_cli("--database-url", url, "mc", "list", "--format", "json")
    setups = [x["setup"] for x in json.loads(listed.stdout)]
    assert setups[-1] == {"shots": "1", "chat": "-", "seed": "7", "limit": "0.05"}
    table = run_cli("--database-url", url, "mc", "list")
    assert "shots" in table.stdout and "chat" in table.stdout
    for bad, msg in ((["--limit", "1.5"], "fraction"), (["--limit", "0"], "fraction"), (["--seed", "1,2"], "four"),
                     (["--metadata", "[1]"], "JSON object"), (["--log-samples"], "--output-path"),
                     (["--seed", "1", "--fewshot-seed", "2"], "differ")):
        e = run_cli(*base, *bad)
        assert e.exit_code == 2 and msg in e.stderr and "Traceback" not in e.stderr, (bad, e)
    native = run_cli("--database-url", url, "mc", "score", "--model", str(folder), "--task",
                     str(DATA / "copa.jsonl"), "--output-path", str(tmp_path / "o"))
    assert native.exit_code == 2 and "--output-path" in native.stderr


def test_float16_is_honoured(hub, folder):
    """--dtype float16 loads the weights in float16 (log-softmax in float32) and scores as
    lm-eval's HFLM does in float16: the same predictions; log-likelihoods within half
    precision's rounding of different matmul shapes."""
    import lm_eval.evaluator
    from lm_eval.models.huggingface import HFLM

    from judgecal.loglik.lmeval_tasks import offline_data, score_lm_eval, task_manager

    ours = score_lm_eval("arc_easy", folder, dtype="float16", limit=2, data_dir=hub)
    with pytest.MonkeyPatch.context() as mp, offline_data(hub):
        mp.setattr(lm_eval.evaluator, "add_env_info", lambda storage: None)
        ref = lm_eval.simple_evaluate(model=HFLM(pretrained=str(folder), device="cpu", dtype="float16", batch_size=8),
                                      tasks=["arc_easy"], limit=2, task_manager=task_manager(), log_samples=True)
    a = np.array([c.ll for it in ours.items for c in it.choices])
    b = np.array([r[0] for s in sorted(ref["samples"]["arc_easy"], key=lambda s: s["doc_id"]) for r in s["filtered_resps"]])
    assert ours.settings["dtype"] == "float16" and np.max(np.abs(a - b)) < 0.2
    assert ours.metrics["acc"]["value"] == ref["results"]["arc_easy"]["acc,none"]


def test_a_tag_expands_to_its_tasks(hub, folder, run_cli, tmp_path):
    """`--task ai2_arc` (a tag of lm-eval 0.4.13's task files: arc_easy and arc_challenge) runs
    the tasks it names, as lm-eval does: one stored run, each member's metrics equal to that
    task scored on its own."""
    url = f"sqlite:///{tmp_path / 'tag.db'}"
    base = ("--database-url", url, "mc", "score", "--model", str(folder), "--data-dir", str(hub), "--limit", "2",
            "--format", "json")
    r = run_cli(*base, "--task", "ai2_arc")
    assert r.exit_code == 0, r
    run = json.loads(r.stdout)
    kinds = {p["name"]: p["kind"] for p in run["settings"]["lm_eval_tasks"]}
    assert kinds == {"ai2_arc": "tag"}, kinds
    assert run["n_items"] == 4  # 2 of each member
    per_task = run["diagnostics"]["by_task"]
    assert sorted(per_task) == ["arc_challenge", "arc_easy"] and all(v["n"] == 2 for v in per_task.values())
    alone = json.loads(_ok(run_cli(*base, "--task", "arc_easy")).stdout)
    for metric in ("acc", "acc_norm"):
        assert per_task["arc_easy"]["metrics"][metric]["value"] == alone["metrics"][metric]["value"], metric


def _ok(r):
    assert r.exit_code == 0, r
    return r


def test_the_device_is_chosen_as_hf_chooses_it():
    """lm-eval's CLI passes ``--device`` (default ``cuda:0``) to the model; its hf model uses a
    device it knows (cpu, cuda, cuda:N of the GPUs torch sees, mps) and otherwise the GPU or the
    CPU (HFLM.__init__). JudgecalLM does the same (the issue: without --device, --model judgecal
    failed on a machine without CUDA where --model hf ran on the CPU)."""
    import torch

    from judgecal.loglik.lmeval_lm import hf_device

    gpus = torch.cuda.device_count()
    fallback = "cuda" if torch.cuda.is_available() else "cpu"
    assert hf_device("cpu") == "cpu" and hf_device("cuda") == "cuda"  # given: used (cuda without a GPU fails later, clearly)
    assert hf_device("cuda:0") == ("cuda:0" if gpus else fallback)
    assert hf_device(None) == fallback and hf_device("tpu") == fallback and hf_device(f"cuda:{gpus}") == fallback
