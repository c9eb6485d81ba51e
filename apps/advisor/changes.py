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
        """The change had not happened yet: the inventory before the first one that saw it."""
        first = min(self.changes, key=lambda c: c.seen_at)
        return first.since or first.seen_at - timedelta(seconds=settings.CPUTUNE_COLLECT_INTERVAL)

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
        """The lead container's other changes seen with it (a resize's request beside its limit), in kind order."""
        lead = self.lead
        same = [c for c in self.changes if c.container_id == lead.container_id and c.seen_at == lead.seen_at]
        return sorted((c for c in same if c.pk != lead.pk), key=lambda c: _KIND_ORDER.index(c.kind))


_KIND_ORDER = list(ContainerChange.Kind.values)


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
    container_ids: set[int], period_us: int | None, start: datetime, end: datetime, *, by_start: bool = False
) -> tuple[WindowSummary, list[float]]:
    """The samples of these containers whose interval ends in (start, end] — with `by_start`, whose interval starts
    in [start, end) — summarized (summarize_window: one formula for every figure), and their per-sample throttle
    ratios."""
    interval = float(settings.CPUTUNE_COLLECT_INTERVAL)
    reach = timedelta(seconds=interval * MAX_GAP_INTERVALS) if by_start else timedelta(0)
    rows = [
        SampleRow(aware(ts), *rest)
        for _, ts, *rest in sample_rows(sorted(container_ids), start, end + reach)
        if rest[0] is not None  # a first sample has no interval, hence no deltas
    ]
    if by_start:
        rows = [row for row in rows if start <= row.ts - timedelta(seconds=row.interval_s or 0) < end]
    rows.sort(key=lambda row: row.ts)
    summary = summarize_window(rows, start, end + reach, interval, MAX_GAP_INTERVALS, period_us=period_us)
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


def effect_of(group: Group, now: datetime, next_change_at: datetime | None = None) -> Effect:
    """The group's two windows and verdict at `now`; `next_change_at`: when the next change of one of its
    containers (not of this group) had not happened yet, if there is one."""
    length = timedelta(seconds=settings.CPUTUNE_CHANGE_WINDOW)
    until = group.until
    if next_change_at is not None:
        length = min(length, max(next_change_at - until, timedelta(0)))
    since = group.since
    after_end = min(now, until + length)
    period_us = group.lead.container.period_us
    before, before_ratios = _window(group.before_containers, period_us, since - length, since)
    if not before.samples:
        before = _lifetime_before(group.before_containers, period_us, since) or before
    after, after_ratios = _window(group.containers, period_us, until, max(until, after_end), by_start=True)
    return judge_effect(
        before,
        after,
        before_ratios,
        after_ratios,
        window_seconds=length.total_seconds(),
        after_elapsed_seconds=max(0.0, (after_end - until).total_seconds()),
        min_periods=policy_from_settings().min_periods,
    )


def next_changes(groups: Sequence[Group]) -> dict[int, datetime | None]:
    """lead id → when the next change of one of the group's containers, not of the group, had not happened yet."""
    gap = timedelta(seconds=settings.CPUTUNE_COLLECT_INTERVAL)
    later = (
        ContainerChange.objects.filter(container_id__in={cid for g in groups for cid in g.containers})
        .order_by("seen_at")
        .values_list("container_id", "group_id", "seen_at", "since")
    )
    by_container: dict[int, list[tuple[int | None, datetime, datetime]]] = defaultdict(list)
    for container_id, group_id, seen_at, since in later:
        by_container[container_id].append((group_id, seen_at, since or seen_at - gap))
    out: dict[int, datetime | None] = {}
    for group in groups:
        until = group.until
        bounds = [
            bound
            for cid in group.containers
            for group_id, seen_at, bound in by_container.get(cid, [])
            if seen_at > until and group_id != group.lead.pk
        ]
        out[group.lead.pk] = min(bounds, default=None)
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
    following = next_changes(groups)
    rows = []
    for group in groups:
        change = group.lead
        pod = change.container.pod
        effect = effect_of(group, now, following.get(change.pk))
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
