"""A message of the views as a web page says it: the command line's options named as the URL
parameters the pages read (issue 32: "choose one with --judge" is no answer to a web user).

The views raise one message for both surfaces, worded for the command line (``--judge``,
``--task-family NAME``); the error and choice pages pass it through :func:`for_web`, which
rewrites every option that a page reads as a URL parameter into that parameter (``judge=``,
``family=NAME``, ``length_unit=tokens``), leaves text in backquotes alone (a command to run,
``judgecal fit --list``, stays a command) and leaves options no page reads as they are (they
name a command-line option a web request cannot have given). The CLI prints the message as
raised."""

from __future__ import annotations

import re

#: the URL parameters the pages read (judgecal.web.pages.*)
WEB_PARAMS = frozenset({
    "family", "judge", "baseline", "calibration", "calibration_from", "model", "publish", "bootstrap", "seed",
    "min_ratings", "max_unparsed", "mc_reference", "length_unit", "tokenizer", "short_floor", "lc_regulariser",
    "joint", "sort", "control", "outcome", "coefficients", "plots", "filter", "q", "page", "per_page", "status",
    "score_min", "score_max", "since", "until", "format"})
#: command-line options whose URL parameter is not their name with underscores
RENAMED = {"task-family": "family", "sort-by": "sort"}
#: flags: the parameter that turns them on
FLAGS = {"joint": "joint=1", "coefficients": "coefficients=1", "plots": "plots=1"}

_OPTION = re.compile(r"--([a-z][a-z0-9]*(?:-[a-z0-9]+)*)(?:(?P<sep> )(?P<value>'[^']*'|\"[^\"]*\"|id:N|id:\d+|"
                     r"[A-Z][A-Z_|]*\b|\d+(?:\.\d+)?\b|[a-z][a-z0-9_-]*\b))?")


def _values(param: str) -> frozenset[str]:
    """The lowercase words a parameter takes (the rest of a message is not read as its value)."""
    if param == "length_unit":
        from judgecal.db.verdicts import LENGTH_UNITS

        return frozenset(LENGTH_UNITS)
    if param == "publish":
        from judgecal.views.check import PUBLISH_MODES
        from judgecal.views.publish import WINRATE_PUBLISH_MODES

        return frozenset(PUBLISH_MODES) | frozenset(WINRATE_PUBLISH_MODES)
    if param == "filter":
        from judgecal.views.audit import ALL_FILTERS

        return frozenset(ALL_FILTERS)
    if param == "calibration":
        return frozenset({"latest", "none"})
    if param == "format":
        return frozenset({"json"})
    return frozenset()


def _param(option: str) -> str | None:
    name = RENAMED.get(option, option.replace("-", "_"))
    return name if name in WEB_PARAMS else None


def _rewrite(match: re.Match) -> str:
    param = _param(match.group(1))
    if param is None:
        return match.group(0)
    value = match.group("value")
    if match.group(1) in FLAGS:
        return FLAGS[match.group(1)] + (match.group("sep") + value if value else "")
    if value is None:
        return f"{param}="
    if re.fullmatch(r"[a-z][a-z0-9_-]*", value) and value not in _values(param):  # a word of the sentence, not the option's value
        return f"{param}= {value}"
    if value[0] in "'\"":
        value = value[1:-1]
    return f"{param}={value}"


def for_web(message: str) -> str:
    """``message`` with each command-line option a page reads as a URL parameter named as that
    parameter (``--judge id:N`` -> ``judge=id:N``, ``--task-family`` -> ``family=``, ``--joint``
    -> ``joint=1``), outside backquotes."""
    parts = re.split(r"(`[^`]*`)", message)
    return "".join(p if p.startswith("`") and p.endswith("`") and len(p) > 1 else _OPTION.sub(_rewrite, p)
                   for p in parts)
