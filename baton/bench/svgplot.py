"""A small, dependency-free SVG line chart for benchmark reports.

Plotly's static image export needs kaleido and a Chrome binary; a hand-written
SVG needs nothing, renders in any browser and in Markdown viewers, and diffs
as text.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape

PALETTE = ("#1f77b4", "#d62728", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#17becf")


@dataclass(frozen=True)
class Series:
    label: str
    xs: Sequence[float]
    ys: Sequence[float]
    color: str
    dashed: bool = False
    markers: bool = True
    width: float = 2.0


@dataclass(frozen=True)
class Chart:
    title: str
    x_label: str
    y_label: str
    series: Sequence[Series]
    log_y: bool = False
    width: int = 820
    height: int = 460
    x_format: Callable[[float], str] = lambda v: f"{v:g}"
    y_format: Callable[[float], str] = lambda v: f"{v:g}"


_LEFT, _RIGHT, _TOP, _BOTTOM = 78, 300, 44, 56


def _nice_step(span: float, target_ticks: int = 6) -> float:
    raw = span / max(target_ticks, 1)
    magnitude: float = 10.0 ** math.floor(math.log10(raw))
    for factor in (1, 2, 2.5, 5, 10):
        if raw <= factor * magnitude:
            return factor * magnitude
    return 10 * magnitude


def _linear_ticks(low: float, high: float) -> list[float]:
    if high <= low:
        high = low + 1
    step = _nice_step(high - low)
    first = math.floor(low / step + 1e-9)
    last = math.ceil(high / step - 1e-9)
    return [round(index * step, 10) for index in range(first, last + 1)]


def _log_ticks(low: float, high: float) -> list[float]:
    ticks = []
    for exponent in range(math.floor(math.log10(low)), math.ceil(math.log10(high)) + 1):
        ticks.append(10.0**exponent)
    return ticks


def render(chart: Chart) -> str:
    """The chart as a standalone SVG document."""
    points = [(x, y) for s in chart.series for x, y in zip(s.xs, s.ys, strict=True) if math.isfinite(y)]
    if not points:
        raise ValueError("nothing to plot")
    xs = [p[0] for p in points]
    ys = [p[1] for p in points if not chart.log_y or p[1] > 0]
    x_ticks = _linear_ticks(min(0.0, min(xs)), max(xs))
    x_lo, x_hi = x_ticks[0], x_ticks[-1]
    if chart.log_y:
        y_ticks = _log_ticks(min(ys), max(ys))
        y_lo, y_hi = math.log10(y_ticks[0]), math.log10(y_ticks[-1])
    else:
        y_ticks = _linear_ticks(min(0.0, min(ys)), max(ys) * 1.05)
        y_lo, y_hi = y_ticks[0], y_ticks[-1]
    plot_w = chart.width - _LEFT - _RIGHT
    plot_h = chart.height - _TOP - _BOTTOM

    def px(x: float) -> float:
        return _LEFT + (x - x_lo) / (x_hi - x_lo) * plot_w

    def py(y: float) -> float:
        value = math.log10(y) if chart.log_y else y
        return _TOP + plot_h - (value - y_lo) / (y_hi - y_lo) * plot_h

    out: list[str] = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{chart.width}" height="{chart.height}" '
        f'viewBox="0 0 {chart.width} {chart.height}" font-family="Helvetica, Arial, sans-serif" font-size="12">',
        f'<rect width="{chart.width}" height="{chart.height}" fill="white"/>',
        f'<text x="{_LEFT}" y="24" font-size="15" font-weight="bold">{escape(chart.title)}</text>',
    ]
    for tick in y_ticks:
        y = py(tick)
        out.append(f'<line x1="{_LEFT}" y1="{y:.1f}" x2="{_LEFT + plot_w}" y2="{y:.1f}" stroke="#e5e5e5"/>')
        out.append(f'<text x="{_LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{escape(chart.y_format(tick))}</text>')
    for tick in x_ticks:
        x = px(tick)
        out.append(f'<line x1="{x:.1f}" y1="{_TOP}" x2="{x:.1f}" y2="{_TOP + plot_h}" stroke="#f0f0f0"/>')
        out.append(
            f'<text x="{x:.1f}" y="{_TOP + plot_h + 18}" text-anchor="middle">{escape(chart.x_format(tick))}</text>'
        )
    out.append(
        f'<rect x="{_LEFT}" y="{_TOP}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#444"/>'
    )
    out.append(
        f'<text x="{_LEFT + plot_w / 2:.1f}" y="{chart.height - 14}" text-anchor="middle">{escape(chart.x_label)}</text>'
    )
    cy = _TOP + plot_h / 2
    out.append(
        f'<text x="18" y="{cy:.1f}" text-anchor="middle" transform="rotate(-90 18 {cy:.1f})">'
        f"{escape(chart.y_label)}</text>"
    )
    out.append(
        f'<clipPath id="plot-area"><rect x="{_LEFT}" y="{_TOP}" width="{plot_w}" height="{plot_h}"/></clipPath>'
    )
    out.append('<g clip-path="url(#plot-area)">')
    for s in chart.series:
        pairs = [(x, y) for x, y in zip(s.xs, s.ys, strict=True) if math.isfinite(y) and (not chart.log_y or y > 0)]
        if not pairs:
            continue
        path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in pairs)
        dash = ' stroke-dasharray="6 4"' if s.dashed else ""
        out.append(
            f'<polyline points="{path}" fill="none" stroke="{s.color}" stroke-width="{s.width}"{dash}>'
            f"<title>{escape(s.label)}</title></polyline>"
        )
        if s.markers:
            out += [f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3" fill="{s.color}"/>' for x, y in pairs]
    out.append("</g>")
    legend_x = _LEFT + plot_w + 16
    for index, s in enumerate(chart.series):
        y = _TOP + 8 + index * 20
        dash = ' stroke-dasharray="6 4"' if s.dashed else ""
        out.append(
            f'<line x1="{legend_x}" y1="{y}" x2="{legend_x + 24}" y2="{y}" stroke="{s.color}" '
            f'stroke-width="{s.width}"{dash}/>'
        )
        out.append(f'<text x="{legend_x + 30}" y="{y + 4}">{escape(s.label)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"
