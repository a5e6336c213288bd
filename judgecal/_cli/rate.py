"""`judgecal rate`: rate responses with a judge."""

from __future__ import annotations

import sys

import click

from judgecal._cli.common import FMT_OPT, Ctx, Finite, command, emit_json, err, out, pass_ctx


@command("rate")
@click.option("--judge", default=None, metavar="MODEL",
              help="Judge model name sent to the endpoint (required unless --local).")
@click.option("--base-url", default=None, metavar="URL",
              help="OpenAI-compatible endpoint (default: env OPENAI_BASE_URL, else api.openai.com). Key: env OPENAI_API_KEY.")
@click.option("--prompt", default=None, metavar="NAME|FILE",
              help="Built-in prompt name or template file (default pointwise_v1; pairwise_v1 with --pairwise).")
@click.option("--task-family", "task_families", multiple=True, metavar="F", help="Only these task families (repeatable).")
@click.option("--model-filter", default=None, metavar="M", help="Only responses of this model (exact, or a glob with *).")
@click.option("--samples", default=1, show_default=True, type=click.IntRange(1), help="Ratings per response (sample index 0..K-1).")
@click.option("--temperature", default=0.0, show_default=True, type=Finite(min=0))
@click.option("--max-tokens", default=512, show_default=True, type=click.IntRange(1))
@click.option("--concurrency", default=16, show_default=True, type=click.IntRange(1))
@click.option("--limit", default=None, type=click.IntRange(1), help="Rate at most the first N responses (or pairs) of the selection.")
@click.option("--items", default=None, type=click.IntRange(1), help="Rate only the responses of the first N items (by id) of the selection.")
@click.option("--judge-name", default=None, metavar="NAME", help="Name reports show for this judge, stored when the judge is first stored (default: the model name); "
                   "refused for a judge already stored under another name.")
@click.option("--serve", "serve", default=None, metavar="smollm2|FOLDER",
              help="Start `transformers serve` with this local model on 127.0.0.1 for the run, then stop it.")
@click.option("--serve-device", type=click.Choice(["cpu", "cuda"]), default="cpu", show_default=True)
@click.option("--retry-failed", is_flag=True, help="Also retry this judge's failed and unparsed ratings.")
@click.option("--pairwise", is_flag=True, help="Judge expert-labelled and verbosity pairs, in both orders.")
@click.option("--baseline", default=None, metavar="MODEL",
              help="Pairwise against a baseline: each selected model's response vs MODEL's response to the same item, both orders (implies --pairwise).")
@click.option("--max-outage", default=120.0, show_default=True, type=Finite(min=0),
              help="Seconds the run may wait, in all, for an endpoint that stopped answering before its connection failures fail rows.")
@click.option("--timeout", default=60.0, show_default=True, type=Finite(min=0, min_open=True), help="Seconds per attempt.")
@click.option("--max-attempts", default=4, show_default=True, type=click.IntRange(1))
@click.option("--logprobs", is_flag=True,
              help="Request top_logprobs and store the verdict's distribution and expected score (not every server supports it).")
@click.option("--top-logprobs", "top_logprobs", default=None, type=int, metavar="N",
              help="Alternatives per token with --logprobs, 1-20 (the API's most; default 20). Implies --logprobs.")
@click.option("--local", "local", default=None, metavar="smollm2|FOLDER",
              help="No server: read each verdict's distribution from one forward pass of this local model (greedy decoding of a few "
                   "tokens only where the pass does not show the greedy text whole).")
@click.option("--local-device", type=click.Choice(["cpu", "cuda"]), default="cpu", show_default=True,
              help="Device of --local.")
@click.option("--local-dtype", type=click.Choice(["float32", "bfloat16", "float16"]), default="float32", show_default=True,
              help="dtype of --local.")
@click.option("--verdict-prefix", default=None, metavar="TEXT",
              help="With --local: the text the answer starts with before the verdict (default from the prompt: '[[', "
                   "or what its few-shot answers write, e.g. 'Rating: ').")
