"""From stored series to current findings: one Finding per (container, window), written after each collection.

Reads raw samples for the 1-hour window and hourly rollups for 24 h and 7 d (the last two hours are rolled up
first, so a fresh collection is in them), feeds the pure core (windows, cfs, kernel, rules, explain) and replaces
the cluster's findings in bulk.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from apps.clusters.kubelet import DEFAULT_PERIOD_US, quota_us_from_limit_mcpu, shares_from_request_mcpu
from apps.clusters.models import Cluster, Container
from apps.telemetry.models import HourlyRollup, Sample
from apps.telemetry.services import rollup_hours

from .cfs import container_shares_floor, pod_shares_floor, quota_ceiling_mcpu
from .explain import explain
from .kernel import kernel_verdict
from .models import WINDOW_SECONDS, Finding, Window
from .rules import ContainerFacts, Policy, Recommendation, advise
from .windows import RollupRow, SampleRow, WindowSummary, summarize_rollups, summarize_window

log = logging.getLogger(__name__)
SEVERITY_RANK = {"critical": 0, "warning": 1, "info": 2}
_SAMPLE_FIELDS = (
    "container_id",
    "ts",
    "interval_s",
    "periods_delta",
    "throttled_periods_delta",
    "throttled_seconds_delta",
    "usage_seconds_delta",
    "threads",
    "periods_total",
    "throttled_periods_total",
    "usage_seconds_total",
)
_ROLLUP_FIELDS = (
    "container_id",
    "hour",
    "covered_seconds",
    "samples",
    "periods",
    "throttled_periods",
    "throttled_seconds",
    "usage_seconds",
    "usage_p95_mcpu",
    "usage_max_mcpu",
    "threads_max",
)


def policy_from_settings() -> Policy:
    return Policy(throttle_target=settings.CPUTUNE_THROTTLE_TARGET)


@dataclass(frozen=True, slots=True)
class _Static:
    """What does not depend on the window: resources, node, floor, ceiling, kernel."""

    container: Container
    facts: ContainerFacts  # with an empty window, replaced per window
    shares: int
    quota_ceiling_mcpu: int | None
    node_cpus: float | None
    kernel_version: str


def refresh_findings(
    cluster: Cluster, *, now: datetime | None = None, windows: Iterable[str] = tuple(Window.values)
) -> int:
    """Recompute the cluster's findings for the given windows; returns rows written."""
    now = now or timezone.now()
    policy = policy_from_settings()
    rollup_hours(now=now, hours=2)
    written = 0
    for window in windows:
        start = now - timedelta(seconds=WINDOW_SECONDS[Window(window)])
        statics = _static_facts(cluster, start)
        summaries = _summaries(statics, window, start, now)
        findings = []
        for container_id, static in statics.items():
            summary = summaries.get(container_id) or _empty_window(start, now)
            facts = _with_window(static.facts, summary)
            recommendations = advise(facts, policy)
            findings.append(_finding(cluster, window, now, static, facts, recommendations, policy))
        with transaction.atomic():
            Finding.objects.filter(cluster=cluster, window=window).exclude(container_id__in=statics.keys()).delete()
            Finding.objects.bulk_create(
                findings,
                batch_size=1000,
                update_conflicts=True,
                unique_fields=["container", "window"],
                update_fields=[
                    f.name for f in Finding._meta.concrete_fields if f.name not in {"id", "container", "window"}
                ],
            )
        written += len(findings)
    return written


