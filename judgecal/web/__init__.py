"""``judgecal serve``: the read-only web view of the rating database (Starlette + Jinja2).

Routes and templates only: every page shows what a view function of :mod:`judgecal.views`
returns (the same functions the CLI prints), rendered by :mod:`judgecal.web.app`'s templates
(docs/serve.md)."""

from judgecal.web.app import create_app

__all__ = ["create_app"]
