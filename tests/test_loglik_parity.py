"""Parity with lm-evaluation-harness (HF backend) on real ARC-Easy items and the SmolLM2 folder.

Both run here, in-process, on the same folder, float32, CPU: every per-choice log-likelihood
must agree within 1e-4 nats and acc / acc_norm must be identical, with judgecal's fused Llama forward
(the default for SmolLM2) and with the model's own transformers forward.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

os.environ["HF_HUB_OFFLINE"] = "1"

from judgecal.config import shared_data_dir  # noqa: E402
DATA = shared_data_dir()
ARC = DATA / "mc" / "arc_easy.jsonl"
N_ITEMS = 50

pytestmark = [pytest.mark.slow, pytest.mark.model]


@pytest.fixture(scope="module")
def model_folder():
    from judgecal import config
    from judgecal.localmodel import is_complete

    folder = config.default_model_dir()
    if not is_complete(folder):
        pytest.skip(f"SmolLM2 folder missing at {folder}: run `judgecal model pull`")
    if not ARC.exists():
        pytest.skip(f"real data folder absent: {ARC}")
    return folder


@pytest.fixture(scope="module")
def lm_eval_run(model_folder):
    """lm-evaluation-harness's (loglikelihood, is_greedy) for the first N_ITEMS ARC-Easy items."""
    from lm_eval.api.instance import Instance
    from lm_eval.models.huggingface import HFLM

    from judgecal.loglik.tasks import load_jsonl

    task = load_jsonl(ARC, prompt="{query}\nAnswer:", limit=N_ITEMS)
    lm = HFLM(pretrained=str(model_folder), device="cpu", dtype="float32", batch_size=16)
    reqs = [Instance("loglikelihood", doc={}, arguments=(it.context, " " + c), idx=j)
            for it in task.items for j, c in enumerate(it.choices)]
    return task, lm.loglikelihood(reqs, disable_tqdm=True)


@pytest.mark.parametrize("forward", ["fused", "transformers"])
def test_loglikelihoods_match_lm_eval(model_folder, lm_eval_run, forward):
    from judgecal.loglik.score import score_task

    task, theirs = lm_eval_run
    ours = score_task(task, model_folder, device="cpu", dtype="float32", batch_size="auto", forward=forward,
                      null_context=None)
    assert ours.settings["forward"] == forward
    ll_ours = np.array([c.ll for r in ours.items for c in r.choices])
    ll_theirs = np.array([ll for ll, _ in theirs])
    assert ll_ours.shape == (sum(len(it.choices) for it in task.items),)
    assert np.max(np.abs(ll_ours - ll_theirs)) < 1e-4
    greedy_ours = [c.is_greedy for r in ours.items for c in r.choices]
    assert greedy_ours == [bool(g) for _, g in theirs]

    # acc / acc_norm exactly as lm_eval/api/task.py multiple_choice process_results
    k = 0
    acc = acc_norm = 0.0
    for it in task.items:
        lls = ll_theirs[k:k + len(it.choices)]
        k += len(it.choices)
        acc += float(np.argmax(lls) == it.gold)
        acc_norm += float(np.argmax(lls / np.array([float(len(c)) for c in it.choices])) == it.gold)
    assert ours.metrics["acc"]["value"] == acc / N_ITEMS
    assert ours.metrics["acc_norm"]["value"] == acc_norm / N_ITEMS
    assert ours.diagnostics["boundary_fixes"] == 0
