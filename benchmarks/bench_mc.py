"""Benchmark: judgecal's multiple-choice scorer against lm-evaluation-harness, same run.

Both score the same items with the same model folder (SmolLM2-135M-Instruct), float32, on the
same device: the first N ARC-Easy items (prompt "{query}\\nAnswer:", choices " " + choice) and
the first N HellaSwag items (lm-eval's preprocessing, see judgecal/loglik/tasks.py).
lm-evaluation-harness runs in-process through its HF backend (``HFLM.loglikelihood`` on the same
(context, continuation) requests) at its best batch size among ``--lm-eval-batch-sizes``
(each tried on the ARC items; the best is used for both tasks).

Printed per task: items/s of both and their ratio, acc / acc_norm of both (must be identical),
the largest per-choice log-likelihood difference, and the share of the arithmetic floor
reached: floor = 2 x (body parameters x tokens that must go through the body [each context
once + every continuation] + LM-head parameters x positions that must be scored), divided by
the elapsed time and compared with a float32 matmul rate measured in the same run.
``cpu`` figures use process CPU time, which is what counts when other jobs share the cores.

lm-eval task configs (``--tasks arc_challenge_25shot,mmlu_5shot``): lm-eval 0.4.13's shipped
``arc_challenge`` (25-shot) and ``mmlu_anatomy`` (5-shot) configs, each run twice in the same
process on the same local data (tests/test_mc_lmeval_layout.py: ARC-Challenge's layout built
from ARC-Easy items, an MMLU-format subject built from ARC-Easy items; ``--lmeval-items`` items,
default 50): once by lm-eval itself (``simple_evaluate`` with ``HFLM`` at the best batch size),
once by judgecal (``score_lm_eval``: lm-eval's task machinery, judgecal's scorer, ``--forward``
as the CLI runs it for lm-eval tasks unless ``--lmeval-forward`` says otherwise; items sharing
a few-shot prefix, as MMLU's first_n examples, share its computation: the shared-prefix units
and the context tokens not run again are printed). Timed: the
model pass (lm-eval's ``HFLM.loglikelihood`` call against judgecal's ``JudgecalLM.loglikelihood``)
and the whole evaluation (request building, model pass, metrics). Printed as above, plus the
requests compared one by one.

Run:  HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/bench_mc.py [--items 200] [--tasks hellaswag]
      [--tasks arc_challenge_25shot,mmlu_5shot --lmeval-items 50] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from judgecal.config import shared_data_dir  # noqa: E402
DATA = shared_data_dir() / "mc"


def matmul_rate(m: int = 1024, k: int = 1024, n: int = 1024, reps: int = 20) -> float:
    """Best-of-5 float32 matmul rate (FLOP/s) of an (m x k) by (k x n) product on the CPU."""
    import torch

    a, b = torch.randn(m, k), torch.randn(k, n)
    a @ b
    best = 0.0
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(reps):
            a @ b
        best = max(best, reps * 2 * m * k * n / (time.perf_counter() - t))
    return best


def rates() -> dict:
    """Square 1024 matmul and a SmolLM2-shaped one (4096 tokens x 576 hidden -> 1536 MLP)."""
    return {"square_1024": matmul_rate(), "model_shaped": matmul_rate(4096, 576, 1536, reps=10)}


def accs(task, lls_flat):
    k = 0
    acc = acc_norm = 0.0
    for it in task.items:
        lls = np.asarray(lls_flat[k:k + len(it.choices)])
        k += len(it.choices)
        acc += float(np.argmax(lls) == it.gold)
        acc_norm += float(np.argmax(lls / np.array([float(len(c)) for c in it.choices])) == it.gold)
    return acc / len(task.items), acc_norm / len(task.items)


def run_lm_eval(lm, task):
    from lm_eval.api.instance import Instance

    reqs = [Instance("loglikelihood", doc={}, arguments=(it.context, task.target_delimiter + c), idx=j)
            for it in task.items for j, c in enumerate(it.choices)]
    t, c = time.perf_counter(), time.process_time()
    out = lm.loglikelihood(reqs, disable_tqdm=True)
    return [ll for ll, _ in out], time.perf_counter() - t, time.process_time() - c


LM_EVAL_TASKS = {"arc_challenge_25shot": ("arc_challenge", 25), "mmlu_5shot": ("mmlu_anatomy", 5),
                 # short-context tasks (issue 36 item 4): PIQA (a goal, two solutions of 20-60 tokens) and
                 # COPA (a premise of ~10 tokens, two short alternatives), at 0, 5 and 25 shots
                 **{f"{t}_{k}shot": (t, k) for t in ("piqa", "copa") for k in (0, 5, 25)}}


def run_lm_eval_config(lm, spec: str, shots: int, limit: int, hub: Path) -> tuple[dict, float, float, float]:
    """lm-eval's own run of a shipped config on the local copies: (results, seconds of the model
    pass, its CPU seconds, seconds of the whole simple_evaluate call)."""
    import lm_eval
    import lm_eval.evaluator

    from judgecal.loglik.lmeval_tasks import offline_data, task_manager

    spent = [0.0, 0.0]
    original = lm.loglikelihood

    def timed(requests, disable_tqdm=False):
        t, c = time.perf_counter(), time.process_time()
        out = original(requests, disable_tqdm=True)
        spent[0] += time.perf_counter() - t
        spent[1] += time.process_time() - c
        return out

    saved_env = lm_eval.evaluator.add_env_info
    lm.loglikelihood = timed
    lm_eval.evaluator.add_env_info = lambda storage: None  # `pip list` etc., not evaluation
    try:
        t0 = time.perf_counter()
        with offline_data(hub):
            res = lm_eval.simple_evaluate(model=lm, tasks=[spec], num_fewshot=shots, limit=limit,
                                          task_manager=task_manager(), log_samples=True)
        total = time.perf_counter() - t0
    finally:
        del lm.loglikelihood
        lm_eval.evaluator.add_env_info = saved_env
    return res, spent[0], spent[1], total


def bench_lm_eval_task(name: str, lm, scorer, limit: int, hub: Path, torch) -> dict:
    """judgecal and lm-eval on one lm-eval config; prints and returns the figures."""
    from judgecal.loglik.lmeval_tasks import score_lm_eval

    spec, shots = LM_EVAL_TASKS[name]
    t0 = time.perf_counter()
    ours = score_lm_eval(spec, scorer=scorer, num_fewshot=shots, limit=limit, data_dir=hub)
    ours_total = time.perf_counter() - t0
    ref, lm_s, lm_cpu, lm_total = run_lm_eval_config(lm, spec, shots, limit, hub)
    st = ours.stats
    theirs = sorted(ref["samples"][spec], key=lambda x: x["doc_id"])
    same_requests = [it.requests for it in ours.items] == [[tuple(a) for a in x["arguments"]] for x in theirs]
    ll_ours = np.array([c.ll for it in ours.items for c in it.choices])
    ll_theirs = np.array([r[0] for x in theirs for r in x["filtered_resps"]])
    m_ours = {m: ours.diagnostics["by_task"][spec]["metrics"][m]["value"] for m in ("acc", "acc_norm")
              if m in ours.diagnostics["by_task"][spec]["metrics"]}
    m_lm = {m: ref["results"][spec][f"{m},none"] for m in m_ours}
    n = len(ours.items)
    floor = 2 * (st["n_body_params"] * st["tokens"] + st["n_head_params"] * st["scored_rows"])
    row = {
        "task": spec, "num_fewshot": shots, "items": n, "requests": int(ll_ours.size),
        "judgecal_items_per_s": n / st["scoring_seconds"], "lm_eval_items_per_s": n / lm_s,
        "ratio": lm_s / st["scoring_seconds"], "ratio_cpu": lm_cpu / st["cpu_seconds"],
        "judgecal_eval_seconds": ours_total, "lm_eval_eval_seconds": lm_total, "ratio_eval": lm_total / ours_total,
        "judgecal_metrics": m_ours, "lm_eval_metrics": m_lm, "metrics_identical": m_ours == m_lm,
        "requests_identical": same_requests,
        "max_abs_ll_diff": float(np.max(np.abs(ll_ours - ll_theirs))) if ll_ours.shape == ll_theirs.shape else None,
        "floor_gflop": floor / 1e9, "achieved_gflops": floor / st["scoring_seconds"] / 1e9,
        "achieved_gflops_cpu": floor / (st["cpu_seconds"] / torch.get_num_threads()) / 1e9,
        "tokens": st["tokens"], "padded_tokens": st["padded_tokens"], "scored_rows": st["scored_rows"],
        "shared_prefix_units": st.get("shared_prefix_units", 0),
        "shared_prefix_tokens_saved": st.get("shared_prefix_tokens_saved", 0),
        "forward": scorer.forward_name,
    }
    print(f"\n== {name} (lm-eval config {spec}, {shots}-shot): {n} items, {row['requests']} requests, "
          f"judgecal {scorer.forward_name} forward")
    print(f"judgecal : {row['judgecal_items_per_s']:.2f} items/s (model pass)  "
          + "  ".join(f"{k} {v:.3f}" for k, v in m_ours.items()) + f"  [whole evaluation {ours_total:.1f} s]")
    print(f"lm-eval  : {row['lm_eval_items_per_s']:.2f} items/s (model pass)  "
          + "  ".join(f"{k} {v:.3f}" for k, v in m_lm.items()) + f"  [whole evaluation {lm_total:.1f} s]")
    print(f"ratio    : {row['ratio']:.2f}x wall, {row['ratio_cpu']:.2f}x CPU time (model pass); "
          f"{row['ratio_eval']:.2f}x whole evaluation; requests identical: {same_requests}; "
          f"metrics identical: {row['metrics_identical']}; max |ll diff| {row['max_abs_ll_diff']:.2e} nats")
    print(f"floor    : {row['floor_gflop']:.0f} GFLOP needed ({st['tokens']} body tokens, "
          f"{st['scored_rows']} LM-head rows): {row['achieved_gflops']:.1f} GFLOP/s wall, "
          f"{row['achieved_gflops_cpu']:.1f} GFLOP/s per {torch.get_num_threads()} busy threads (CPU time)")
    print(f"prefixes : {row['shared_prefix_units']} shared-prefix units, {row['shared_prefix_tokens_saved']} "
          "context tokens not run again")
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--items", type=int, default=200)
    ap.add_argument("--model", default=None, help="model folder (default: the pulled SmolLM2)")
    ap.add_argument("--lm-eval-batch-sizes", default="16,32,64")
    ap.add_argument("--batch-size", default="auto", help="judgecal's --batch-size")
    ap.add_argument("--tasks", default="arc_easy,hellaswag",
                    help="comma-separated subset of arc_easy,hellaswag and the lm-eval configs "
                         + ",".join(LM_EVAL_TASKS) + " to time (the lm-eval batch probe uses ARC items)")
    ap.add_argument("--lmeval-items", type=int, default=50, help="items of each lm-eval config task (default 50)")
    ap.add_argument("--lmeval-forward", default=None, choices=["fused", "transformers"],
                    help="judgecal's forward for the lm-eval config tasks (default: what --forward auto runs for "
                         "lm-eval tasks, transformers)")
    ap.add_argument("--row-len", type=int, default=None,
                    help="judgecal's smallest cap of a shared-prefix unit in tokens (default: hf.py's)")
    ap.add_argument("--pad-multiple", type=int, default=None,
                    help="judgecal's row padding multiple (default: hf.py's, 4 fused / 8 transformers)")
    ap.add_argument("--token-budget", type=int, default=None, help="judgecal's tokens per forward pass (default: hf.py's)")
    ap.add_argument("--forward", default="auto", choices=["auto", "fused", "transformers"],
                    help="judgecal's body forward (default auto: fused for Llama models)")
    ap.add_argument("--json", default=None, help="also write the figures to this JSON file")
    args = ap.parse_args()

    import torch
    from lm_eval.models.huggingface import HFLM

    from judgecal import config
    from judgecal.loglik.hf import HFScorer
    from judgecal.loglik.score import score_task
    from judgecal.loglik.tasks import load_hellaswag_text, load_jsonl

    folder = Path(args.model) if args.model else config.default_model_dir()
    tasks = {
        "arc_easy": load_jsonl(DATA / "arc_easy.jsonl", prompt="{query}\nAnswer:", limit=args.items),
        "hellaswag": load_hellaswag_text(DATA / "hellaswag_val_full.txt.bz2", limit=args.items),
    }
    wanted = [t.strip() for t in args.tasks.split(",") if t.strip()]
    unknown = sorted(set(wanted) - set(tasks) - set(LM_EVAL_TASKS))
    if unknown or not wanted:
        ap.error(f"--tasks: unknown {', '.join(unknown) or '(none given)'}; "
                 f"choose from {', '.join([*tasks, *LM_EVAL_TASKS])}")
    r0 = rates()
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, model {folder}, "
          f"load average {os.getloadavg()[0]:.2f}")
    print("float32 matmul rate (start): " + ", ".join(f"{k} {v / 1e9:.1f} GFLOP/s" for k, v in r0.items()))
    scorer = HFScorer(folder, device="cpu", dtype="float32", forward=args.forward)
    scorer.row_len = args.row_len or scorer.row_len
    scorer.pad_multiple = args.pad_multiple or scorer.pad_multiple
    scorer.token_budget = args.token_budget or scorer.token_budget
    print(f"judgecal: {scorer.forward_name} forward, one item a row padded to a multiple of {scorer.pad_multiple} tokens, "
          f"{scorer.token_budget} tokens per forward pass, shared-prefix units up to {scorer.row_len} tokens")
    bs = args.batch_size if args.batch_size == "auto" else int(args.batch_size)
    score_task(tasks["arc_easy"], scorer=scorer, null_context=None, limit=8, batch_size=bs)  # warm-up

    lm_bs_list = [int(x) for x in args.lm_eval_batch_sizes.split(",")]
    lms = {}
    best_bs, best_t = None, None
    probe = type(tasks["arc_easy"])("probe", tasks["arc_easy"].items[:48], " ")
    for b in lm_bs_list:
        lms[b] = lm = HFLM(pretrained=str(folder), device="cpu", dtype="float32", batch_size=b)
        _, t, _ = run_lm_eval(lm, probe)
        print(f"lm-eval batch {b}: {len(probe.items) / t:.2f} items/s on a 48-item probe")
        if best_t is None or t < best_t:
            best_bs, best_t = b, t
    lm = lms[best_bs]
    print(f"lm-eval best batch size: {best_bs}")

    report = {"forward": scorer.forward_name, "row_len": scorer.row_len, "pad_multiple": scorer.pad_multiple,
              "token_budget": scorer.token_budget, "load_average": os.getloadavg(), "matmul_gflops_start": {k: v / 1e9 for k, v in r0.items()}, "lm_eval_batch_size": best_bs, "items": args.items, "tasks": {}}
    lm_eval_wanted = [t for t in wanted if t in LM_EVAL_TASKS]
    if lm_eval_wanted:
        import tempfile

        sys.path.insert(0, str(REPO / "tests"))
        from test_mc_lmeval_layout import build_hub_mirror, build_mmlu_subject

        hub = Path(tempfile.mkdtemp(prefix="bench_mc_hub_"))
        build_hub_mirror(hub)
        build_mmlu_subject(hub, "anatomy", n_test=max(args.lmeval_items, 1))
        fw = args.lmeval_forward or "transformers"
        lm_scorer = scorer if fw == scorer.forward_name else HFScorer(folder, device="cpu", dtype="float32", forward=fw)
        lm_scorer.row_len, lm_scorer.token_budget = scorer.row_len, scorer.token_budget
        if args.pad_multiple:
            lm_scorer.pad_multiple = args.pad_multiple
        score_task(tasks["arc_easy"], scorer=lm_scorer, null_context=None, limit=8, batch_size=bs)  # warm-up
        from judgecal.loglik.lmeval_tasks import task_manager

        t0 = time.perf_counter()
        task_manager()  # lm-eval's task index, built once per process and shared by both runs: not in the first task's time
        print(f"lm-eval task index: {time.perf_counter() - t0:.1f} s (once per process, outside the timings)")
        for name in lm_eval_wanted:
            report["tasks"][name] = bench_lm_eval_task(name, lm, lm_scorer, args.lmeval_items, hub, torch)
    for name in [t for t in wanted if t in tasks]:
        task = tasks[name]
        res = score_task(task, scorer=scorer, null_context=None, batch_size=bs)
        ours_ll = [c.ll for r in res.items for c in r.choices]
        st = res.stats
        lm_ll, lm_s, lm_cpu = run_lm_eval(lm, task)
        floor = 2 * (st["n_body_params"] * st["tokens"] + st["n_head_params"] * st["scored_rows"])
        n = len(task.items)
        a_ours = (res.metrics["acc"]["value"], res.metrics["acc_norm"]["value"])
        a_lm = accs(task, lm_ll)
        row = {
            "items": n, "requests": len(ours_ll),
            "judgecal_items_per_s": n / st["seconds"], "lm_eval_items_per_s": n / lm_s,
            "ratio": lm_s / st["seconds"], "ratio_cpu": lm_cpu / st["cpu_seconds"],
            "judgecal_acc": a_ours[0], "judgecal_acc_norm": a_ours[1],
            "lm_eval_acc": a_lm[0], "lm_eval_acc_norm": a_lm[1],
            "metrics_identical": a_ours == a_lm,
            "max_abs_ll_diff": float(np.max(np.abs(np.array(ours_ll) - np.array(lm_ll)))),
            "floor_gflop": floor / 1e9,
            "achieved_gflops": floor / st["seconds"] / 1e9,
            "achieved_gflops_cpu": floor / (st["cpu_seconds"] / torch.get_num_threads()) / 1e9,
            "tokens": st["tokens"], "padded_tokens": st["padded_tokens"], "scored_rows": st["scored_rows"],
        }
        report["tasks"][name] = row
        print(f"\n== {name}: {n} items, {len(ours_ll)} requests")
        print(f"judgecal : {row['judgecal_items_per_s']:.2f} items/s  acc {a_ours[0]:.3f}  acc_norm {a_ours[1]:.3f}")
        print(f"lm-eval  : {row['lm_eval_items_per_s']:.2f} items/s  acc {a_lm[0]:.3f}  acc_norm {a_lm[1]:.3f}"
              f"  ({len(ours_ll) / lm_s:.1f} requests/s)")
        print(f"ratio    : {row['ratio']:.2f}x wall, {row['ratio_cpu']:.2f}x CPU time;"
              f" metrics identical: {row['metrics_identical']}; max |ll diff| {row['max_abs_ll_diff']:.2e} nats")
        print(f"floor    : {row['floor_gflop']:.0f} GFLOP needed ({st['tokens']} body tokens, "
              f"{st['scored_rows']} LM-head rows): {row['achieved_gflops']:.1f} GFLOP/s wall, "
              f"{row['achieved_gflops_cpu']:.1f} GFLOP/s per {torch.get_num_threads()} busy threads (CPU time)")
        print(f"padding  : {st['padded_tokens']} tokens through the body for {st['tokens']} "
              f"({100 * (st['padded_tokens'] / st['tokens'] - 1):.1f}%), {st['forward_passes']} forward passes")
    r1 = rates()
    report["matmul_gflops_end"] = {k: v / 1e9 for k, v in r1.items()}
    report["load_average_end"] = os.getloadavg()
    print(f"\nload average (end): {os.getloadavg()[0]:.2f}")
    print("\nfloat32 matmul rate (end): " + ", ".join(f"{k} {v / 1e9:.1f} GFLOP/s" for k, v in r1.items()))
    best = {k: max(r0[k], r1[k]) / 1e9 for k in r0}
    report["matmul_gflops_best"] = best
    for name, row in report["tasks"].items():
        for k, rate in best.items():
            row[f"floor_share_{k}"] = row["achieved_gflops"] / rate
            row[f"floor_share_cpu_{k}"] = row["achieved_gflops_cpu"] / rate
            # the ceiling: lm-eval's model pass against the necessary work (judgecal's floor) run at this
            # matmul rate: no scorer doing only that work at that rate is faster than this many times lm-eval
            lm_seconds = row["items"] / row["lm_eval_items_per_s"]
            row[f"ceiling_{k}"] = lm_seconds / (row["floor_gflop"] / rate)
        print(f"ceiling, {name}: lm-eval's model pass / the necessary work at the best matmul rate: " + "; ".join(
            f"{row[f'ceiling_{k}']:.2f}x at {k} {rate:.0f} GFLOP/s" for k, rate in best.items())
            + f" (judgecal measured {row['ratio']:.2f}x)")
        print(f"share of floor, {name}: " + "; ".join(
            f"vs {k} {rate:.0f} GFLOP/s: {100 * row[f'floor_share_{k}']:.0f}% wall, "
            f"{100 * row[f'floor_share_cpu_{k}']:.0f}% CPU time" for k, rate in best.items()))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
