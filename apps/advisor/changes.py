"""Each change the inventory saw, with its effect: the samples before and after it (docs/domain.md#change-effect).

The before-window ends at the collection before the change was seen (the change happened after it), the after-window
starts when it was seen, so no sample interval spans the change; both are EFFECT_WINDOW long, shorter when the next
change of the container comes sooner. A rollout's before-window is the workload's earlier pod's container.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import QuerySet
from django.utils import timezone

from apps.clusters.models import Cluster, ContainerChange
from apps.telemetry.selectors import SAMPLE_FIELDS, aware, sample_rows

from .change_effect import Effect, judge_effect
from .facts import format_ratio, round_figure
from .models import ChangeAdvice
from .policy import policy_from_settings
from .windows import SampleRow, WindowSummary, summarize_window

EFFECT_WINDOW = timedelta(hours=1)
_PERIODS = SAMPLE_FIELDS.index("periods_delta")
_THROTTLED = SAMPLE_FIELDS.index("throttled_periods_delta")

# Change row fields, in the contract's order (docs/contract.md): JSON keys and CSV columns.
CHANGE_FIELDS = (
    "cluster",
    "namespace",
    "workload_kind",
    "workload_name",
    "pod",
    "container",
    "kind",
    "before",
    "after",
    "seen_at",
    "rollout_from_pod",
    "verdict",
    "window_seconds",
    "before_throttle_ratio",
    "after_throttle_ratio",
    "before_throttled_seconds_per_second",
    "after_throttled_seconds_per_second",
    "before_usage_p95_mcpu",
    "after_usage_p95_mcpu",
    "before_pressure_waiting_per_second",
    "after_pressure_waiting_per_second",
    "before_periods",
    "after_periods",
    "p_value",
    "note",
    "followed_advice",
    "expected_throttle_ratio_max",
    "advice_worked",
)


def change_rows_streamed(changes: QuerySet[ContainerChange], chunk: int = 200) -> Iterator[dict[str, Any]]:
    """change_rows over a whole queryset, `chunk` changes at a time (the CSV: every change of the range)."""
    now = timezone.now()
    batch: list[ContainerChange] = []
    for change in changes.iterator(chunk_size=chunk):
        batch.append(change)
        if len(batch) >= chunk:
            yield from change_rows(batch, now)
            batch = []
    if batch:
        yield from change_rows(batch, now)


def changes_of(cluster: Cluster, namespace: str, since: datetime) -> QuerySet[ContainerChange]:
    """The namespace's changes seen since `since`, newest first."""
    return (
        ContainerChange.objects.filter(
            container__pod__cluster=cluster, container__pod__namespace=namespace, seen_at__gte=since
        )
        .select_related("container__pod__cluster", "previous__pod", "advice")
        .order_by("-seen_at", "container_id", "kind")
    )


def _window(container_id: int, period_us: int | None, start: datetime, end: datetime) -> tuple[WindowSummary, list]:
    """The window's summary (summarize_window: one formula for every figure) and its per-sample throttle ratios."""
    rows = sample_rows([container_id], start, end)
    interval = float(settings.CPUTUNE_COLLECT_INTERVAL)
    summary = summarize_window(
        [SampleRow(aware(ts), *rest) for _, ts, *rest in rows],
        start,
        end,
        interval,
        period_us=period_us,
    )
    ratios = [row[_THROTTLED] / row[_PERIODS] for row in rows if row[_PERIODS] and row[_THROTTLED] is not None]
    return summary, ratios


def effect_of(change: ContainerChange, now: datetime, next_change_at: datetime | None = None) -> Effect:
    """The change's two windows and verdict at `now`; `next_change_at`: the container's next change, if any."""
    gap = timedelta(seconds=settings.CPUTUNE_COLLECT_INTERVAL)
    length = EFFECT_WINDOW
    if next_change_at is not None:
        length = min(length, max(next_change_at - gap - change.seen_at, timedelta(0)))
    before_end = change.seen_at - gap
    after_start = change.seen_at
    after_end = min(now, after_start + length)
    before_id = change.previous_id or change.container_id
    period_us = change.container.period_us
    before, before_ratios = _window(before_id, period_us, before_end - length, before_end)
    after, after_ratios = _window(change.container_id, period_us, after_start, after_end)
    return judge_effect(
        before,
        after,
        before_ratios,
        after_ratios,
        window_seconds=length.total_seconds(),
        after_elapsed_seconds=(after_end - after_start).total_seconds(),
        min_periods=policy_from_settings().min_periods,
    )


def next_changes(changes: Iterable[ContainerChange]) -> dict[int, datetime | None]:
    """change id → the same container's next change (any kind) after it, for the changes given."""
    changes = list(changes)
    later = (
        ContainerChange.objects.filter(container_id__in={c.container_id for c in changes})
        .order_by("container_id", "seen_at")
        .values_list("container_id", "seen_at")
    )
    by_container: dict[int, list[datetime]] = {}
    for container_id, seen_at in later:
        by_container.setdefault(container_id, []).append(seen_at)
    return {c.pk: next((t for t in by_container.get(c.container_id, []) if t > c.seen_at), None) for c in changes}


