"""`judgecal import`: tasks, responses, expert labels, ratings and verbosity pairs."""

from __future__ import annotations

from pathlib import Path

import click

from judgecal._cli.common import FMT_OPT, Ctx, emit_json, group, pass_ctx, warn


@group("import")
def import_() -> None:
    """Import tasks, responses, expert labels, ratings and verbosity pairs (one transaction per file)."""


def _print_import(result: dict, fmt: str) -> None:
    for w in result["warnings"]:
        warn(w)
    if fmt == "json":
        emit_json(result)
        return
    skipped = f"; {len(result['warnings'])} warnings (above)" if result["warnings"] else ""
    if result.get("records") == 0:  # an export of nothing (generic JSONL/CSV): nothing to write
        click.echo(f"imported {result['source']}: 0 records in {result['file']} (what judgecal export writes when "
                   f"there is nothing to export): nothing imported, nothing written{skipped}")
        return
    added = ", ".join(f"{k} +{v}" for k, v in result["added"].items())
    click.echo(f"imported {result['source']}: {added}{skipped}")
    for reason, s in (result.get("skipped") or {}).items():
        more = f" (first: {', '.join(s['where'][:3])})" if s["where"] else ""
        click.echo(f"  not imported: {s['count']} records: {reason}{more}")
    for reason, s in (result.get("stored_unparsed") or {}).items():  # a score or verdict the file gave, not stored
        click.echo(f"  stored unparsed: {s['count']} records: {reason} (first: {', '.join(s['where'][:3])})")
    for reason, s in (result.get("not_read") or {}).items():  # files and folders of the input not read
        for path in s["where"]:
            click.echo(f"  not read: {path} ({reason})")
        if s["count"] > len(s["where"]):
            click.echo(f"  not read: {s['count'] - len(s['where'])} more ({reason})")
    from judgecal.views.importing import file_lines, parsing_line

    for line in file_lines(result):
        click.echo(f"  {line}")
    if (line := parsing_line(result)) is not None:  # where the files were parsed, and why not by workers
        click.echo(f"  {line}")
    parity = result.get("llmbar_statistics")
    if parity and parity["compared"]:
        click.echo(f"  LLMBar statistics.json: {parity['equal']} of {parity['compared']} files reproduced figure for figure"
                   + (f"; {len(parity['differ'])} differ (warnings above)" if parity["differ"] else ""))



FAMILY_OPT = click.option("--task-family", "family", default=None, metavar="NAME", help="Task family to file the items under.")




@import_.command("llmbar")
@click.argument("folder", type=click.Path(path_type=Path))
@FAMILY_OPT
@FMT_OPT
@pass_ctx
def import_llmbar(ctx: Ctx, folder: Path, family: str | None, fmt: str) -> None:
    """LLMBar: a set folder (dataset.json + ratings_<JUDGE>.json or evaluators/<JUDGE>/<PROTOCOL>/result.json),
    or the LLMBar repository's Dataset/LLMBar folder or root (every set, Adversarial GPTOut and Manual included).

    Every judge and protocol: Rating protocols as ratings, the others as pairwise verdicts of judge
    <JUDGE>/<PROTOCOL> in both orders; each statistics.json is recomputed and compared (docs/data-formats.md).
    Default task family: llmbar/<set> (llmbar/Adversarial_<set>)."""
    from judgecal.views import importing

    _print_import(importing.import_llmbar(folder, family, ctx.url), fmt)


@import_.command("pandalm")
@click.argument("file", type=click.Path(path_type=Path))
@FAMILY_OPT
@FMT_OPT
@pass_ctx
def import_pandalm(ctx: Ctx, file: Path, family: str | None, fmt: str) -> None:
    """The PandaLM test set: two responses and three annotators per record (default family: pandalm)."""
    from judgecal.views import importing

    _print_import(importing.import_pandalm(file, family, ctx.url), fmt)


@import_.command("autoj")
@click.argument("file", type=click.Path(path_type=Path))
@FAMILY_OPT
@FMT_OPT
@pass_ctx
def import_autoj(ctx: Ctx, file: Path, family: str | None, fmt: str) -> None:
    """Auto-J's pairwise test file (prompt, response 1, response 2, label 0/1/2=tie, scenario).

    Default task family: autoj/<scenario>."""
    from judgecal.views import importing

    _print_import(importing.import_autoj(file, family, ctx.url), fmt)


@import_.command("judgebench")
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path))
@FAMILY_OPT
@FMT_OPT
@pass_ctx
def import_judgebench(ctx: Ctx, files: tuple[Path, ...], family: str | None, fmt: str) -> None:
    """JudgeBench data files and reward-model output files (scores on an unbounded scale).

    Default task family: judgebench."""
    from judgecal.views import importing

    _print_import(importing.import_judgebench(list(files), family, ctx.url), fmt)


@import_.command("alpaca-eval")
@click.argument("files", nargs=-1, type=click.Path(path_type=Path))
@click.option("--pair", "pairs", nargs=2, multiple=True, type=click.Path(path_type=Path), metavar="CONCISE VERBOSE",
              help="Record verbosity pairs between two output files (matched by instruction). Repeatable.")
@FAMILY_OPT
@click.option("--workers", type=click.IntRange(0, 64), default=None, metavar="N",
              help="Processes that parse files while this one writes (default: one fewer than the CPUs, at most 4, "
                   "with 2+ files and 8 MB+ in all; 0: parse here). POSIX fork only; more than files - 1 are not started.")
@FMT_OPT
@pass_ctx
def import_alpaca(ctx: Ctx, files: tuple[Path, ...], pairs, family: str | None, workers: int | None, fmt: str) -> None:
    """AlpacaEval model_outputs.json and annotations.json files, or results/ folders (default family: alpaca_eval).

    model_outputs.json: one producing model (generator) each. annotations.json: the annotator's
    pairwise verdicts of each model against the baseline (stored with soft preference)."""
    from judgecal.views import importing

    if not files and not pairs:
        raise click.UsageError("give at least one FILE or --pair CONCISE VERBOSE")
    _print_import(importing.import_alpaca_eval(list(files), list(pairs), family, ctx.url, workers=workers), fmt)


def _generic(fmt_name: str):
    @click.argument("file", type=click.Path(path_type=Path))
    @click.option("--kind", required=True, type=click.Choice(["responses", "ratings", "labels", "pairs", "verdicts", "calibrations"]),
                  help="What each record holds (fields in docs/data-formats.md).")
    @FAMILY_OPT
    @FMT_OPT
    @pass_ctx
    def command(ctx: Ctx, file: Path, kind: str, family: str | None, fmt: str) -> None:
        from judgecal.views import importing

        _print_import(importing.import_generic(file, kind, fmt_name, family, ctx.url), fmt)

    command.__doc__ = f"judgecal's generic {fmt_name.upper()} format: responses, ratings, labels, verbosity pairs, verdicts or calibrations."
    return command


import_.command("jsonl")(_generic("jsonl"))
import_.command("csv")(_generic("csv"))
