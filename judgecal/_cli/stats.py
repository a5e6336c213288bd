"""`judgecal stats` and `judgecal lengths`."""

from __future__ import annotations

import click

from judgecal._cli.common import FMT_OPT, Ctx, command, emit_json, out, pass_ctx


@command()
@FMT_OPT
@pass_ctx
def stats(ctx: Ctx, fmt: str) -> None:
    """Counts per task family: items, responses, ratings and pairwise verdicts by judge and status (a judge shown as `name (id N)` where several judges share the name), labels, verbosity pairs; per model, the mean and median of its answers' lengths and Markdown counts (docs/style.md)."""
    from judgecal.report.tables import stats_table, style_table
    from judgecal.views.stats import collect_stats

    data = collect_stats(ctx.url, style=True)
    if fmt == "json":
        emit_json(data)
    else:
        out.print(stats_table(data))
        out.print(style_table(data))


@command()
@click.option("--tokenizer", default="smollm2", show_default=True, metavar="NAME",
              help="`smollm2` (the pulled model's tokenizer), `hf:<folder>`, or `words`, `chars`, `bytes`.")
@FMT_OPT
@pass_ctx
def lengths(ctx: Ctx, tokenizer: str, fmt: str) -> None:
    """Store every response's length in tokens under TOKENIZER (only those not stored yet)."""
    from judgecal import tokens

    result = tokens.fill_lengths(tokenizer, ctx.url)
    if fmt == "json":
        emit_json(result)
    else:
        click.echo(f"{result['tokenizer']}: {result['added']} token lengths added, {result['total']} stored")
