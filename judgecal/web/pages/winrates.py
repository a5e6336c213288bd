"""The win-rate leaderboard page (``/winrates``)."""

from __future__ import annotations

from starlette.requests import Request

from judgecal.web.params import Params
from judgecal.web.render import link


class WinratesPage:
    """A mixin of :class:`judgecal.web.app.App`, which gives it ``url``, ``choose``, ``json``, ``render``."""

    def winrates(self, request: Request):
        from judgecal.db.verdicts import LENGTH_UNITS
        from judgecal.report.boards_html import winrate_board_view
        from judgecal.views.winrates import REGULARISERS, SORT_COLUMNS, build_winrate_board

        p = Params(request, ("baseline", "family", "judge", "bootstrap", "seed", "length_unit", "tokenizer",
                             "short_floor", "lc_regulariser", "joint", "sort", "format"))
        baseline = p.text("baseline")
        families = p.texts("family")  # several: the board's choice page (one family at a time)
        family = families[0] if len(families) == 1 else None
        judge = p.text("judge")
        n_boot = p.resamples(1000)
        seed = p.seed()
        unit = p.choice("length_unit", LENGTH_UNITS, "chars")
        tokenizer = p.text("tokenizer")
        floor = p.number("short_floor", 0.25, 0.0, 1.0, lo_open=True)
        reg = p.choice("lc_regulariser", REGULARISERS, "auto")
        joint = p.flag("joint")
        sort = p.choice("sort", SORT_COLUMNS, "length_controlled_winrate")
        fmt_ = p.fmt()
        if baseline is None:
            from judgecal.views.browse import baselines

            found = [b for b in baselines(self.url, families)  # a family that does not exist: 404 naming it
                     if judge is None or judge in (b["judge_ref"], b["judge"])]
            return self.choose(p, title="Win rates", nav="winrates", path="/winrates", fmt_=fmt_,
                               heading="Win rates: choose a baseline", chosen=("baseline", "family", "judge"),
                               options=[(f"{b['model']} ({b['task_family']}, judge {b['judge']}, {b['verdicts']} verdicts)",
                                         {"baseline": b["model"], "family": b["task_family"], "judge": b["judge_ref"]})
                                        for b in found])
        board = build_winrate_board(baseline, families, judge, self.url, length_unit=unit,
                                    tokenizer=tokenizer, n_bootstrap=n_boot, seed=seed, short_floor=floor,
                                    lc_regulariser=reg, joint=joint, sort_by=sort)
        if fmt_ == "json":
            return self.json(board)
        here = dict(baseline=baseline, family=family, judge=judge, bootstrap=None if n_boot == 1000 else n_boot,
                    seed=seed or None, length_unit=None if unit == "chars" else unit, tokenizer=tokenizer,
                    short_floor=None if floor == 0.25 else floor, lc_regulariser=None if reg == "auto" else reg,
                    joint=joint)
        sortable = {"win_rate": "win_rate", "length_controlled_winrate": "length_controlled_winrate",
                    "calibrated_win_rate": "calibrated_win_rate", "avg_length": "avg_length", "model": "model",
                    "n_items": "n_total"}
        view = winrate_board_view(board, lambda key: link("/winrates", **here, sort=sortable[key]) if key in sortable
                                  else None,
                                  lambda model: None if model == baseline else
                                  link("/audit", family=board["task_family"], judge=board["judge_ref"], model=model))
        form = {k: p.given(k) for k in FORM_FIELDS}  # the form sends back every parameter given, as given
        return self.render("winrates.html.j2", title="Win rates", nav="winrates", board=board, view=view, sort=sort,
                           json_link=link("/winrates", **here, sort=sort, format="json"), form=form,
                           hidden=[(k, form[k]) for k in HIDDEN_FIELDS if form[k] is not None])


#: the parameters the board's form sends back as given: shown, and kept hidden
FORM_FIELDS = ("baseline", "family", "judge", "bootstrap", "seed", "length_unit", "tokenizer", "short_floor",
               "lc_regulariser", "joint", "sort")
HIDDEN_FIELDS = FORM_FIELDS[5:]
