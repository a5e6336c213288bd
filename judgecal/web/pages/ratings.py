"""The ratings list (``/ratings``)."""

from __future__ import annotations

from starlette.requests import Request

from judgecal.web.params import Params
from judgecal.web.render import link


class RatingsPage:
    """A mixin of :class:`judgecal.web.app.App`, which gives it ``url``, ``_rating_index``, ``render``."""

    def ratings(self, request: Request):
        from judgecal.db.browse import MAX_PAGE
        from judgecal.db.models import RATING_STATUSES
        from judgecal.views.browse import RATINGS_PER_PAGE, choices, ratings

        p = Params(request, ("family", "judge", "model", "status", "score_min", "score_max", "since", "until", "page",
                             "per_page"))
        f = dict(family=p.text("family"), judge=p.text("judge"), model=p.text("model"),
                 status=p.choice("status", RATING_STATUSES, None), score_min=p.number("score_min"),
                 score_max=p.number("score_max"), since=p.date("since"), until=p.date("until"))
        page = p.integer("page", 1, 1, 10**9)
        per_page = p.integer("per_page", RATINGS_PER_PAGE, 1, MAX_PAGE)
        r = ratings(self.url, **f, page=page, per_page=per_page, index=self._rating_index())
        here = {**f, "per_page": None if per_page == RATINGS_PER_PAGE else per_page}
        return self.render("ratings.html.j2", title="Ratings", nav="ratings", r=r, f=f, c=choices(self.url),
                           per_page=here["per_page"],
                           prev=link("/ratings", **here, page=page - 1) if page > 1 else None,
                           next=link("/ratings", **here, page=page + 1) if page < r["pages"] else None)
