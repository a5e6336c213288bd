"""The judge audit page (``/audit``)."""

from __future__ import annotations

from starlette.requests import Request

from judgecal.web.params import Params, _calibration_id
from judgecal.web.render import link


class AuditPage:
    """A mixin of :class:`judgecal.web.app.App`, which gives it ``choose``, ``url``, ``_audit_index``, ``json``, ``render``."""

    def audit(self, request: Request):
        from judgecal.views.audit import FILTER_TEXT, FILTERS, PER_PAGE, judge_audit

        p = Params(request, ("family", "judge", "filter", "page", "per_page", "calibration", "format"))
        family, judge = p.text("family"), p.text("judge")
        fmt_ = p.fmt()
        flt = p.choice("filter", FILTERS, "all")
        page = p.integer("page", 1, 1, 10**9)
        from judgecal.db.browse import MAX_PAGE

        per_page = p.integer("per_page", PER_PAGE, 1, MAX_PAGE)
        cal = p.text("calibration", "latest", max_len=20)
        if cal not in ("latest", "none"):
            _calibration_id(cal, "an id, 'latest' or 'none'")
        if family is None or judge is None:
            from judgecal.views.browse import family_judges

            return self.choose(p, title="Judge audit", nav="audit", path="/audit", fmt_=fmt_,
                               heading="Judge audit: choose a task family and a judge", chosen=("family", "judge"),
                               options=[(f"{fam} · {j['label']} ({j['kind']})", {"family": fam, "judge": j["ref"]})
                                        for fam, js in family_judges(self.url).items() for j in js
                                        if (family is None or fam == family) and (judge is None or judge in (j["ref"], j["label"]))])
        a = judge_audit(family, judge, self.url, filter=flt, page=page, per_page=per_page, calibration=cal,
                        index=self._audit_index(family, judge, cal))
        if fmt_ == "json":
            return self.json(a)
        here = dict(family=family, judge=judge, calibration=None if cal == "latest" else cal,
                    per_page=None if per_page == PER_PAGE else per_page)
        return self.render("audit.html.j2", title=f"Audit: {family} · {a['judge']}", nav="audit", a=a, here=here,
                           json_link=link("/audit", **here, filter=None if flt == "all" else flt,
                                          page=None if page == 1 else page, format="json"),
                           filters=[(f, FILTER_TEXT[f], link("/audit", **here, filter=None if f == "all" else f))
                                    for f in FILTERS],
                           prev=link("/audit", **here, filter=None if flt == "all" else flt, page=page - 1)
                           if page > 1 else None,
                           next=link("/audit", **here, filter=None if flt == "all" else flt, page=page + 1)
                           if page < a["pages"] else None)