@FMT_OPT
@pass_ctx
@click.pass_context
def rate(cctx: click.Context, ctx: Ctx, judge, base_url, prompt, task_families, model_filter, samples, temperature,
         max_tokens, concurrency, limit, items, judge_name, serve, serve_device, retry_failed, pairwise, baseline,
         max_outage, timeout, max_attempts, logprobs, top_logprobs, local, local_device, local_dtype, verdict_prefix,
         fmt) -> None:
    """Rate responses with a judge through any OpenAI-compatible API (concurrent, resumable, idempotent).

    With --serve the judge is a local model served by `transformers serve` for this run
    (--judge is then the model name sent, usually the folder: pass the same value as --serve).
    With --local the local model reads each verdict's distribution from one forward pass of
    the prompt (no server; a few greedy tokens only where needed); --logprobs stores an API judge's distribution."""
    import contextlib

    from click.core import ParameterSource

    from judgecal.views.rate import run_rate

    given = {n for n in cctx.params if cctx.get_parameter_source(n) == ParameterSource.COMMANDLINE}
    if local is not None:
        bad = sorted(given & {"base_url", "serve", "serve_device", "max_tokens", "concurrency", "timeout", "max_attempts",
                              "max_outage", "top_logprobs"})
        if bad:
            raise click.UsageError(f"--{bad[0].replace('_', '-')} does not apply with --local (no endpoint, no sampling)")
        if judge is not None and judge != local:
            raise click.UsageError("--judge names the model an endpoint serves; with --local the judge is the --local "
                                   "model (name it with --judge-name)")
        judge = local
    else:
        bad = sorted(given & {"local_device", "local_dtype", "verdict_prefix"})
        if bad:
            raise click.UsageError(f"--{bad[0].replace('_', '-')} applies to --local only")
        if judge is None:
            raise click.UsageError("Missing option '--judge' (the judge model's name; or rate with --local MODEL)")
    if top_logprobs is not None:
        logprobs = True
    else:
        top_logprobs = 20

    server = contextlib.nullcontext(base_url)
    if serve:
        from judgecal.judge.server import LocalServer
        from judgecal.localmodel import resolve_model

        folder = resolve_model(serve)
        server = LocalServer(folder, device=serve_device)
        if judge == serve:
            judge = str(folder)
        # the same local model is the same judge on every run, whatever port or path it had
        identity = {"endpoint_id": "transformers-serve", "identity_model": folder.name}
    else:
        identity = {}
    with server as url:
        summary = run_rate(judge=judge, base_url=url, prompt=prompt, task_families=task_families,
                           model_filter=model_filter, samples=samples, temperature=temperature, max_tokens=max_tokens,
                           concurrency=concurrency, limit=limit, items=items, judge_name=judge_name,
                           retry_failed=retry_failed, pairwise=pairwise, baseline=baseline, max_outage_s=max_outage,
                           timeout=timeout, max_attempts=max_attempts,
                           logprobs=logprobs, top_logprobs=top_logprobs, database_url=ctx.url, progress=True,
                           local=local, local_device=local_device, local_dtype=local_dtype,
                           verdict_prefix=verdict_prefix, **identity)
    if fmt == "json":
        emit_json(summary)
    else:
        r, t = summary["this_run"], summary["totals"]
        out.print(f"judge {summary['judge_id']} ({summary['judge_name']}, {summary['prompt']}): this run ok {r['ok']}, "
                  f"unparsed {r['unparsed']}, failed {r['failed']} in {summary['elapsed_s']} s "
                  f"({summary['ratings_per_s']}/s); totals " + ", ".join(f"{k} {v}" for k, v in t.items()),
                  highlight=False, markup=False)
    from judgecal.views.rate import exit_status, notices

    for line in notices(summary):
        err.print(line, highlight=False, markup=False)
    code, message = exit_status(summary)
    if message:
        err.print(message, highlight=False, markup=False)
    if code:
        sys.exit(code)
