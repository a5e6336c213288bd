"""Scorer exactness (issue 33, item 6).

- Exact ties: an item whose prediction under a metric is decided by an exact tie (the argmax
  of the metric's scores has several equal maxima; np.argmax takes the first, lm-eval's rule,
  kept) is counted per metric, stored with the run's diagnostics and shown by ``mc score``,
  ``mc list`` and ``mc compare``. Unit tests on arrays, and a known answer on the real
  SmolLM2: a hand-made task where two choices are the same string (a tie in every dtype) and
  one where they differ.
- Batch-size independence: per-choice log-likelihoods (and the PMI pass's) of real ARC-Easy
  items are the same at ``--batch-size`` 1, 3, 16 and auto, to 1e-5 nats (hf.py computes
  each unit in a row of its own, at offset 0, padded to a length that depends on the unit
  alone; on this CPU they agree to the bit).
"""

from __future__ import annotations

import json
import math
import os

import numpy as np
import pytest

os.environ["HF_HUB_OFFLINE"] = "1"

from judgecal.config import shared_data_dir  # noqa: E402
from judgecal.loglik import metrics as M  # noqa: E402

ARC = shared_data_dir() / "mc" / "arc_easy.jsonl"


# ---------------------------------------------------------------- counting ties, on arrays

def test_exact_tie_on_arrays():
    assert M.exact_tie([-1.0, -1.0, -2.0])
    assert M.exact_tie([-2.0, -1.0, -1.0])  # the tie need not involve the first choice
    assert M.exact_tie([-3.0, -1.5, -2.0, -1.5])
    assert not M.exact_tie([-1.0, -2.0, -2.0])  # equal values below the maximum decide nothing
    assert not M.exact_tie([-1.0, np.nextafter(-1.0, 0.0)])  # one ulp apart: no tie
    assert not M.exact_tie([-1.0])
    assert not M.exact_tie([])
    assert M.exact_tie([-math.inf, -math.inf])  # both impossible: argmax takes the first
    assert not M.exact_tie([-1.0, math.nan, -1.0])  # argmax takes the NaN, not one of the tied values
    assert M.exact_tie(np.array([-2.5, -2.5], dtype=np.float32))


def test_item_ties_per_metric_and_counts():
    # acc: -2 vs -4, no tie; per character -2/1 == -4/2: a tie under acc_norm only (bytes too:
    # ASCII); per token -2/1 vs -4/1
    ties = M.item_ties([-2.0, -4.0], chars=[1, 2], nbytes=[1, 2], ntokens=[1, 1])
    assert ties == ["acc_norm", "acc_bytes"]
    # the prediction under a tie stays lm-eval's: the first of the tied choices
    assert M.item_predictions([-2.0, -4.0], [1, 2], [1, 2], [1, 1])["acc_norm"] == 0
    assert M.item_predictions([-4.0, -2.0, -2.0], [1, 1, 1], [1, 1, 1], [1, 1, 1])["acc"] == 1
    # per token: -3/1 vs -6/2; PMI: (-3 - -1) vs (-6 - -4)
    ties = M.item_ties([-3.0, -6.0], chars=[4, 4], nbytes=[4, 5], ntokens=[1, 2], ll_null=[-1.0, -4.0])
    assert ties == ["acc_per_token", "acc_pmi"]
    assert M.item_ties([-1.0, -1.0], [3, 3], [3, 3], [1, 1]) == ["acc", "acc_norm", "acc_bytes", "acc_per_token"]
    assert M.item_ties([-1.0, -1.0], [3, 3], [3, 3], [1, 1], [-2.0, -2.0]) == list(M.METRICS)
    assert M.item_ties([-1.0, -2.0], [3, 3], [3, 3], [1, 1], [-2.0, -3.0]) == ["acc_pmi"]
    assert M.count_ties([["acc", "acc_norm"], [], ["acc"]], ["acc", "acc_norm", "acc_pmi"]) == {
        "acc": 2, "acc_norm": 1, "acc_pmi": 0}
    d = M.diagnostics([["a", "b"]], {"acc": {"value": 1.0}}, ties={"acc": 0})
    assert d["ties"] == {"acc": 0}
    assert "ties" not in M.diagnostics([["a", "b"]], {"acc": {"value": 1.0}})


