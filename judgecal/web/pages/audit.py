"""The judge audit page (``/audit``)."""

from __future__ import annotations

from starlette.requests import Request

from judgecal.web.params import Params, _calibration_id
from judgecal.web.render import link

#: the most models the page's model field offers as a list (more: a text field, exact name)
MAX_MODEL_OPTIONS = 500


class AuditPage:
    """A mixin of :class:`judgecal.web.app.App`, which gives it ``choose``, ``url``, ``_audit_index``, ``json``, ``render``."""

    def audit(self, request: Request):
        from judgecal.report.visible import visible
        from judgecal.views.audit import (ALL_FILTERS, FILTER_TEXT, FILTERS, MAX_Q, MODEL_FILTERS, PER_PAGE, check_request,
                                          judge_audit)

        p = Params(request, ("family", "judge", "model", "q", "filter", "page", "per_page", "calibration", "format"))
        family, judge = p.text("family"), p.text("judge")
        fmt_ = p.fmt()
        model = p.text("model")
        q = p.text("q", max_len=MAX_Q)
        flt = p.choice("filter", ALL_FILTERS, "all")
        page = p.integer("page", 1, 1, 10**9)
        from judgecal.db.browse import MAX_PAGE

        per_page = p.integer("per_page", PER_PAGE, 1, MAX_PAGE)
        cal = p.text("calibration", "latest", max_len=20)
        if cal not in ("latest", "none"):
            _calibration_id(cal, "an id, 'latest' or 'none'")
        if family is None or judge is None:
            from judgecal.views.browse import family_judges

            # a model given narrows the choices to the audits that hold its answers; every other
            # parameter (model, q, filter, calibration...) is carried into each link
            of = model if model is not None and model.strip() else None
            return self.choose(p, title="Judge audit", nav="audit", path="/audit", fmt_=fmt_,
                               heading="Judge audit: choose a task family and a judge"
                                       + (f" (audits holding answers of model {of})" if of is not None else ""),
                               chosen=("family", "judge"),
                               empty=(f"No judge audit holds an answer of model {of!r} (the name exactly as stored)"
                                      + ("" if family is None and judge is None else " with the family and judge given")
                                      + "." if of is not None else None),
                               options=[(f"{fam} · {j['label']} ({j['kind']})", {"family": fam, "judge": j["ref"]})
                                        for fam, js in family_judges(self.url, model=of).items() for j in js
                                        if (family is None or fam == family)
                                        and (judge is None or judge in (j["ref"], j["label"], j["name"]))])
        model, q = check_request("all", model, q)  # before the index: a bad model or q costs nothing
        if flt in MODEL_FILTERS and model is None:  # a filter said of one model, none given: the audit's models, as links
            from judgecal.errors import ChoiceError, UsageError

            names = self._audit_index(family, judge, cal).models
            try:
                check_request(flt, None, q)
            except UsageError as exc:
                more = f" (the first {MAX_MODEL_OPTIONS} of {len(names)} models)" if len(names) > MAX_MODEL_OPTIONS else ""
                raise ChoiceError(f"{exc}{more}", [{"label": f"model {name}", "params": {"model": name}}
                                                   for name in names[:MAX_MODEL_OPTIONS]]) from None
        model, q = check_request(flt, model, q)
        index = self._audit_index(family, judge, cal)
        a = judge_audit(family, judge, self.url, filter=flt, page=page, per_page=per_page, calibration=cal,
                        model=model, q=q, index=index)
        if fmt_ == "json":
            return self.json(a)
        # every parameter but the filter and the page: what each filter tab, page link and the form keep
        here = dict(family=family, judge=judge, calibration=None if cal == "latest" else cal, model=model, q=q,
                    per_page=None if per_page == PER_PAGE else per_page)
        shown = FILTERS + (MODEL_FILTERS if model is not None else ())
        at = dict(here, filter=None if flt == "all" else flt)
        return self.render("audit.html.j2", title=f"Audit: {family} · {a['judge']}", nav="audit", a=a, here=here,
                           form=dict(family=family, judge=judge, calibration=cal, model=model, q=q, filter=flt,
                                     per_page=per_page),
                           models=index.models if len(index.models) <= MAX_MODEL_OPTIONS else None,
                           all_filters=[(f, FILTER_TEXT[f], f in MODEL_FILTERS) for f in ALL_FILTERS],
                           max_page=MAX_PAGE, max_q=MAX_Q, visible=visible,
                           json_link=link("/audit", **at, page=None if page == 1 else page, format="json"),
                           filters=[(f, FILTER_TEXT[f], link("/audit", **here, filter=None if f == "all" else f))
                                    for f in shown],
                           prev=link("/audit", **at, page=page - 1) if page > 1 else None,
                           next=link("/audit", **at, page=page + 1) if page < a["pages"] else None)
