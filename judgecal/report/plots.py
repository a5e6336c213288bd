"""PNG plots of one evaluation (matplotlib, Agg renderer): score vs ln(length), score histograms.

matplotlib is imported inside the functions, and each figure is drawn on its own
``FigureCanvasAgg`` (the Agg backend, chosen per figure): no pyplot, no global backend switch,
nothing at import time of judgecal. ``*_figure`` build the matplotlib ``Figure`` (tests read its
axes, legend and title); ``plot_*`` return its PNG bytes (dpi 90, about 630 x 430 pixels, well
under 150 KB). Both give None when the evaluation holds no per-response points.

Every plot: a two-line title (what it is about, e.g. ``task family · judge``, then what is
plotted: which score, raw or calibrated, against what), the legend below the axes (never over
the data), and the score axis within the judge's scale (``evaluation["scale"]`` where known,
else the observed range), widened only to show a score that lies outside it.

Input: the ``evaluation`` dict of :mod:`judgecal.calibrate.evaluate` (its ``points``:
``labelled`` and ``verbosity`` with ``length``, ``score_raw``, ``score_calibrated``), plus
``params`` (gamma, p, l_ref) for the penalty curve. Scatter plots draw at most ``max_points``
points (a seeded random subsample, so the same report gives the same picture); the fitted
lines and histograms use every point.
"""

from __future__ import annotations

import io
from collections.abc import Mapping

import numpy as np

from judgecal.calibrate.penalty import LENGTH_FLOOR, polylog_penalty

DPI = 90
FIGSIZE = (7.0, 4.8)
#: the axes' box in figure fractions: room above for the two-line title, below for the tick
#: labels, the axis label and a legend of up to three rows
AXES_BOX = {"left": 0.09, "right": 0.895, "bottom": 0.28, "top": 0.875}
MAX_POINTS = 5000
COLOURS = {"labelled": "#1f77b4", "concise": "#2ca02c", "verbose": "#9467bd",
           "calibrated": "#d62728", "curve": "#ff7f0e"}


def _arrays(points: Mapping | None, key: str) -> np.ndarray | None:
    if not points or points.get(key) is None:
        return None
    return np.asarray(points[key], dtype=float).reshape(-1)  # None -> NaN


def _sets(evaluation: Mapping) -> list[tuple[str, np.ndarray, np.ndarray, np.ndarray | None]]:
    """[(label, length, raw score, calibrated score or None)] of the labelled responses and of the
    concise / verbose sides of the verbosity pairs, finite values only."""
    pts = evaluation.get("points") or {}
    out = []
    lab = pts.get("labelled")
    if lab:
        out.append(("labelled", lab, None))
    ver = pts.get("verbosity")
    if ver:
        side = np.asarray(ver.get("side") or [], dtype=object)
        for name in ("concise", "verbose"):
            out.append((name, ver, side == name))
    sets = []
    for name, p, mask in out:
        length, raw, cal = _arrays(p, "length"), _arrays(p, "score_raw"), _arrays(p, "score_calibrated")
        if length is None or raw is None or length.size != raw.size:
            continue
        if cal is not None and cal.size != raw.size:
            cal = None
        keep = np.isfinite(length) & np.isfinite(raw)
        if mask is not None and mask.size == keep.size:
            keep &= mask
        if not keep.any():
            continue
        sets.append((name, length[keep], raw[keep], None if cal is None else cal[keep]))
    return sets


def _png(fig) -> bytes:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, metadata={"Software": None})
    return buf.getvalue()


def _figure():
    from matplotlib.figure import Figure

    fig = Figure(figsize=FIGSIZE)
    # fixed margins (room for the right axis, the title and the legend below): constrained
    # layout would double the drawing time
    fig.subplots_adjust(**AXES_BOX)
    return fig, fig.add_subplot()


def _legend_below(fig, handles, labels) -> None:
    """The legend under the axes, outside the data (two columns, centred at the bottom)."""
    fig.legend(handles, labels, loc="lower center", bbox_to_anchor=(0.5, 0.005), ncol=2, fontsize=7.5,
               frameon=False, handlelength=1.8, columnspacing=1.5)


def score_bounds(evaluation: Mapping, values: np.ndarray) -> tuple[float, float]:
    """The score axis' span: the judge's scale (``evaluation["scale"]``, both ends known), else
    the observed range of ``values``; widened to any finite value outside the scale (so that
    no point is hidden)."""
    scale = evaluation.get("scale")
    finite = values[np.isfinite(values)] if values.size else values
    if scale and len(scale) == 2 and scale[0] is not None and scale[1] is not None:
        lo, hi = float(scale[0]), float(scale[1])
    elif finite.size:
        lo, hi = float(finite.min()), float(finite.max())
    else:
        lo, hi = 0.0, 1.0
    if finite.size:
        lo, hi = min(lo, float(finite.min())), max(hi, float(finite.max()))
    if hi <= lo:
        lo, hi = lo - 0.5, hi + 0.5
    return lo, hi


