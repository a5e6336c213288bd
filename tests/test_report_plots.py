"""The report's plots, read off the matplotlib Figure objects (not the pixels): the score axis
stays within the judge's scale, the legend lies outside the axes, the title says what is
plotted (which judge and family, which score, raw or calibrated, against what)."""

from __future__ import annotations

import numpy as np
import pytest

from judgecal.calibrate.evaluate import evaluate_pairwise
from judgecal.calibrate.penalty import calibrate
from judgecal.report.plots import (
    plot_score_distributions,
    plot_score_vs_length,
    score_bounds,
    score_distributions_figure,
    score_vs_length_figure,
)

from test_calibrate_evaluate import llmbar_pairs


def _planted(scale=(1, 10), n=400, seed=3):
    """Integer scores on ``scale`` that grow with length (so least-squares lines extrapolated over
    a few very long answers would run past the top of the scale), calibrated as fitted."""
    rng = np.random.default_rng(seed)
    length = np.r_[rng.lognormal(4.5, 0.5, n - 5), [40000, 60000, 80000, 90000, 100000]]
    raw = np.clip(np.round(5 + 1.2 * np.log(length / 90) + rng.normal(0, 1, n)), *scale)
    cal = calibrate(raw, length, 90.0, 0.5, 1.2, *scale)
    return {"kind": "pairwise", "scale": list(scale), "l_ref": 90.0, "params": {"gamma": 0.5, "p": 1.2, "l_ref": 90.0},
            "points": {"labelled": {"length": length.tolist(), "score_raw": raw.tolist(),
                                    "score_calibrated": cal.tolist()}}}


def _boxes(fig):
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    (legend,) = fig.legends
    return renderer, legend.get_window_extent(renderer), [ax.get_window_extent(renderer) for ax in fig.axes]


def _assert_legend_outside(fig):
    renderer, leg, axes = _boxes(fig)
    fig_box = fig.bbox
    for ax_box in axes:
        assert not leg.overlaps(ax_box), (leg, ax_box)
        assert leg.y1 <= ax_box.y0  # below the data area
    ax = fig.axes[0]
    xlabel = ax.xaxis.label.get_window_extent(renderer)
    assert leg.y1 <= xlabel.y0 + 1 and not leg.overlaps(xlabel)  # and below the axis label
    assert leg.x0 >= fig_box.x0 and leg.x1 <= fig_box.x1 and leg.y0 >= fig_box.y0  # inside the picture
    title = ax.title.get_window_extent(renderer)
    assert title.y1 <= fig_box.y1 and title.x0 >= fig_box.x0 and title.x1 <= fig_box.x1  # the title is not cut


def test_scatter_axis_within_the_scale_legend_outside_title_says_what():
    ev = _planted()
    fig = score_vs_length_figure(ev, title="code · judge-x", length_unit="tokens")
    ax = fig.axes[0]
    lo, hi = ax.get_ylim()
    assert 0.5 <= lo < 1.0 and 10.0 < hi <= 10.5  # the 1-10 scale and a little room for the jitter, never 13
    assert ax.get_legend() is None and len(fig.legends) == 1
    _assert_legend_outside(fig)
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert any(x.startswith("raw: slope") for x in labels) and any(x.startswith("calibrated: slope") for x in labels)
    assert any("score shift of the calibration (gamma 0.500, p 1.20)" in x for x in labels)
    title = ax.get_title()
    assert title.splitlines() == ["code · judge-x",
                                  "raw judge score (scale 1-10) vs ln(length in tokens); raw and calibrated trend lines"]
    assert ax.get_xlabel() == "ln(length in tokens)" and ax.get_ylabel() == "judge score (raw)"


def test_six_legend_entries_stay_below_the_axes():
    """Labelled responses, both sides of concise/verbose pairs, two trend lines and the shift
    curve: three legend rows, still under the axis label and inside the picture."""
    ev = _planted()
    lab = ev["points"]["labelled"]
    m = len(lab["length"]) // 2
    ev["points"]["verbosity"] = {"side": ["concise"] * m + ["verbose"] * m, "length": lab["length"][: 2 * m],
                                 "score_raw": lab["score_raw"][: 2 * m], "score_calibrated": lab["score_calibrated"][: 2 * m]}
    fig = score_vs_length_figure(ev, title="code · judge-x", length_unit="words")
    assert len(fig.legends[0].get_texts()) == 6
    _assert_legend_outside(fig)


def test_histogram_axis_within_the_scale_legend_outside():
    fig = score_distributions_figure(_planted(), title="code · judge-x")
    ax = fig.axes[0]
    lo, hi = ax.get_xlim()
    assert 0.5 <= lo < 1.0 and 10.0 < hi <= 10.5
    _assert_legend_outside(fig)
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert [x.split(" (")[0] for x in labels] == ["raw", "calibrated"]
    assert ax.get_title().splitlines()[1] == "judge score distribution (scale 1-10): raw (filled) and calibrated (outline)"


def test_real_llmbar_plots():
    """LLMBar Natural, GPT-4's real ratings on its 0-9 scale: both axes within [0, 9] (plus a
    margin), the legend under the axes, and PNGs that are small."""
    ev = evaluate_pairwise(llmbar_pairs("Natural", "GPT-4"), scale=(0, 9), n_bootstrap=0, seed=0)
    fig = score_vs_length_figure(ev, title="llmbar/Natural · GPT-4", length_unit="words")
    lo, hi = fig.axes[0].get_ylim()
    assert -0.5 < lo < 0 and 9 < hi < 9.5
    _assert_legend_outside(fig)
    assert fig.axes[0].get_title().startswith("llmbar/Natural · GPT-4\nraw judge score (scale 0-9) vs ln(length in words)")
    hist = score_distributions_figure(ev, title="llmbar/Natural · GPT-4")
    lo, hi = hist.axes[0].get_xlim()
    assert -0.5 < lo < 0 and 9 < hi < 9.5
    _assert_legend_outside(hist)
    for png in (plot_score_vs_length(ev, title="t", length_unit="words"), plot_score_distributions(ev, title="t")):
        assert png.startswith(b"\x89PNG") and len(png) < 150_000


def test_without_a_calibration_or_a_scale():
    ev = _planted()
    ev = {"kind": "pairwise", "points": {"labelled": {**ev["points"]["labelled"], "score_calibrated": None}}}
    fig = score_vs_length_figure(ev)
    assert fig.axes[0].get_title() == ("raw judge score (scale not declared: observed range) vs ln(length in length units); "
                                       "raw trend line (no calibration)")
    lo, hi = fig.axes[0].get_ylim()
    raw = np.asarray(ev["points"]["labelled"]["score_raw"])
    assert raw.min() - 0.5 < lo < raw.min() and raw.max() < hi < raw.max() + 0.5
    assert len(fig.axes) == 1  # no calibration: no right axis
    assert "raw (no calibration)" in score_distributions_figure(ev).axes[0].get_title()


def test_score_bounds():
    assert score_bounds({"scale": [1, 10]}, np.array([3.0, 4.0])) == (1.0, 10.0)
    assert score_bounds({"scale": [1, 10]}, np.array([0.0, 12.0])) == (0.0, 12.0)  # a point outside shows
    assert score_bounds({"scale": [None, None]}, np.array([2.0, 5.0, np.nan])) == (2.0, 5.0)
    assert score_bounds({}, np.array([4.0, 4.0])) == (3.5, 4.5)


@pytest.mark.parametrize("fn", [score_vs_length_figure, score_distributions_figure])
def test_no_points_no_figure(fn):
    assert fn({"kind": "pairwise", "points": {"labelled": None}}) is None
