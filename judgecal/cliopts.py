"""Click command classes that leave nothing silent about repeated options, and check every
value against the database's limits before a command starts (:func:`check_limits`).

Click keeps the last value of an option declared without ``multiple=True`` when a user gives it
twice (``fit --task-family A --task-family B`` fits B only), and it has no setting to refuse
that. Every judgecal command is a :class:`StrictCommand` (groups: :class:`StrictGroup`, whose
commands and subgroups inherit the classes), which:

- refuses a repeated single-valued option with one usage error (exit 2) naming the command, the
  option and the values given: ``fit takes one --task-family (got A, B): give it once``; a
  command may add a better hint per option (``repeat_hints={"family": "run one fit per
  family, ..."}`` in its decorator). A flag given twice and an on/off pair given together
  (``--x --no-x``) are refused the same way. Eager options (``--help``, ``--version``) are left
  alone.
- accepts ``-h`` as well as ``--help`` and wraps help at 100 columns (:data:`CONTEXT_SETTINGS`),
  set on the command itself: Click passes a group's ``context_settings`` to its subcommands only
  through the parent context, and caches a command's help option (``Command._help_option``) from
  the first context it is built in, so a context built without the parent (``cmd.make_context``
  in a test or a tool) would leave the command with ``--help`` alone, for good.
- keeps every value of a ``multiple=True`` option, in order, and counts an exact repeat once,
  with a note on stderr (no judgecal option gives a repeat a meaning of its own).

How: the parser Click builds for the command (``Command.make_parser``, public) reports, in the
order list its ``parse_args`` returns, every option occurrence it processed; each occurrence's
value is recorded by wrapping the parser options' ``process`` (where that internal exists:
without it the error names the option but not the values)."""

from __future__ import annotations

import click
from click.core import ParameterSource


def _where(ctx: click.Context) -> str:
    """The command as a user typed it, without the program name (``import llmbar``)."""
    parts = ctx.command_path.split(" ", 1)
    return parts[1] if len(parts) == 2 else parts[0]


def _shown(value) -> str:
    if isinstance(value, (tuple, list)):
        return " ".join(str(v) for v in value)
    return str(value)


#: every judgecal command's context settings (a command's own ``context_settings`` win)
CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


