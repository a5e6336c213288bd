"""What several ``judgecal`` commands share: the stdout/stderr consoles, the context object
(:class:`Ctx`, :data:`pass_ctx`), JSON output, warnings, option types and shared options, and
:func:`command`/:func:`group`, which make the classes the root group's ``cli.command()`` and
``cli.group()`` make (commands that refuse a repeated single-valued option)."""

from __future__ import annotations

import json
import math
import os
import sys

import click
from rich.console import Console
from rich.text import Text

from judgecal.cliopts import StrictCommand, StrictGroup
from judgecal.secrets import scrub

# wide tables stay readable in logs and pipes (rich would use 80 columns there)
# (sys.stdout is None when the process started with standard output closed: main() refuses to run)
_WIDTH = None if sys.stdout is not None and sys.stdout.isatty() else int(os.environ.get("COLUMNS", "200"))


def stdout_closed() -> None:
    """The reader of standard output went away (``judgecal leaderboard | head -1``): what is
    left to print goes to /dev/null, and the command carries on to its own exit status (a
    closed pipe is not a failure: ``judgecal stats | head -1`` exits 0, ``check | head -1``
    still exits 1 when a threshold fails). Standard output's descriptor is pointed at
    /dev/null, so that no later write (nor the interpreter's last flush) fails again."""
    out.quiet = True
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # not a file (a test's captured output)
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)


class _Stdout(Console):
    """The results console: a closed pipe ends its output quietly (:func:`stdout_closed`);
    rich's own answer is ``SystemExit(1)``."""

    def on_broken_pipe(self) -> None:
        stdout_closed()


out = _Stdout(soft_wrap=True, width=_WIDTH)
err = Console(stderr=True, soft_wrap=True)

FORMAT_TABLE_JSON = click.Choice(["table", "json"])


class Finite(click.FloatRange):
    """A float option that must be a finite number (``nan`` and ``inf`` pass click's own
    FloatRange checks, since every comparison with nan is false), optionally in a range."""

    name = "finite float"

    def _describe_range(self) -> str:
        if self.min is None and self.max is None:  # click would print "x<=None"
            return "finite"
        return super()._describe_range()

    def convert(self, value, param, ctx):
        rv = super().convert(value, param, ctx)
        if not math.isfinite(rv):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return rv


def _json_safe(value):
    """``value`` with every NaN or infinite float replaced by None (JSON has no NaN)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return value


def emit_json(data) -> None:
    """Print JSON to stdout (machines read it): strict JSON, a NaN or infinite figure as null."""
    try:
        click.echo(json.dumps(_json_safe(data), indent=2, default=str, ensure_ascii=False, allow_nan=False))
    except BrokenPipeError:  # the reader took what it wanted (`judgecal ... --format json | head`)
        stdout_closed()


def _line(message: str) -> str:
    """A message as one visible line: secrets masked, control and bidi characters (a newline or
    an escape sequence in a file name) shown as <U+XXXX>, so that a name cannot forge a line or
    recolour the terminal."""
    from judgecal.report.visible import visible

    return visible(scrub(message))


def warn(message: str) -> None:
    # the message as plain text: a file named "[bold]x.jsonl" is named as it is, not read as markup
    err.print(Text.assemble(("warning:", "yellow"), " ", _line(message)), highlight=False)


class Ctx:
    def __init__(self, database_url: str | None):
        self.url = database_url


pass_ctx = click.make_pass_decorator(Ctx)


def command(name: str | None = None, **attrs):
    """``click.command`` making the class the root group's ``cli.command()`` makes (StrictCommand)."""
    return click.command(name, cls=StrictCommand, **attrs)


def group(name: str | None = None, **attrs):
    """``click.group`` making the class the root group's ``cli.group()`` makes (StrictGroup)."""
    return click.group(name, cls=StrictGroup, **attrs)


FMT_OPT = click.option("--format", "fmt", type=FORMAT_TABLE_JSON, default="table", show_default=True)


SUMMARY_HELP = ("Rating summary: greedy (the stored score, the default and reference), mean (expected score under the "
                "stored distribution) or risk-averse (mean - k sd); mean and risk-averse need every ok rating's distribution "
                "(rate --logprobs or --local).")


def refuse_idle_risk_k(summary: str | None) -> None:
    """Refuse --risk-k given on the command line where no risk-averse summary reads it
    (leaderboard, report, check: it would change nothing, without a word)."""
    from click.core import ParameterSource

    cctx = click.get_current_context()
    if summary != "risk-averse" and cctx.get_parameter_source("risk_k") == ParameterSource.COMMANDLINE:
        raise click.UsageError("--risk-k is the k of --summary risk-averse: give --summary risk-averse, or drop --risk-k "
                               "(without it the option changes nothing)")


def summary_opts(default: str | None = "greedy", extra: str = ""):
    """--summary and --risk-k (judgecal.calibrate.summaries)."""
    def wrap(f):
        f = click.option("--risk-k", type=Finite(0, 10), default=1.0, show_default=True,
                         help="k of --summary risk-averse (mean - k standard deviations; Wang, Zhang & Choi 2025).")(f)
        return click.option("--summary", type=click.Choice(["greedy", "mean", "risk-averse"]), default=default,
                            show_default=default is not None, help=SUMMARY_HELP + extra)(f)
    return wrap


FAMILIES_OPT = click.option("--task-family", "families", multiple=True, metavar="NAME", help="Task family (repeatable; default: all).")
JUDGE_OPT = click.option("--judge", default=None, metavar="NAME|ID", help="Judge (default: the only judge with ratings).")
CAL_OPT = click.option("--calibration", default="latest", show_default=True, metavar="ID|latest",
                       help="Calibration to apply: the newest per family and judge, or one id.")


def _enough_resamples(n: int) -> int:
    """--bootstrap of report and leaderboard: 0 (no CIs) or at least 20 resamples (1 to 19 cannot place a 95%
    percentile interval: with one resample the 'CI' is that resample, often beside the figure)."""
    if 0 < n < 20:
        raise click.BadParameter(f"{n} resamples cannot give a 95% interval: give 0 (no CIs) or at least 20",
                                 param_hint="--bootstrap")
    return n
