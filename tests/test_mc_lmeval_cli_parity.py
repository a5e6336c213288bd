"""One lm-eval command line, `--model hf` and `--model judgecal` (issue 36 item 1, done-when):
the same `python -m lm_eval run ...` a user types, without `--device` and without `dtype`, in
two subprocesses; the results files and the `--log_samples` files must agree.

Data: the local copies of real data built by tests/test_mc_lmeval_layout.py (ARC-Easy items in
lm-eval's shipped arc_easy config; ARC items in lm-eval's shipped MMLU astronomy config, whose
one-letter answers make some choices the model's greedy token, so is_greedy is compared on both
values). References are lm-eval 0.4.13's own `--model hf` outputs, never hard-coded figures.

Tolerances: acc, acc_norm and their stderrs are means of per-item 0/1 predictions, so they must
be equal (the predictions are compared one by one as well); a per-request log-likelihood may
differ by rounding only: judgecal's transformers forward runs the same float32 model on rows
packed differently (a context with all its choices), measured within ~3e-5 nats of hf's (2.1e-5
here, over 32 requests, 3 of them greedy); the bound is the 1e-4 nats of the other parity tests (tests/test_mc_lmeval.py), far
below the smallest gap that could change a prediction in these items (checked: no prediction
changes).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from test_mc_lmeval_layout import build_hub_mirror, model_folder_or_skip  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.model, pytest.mark.long]

lm_eval = pytest.importorskip("lm_eval")

LL_TOL = 1e-4  # nats, as tests/test_mc_lmeval.py


def _tasks(tmp: Path, hub: Path) -> Path:
    from lm_eval.tasks import __file__ as tasks_init

    shipped = Path(tasks_init).parent
    d = tmp / "tasks"
    d.mkdir()
    (d / "arc_easy_local.yaml").write_text(
        f"include: {shipped / 'arc' / 'arc_easy.yaml'}\ntask: arc_easy_local\n"
        f"dataset_path: {hub / 'allenai' / 'ai2_arc'}\n", encoding="utf-8")
    (d / "mmlu_astronomy_local.yaml").write_text(
        f"include: {shipped / 'mmlu' / 'default' / 'mmlu_astronomy.yaml'}\ntask: mmlu_astronomy_local\n"
        f"dataset_path: {hub / 'cais' / 'mmlu'}\n", encoding="utf-8")
    return d


def _read(out: Path) -> tuple[dict, dict[str, list[dict]]]:
    [res] = list(out.rglob("results_*.json"))
    samples = {}
    for f in out.rglob("samples_*.jsonl"):
        task = f.name[len("samples_"):].rsplit("_", 1)[0]
        samples[task] = sorted((json.loads(line) for line in f.read_text(encoding="utf-8").splitlines()),
                               key=lambda r: r["doc_id"])
    return json.loads(res.read_text(encoding="utf-8")), samples


def test_same_command_line_with_model_hf_and_model_judgecal(tmp_path):
    folder = model_folder_or_skip()
    if not Path(sysconfig.get_paths()["purelib"], "judgecal-lmeval.pth").exists():
        pytest.skip("judgecal-lmeval.pth is not installed in this environment: `--model judgecal` is unknown to "
                    "lm-eval's command line here (tests/test_mc_lmeval_dropin.py tests it from the wheel)")
    hub = build_hub_mirror(tmp_path / "hub")
    tasks = _tasks(tmp_path, hub)
    procs = {}
    for model in ("hf", "judgecal"):
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
               "HF_DATASETS_CACHE": str(tmp_path / f"hf_cache_{model}"), "CUDA_VISIBLE_DEVICES": ""}
        # as a user types it: no --device (lm-eval's default cuda:0 -> the CPU here), no dtype (hf's auto)
        argv = [sys.executable, "-m", "lm_eval", "run", "--model", model, "--model_args", f"pretrained={folder}",
                "--tasks", "arc_easy_local,mmlu_astronomy_local", "--include_path", str(tasks),
                "--num_fewshot", "2", "--limit", "5", "--output_path", str(tmp_path / f"out_{model}"),
                "--log_samples"]
        procs[model] = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                                        cwd=tmp_path)
    for model, p in procs.items():  # the two run side by side (each is mostly lm-eval's start-up)
        log, _ = p.communicate(timeout=900)
        assert p.returncode == 0, f"--model {model}:\n{log[-3000:]}"
    hf_res, hf_samples = _read(tmp_path / "out_hf")
    jc_res, jc_samples = _read(tmp_path / "out_judgecal")

    assert hf_res["config"]["model"] == "hf" and jc_res["config"]["model"] == "judgecal"
    assert jc_res["config"]["judgecal_device"] == "cpu" and jc_res["config"]["model_dtype"] == "torch.float32"
    assert jc_res["config"]["model_args"] == hf_res["config"]["model_args"]
    for key in ("results", "configs", "versions", "n-shot", "n-samples", "higher_is_better", "task_hashes"):
        assert jc_res[key] == hf_res[key], key  # acc, acc_norm and stderrs equal, not merely close
    for key in ("batch_size", "limit", "random_seed", "numpy_seed", "torch_seed", "fewshot_seed",
                "model_num_parameters"):
        assert jc_res["config"][key] == hf_res["config"][key], key
    assert set(hf_res["results"]) == {"arc_easy_local", "mmlu_astronomy_local"}
    assert hf_res["n-samples"]["arc_easy_local"]["effective"] == 5

    assert set(jc_samples) == set(hf_samples) == {"arc_easy_local", "mmlu_astronomy_local"}
    worst, greedy = 0.0, {True: 0, False: 0}
    for task, rows in hf_samples.items():
        assert [r["doc_id"] for r in jc_samples[task]] == [r["doc_id"] for r in rows]
        for ours, theirs in zip(jc_samples[task], rows):
            for k in ("doc", "target", "arguments", "filter", "metrics", "doc_hash", "prompt_hash", "target_hash",
                      "acc", "acc_norm"):
                assert ours.get(k) == theirs.get(k), (task, theirs["doc_id"], k)
            assert len(ours["resps"]) == len(theirs["resps"]) == len(theirs["filtered_resps"])
            for (a,), (b,), fb in zip(ours["resps"], theirs["resps"], theirs["filtered_resps"]):
                assert fb == b  # lm-eval's "none" filter keeps each response
                worst = max(worst, abs(float(a[0]) - float(b[0])))
                assert a[1] == b[1], (task, theirs["doc_id"], "is_greedy")
                greedy[b[1] == "True"] += 1
            assert [x[0] for x in ours["filtered_resps"]] == [x[0] for (x,) in ours["resps"]]
    assert worst < LL_TOL, worst
    assert greedy[True] > 0 and greedy[False] > 0, greedy  # both values of is_greedy were compared
