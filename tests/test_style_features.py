"""Markdown style counts (judgecal.calibrate.style) against hand-written answers with known
counts, and against Arena-Hard-Auto's definition written out here on real AlpacaEval answers."""

from __future__ import annotations

import json
import re

import pytest

from judgecal.calibrate.style import StyleCounts, style_counts, without_code


CASES = [
    # (answer, (headers, ordered, unordered, bold))
    ("", (0, 0, 0, 0)),
    ("plain text, nothing else", (0, 0, 0, 0)),
    ("# One\n## Two\n### Three\n#### Four\n##### Five\n###### Six\n", (6, 0, 0, 0)),
    ("####### seven is no header\n#hashtag\n #indented\nnot # mid-line", (0, 0, 0, 0)),
    ("#\n# x", (2, 0, 0, 0)),  # '#' then a newline is whitespace: an empty h1
    ("1. a\n2. b\n10. c\n1.no space\n1) paren", (0, 3, 0, 0)),
    ("- a\n* b\n+ c\n-no space\n--- rule\n* * *", (0, 0, 4, 0)),
    # nested lists: indented markers count, each item once
    ("1. top\n   - sub a\n   - sub b\n     1. deeper\n2. next\n\t* tabbed", (0, 3, 3, 0)),
    ("**bold** and __also__ and **two** on a line", (0, 0, 0, 3)),
    ("***bold-italic***", (0, 0, 0, 1)),
    # no pair crosses a newline, but the closing '**' of one line's text opens the next pair:
    # '** and **' twice (what the regular expression finds, not what Markdown renders bold)
    ("**not\nbold** and ** ** and ****", (0, 0, 0, 2)),
    ("snake_case__name__x and __init__", (0, 0, 0, 2)),
    # markers inside a fenced code block are not counted; outside it they are
    ("# Title\n```python\n# comment\n- not a list\n1. no\n**x**\n```\n- item\n**b**", (1, 0, 1, 1)),
    # a code block holding a backtick is not a match (Arena-Hard's [^`]*): its markers count
    ("```\n# in code `x`\n```\n", (1, 0, 0, 0)),
    # two blocks, text between them counted
    ("```a```\n# h\n```b```", (1, 0, 0, 0)),
    # Windows line endings: '^' follows the '\n', '\r' is whitespace
    ("# Title\r\n\r\n1. one\r\n2. two\r\n- item\r\n**b**\r\n#\r\n", (2, 2, 1, 1)),
    # a lone '\r' does not start a line
    ("text\r# no header\r- no item", (0, 0, 0, 0)),
    # blank lines before an item: one item
    ("\n\n\n3. item", (0, 1, 0, 0)),
    ("1.\n2. second", (0, 2, 0, 0)),  # '1.' then the newline (whitespace): an item
    ("**a** **b** __c__ # not header", (0, 0, 0, 3)),
]


@pytest.mark.parametrize("text,expected", CASES)
def test_known_counts(text, expected):
    assert tuple(style_counts(text)) == expected
    assert isinstance(style_counts(text), StyleCounts)


def test_code_body_removed_fences_kept():
    assert without_code("a ```x\ny``` b ```z``` c") == "a `````` b `````` c"
    assert without_code("no code") == "no code"
    # an unclosed fence removes nothing
    assert without_code("```\n# open") == "```\n# open"
    assert style_counts("```\n# open")[0] == 1


def _arena_hard(text: str) -> tuple[int, int, int, int]:
    """Arena-Hard-Auto's count_markdown_elements (per level, per marker), summed as its style
    control sums them, on the text with code blocks emptied in place."""
    t = re.sub(r"```[^`]*```", "``````", text)
    headers = sum(len(re.findall(rf"^#{{{k}}}\s", t, re.MULTILINE)) for k in range(1, 7))
    ordered = len(re.findall(r"^\s*\d+\.\s", t, re.MULTILINE))
    unordered = len(re.findall(r"^\s*[-*+]\s", t, re.MULTILINE))
    bold = len(re.findall(r"\*\*[^*\n]+\*\*", t)) + len(re.findall(r"__[^_\n]+__", t))
    return headers, ordered, unordered, bold


@pytest.mark.parametrize("text,expected", CASES)
def test_cases_follow_the_definition(text, expected):
    assert _arena_hard(text) == expected


def test_real_answers_follow_the_definition(data_dir):
    path = data_dir / "alpaca_eval" / "gpt4_1106_preview.json"
    answers = [r["output"] for r in json.loads(path.read_text(encoding="utf-8"))]
    totals = [0, 0, 0, 0]
    for a in answers:
        got = style_counts(a)
        assert tuple(got) == _arena_hard(a), a[:200]
        totals = [x + y for x, y in zip(totals, got)]
    # gpt-4-turbo's answers are Markdown-heavy: every feature occurs (real counts, not zeros)
    assert len(answers) == 805 and all(t > 100 for t in totals), totals
