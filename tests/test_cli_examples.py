"""Every command's --help ends with a worked example (issue 21 item 6), and every example
names only options and arguments its command has (parsed by Click itself)."""

from __future__ import annotations

import shlex

import click
import pytest
from click.testing import CliRunner

from judgecal.cli import cli
from judgecal.cliexamples import EXAMPLES, attach


def _commands(group=cli, prefix=""):
    for name, cmd in group.commands.items():
        if isinstance(cmd, click.Group):
            yield from _commands(cmd, f"{prefix}{name} ")
        else:
            yield f"{prefix}{name}", cmd


def test_every_command_has_an_example():
    assert attach(cli) == []
    assert sorted(EXAMPLES) == sorted(p for p, _ in _commands())


def _lines(path):
    joined, out = "", []
    for line in EXAMPLES[path]:
        joined += line.split("  #")[0].rstrip().rstrip("\\") + " "
        if not line.rstrip().endswith("\\"):
            out.append(joined.strip())
            joined = ""
    return out


@pytest.mark.parametrize("path", sorted(EXAMPLES))
def test_examples_parse(path):
    cmd = dict(_commands())[path]
    for line in _lines(path):
        argv = shlex.split(line)
        assert argv[0] == "judgecal" and " ".join(argv[1:1 + len(path.split())]) == path, line
        args = argv[1 + len(path.split()):]
        # Click parses the options and arguments (unknown options, missing values and too many
        # arguments fail here); values are not converted (files of the example need not exist)
        cmd.make_context(path, args, resilient_parsing=True)
        names = {o for p in cmd.params for o in getattr(p, "opts", []) + getattr(p, "secondary_opts", [])}
        assert {a.split("=")[0] for a in args if a.startswith("--")} <= names, line


def test_help_shows_the_example():
    r = CliRunner().invoke(cli, ["fit", "--help"])
    assert r.exit_code == 0 and "Example:\n    judgecal fit --task-family llmbar/Natural --judge GPT-4" in r.output
