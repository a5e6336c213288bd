"""``judgecal check``: the release gate. Exit 0 when every threshold holds, 1 when one fails
(one line per failure), 2 on a usage error.

Checks, per (task family, judge) with a calibration (the newest, unless ``calibration`` names an
id: that calibration, refused when ``families`` or ``judge`` name another family or judge):
- calibrated verbosity win-rate <= ``max_verbosity_winrate`` (where verbosity pairs were measured);
- cross-validated agreement gain (calibrated - raw) >= ``min_agreement_gain`` (a calibration
  fitted without cross-validation fails this check: the gate never passes an unseen figure);
- share of unparsed + failed ratings of the judge in the family <= ``max_unparsed``;
- the fit converged and, with ``fail_at_bound``, no parameter sits at a bound;
- with ``max_baseline_gap``: no baseline beats the published calibration (polylog) out of sample
  by more than that much cross-validated agreement (``comparison.gap`` of the fit: best method's
  CV agreement minus polylog's; a fit without that figure fails: refit).
- advice: the nested selection's advice is to calibrate ("keep raw", or no recorded
  recommendation, fails: publish the raw scores, or refit);
- the calibration is fresh: the ratings, labels, lengths and verbosity pairs it was fitted on
  (its recorded fingerprint) have not changed since ("stale" fails: refit with judgecal fit; a
  calibration stored before fingerprints existed fails as "freshness unknown").
- ``degenerate_answers``: no model of the family gives empty answers, the same answer to many
  items, or answers far below L_ref (the fit's flags of :mod:`judgecal.calibrate.guards`),
  unless ``allow_degenerate_answers``; a calibration stored before judgecal looked for them fails
  (refit), unless allowed.
Families whose judge ratings have expert labels but no calibration fail ("run judgecal fit")."""

from __future__ import annotations

from judgecal.errors import UsageError
from judgecal.views.fitting import load_calibrations


