"""The Bradley-Terry board with style control (``/bt``): ``judgecal bt``'s board, from the same
function (:func:`judgecal.views.btboard.build_bt_board`)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from judgecal.web.params import Params
from judgecal.web.render import link

#: the page's defaults where they differ from the CLI's (docs/serve.md): a small bootstrap, so
#: that the page answers in about a second on 26 models, and lengths in characters (always
#: stored: the read-only page cannot fill token lengths; ``length_unit=tokens`` where they are)
DEFAULT_BOOTSTRAP = 100
DEFAULT_SEED = 0
DEFAULT_CONTROL = "both"
DEFAULT_UNIT = "chars"
#: downloads of the board, as `judgecal bt --format` writes them
DOWNLOADS = {"csv": ("text/csv", "csv"), "markdown": ("text/markdown", "md")}
#: the parameters the board's form sends back as given: shown, and kept hidden
FORM_FIELDS = ("baseline", "family", "judge", "bootstrap", "seed", "outcome", "length_unit", "tokenizer")
HIDDEN_FIELDS = FORM_FIELDS[5:]


class BtPage:
    """A mixin of :class:`judgecal.web.app.App`, which gives it ``url``, ``json``, ``render``."""

    def bt(self, request: Request):
        from judgecal.report import btboard as render
        from judgecal.views.btboard import CONTROLS, LENGTH_UNITS, OUTCOMES, build_bt_board

        p = Params(request, ("family", "judge", "baseline", "control", "outcome", "bootstrap", "seed", "length_unit",
                             "tokenizer", "coefficients", "format"))
        families = p.texts("family")  # several: the board's choice page (one family at a time)
        family = families[0] if len(families) == 1 else None
        judge, baseline = p.text("judge"), p.text("baseline")
        control = p.choice("control", CONTROLS, DEFAULT_CONTROL)
        outcome = p.choice("outcome", OUTCOMES, "preference")
        n_boot = p.resamples(DEFAULT_BOOTSTRAP)
        seed = p.seed(DEFAULT_SEED)
        unit = p.choice("length_unit", LENGTH_UNITS, DEFAULT_UNIT)
        tokenizer = p.text("tokenizer")
        coefficients = p.flag("coefficients")
        fmt_ = p.choice("format", ("html", "json") + tuple(DOWNLOADS), "html")
        from judgecal.web.params import BadRequest

        if tokenizer is not None and unit != "tokens":
            raise BadRequest(f"tokenizer applies to length_unit=tokens (not {unit})")
        if coefficients and fmt_ not in DOWNLOADS:
            raise BadRequest("coefficients=1 applies to format=csv and format=markdown (the page and the JSON hold them)")
        if coefficients and control == "none":
            raise BadRequest("coefficients=1 applies to a style-controlled board: give control=length, markdown or both")
        board = build_bt_board(families, judge, baseline, self.url, outcome=outcome,
                               n_bootstrap=n_boot, seed=seed, control=control, length_unit=unit,
                               tokenizer=tokenizer or "smollm2")
        if fmt_ == "json":
            return self.json(board)
        if fmt_ in DOWNLOADS:
            return _download(board, fmt_, coefficients)
        here = dict(family=family, judge=judge, baseline=baseline,
                    control=None if control == DEFAULT_CONTROL else control,
                    outcome=None if outcome == "preference" else outcome,
                    bootstrap=None if n_boot == DEFAULT_BOOTSTRAP else n_boot, seed=seed or None,
                    length_unit=None if unit == DEFAULT_UNIT else unit, tokenizer=tokenizer)
        evidence = lambda model: None if model == board["baseline"] else link(  # noqa: E731
            "/audit", family=board["task_family"], judge=board["judge_ref"], model=model)
        downloads = [("CSV", link("/bt", **here, format="csv"))]
        if board.get("style"):
            downloads.append(("coefficients CSV", link("/bt", **here, format="csv", coefficients=True)))
        downloads += [("Markdown", link("/bt", **here, format="markdown")), ("JSON", link("/bt", **here, format="json"))]
        form = {k: p.given(k) for k in FORM_FIELDS}  # the form sends back every parameter given, as given
        scope = dict(family=board["task_family"], judge=board["judge_ref"], baseline=board["baseline"])
        return self.render("bt.html.j2", title="Bradley-Terry", nav="winrates", board=board,
                           view=render.web_view(board, evidence), control=control, controls=CONTROLS,
                           downloads=downloads, form=form, defaults={"bootstrap": DEFAULT_BOOTSTRAP, "seed": DEFAULT_SEED,
                                                                      "length_unit": DEFAULT_UNIT},
                           hidden=[(k, form[k]) for k in HIDDEN_FIELDS if form[k] is not None],
                           winrates_link=link("/winrates", **scope),
                           audit_link=link("/audit", family=board["task_family"], judge=board["judge_ref"]),
                           judge_link=link("/judge", judge=board["judge_ref"]))


def _download(board: dict, fmt_: str, coefficients: bool) -> Response:
    """The board (or, with ``coefficients``, the style coefficients) as ``judgecal bt --format
    csv|markdown [--coefficients]`` writes it, as a download."""
    from judgecal.report import btboard as render

    media, ext = DOWNLOADS[fmt_]
    if fmt_ == "markdown":
        body = render.coef_markdown(board) if coefficients else render.bt_markdown(board)
    else:
        from judgecal.views.export import csv_text

        body = csv_text(render.coefficient_rows(board) if coefficients else board["rows"])
    import re

    name = ("bt-" + re.sub(r"[^A-Za-z0-9._-]", "_", board["task_family"])[:60] + ("-" + board["control"] if board.get("style") else "")
            + ("-coefficients" if coefficients else "") + f".{ext}")
    return Response(body, media_type=f"{media}; charset=utf-8",
                    headers={"content-disposition": f'attachment; filename="{name}"'})
