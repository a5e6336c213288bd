"""`judgecal mc`: log-likelihood multiple-choice scoring."""

from __future__ import annotations

import json
from pathlib import Path

import click

from judgecal._cli.common import FMT_OPT, Ctx, emit_json, err, group, out, pass_ctx, warn

FORWARDS = ("auto", "fused", "transformers")  # = judgecal.loglik.hf.FORWARDS (importing judgecal.loglik costs 0.5 s; a test keeps them equal)


@group()
def mc() -> None:
    """Log-likelihood multiple-choice scoring (acc, acc_norm, acc_bytes, per-token, PMI)."""


def _batch_size(value: str) -> int | str:
    if value == "auto":
        return value
    try:
        n = int(value)
    except ValueError:
        raise click.BadParameter("an integer >= 1 or 'auto'") from None
    if n < 1:
        raise click.BadParameter("an integer >= 1 or 'auto'")
    return n


def _datasets_map(values) -> dict:
    out = {}
    for v in values:
        name, sep, folder = v.partition("=")
        if not sep or not name or not folder:
            raise click.BadParameter(f"{v!r}: give OWNER/NAME=FOLDER (a Hub dataset id and its local copy)",
                                     param_hint="--dataset")
        if name in out and out[name] != folder:  # never silently the last one
            raise click.BadParameter(f"{name} given two folders ({out[name]}, {folder}): give one",
                                     param_hint="--dataset")
        out[name] = folder
    return out


def _limit(value):
    if value is None:
        return None
    try:
        n = float(value)
    except ValueError:
        raise click.BadParameter(f"{value!r}: an integer >= 1 or a fraction in (0, 1)") from None
    if n.is_integer() and n >= 1:
        return int(n)
    if 0 < n < 1:
        return n
    raise click.BadParameter(f"{value!r}: an integer >= 1 or a fraction in (0, 1)")


def _seeds(value):
    if value is None:
        return None
    parts = [p.strip() for p in value.split(",")]
    try:
        seeds = [None if p.lower() == "none" else int(p) for p in parts]
    except ValueError:
        raise click.BadParameter(f"{value!r}: one integer, or four (python random, numpy, torch, few-shot) "
                                 "separated by commas, 'None' for one left unset") from None
    if len(seeds) == 1:
        return seeds * 4
    if len(seeds) != 4:
        raise click.BadParameter(f"{value!r}: one value or four, got {len(seeds)}")
    return seeds


def _metadata(value):
    if value is None:
        return None
    try:
        obj = json.loads(value)
    except ValueError as exc:
        raise click.BadParameter(f"not JSON ({exc.msg} at column {exc.colno}); give a JSON object, "
                                 "e.g. '{\"max_seq_lengths\": [4096]}'") from None
    if not isinstance(obj, dict):
        raise click.BadParameter(f"a JSON object is needed, got {type(obj).__name__}")
    return obj


@mc.command("score")
@click.option("--model", required=True, help="`smollm2` (after `judgecal model pull`), a transformers model folder, or with --base-url the served model name.")
@click.option("--task", "task_path", required=True, metavar="NAME|FILE",
              help="JSONL (query/choices/gold), HellaSwag text (.txt[.bz2]), an lm-evaluation-harness task YAML, or an lm-eval task, group or tag name (arc_challenge, mmlu).")
@click.option("--limit", default=None, callback=lambda c, p, v: _limit(v), metavar="N|FRACTION",
              help="Score the first N items only, or a fraction in (0, 1) of them (lm-eval tasks: of each task).")
@click.option("--device", default="cpu", show_default=True, help="cpu, cuda or cuda:N.")
@click.option("--dtype", type=click.Choice(["float32", "bfloat16", "float16"]), default="float32", show_default=True,
              help="Model weights' dtype (log-softmax is float32 whatever it is).")
@click.option("--batch-size", default="auto", show_default=True, callback=lambda c, p, v: _batch_size(v),
              help="Items per forward pass, or auto (a token budget).")
@click.option("--forward", type=click.Choice(FORWARDS), default="auto", show_default=True,
              help="Local body forward: judgecal's fused Llama forward (auto: where the model is a plain Llama; for lm-eval tasks auto is transformers) or the model's own transformers forward.")
@click.option("--null-context", default="Answer:", show_default=True,
              help="Judgecal task files: context for acc_pmi; '' = lm-eval's acc_mutual_info (BOS only).")