def run_check(families=None, judge: str | None = None, calibration: str = "latest", url: str | None = None, *,
              max_verbosity_winrate: float = 0.55, min_agreement_gain: float = 0.0, max_unparsed: float = 0.05,
              fail_at_bound: bool = False, max_baseline_gap: float | None = None,
              allow_degenerate_answers: bool = False, min_verbosity_winrate: float = 0.45,
              allow_unidentified: bool = False, transfer_bootstrap: int = 1000, seed: int = 0, summary: str = "greedy",
              risk_k: float = 1.0, publish: str = "recommended", resampling_asked: bool = False,
              max_style_coefficient: float | None = None, style_control: str = "both", length_unit: str = "tokens",
              tokenizer: str = "smollm2") -> dict:
    """{"ok": bool, "publish": the mode, "published": {"family / judge": "raw" | "calibrated"},
    "checks": [{"task_family", "judge", "check", "value", "threshold", "ok", "message"}]}.

    ``publish`` says which numbers are published, so that the gate checks exactly those
    (:data:`PUBLISH_MODES`): "recommended" (default) follows each calibration's advice, the
    calibration where the nested selection backs one and the raw scores where it says keep
    raw; "raw" publishes the raw scores everywhere; "calibrated" the calibration everywhere
    (the advice check then fails where the advice is keep raw). Where raw scores are
    published, the calibration's own checks (identified, cross-validated gain, convergence,
    bounds, baseline gap, transfer) do not apply and one row says so; the verbosity thresholds
    are applied to the raw verbosity win-rate; staleness (the advice itself was computed on
    the data) and the unparsed share apply as for a calibration; degenerate answers are
    reported (the publish board sets those models apart) without failing.

    With a calibration id, each ``families`` entry other than the calibration's own family is a
    **transfer** target: the calibration's recommended method and its polylog calibration are
    applied there (:func:`judgecal.views.fitting.transfer_evaluation`, ``transfer_bootstrap``
    resamples first, ``seed``) and the check "transfer" fails when either lowers the target's
    expert agreement (paired 95% CI below zero), and when the CI's sign is undecided: a bound
    within Monte Carlo error of zero even after the resamples were doubled up to 32 times
    (:func:`judgecal.calibrate.resample.decided_mean_ci`), so the verdict does not hang on the seed.

    ``resampling_asked``: ``transfer_bootstrap`` or ``seed`` was given on purpose; without a
    transfer target it would change nothing, so it is refused (UsageError).

    ``max_style_coefficient``: also gate each family and judge with pairwise verdicts (those
    ``families`` and ``judge`` select) on its style coefficients
    (:func:`judgecal.views.stylecheck.style_checks`: the style-controlled Bradley-Terry fit with
    ``style_control``, lengths in ``length_unit`` under ``tokenizer``, ``transfer_bootstrap``
    item resamples with ``seed``): fails when a coefficient's CI lower bound is above it. Rows
    "style_coefficient" carry ``feature`` and ``ci`` besides the common keys. With it, a database
    without calibrations is gated on the style rows alone; without pairwise verdicts it is
    refused (UsageError).

    ``summary``/``risk_k``: the rating summary the gated ratings use (:mod:`judgecal.calibrate.summaries`);
    a calibration fitted on another summary is refused, and the check "rating_summary" reports
    what the fit's out-of-sample comparison of the summaries recommends (informational).

    Raises NotFoundError when no calibration matches (nothing to gate on), UsageError when the
    calibration named by id is not of ``judge``, is fitted on another summary, or a transfer
    target cannot be evaluated (transfers read the summary the calibration was fitted on: a
    target whose ok ratings lack the distribution it needs is refused)."""
    from judgecal.calibrate.summaries import check_summary
    from judgecal.errors import NotFoundError
    from judgecal.views.fitting import fit_row, refuse_summary_mismatch

    check_summary(summary, risk_k)
    if publish not in PUBLISH_MODES:
        raise UsageError(f"--publish must be one of {', '.join(PUBLISH_MODES)}, got {publish!r}")

    try:
        chosen = load_calibrations(families, judge, calibration, url)
    except NotFoundError:
        if max_style_coefficient is None or str(calibration) != "latest":
            raise
        chosen = []  # a pairwise judge without a calibration: gated on its style coefficients below
    targets: list[str] = []
    if str(calibration) != "latest":  # an id: --judge must agree with it; other --task-family values are transfers
        from judgecal.views.fitting import refuse_out_of_scope

        refuse_out_of_scope(chosen, None, judge, url)
        own = {fam for _, fam, _ in chosen}
        targets = [f for f in dict.fromkeys(families or []) if f not in own]
    if not chosen and max_style_coefficient is None:
        raise NotFoundError("no calibration to check: run `judgecal fit` first (see `judgecal fit --list`)")
    if resampling_asked and not targets and max_style_coefficient is None:  # never an option that changes nothing without a word
        raise UsageError("--bootstrap and --seed set the resampling of transfer targets (--calibration ID "
                         "--task-family OTHER); nothing is resampled here: drop them, or name a target")
    for row, fam, _ in chosen:
        refuse_summary_mismatch(row, summary, risk_k, fam)
    checks = []

    def add(fam, jud, name, value, threshold, ok, message):
        checks.append({"task_family": fam, "judge": jud, "check": name, "value": value, "threshold": threshold,
                       "ok": bool(ok), "message": message})

    from judgecal.views.fitting import staleness

    stale = staleness(chosen, url)
    published: dict[str, str] = {}
    for row, fam, jud in chosen:
        r = fit_row(row, fam, jud)
        where = f"{fam} / {jud} (calibration {r['id']})"
        shown = published_column(r, publish)
        published[f"{fam} / {jud}"] = shown
        _advice(add, fam, jud, where, r, publish)
        _summary_advice(add, fam, jud, where, r)
        for target in targets:  # asked for by name: gated whatever the source family publishes
            _transfer(add, row, fam, jud, target, url, transfer_bootstrap, seed, allow_degenerate_answers)
        if shown == "raw":
            _raw_checks(add, fam, jud, where, row, r, stale[row.id], max_verbosity_winrate, min_verbosity_winrate,
                        max_unparsed)
            if (r.get("identification") or {}).get("constant_judge"):  # its raw scores rank nothing either
                _identified(add, fam, jud, where, r, allow_unidentified)
            continue
        _identified(add, fam, jud, where, r, allow_unidentified)
        _stale(add, fam, jud, where, stale[row.id], "it was fitted on")
        _verbosity(add, fam, jud, where, r["verbosity_win_rate_calibrated"], "calibrated", max_verbosity_winrate,
                   min_verbosity_winrate)
        a, b = r["agreement_cv_raw"], r["agreement_cv_calibrated"]
        if a is not None and b is not None:
            gain = b - a
            add(fam, jud, "agreement_gain_cv", gain, min_agreement_gain, gain >= min_agreement_gain,
                f"{where}: cross-validated agreement gain {gain:+.3f} {'>=' if gain >= min_agreement_gain else '<'} {min_agreement_gain:+}")
        else:  # a gate must not pass a figure it never saw
            skipped = [w for w in r.get("warnings") or [] if "cross-validation skipped" in w]
            why = next((w for w in skipped if w.startswith("polylog:")), skipped[0] if skipped else None)
            add(fam, jud, "agreement_gain_cv", None, min_agreement_gain, False,
                f"{where}: no cross-validated agreement ({why}): with so few labelled pairs per fold no figure out of "
                f"sample exists; label more items" if why and r["folds"] >= 2 else
                f"{where}: no cross-validated agreement (fitted with --folds {r['folds']}): refit with --folds 2 or more")
        _unparsed(add, fam, jud, where, row, max_unparsed)
        add(fam, jud, "converged", r["converged"], True, r["converged"],
            f"{where}: the fit {'converged' if r['converged'] else 'did not converge'}")
        if max_baseline_gap is not None:
            cmp_ = r.get("comparison") or {}
            gap, best = cmp_.get("gap"), cmp_.get("best_method")
            if gap is None:
                add(fam, jud, "baseline_gap", None, max_baseline_gap, False,
                    f"{where}: no out-of-sample comparison with the baselines (fitted before judgecal recorded it, "
                    f"or without cross-validation): refit with --folds 2 or more")
            else:
                ok = gap <= max_baseline_gap
                add(fam, jud, "baseline_gap", gap, max_baseline_gap, ok,
                    f"{where}: best method out of sample is {best}; it beats the published calibration by "
                    f"{gap:+.3f} cross-validated agreement {'<=' if ok else '>'} {max_baseline_gap}")
        _degenerate_check(add, fam, jud, where, row, r, allow_degenerate_answers)
        if fail_at_bound:
            add(fam, jud, "at_bound", sorted(r["at_bound"]), [], not r["at_bound"],
                f"{where}: parameters at a bound: {', '.join(sorted(r['at_bound'])) or 'none'}")
    if max_style_coefficient is not None:
        from judgecal.views.stylecheck import style_checks

        checks += style_checks(families, judge, url, max_coefficient=max_style_coefficient, control=style_control,
                               length_unit=length_unit, tokenizer=tokenizer, n_bootstrap=transfer_bootstrap, seed=seed)
    return {"ok": all(c["ok"] for c in checks), "publish": publish, "published": published, "checks": checks}


