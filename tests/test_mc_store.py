"""``judgecal.views.mc``: score real items, store the run in SQLite, list, load and compare runs."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from judgecal.views import mc
from judgecal.errors import NotFoundError

from test_mc_lmeval_layout import DATA, model_folder_or_skip


@pytest.fixture(scope="module")
def folder():
    return model_folder_or_skip()


@pytest.mark.model
def test_score_store_load_compare(folder, tmp_path):
    url = f"sqlite:///{tmp_path / 'mc.db'}"
    task = DATA / "copa.jsonl"
    id_a, res_a = mc.score(task, str(folder), limit=4, prompt="{query}", db_url=url)
    id_b, res_b = mc.score(task, str(folder), limit=4, prompt="{query}", null_context=None, db_url=url)
    assert id_a != id_b

    run = mc.load_run(id_a, url)
    assert run["dataset_sha256"] == hashlib.sha256(task.read_bytes()).hexdigest()
    assert run["n_items"] == 4 and run["backend"] == "hf" and run["task"] == "copa"
    assert run["metrics"]["acc"] == pytest.approx(res_a.metrics["acc"])
    assert run["settings"]["null_context"] == "Answer:" and run["settings"]["prompt"] == "{query}"
    first = run["items"][0]
    assert first["gold"] == 1 and len(first["choices"]) == 2
    assert first["choices"][0]["n_chars"] == len("the toilet filled with water.")
    assert first["choices"][0]["ll"] == pytest.approx(res_a.items[0].choices[0].ll)
    assert first["pred_acc_pmi"] is not None
    assert mc.load_run(id_b, url)["items"][0]["pred_acc_pmi"] is None

    listed = mc.list_runs(url)
    assert [r["id"] for r in listed] == [id_b, id_a]

    cmp = mc.compare(id_a, id_b, url)
    assert cmp["same_dataset"]
    # same model, same items: acc and acc_norm do not move
    assert cmp["deltas"]["acc"]["delta"] == 0.0 and not cmp["opposite_directions"]
    assert "acc_pmi" not in cmp["deltas"]  # run b has no PMI pass
    # ... and the warning says so: null_context differs and acc_pmi is in one run only
    assert "null_context ('Answer:' vs None)" in cmp["warning"] and "acc_pmi" in cmp["warning"]
    id_c, _ = mc.score(task, str(folder), limit=3, prompt="Q: {query}", db_url=url)
    warn = mc.compare(id_a, id_c, url)["warning"]
    assert "different numbers of items (4 vs 3)" in warn and "prompt ('{query}' vs 'Q: {query}')" in warn

    with pytest.raises(NotFoundError, match="no multiple-choice run with id 999"):
        mc.load_run(999, url)
