"""Inline SVG charts for the web view (``judgecal serve``): a dot-and-interval chart of figures
with their confidence intervals, one row per model. Pure formatting of figures computed
elsewhere: every text is XML-escaped here (model names are user input), colours come from CSS
classes (the page's stylesheet), no script, no inline style."""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape as _escape

from judgecal.report.visible import visible_html


def escape(text) -> str:
    """XML-escaped, with control and bidi characters shown as ``<U+XXXX>`` (:func:`visible_html`)."""
    return _escape(visible_html(text))


ROW = 22  # pixels per row
LABEL_W = 230
RIGHT_PAD = 24
TOP = 34
BOTTOM = 40
MAX_LABEL = 30  # characters of a label shown, as shown (the whole label is in the row's <title>)


def _nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    span = hi - lo
    if span <= 0:
        return [lo]
    raw = span / max(n, 1)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    start = math.ceil(lo / step) * step
    out, x = [], start
    while x <= hi + step * 1e-9:
        out.append(round(x, 10))
        x += step
    return out


def _fmt(v: float) -> str:
    return f"{v:.3g}" if abs(v) < 1000 else f"{v:.0f}"


def interval_chart(rows: Sequence[dict], series: Sequence[tuple[str, str, str]], *, title: str, axis: str,
                   width: int = 760) -> str | None:
    """An SVG dot-and-interval chart (markup for an HTML page), or None without any figure.

    ``rows``: [{"label": str, "values": {key: (value or None, [lo, hi] or None)}}] in the order
    shown; ``series``: [(key, legend text, CSS class)]: each row draws one dot per series (its
    value) on a line from lo to hi, the series a few pixels apart. ``axis``: the x axis' label.
    The legend sits above the plot, outside the data; the x domain spans every value and
    interval end."""
    ends = [x for r in rows for key, _, _ in series for x in _ends(r["values"].get(key))]
    if not ends:
        return None
    lo, hi = min(ends), max(ends)
    pad = (hi - lo) * 0.05 or max(abs(lo) * 0.05, 0.5)
    lo, hi = lo - pad, hi + pad
    plot_w = width - LABEL_W - RIGHT_PAD
    height = TOP + ROW * len(rows) + BOTTOM

    def x(v: float) -> float:
        return LABEL_W + (v - lo) / (hi - lo) * plot_w

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" viewBox="0 0 {width} {height}" '
           f'width="{width}" height="{height}" role="img" aria-label="{escape(title)}">',
           f"<title>{escape(title)}</title>"]
    lx = LABEL_W
    for key, text, cls in series:  # legend above the data
        out.append(f'<circle class="dot {cls}" cx="{lx + 6}" cy="14" r="5"/>'
                   f'<text class="legend" x="{lx + 16}" y="18">{escape(text)}</text>')
        lx += 22 + 7 * len(text)
    ticks = _nice_ticks(lo, hi)
    bottom = TOP + ROW * len(rows)
    for t in ticks:
        out.append(f'<line class="grid" x1="{x(t):.1f}" y1="{TOP - 4}" x2="{x(t):.1f}" y2="{bottom}"/>'
                   f'<text class="tick" x="{x(t):.1f}" y="{bottom + 14}" text-anchor="middle">{escape(_fmt(t))}</text>')
    out.append(f'<text class="axis" x="{LABEL_W + plot_w / 2:.1f}" y="{bottom + 32}" text-anchor="middle">'
               f"{escape(axis)}</text>")
    k = len(series)
    for i, r in enumerate(rows):
        y0 = TOP + ROW * i + ROW / 2
        label = str(r["label"])
        seen = visible_html(label)  # cut as shown: '<U+202E>' counts 8 characters
        cut = len(seen) > MAX_LABEL
        shown = seen[: MAX_LABEL - 1] + "…" if cut else seen
        # a cut label is drawn exactly as wide as its column: never past the chart's left edge
        fit = f' textLength="{LABEL_W - 12}" lengthAdjust="spacingAndGlyphs"' if cut else ""
        out.append(f'<g class="row"><title>{escape(label)}</title>'
                   f'<text class="label" x="{LABEL_W - 8}" y="{y0 + 4:.1f}" text-anchor="end"{fit}>{_escape(shown)}</text>')
        for j, (key, _, cls) in enumerate(series):
            value, ci = r["values"].get(key) or (None, None)
            y = y0 + (j - (k - 1) / 2) * 6
            if ci is not None and None not in ci and all(math.isfinite(c) for c in ci):
                out.append(f'<line class="ci {cls}" x1="{x(ci[0]):.1f}" y1="{y:.1f}" x2="{x(ci[1]):.1f}" y2="{y:.1f}"/>')
            if value is not None and math.isfinite(value):
                out.append(f'<circle class="dot {cls}" cx="{x(value):.1f}" cy="{y:.1f}" r="4"/>')
        out.append("</g>")
    out.append("</svg>")
    return "".join(out)


def _ends(v) -> list[float]:
    if not v:
        return []
    value, ci = v
    out = [value] if value is not None else []
    if ci is not None:
        out += [c for c in ci if c is not None]
    return [float(c) for c in out if math.isfinite(float(c))]