#: ``check --publish`` / ``publish --publish``: which numbers a family's board publishes
PUBLISH_MODES = ("recommended", "raw", "calibrated")


def published_column(r: dict, publish: str = "recommended") -> str:
    """"raw" or "calibrated": what a family's board publishes under ``publish``
    (:data:`PUBLISH_MODES`) for the calibration ``r`` (:func:`judgecal.views.fitting.fit_row`).
    "recommended" publishes the calibration only where its nested selection's decision is to
    calibrate (its out-of-sample gain over raw clears zero), the fit is identified and the
    method is the polylog penalty the score board applies; raw otherwise (keep raw, no recorded
    decision, an unidentified fit, or another method: :func:`advice_line` says which)."""
    if publish in ("calibrated", "raw"):
        return publish
    sel = r.get("selection") or {}
    ident = r.get("identification") or {}
    if sel.get("decision") != "calibrate" or (ident and not ident.get("identified")):
        return "raw"
    return "calibrated" if str(sel.get("recommended") or "").startswith("polylog") else "raw"


def advice_line(fit: dict, publish: str = "recommended") -> str:
    """One line: what is published for the calibration ``fit`` (:func:`judgecal.views.fitting.fit_row`)
    under ``publish`` and the evidence (the nested selection's decision and reason, the
    identification)."""
    sel = fit.get("selection") or {}
    decision, rec, reason = sel.get("decision"), sel.get("recommended"), sel.get("reason")
    column = published_column(fit, publish)
    ident = fit.get("identification") or {}
    unidentified = bool(ident) and not ident.get("identified")
    if column == "calibrated":
        polylog = str(rec or "").startswith("polylog")
        what = ("calibrated, as advised: " + str(rec) if decision == "calibrate" and publish == "recommended" else
                "calibrated (--publish calibrated" + (", as the advice backs: " + str(rec)
                                                       if decision == "calibrate" and polylog else
                                                       f": the polylog fit, NOT the advised {rec} (a pair method the "
                                                       "score board cannot apply)" if decision == "calibrate" else
                                                       ", NOT backed by the advice") + ")")
        if unidentified:
            what += "; the fit is not identified, do not publish: " + "; ".join(ident.get("reasons") or [])
    elif decision == "keep raw":
        what = "raw, as advised: keep raw" + (" (--publish raw)" if publish == "raw" else "")
    elif decision == "calibrate":
        what = (f"raw (--publish raw; the advice backs {rec})" if publish == "raw" else
                f"raw: the advice backs {rec}, but " + ("the fit is not identified" if unidentified
                                                        else f"the score board applies polylog only, not {rec}"))
    else:
        what = "raw: no recommendation recorded (refit with judgecal fit)"
    return f"calibration {fit.get('id')}: published {what}" + (f" ({reason})" if reason else "")


