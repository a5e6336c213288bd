"""`judgecal fit`: fit the length penalty against expert labels."""

from __future__ import annotations

import click

from judgecal._cli.common import FMT_OPT, Ctx, Finite, command, emit_json, err, out, pass_ctx, summary_opts, warn


# a repeated --task-family is refused: a calibration is fitted on one family (pooled fits do not exist)
@command(repeat_hints={"family": "run one fit per family, or import the sets under one family name "
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
        if fmt == "json":
            emit_json(rows)
        else:
            _print_fits(rows, "calibrations")
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
    _print_fits([row], f"calibration {row['id']}")
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


def _print_fits(rows: list[dict], title: str) -> None:
    """Calibrations as a table that fits the terminal, the columns it left out named under it."""
    from judgecal.report.tables import fit_list_table

    table, notes = fit_list_table(rows, out.width, title=title)
    out.print(table)
    for line in notes:
        out.print(line, markup=False, highlight=False)
