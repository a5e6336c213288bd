"""Perplexity tasks (lm-eval ``output_type: loglikelihood_rolling``) through judgecal's scorer.

The reference is lm-eval 0.4.13 itself: ``simple_evaluate`` with its HF backend (``HFLM``,
the same SmolLM2 folder, float32, CPU) on a local task YAML built here: four documents from
the shared AlpacaEval outputs (real text, 150 to 1100 characters), ``doc_to_target`` the
text, word_perplexity, byte_perplexity and bits_per_byte as lm-eval's wikitext config names
them. Both models run with ``max_length=64`` so that every document but the shortest spans
several of lm-eval's rolling windows (the longest, 279 tokens, five).

Asserted: per-document log-likelihoods within 1e-4 nats of HFLM's (measured: 1.8e-5), the
three metrics within a relative 1e-6 (measured: 3.5e-8), the token counts and windows being
lm-eval's own (``get_rolling_token_windows`` on HFLM's ``tok_encode``), and that the windows
matter (the long document scores differently with the model's full context).
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from test_mc_lmeval_layout import model_folder_or_skip  # noqa: E402

from judgecal.config import shared_data_dir  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.model]

lm_eval = pytest.importorskip("lm_eval")

MAX_LENGTH = 64
METRICS = ("word_perplexity", "byte_perplexity", "bits_per_byte")


def documents() -> list[str]:
    """Four real texts (AlpacaEval's GPT-4 outputs), cut to 150-1100 characters."""
    rows = json.loads((shared_data_dir() / "alpaca_eval" / "gpt4_1106_preview.json").read_text())
    return [rows[6]["output"], rows[7]["output"][:300], rows[0]["output"][:1100], rows[12]["output"][:150]]


def write_task(folder: Path, docs: list[str], name: str = "ppl_local") -> Path:
    """A local lm-eval perplexity task: JSONL documents + YAML (wikitext's metric_list)."""
    data = folder / f"{name}.jsonl"
    data.write_text("".join(json.dumps({"text": t}) + "\n" for t in docs))
    y = folder / f"{name}.yaml"
    y.write_text(f"task: {name}\ndataset_path: json\ndataset_kwargs:\n  data_files:\n    test: {data}\n"
                 "output_type: loglikelihood_rolling\ntest_split: test\ndoc_to_text: \"\"\n"
                 "doc_to_target: \"{{text}}\"\nmetric_list:\n"
                 + "".join(f"  - metric: {m}\n" for m in METRICS) + "metadata:\n  version: 1.0\n")
    return y


@pytest.fixture(scope="module")
def folder():
    return model_folder_or_skip()


@pytest.fixture(scope="module")
def task_yaml(tmp_path_factory) -> Path:
    return write_task(tmp_path_factory.mktemp("ppl"), documents())


@pytest.fixture(scope="module")
def scorer(folder):
    from judgecal.loglik.hf import HFScorer

    return HFScorer(folder, device="cpu", dtype="float32", forward="transformers")


@pytest.fixture(scope="module")
def hflm(folder):
    from lm_eval.models.huggingface import HFLM

    return HFLM(pretrained=str(folder), device="cpu", dtype="float32", batch_size=4, max_length=MAX_LENGTH)


def _evaluate(lm, task_yaml: Path) -> dict:
    import lm_eval.evaluator

    from judgecal.loglik.lmeval_tasks import offline_data, task_manager

    with pytest.MonkeyPatch.context() as mp, offline_data():
        mp.setattr(lm_eval.evaluator, "add_env_info", lambda storage: None)
        return lm_eval.simple_evaluate(model=lm, tasks=[str(task_yaml)], log_samples=True,
                                       task_manager=task_manager(include_defaults=False))


@pytest.fixture(scope="module")
def reference(hflm, task_yaml) -> dict:
    return _evaluate(hflm, task_yaml)


def test_rolling_perplexity_equals_lm_eval_hf(scorer, hflm, task_yaml, reference):
    from lm_eval.utils import get_rolling_token_windows

    from judgecal.loglik.lmeval_lm import JudgecalLM

    lm = JudgecalLM(scorer=scorer, max_length=str(MAX_LENGTH))  # as --model_args max_length=64 passes it
    assert lm.max_length == MAX_LENGTH and scorer.max_length == 8192  # the scorer passed in is left as it was
    ours = _evaluate(lm, task_yaml)
    ref_ll = [s["filtered_resps"][0] for s in reference["samples"]["ppl_local"]]
    our_ll = [s["filtered_resps"][0] for s in ours["samples"]["ppl_local"]]
    assert len(our_ll) == 4 and max(abs(a - b) for a, b in zip(our_ll, ref_ll)) < 1e-4
    for m in METRICS:
        ref, got = reference["results"]["ppl_local"][f"{m},none"], ours["results"]["ppl_local"][f"{m},none"]
        assert math.isclose(got, ref, rel_tol=1e-6), (m, got, ref)
    # the tokens and windows are lm-eval's own: HFLM's tok_encode, lm-eval's window function
    docs = documents()
    windows = [len(list(get_rolling_token_windows(hflm.tok_encode(t), hflm.prefix_token_id, MAX_LENGTH, 1)))
               for t in docs]
    assert [lm.rolling_windows[t] for t in docs] == windows == [2, 2, 5, 1]
    assert [lm.rolling_tokens[t] for t in docs] == [len(hflm.tok_encode(t)) for t in docs]
    # the windows matter: with the model's own 8192 positions the long document scores otherwise
    full = JudgecalLM(scorer=scorer).loglikelihood_rolling([(docs[2],)])[0]
    assert full - our_ll[2] > 1.0  # more context, higher log-likelihood (nats)
    # max_length also cuts loglikelihood requests' contexts on the left, as HFLM's does
    from lm_eval.api.instance import Instance

    cut = docs[2].rfind(" ", 0, len(docs[2]) - 40)  # at a word boundary (no token spans it)
    req = [Instance("loglikelihood", {}, (docs[2][:cut], docs[2][cut:]), 0)]
    assert abs(lm.loglikelihood(req)[0][0] - hflm.loglikelihood(req)[0][0]) < 1e-4
    assert lm.stats["truncated_requests"] == 1 and lm.stats["boundary_fixes"] == 0
    # an empty text scores 0.0 with no window, as in HFLM; the endpoint backend refuses by name
    assert lm.loglikelihood_rolling([("",)]) == [0.0]
    with pytest.raises(NotImplementedError, match="loglikelihood_rolling"):
        JudgecalLM(base_url="http://127.0.0.1:9/v1", model="m").loglikelihood_rolling([("text",)])


def test_max_length_model_arg_is_checked(scorer):
    from judgecal.loglik.lmeval_lm import JudgecalLM

    for bad in ("0", "x", 1):
        with pytest.raises(ValueError, match="max_length must be an integer >= 2"):
            JudgecalLM(scorer=scorer, max_length=bad)
    with pytest.raises(ValueError, match="max_length applies to a local model, not to base_url"):
        JudgecalLM(base_url="http://127.0.0.1:9/v1", model="m", max_length=64)


def test_max_length_with_base_url_is_refused(task_yaml, run_cli, sqlite_url):
    r = run_cli("--database-url", sqlite_url, "mc", "score", "--model", "m", "--base-url", "http://127.0.0.1:9/v1",
                "--task", str(task_yaml), "--max-length", "64")
    assert r.exit_code != 0 and "--max-length applies to a local model, not to --base-url" in r.output


def test_mc_score_reports_perplexity_and_stores_it(folder, task_yaml, reference, pg_url, run_cli, tmp_path):
    """`judgecal mc score` on the perplexity task: lm-eval's three metrics as lm-eval's results
    file has them (the same run's file, --output-path), stored with the run (PostgreSQL),
    every document's figures in the diagnostics, bits/byte in `mc list`."""
    base = ["--database-url", pg_url, "mc", "score", "--model", str(folder), "--task", str(task_yaml),
            "--max-length", str(MAX_LENGTH)]
    r = run_cli(*base, "--format", "json", "--output-path", str(tmp_path / "out"), "--log-samples")
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert out["n_items"] == 4 and out["settings"]["max_length"] == MAX_LENGTH
    file = json.loads(Path(out["output_files"]["results"]).read_text())
    assert file["config"]["model_args"]["max_length"] == MAX_LENGTH
    for m in METRICS:
        assert out["metrics"][m]["value"] == file["results"]["ppl_local"][f"{m},none"]
        assert out["metrics"][m]["source"] == "lm-eval"
        assert math.isclose(out["metrics"][m]["value"], reference["results"]["ppl_local"][f"{m},none"], rel_tol=1e-6)
    docs = out["diagnostics"]["documents"]
    assert [d["windows"] for d in docs] == [2, 2, 5, 1] and out["diagnostics"]["rolling_windows"] == 10
    ref_samples = reference["samples"]["ppl_local"]
    assert [d["bytes"] for d in docs] == [s["bits_per_byte"][1] for s in ref_samples]
    assert [d["words"] for d in docs] == [s["word_perplexity"][1] for s in ref_samples]
    bpb = -sum(d["ll"] for d in docs) / sum(d["bytes"] for d in docs) / math.log(2)
    assert math.isclose(bpb, out["metrics"]["bits_per_byte"]["value"], rel_tol=1e-12)
    listed = run_cli("--database-url", pg_url, "mc", "list", "--format", "json")
    run = json.loads(listed.output)[0]
    assert run["id"] == out["run_id"] and run["n_items"] == 4
    assert run["metrics"]["bits_per_byte"]["value"] == out["metrics"]["bits_per_byte"]["value"]
    table = run_cli("--database-url", pg_url, "mc", "list")
    assert "bits/byte" in table.output and f"{out['metrics']['bits_per_byte']['value']:.4f}" in table.output
    text = run_cli(*base)
    assert text.exit_code == 0, text.output
    assert "4 documents" in text.output and "bits_per_byte" in text.output and "ties:" not in text.output
    second = json.loads(run_cli("--database-url", pg_url, "mc", "list", "--format", "json").output)[0]["id"]
    cmp = run_cli("--database-url", pg_url, "mc", "compare", str(out["run_id"]), str(second), "--format", "json")
    deltas = json.loads(cmp.output)["deltas"]
    assert deltas["bits_per_byte"] == {"a": out["metrics"]["bits_per_byte"]["value"],
                                       "b": out["metrics"]["bits_per_byte"]["value"], "delta": 0.0, "stderr": None}
    exp = run_cli("--database-url", pg_url, "mc", "export", str(second), str(tmp_path / "x.jsonl"))
    assert exp.exit_code != 0 and "is an lm-eval perplexity run (loglikelihood_rolling)" in exp.output
    assert not (tmp_path / "x.jsonl").exists()


def test_mixed_and_unsupported_output_types_are_refused(tmp_path, task_yaml):
    """A call mixing perplexity and multiple-choice tasks is refused in one line, by name."""
    from judgecal.errors import InputError
    from judgecal.loglik import lmeval_tasks as LT
    from judgecal.loglik.lmeval_rolling import check_output_types

    assert check_output_types("x", {"a": "loglikelihood_rolling"}) is True
    assert check_output_types("x", {"a": "multiple_choice"}) is False
    with pytest.raises(InputError, match="mixes multiple_choice and loglikelihood_rolling tasks"):
        check_output_types("x", {"a": "multiple_choice", "b": "loglikelihood_rolling"})
    mc = tmp_path / "mc.yaml"
    mc.write_text(f"task: mc_local\ndataset_path: json\ndataset_kwargs:\n  data_files:\n    test: {tmp_path / 'x.jsonl'}\n"
                  "output_type: multiple_choice\ntest_split: test\ndoc_to_text: q\ndoc_to_choice: [a, b]\n"
                  "doc_to_target: 0\n")
    with pytest.raises(InputError, match=r"'ppl_local,mc_local' mixes multiple_choice and loglikelihood_rolling tasks \(ppl_local \.\.\.\)"):
        LT.load_tasks(f"{task_yaml},{mc}")


def test_score_board_takes_acc_from_the_newest_multiple_choice_run():
    """A model's newest stored run being a perplexity run does not blank its acc/acc_norm on
    the score board: the board reads the newest multiple-choice run for those, and the newest
    perplexity run for bits/byte."""
    from judgecal.db import models as m
    from judgecal.views.leaderboard import _mc_columns

    ppl = m.McRun(id=2, model="smollm2", task="ppl_local", metrics={"bits_per_byte": {"value": 1.18, "stderr": None}},
                  diagnostics={"output_type": "loglikelihood_rolling"})
    mc = m.McRun(id=1, model="smollm2", task="copa", metrics={"acc": {"value": 0.55}, "acc_norm": {"value": 0.6}},
                 diagnostics={"headline": ["acc"]})
    cols = _mc_columns([ppl, mc], None)
    assert (cols["acc"], cols["acc_norm"], cols["mc_run"], cols["bits_per_byte"], cols["ppl_run"]) == (0.55, 0.6, 1, 1.18, 2)
    alone = _mc_columns([ppl], None)
    assert alone["mc_run"] is None and alone["acc"] is None and alone["bits_per_byte"] == 1.18
    assert _mc_columns([mc], None)["bits_per_byte"] is None


def test_two_perplexity_tasks_pool_every_document(scorer, tmp_path, reference):
    """Two perplexity tasks in one call (no group): each task's figures are lm-eval's (the
    first equals the --model hf reference's), the top-level ones lm-eval's formulas over every
    document pooled, and the notes say so."""
    from judgecal.loglik.lmeval_tasks import score_lm_eval

    docs = documents()
    a, b = write_task(tmp_path, docs, "ppl_local"), write_task(tmp_path, docs[:2], "ppl_two")
    res = score_lm_eval(f"{a},{b}", scorer=scorer, max_length=MAX_LENGTH)
    by_task = res.diagnostics["by_task"]
    for m in METRICS:
        assert math.isclose(by_task["ppl_local"]["metrics"][m]["value"], reference["results"]["ppl_local"][f"{m},none"],
                            rel_tol=1e-6)
        assert res.metrics[m]["source"] == "judgecal pooled" and res.metrics[m]["n"] == 6
    d = res.diagnostics["documents"]
    ll, words, nbytes = sum(x["ll"] for x in d), sum(x["words"] for x in d), sum(x["bytes"] for x in d)
    assert math.isclose(res.metrics["word_perplexity"]["value"], math.exp(-ll / words), rel_tol=1e-12)
    assert math.isclose(res.metrics["bits_per_byte"]["value"], -ll / nbytes / math.log(2), rel_tol=1e-12)
    assert any("2 perplexity tasks without a group aggregate" in n for n in res.diagnostics["notes"])
    assert [x["windows"] for x in d] == [2, 2, 5, 1, 2, 2] and res.stats["distinct_requests"] == 4
    assert res.settings["max_length"] == MAX_LENGTH and res.stats["rolling_windows"] == 10  # ppl_two's texts are ppl_local's: scored once