def _raw_checks(add, fam, jud, where, row, r: dict, stale, max_vwr: float, min_vwr: float, max_unparsed: float) -> None:
    """The checks of a family whose raw scores are published: freshness of the advice, the
    verbosity thresholds on the raw verbosity win-rate, the unparsed share; the calibration's
    own checks named as not applicable; degenerate answers reported without failing."""
    add(fam, jud, "calibration_checks", None, None, True,
        f"{where}: the raw scores are published, so the calibration's own checks (identified, cross-validated gain, "
        f"convergence, bounds, baseline gap) do not apply")
    _stale(add, fam, jud, where, stale, "the advice was computed on")
    _verbosity(add, fam, jud, where, r.get("verbosity_win_rate_raw"), "raw", max_vwr, min_vwr)
    _unparsed(add, fam, jud, where, row, max_unparsed)
    found = [f for f in r.get("flags") or [] if isinstance(f, dict) and f.get("code") in _degenerate_codes()]
    add(fam, jud, "degenerate_answers", [f["code"] for f in found], [], True,
        f"{where}: " + ("degenerate answers (set apart on the publish board, not ranked): "
                        + "; ".join(f["message"] for f in found) if found else
                        "no empty, constant or far-short answers among the judge's rated responses"))


def _stale(add, fam, jud, where, stale, what: str) -> None:
    """The "stale" check: fails when the data ``what`` ("it was fitted on", "the advice was
    computed on") changed since, or when its freshness is unknown (stored before fingerprints)."""
    if stale is not False:  # a gate never passes a figure computed on other data than the current
        add(fam, jud, "stale", stale, False, False,
            f"{where}: stale: the ratings, labels or lengths {what} have changed since: refit with judgecal fit"
            if stale else
            f"{where}: freshness unknown: stored before judgecal recorded the fingerprint of its data: refit with judgecal fit")
    else:
        add(fam, jud, "stale", False, False, True, f"{where}: fresh: {what} the current ratings, labels and lengths")


