"""The overview page (``/``)."""

from __future__ import annotations

from starlette.requests import Request

from judgecal.web.params import Params


class OverviewPage:
    """A mixin of :class:`judgecal.web.app.App`, which gives it ``render``, ``url``."""

    def overview(self, request: Request):
        """The overview; above it, a note where the database holds stored results (``judgecal db
        refresh``) computed before its last change: the slow pages then compute on request."""
        Params(request, ())
        from judgecal.db import engine as eng
        from judgecal.db.derived import store_state
        from judgecal.views.browse import overview

        # through serve's pinned engine (no new connection pool a request); else one made and disposed
        state = store_state(self.url, engine=eng.get_engine(self.url) if self.url in eng._PINNED else None)
        return self.render("overview.html.j2", title="Overview", nav="overview", o=overview(self.url),
                           store_stale=bool(state and state["stale"]))
