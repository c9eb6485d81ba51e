"""Plotly figures built on the server (plotly.graph_objects) and drawn in the browser by the vendored plotly.js.

Figures stay small: at most MAX_POINTS points per trace (a day of one-minute samples becomes 5-minute buckets that
keep the throttle ratio exact: Σ throttled periods / Σ periods), times as epoch milliseconds on a date axis (14
bytes a point; plotly.js shows them in UTC), values rounded, and an empty template instead of Plotly's default one
(which alone is ~7 kB per figure).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import pairwise
from statistics import median

import plotly.graph_objects as go

from apps.telemetry.selectors import SeriesPoint

MAX_POINTS = 288  # a day of one-minute samples in 5-minute buckets
GAP_FACTOR = 3  # a step over 3 × the usual one is a gap in collection: the line breaks instead of bridging it

COLOURS = {
    "usage": "#2356c7",
    "peak": "#8aa6e6",
    "floor": "#1f7a3a",
    "ceiling": "#b3261e",
    "ratio": "#b86e00",
    "target": "#b3261e",
    "threads": "#5b6475",
    "bar": "#2356c7",
}
_FONT = {"family": "system-ui, -apple-system, Segoe UI, Roboto, sans-serif", "size": 12, "color": "#1d2330"}
_AXIS = {"gridcolor": "#e8ebf0", "zerolinecolor": "#c9ced8", "linecolor": "#c9ced8", "automargin": True}


@dataclass(frozen=True, slots=True)
class Bucket:
    """Consecutive series points merged into one; None in every value marks a gap (the line breaks there)."""

    ts: datetime
    usage_mcpu: float | None  # mean of the points' usage
    usage_peak_mcpu: float | None  # the highest point's usage (raw) or the hour's p95 (hourly)
    throttle_ratio: float | None  # Σ throttled periods / Σ periods: exact, not a mean of ratios
    threads: int | None  # the most seen


def downsample(points: Sequence[SeriesPoint], max_points: int = MAX_POINTS) -> list[Bucket]:
    """Merge consecutive points so at most `max_points` buckets remain, and mark collection gaps.

    Points must be in time order. A bucket never spans a gap: a step longer than GAP_FACTOR × the median step
    starts a new bucket and inserts a gap marker, so no line is drawn across missing data.
    """
    if max_points < 1:
        raise ValueError(f"max_points {max_points!r} must be at least 1")
    if not points:
        return []
    steps = [(b.ts - a.ts).total_seconds() for a, b in pairwise(points)]
    usual_step = median(steps) if steps else 0.0
    per_bucket = max(1, -(-len(points) // max_points))  # ceiling division
    runs: list[list[SeriesPoint]] = [[points[0]]]
    for step, point in zip(steps, points[1:], strict=True):
        if usual_step and step > GAP_FACTOR * usual_step:
            runs.append([])  # an empty run is a gap marker
            runs.append([point])
        else:
            runs[-1].append(point)
    buckets: list[Bucket] = []
    for run in runs:
        if not run:
            buckets.append(Bucket(buckets[-1].ts + timedelta(seconds=usual_step), None, None, None, None))
            continue
        for i in range(0, len(run), per_bucket):
            buckets.append(_merge(run[i : i + per_bucket]))
    return buckets


def _merge(points: Sequence[SeriesPoint]) -> Bucket:
    usages = [p.usage_mcpu for p in points if p.usage_mcpu is not None]
    peaks = [p.usage_p95_mcpu if p.usage_p95_mcpu is not None else p.usage_mcpu for p in points]
    known_peaks = [v for v in peaks if v is not None]
    periods = sum(p.periods or 0 for p in points if p.throttled_periods is not None)
    throttled = sum(p.throttled_periods or 0 for p in points if p.periods)
    threads = [p.threads for p in points if p.threads is not None]
    return Bucket(
        ts=points[0].ts,
        usage_mcpu=sum(usages) / len(usages) if usages else None,
        usage_peak_mcpu=max(known_peaks) if known_peaks else None,
        throttle_ratio=throttled / periods if periods else None,
        threads=max(threads) if threads else None,
    )


def _x(ts: datetime) -> int:
    """Epoch milliseconds: a date axis reads numbers as UTC instants, and they are shorter than date strings."""
    return round(ts.timestamp() * 1000)


def _r(value: float | None, digits: int = 1) -> float | None:
    return None if value is None else round(value, digits)


# The three panels of a container's figure: y axis, vertical share of the plot (paper coordinates) and title.
# Laid out by hand rather than with plotly.subplots.make_subplots, which took ~60–120 ms per figure here against
# ~5 ms for a plain go.Figure: the pod page's largest cost.
_PANELS = (
    ("y", (0.57, 1.0), "CPU usage (millicores)"),
    ("y2", (0.27, 0.49), "Throttle ratio (% of periods)"),
    ("y3", (0.0, 0.19), "Threads"),
)


def container_figure(
    points: Sequence[SeriesPoint],
    *,
    since: datetime,
    until: datetime,
    shares_floor_mcpu: int | None,
    quota_ceiling_mcpu: int | None,
    target_ratio: float,
    resolution: str,
) -> go.Figure:
    """Three stacked panels sharing the time axis: usage (mcpu) against the shares floor and quota ceiling,
    throttle ratio (%) against the target, and threads. `resolution` is "raw" or "hourly" (hourly adds p95)."""
    buckets = downsample(points)
    merged = len(points) > MAX_POINTS  # buckets hold several raw points: their peak differs from their mean
    xs = [_x(b.ts) for b in buckets]
    span = [_x(since), _x(until)]
    traces = [
        go.Scatter(
            x=xs,
            y=[_r(b.usage_mcpu) for b in buckets],
            name="usage" if resolution == "raw" else "usage (hourly mean)",
            mode="lines",
            line={"color": COLOURS["usage"], "width": 2},
            hovertemplate="%{y:,.0f}m",
        )
    ]
    if resolution == "hourly" or merged:
        traces.append(
            go.Scatter(
                x=xs,
                y=[_r(b.usage_peak_mcpu) for b in buckets],
                name="usage p95 per hour" if resolution == "hourly" else "usage peak",
                mode="lines",
                line={"color": COLOURS["peak"], "width": 1},
                hovertemplate="%{y:,.0f}m",
            )
        )
    for value, name, colour in (
        (shares_floor_mcpu, "shares floor", COLOURS["floor"]),
        (quota_ceiling_mcpu, "quota ceiling", COLOURS["ceiling"]),
    ):
        if value is not None:
            traces.append(_reference(span, value, f"{name} {value:,}m", colour, "%{y:,.0f}m", "y"))
    traces.append(
        go.Scatter(
            x=xs,
            y=[_r(None if b.throttle_ratio is None else b.throttle_ratio * 100) for b in buckets],
            name="throttle ratio",
            mode="lines",
            line={"color": COLOURS["ratio"], "width": 2},
            hovertemplate="%{y:.1f}%",
            yaxis="y2",
        )
    )
    traces.append(
        _reference(span, round(target_ratio * 100, 2), f"target {target_ratio:.0%}", COLOURS["target"], "%{y}%", "y2")
    )
    traces.append(
        go.Scatter(
            x=xs,
            y=[b.threads for b in buckets],
            name="threads",
            mode="lines",
            line={"color": COLOURS["threads"], "width": 1.5, "shape": "hv"},
            hovertemplate="%{y}",
            yaxis="y3",
        )
    )
    layout: dict = {
        "template": go.layout.Template(),
        "height": 470,
        "margin": {"l": 10, "r": 10, "t": 24, "b": 10},
        "font": _FONT,
        "paper_bgcolor": "#fff",
        "plot_bgcolor": "#fff",
        "hovermode": "x unified",
        "hoversubplots": "axis",  # one hover label for all three panels: they share the time axis
        "legend": {"orientation": "h", "x": 0, "y": -0.12, "yanchor": "top"},
        "xaxis": {**_AXIS, "type": "date", "range": span, "anchor": "y3"},
        "annotations": [],
    }
    for axis, domain, title in _PANELS:
        layout["yaxis" + axis[1:]] = {
            **_AXIS,
            "domain": list(domain),
            "rangemode": "tozero",
            "nticks": 4 if axis == "y3" else 6,
        }
        layout["annotations"].append(
            {
                "text": title,
                "xref": "paper",
                "yref": "paper",
                "x": 0,
                "y": domain[1],
                "xanchor": "left",
                "yanchor": "bottom",
                "showarrow": False,
                "font": {"size": 12, "color": "#5b6475"},
            }
        )
    return go.Figure(data=traces, layout=layout)


def _reference(span: list[int], value: float, name: str, colour: str, hover: str, yaxis: str) -> go.Scatter:
    """A horizontal line across the chart: two points, so it shows in the legend and the hover."""
    return go.Scatter(
        yaxis=yaxis,
        x=span,
        y=[value, value],
        name=name,
        mode="lines",
        line={"color": colour, "width": 1.5, "dash": "dash"},
        hovertemplate=hover,
    )


def shares_figure(labels: Sequence[str], request_mcpu: Sequence[int | None], fractions: Sequence[float]) -> go.Figure:
    """Horizontal bars: each pod's CPU request (mcpu) on the node, labelled with its share of the node's cpu.shares.

    Inputs are parallel and ordered largest first; a pod without a request shows as 0m with its 2 shares' sliver.
    """
    if not (len(labels) == len(request_mcpu) == len(fractions)):
        raise ValueError(
            f"labels, requests and fractions differ in length: {len(labels)}, {len(request_mcpu)}, {len(fractions)}"
        )
    fig = go.Figure(
        go.Bar(
            x=[r or 0 for r in request_mcpu],
            y=list(labels),
            orientation="h",
            marker={"color": COLOURS["bar"]},
            text=[f"{f:.1%}" for f in fractions],
            textposition="outside",
            cliponaxis=False,
            hovertemplate="%{y}<br>request %{x:,}m<br>%{text} of the node's shares<extra></extra>",
        )
    )
    fig.update_layout(
        template=go.layout.Template(),
        height=60 + 24 * max(1, len(labels)),
        margin={"l": 10, "r": 40, "t": 10, "b": 30},
        font=_FONT,
        paper_bgcolor="#fff",
        plot_bgcolor="#fff",
        xaxis={**_AXIS, "title": {"text": "CPU request (millicores)"}},
        yaxis={**_AXIS, "autorange": "reversed"},
        bargap=0.25,
    )
    return fig


_JSON_SCRIPT_ESCAPES = {ord(">"): "\\u003E", ord("<"): "\\u003C", ord("&"): "\\u0026"}


def figure_json(fig: go.Figure) -> str:
    """The figure as JSON safe to place inside <script type="application/json"> (no `<`, `>` or `&` left)."""
    return fig.to_json(validate=False, pretty=False).translate(_JSON_SCRIPT_ESCAPES)
