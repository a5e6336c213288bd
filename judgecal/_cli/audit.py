"""`judgecal audit`: the judge audit, pair by pair (what ``judgecal serve`` shows at ``/audit``)."""

from __future__ import annotations

import click

from judgecal._cli.common import FMT_OPT, Ctx, command, emit_json, out, pass_ctx

#: judgecal.views.audit.ALL_FILTERS (written out: the views module loads numpy and scipy; a test keeps them equal)
FILTER_NAMES = ("all", "disagree", "flips", "ties", "unparsed", "inconsistent", "won", "lost", "won_longer")


@command()
@click.option("--task-family", "family", required=True, metavar="NAME", help="Task family to audit.")
@click.option("--judge", required=True, metavar="NAME|ID", help="Judge (a name, or id:N where several share it).")
@click.option("--model", default=None, metavar="NAME",
              help="Only the pairs holding an answer of this model (the name exactly as stored); each row says "
                   "which side is its answer.")
@click.option("--q", "q", default=None, metavar="TEXT",
              help="Only the pairs whose instruction or either answer contains TEXT (A-Z in any case, every other "
                   "character as written; % and _ are plain characters).")
@click.option("--filter", "flt", type=click.Choice(FILTER_NAMES), default="all", show_default=True,
              help="disagree, flips, ties, unparsed, inconsistent; with --model also won, lost, won_longer (won, and "
                   "the model's answer has more characters).")
@click.option("--page", type=click.IntRange(1), default=1, show_default=True)
@click.option("--per-page", type=click.IntRange(1, 200), default=25, show_default=True, help="Pairs a page (at most 200).")
@click.option("--calibration", default="latest", show_default=True, metavar="latest|none|ID",
              help="Calibration whose decisions are shown: the newest of the family and judge, none, or an id.")
@FMT_OPT
@pass_ctx
def audit(ctx: Ctx, family, judge, model, q, flt, page, per_page, calibration, fmt) -> None:
    """The judge audit: the family's pairs of answers with the judge's decisions, pair by pair.

    One line per pair: kind (expert, verbosity, verdicts), the instruction, both answers'
    models and lengths, the judge's decision, the expert label and the filters the pair
    passes. --format json holds the texts, ratings and verdicts, and is exactly what
    `judgecal serve` returns for /audit?...&format=json with the same options."""
    from judgecal.report.audit import audit_table
    from judgecal.views.audit import judge_audit

    a = judge_audit(family, judge, ctx.url, filter=flt, page=page, per_page=per_page, calibration=calibration,
                    model=model, q=q)
    if fmt == "json":
        emit_json(a)
        return
    table, head, notes = audit_table(a, out.width)
    for line in head:
        out.print(line, markup=False, highlight=False)
    out.print(table)
    for line in notes:
        out.print(line, markup=False, highlight=False)
