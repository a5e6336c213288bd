"""The calibrations list and a calibration's report (``/calibration``)."""

from __future__ import annotations

from starlette.requests import Request

from judgecal.errors import NotFoundError
from judgecal.web.params import Params, _calibration_id
from judgecal.web.render import link


class CalibrationPage:
    """A mixin of :class:`judgecal.web.app.App`, which gives it ``url``, ``json``, ``render``."""

    def calibration(self, request: Request):
        p = Params(request, ("family", "judge", "calibration", "bootstrap", "seed", "plots", "format"))
        family, judge = p.text("family"), p.text("judge")
        cal = p.text("calibration", max_len=20)
        if cal is not None:
            _calibration_id(cal, "a calibration id")
        n_boot = p.resamples(1000)
        seed = p.seed()
        plots = p.text("plots") is None or p.flag("plots")
        fmt_ = p.fmt()
        if cal is None and (family is None or judge is None):  # the list, narrowed by the one given
            from judgecal.views.browse import calibrations

            if family is not None:
                from judgecal.views.browse import choices

                if family not in choices(self.url)["families"]:
                    raise NotFoundError(f"no task family named {family!r} (see the overview)")
            fits = [f for f in calibrations(self.url)
                    if (family is None or f["task_family"] == family)
                    and (judge is None or judge in (f["judge"], f["judge_ref"]))]
            carried = p.carried("format", "family", "judge")  # bootstrap, seed, plots: kept in every calibration's link
            if fmt_ == "json":
                return self.json({"calibrations": fits, "carried": carried})
            return self.render("calibrations.html.j2", title="Calibrations", nav="calibration", fits=fits,
                               carried=carried, carried_text=sorted((k, ", ".join(v)) for k, v in carried.items()),
                               narrowed=family is not None or judge is not None)
        from judgecal.report.build import entry_facts, entry_title, flag_lines, method_table
        from judgecal.report.pairwise import COLUMNS as PW_COLUMNS, COMPARISON_COLUMNS, comparison_rows, rows as pw_rows
        from judgecal.views.reporting import make_report

        rep, entries, _ = make_report([family] if family else [], judge, [cal] if cal else ["latest"], self.url,
                                      None, (), plots=False, n_bootstrap=n_boot, seed=seed)
        if fmt_ == "json":
            return self.json(rep)
        source = {(e["task_family"], e["judge"], e.get("calibration_id")): e for e in entries}
        shown = []
        for e in rep["entries"]:
            ev = (source.get((e["task_family"], e["judge"], e.get("calibration_id"))) or {}).get("evaluation") or {}
            scatter = hist = None
            if plots:
                from judgecal.views.reporting import report_plots

                scatter, hist = report_plots(ev, entry_title(e), e.get("length_unit"), self.url)
            cols, rows = method_table(e)
            shown.append({"e": e, "title": entry_title(e), "facts": entry_facts(e), "cols": cols, "rows": rows,
                          "flags": flag_lines(e), "scatter": scatter, "hist": hist})
        return self.render("calibration.html.j2", title="Calibration", nav="calibration", entries=shown, report=rep,
                           family=family, judge=judge, pw_cols=PW_COLUMNS, pw_rows=pw_rows(rep.get("pairwise_judges") or []),
                           cmp_cols=COMPARISON_COLUMNS, cmp_rows=comparison_rows(rep.get("pairwise_judges") or []),
                           json_link=link("/calibration", family=family, judge=judge, calibration=cal,
                                          bootstrap=None if n_boot == 1000 else n_boot, seed=seed or None,
                                          format="json"))
