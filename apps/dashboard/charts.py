"""Plotly figures built on the server (plotly.graph_objects) and drawn in the browser by the vendored plotly.js.

Figures stay small: at most MAX_POINTS points per trace (a day of one-minute samples becomes 5-minute buckets that
keep the throttle ratio exact: Σ throttled periods / Σ periods), times as epoch milliseconds on a date axis (14
bytes a point; plotly.js shows them in UTC), values rounded, and an empty template instead of Plotly's default one
(which alone is ~7 kB per figure).
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from statistics import median

import plotly.graph_objects as go

from apps.telemetry.counters import throttle_ratio
from apps.telemetry.selectors import SeriesPoint

MAX_POINTS = 288  # a day of one-minute samples in 5-minute buckets
GAP_FACTOR = 3  # a step over 3 × the usual one is a gap in collection: the line breaks instead of bridging it

COLOURS = {
    "usage": "#2356c7",
    "peak": "#8aa6e6",
    "floor": "#1f7a3a",
    "ceiling": "#b3261e",
    "ratio": "#b86e00",
    "target": "#6b3fa0",
    "threads": "#5b6475",
    "pressure": "#00838f",
    "change": "#374151",
    "bar": "#2356c7",
}
# Reference lines differ in dash as well as colour, so the legend tells them apart without colour vision.
DASHES = {"floor": "dashdot", "ceiling": "dash", "target": "dot"}
# The ceiling is wide and pale under the 2 px usage line, so usage pinned at its limit shows as a blue line
# edged with red dashes instead of one hiding the other.
REFERENCE_WIDTHS_PX = {"floor": 1.5, "ceiling": 4, "target": 2}
REFERENCE_OPACITY = {"floor": 1.0, "ceiling": 0.5, "target": 1.0}
LONE_POINT_PAD = 0.03  # of the axis's width, left of a lone point
MIN_SPAN_S = 600  # a lone point gets 10 minutes of axis around it rather than a zero-width range
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
    waiting: float | None = None  # CPU pressure (PSI some), mean share of the time


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
    waiting = [p.pressure_waiting_per_second for p in points if p.pressure_waiting_per_second is not None]
    return Bucket(
        ts=points[0].ts,
        usage_mcpu=sum(usages) / len(usages) if usages else None,
        usage_peak_mcpu=max(known_peaks) if known_peaks else None,
        throttle_ratio=throttle_ratio(throttled, periods),
        threads=max(threads) if threads else None,
        waiting=sum(waiting) / len(waiting) if waiting else None,
    )


def _x(ts: datetime) -> int:
    """Epoch milliseconds: a date axis reads numbers as UTC instants, and they are shorter than date strings."""
    return round(ts.timestamp() * 1000)


def _r(value: float | None, digits: int = 1) -> float | None:
    return None if value is None else round(value, digits)


# A container's panels: y axis, vertical share of the plot (paper coordinates) and title, with and without the
# throttle-ratio panel (a container without a CPU limit has no CFS quota, so no periods to be throttled in).
# Laid out by hand rather than with plotly.subplots.make_subplots, which costs about ten plain figures: it was the
# pod page's largest cost.
_USAGE_TITLE = "CPU usage (millicores)"
_RATIO_TITLE = "Throttle ratio (% of periods)"
_THREADS_TITLE = "Threads"
_PANELS = (
    ("y", (0.57, 1.0), _USAGE_TITLE),
    ("y2", (0.27, 0.49), _RATIO_TITLE),
    ("y3", (0.0, 0.19), _THREADS_TITLE),
)
_PANELS_WITHOUT_RATIO = (
    ("y", (0.36, 1.0), _USAGE_TITLE),
    ("y3", (0.0, 0.22), _THREADS_TITLE),
)
_HEIGHT_PX = {True: 470, False: 380}  # keyed by whether the ratio panel is drawn


def has_quota(points: Sequence[SeriesPoint], quota_ceiling_mcpu: int | None) -> bool:
    """Whether a throttle ratio means anything: the container has a quota now, or CFS periods ran in the span."""
    return quota_ceiling_mcpu is not None or any(p.periods for p in points)


def x_range(points: Sequence[SeriesPoint], since: datetime, until: datetime) -> tuple[datetime, datetime]:
    """The time axis: from the first point (not the window start, which leaves a young series squeezed at the
    right) to the window end; at least MIN_SPAN_S wide, centred on the data when it is narrower, and a lone
    point kept clear of the y axis. Without points, the window."""
    if not points:
        return since, until
    start, end = points[0].ts, max(until, points[-1].ts)
    short_s = MIN_SPAN_S - (end - start).total_seconds()
    if short_s > 0:
        start, end = start - timedelta(seconds=short_s / 2), end + timedelta(seconds=short_s / 2)
    if len(points) == 1:  # its dot would sit on the y axis, half hidden by the tick labels
        start -= (end - start) * LONE_POINT_PAD
    return start, end


def lone_point_note(points: Sequence[SeriesPoint], resolution: str) -> str | None:
    """Plain words for a chart with a single point, which a line chart would leave blank; None otherwise."""
    if len(points) != 1:
        return None
    ts = points[0].ts.astimezone(UTC)
    if resolution == "hourly":
        return (
            f"One hourly point so far (the hour from {ts:%H:%M} UTC), shown as a dot: this window charts hourly "
            "averages, so lines start once a second hour has samples."
        )
    return f"One sample interval so far (ending {ts:%H:%M} UTC), shown as a dot: lines start with the next collection."


def container_figure(
    points: Sequence[SeriesPoint],
    *,
    since: datetime,
    until: datetime,
    shares_floor_mcpu: int | None,
    quota_ceiling_mcpu: int | None,
    target_ratio: float,
    resolution: str,
    pressure: bool = True,
    changes: Sequence[ChangeMark] = (),
) -> go.Figure:
    """Stacked panels sharing the time axis: usage (mcpu) against the shares floor and quota ceiling, throttle
    ratio (%) against the target when the container has a quota, and threads. `resolution` is "raw" or "hourly"
    (hourly adds p95), with CPU pressure (% of the time some task waited) beside the ratio when the points carry
    it and `pressure` is true (False: the pressure reads are not measurements, see advisor.pressure). The axis starts
    at the first point; `since` only bounds it when there are no points."""
    buckets = downsample(points)
    merged = len(points) > MAX_POINTS  # buckets hold several raw points: their peak differs from their mean
    xs = [_x(b.ts) for b in buckets]
    start, end = x_range(points, since, until)
    if changes and min(mark.ts for mark in changes) <= start:
        # A new pod's first sample comes just after the change that made it: its mark stays in view, off the y axis.
        first = min(mark.ts for mark in changes)
        start = first - (end - first) * MARK_PAD
    span = [_x(start), _x(end)]
    with_ratio = has_quota(points, quota_ceiling_mcpu)
    # A single point draws no line: show it as a dot.
    lone = len(points) == 1
    mode = "markers" if lone else "lines"
    traces: list[go.Scatter] = []
    # Reference lines first: later traces are drawn on top, so usage at the ceiling stays visible over it.
    # legendrank keeps the legend in reading order (data before its references) whatever the drawing order.
    for rank, (value, name, key) in enumerate(
        ((shares_floor_mcpu, "shares floor", "floor"), (quota_ceiling_mcpu, "quota ceiling", "ceiling")), start=3
    ):
        if value is not None:
            traces.append(_reference(span, value, f"{name} {value:,}m", key, "%{y:,.0f}m", "y", rank))
    if resolution == "hourly" or merged:
        traces.append(
            go.Scatter(
                x=xs,
                y=[_r(b.usage_peak_mcpu) for b in buckets],
                name="usage p95 per hour" if resolution == "hourly" else "usage peak",
                mode=mode,
                line={"color": COLOURS["peak"], "width": 1},
                hovertemplate="%{y:,.0f}m",
                legendrank=2,
                **_dot(lone, "peak"),
            )
        )
    traces.append(
        go.Scatter(
            x=xs,
            y=[_r(b.usage_mcpu) for b in buckets],
            name="usage" if resolution == "raw" else "usage (hourly mean)",
            mode=mode,
            line={"color": COLOURS["usage"], "width": 2},
            hovertemplate="%{y:,.0f}m",
            legendrank=1,
            **_dot(lone, "usage"),
        )
    )
    if with_ratio:
        traces.append(
            _reference(span, round(target_ratio * 100, 2), f"target {target_ratio:.0%}", "target", "%{y}%", "y2", 6)
        )
        traces.append(
            go.Scatter(
                x=xs,
                y=[_r(None if b.throttle_ratio is None else b.throttle_ratio * 100) for b in buckets],
                name="throttle ratio",
                mode=mode,
                line={"color": COLOURS["ratio"], "width": 2},
                hovertemplate="%{y:.1f}%",
                yaxis="y2",
                legendrank=5,
                **_dot(lone, "ratio"),
            )
        )
    if with_ratio and pressure and any(b.waiting is not None for b in buckets):
        traces.append(
            go.Scatter(
                x=xs,
                y=[_r(None if b.waiting is None else b.waiting * 100) for b in buckets],
                name="CPU pressure (% of time waiting)",
                mode=mode,
                line={"color": COLOURS["pressure"], "width": 1.5},
                hovertemplate="%{y:.1f}% of the time",
                yaxis="y2",
                legendrank=6,
                **_dot(lone, "pressure"),
            )
        )
    traces.append(
        go.Scatter(
            x=xs,
            y=[b.threads for b in buckets],
            name="threads",
            mode=mode,
            line={"color": COLOURS["threads"], "width": 1.5, "shape": "hv"},
            hovertemplate="%{y}",
            yaxis="y3",
            legendrank=7,
            **_dot(lone, "threads"),
        )
    )
    layout = _panel_layout(span, with_ratio)
    for mark in changes:
        x = _x(mark.ts)
        layout.setdefault("shapes", []).append(
            {"type": "line", "xref": "x", "yref": "paper", "x0": x, "x1": x, "y0": 0, "y1": 1,
             "line": {"color": COLOURS["change"], "width": 1.5, "dash": "dot"}}
        )  # fmt: skip
        # Above the panels, where the first panel's title sits at the left: a mark in the left part of the axis
        # writes its label just inside the top panel instead, on a white ground.
        inside = (mark.ts - start) < (end - start) * TITLE_SHARE
        layout["annotations"].append(
            {"text": mark.label, "hovertext": mark.hover, "xref": "x", "yref": "paper", "x": x, "y": 1,
             "xanchor": "left", "yanchor": "top" if inside else "bottom", "showarrow": False,
             "bgcolor": "rgba(255,255,255,0.85)" if inside else None,
             "font": {"size": 11, "color": COLOURS["change"]}, "name": "change"}
        )  # fmt: skip
    return go.Figure(data=traces, layout=layout)


MARK_PAD = 0.03  # of the axis before a change mark that comes before the first point
TITLE_SHARE = 0.4  # of the axis, from the left, that a panel's title may cover on a phone


@dataclass(frozen=True, slots=True)
class ChangeMark:
    """A change drawn on the pod's chart: a dotted line at `ts`, `label` above it, `hover` its before/after figures."""

    ts: datetime
    label: str
    hover: str