def _static_facts(cluster: Cluster, since: datetime) -> dict[int, _Static]:
    """Containers of pods seen since the window started, with their node and shares floor."""
    containers = list(
        Container.objects.filter(pod__cluster=cluster, pod__last_seen__gte=since)
        .select_related("pod", "pod__node")
        .order_by("pod_id", "name")
    )
    # The floor divides a node among every pod on it, not only the ones in the window's report.
    pod_requests: dict[int, dict[int, int | None]] = defaultdict(dict)  # node id → pod id → summed request
    siblings: dict[int, list[int | None]] = defaultdict(list)  # pod id → container requests
    for c in Container.objects.filter(pod__cluster=cluster, pod__node__isnull=False).values_list(
        "pod__node_id", "pod_id", "request_mcpu"
    ):
        node_id, pod_id, request = c
        pod_requests[node_id][pod_id] = (pod_requests[node_id].get(pod_id) or 0) + (request or 0)
        siblings[pod_id].append(request)
    statics: dict[int, _Static] = {}
    verdicts: dict[str, object] = {}
    for container in containers:
        pod, node = container.pod, container.pod.node
        kernel = None
        if node is not None and node.kernel_version:
            kernel = verdicts.get(node.kernel_version) or kernel_verdict(node.kernel_version)
            verdicts[node.kernel_version] = kernel
        floor_mcpu = total_shares = None
        if node is not None and (node.allocatable_mcpu or node.capacity_mcpu):
            budget = node.allocatable_mcpu or node.capacity_mcpu or 0
            neighbours = [r or None for pid, r in pod_requests[node.id].items() if pid != pod.id]
            pod_floor = pod_shares_floor(pod_requests[node.id].get(pod.id) or None, neighbours, budget)
            own = list(siblings[pod.id])
            if container.request_mcpu in own:
                own.remove(container.request_mcpu)
            floor = container_shares_floor(pod_floor, container.request_mcpu, own)
            floor_mcpu, total_shares = floor.floor_mcpu, pod_floor.total_shares
        period_us = container.period_us or DEFAULT_PERIOD_US
        quota_us = quota_us_from_limit_mcpu(container.limit_mcpu, period_us)
        capacity = node.capacity_mcpu if node is not None else None
        facts = ContainerFacts(
            window=_empty_window(since, since),
            request_mcpu=container.request_mcpu,
            limit_mcpu=container.limit_mcpu,
            period_us=period_us,
            node_cpus=capacity // 1000 if capacity else None,
            node_allocatable_mcpu=node.allocatable_mcpu if node is not None else None,
            cpu_manager_policy=node.cpu_manager_policy if node is not None else "",
            qos_class=pod.qos_class,
            kernel=kernel,  # type: ignore[arg-type]
            shares_floor_mcpu=floor_mcpu,
            node_total_shares=total_shares,
            cfs_slice_us=node.cfs_slice_us if node is not None else None,
        )
        statics[container.pk] = _Static(
            container=container,
            facts=facts,
            shares=shares_from_request_mcpu(container.request_mcpu),
            quota_ceiling_mcpu=quota_ceiling_mcpu(quota_us, period_us) if quota_us else None,
            node_cpus=capacity / 1000 if capacity else None,
            kernel_version=node.kernel_version if node is not None else "",
        )
    return statics


def _summaries(statics: dict[int, _Static], window: str, start: datetime, end: datetime) -> dict[int, WindowSummary]:
    ids = list(statics)
    out: dict[int, WindowSummary] = {}
    if window == Window.HOUR:
        rows_by: dict[int, list[SampleRow]] = defaultdict(list)
        # One sample before the window too: a container seen once has only lifetime totals to show.
        for chunk in _chunks(ids, 2000):
            qs = (
                Sample.objects.filter(container_id__in=chunk, ts__gt=start - timedelta(hours=1), ts__lte=end)
                .order_by("container_id", "ts")
                .values_list(*_SAMPLE_FIELDS)
            )
            for cid, ts, *rest in qs.iterator(chunk_size=20000):
                rows_by[cid].append(SampleRow(_aware(ts), *rest))
        interval = float(settings.CPUTUNE_COLLECT_INTERVAL)
        for cid, rows in rows_by.items():
            inside = [r for r in rows if r.ts > start]
            out[cid] = summarize_window(
                inside or rows[-1:],
                start if inside else rows[-1].ts - timedelta(seconds=1),
                end,
                interval,
                period_us=statics[cid].facts.period_us,
            )
        return out
    rollups_by: dict[int, list[RollupRow]] = defaultdict(list)
    for chunk in _chunks(ids, 2000):
        rollup_qs = (
            HourlyRollup.objects.filter(
                container_id__in=chunk, hour__gte=start.replace(minute=0, second=0, microsecond=0)
            )
            .order_by("container_id", "hour")
            .values_list(*_ROLLUP_FIELDS)
        )
        for (
            cid,
            hour,
            covered,
            samples,
            periods,
            throttled,
            throttled_s,
            usage_s,
            p95,
            mx,
            threads,
        ) in rollup_qs.iterator(chunk_size=20000):
            rollups_by[cid].append(
                RollupRow(
                    _aware(hour), covered, samples, periods, throttled, throttled_s, usage_s, p95, mx, None, threads
                )
            )
    for cid, rollups in rollups_by.items():
        out[cid] = summarize_rollups(rollups, start, end)
    return out


