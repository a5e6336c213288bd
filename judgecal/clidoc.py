"""Generate docs/cli.md from the Click commands themselves (``python -m judgecal.clidoc``), so
the reference cannot drift from the code; a test compares the file with this output."""

from __future__ import annotations

import click

from judgecal.cli import cli


def _walk(cmd: click.Command, path: list[str]):
    yield path, cmd
    if isinstance(cmd, click.Group):
        for name in sorted(cmd.commands):
            yield from _walk(cmd.commands[name], path + [name])


def _usage(cmd: click.Command, path: list[str]) -> str:
    ctx = click.Context(cmd, info_name=" ".join(path))
    return " ".join(cmd.collect_usage_pieces(ctx))


def render() -> str:
    """docs/cli.md as Markdown: every command, its help, arguments and options."""
    lines = ["# CLI reference", "",
             "Generated from the code by `python -m judgecal.clidoc > docs/cli.md` (a test keeps it in step).",
             "Global option: `--database-url URL` (env `JUDGECAL_DATABASE_URL`), before the command.", "",
             "An option that takes one value is given once: a repeat is refused with one line naming it "
             "(exit 2), never silently the last value (`fit --task-family A --task-family B` fits nothing). "
             "A repeatable option uses every value given; an exact repeat counts once, with a note on stderr.", "",
             "Tables fit the terminal's width (piped output: `COLUMNS`, default 200): the columns that do not fit are "
             "named under the table, and a number or a timestamp is never split over two lines. A reader that closes "
             "standard output early (`judgecal leaderboard | head -1`) is no error: the rest of the output is dropped "
             "and the command exits with its own status (0, or `check`'s 1 when a threshold fails).", ""]
    for path, cmd in _walk(cli, ["judgecal"]):
        if len(path) == 1:
            continue
        lines.append(f"## `{' '.join(path)}`")
        lines.append("")
        lines.append(f"`{' '.join(path)} {_usage(cmd, path)}`".replace(" `", "`").rstrip())
        lines.append("")
        if cmd.help:
            lines.append(" ".join(cmd.help.split()).replace("\b", ""))
            lines.append("")
        opts = [p for p in cmd.params if isinstance(p, click.Option)]
        if opts:
            lines.append("| option | meaning |")
            lines.append("|---|---|")
            for p in opts:
                names = ", ".join(f"`{o}`" for o in p.opts)
                if p.metavar:
                    names += f" `{p.metavar}`"
                elif not p.is_flag and isinstance(p.type, click.Choice):
                    names += " `" + "|".join(p.type.choices) + "`"
                help_text = " ".join((p.help or "").split())
                if p.show_default and p.default is not None and not p.is_flag:
                    default = p.default if not isinstance(p.default, (tuple, list)) else " ".join(map(str, p.default))
                    help_text += f" (default: {default})"
                if p.multiple and "repeatable" not in help_text:
                    help_text += " (repeatable)"
                lines.append(f"| {names.replace('|', chr(92) + '|')} | {help_text.replace('|', chr(92) + '|')} |")
            lines.append("")
        if cmd.epilog:  # the worked example(s) of judgecal/cliexamples.py
            head, *body = cmd.epilog.replace("\b", "").strip().splitlines()
            lines += [head, "", "```", *[b[2:] for b in body], "```", ""]
    return "\n".join(lines).rstrip() + "\n"


if __name__ == "__main__":
    print(render(), end="")