def _scale_text(evaluation: Mapping) -> str:
    scale = evaluation.get("scale")
    if scale and len(scale) == 2 and scale[0] is not None and scale[1] is not None:
        return f"scale {float(scale[0]):g}-{float(scale[1]):g}"
    return "scale not declared: observed range"


def _title(subject: str, what: str) -> str:
    return f"{subject}\n{what}" if subject else what


def _ols_line(x: np.ndarray, y: np.ndarray):
    """(slope, intercept) of the least-squares line of y on x, or None if x is constant."""
    ok = np.isfinite(x) & np.isfinite(y)
    x, y = x[ok], y[ok]
    if x.size < 2 or np.ptp(x) == 0:
        return None
    xm, ym = x.mean(), y.mean()
    slope = float(np.dot(x - xm, y - ym) / np.dot(x - xm, x - xm))
    return slope, float(ym - slope * xm)


def plot_score_vs_length(evaluation: Mapping, *, title: str = "", length_unit: str | None = None,
                         max_points: int = MAX_POINTS, seed: int = 0) -> bytes | None:
    """:func:`score_vs_length_figure` as PNG bytes, or None without points."""
    fig = score_vs_length_figure(evaluation, title=title, length_unit=length_unit, max_points=max_points, seed=seed)
    return None if fig is None else _png(fig)


def score_vs_length_figure(evaluation: Mapping, *, title: str = "", length_unit: str | None = None,
                           max_points: int = MAX_POINTS, seed: int = 0):
    """Scatter of raw score against ln(L) with the fitted penalty curve: a matplotlib Figure or None.

    ``title``: what the plot is about (``task family · judge``); the figure's title adds a
    second line saying what is plotted (raw scores, raw and calibrated trend lines, against
    ln(length in the unit), the judge's scale). The y axis spans the judge's scale
    (:func:`score_bounds`) plus the jitter; the legend sits below the axes.

    x: ln(max(L, 1)) (nats; L in ``length_unit``, floored at 1 unit like the penalty). y (left
    axis): raw judge score, with a small seeded vertical jitter (+-0.15) when every score is an
    integer; least-squares lines of the raw and the calibrated scores on ln L (their slopes
    are the report's "slope"). Right axis: the score shift of the fitted calibration,
    ``-gamma * sign(ln(L/L_ref)) * |ln(L/L_ref)|^p`` (judgecal.calibrate.penalty.polylog_penalty;
    without the density exemption and before clipping), with L_ref marked by a dotted line.
    More than ``max_points`` points: a random subsample of that size (numpy default_rng(seed))
    is drawn; lines use every point. Returns None when the evaluation has no points.
    """
    sets = _sets(evaluation)
    if not sets:
        return None
    rng = np.random.default_rng(seed)
    total = sum(s[1].size for s in sets)
    share = min(1.0, max_points / total) if total else 1.0
    all_raw = np.concatenate([s[2] for s in sets])
    jitter = 0.15 if np.all(all_raw == np.round(all_raw)) else 0.0
    fig, ax = _figure()
    for name, length, raw, _ in sets:
        x = np.log(np.maximum(length, LENGTH_FLOOR))
        idx = np.arange(x.size)
        if share < 1.0:
            idx = np.sort(rng.choice(x.size, max(1, int(round(share * x.size))), replace=False))
        y = raw[idx] + (rng.uniform(-jitter, jitter, idx.size) if jitter else 0.0)
        label = {"labelled": "labelled responses", "concise": "concise (verbosity pairs)",
                 "verbose": "verbose (verbosity pairs)"}[name]
        if share < 1.0:
            label += f" ({idx.size} of {x.size})"
        ax.scatter(x[idx], y, s=9, alpha=0.45, color=COLOURS[name], linewidths=0, label=label)
    xs = np.concatenate([np.log(np.maximum(s[1], LENGTH_FLOOR)) for s in sets])
    grid = np.linspace(xs.min(), xs.max() if xs.max() > xs.min() else xs.min() + 1.0, 200)
    line = _ols_line(xs, all_raw)
    if line:
        ax.plot(grid, line[1] + line[0] * grid, color="black", lw=1.5,
                label=f"raw: slope {line[0]:+.3f} per nat")
    cal = [s for s in sets if s[3] is not None]
    if cal:
        cx = np.concatenate([np.log(np.maximum(s[1], LENGTH_FLOOR)) for s in cal])
        line = _ols_line(cx, np.concatenate([s[3] for s in cal]))
        if line:
            ax.plot(grid, line[1] + line[0] * grid, color=COLOURS["calibrated"], lw=1.5, ls="--",
                    label=f"calibrated: slope {line[0]:+.3f} per nat")
    unit = length_unit or "length units"
    ax.set_xlabel(f"ln(length in {unit})")
    ax.set_ylabel("judge score (raw)")
    lo, hi = score_bounds(evaluation, all_raw)
    pad = jitter + 0.03 * (hi - lo)
    ax.set_ylim(lo - pad, hi + pad)  # the scale, not wherever the trend lines run
    params = evaluation.get("params") or {}
    gamma, p, l_ref = params.get("gamma"), params.get("p"), params.get("l_ref") or evaluation.get("l_ref")
    handles, labels = ax.get_legend_handles_labels()
    if gamma is not None and p is not None and l_ref:
        ax2 = ax.twinx()
        floor = params.get("short_floor")  # the fitted function's short-side floor (None: a fit stored before it)
        shift = -polylog_penalty(np.exp(grid), float(l_ref), float(gamma), float(p), signed=True,
                                 floor=None if floor is None else float(floor))
        (h,) = ax2.plot(grid, shift, color=COLOURS["curve"], lw=2.2,
                        label=f"score shift of the calibration (gamma {gamma:.3f}, p {p:.2f})")
        ax2.axhline(0.0, color=COLOURS["curve"], lw=0.6, alpha=0.5)
        ax.axvline(np.log(max(float(l_ref), LENGTH_FLOOR)), color="grey", lw=1, ls=":")
        ax2.set_ylabel("score shift (score units)", color=COLOURS["curve"])
        lim = max(0.5, float(np.max(np.abs(shift))) * 1.1)
        ax2.set_ylim(-lim, lim)
        handles.append(h)
        labels.append(h.get_label() + f", L_ref {float(l_ref):g}")
    _legend_below(fig, handles, labels)
    lines = "raw and calibrated trend lines" if cal else "raw trend line (no calibration)"
    ax.set_title(_title(title, f"raw judge score ({_scale_text(evaluation)}) vs ln(length in {unit}); {lines}"),
                 fontsize=9.5)
    return fig