def _finding(
    cluster: Cluster,
    window: str,
    now: datetime,
    static: _Static,
    facts: ContainerFacts,
    recommendations: tuple[Recommendation, ...],
    policy: Policy,
) -> Finding:
    summary = facts.window
    kernel = facts.kernel
    return Finding(
        container=static.container,
        cluster=cluster,
        namespace=static.container.pod.namespace,
        window=window,
        computed_at=now,
        window_start=summary.window_start,
        window_end=summary.window_end,
        lifetime=summary.lifetime,
        node_cpus=static.node_cpus,
        shares=static.shares,
        shares_floor_mcpu=facts.shares_floor_mcpu,
        quota_ceiling_mcpu=static.quota_ceiling_mcpu,
        period_us=facts.period_us if static.quota_ceiling_mcpu is not None else static.container.period_us,
        usage_avg_mcpu=summary.usage_avg_mcpu,
        usage_p95_mcpu=summary.usage_p95_mcpu,
        usage_max_mcpu=summary.usage_max_mcpu,
        throttle_ratio=summary.throttle_ratio,
        throttled_seconds_per_second=summary.throttled_seconds_per_second,
        periods=summary.periods,
        throttled_periods=summary.throttled_periods,
        threads=summary.threads_max,
        samples=summary.samples,
        kernel_version=static.kernel_version,
        kernel_verdict=kernel.verdict if kernel else "",
        kernel_bug=(kernel.bug or "") if kernel else "",
        recommendations=[recommendation_dict(r) for r in recommendations],
        kinds="," + ",".join(r.kind for r in recommendations) + "," if recommendations else "",
        severity_rank=min((SEVERITY_RANK[r.severity] for r in recommendations), default=9),
        explanation=explain(facts, recommendations, policy),
    )


def recommendation_dict(r: Recommendation) -> dict[str, object]:
    return {
        "kind": r.kind,
        "severity": r.severity,
        "summary": r.summary,
        "detail": r.detail,
        "suggested_request_mcpu": r.suggested_request_mcpu,
        "suggested_limit_mcpu": r.suggested_limit_mcpu,
    }


def _empty_window(start: datetime, end: datetime) -> WindowSummary:
    return WindowSummary(
        window_start=start,
        window_end=end,
        periods=None,
        throttled_periods=None,
        throttle_ratio=None,
        throttled_seconds_per_second=None,
        usage_avg_mcpu=None,
        usage_p95_mcpu=None,
        usage_p99_mcpu=None,
        usage_max_mcpu=None,
        threads_max=None,
        samples=0,
        covered_seconds=None,
    )


def _with_window(facts: ContainerFacts, window: WindowSummary) -> ContainerFacts:
    from dataclasses import replace

    return replace(facts, window=window)


def _aware(ts: datetime) -> datetime:
    return ts if ts.tzinfo is not None else ts.replace(tzinfo=UTC)


def _chunks(items: list[int], size: int) -> Iterable[list[int]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]
