"""The publish board (``/publish``): the advice applied, per task family and judge."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from judgecal.web.params import Params
from judgecal.web.render import link

#: downloads of the board, as `judgecal publish --format` writes them
DOWNLOADS = {"csv": ("text/csv", "csv"), "markdown": ("text/markdown", "md"), "alpaca-eval": ("text/csv", "csv")}


class PublishPage:
    """A mixin of :class:`judgecal.web.app.App`, which gives it ``url``, ``json``, ``render``."""

    def publish(self, request: Request):
        from judgecal.views.publish import WINRATE_PUBLISH_MODES, build_publish

        p = Params(request, ("family", "judge", "baseline", "publish", "bootstrap", "seed", "min_ratings",
                             "max_unparsed", "format"))
        families = p.texts("family")
        judge, baseline = p.text("judge"), p.text("baseline")
        mode = p.choice("publish", WINRATE_PUBLISH_MODES, "recommended")
        n_boot = p.resamples(1000)
        seed = p.seed()
        min_ratings = p.integer("min_ratings", 30, 0)
        max_unparsed = p.number("max_unparsed", 0.05, 0.0, 1.0)
        fmt_ = p.choice("format", ("html", "json") + tuple(DOWNLOADS), "html")
        if baseline is not None and ("min_ratings" in p.q or "max_unparsed" in p.q):
            from judgecal.web.params import BadRequest

            raise BadRequest("min_ratings and max_unparsed apply to score boards, not to a baseline's win rates")
        if fmt_ == "alpaca-eval" and baseline is None:
            from judgecal.web.params import BadRequest

            raise BadRequest("format=alpaca-eval needs baseline=MODEL (AlpacaEval's format holds win rates)")
        result = build_publish(families, judge, self.url, publish=mode, baseline=baseline, n_bootstrap=n_boot,
                               seed=seed, min_ratings=min_ratings, max_unparsed=max_unparsed)
        if fmt_ == "json":
            return self.json(result)
        if fmt_ in DOWNLOADS:
            return _download(result, fmt_)
        here = dict(family=families, judge=judge, baseline=baseline, publish=None if mode == "recommended" else mode,
                    bootstrap=None if n_boot == 1000 else n_boot, seed=seed or None,
                    min_ratings=None if min_ratings == 30 else min_ratings,
                    max_unparsed=None if max_unparsed == 0.05 else max_unparsed)
        from judgecal.report.publish import APART_COLS, COLS, cell, title

        boards = []
        for b in result["boards"]:
            judge_ref = b["judge_ref"]
            evidence = lambda model, b=b, ref=judge_ref: link("/audit", family=b["task_family"], judge=ref, model=model)  # noqa: E731
            rows = [{"cells": [(c.key, cell(b, c.key, r.get(c.key))) for c in COLS],
                     "ci": cell(b, "score_ci", r.get("score_ci")), "href": evidence(r["model"])} for r in b["rows"]]
            empty = [c.header for c in COLS if c.key not in ("rank", "model", "score", "flags")
                     and all(r.get(c.key) is None for r in b["rows"])]
            apart = [{"cells": [(c.key, cell(b, c.key, a.get(c.key))) for c in APART_COLS],
                      "href": None if a["model"] == b.get("baseline") else evidence(a["model"])} for a in b["set_apart"]]
            boards.append({"b": b, "title": title(b), "rows": rows, "apart": apart, "empty": empty,
                           "heads": [(c.header, c.key) for c in COLS if c.header not in empty and c.key != "score_ci"],
                           "apart_heads": [(c.header, c.key) for c in APART_COLS],
                           "judge_link": link("/judge", judge=judge_ref),
                           "audit_link": link("/audit", family=b["task_family"], judge=judge_ref),
                           "calibration_link": link("/calibration", calibration=b["calibration"]) if b["calibration"]
                           else None})
        downloads = [(label, link("/publish", **here, format=f)) for label, f in
                     (("CSV", "csv"), ("Markdown", "markdown"), ("AlpacaEval CSV", "alpaca-eval"), ("JSON", "json"))
                     if f != "alpaca-eval" or baseline]
        return self.render("publish.html.j2", title="Publish", nav="publish", result=result, boards=boards,
                           downloads=downloads, here=here, modes=WINRATE_PUBLISH_MODES if baseline else
                           ("recommended", "raw", "calibrated"), mode=mode)


def _download(result: dict, fmt_: str) -> Response:
    """The board as the CLI's ``--format csv|markdown|alpaca-eval`` writes it, as a download."""
    from judgecal.report import publish as render

    media, ext = DOWNLOADS[fmt_]
    if fmt_ == "markdown":
        body = render.publish_markdown(result)
    else:
        from judgecal.views.export import csv_text

        body = csv_text(render.publish_csv_rows(result) if fmt_ == "csv" else render.alpaca_eval_rows(result))
    name = "publish-" + "-".join(b["task_family"].replace("/", "_") for b in result["boards"])[:80] + f".{ext}"
    return Response(body, media_type=f"{media}; charset=utf-8",
                    headers={"content-disposition": f'attachment; filename="{name}"'})