def test_ties_rendering():
    from judgecal.report.mc_tables import ties_cell, ties_line

    assert ties_line({"acc": 2, "acc_norm": 1, "acc_bytes": 0}) == (
        "ties: 2 items decided by an exact tie (acc), 1 (acc_norm); the first tied choice is predicted, as in lm-eval")
    assert ties_line({"acc": 0, "acc_norm": 1}).startswith("ties: 1 item decided by an exact tie (acc_norm);")
    assert ties_line({"acc": 0}) == "ties: no prediction decided by an exact tie"
    assert ties_line(None) is None  # a run stored before ties were counted
    assert ties_cell({"ties": {"acc": 3, "acc_norm": 1}}) == "3/1"
    assert ties_cell({}) == "-"


# ---------------------------------------------------------------- the real model

@pytest.fixture(scope="module")
def folder():
    from judgecal import config
    from judgecal.localmodel import is_complete

    f = config.default_model_dir()
    if not is_complete(f):
        pytest.skip(f"SmolLM2 folder missing at {f}: run `judgecal model pull`")
    return f


@pytest.fixture(scope="module")
def scorer(folder):
    from judgecal.loglik.hf import HFScorer

    return HFScorer(folder)


@pytest.mark.model
def test_identical_choices_are_counted_as_ties_differing_ones_not(folder, run_cli, tmp_path):
    """Known answer: item 0 lists " Paris" twice (the same string, so the same
    log-likelihood in every dtype: a tie under every metric, the prediction the first copy);
    item 1's choices differ (no tie). Through the CLI: the counts are stored with the run's
    diagnostics and shown by ``mc score`` (text and JSON), ``mc list`` and ``mc compare``."""
    task = tmp_path / "ties.jsonl"
    rows = [{"query": "Question: What is the capital of France?", "choices": ["Paris", "Paris"], "gold": 1},
            {"query": "Question: What is the capital of France?", "choices": ["Paris", "Rome"], "gold": 0}]
    task.write_text("".join(json.dumps(r) + "\n" for r in rows))
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    r = run_cli("--database-url", url, "mc", "score", "--model", str(folder), "--task", str(task), "--format", "json")
    assert r.exit_code == 0, r
    got = json.loads(r.stdout)
    ties = got["diagnostics"]["ties"]
    assert ties == {m: 1 for m in M.METRICS}
    run_id = got["run_id"]

    from judgecal.views import mc as mc_mod

    run = mc_mod.load_run(run_id, url)
    assert run["diagnostics"]["ties"] == ties  # stored with the run
    it0, it1 = run["items"]
    assert it0["choices"][0]["ll"] == it0["choices"][1]["ll"]
    assert it0["pred_acc"] == 0 and it0["pred_acc_norm"] == 0 and it0["pred_acc_pmi"] == 0  # lm-eval's rule: the first
    assert it1["choices"][0]["ll"] != it1["choices"][1]["ll"]

    text = run_cli("--database-url", url, "mc", "score", "--model", str(folder), "--task", str(task), "--no-pmi")
    assert text.exit_code == 0, text
    assert ("ties: 1 item decided by an exact tie (acc), 1 (acc_norm), 1 (acc_bytes), 1 (acc_per_token); "
            "the first tied choice is predicted, as in lm-eval") in " ".join(text.stdout.split())
    listing = run_cli("--database-url", url, "mc", "list")
    assert listing.exit_code == 0 and "1/1" in listing.stdout
    cmp = run_cli("--database-url", url, "mc", "compare", str(run_id), str(run_id + 1), "--format", "json")
    assert json.loads(cmp.stdout)["ties"]["a"] == ties
    cmp = run_cli("--database-url", url, "mc", "compare", str(run_id), str(run_id + 1))
    assert cmp.exit_code == 0
    flat = " ".join(cmp.stdout.split())
    assert f"run {run_id} ties: 1 item decided by an exact tie (acc)" in flat
    assert f"run {run_id + 1} ties: 1 item decided by an exact tie (acc)" in flat


