"""Terminal and Markdown tables that read well at 80 and 120 columns (issue 21 item 6): fewer
columns by default, every left-out column named, never a number split, Markdown at most 10
columns, --wide/--columns honoured or refused."""

from __future__ import annotations

import pytest
from rich.console import Console

from judgecal.errors import UsageError
from judgecal.report import board as score_board
from judgecal.report import winboard
from judgecal.report.render_text import method_cols
from judgecal.report.tables import Col, board_table, choose_columns, markdown_columns, parse_columns

COLS = [Col("model", "model", 0, "name"), Col("n", "n", 1, priority=3), Col("win rate", "wr", 0),
        Col("CI", "ci", 1, priority=1), Col("LC win rate", "lc", 0), Col("LC CI", "lc_ci", 1, priority=1),
        Col("rank raw", "rank", 1, priority=4), Col("acc", "acc", 1), Col("flags", "flags", 0, "text")]
MODELS = ["FuseChat-Llama-3.1-8B-Instruct", "gpt4_1106_preview", "Mixtral-8x7B-Instruct-v0.1_concise", "claude-2"]


def _cells():
    return [[m, "805", f"{63.33 - 10 * i:.2f}", f"[{60.8 - 10 * i:.1f}, {65.8 - 10 * i:.1f}]", f"{64.79 - 9 * i:.2f}",
             f"[{63.0 - 9 * i:.1f}, {66.5 - 9 * i:.1f}]", str(i + 1), "-", "missing far-short" if i == 2 else "-"]
            for i, m in enumerate(MODELS)]


def _render(table, width):
    con = Console(width=width, record=True, color_system=None)
    con.print(table)
    return con.export_text()


@pytest.mark.parametrize("width", [80, 120])
def test_fits_and_never_splits_a_number(width):
    cells = _cells()
    table, notes = board_table("t", COLS, cells, width)
    text = _render(table, width)
    assert max(len(line) for line in text.splitlines()) <= width
    flat = text.replace("│", " ")
    # every figure of a shown column appears whole on one line
    shown, hidden, empty, _ = choose_columns(COLS, cells, width)
    for i in shown:
        for row in cells:
            if COLS[i].kind == "num":
                assert row[i] in flat, (width, COLS[i].header, row[i])
    assert empty == ["acc"] and "acc" not in [COLS[i].header for i in shown]
    assert notes[-1] == "columns without a value on this board: acc"
    if hidden:
        assert notes[0].startswith(f"columns not shown at {width} characters: " + ", ".join(hidden))
    # the level-0 columns are always there; at 80 the CIs give way before the figures
    for h in ("model", "win rate", "LC win rate", "flags"):
        assert h in [COLS[i].header for i in shown]
    if width == 80:  # least widths + 3 each + 1: model 21, figures 8 + 8, flags 12 -> 50; the CIs 15 + 15 -> 80
        assert hidden == ["n", "rank raw"] and "[60.8, 65.8]" in flat
    else:
        assert hidden == [] and len(notes) == 1


def test_wide_and_columns():
    cells = _cells()
    shown, hidden, empty, _ = choose_columns(COLS, cells, 80, wide=True)
    assert hidden == [] and empty == ["acc"] and len(shown) == len(COLS) - 1
    picked = parse_columns("model, acc,LC win rate", COLS)
    assert [c.key for c in picked] == ["model", "acc", "lc"]
    shown, hidden, empty, _ = choose_columns(COLS, cells, 80, only=picked)
    assert [COLS[i].key for i in shown] == ["model", "acc", "lc"] and hidden == [] == empty  # asked for: shown, even empty
    with pytest.raises(UsageError, match=r"--columns: no column 'nope'; choose from: model, n, wr"):
        parse_columns("model,nope", COLS)
    with pytest.raises(UsageError, match="name at least one column"):
        parse_columns(" , ", COLS)


def test_markdown_keeps_at_most_ten_columns():
    cols = [Col(f"c{i}", f"k{i}", 0 if i < 3 else 1, priority=20 - i) for i in range(17)]
    cells = [[str(i) for i in range(17)]]
    shown, hidden, empty = markdown_columns(cols, cells)
    assert len(shown) == 10 and shown[:3] == [0, 1, 2]
    # level-1 columns by priority (here the later ones first), then shown left to right
    assert shown == [0, 1, 2] + list(range(10, 17)) and hidden == [f"c{i}" for i in range(3, 10)]


def test_board_column_sets_name_their_json_keys():
    """--columns takes the JSON keys of the boards; every key named is a row key the views fill."""
    assert [c.key for c in winboard.COLS][:3] == ["model", "n_items", "win_rate"]
    assert "flag_codes" in [c.key for c in winboard.COLS] and "flag_codes" in [c.key for c in score_board.COLS]
    assert len(score_board.COLS) == 18 and "bits_per_byte" in [c.key for c in score_board.COLS] and sum(c.level == 0 for c in score_board.COLS) == 5


@pytest.mark.parametrize("width", [80, 120])
def test_report_method_table_keeps_words_and_cis_whole(width):
    cols = ["method", "agreement", "agreement (CV)", "verbosity win-rate", "length pref.", "slope"]
    rows = [["raw (no calibration)", "0.685 [0.640, 0.743]", "0.685 [0.605, 0.740]", "-", "0.552 [0.490, 0.616]",
             "+0.042 [-0.166, +0.260]"],
            ["length-controlled GLM (AlpacaEval 2.0)", "0.750 [0.630, 0.830]", "0.750 [0.650, 0.825]", "-",
             "0.794 [0.291, 0.881]", "-"]]
    table, notes = board_table("t", method_cols(cols), rows, width)
    assert notes == []  # every column fits at 80: the CIs break after their comma
    text = _render(table, width)
    assert max(len(line) for line in text.splitlines()) <= width
    for token in ("0.685", "[0.640,", "0.743]", "+0.042", "[-0.166,", "+0.260]", "calibration)", "length-controlled"):
        assert token in text, (width, token)
    if width == 120:  # room for the CI on one line under its value
        assert "[0.640, 0.743]" in text and "[-0.166, +0.260]" in text