@click.option("--no-pmi", is_flag=True, help="Judgecal task files: skip the null-context pass (no acc_pmi).")
@click.option("--prompt", default="{query}\nAnswer:", show_default=True, help="JSONL tasks: context template with {query}.")
@click.option("--base-url", default=None, metavar="URL", help="Score through an OpenAI-compatible completions endpoint instead.")
@click.option("--loader", type=click.Choice(["auto", "lm-eval", "native"]), default="auto", show_default=True,
              help="How --task is read: lm-eval's task machinery (auto: for names, and for YAML where lm-eval is installed) or judgecal's own loaders.")
@click.option("--num-fewshot", type=click.IntRange(0), default=None,
              help="lm-eval tasks: few-shot examples (default: the config's num_fewshot, else 0; a config's 0 is kept, as in lm-eval).")
@click.option("--fewshot-seed", type=int, default=None, help="lm-eval tasks: seed of the few-shot sampler (default: 1234, lm-eval's).")
@click.option("--include-path", "include_paths", multiple=True, type=click.Path(file_okay=False, path_type=Path),
              help="lm-eval tasks: another folder of task YAMLs (repeatable), as lm-eval's --include_path.")
@click.option("--data-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="lm-eval tasks: folder of local copies of Hub datasets, DIR/OWNER/NAME (e.g. DIR/allenai/ai2_arc).")
@click.option("--dataset", "datasets_", multiple=True, metavar="OWNER/NAME=FOLDER",
              help="lm-eval tasks: read the Hub dataset OWNER/NAME from the local copy FOLDER (repeatable).")
@click.option("--apply-chat-template", is_flag=True, help="lm-eval tasks: render prompts with the model's chat template.")
@click.option("--fewshot-as-multiturn/--no-fewshot-as-multiturn", default=None,
              help="lm-eval tasks with --apply-chat-template: few-shot examples as chat turns (default: on with a chat template, as lm-eval).")
@click.option("--system-instruction", default=None, metavar="TEXT", help="lm-eval tasks: system instruction before the prompt.")
@click.option("--seed", "seeds", default=None, metavar="N|R,NP,T,F",
              help="lm-eval tasks: lm-eval's --seed: python random, numpy, torch and few-shot seeds, one value for all "
                   "four or four with commas ('None' leaves one unset; default 0,1234,1234,1234).")
@click.option("--metadata", default=None, metavar="JSON",
              help="lm-eval tasks: a JSON object merged into every task config's metadata (lm-eval's --metadata).")
@click.option("--output-path", type=click.Path(path_type=Path), default=None, metavar="DIR|FILE.json",
              help="lm-eval tasks: write lm-eval's results JSON there (DIR/<model>/results_<date>.json), as lm-eval's --output_path.")
@click.option("--log-samples", is_flag=True,
              help="lm-eval tasks, with --output-path: also lm-eval's per-document samples_<task>_<date>.jsonl.")
@click.option("--write-out", is_flag=True,
              help="lm-eval tasks: print each task's first prompt and target to standard error (lm-eval's --write_out).")
@click.option("--max-length", type=click.IntRange(min=2), default=None, metavar="N",
              help="lm-eval tasks: the model's positions (lm-eval's max_length model argument): the rolling windows of "
                   "perplexity tasks and the left-truncation of long contexts (default: the model's, as --model hf).")
@FMT_OPT
@pass_ctx
def mc_score(ctx: Ctx, model, task_path, limit, device, dtype, batch_size, forward, null_context, no_pmi, prompt, base_url,
             loader, num_fewshot, fewshot_seed, include_paths, data_dir, datasets_, apply_chat_template,
             fewshot_as_multiturn, system_instruction, seeds, metadata, output_path, log_samples, write_out, max_length,
             fmt) -> None:
    """Score a multiple-choice task by log-likelihood and store the run.

    lm-evaluation-harness tasks (by name, pattern or YAML; several with commas, as lm-eval's
    --tasks) are built by lm-eval's own task machinery (few-shot, metric_list, groups) and
    scored by judgecal; data are read offline. lm-eval perplexity tasks (loglikelihood_rolling)
    report word_perplexity, byte_perplexity and bits_per_byte."""
    from click.core import ParameterSource

    from judgecal.views import mc as mc_mod

    cctx = click.get_current_context()
    explicit = {n for n in ("prompt", "null_context", "no_pmi", "num_fewshot", "fewshot_seed", "include_paths", "data_dir",
                            "datasets_", "apply_chat_template", "fewshot_as_multiturn", "system_instruction", "seeds",
                            "metadata", "output_path", "log_samples", "write_out", "max_length")
                if cctx.get_parameter_source(n) not in (ParameterSource.DEFAULT, None)}
    given = {{"no_pmi": "null_context", "datasets_": "datasets_map"}.get(n, n) for n in explicit}
    run_id, res = mc_mod.score(task_path, model, device=device, dtype=dtype, batch_size=batch_size, forward=forward,
                               null_context=None if no_pmi else null_context, limit=limit, prompt=prompt,
                               base_url=base_url, db_url=ctx.url, loader=loader, num_fewshot=num_fewshot,
                               fewshot_seed=fewshot_seed, include_paths=include_paths, data_dir=data_dir,
                               datasets_map=_datasets_map(datasets_), apply_chat_template=apply_chat_template,
                               fewshot_as_multiturn=fewshot_as_multiturn, system_instruction=system_instruction,
                               seeds=_seeds(seeds), metadata=_metadata(metadata), output_path=output_path,
                               log_samples=log_samples, write_out=write_out, given=given, max_length=max_length)
    from judgecal.loglik.lmeval_rolling import n_documents

    for line in getattr(res, "write_out", None) or []:
        err.print(line, markup=False, highlight=False)
    files = getattr(res, "output_files", None)
    if fmt == "json":
        emit_json({"run_id": run_id, "task": res.task, "model": res.model, "backend": res.backend,
                   "n_items": n_documents(res), "metrics": res.metrics, "diagnostics": res.diagnostics,
                   "settings": res.settings, "stats": res.stats, "output_files": files})
        return
    st = res.settings
    shots = f", {st['num_fewshot']}-shot" if isinstance(st.get("num_fewshot"), int) else ""
    unit = "documents" if res.diagnostics.get("output_type") == "loglikelihood_rolling" else "items"
    out.print(f"run {run_id}: {res.task}{shots}, {n_documents(res)} {unit}, model {res.model} ({res.backend}), "
              f"{res.stats['items_per_s']:.1f} {unit}/s")
    from judgecal.report.mc_tables import metrics_renderable

    out.print(metrics_renderable(res.metrics, res.diagnostics))
    by_task = res.diagnostics.get("by_task") or {}
    if len(by_task) > 1:
        from rich.table import Table

        names = sorted({m for v in by_task.values() for m in v["metrics"]})
        table = Table("task / group", "n", "shots", *names)
        for name, v in list((res.diagnostics.get("groups") or {}).items()) + list(by_task.items()):
            cells = [f"{v['metrics'][m]['value']:.4f}" if m in v["metrics"] else "-" for m in names]
            table.add_row(v.get("alias") or name, str(v["n"]), str(v.get("num_fewshot", "")), *cells)
        out.print(table)
    if files:
        out.print(f"wrote {files['results']}" + (f" and {len(files['samples'])} samples file(s)" if files["samples"] else ""),
                  markup=False, highlight=False)


@mc.command("list")
@FMT_OPT
@pass_ctx
def mc_list(ctx: Ctx, fmt) -> None:
    """List stored multiple-choice runs, newest first."""
    from judgecal.views import mc as mc_mod
    from judgecal.report.mc_tables import runs_table

    runs = mc_mod.list_runs(ctx.url)
    if fmt == "json":
        emit_json(runs)
        return
    out.print(runs_table(runs))


@mc.command("export")
@click.argument("run_id", type=int)
@click.argument("file", type=click.Path(path_type=Path, dir_okay=False))
@click.option("--format", "fmt", type=click.Choice(["jsonl", "csv"]), default=None,
              help="Output format (default: from the file extension, else jsonl).")
@pass_ctx
def mc_export(ctx: Ctx, run_id: int, file: Path, fmt) -> None:
    """Write RUN_ID's items to FILE (`-`: standard output): lm-eval task and doc id, gold(s),
    each metric's prediction, per-choice log-likelihoods and the requests scored."""
    from judgecal.views import mc as mc_mod

    n = mc_mod.export_items(run_id, file, fmt, ctx.url)
    if str(file) == "-":
        err.print(f"wrote {n} items of run {run_id} to standard output", highlight=False)
    else:
        click.echo(f"wrote {n} items of run {run_id} to {file}")


@mc.command("compare")
@click.argument("run_a", type=int)
@click.argument("run_b", type=int)
@FMT_OPT
@pass_ctx
def mc_compare(ctx: Ctx, run_a: int, run_b: int, fmt) -> None:
    """Metric deltas RUN_B - RUN_A; flags acc and acc_norm moving in opposite directions."""
    from judgecal.views import mc as mc_mod
    from judgecal.report.mc_tables import compare_renderable

    cmp = mc_mod.compare(run_a, run_b, ctx.url)
    if fmt == "json":
        emit_json(cmp)
        return
    if cmp.get("warning"):
        warn(cmp["warning"])
    out.print(compare_renderable(cmp, run_a, run_b))
