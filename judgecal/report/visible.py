"""User text made visible: control, format (bidi) and other invisible characters shown as
``<U+XXXX>`` in terminal and Markdown output (issue 23), so that a model name carrying a
right-to-left override (U+202E) or an escape sequence cannot reorder or hide what a table
says. Plain printable text comes back unchanged."""

from __future__ import annotations


def visible(text: str, *, keep_newlines: bool = False) -> str:
    """``text`` with every character that ``str.isprintable`` refuses (C0/C1 controls, bidi
    overrides and isolates, zero-width characters, unassigned code points, non-ASCII
    separators) written as ``<U+XXXX>``; the ordinary space stays, and newlines too with
    ``keep_newlines``."""
    text = str(text)
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() or (keep_newlines and ch == "\n") else f"<U+{ord(ch):04X}>" for ch in text)
