"""`judgecal check`: the release gate."""

from __future__ import annotations

import sys

import click
from click.core import ParameterSource

from judgecal._cli.common import (CAL_OPT, FAMILIES_OPT, FMT_OPT, Ctx, Finite, command, emit_json, err, out,
                                 pass_ctx, refuse_idle_risk_k, summary_opts)


@command()
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
@click.option("--publish", type=click.Choice(["recommended", "raw", "calibrated"]), default="recommended",
              show_default=True,
              help="Which numbers are published, so that the gate checks those: recommended follows each calibration's "
                   "advice (the calibration where it is backed out of sample, raw where the advice is keep raw); raw "
                   "publishes the raw scores; calibrated the calibration everywhere (fails where the advice is keep raw).")
@click.option("--max-style-coefficient", type=Finite(), default=None, metavar="X",
              help="Also gate each family and judge with pairwise verdicts on how much the judge rewards style: the "
                   "style-controlled Bradley-Terry fit (judgecal bt --control) gives each feature's coefficient (log-odds "
                   "per sd) with a bootstrap CI; fail when a CI's lower bound is above X (e.g. 0.2). Refused where the "
                   "families have no pairwise verdicts.")
@click.option("--control", type=click.Choice(["length", "markdown", "both"]), default="both", show_default=True,
              help="--max-style-coefficient: the style features gated (as judgecal bt --control).")
@click.option("--length-unit", type=click.Choice(["tokens", "words", "chars", "bytes"]), default="tokens",
              show_default=True, help="--max-style-coefficient: the length, and the unit of the Markdown densities.")
@click.option("--tokenizer", default="smollm2", show_default=True, metavar="NAME",
              help="--max-style-coefficient with --length-unit tokens: the tokenizer (lengths not stored yet are "
                   "computed and stored, as judgecal lengths does).")
@click.option("--bootstrap", "n_bootstrap", type=click.IntRange(20, 100000), default=1000, show_default=True,
              help="--max-style-coefficient: item resamples of the style coefficients' CIs. Transfer targets: paired bootstrap resamples of the target's items first; a CI bound within Monte "
                   "Carlo error of zero is resampled further (doubling, up to 32x); still undecided fails.")
@click.option("--seed", type=click.IntRange(0, 2**31 - 1), default=0, show_default=True,
              help="Seed of the transfer and the style coefficients' resamples.")
@summary_opts(extra=" A calibration fitted on another summary is refused.")
@FMT_OPT
@pass_ctx
@click.pass_context
def check(cctx: click.Context, ctx: Ctx, families, judge, calibration, max_verbosity_winrate, min_agreement_gain, max_unparsed,
          min_verbosity_winrate, allow_unidentified, fail_at_bound, max_baseline_gap, allow_degenerate_answers,
          publish, max_style_coefficient, control, length_unit, tokenizer, n_bootstrap, seed, summary, risk_k,
          fmt) -> None:
    """Release gate: exit 0 when every threshold holds, 1 when one fails, 2 on a usage error.

    With --calibration ID, a --task-family other than the calibration's own is a transfer target:
    the check fails when the calibration (its recommended method or its polylog fit) lowers that
    family's expert agreement.

    \b
    Examples:
      judgecal check --judge GPT-4
      judgecal check --calibration 3 --task-family llmbar/Adversarial_Neighbor
      judgecal check --task-family alpaca_eval --max-style-coefficient 0.2"""
    refuse_idle_risk_k(summary)
    given = [p for p in ("control", "length_unit", "tokenizer") if cctx.get_parameter_source(p) == ParameterSource.COMMANDLINE]
    if given and max_style_coefficient is None:
        raise click.UsageError(f"--{given[0].replace('_', '-')} applies to --max-style-coefficient")
    if "tokenizer" in given and length_unit != "tokens":
        raise click.UsageError(f"--tokenizer applies to --length-unit tokens (not {length_unit})")
    from judgecal.views.check import run_check
    from judgecal.report.board import check_table

    from judgecal.progress import steps

    with steps(err, "check (transfers and style coefficients are evaluated with bootstrap CIs)"):
        result = run_check(list(families), judge, calibration, ctx.url, max_verbosity_winrate=max_verbosity_winrate,
                           min_agreement_gain=min_agreement_gain, max_unparsed=max_unparsed,
                           fail_at_bound=fail_at_bound, max_baseline_gap=max_baseline_gap,
                           min_verbosity_winrate=min_verbosity_winrate, allow_unidentified=allow_unidentified,
                           allow_degenerate_answers=allow_degenerate_answers, summary=summary, risk_k=risk_k,
                           publish=publish, transfer_bootstrap=n_bootstrap, seed=seed,
                           max_style_coefficient=max_style_coefficient, style_control=control, length_unit=length_unit,
                           tokenizer=tokenizer,
                           resampling_asked=any(cctx.get_parameter_source(n) == ParameterSource.COMMANDLINE
                                                for n in ("n_bootstrap", "seed")))
    if fmt == "json":
        emit_json(result)
    else:
        out.print(check_table(result))
        for c in result["checks"]:
            if not c["ok"]:
                err.print(f"FAIL {c['message']}", highlight=False, markup=False)
    if not result["ok"]:
        sys.exit(1)
