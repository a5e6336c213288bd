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

from judgecal.views.fitting import load_calibrations


def run_check(families=None, judge: str | None = None, calibration: str = "latest", url: str | None = None, *,
              max_verbosity_winrate: float = 0.55, min_agreement_gain: float = 0.0, max_unparsed: float = 0.05,
              fail_at_bound: bool = False, max_baseline_gap: float | None = None,
              allow_degenerate_answers: bool = False, min_verbosity_winrate: float = 0.45,
              allow_unidentified: bool = False, transfer_bootstrap: int = 1000, seed: int = 0, summary: str = "greedy",
              risk_k: float = 1.0) -> dict:
    """{"ok": bool, "checks": [{"task_family", "judge", "check", "value", "threshold", "ok", "message"}]}.

    With a calibration id, each ``families`` entry other than the calibration's own family is a
    **transfer** target: the calibration's recommended method and its polylog calibration are
    applied there (:func:`judgecal.views.fitting.transfer_evaluation`, ``transfer_bootstrap`` resamples,
    ``seed``) and the check "transfer" fails when either lowers the target's expert agreement
    (paired 95% CI below zero).

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

    chosen = load_calibrations(families, judge, calibration, url)
    targets: list[str] = []
    if str(calibration) != "latest":  # an id: --judge must agree with it; other --task-family values are transfers
        from judgecal.views.fitting import refuse_out_of_scope

        refuse_out_of_scope(chosen, None, judge, url)
        own = {fam for _, fam, _ in chosen}
        targets = [f for f in dict.fromkeys(families or []) if f not in own]
    if not chosen:
        raise NotFoundError("no calibration to check: run `judgecal fit` first (see `judgecal fit --list`)")
    for row, fam, _ in chosen:
        refuse_summary_mismatch(row, summary, risk_k, fam)
    checks = []

    def add(fam, jud, name, value, threshold, ok, message):
        checks.append({"task_family": fam, "judge": jud, "check": name, "value": value, "threshold": threshold,
                       "ok": bool(ok), "message": message})

    from judgecal.views.fitting import staleness

    stale = staleness(chosen, url)
    for row, fam, jud in chosen:
        r = fit_row(row, fam, jud)
        where = f"{fam} / {jud} (calibration {r['id']})"
        _identified(add, fam, jud, where, r, allow_unidentified)
        _advice(add, fam, jud, where, r)
        _summary_advice(add, fam, jud, where, r)
        for target in targets:
            _transfer(add, row, fam, jud, target, url, transfer_bootstrap, seed)
        if stale[row.id] is not False:  # a gate never passes a figure fitted on other data than the current
            add(fam, jud, "stale", stale[row.id], False, False,
                f"{where}: stale: the ratings, labels or lengths it was fitted on have changed since: refit with judgecal fit"
                if stale[row.id] else
                f"{where}: freshness unknown: stored before judgecal recorded the fingerprint of its data: "
                f"refit with judgecal fit")
        else:
            add(fam, jud, "stale", False, False, True, f"{where}: fresh: fitted on the current ratings, labels and lengths")
        v = r["verbosity_win_rate_calibrated"]
        if v is not None:
            add(fam, jud, "verbosity_win_rate", v, max_verbosity_winrate, v <= max_verbosity_winrate,
                f"{where}: calibrated verbosity win-rate {v:.3f} {'<=' if v <= max_verbosity_winrate else '>'} {max_verbosity_winrate}")
            ok = v >= min_verbosity_winrate  # making the shorter answer always win is as wrong as the raw judge
            add(fam, jud, "verbosity_win_rate_min", v, min_verbosity_winrate, ok,
                f"{where}: calibrated verbosity win-rate {v:.3f} {'>=' if ok else '<'} {min_verbosity_winrate}"
                + ("" if ok else " (the calibration makes the shorter answer win: it overcorrects)"))
        else:  # reported, never silently skipped: the verbosity thresholds had nothing to test
            add(fam, jud, "verbosity_win_rate", None, max_verbosity_winrate, True,
                f"{where}: verbosity win-rate not measured: the fit had no rated concise/verbose pairs, so "
                f"--max-verbosity-winrate {max_verbosity_winrate} and --min-verbosity-winrate {min_verbosity_winrate} "
                "were not applied (fit --verbosity-family FAMILY measures them on a family that has such pairs)")
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
        status = ((row.metrics or {}).get("data") or {}).get("rating_status") or {}
        total = sum(v for k, v in status.items() if k in ("ok", "unparsed", "failed"))
        if total:
            share = (status.get("unparsed", 0) + status.get("failed", 0)) / total
            add(fam, jud, "unparsed_share", share, max_unparsed, share <= max_unparsed,
                f"{where}: unparsed/failed ratings {share:.1%} {'<=' if share <= max_unparsed else '>'} {max_unparsed:.1%}")
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
    return {"ok": all(c["ok"] for c in checks), "checks": checks}


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


def _advice(add, fam, jud, where, r: dict) -> None:
    """The "advice" check: a calibration is published only where the nested selection's advice
    is to calibrate (its out-of-sample gain over raw clears zero); "keep raw" fails with the
    reason (publish the raw scores), and so does a fit without a recorded decision (refit)."""
    sel = r.get("selection") or {}
    decision = sel.get("decision")
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


def _transfer(add, row, fam, jud, target, url, n_bootstrap, seed) -> None:
    """The "transfer" check of one target family (fails on a verdict of "hurts")."""
    from judgecal.views.fitting import transfer_evaluation
    from judgecal.report.build import verdict

    ev = transfer_evaluation(row, fam, jud, target, n_bootstrap=n_bootstrap, seed=seed, url=url)
    v = verdict(ev)
    add(target, jud, "transfer", v.get("difference"), 0.0, v["code"] != "hurts",
        f"{target} / {jud} (calibration {row.id} from {fam}): {v['text']}")
