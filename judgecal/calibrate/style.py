"""Style features of an answer: Arena-Hard-Auto's Markdown counts. Pure Python; no I/O.

The definitions are Arena-Hard-Auto's (lmarena/arena-hard-auto ``utils/add_markdown_info.py``,
``count_markdown_elements`` after ``remove_pattern`` with the pattern ``"```([^`]*)```"``):
the same regular expressions, with the same flags, counted on the same text. docs/style.md
states them in words, with worked examples and the one place judgecal differs (the removal of a
fenced code block, below).

1. Fenced code blocks are emptied first: every non-overlapping match of ``(```)([^`]*)(```)``,
   left to right (a run of three backticks, any text without a backtick, three backticks;
   newlines included), keeps its six backticks and loses what lies between them. Markers inside
   a code block are therefore not counted; a block holding a backtick (`````python\\nx = `a`\\n`````)
   is not a match and its markers are counted, as in Arena-Hard-Auto.
   Arena-Hard-Auto deletes the captured text with ``str.replace``, which also deletes every other
   occurrence of that text in the answer (an empty-bodied block deletes nothing; a block holding
   only ``"\\n"`` would delete every newline of the answer); judgecal deletes the block's body in
   place only.
2. On that text (``re.MULTILINE``: ``^`` is the start of the text or the position after a
   ``"\\n"``; ``\\s`` is any Unicode whitespace, ``"\\r"`` and ``"\\n"`` included; ``\\d`` any
   Unicode decimal digit), the number of non-overlapping matches of

   - headers: ``^#{k}\\s`` for each level k = 1..6 (one to six ``#`` at a line start followed by
     whitespace; ``#hashtag`` and ``####### seven`` are not headers), summed over the levels
     (Arena-Hard-Auto's style control sums them);
   - ordered list items: ``^\\s*\\d+\\.\\s``;
   - unordered list items: ``^\\s*[-*+]\\s``;
   - bold: ``\\*\\*[^*\\n]+\\*\\*`` plus ``__[^_\\n]+__`` (a pair on one line around text
     without the marker character; ``***bold-italic***`` counts once).

Arena-Hard-Auto's length feature (``token_len``: tiktoken's gpt-4o tokens of the whole answer,
code included) has no fixed counterpart here: judgecal's lengths are the stored ones
(UTF-8 bytes, characters, whitespace words on ``response``; tokens under a named tokenizer in
``token_length``)."""

from __future__ import annotations

import re
from typing import NamedTuple

#: a fenced code block as Arena-Hard-Auto finds it (its body: no backtick)
CODE_BLOCK = re.compile(r"```[^`]*```")
#: one to six '#' at a line start, then whitespace: the sum of Arena-Hard-Auto's six per-level
#: patterns ``^#{k}\s`` (at each line start at most one level matches, and a match never reaches
#: past the next line start, so the counts are equal)
HEADER = re.compile(r"^#{1,6}\s", re.MULTILINE)
ORDERED = re.compile(r"^\s*\d+\.\s", re.MULTILINE)
UNORDERED = re.compile(r"^\s*[-*+]\s", re.MULTILINE)
BOLD_STARS = re.compile(r"\*\*[^*\n]+\*\*")
BOLD_UNDERSCORES = re.compile(r"__[^_\n]+__")

#: the stored columns (``response``), in :class:`StyleCounts` order
COLUMNS = ("md_headers", "md_list_ordered", "md_list_unordered", "md_bold")


class StyleCounts(NamedTuple):
    """Markdown counts of one answer (:func:`style_counts`)."""

    md_headers: int
    md_list_ordered: int
    md_list_unordered: int
    md_bold: int


def without_code(text: str) -> str:
    """``text`` with the body of every fenced code block removed, its fences kept (step 1 of
    the module's definition)."""
    return CODE_BLOCK.sub("``````", text) if "```" in text else text


def style_counts(text: str) -> StyleCounts:
    """The Markdown counts of ``text`` (headers h1-h6, ordered and unordered list items, bold
    pairs), counted outside fenced code blocks as the module docstring defines them."""
    t = without_code(text)
    headers = len(HEADER.findall(t)) if "#" in t else 0
    ordered = len(ORDERED.findall(t)) if "." in t else 0
    unordered = len(UNORDERED.findall(t)) if ("-" in t or "*" in t or "+" in t) else 0
    bold = (len(BOLD_STARS.findall(t)) if "**" in t else 0) + (len(BOLD_UNDERSCORES.findall(t)) if "__" in t else 0)
    return StyleCounts(headers, ordered, unordered, bold)
