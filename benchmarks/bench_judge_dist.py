"""Benchmark (issue 22, Speed): the local distribution path against the served path and the limit.

Three ways to get the same verdicts for the same N responses (the first N/2 LLMBar Natural
items, both outputs, with the prompt ``--prompt``, default the two-shot pointwise_fewshot_v1
whose answers read ``Rating: N``), in ONE run with the same model folder, device and dtype:

1. **local**: ``judgecal rate --local`` (library call ``run_rate(local=..., local_scorer=...)``
   into SQLite: rendering, chat template, tokenization, the batched forward pass of every
   verdict, the distribution, the writes), the model loaded once before timing;
2. **served**: ``judgecal rate --serve`` generating the verdicts (``transformers serve`` on
   127.0.0.1, temperature 0, ``--max-tokens`` 8, ``--concurrency`` 2), the server started and
   warmed with one request before timing;
3. **bare** (the limit): a batched forward pass over the same prompt tokens (chat template +
   verdict prefix) with the same model, padded batches under the same token budget, the LM
   head on each prompt's last position only, nothing else (no rendering, no tokenization, no
   database); both the transformers forward and judgecal's fused Llama forward are timed and
   the faster is the limit.

Printed: responses/s of each, wall and CPU seconds (CPU time counts what each path itself
used when other jobs share the cores; the served path's CPU is the server process's, read
from /proc), the ratios local / served (goal >= 10) and local / bare (goal >= 0.7), the load
(``uptime``) before and after, and how many served verdicts the local path reproduced (where
the served output wrote the prefix first and parsed).

Run:  HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/bench_judge_dist.py [--n 24] [--device cpu]
      [--dtype float32] [--prompt pointwise_fewshot_v1] [--skip-served] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from judgecal.config import shared_data_dir  # noqa: E402

FAMILY = "bench/llmbar-natural"


def uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return "(uptime unavailable)"


def proc_cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (Linux /proc), 0 when unreadable."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def import_data(url: str, n: int) -> None:
    from judgecal.views import importing

    items = json.loads((shared_data_dir() / "llmbar" / "Natural" / "dataset.json").read_text(encoding="utf-8"))
    rows = [{"task_family": FAMILY, "prompt": d["input"], "model": f"output_{k}", "response": d[f"output_{k}"]}
            for d in items[: (n + 1) // 2] for k in (1, 2)][:n]
    rows.append({"task_family": "bench/warmup", "prompt": "What is the capital of France?", "model": "w",
                 "response": "Paris."})
    path = Path(tempfile.mkdtemp(prefix="judgecal-bench-")) / "responses.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    importing.import_generic(path, "responses", "jsonl", url=url)


def contexts(url: str, prompt_name: str, scorer, prefix: str) -> list[str]:
    """The local path's contexts (chat template + prefix) for the benchmark's responses."""
    from sqlalchemy import create_engine, select

    from judgecal.db import models as m
    from judgecal.judge.prompts import load_prompt

    tmpl = load_prompt(prompt_name)
    eng = create_engine(url)
    with eng.connect() as conn:
        rows = conn.execute(select(m.Item.prompt, m.Item.reference, m.Response.text)
                            .join(m.Response, m.Response.item_id == m.Item.id)
                            .join(m.TaskFamily, m.TaskFamily.id == m.Item.task_family_id)
                            .where(m.TaskFamily.name == FAMILY).order_by(m.Response.id)).all()
    eng.dispose()
    return [scorer.context(tmpl.render(question=q, reference=ref, response=t), prefix) for q, ref, t in rows]


def bare_forward(scorer, ctx_texts: list[str], fused: bool) -> tuple[float, float]:
    """Seconds (wall, CPU) of batched forward passes over the prompts' tokens, the LM head on
    each prompt's last position only."""
    torch = scorer.torch
    tok = scorer.tokenizer
    ids = [tok(c, add_special_tokens=False)["input_ids"] for c in ctx_texts]
    order = sorted(range(len(ids)), key=lambda i: -len(ids[i]))
    budget = scorer.token_budget
    batches, cur = [], []
    for i in order:
        if cur and (len(cur) + 1) * len(ids[cur[0]]) > budget:
            batches.append(cur)
            cur = []
        cur.append(i)
    if cur:
        batches.append(cur)
    dev = scorer.device
    t0, c0 = time.perf_counter(), time.process_time()
    with torch.inference_mode():
        for b in batches:
            L = len(ids[b[0]])
            x = torch.zeros((len(b), L), dtype=torch.long)
            keep = torch.zeros((len(b), L), dtype=torch.bool)
            for r, i in enumerate(b):
                x[r, :len(ids[i])] = torch.tensor(ids[i])
                keep[r, :len(ids[i])] = True
            last = torch.tensor([len(ids[i]) - 1 for i in b])
            if fused:
                pos = torch.arange(L).expand(len(b), L)
                mask = (torch.ones((L, L), dtype=torch.bool).tril()[None] & keep[:, None, :])
                mask |= torch.eye(L, dtype=torch.bool)[None]  # padding rows attend to themselves
                hidden = scorer.fused(x.to(dev), mask[:, None].to(dev), pos.to(dev))
            else:
                hidden = scorer.body(input_ids=x.to(dev), attention_mask=keep.long().to(dev),
                                     use_cache=False).last_hidden_state
            h = hidden[torch.arange(len(b), device=dev), last.to(dev)]
            torch.log_softmax(scorer.head(h).float(), dim=-1)
    return time.perf_counter() - t0, time.process_time() - c0


