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


#: Unicode categories a page shows as ``<U+XXXX>``: controls, format characters (bidi overrides
#: and isolates, zero-width characters), line and paragraph separators, surrogates, private use
_HIDDEN = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs", "Co"})
_KEPT = frozenset("\n\r\t")


def visible_html(text: str) -> str:
    """``text`` for an HTML page: characters of the categories in :data:`_HIDDEN` (a
    right-to-left override U+202E, a zero-width joiner, an escape) written as ``<U+XXXX>``;
    newlines, carriage returns and tabs kept (answers are shown as preformatted text), every
    other character (letters of any script, spaces, symbols) unchanged. The page's
    autoescaping then escapes the ``<``."""
    import unicodedata

    text = str(text)
    if text.isprintable():
        return text
    return "".join(f"<U+{ord(ch):04X}>" if ch not in _KEPT and unicodedata.category(ch) in _HIDDEN else ch
                   for ch in text)


def finalize_html(value):
    """The Jinja2 ``finalize`` of judgecal's HTML pages (the web view and the static report):
    every ``{{ value }}`` that is text goes through :func:`visible_html` (a model named
    ``evil\u202egnp.exe-model`` cannot read as ``evilledom-exe.png``); markup judgecal made
    (charts, marked safe) and other values pass as they are."""
    from markupsafe import Markup

    if isinstance(value, str) and not isinstance(value, Markup):
        return visible_html(value)
    return value
