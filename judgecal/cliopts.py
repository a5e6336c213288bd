"""Click command classes that leave nothing silent about repeated options.

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


class _StrictMixin:
    """Refuses repeated single-valued options; counts a repeated multiple value once."""

    def __init__(self, *args, repeat_hints: dict[str, str] | None = None, **kwargs):
        super().__init__(*args, **kwargs)
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


class StrictCommand(_StrictMixin, click.Command):
    """A command that refuses a repeated single-valued option (see the module)."""


class StrictGroup(_StrictMixin, click.Group):
    """A group whose own options, commands and subgroups refuse repeated single-valued options."""

    command_class = StrictCommand
    group_class = type  # subgroups are StrictGroups too
