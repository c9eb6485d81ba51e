"""Each change the inventory saw (or the refresh found in a thread count), with its effect: the samples before and
after it (docs/domain.md#change-effect). A change stands for its group (docs/domain.md#change-groups): a resize of
limit and request, a rollout over a workload's pods.

The before-window holds the samples whose interval ended before the change could have happened (`since`: the
inventory before the one that saw it), the after-window those whose interval started once the group's last change
was seen, so no sample interval spans the change; both are CPUTUNE_CHANGE_WINDOW long, shorter when the next change of one of its containers comes
sooner. A rollout's before-window is the earlier pods' containers, its after-window the new pods'; the figures over
several containers are summarize_window's over their samples together (per container: ratios of sums, usage p95 of
the per-sample rates).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import F, QuerySet
from django.utils import timezone

from apps.clusters.change_groups import KIND_ORDER
from apps.clusters.models import Cluster, ContainerChange
from apps.telemetry.counters import throttle_ratio
from apps.telemetry.selectors import aware, latest_sample_rows, sample_rows

from .change_effect import Effect, judge_effect
from .facts import format_ratio, round_figure
from .models import ChangeAdvice
from .policy import policy_from_settings
from .windows import SampleRow, WindowSummary, summarize_window

MAX_GAP_INTERVALS = 3  # as the report's windows: a longer interval (an outage) adds nothing

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
    "change_id",
    "pods",
    "also_changed",
    "seen_until",
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
    """The namespace's changes seen since `since`, newest first: each group's, once."""
    return (
        ContainerChange.objects.filter(
            container__pod__cluster=cluster, container__pod__namespace=namespace, seen_at__gte=since, group_id=F("id")
        )
        .select_related("container__pod__cluster", "previous__pod", "advice")
        .order_by("-seen_at", "container_id", "kind")
    )


@dataclass(frozen=True, slots=True)
class Group:
    """A change and the others of its group (docs/domain.md#change-groups), `lead` among them."""

    lead: ContainerChange
    changes: tuple[ContainerChange, ...]

    @property
    def since(self) -> datetime:
        """The changes had not happened yet: the earliest of their `since` (the inventory before the one that saw
        it; one collection interval before it where not known)."""
        gap = timedelta(seconds=settings.CPUTUNE_COLLECT_INTERVAL)
        return min(c.since or c.seen_at - gap for c in self.changes)

    @property
    def until(self) -> datetime:
        """When its last change was seen: a rollout's last pod so far."""
        return max(c.seen_at for c in self.changes)

    @property
    def containers(self) -> set[int]:
        return {c.container_id for c in self.changes}

    @property
    def before_containers(self) -> set[int]:
        """What ran before: a rollout's earlier pods' containers, else the containers themselves."""
        return {c.previous_id or c.container_id for c in self.changes}

    @property
    def also_changed(self) -> list[ContainerChange]:
        """The lead container's other changes in the group (a resize's request beside its limit, a restart's new
        thread count), in kind order."""
        lead = self.lead
        same = [c for c in self.changes if c.container_id == lead.container_id and c.pk != lead.pk]
        return sorted(same, key=lambda c: (KIND_ORDER.index(ContainerChange.Kind(c.kind)), c.seen_at))


def groups_of(leads: Iterable[ContainerChange]) -> list[Group]:
    """Each lead with its group's changes (one query for all)."""
    leads = list(leads)
    members: dict[int, list[ContainerChange]] = defaultdict(list)
    for change in ContainerChange.objects.filter(group_id__in=[lead.pk for lead in leads]).only(
        "id", "group_id", "container_id", "previous_id", "seen_at", "since", "kind", "before", "after"
    ):
        members[change.group_id].append(change)  # type: ignore[index]
    return [Group(lead, tuple(members.get(lead.pk) or [lead])) for lead in leads]


def _window(
    container_ids: set[int], period_us: int | None, start: datetime, end: datetime
) -> tuple[WindowSummary, list]:
    """The samples of these containers whose interval lies wholly in [start, end], summarized (summarize_window: one
    formula for every figure), and their per-sample throttle ratios."""
    interval = float(settings.CPUTUNE_COLLECT_INTERVAL)
    rows = [
        row
        for _, ts, *rest in sample_rows(sorted(container_ids), start, end)
        if rest[0] is not None  # a first sample has no interval, hence no deltas
        and (row := SampleRow(aware(ts), *rest)).ts - timedelta(seconds=rest[0]) >= start
    ]
    rows.sort(key=lambda row: row.ts)
    summary = summarize_window(rows, start, end, interval, MAX_GAP_INTERVALS, period_us=period_us)
    ratios = [
        ratio for row in rows if (ratio := throttle_ratio(row.throttled_periods_delta, row.periods_delta)) is not None
    ]
    return summary, ratios


def _lifetime_before(container_ids: set[int], period_us: int | None, since: datetime) -> WindowSummary | None:
    """Without a sample interval before the change (a container read once, as by one offline import): its counters
    since it started, from its latest reading by then — as the report shows a container seen once."""
    rows = sorted((SampleRow(aware(ts), *rest) for _, ts, *rest in latest_sample_rows(sorted(container_ids), since)),
                  key=lambda row: row.ts)  # fmt: skip
    if not rows:
        return None
    summary = summarize_window(rows, rows[0].ts - timedelta(seconds=1), since,
                               float(settings.CPUTUNE_COLLECT_INTERVAL), period_us=period_us)  # fmt: skip
    return summary if summary.lifetime else None


Bounds = tuple[datetime | None, datetime | None]


def window_length(group: Group, bounds: Bounds = (None, None)) -> timedelta:
    """How long each of the group's windows is. `bounds` (neighbour_changes): when the previous change of its
    containers was seen and when the next had not happened yet, if there are such; both windows stop there, so
    neither holds another change's samples."""
    length = timedelta(seconds=settings.CPUTUNE_CHANGE_WINDOW)
    previous, following = bounds
    if previous is not None:
        length = min(length, max(group.since - previous, timedelta(0)))
    if following is not None:
        length = min(length, max(following - group.until, timedelta(0)))
    return length


def effect_of(group: Group, now: datetime, bounds: Bounds = (None, None)) -> Effect:
    """The group's two windows (window_length) and verdict at `now`."""
    length = window_length(group, bounds)
    since, until = group.since, group.until
    after_end = min(now, until + length)
    period_us = group.lead.container.period_us
    before, before_ratios = _window(group.before_containers, period_us, since - length, since)
    if not before.samples:
        before = _lifetime_before(group.before_containers, period_us, since) or before
    after, after_ratios = _window(group.containers, period_us, until, max(until, after_end))
    return judge_effect(
        before,
        after,
        before_ratios,
        after_ratios,
        window_seconds=length.total_seconds(),
        after_elapsed_seconds=max(0.0, (after_end - until).total_seconds()),
        min_periods=policy_from_settings().min_periods,
    )


def neighbour_changes(groups: Sequence[Group]) -> dict[int, tuple[datetime | None, datetime | None]]:
    """lead id → (when the previous change of the group's earlier containers, not of the group, was seen; when the
    next change of its containers had not happened yet), None where there is none."""
    gap = timedelta(seconds=settings.CPUTUNE_COLLECT_INTERVAL)
    ids = {cid for g in groups for cid in g.containers | g.before_containers}
    by_container: dict[int, list[tuple[int | None, datetime, datetime]]] = defaultdict(list)
    for container_id, group_id, seen_at, since in (
        ContainerChange.objects.filter(container_id__in=ids)
        .order_by("seen_at")
        .values_list("container_id", "group_id", "seen_at", "since")
    ):
        by_container[container_id].append((group_id, seen_at, since or seen_at - gap))
    out: dict[int, tuple[datetime | None, datetime | None]] = {}
    for group in groups:
        first, until, own = min(c.seen_at for c in group.changes), group.until, group.lead.pk
        earlier = [
            seen_at
            for cid in group.before_containers
            for group_id, seen_at, _ in by_container.get(cid, [])
            if seen_at < first and group_id != own
        ]
        later = [
            bound
            for cid in group.containers
            for group_id, seen_at, bound in by_container.get(cid, [])
            if seen_at > until and group_id != own
        ]
        out[own] = (max(earlier, default=None), min(later, default=None))
    return out


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
    if kind in ("limit", "request"):
        return f"{value}m"
    return value if kind in ("restart", "threads") else show(value)  # an image, node or kernel name: from outside


def transition_words(kind: str, before: str | None, after: str | None, show: Callable[[str], str] = str) -> str:
    """ "limit 200m → 500m": one value that changed."""
    return f"{kind} {change_value(kind, before, show)} → {change_value(kind, after, show)}"


def change_words(row: dict[str, Any], show: Callable[[str], str] = str) -> str:
    """A change row in words, the chat line and the chart's label alike: "limit 80m → 200m, request 80m → 200m on
    12-01 (3 pods): throttled 82% → 3% of periods, p95 usage 190m (improved)". `show` renders an image or node name
    for its reader."""
    parts = [transition_words(row["kind"], row["before"], row["after"], show)]
    parts += [transition_words(t["kind"], t["before"], t["after"], show) for t in row["also_changed"]]
    text = f"{', '.join(parts)} on {row['seen_at'].astimezone(UTC):%m-%d}"
    if row["pods"] > 1:
        text += f" ({row['pods']} pods)"
    before, after = row["before_throttle_ratio"], row["after_throttle_ratio"]
    if before is not None and after is not None:
        text += f": throttled {format_ratio(before)} → {format_ratio(after)} of periods"
    if row["after_usage_p95_mcpu"] is not None:
        text += f", p95 usage {row['after_usage_p95_mcpu']:.0f}m"
    return f"{text} ({VERDICT_WORDS[row['verdict']]})"


def change_marks(container_ids: Iterable[int], since: datetime, until: datetime) -> list[tuple[int, datetime, dict]]:
    """(container id, instant, its group's change row) for each change of these containers seen in (since, until]:
    the pod chart's marks, oldest first."""
    on = list(
        ContainerChange.objects.filter(container_id__in=list(container_ids), seen_at__gt=since, seen_at__lte=until)
        .order_by("seen_at", "container_id", "id")
        .values_list("container_id", "seen_at", "group_id")
    )
    leads = ContainerChange.objects.filter(pk__in={g for *_, g in on if g is not None}).select_related(
        "container__pod__cluster", "previous__pod", "advice"
    )
    rows = {row["change_id"]: row for row in change_rows(leads)}
    marks, marked = [], set()
    for container_id, seen_at, group_id in on:
        if group_id in rows and (container_id, seen_at, group_id) not in marked:
            marked.add((container_id, seen_at, group_id))
            marks.append((container_id, seen_at, rows[group_id]))
    return marks


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
    """One row per change (each standing for its group) with its effect, CHANGE_FIELDS in order; unknown numbers are
    None, never 0."""
    now = now or timezone.now()
    groups = groups_of(changes)
    neighbours = neighbour_changes(groups)
    rows = []
    for group in groups:
        change = group.lead
        pod = change.container.pod
        effect = effect_of(group, now, neighbours[change.pk])
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
                "change_id": change.pk,
                "pods": len(group.containers),
                "also_changed": [
                    {"kind": c.kind, "before": c.before or None, "after": c.after or None} for c in group.also_changed
                ],
                "seen_until": group.until,
            }
        )
    return rows