class _StrictMixin:
    """Refuses repeated single-valued options; counts a repeated multiple value once."""

    def __init__(self, *args, repeat_hints: dict[str, str] | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        # on every command, not only the root group: see the module (-h however the context is made)
        self.context_settings = {**CONTEXT_SETTINGS, **self.context_settings}
        #: {parameter name: what to say instead of "give it once"} for a repeated option
        self.repeat_hints = dict(repeat_hints or {})

    def make_parser(self, ctx: click.Context):
        parser = super().make_parser(ctx)
        seen: dict[int, list[str]] = {}  # id(click.Option) -> what each occurrence gave
        opts = {**getattr(parser, "_short_opt", {}), **getattr(parser, "_long_opt", {})}
        for popt in {id(o): o for o in opts.values()}.values():
            process = getattr(popt, "process", None)
            if process is None:
                continue
            names = list(getattr(popt, "_long_opts", [])) + list(getattr(popt, "_short_opts", []))

            def recording(value, state, _process=process, _popt=popt, _name=names[0] if names else None):
                obj = getattr(_popt, "obj", None)
                if getattr(_popt, "action", None) in ("store_const", "append_const", "count"):
                    shown = _name or "?"
                else:
                    shown = _shown(value)
                seen.setdefault(id(obj), []).append(shown)
                return _process(value, state)

            popt.process = recording
        parse = parser.parse_args

        def checked_parse(*args, **kwargs):
            result = parse(*args, **kwargs)
            if not ctx.resilient_parsing:
                self._refuse_repeats(ctx, result[2], seen)
            return result

        parser.parse_args = checked_parse
        return parser

    def _refuse_repeats(self, ctx: click.Context, order, seen: dict[int, list[str]]) -> None:
        counts: dict[int, int] = {}
        for param in order:
            counts[id(param)] = counts.get(id(param), 0) + 1
        for param in dict.fromkeys(order):  # first-occurrence order
            if (not isinstance(param, click.Option) or param.multiple or param.count or param.is_eager
                    or counts[id(param)] < 2):
                continue
            got = seen.get(id(param))
            given = f" (got {', '.join(got)})" if got else f" (given {counts[id(param)]} times)"
            hint = self.repeat_hints.get(param.name)
            if param.is_flag and param.secondary_opts:  # --x/--no-x
                what, hint = f"one of {'/'.join(param.opts + param.secondary_opts)}{given}", hint or "give one"
            elif param.is_flag:
                what = f"{param.opts[0]} once (given {counts[id(param)]} times)"
            else:
                what, hint = f"one {param.opts[0]}{given}", hint or "give it once"
            raise click.UsageError(f"{_where(ctx)} takes {what}" + (f": {hint}" if hint else ""), ctx=ctx)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        rest = super().parse_args(ctx, args)
        if not ctx.resilient_parsing:
            check_limits(ctx, self.get_params(ctx))
        for param in self.get_params(ctx):
            if not (isinstance(param, click.Option) and param.multiple) or param.name not in ctx.params:
                continue
            if ctx.get_parameter_source(param.name) != ParameterSource.COMMANDLINE:
                continue
            values = ctx.params[param.name]
            if not values:
                continue
            try:
                unique = list(dict.fromkeys(values))
            except TypeError:  # an unhashable value: keep them all
                continue
            if len(unique) < len(values):
                repeated = [v for v in unique if values.count(v) > 1]
                click.echo(f"note: {param.opts[0]} {', '.join(_shown(v) for v in repeated)} given more than once: "
                           f"counted once", err=True)
                ctx.params[param.name] = type(values)(unique) if isinstance(values, tuple) else unique
        return rest


# ---------------------------------------------------------------- limits of both dialects
# Every value is checked here, before a command starts its work, against what SQLite AND
# PostgreSQL can store (issue 23): an int column is PostgreSQL's int4 everywhere, a String(N)
# column holds N characters on PostgreSQL, and neither dialect's text may hold NUL.
INT_MIN, INT_MAX = -(2**31), 2**31 - 1
#: integers with a narrower range than an int column: {parameter name: (lowest, highest)}
INT_RANGES = {
    # numpy's default_rng and RandomState take 0..2**32-1; calibration.seed is an int column
    "seed": (0, INT_MAX),
}
#: string options stored in (or compared against) a column: {parameter name: (at most, column)}
STR_LIMITS = {
    "judge": (300, "judge.model/judge.name"),
    "judge_name": (300, "judge.name"),
    "base_url": (500, "judge.endpoint"),
    "family": (200, "task_family.name"),
    "families": (200, "task_family.name"),
    "task_families": (200, "task_family.name"),
    "verbosity_family": (200, "task_family.name"),
    "model_filter": (200, "response.model"),
    "baseline": (200, "response.model"),
    "annotator": (200, "expert_label.annotator"),
    "tokenizer": (496, "token_length.tokenizer (with its 'hf:' prefix)"),
    "verdict_prefix": (200, "judge.params verdict_prefix"),
}
#: options that name something (a judge, a family, a model, an annotator): an empty or blank
#: value names nothing and is refused, never read as "option not given" (`check --judge ""`
#: checked every judge, `leaderboard --task-family ""` every family, `rate --judge-name ""`
#: used the model name)
NAME_PARAMS = ("judge", "judge_name", "families", "task_families", "verbosity_family",
               "baseline", "annotator", "calibration_from")  # (import --task-family and rate --model-filter: their own message)
#: options whose value is a calibration id (or 'latest'): digits 0-9 only, an int column's range
#: (`--calibration 9223372036854775808` ended in "unexpected OverflowError" on SQLite and
#: "unexpected DataError" on PostgreSQL; `--calibration ²` in "unexpected ValueError")
ID_PARAMS = ("calibration", "calibrations")
#: options whose value is an endpoint URL: http(s) with a host
URL_PARAMS = ("base_url",)


def _values(value):
    if isinstance(value, (tuple, list)):
        for v in value:
            yield from _values(v)
    else:
        yield value


def check_url(value: str) -> str | None:
    """Why ``value`` is not an http(s) URL with a host, or None when it is one."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number or out of range
    except ValueError as exc:
        return str(exc)
    if parts.scheme not in ("http", "https"):
        return "it must start with http:// or https://"
    if not parts.hostname:
        return "it names no host"
    if any(c.isspace() for c in value):
        return "it contains whitespace"
    return None


def _judge_reference(ctx: click.Context, param, value: str) -> str:
    """A ``--judge`` value checked before work starts: ``id:N`` only with the digits 0-9 and
    within an int column (``id:²`` ended in "unexpected ValueError"). A name of other digits (a
    judge named "²" or "١") passes: :func:`judgecal.db.queries.judge_by_name` reads it as a name."""
    if value[:3].lower() == "id:":
        number = value[3:].strip()
        if not (number.isascii() and number.isdigit()) or int(number) > INT_MAX:
            raise click.BadParameter(f"{value!r}: id: takes a judge's id, written with the digits 0-9, at most "
                                     f"{INT_MAX} (e.g. id:5)", ctx=ctx, param=param)
    return value


def check_limits(ctx: click.Context, params) -> None:
    """Refuse (click.BadParameter, exit 2) an option value that no database judgecal writes to
    could hold: an integer outside PostgreSQL's int4 (or :data:`INT_RANGES`), a string with NUL
    or longer than its column (:data:`STR_LIMITS`), an endpoint that is not a URL."""
    for param in params:
        if param.name not in ctx.params or param.is_eager:
            continue
        if (param.name == "judge" and isinstance(ctx.params[param.name], str)
                and "ID" in (getattr(param, "metavar", None) or "")):  # a reference (NAME|ID), not rate's MODEL
            ctx.params[param.name] = _judge_reference(ctx, param, ctx.params[param.name])
        for v in _values(ctx.params[param.name]):
            if isinstance(v, bool) or v is None:
                continue
            if isinstance(v, int):
                lo, hi = INT_RANGES.get(param.name, (INT_MIN, INT_MAX))
                if not lo <= v <= hi:
                    raise click.BadParameter(f"{v} is not in {lo}..{hi} (what the database and the random generators "
                                             "take)", ctx=ctx, param=param)
            elif isinstance(v, str):
                if "\x00" in v:
                    raise click.BadParameter("a NUL character cannot be stored (PostgreSQL refuses it)", ctx=ctx,
                                             param=param)
                if param.name in ID_PARAMS and v != "latest" and v.isdigit():
                    if not v.isascii():
                        raise click.BadParameter(f"{v!r} is not a calibration id: write it with the digits 0-9",
                                                 ctx=ctx, param=param)
                    if int(v) > INT_MAX:
                        raise click.BadParameter(f"{v} is not a calibration id (ids are at most {INT_MAX}, what the "
                                                 "database stores)", ctx=ctx, param=param)
                if param.name in NAME_PARAMS and not v.strip():
                    raise click.BadParameter(f"{v!r} is empty: it names nothing (give a name, or leave the option out)",
                                             ctx=ctx, param=param)
                limit = STR_LIMITS.get(param.name)
                if limit and len(v) > limit[0]:
                    raise click.BadParameter(f"{v[:40]!r}... is {len(v)} characters; at most {limit[0]} are stored "
                                             f"({limit[1]}, on SQLite and PostgreSQL alike)", ctx=ctx, param=param)
                if param.name in URL_PARAMS:
                    why = check_url(v)
                    if why:
                        raise click.BadParameter(f"{v[:80]!r} is not an endpoint URL: {why} (e.g. "
                                                 "http://127.0.0.1:8000/v1)", ctx=ctx, param=param)


class StrictCommand(_StrictMixin, click.Command):
    """A command that refuses a repeated single-valued option (see the module)."""


class StrictGroup(_StrictMixin, click.Group):
    """A group whose own options, commands and subgroups refuse repeated single-valued options."""

    command_class = StrictCommand
    group_class = type  # subgroups are StrictGroups too