VERDICT_WORDS = {
    "improved": "improved",
    "worse": "worse",
    "no_clear_change": "no clear change",
    "too_early": "too early to tell",
    "no_data": "no figures before it",
}


def change_value(kind: str, value: str | None, show: Callable[[str], str] = str) -> str:
    """A change's before or after value for a reader: millicores with their unit, "none", or the name as `show`
    renders it."""
    if value is None:
        return "none"
    return f"{value}m" if kind in ("limit", "request") else show(value)  # an image or node name: from outside


def change_words(row: dict[str, Any], show: Callable[[str], str] = str) -> str:
    """A change row in words, the chat line and the chart's label alike: "limit 80m → 200m on 12-01: throttled
    82% → 3% of periods, p95 usage 190m (improved)". `show` renders an image or node name for its reader."""
    kind = row["kind"]
    text = f"{kind} {change_value(kind, row['before'], show)} → {change_value(kind, row['after'], show)} on "
    text += f"{row['seen_at'].astimezone(UTC):%m-%d}"
    before, after = row["before_throttle_ratio"], row["after_throttle_ratio"]
    if before is not None and after is not None:
        text += f": throttled {format_ratio(before)} → {format_ratio(after)} of periods"
    if row["after_usage_p95_mcpu"] is not None:
        text += f", p95 usage {row['after_usage_p95_mcpu']:.0f}m"
    return f"{text} ({VERDICT_WORDS[row['verdict']]})"


def changes_on(container_ids: Iterable[int], since: datetime, until: datetime) -> QuerySet[ContainerChange]:
    """The changes of these containers seen in (since, until], oldest first (the pod chart's marks)."""
    return (
        ContainerChange.objects.filter(container_id__in=list(container_ids), seen_at__gt=since, seen_at__lte=until)
        .select_related("container__pod__cluster", "previous__pod", "advice")
        .order_by("seen_at", "container_id", "kind")
    )


def advice_worked(verdict: str, after_ratio: float | None, expected_max: float | None) -> bool | None:
    """Whether followed advice did what it said: the ratio fell (the verdict) and, where the advice made a claim,
    ended at or under it. None until the verdict is in."""
    if verdict in ("too_early", "no_data"):
        return None
    if verdict != "improved":
        return False
    return expected_max is None or (after_ratio is not None and after_ratio <= expected_max)


def _advice_fields(change: ContainerChange, effect: Effect) -> dict[str, Any]:
    try:
        advice = change.advice
    except ChangeAdvice.DoesNotExist:
        advice = None  # not checked yet: the first refresh after the change checks it
    if advice is None or not advice.kind:
        return {"followed_advice": None, "expected_throttle_ratio_max": None, "advice_worked": None}
    return {
        "followed_advice": advice.kind,
        "expected_throttle_ratio_max": advice.expected_throttle_ratio_max,
        "advice_worked": advice_worked(effect.verdict, effect.after.throttle_ratio, advice.expected_throttle_ratio_max),
    }


def change_rows(changes: Iterable[ContainerChange], now: datetime | None = None) -> list[dict[str, Any]]:
    """One row per change with its effect, CHANGE_FIELDS in order; unknown numbers are None, never 0."""
    now = now or timezone.now()
    changes = list(changes)
    following = next_changes(changes)
    rows = []
    for change in changes:
        pod = change.container.pod
        effect = effect_of(change, now, following.get(change.pk))
        before, after = effect.before, effect.after
        rows.append(
            {
                "cluster": pod.cluster.name,
                "namespace": pod.namespace,
                "workload_kind": pod.workload_kind or None,
                "workload_name": pod.workload_name or None,
                "pod": pod.name,
                "container": change.container.name,
                "kind": change.kind,
                "before": change.before or None,
                "after": change.after or None,
                "seen_at": change.seen_at,
                "rollout_from_pod": change.previous.pod.name if change.previous else None,
                "verdict": effect.verdict,
                "window_seconds": effect.window_seconds,
                "before_throttle_ratio": round_figure(before.throttle_ratio, 4),
                "after_throttle_ratio": round_figure(after.throttle_ratio, 4),
                "before_throttled_seconds_per_second": round_figure(before.throttled_seconds_per_second, 4),
                "after_throttled_seconds_per_second": round_figure(after.throttled_seconds_per_second, 4),
                "before_usage_p95_mcpu": round_figure(before.usage_p95_mcpu, 1),
                "after_usage_p95_mcpu": round_figure(after.usage_p95_mcpu, 1),
                "before_pressure_waiting_per_second": round_figure(before.pressure_waiting_per_second, 4),
                "after_pressure_waiting_per_second": round_figure(after.pressure_waiting_per_second, 4),
                "before_periods": before.periods,
                "after_periods": after.periods,
                "p_value": round_figure(effect.comparison.p_value, 6) if effect.comparison else None,
                "note": effect.note,
                **_advice_fields(change, effect),
            }
        )
    return rows
