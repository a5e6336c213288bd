"""``judgecal check --max-style-coefficient``: the release gate on how much a pairwise judge
rewards style (issue 34 item 6).

Per task family and judge with pairwise verdicts, the style-controlled Bradley-Terry board
(:func:`judgecal.views.btboard.build_bt_board`, Arena-Hard-Auto's style covariates,
docs/style.md) gives each style feature's coefficient (log-odds per standard deviation of the
standardised feature difference) with a bootstrap CI over items. The check fails when the
**lower bound** of a coefficient's 95% CI is above the threshold: the judge is shown, beyond
bootstrap noise, to reward that feature more than allowed. This is the rule of the transfer check
(a CI on the wrong side of the line fails); a point estimate above the threshold whose CI reaches
below it passes, and the row says so."""

from __future__ import annotations

from sqlalchemy import select

from judgecal.db import battles as bq
from judgecal.db import models as m
from judgecal.db import queries as q
from judgecal.db.engine import get_engine, session_scope
from judgecal.errors import UsageError

CHECK = "style_coefficient"


def pairwise_scopes(families: list[str] | None, judge: str | None, url: str | None) -> list[tuple[str, str]]:
    """[(task family name, judge reference)] of the families and judges with usable pairwise
    verdicts (status ok, with a preference) that ``families`` and ``judge`` select, by family
    then judge. UsageError (one line) when none does: a named family without pairwise verdicts,
    a judge without any there, or a database without pairwise verdicts."""
    engine = get_engine(url)
    try:
        with session_scope(engine) as s:
            scopes = bq.verdict_scopes(s)
            names = dict(s.execute(select(m.TaskFamily.id, m.TaskFamily.name)).all())
            fams = list(dict.fromkeys(families or []))
            for f in fams:
                if not any(names[x[0]] == f for x in scopes):
                    q.family_id(s, f)  # NotFoundError for a family that does not exist
                    raise UsageError(f"--max-style-coefficient: task family {f!r} has no pairwise verdicts (the "
                                     "style coefficients come from a Bradley-Terry fit of pairwise verdicts)")
            if fams:
                scopes = [x for x in scopes if names[x[0]] in fams]
            if not scopes:
                raise UsageError("--max-style-coefficient: this database holds no pairwise verdicts (the style "
                                 "coefficients come from a Bradley-Terry fit of pairwise verdicts)")
            if judge:
                jrow = q.judge_by_name(s, judge, {x[1] for x in scopes}, "with pairwise verdicts"
                                       + (" in " + ", ".join(fams) if fams else ""))
                scopes = [x for x in scopes if x[1] == jrow.id]
            out = []
            for fid, jid, _ in scopes:
                out.append((names[fid], q.judge_reference(s, s.get(m.Judge, jid))))
    finally:
        engine.dispose()
    if not out:
        raise UsageError(f"--max-style-coefficient: judge {judge!r} has no pairwise verdicts"
                         + (" in " + ", ".join(fams) if fams else ""))
    return sorted(out)


def style_checks(families: list[str] | None, judge: str | None, url: str | None, *, max_coefficient: float,
                 control: str = "both", length_unit: str = "tokens", tokenizer: str = "smollm2",
                 n_bootstrap: int = 1000, seed: int = 0) -> list[dict]:
    """The check rows ({task_family, judge, check: "style_coefficient", feature, value (the
    coefficient), ci [lo, hi], threshold, ok, message}) of every family and judge
    :func:`pairwise_scopes` selects, one per style feature of ``control`` ("length", "markdown",
    "both"): ok unless the CI's lower bound is above ``max_coefficient`` (log-odds per sd). A
    feature constant over the battles, collinear with the models or separated (left out of the fit)
    is a passing row that says so; a family whose board has nothing to control for is a passing
    row, one whose board cannot be computed otherwise a failing row, and the other families are
    still gated. The
    board's baseline anchors the fit (the coefficients do not depend on the anchor); where the
    verdicts name no single baseline, the model with the most battles anchors it (the row names
    it). ``length_unit``/``tokenizer``, ``n_bootstrap``/``seed``: as ``judgecal bt``."""
    from judgecal.views.btboard import build_bt_board

    rows: list[dict] = []
    for fam, jref in pairwise_scopes(families, judge, url):
        kw = dict(n_bootstrap=n_bootstrap, seed=seed, control=control, length_unit=length_unit, tokenizer=tokenizer)
        # no single baseline: anchored on the model with the most battles (the coefficients do not depend on it)
        try:
            board = build_bt_board([fam], jref, None, url, any_baseline=True, **kw)
        except UsageError as exc:  # this family cannot be gated; the others still are (a break-it run: one
            # one-verdict family stopped the whole gate)
            nothing = "nothing to control for" in str(exc)
            rows.append({"task_family": fam, "judge": jref, "check": CHECK, "feature": None, "value": None, "ci": None,
                         "threshold": max_coefficient, "ok": nothing,
                         "message": f"{fam} / {jref}: " + (f"not gated: {exc}" if nothing else
                                                            f"the style-controlled board cannot be computed: {exc}")})
            continue
        anchor = f"baseline {board['baseline']}"
        st = board["style"]
        where = (f"{fam} / {board['judge']} (Bradley-Terry, style control {control}, lengths in {st['length_unit']}, "
                 f"{board['n_battles']} battles, {anchor})")
        for c in st["coefficients"]:
            lo, hi = c["coef_ci"]
            ok = lo <= max_coefficient
            rows.append({
                "task_family": fam, "judge": board["judge"], "check": CHECK, "feature": c["feature"],
                "value": c["coef"], "ci": [lo, hi], "threshold": max_coefficient, "ok": ok,
                "message": (f"{where}: {c['feature']} coefficient {c['coef']:+.3f} [{lo:+.3f}, {hi:+.3f}] (log-odds per "
                            f"sd, odds ratio {c['odds_ratio']:.3f}): CI lower bound {lo:+.3f} "
                            + (f"<= {max_coefficient:+g}" + (" (the estimate is above the threshold, its CI is not)"
                                                             if c["coef"] > max_coefficient else "")
                               if ok else f"> {max_coefficient:+g}: the judge rewards {c['feature']} beyond the threshold"))
            })
        for f in st["left_out"]:
            rows.append({"task_family": fam, "judge": board["judge"], "check": CHECK, "feature": f, "value": None,
                         "ci": None, "threshold": max_coefficient, "ok": True,
                         "message": f"{where}: {f} constant over the battles: no coefficient, nothing to gate"})
        for key, why in (("collinear", "not identified apart from the models' ratings (collinear)"),
                         ("separated", "no finite coefficient (separation)")):
            for f in st.get(key) or []:
                rows.append({"task_family": fam, "judge": board["judge"], "check": CHECK, "feature": f, "value": None,
                             "ci": None, "threshold": max_coefficient, "ok": True,
                             "message": f"{where}: {f} {why}: left out of the fit, not gated"})
    return rows