def scores(url: str, judge_id: int) -> dict[int, tuple]:
    """{response id: (status, score, raw_output)} of the judge's ratings of the benchmark's responses."""
    from sqlalchemy import create_engine, text

    eng = create_engine(url)
    with eng.connect() as conn:
        rows = conn.execute(text("SELECT r.response_id, r.status, r.score, r.raw_output FROM rating r "
                                 "JOIN response p ON p.id = r.response_id JOIN item i ON i.id = p.item_id "
                                 "JOIN task_family f ON f.id = i.task_family_id WHERE r.judge_id = :j AND f.name = :f"),
                            {"j": judge_id, "f": FAMILY}).all()
    eng.dispose()
    return {r[0]: tuple(r[1:]) for r in rows}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=24, help="responses (default 24)")
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    ap.add_argument("--prompt", default="pointwise_fewshot_v1")
    ap.add_argument("--max-tokens", type=int, default=8)
    ap.add_argument("--concurrency", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=2, help="timed runs of the local and bare paths (best kept)")
    ap.add_argument("--skip-served", action="store_true")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()

    import torch

    from judgecal.judge.prompts import load_prompt
    from judgecal.judge.server import LocalServer
    from judgecal.localmodel import resolve_model
    from judgecal.loglik.verdicts import VerdictScorer, verdict_prefix
    from judgecal.views.rate import run_rate

    out: dict = {"n": args.n, "device": args.device, "dtype": args.dtype, "prompt": args.prompt,
                 "torch_threads": torch.get_num_threads(), "uptime_before": uptime()}
    print(out["uptime_before"])
    folder = resolve_model(args.model)
    tmp = Path(tempfile.mkdtemp(prefix="judgecal-bench-dist-"))
    url = f"sqlite:///{tmp / 'bench.db'}"
    import_data(url, args.n)
    prefix = verdict_prefix(load_prompt(args.prompt))

    t = time.perf_counter()
    scorer = VerdictScorer(folder, device=args.device, dtype=args.dtype)
    out["load_s"] = round(time.perf_counter() - t, 2)
    # warm-up (oneDNN weight packing, first-call allocations): not timed
    run_rate(judge=args.model, local=args.model, local_scorer=scorer, prompt=args.prompt, local_device=args.device,
             local_dtype=args.dtype, task_families=["bench/warmup"], database_url=url, progress=False)

    def local_run(share: bool) -> tuple[dict, float]:
        """One timed local run on a fresh database (a second run on the same one rates nothing)."""
        k = len(list(tmp.glob("local_*.db")))
        db = f"sqlite:///{tmp / f'local_{k}.db'}"
        import_data(db, args.n)
        scorer.share_prefixes = share
        c0 = time.process_time()
        res = run_rate(judge=args.model, local=args.model, local_scorer=scorer, prompt=args.prompt,
                       local_device=args.device, local_dtype=args.dtype, task_families=[FAMILY], database_url=db,
                       progress=False)
        cpu = time.process_time() - c0
        scorer.share_prefixes = True
        assert res["this_run"]["ok"] == args.n, res["this_run"]
        res["database_url"] = db
        return res, cpu

    ctxs = contexts(url, args.prompt, scorer, prefix)
    out["prompt_tokens"] = sum(len(scorer.tok(c, add_special_tokens=False)["input_ids"]) for c in ctxs)
    for name, fused in (("transformers", False), ("fused", True)):
        if not fused or scorer.scorer.fused is not None:
            bare_forward(scorer.scorer, ctxs[:2], fused)  # warm-up
    # the paths interleaved, each --repeat times, best of each kept: other jobs on the machine
    # slow down whichever runs while they do
    runs: dict[str, list[tuple[float, float]]] = {"local": [], "local_no_shared_prefix": [], "transformers": [],
                                                   "fused": []}
    loc = None
    for _ in range(args.repeat):
        res, cpu = local_run(True)
        loc = loc if loc is not None and loc["elapsed_s"] <= res["elapsed_s"] else res
        runs["local"].append((res["elapsed_s"], cpu))
        res2, cpu2 = local_run(False)  # the same path without shared-prefix reuse
        runs["local_no_shared_prefix"].append((res2["elapsed_s"], cpu2))
        for name, fused in (("transformers", False), ("fused", True)):
            if not fused or scorer.scorer.fused is not None:
                runs[name].append(bare_forward(scorer.scorer, ctxs, fused))
    out["runs"] = runs

    def best(name: str) -> dict:
        wall, cpu = min(runs[name])
        return {"seconds": round(wall, 3), "cpu_s": round(cpu, 2), "per_s": args.n / wall}

    out["local"] = dict(best("local"), tokens=loc["local"].get("tokens"),
                        forward_passes=loc["local"].get("forward_passes"),
                        shared_prefix_tokens_saved=loc["local"].get("shared_prefix_tokens_saved"),
                        forward=loc["local"].get("forward"))
    local_cpu = out["local"]["cpu_s"]
    out["local_no_shared_prefix"] = best("local_no_shared_prefix")
    print(f"local:  {args.n} responses in {out['local']['seconds']:.2f} s ({out['local']['per_s']:.3f}/s, CPU "
          f"{local_cpu:.1f} s; {out['local']['tokens']} tokens in {out['local']['forward_passes']} passes, "
          f"{out['local']['shared_prefix_tokens_saved']} shared-prefix tokens not run again); best of {args.repeat}: "
          + ", ".join(f"{w:.2f}" for w, _ in runs["local"]))
    lnp = out["local_no_shared_prefix"]
    print(f"local without shared prefixes: {lnp['seconds']:.2f} s ({lnp['per_s']:.3f}/s, CPU {lnp['cpu_s']:.1f} s)")
    bare = {}
    for name in ("transformers", "fused"):
        if runs[name]:
            bare[name] = best(name)
            print(f"bare forward ({name}): {args.n} prompts, {out['prompt_tokens']} tokens in {bare[name]['seconds']:.2f} s "
                  f"({bare[name]['per_s']:.3f}/s, CPU {bare[name]['cpu_s']:.1f} s); runs "
                  + ", ".join(f"{w:.2f}" for w, _ in runs[name]))
    out["bare"] = bare
    limit = max(bare.values(), key=lambda b: b["per_s"])
    out["local_vs_bare"] = out["local"]["per_s"] / limit["per_s"]
    out["local_vs_bare_cpu"] = limit["cpu_s"] / max(local_cpu, 1e-9)
    print(f"local / bare forward (the faster): {out['local_vs_bare']:.2f} wall, {out['local_vs_bare_cpu']:.2f} CPU "
          f"(goal >= 0.70: {'met' if out['local_vs_bare'] >= 0.7 else 'NOT met'})")
    out["local_no_shared_prefix_vs_bare"] = out["local_no_shared_prefix"]["per_s"] / limit["per_s"]
    print(f"local without shared prefixes / bare forward: {out['local_no_shared_prefix_vs_bare']:.2f} wall")

    if not args.skip_served:
        del scorer
        log = tmp / "serve.log"
        t = time.perf_counter()
        server = LocalServer(folder, device=args.device, dtype=args.dtype, log_path=log)
        with server as base_url:
            start_s = time.perf_counter() - t
            kw = dict(judge=str(folder), base_url=base_url, prompt=args.prompt, max_tokens=args.max_tokens,
                      concurrency=args.concurrency, timeout=600, database_url=url, progress=False,
                      endpoint_id="transformers-serve", identity_model=folder.name)
            run_rate(task_families=["bench/warmup"], **kw)  # the server loads the model on its first request
            server_pid = server.proc.pid if server.proc is not None else None
            s0 = proc_cpu_s(server_pid) if server_pid else 0.0
            srv = run_rate(task_families=[FAMILY], **kw)
            s_cpu = (proc_cpu_s(server_pid) - s0) if server_pid else None
        assert srv["this_run"]["failed"] == 0, srv["this_run"]
        out["served"] = {"seconds": srv["elapsed_s"], "cpu_s": None if s_cpu is None else round(s_cpu, 2),
                         "per_s": args.n / srv["elapsed_s"], "server_start_s": round(start_s, 1),
                         "max_tokens": args.max_tokens, "concurrency": args.concurrency}
        print(f"served: {args.n} responses in {srv['elapsed_s']:.2f} s ({out['served']['per_s']:.3f}/s, server CPU "
              f"{s_cpu if s_cpu is None else round(s_cpu, 1)} s)")
        out["local_vs_served"] = out["local"]["per_s"] / out["served"]["per_s"]
        if s_cpu:
            out["local_vs_served_cpu"] = s_cpu / max(local_cpu, 1e-9)
        print(f"local / served: {out['local_vs_served']:.2f} wall"
              + (f", {out['local_vs_served_cpu']:.2f} CPU" if s_cpu else "")
              + f" (goal >= 10: {'met' if out['local_vs_served'] >= 10 else 'NOT met'})")
        ls, ss = scores(loc["database_url"], loc["judge_id"]), scores(url, srv["judge_id"])
        comparable = [rid for rid, (st, sc, raw) in ss.items() if st == "ok" and (raw or "").strip().startswith(prefix.strip())]
        same = sum(ls[rid][1] == ss[rid][1] for rid in comparable)
        out["agreement"] = {"served_ok": sum(v[0] == "ok" for v in ss.values()), "comparable": len(comparable),
                            "same_greedy": same}
        print(f"served verdicts reproduced by the local path: {same} of {len(comparable)} comparable "
              f"(served wrote {prefix!r} first and parsed; {out['agreement']['served_ok']} of {args.n} parsed)")
    out["uptime_after"] = uptime()
    print(out["uptime_after"])
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
