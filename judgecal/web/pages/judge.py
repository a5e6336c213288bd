"""A judge's page (``/judge``): identity, position bias, length preference against the experts,
the family's judges ranked, its calibrations and their advice."""

from __future__ import annotations

from starlette.requests import Request

from judgecal.web.params import Params
from judgecal.web.render import link


class JudgePage:
    """A mixin of :class:`judgecal.web.app.App`, which gives it ``url``, ``choose``, ``json``, ``render``."""

    def judge(self, request: Request):
        from judgecal.views.judge import judge_profile

        p = Params(request, ("judge", "bootstrap", "seed", "format"))
        judge = p.text("judge")
        n_boot = p.resamples(1000)
        seed = p.seed()
        fmt_ = p.fmt()
        if judge is None:
            from judgecal.views.browse import choices

            return self.choose(p, title="Judges", nav="judge", path="/judge", fmt_=fmt_, heading="Choose a judge",
                               chosen=("judge",),
                               options=[(f"{j['label']} ({j['mode']}; {j['ratings']} ratings, {j['verdicts']} verdicts)",
                                         {"judge": j["ref"]}) for j in choices(self.url)["judges"]])
        prof = judge_profile(judge, self.url, n_bootstrap=n_boot, seed=seed)
        if fmt_ == "json":
            return self.json(prof)
        ref = prof["judge"]["ref"]
        links = {e["task_family"]: {"audit": link("/audit", family=e["task_family"], judge=ref),
                                    "board": link("/leaderboard", family=e["task_family"], judge=ref)
                                    if e["kind"] == "pointwise" else None,
                                    "publish": link("/publish", family=e["task_family"], judge=ref)
                                    if e["calibrations"] else None}
                 for e in prof["families"]}
        return self.render("judge.html.j2", title=f"Judge {prof['judge']['label']}", nav="judge", prof=prof,
                           links=links, link_calibration=lambda i: link("/calibration", calibration=i),
                           link_judge=lambda r: link("/judge", judge=r),
                           json_link=link("/judge", judge=judge, bootstrap=None if n_boot == 1000 else n_boot,
                                          seed=seed or None, format="json"))