def _verbosity(add, fam, jud, where, v, column: str, max_vwr: float, min_vwr: float) -> None:
    """The verbosity thresholds on the published column's verbosity win-rate ``v`` (``column``:
    "raw" or "calibrated"); a row that names both thresholds when nothing was measured."""
    if v is None:  # reported, never silently skipped: the verbosity thresholds had nothing to test
        add(fam, jud, "verbosity_win_rate", None, max_vwr, True,
            f"{where}: verbosity win-rate not measured: the fit had no rated concise/verbose pairs, so "
            f"--max-verbosity-winrate {max_vwr} and --min-verbosity-winrate {min_vwr} were not applied (fit "
            "--verbosity-family FAMILY measures them on a family that has such pairs)")
        return
    add(fam, jud, "verbosity_win_rate", v, max_vwr, v <= max_vwr,
        f"{where}: {column} verbosity win-rate {v:.3f} {'<=' if v <= max_vwr else '>'} {max_vwr}")
    ok = v >= min_vwr  # making the shorter answer always win is as wrong as the raw judge
    add(fam, jud, "verbosity_win_rate_min", v, min_vwr, ok,
        f"{where}: {column} verbosity win-rate {v:.3f} {'>=' if ok else '<'} {min_vwr}"
        + ("" if ok or column == "raw" else " (the calibration makes the shorter answer win: it overcorrects)"))


def _unparsed(add, fam, jud, where, row, max_unparsed: float) -> None:
    """The "unparsed_share" check: unparsed + failed share of the judge's ratings the fit read."""
    status = ((row.metrics or {}).get("data") or {}).get("rating_status") or {}
    total = sum(v for k, v in status.items() if k in ("ok", "unparsed", "failed"))
    if total:
        share = (status.get("unparsed", 0) + status.get("failed", 0)) / total
        add(fam, jud, "unparsed_share", share, max_unparsed, share <= max_unparsed,
            f"{where}: unparsed/failed ratings {share:.1%} {'<=' if share <= max_unparsed else '>'} {max_unparsed:.1%}")


def _degenerate_codes():
    from judgecal.calibrate.guards import CODES

    return CODES


def _summary_advice(add, fam, jud, where, r: dict) -> None:
    """Informational row "rating_summary": the summary the fit used and what its out-of-sample
    comparison of greedy / mean / risk-averse recommends (or why there was none)."""
    from judgecal.calibrate.summaries import label

    comp = r.get("summaries") or {}
    used = label(r.get("summary") or "greedy", r.get("risk_k") or 1.0)
    if comp.get("available"):
        rec = comp.get("recommended") or "greedy"
        msg = f"{where}: fitted on the {used} summary; the out-of-sample comparison recommends {label(rec, comp.get('risk_k') or 1.0)} ({comp.get('reason')})"
    else:
        msg = f"{where}: fitted on the {used} summary; summaries not compared ({comp.get('reason') or 'fitted before judgecal compared them'})"
    outside = [w for w in r.get("warnings") or [] if "of their mass outside the scale" in w]
    if outside:  # the fit's count of ratings read from a renormalised minority (judgecal.calibrate.summaries)
        msg += f"; {outside[0]}"
    add(fam, jud, "rating_summary", used, None, True, msg)


def _degenerate_check(add, fam, jud, where, row, r: dict, allow: bool) -> None:
    """The ``degenerate_answers`` check of one calibration: fails on the fit's empty / constant /
    far-short flags (each message listed), or when the fit predates the guards, unless allowed."""
    from judgecal.calibrate.guards import CODES

    found = [f for f in r.get("flags") or [] if isinstance(f, dict) and f.get("code") in CODES]
    known = "degenerate_answers" in ((row.data or {}) if isinstance(row.data, dict) else {})
    allowed = " (allowed by --allow-degenerate-answers)" if allow else " (--allow-degenerate-answers to publish anyway)"
    if found:
        add(fam, jud, "degenerate_answers", [f["code"] for f in found], [], allow,
            f"{where}: degenerate answers: " + "; ".join(f["message"] for f in found) + allowed)
    elif not known:
        add(fam, jud, "degenerate_answers", None, [], allow,
            f"{where}: stored before judgecal looked for empty, constant and far-short answers: refit with judgecal fit"
            + (" (allowed by --allow-degenerate-answers)" if allow else ""))
    else:
        add(fam, jud, "degenerate_answers", [], [], True,
            f"{where}: no empty, constant or far-short answers among the judge's rated responses")