def _bins(values: np.ndarray, scale) -> np.ndarray:
    if scale and len(scale) == 2 and scale[0] is not None and scale[1] is not None:
        lo, hi = float(scale[0]), float(scale[1])
    else:
        lo, hi = float(values.min()), float(values.max())
    lo, hi = min(lo, float(values.min())), max(hi, float(values.max()))
    if hi <= lo:
        hi = lo + 1.0
    width = (hi - lo) / 40 if hi - lo > 20 else 0.25
    return np.arange(lo - width / 2, hi + width, width)


def plot_score_distributions(evaluation: Mapping, *, title: str = "") -> bytes | None:
    """:func:`score_distributions_figure` as PNG bytes, or None without points."""
    fig = score_distributions_figure(evaluation, title=title)
    return None if fig is None else _png(fig)


def score_distributions_figure(evaluation: Mapping, *, title: str = ""):
    """Histograms of the judge scores before (raw) and after the fitted calibration: a Figure or None.

    ``title``: what the plot is about; the figure's title adds which scores are drawn and the
    scale. The x axis spans the judge's scale (:func:`score_bounds`); the legend sits below.

    Every labelled response and both sides of the verbosity pairs; bins 0.25 score units wide
    (scales wider than 20 units: 40 bins) over the judge scale. Without a calibration (no fit)
    only the raw histogram. Returns None when the evaluation has no points.
    """
    sets = _sets(evaluation)
    if not sets:
        return None
    raw = np.concatenate([s[2] for s in sets])
    cal_parts = [s[3] for s in sets if s[3] is not None]
    cal = np.concatenate(cal_parts) if cal_parts else None
    if cal is not None:
        cal = cal[np.isfinite(cal)]
    both = raw if cal is None or cal.size == 0 else np.concatenate([raw, cal])
    bins = _bins(both, evaluation.get("scale"))
    fig, ax = _figure()
    ax.hist(raw, bins=bins, color=COLOURS["labelled"], alpha=0.55,
            label=f"raw (mean {raw.mean():.2f}, sd {raw.std():.2f})")
    if cal is not None and cal.size:
        ax.hist(cal, bins=bins, histtype="step", lw=1.8, color=COLOURS["calibrated"],
                label=f"calibrated (mean {cal.mean():.2f}, sd {cal.std():.2f})")
    ax.set_xlabel("judge score")
    ax.set_ylabel("responses")
    lo, hi = score_bounds(evaluation, both)
    pad = (bins[1] - bins[0]) / 2 + 0.03 * (hi - lo) if bins.size > 1 else 0.5
    ax.set_xlim(lo - pad, hi + pad)
    handles, labels = ax.get_legend_handles_labels()
    _legend_below(fig, handles, labels)
    which = "raw (filled) and calibrated (outline)" if cal is not None and cal.size else "raw (no calibration)"
    ax.set_title(_title(title, f"judge score distribution ({_scale_text(evaluation)}): {which}"), fontsize=9.5)
    return fig