@pytest.mark.model
def test_duplicate_choices_of_several_tokens_tie_exactly(scorer):
    """Break-it of issue 33: a choice listed twice whose continuation has several tokens
    (" 4" is " " + "4" for SmolLM2's tokenizer) was scored twice in the item's row, the second
    copy at other offsets: -2.7259448 vs -2.7259384 nats, so the second copy won by rounding and
    no tie was counted (lm-eval scores one request for both). Now they are one continuation
    scored once: equal to the bit, a tie under every metric, the first copy predicted, and the
    distinct choice keeps the number it has without the duplicate."""
    from judgecal.loglik.score import score_task
    from judgecal.loglik.split import EncodedGroup
    from judgecal.loglik.tasks import McItem, McTask

    enc = scorer.encoder.encode_groups([("What is 2+2?\nAnswer:", [" 4", " 4", " 5"])])[0]
    assert len(enc.conts[0]) >= 2 and enc.conts[0] == enc.conts[1]
    (row,) = scorer.score_groups([enc], batch_size=1)
    assert row[0].ll == row[1].ll and row[0] is not row[1]
    (alone,) = scorer.score_groups([EncodedGroup(enc.ctx, [enc.conts[0], enc.conts[2]])], batch_size=1)
    assert [row[0].ll, row[2].ll] == [alone[0].ll, alone[1].ll]
    task = McTask("dup", [McItem("What is 2+2?\nAnswer:", ("4", "4", "5"), 1)])
    res = score_task(task, scorer=scorer, batch_size="auto")
    assert res.diagnostics["ties"] == {m: 1 for m in M.METRICS}
    assert res.items[0].predictions["acc"] == 0


@pytest.mark.model
def test_scores_do_not_depend_on_batch_size(scorer):
    """Per-choice log-likelihoods of 20 real ARC-Easy items and of their null-context (PMI)
    pass at --batch-size 1, 3, 16 and auto: max |difference| <= 1e-5 nats (float32, CPU).
    Before, the same items differed by up to 2.0e-5 between 1 and 16."""
    from judgecal.loglik.score import score_task
    from judgecal.loglik.tasks import load_task

    if not ARC.exists():
        pytest.skip(f"real data folder absent: {ARC}")
    task = load_task(ARC, limit=20)
    lls = {}
    for bs in (1, 3, 16, "auto"):
        res = score_task(task, scorer=scorer, batch_size=bs)
        lls[bs] = np.array([[c.ll, c.ll_null] for it in res.items for c in it.choices])
        assert res.diagnostics["ties"]["acc"] == 0
    assert lls[1].shape == (sum(len(it.choices) for it in task.items), 2)
    for bs in (3, 16, "auto"):
        diff = float(np.abs(lls[bs] - lls[1]).max())
        assert diff <= 1e-5, f"--batch-size {bs} vs 1: {diff:.3g} nats"


