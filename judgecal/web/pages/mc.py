"""The multiple-choice runs and the comparison of two (``/mc``, ``/mc/compare``)."""

from __future__ import annotations

from starlette.requests import Request

from judgecal.web.params import BadRequest, Params


class McPage:
    """A mixin of :class:`judgecal.web.app.App`, which gives it ``url``, ``json``, ``render``."""

    def mc(self, request: Request):
        from judgecal.report.mc_tables import run_setup
        from judgecal.views import mc

        p = Params(request, ("model", "format"))
        model = p.text("model")
        fmt_ = p.fmt()
        runs = mc.list_runs(self.url, model=model)
        if fmt_ == "json":
            return self.json(runs)
        for r in runs:
            r.setdefault("setup", run_setup(r.get("settings") or {}))
        return self.render("mc.html.j2", title="Multiple-choice runs", nav="mc", runs=runs, model=model)

    def mc_compare(self, request: Request):
        from judgecal.views import mc

        p = Params(request, ("a", "b", "format"))
        a, b = p.integer("a", None, 1, 2**31 - 1), p.integer("b", None, 1, 2**31 - 1)
        fmt_ = p.fmt()
        if a is None or b is None:
            raise BadRequest("give both runs: /mc/compare?a=RUN_ID&b=RUN_ID (see /mc)")
        cmp = mc.compare(a, b, self.url)
        if fmt_ == "json":
            return self.json(cmp)
        return self.render("mc_compare.html.j2", title=f"Compare runs {a} and {b}", nav="mc", cmp=cmp, a=a, b=b)
