"""The score leaderboard page (``/leaderboard``)."""

from __future__ import annotations

from starlette.requests import Request

from judgecal.errors import NotFoundError
from judgecal.web.params import Params, _calibration_id
from judgecal.web.render import link


class LeaderboardPage:
    """A mixin of :class:`judgecal.web.app.App`, which gives it ``url``, ``choose``, ``json``, ``render``."""

    def leaderboard(self, request: Request):
        from judgecal.report.board import COLUMNS
        from judgecal.report.boards_html import score_board_view
        from judgecal.views.browse import family_judges
        from judgecal.views.leaderboard import DEFAULTS, build_leaderboard

        p = Params(request, ("family", "judge", "calibration", "calibration_from", "bootstrap", "seed", "min_ratings",
                             "max_unparsed", "mc_reference", "sort", "format"))
        families = p.texts("family")
        judge = p.text("judge")
        calibration = p.text("calibration", "latest", max_len=20)
        if calibration != "latest":
            _calibration_id(calibration, "a calibration id or 'latest'")
        cal_from = p.text("calibration_from")
        n_boot = p.resamples(DEFAULTS["n_bootstrap"])
        seed = p.seed(DEFAULTS["seed"])
        min_ratings = p.integer("min_ratings", DEFAULTS["min_ratings"], 0)
        max_unparsed = p.number("max_unparsed", DEFAULTS["max_unparsed"], 0.0, 1.0)
        mc_ref = p.integer("mc_reference", None, 1, 2**31 - 1)
        keys = [k for _, k in COLUMNS if k not in ("flags", "flag_codes")]
        sort = p.choice("sort", keys + [f"-{k}" for k in keys], None)
        fmt_ = p.fmt()
        if judge is None and calibration == "latest":
            from judgecal.views.browse import choices

            offered = choices(self.url)
            rated = [j for j in offered["judges"] if j["ratings"]]
            unknown = [f for f in families if f not in offered["families"]]
            if unknown:
                raise NotFoundError(f"no task family named {unknown[0]!r} (see the overview)")
            if families:  # the families given narrow the choice to the judges that rated there
                there = {j["ref"] for fam, js in family_judges(self.url).items() if fam in families for j in js
                         if j["kind"] == "pointwise"}
                rated = [j for j in rated if j["ref"] in there]
            if len(rated) > 1 or (families and not rated):
                return self.choose(p, title="Score leaderboard", nav="leaderboard", path="/leaderboard", fmt_=fmt_,
                                   heading="Score leaderboard: choose a judge" + (
                                       f" (judges with ratings in {', '.join(families)})" if families else ""),
                                   chosen=("judge",), options=[(j["label"], {"judge": j["ref"]}) for j in rated],
                                   empty="No judge has ratings in the families given.")
            if families and len(rated) == 1:  # the one judge that rated the families given
                judge = rated[0]["ref"]
        board = build_leaderboard(families, judge, calibration, self.url, min_ratings=min_ratings,
                                  max_unparsed=max_unparsed, n_bootstrap=n_boot, seed=seed, mc_reference=mc_ref,
                                  calibration_from=cal_from)
        if fmt_ == "json":
            return self.json(board)
        here = dict(family=families, judge=judge, calibration=None if calibration == "latest" else calibration,
                    calibration_from=cal_from, bootstrap=None if n_boot == DEFAULTS["n_bootstrap"] else n_boot,
                    seed=None if seed == DEFAULTS["seed"] else seed,
                    min_ratings=None if min_ratings == DEFAULTS["min_ratings"] else min_ratings,
                    max_unparsed=None if max_unparsed == DEFAULTS["max_unparsed"] else max_unparsed,
                    mc_reference=mc_ref)
        # the form sends back every parameter given, as given (a second family, calibration_from, ...)
        form = {k: p.given(k) for k in FORM_FIELDS}
        form["family"] = families
        ref = board["judge_ref"]
        rated = sorted({fam for fam, js in family_judges(self.url).items()
                        for j in js if j["kind"] == "pointwise" and j["ref"] in (ref, board["judge"])})
        family_options = sorted(set(rated) | set(families) | ({cal_from} if cal_from else set()))
        fams = {r["model"]: r.get("task_families") or [] for r in board["rows"]}
        view = score_board_view(board, _sorted(board["rows"], sort),
                                lambda key: link("/leaderboard", **here, sort=_toggle(sort, key)) if key in keys else None,
                                lambda model: link("/audit", family=fams[model][0] if len(fams[model]) == 1 else None,
                                                   judge=board["judge_ref"], model=model) if fams[model] else None)
        return self.render("leaderboard.html.j2", title="Score leaderboard", nav="leaderboard", board=board,
                           view=view, sort=sort, here=here, json_link=link("/leaderboard", **here, format="json"),
                           n_bootstrap=n_boot, form=form, family_options=family_options, defaults=DEFAULTS)


#: the parameters the board's form sends back (as given; ``family`` is a multiple choice)
FORM_FIELDS = ("judge", "calibration", "calibration_from", "bootstrap", "seed", "min_ratings", "max_unparsed",
               "mc_reference", "sort")


def _toggle(sort: str | None, key: str) -> str:
    """The sort a column header links to: by ``key``, reversed when already sorted by it."""
    return f"-{key}" if sort == key else key


def _sorted(rows: list[dict], sort: str | None) -> list[dict]:
    """Rows ordered by one column (``-key``: descending), rows without a value last; the board's
    own order otherwise."""
    if not sort:
        return rows
    key, desc = sort.lstrip("-"), sort.startswith("-")
    have = [r for r in rows if r.get(key) is not None]
    none = [r for r in rows if r.get(key) is None]
    val = (lambda r: tuple(r[key])) if any(isinstance(r.get(key), list) for r in have) else (lambda r: r[key])
    return sorted(have, key=val, reverse=desc) + none
