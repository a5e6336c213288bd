"""Messages (issue 23 item 6): Markdown escaping complete (rendered by a CommonMark library,
markdown-it-py), control and bidi characters visible in Markdown and terminal tables."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt
from rich.console import Console

from judgecal.report.render_markdown import md_escape, md_table
from judgecal.report.tables import simple_table
from judgecal.report.visible import visible

MD = MarkdownIt("commonmark").enable("table")


def _inline_text(children) -> tuple[str, set[str]]:
    text, kinds = [], set()
    for t in children:
        kinds.add(t.type)
        text.append(t.content if t.type == "text" else "")
    return "".join(text), kinds


def _rendered(md: str, where: str) -> tuple[str, set[str]]:
    """The text a CommonMark renderer shows for ``md`` placed as ``where``, and the kinds of
    inline tokens it made (only 'text' when nothing was read as Markdown)."""
    if where == "cell":
        doc = "| h |\n|---|\n| " + md + " |\n"
    elif where == "item":
        doc = "- " + md + "\n"
    elif where == "heading":
        doc = "## " + md + "\n"
    else:
        doc = md + "\n"
    tokens = MD.parse(doc)
    inlines = [t for t in tokens if t.type == "inline"]
    blocks = {t.type for t in tokens} - {"inline"}
    expected_blocks = {"cell": {"table_open", "thead_open", "tr_open", "th_open", "th_close", "tr_close", "thead_close",
                                "tbody_open", "td_open", "td_close", "tbody_close", "table_close"},
                       "item": {"bullet_list_open", "list_item_open", "paragraph_open", "paragraph_close",
                                "list_item_close", "bullet_list_close"},
                       "heading": {"heading_open", "heading_close"},
                       "para": {"paragraph_open", "paragraph_close"}}[where]
    assert blocks <= expected_blocks, (doc, blocks - expected_blocks)
    if not inlines:  # an empty text: nothing to render
        return "", set()
    return _inline_text(inlines[-1].children or [])


def _shown(s: str) -> str:
    return visible(" ".join(s.split()))


CASES = ["*star*_und_", "gpt4_1106_preview", "_lead", "a_ b", "[x](http://e.vil)", "![i](x.png)", "[ref]: /url",
         "<script>alert(1)</script>", "a & b &amp; c", "`code`", "~~strike~~", "# not a heading", "1. not a list",
         "- not a list", "+ no", "= no", "back\\slash\\*", "pipe | pipe", "\u202egnp.exe", "ctl\x1b[31mred\x07",
         "[0.875, 0.960]", "[-0.1, 0.2]", "**bold** __bold__", "<http://auto.link>", "x\\", "1) no", "a\u200bb"]


@pytest.mark.parametrize("where", ["cell", "item", "heading", "para"])
@pytest.mark.parametrize("s", CASES)
def test_commonmark_renders_escaped_text_literally(s, where):
    text, kinds = _rendered(md_escape(s), where)
    assert kinds <= {"text"}, (s, kinds)
    assert text == _shown(s)


def test_readable_where_nothing_is_special():
    assert md_escape("gpt4_1106_preview") == "gpt4_1106_preview"
    assert md_escape("[0.875, 0.960]") == "[0.875, 0.960]"
    assert md_escape("*star*_und_") == "\\*star\\*\\_und\\_"


_ALPHABET = st.characters(codec="utf-8", exclude_categories=("Cs",)) | st.sampled_from(
    list("*_`[]()!<>&\\|#~-+=.:0123456789 \n\t\u202e\u2066\x1b"))


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=_ALPHABET, max_size=30))
def test_any_text_renders_literally(s):
    for where in ("cell", "para"):
        text, kinds = _rendered(md_escape(s), where)
        assert kinds <= {"text"}, (s, kinds)
        assert text == _shown(s), s


def test_md_table_cells_stay_in_their_column():
    md = md_table(["model", "score"], [["a|b\u202e", "1"]])
    tokens = MD.parse(md)
    assert sum(t.type == "td_open" for t in tokens) == 2


def test_bidi_and_controls_are_visible_in_terminal_tables():
    con = Console(record=True, width=200)
    con.print(simple_table("judge \u202eevil", ["model", "x"], [["good\u202eliam.exe", "ctl\x1b[31m"], ["plain", 1.5]]))
    out = con.export_text()
    assert "\u202e" not in out and "\x1b" not in out
    assert "good<U+202E>liam.exe" in out and "ctl<U+001B>[31m" in out and "judge <U+202E>evil" in out
    assert visible("plain text") == "plain text" and visible("a\nb", keep_newlines=True) == "a\nb"


def test_llmbar_ratings_file_without_a_judge_name_is_refused(tmp_path, sqlite_url, run_cli):
    import json

    d = tmp_path / "Natural"
    d.mkdir()
    (d / "dataset.json").write_text(json.dumps([{"input": "q", "output_1": "a", "output_2": "b", "label": 1}]))
    (d / "ratings_.json").write_text(json.dumps([{"rating": 1}]))
    r = run_cli("--database-url", sqlite_url, "import", "llmbar", str(d))
    assert r.exit_code == 2 and "ratings_.json" in r.stderr and "no judge name" in r.stderr, r
