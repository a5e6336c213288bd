"""The overview page (``/``)."""

from __future__ import annotations

from starlette.requests import Request

from judgecal.web.params import Params


class OverviewPage:
    """A mixin of :class:`judgecal.web.app.App`, which gives it ``render``, ``url``."""

    def overview(self, request: Request):
        Params(request, ())
        from judgecal.views.browse import overview

        return self.render("overview.html.j2", title="Overview", nav="overview", o=overview(self.url))