def _panel_layout(span: list[int], with_ratio: bool) -> dict:
    """The stacked panels' layout: one date axis over `span`, a y axis and a title per panel."""
    panels = _PANELS if with_ratio else _PANELS_WITHOUT_RATIO
    layout: dict = {
        "template": go.layout.Template(),
        "height": _HEIGHT_PX[with_ratio],
        "margin": {"l": 10, "r": 10, "t": 24, "b": 10},
        "font": _FONT,
        "paper_bgcolor": "#fff",
        "plot_bgcolor": "#fff",
        "hovermode": "x unified",
        "hoversubplots": "axis",  # one hover label for all panels: they share the time axis
        "legend": {"orientation": "h", "x": 0, "y": -0.12 if with_ratio else -0.16, "yanchor": "top"},
        "xaxis": {**_AXIS, "type": "date", "range": span, "anchor": "y3"},
        "annotations": [],
    }
    for axis, domain, title in panels:
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
    return layout


def _dot(lone: bool, key: str) -> dict:
    """Marker settings for a lone point, big enough to see."""
    return {"marker": {"color": COLOURS[key], "size": 8}} if lone else {}


def _reference(
    span: list[int] | list[float], value: float, name: str, key: str, hover: str, yaxis: str, rank: int
) -> go.Scatter:
    """A horizontal line across the chart: two points, so it shows in the legend and the hover."""
    return go.Scatter(
        yaxis=yaxis,
        x=span,
        y=[value, value],
        name=name,
        mode="lines",
        line={"color": COLOURS[key], "width": REFERENCE_WIDTHS_PX[key], "dash": DASHES[key]},
        opacity=REFERENCE_OPACITY[key],
        hovertemplate=hover,
        legendrank=rank,
    )