def test_plan_batches_one_padded_length_per_pass():
    """Every unit is its own row; a pass holds units of one padded length, longest first; the
    padded length is a function of the unit's own length."""
    from judgecal.loglik.hf import MIN_ROW, PAD_MULTIPLE, HFScorer, padded_length

    assert padded_length(1) == MIN_ROW and padded_length(MIN_ROW + 1) == MIN_ROW + PAD_MULTIPLE
    assert padded_length(64) == 64 and padded_length(65) == 64 + PAD_MULTIPLE
    assert padded_length(65, 4) == 68 and padded_length(3, 4) == MIN_ROW
    lengths = [30, 100, 31, 29, 99, 5, 40]
    for bs in (1, 2, 3, 16, "auto"):
        # the transformers forward: one padded length a pass
        passes = HFScorer.plan_batches(lengths, bs, token_budget=96)
        assert sorted(i for p in passes for i in p) == list(range(len(lengths)))
        for p in passes:
            assert len({padded_length(lengths[i]) for i in p}) == 1
            if bs != "auto":
                assert len(p) <= bs
            else:
                assert len(p) == 1 or len(p) * padded_length(lengths[p[0]]) <= 96
        widths = [padded_length(lengths[p[0]]) for p in passes]
        assert widths == sorted(widths, reverse=True)
        # the fused forward: several lengths a pass, longest first, under the budget
        passes = HFScorer.plan_batches(lengths, bs, token_budget=96, mixed=True, multiple=4)
        order = [i for p in passes for i in p]
        assert order == sorted(range(len(lengths)), key=lambda i: (-padded_length(lengths[i], 4), -lengths[i]))
        for p in passes:
            if bs != "auto":
                assert len(p) <= bs
            else:
                assert len(p) == 1 or sum(padded_length(lengths[i], 4) for i in p) <= 96
    assert HFScorer.plan_batches(lengths, 16, mixed=True) == [sorted(range(7), key=lambda i: -lengths[i])]
    with pytest.raises(Exception, match="batch-size"):
        HFScorer.plan_batches(lengths, 0)


@pytest.mark.model
def test_bfloat16_ties_are_counted(folder):
    """The issue's case: under bfloat16 the choices " 1000" and " 1001" can get exactly equal
    log-likelihoods (they differ in their last digit token only, and bfloat16 logits are
    coarse); on this project's CPUs 3 of these 34 sums do (954 + 46 among them), where float32
    has no tie and picks " 1001" for 954 + 46. Whatever the kernels round to, the count is the
    number of items whose two log-likelihoods are equal, and a tied item's prediction is the
    first choice (lm-eval's rule)."""
    from judgecal.loglik.hf import HFScorer
    from judgecal.loglik.score import score_task
    from judgecal.loglik.tasks import McItem, McTask

    items = [McItem(f"Question: What is {a} + {1000 - a}?\nAnswer:", ("1000", "1001"), 1) for a in range(900, 1000, 3)]
    res = score_task(McTask("sums", items), scorer=HFScorer(folder, dtype="bfloat16"), null_context=None)
    equal = [it.choices[0].ll == it.choices[1].ll for it in res.items]
    assert any(equal), "no sum ties under bfloat16 on this CPU any more: pick other examples"
    assert res.diagnostics["ties"]["acc"] == sum(equal)
    for it, eq in zip(res.items, equal):
        assert ("acc" in it.ties) == eq
        if eq:
            assert it.predictions["acc"] == 0


@pytest.mark.model
def test_truncated_contexts_are_counted(scorer):
    """A context longer than the model's positions is cut on the left (lm-eval's rule) and the
    run says so: ``diagnostics.truncated_requests`` counts the continuations scored after a cut
    (here the 3 choices of the long item; the short item's 2 are whole), and the terminal table
    prints the note. Was: cut without a word."""
    from judgecal.loglik.score import score_task
    from judgecal.loglik.tasks import McItem, McTask
    from judgecal.report.mc_tables import metrics_renderable
    from rich.console import Console

    items = [McItem("Question: " + "the sky is blue and " * 40 + "what colour is the sky?\nAnswer:", ("blue", "red", "green"), 0),
             McItem("Question: What is 2 + 2?\nAnswer:", ("4", "5"), 0)]
    keep = scorer.max_length
    scorer.max_length = 64  # tokens: the first context (~200 tokens) no longer fits
    try:
        res = score_task(McTask("long", items), scorer=scorer, null_context=None)
    finally:
        scorer.max_length = keep
    assert res.diagnostics["truncated_requests"] == 3
    whole = score_task(McTask("short", items[1:]), scorer=scorer, null_context=None)
    assert whole.diagnostics["truncated_requests"] == 0
    con = Console(width=200, record=True)
    con.print(metrics_renderable(res.metrics, res.diagnostics))
    assert "note: 3 continuations scored after a context cut on the left" in con.export_text()