def _advice(add, fam, jud, where, r: dict, publish: str = "calibrated") -> None:
    """The "advice" check: a calibration is published only where the nested selection's advice
    is to calibrate (its out-of-sample gain over raw clears zero). Publishing the calibration
    (``publish`` "calibrated") where the advice is "keep raw" fails with the reason, and so does
    a fit without a recorded decision (refit) unless raw is published. Publishing raw passes:
    keep raw is a valid answer, and raw is what "recommended" publishes there."""
    sel = r.get("selection") or {}
    decision = sel.get("decision")
    if published_column(r, publish) == "raw" and (decision is not None or publish == "raw"):
        add(fam, jud, "advice", decision, publish, True, f"{where}: " + advice_line(r, publish))
        return
    if decision == "calibrate":
        add(fam, jud, "advice", decision, "calibrate", True,
            f"{where}: the evidence backs a calibration: {sel.get('recommended')} ({sel.get('reason')})")
    elif decision == "keep raw":
        add(fam, jud, "advice", decision, "calibrate", False,
            f"{where}: keep raw: publish the raw scores, no calibration is backed out of sample ({sel.get('reason')})")
    else:
        add(fam, jud, "advice", None, "calibrate", False,
            f"{where}: no recommendation recorded (fitted with --no-nested, too few items for the nested selection, "
            f"or before judgecal weighed raw as an answer): refit with judgecal fit")


def _identified(add, fam, jud, where, r: dict, allow: bool) -> None:
    """The "identified" check: fails on a calibration whose fit the labels do not determine
    (:mod:`judgecal.calibrate.identify`) or that predates the test, unless ``allow``."""
    ident = r.get("identification")
    if ident is None:
        add(fam, jud, "identified", None, True, allow,
            f"{where}: identification unknown (fitted before judgecal tested it): refit with judgecal fit"
            + (" (allowed by --allow-unidentified)" if allow else ""))
        return
    ok = bool(ident.get("identified"))
    why = "; ".join(ident.get("reasons") or [])
    add(fam, jud, "identified", ok, True, ok or allow,
        f"{where}: " + ("the fit is identified" if ok else f"not identified: {why}"
                        + (" (allowed by --allow-unidentified)" if allow else "")))


def _transfer(add, row, fam, jud, target, url, n_bootstrap, seed, allow_degenerate: bool = False) -> None:
    """The "transfer" check of one target family (fails on a verdict of "hurts" or "undecided"),
    and its "degenerate_answers" check on the target's answers (fails on empty, constant or
    far-short models of the target unless ``allow_degenerate``, as for the source)."""
    from judgecal.views.fitting import transfer_evaluation
    from judgecal.report.build import verdict

    ev = transfer_evaluation(row, fam, jud, target, n_bootstrap=n_bootstrap, seed=seed, url=url)
    v = verdict(ev)
    # "undecided": a bound within Monte Carlo error of zero at the most resamples allowed fails too
    where = f"{target} / {jud} (calibration {row.id} from {fam})"
    add(target, jud, "transfer", v.get("difference"), 0.0, v["code"] not in ("hurts", "undecided"), f"{where}: {v['text']}")
    from judgecal.calibrate.guards import CODES

    found = [f for f in ev.get("flags") or [] if isinstance(f, dict) and f.get("code") in CODES]
    allowed = " (allowed by --allow-degenerate-answers)" if allow_degenerate else " (--allow-degenerate-answers to publish anyway)"
    add(target, jud, "degenerate_answers", [f["code"] for f in found], [], allow_degenerate or not found,
        f"{where}: degenerate answers in the target: " + "; ".join(f["message"] for f in found) + allowed if found else
        f"{where}: no empty, constant or far-short answers among the judge's rated responses of the target")