def shares_figure(labels: Sequence[str], request_mcpu: Sequence[int | None], fractions: Sequence[float]) -> go.Figure:
    """Horizontal bars: each pod's CPU request (mcpu) on the node, labelled with its share of the node's cpu.shares.

    Inputs are parallel and ordered largest first; a pod without a request shows as 0m with its 2 shares' sliver.
    Labels are escaped: plotly.js renders tags in axis and hover text (`<a href>` as a live link, `<b>`, `<br>`)
    and decodes entities, so a pod name shows as written, as text.
    """
    if not (len(labels) == len(request_mcpu) == len(fractions)):
        raise ValueError(
            f"labels, requests and fractions differ in length: {len(labels)}, {len(request_mcpu)}, {len(fractions)}"
        )
    fig = go.Figure(
        go.Bar(
            x=[r or 0 for r in request_mcpu],
            y=[html.escape(label, quote=False) for label in labels],
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


def limit_curve_figure(
    curve: Sequence[Sequence[float]],
    current_limit_mcpu: int,
    current_ratio: float | None,
    suggested_limit_mcpu: int | None,
    target_ratio: float,
) -> go.Figure:
    """The throttle ratio each limit should leave at most (a step line: the bound holds from a point to the next),
    with the current limit at its measured ratio, the plan's limit at its expected one, and the target."""
    xs = [int(point[0]) for point in curve]
    ys = [float(point[1]) for point in curve]
    right = max(xs[-1], current_limit_mcpu + 1) if xs else current_limit_mcpu + 1
    pad = (right - current_limit_mcpu) * LONE_POINT_PAD  # the marks are not cut in half at the axis' ends
    span = [current_limit_mcpu - pad, right + pad]
    top = max([*ys, current_ratio or 0.0, target_ratio])
    traces = [
        go.Scatter(
            x=[current_limit_mcpu, *xs],
            y=[current_ratio, *ys] if current_ratio is not None else [None, *ys],
            name="expected throttle ratio, at most",
            mode="lines",
            line={"color": COLOURS["ratio"], "width": 2, "shape": "hv"},
            hovertemplate="limit %{x:,}m: at most %{y:.0%} of periods<extra></extra>",
            legendrank=1,
        ),
        _reference(
            span, target_ratio, f"target {target_ratio:.0%}", "target", "target %{y:.0%}<extra></extra>", "y", 4
        ),
    ]
    if current_ratio is not None:
        traces.append(_mark(current_limit_mcpu, current_ratio, f"now: {current_limit_mcpu:,}m", "ceiling", 2))
    if suggested_limit_mcpu in xs:
        expected = ys[xs.index(suggested_limit_mcpu)]
        traces.append(_mark(suggested_limit_mcpu, expected, f"suggested: {suggested_limit_mcpu:,}m", "floor", 3))
    return go.Figure(
        data=traces,
        layout={
            "template": go.layout.Template(),
            "height": 300,
            "margin": {"l": 10, "r": 10, "t": 10, "b": 10},
            "font": _FONT,
            "paper_bgcolor": "#fff",
            "plot_bgcolor": "#fff",
            "hovermode": "closest",
            "legend": {"orientation": "h", "x": 0, "y": -0.25, "yanchor": "top"},
            "xaxis": {**_AXIS, "title": {"text": "CPU limit (millicores)"}, "range": span, "tickformat": ",d"},
            "yaxis": {**_AXIS, "title": {"text": "throttled periods"}, "tickformat": ".0%", "range": [0, top * 1.2]},
        },
    )


def _mark(x: int, y: float, name: str, key: str, rank: int) -> go.Scatter:
    """One labelled point on the limit curve."""
    return go.Scatter(
        x=[x],
        y=[y],
        name=name,
        mode="markers+text",
        text=[name],
        textposition="top right",
        marker={"color": COLOURS[key], "size": 10, "symbol": "diamond" if key == "floor" else "circle"},
        hovertemplate=f"{name}<br>%{{y:.0%}} of periods<extra></extra>",
        legendrank=rank,
        showlegend=False,
    )


_JSON_SCRIPT_ESCAPES = {ord(">"): "\\u003E", ord("<"): "\\u003C", ord("&"): "\\u0026"}


def figure_json(fig: go.Figure) -> str:
    """The figure as JSON safe to place inside <script type="application/json"> (no `<`, `>` or `&` left)."""
    return fig.to_json(validate=False, pretty=False).translate(_JSON_SCRIPT_ESCAPES)
