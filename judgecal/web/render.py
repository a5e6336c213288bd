"""The pages' Jinja2 environment and the helpers their templates call (:func:`link`, :func:`fmt`,
:func:`pct`), and the JSON text of ``?format=json``."""

from __future__ import annotations

import functools
import json
import math
from urllib.parse import urlencode

from judgecal import __version__
from judgecal.report.visible import finalize_html


@functools.lru_cache(maxsize=1)
def _environment():
    """The pages' Jinja2 environment, one per process: its compiled templates are kept, so a page's
    first request after the server starts compiles its template once, not each app (issue 32, item 5)."""
    from jinja2 import Environment, PackageLoader, StrictUndefined

    from jinja2 import ChoiceLoader

    # the board partials (partials/*.html.j2) are the report's: the static report renders the same markup
    env = Environment(loader=ChoiceLoader([PackageLoader("judgecal.web", "templates"),
                                           PackageLoader("judgecal.report", "templates")]),
                      autoescape=True, undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                      finalize=finalize_html)
    env.globals.update(link=link, version=__version__, fmt=fmt, pct=pct)
    from judgecal.web.wording import for_web

    env.filters["web_words"] = for_web  # a view's message with the CLI's options named as URL parameters
    return env


def link(path: str, **params) -> str:
    """``path?query`` from the parameters that are set (lists repeat the name)."""
    items = []
    for k, v in params.items():
        if v is None or v == "" or v is False or v == []:
            continue
        if isinstance(v, (list, tuple)):
            items += [(k, str(x)) for x in v]
        else:
            items.append((k, "1" if v is True else str(v)))
    return path + ("?" + urlencode(items) if items else "")


def fmt(x, digits: int = 3) -> str:
    """A figure for a table cell: '-' for None or non-finite, else ``digits`` decimals (integers
    as they are)."""
    if x is None or isinstance(x, bool):
        return "-" if x is None else str(x)
    if isinstance(x, int):
        return str(x)
    if isinstance(x, float):
        return f"{x:.{digits}f}" if math.isfinite(x) else "-"
    return str(x)


def pct(x) -> str:
    return "-" if x is None or not math.isfinite(x) else f"{100 * x:.1f}%"


def json_text(data) -> str:
    """Strict JSON as ``judgecal ... --format json`` prints it (NaN and infinities as null)."""
    def safe(v):
        if isinstance(v, float):
            return v if math.isfinite(v) else None
        if isinstance(v, dict):
            return {k: safe(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [safe(x) for x in v]
        return v

    return json.dumps(safe(data), indent=2, default=str, ensure_ascii=False, allow_nan=False)
