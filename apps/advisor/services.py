"""From stored series to current findings: one Finding per (container, window), written after each collection.

Reads raw samples for the 1-hour window and hourly rollups for 24 h and 7 d (the last two hours are rolled up
first, so a fresh collection is in them), feeds the pure core (windows, cfs, kernel, rules, explain) and replaces
the cluster's findings in bulk.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models import JSONField
from django.utils import timezone
from psycopg.types.json import Jsonb

from apps.clusters.kubelet import DEFAULT_PERIOD_US, quota_us_from_limit_mcpu, shares_from_request_mcpu
from apps.clusters.models import Cluster, Container, Node
from apps.telemetry.models import HourlyRollup
from apps.telemetry.services import rollup_hours

from .cfs import SharesFloor, container_shares_floor, pod_shares_floor, quota_ceiling_mcpu
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
    """What does not depend on the window: identity, resources, node, floor, ceiling, kernel."""

    container_id: int
    namespace: str
    pod_last_seen: datetime | None
    stored_period_us: int | None
    facts: ContainerFacts  # with an empty window, replaced per window
    shares: int
    quota_ceiling_mcpu: int | None
    node_cpus: float | None
    kernel_version: str


CHUNK = 2000  # containers computed and written together: memory stays bounded whatever the cluster's size


def refresh_findings(
    cluster: Cluster, *, now: datetime | None = None, windows: Iterable[str] = tuple(Window.values)
) -> int:
    """Recompute the cluster's findings for the given windows; returns rows written.

    Containers are taken CHUNK at a time: their static facts once, then each window's summaries, advice and rows
    (a 1,000-node cluster held 60,000 containers' samples at once before, 1.4 GB in a worker).
    """
    now = now or timezone.now()
    policy = policy_from_settings()
    # The current hour, and in its first minutes the previous one too (its last samples came in after its last
    # rollup); the beat's rollup task (every 5 minutes, two hours) completes it in any case.
    rollup_hours(now=now, hours=2 if now.minute < 10 else 1)
    windows = list(windows)
    starts = {window: now - timedelta(seconds=WINDOW_SECONDS[Window(window)]) for window in windows}
    written = 0
    for statics in _static_facts(cluster, min(starts.values())):
        for window in windows:
            start = starts[window]
            current = {cid: s for cid, s in statics.items() if s.pod_last_seen is not None and s.pod_last_seen >= start}
            summaries = _summaries(current, window, start, now)
            findings = []
            for container_id, static in current.items():
                summary = summaries.get(container_id) or _empty_window(start, now)
                facts = replace(static.facts, window=summary)
                recommendations = advise(facts, policy)
                findings.append(_finding(cluster, window, now, static, facts, recommendations, policy))
            _write_findings(findings)
            written += len(findings)
    # Findings of pods no longer seen in a window go; containers deleted altogether take theirs with them.
    with transaction.atomic():
        for window, start in starts.items():
            Finding.objects.filter(cluster=cluster, window=window, container__pod__last_seen__lt=start).delete()
            Finding.objects.filter(cluster=cluster, window=window, container__pod__last_seen__isnull=True).delete()
    return written


_CONTAINER_FIELDS = (
    "id",
    "pod_id",
    "pod__namespace",
    "pod__last_seen",
    "pod__node_id",
    "pod__qos_class",
    "request_mcpu",
    "limit_mcpu",
    "period_us",
)
_NODE_FIELDS = (
    "id",
    "capacity_mcpu",
    "allocatable_mcpu",
    "kernel_version",
    "cpu_manager_policy",
    "cfs_slice_us",
)


def _static_facts(cluster: Cluster, since: datetime) -> Iterator[dict[int, _Static]]:
    """Containers of pods seen since `since`, CHUNK at a time, with their node, shares floor and ceiling."""
    nodes = {row[0]: row for row in Node.objects.filter(cluster=cluster).values_list(*_NODE_FIELDS)}
    verdicts = {kv: kernel_verdict(kv) for kv in {row[3] for row in nodes.values() if row[3]}}
    # The floor divides a node among every pod on it, not only the ones in the window's report.
    pod_requests: dict[int, dict[int, int]] = defaultdict(dict)  # node id → pod id → summed request
    siblings: dict[int, list[int | None]] = defaultdict(list)  # pod id → container requests
    for node_id, pod_id, request in Container.objects.filter(pod__cluster=cluster, pod__node__isnull=False).values_list(
        "pod__node_id", "pod_id", "request_mcpu"
    ):
        pod_requests[node_id][pod_id] = pod_requests[node_id].get(pod_id, 0) + (request or 0)
        siblings[pod_id].append(request)
    pod_floors: dict[int, SharesFloor] = {}
    rows = (
        Container.objects.filter(pod__cluster=cluster, pod__last_seen__gte=since)
        .order_by("pod_id", "name")
        .values_list(*_CONTAINER_FIELDS)
    )
    statics: dict[int, _Static] = {}
    for cid, pod_id, namespace, last_seen, node_id, qos_class, request, limit, stored_period in rows.iterator(
        chunk_size=CHUNK
    ):
        node = nodes.get(node_id)
        capacity = allocatable = slice_us = None
        kernel_version = policy_name = ""
        if node is not None:
            _, capacity, allocatable, kernel_version, policy_name, slice_us = node
        floor_mcpu = total_shares = None
        if node is not None and (allocatable or capacity):
            pod_floor = pod_floors.get(pod_id)
            if pod_floor is None:
                requests = pod_requests[node_id]
                neighbours = [r or None for pid, r in requests.items() if pid != pod_id]
                pod_floor = pod_shares_floor(requests.get(pod_id) or None, neighbours, allocatable or capacity or 0)
                pod_floors[pod_id] = pod_floor
            own = list(siblings[pod_id])
            if request in own:
                own.remove(request)
            floor_mcpu = container_shares_floor(pod_floor, request, own).floor_mcpu
            total_shares = pod_floor.total_shares
        period_us = stored_period or DEFAULT_PERIOD_US
        quota_us = quota_us_from_limit_mcpu(limit, period_us)
        facts = ContainerFacts(
            window=_empty_window(since, since),
            request_mcpu=request,
            limit_mcpu=limit,
            period_us=period_us,
            node_cpus=capacity // 1000 if capacity else None,
            node_allocatable_mcpu=allocatable,
            cpu_manager_policy=policy_name,
            qos_class=qos_class,
            kernel=verdicts.get(kernel_version),
            shares_floor_mcpu=floor_mcpu,
            node_total_shares=total_shares,
            cfs_slice_us=slice_us,
        )
        statics[cid] = _Static(
            container_id=cid,
            namespace=namespace,
            pod_last_seen=last_seen,
            stored_period_us=stored_period,
            facts=facts,
            shares=shares_from_request_mcpu(request),
            quota_ceiling_mcpu=quota_ceiling_mcpu(quota_us, period_us) if quota_us else None,
            node_cpus=capacity / 1000 if capacity else None,
            kernel_version=kernel_version,
        )
        if len(statics) >= CHUNK:
            yield statics
            statics = {}
    if statics:
        yield statics


def _summaries(statics: dict[int, _Static], window: str, start: datetime, end: datetime) -> dict[int, WindowSummary]:
    ids = list(statics)
    out: dict[int, WindowSummary] = {}
    if window == Window.HOUR:
        rows_by: dict[int, list[SampleRow]] = defaultdict(list)
        for cid, ts, *rest in _sample_rows(ids, start, end):
            rows_by[cid].append(SampleRow(_aware(ts), *rest))
        # A container without a sample in the window shows its latest one's lifetime totals (seen once, or idle).
        for cid, ts, *rest in _latest_sample_rows([cid for cid in ids if cid not in rows_by], start):
            rows_by[cid].append(SampleRow(_aware(ts), *rest))
        interval = float(settings.CPUTUNE_COLLECT_INTERVAL)
        for cid, rows in rows_by.items():
            inside = rows[0].ts > start
            out[cid] = summarize_window(
                rows,
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


_SAMPLE_COLUMNS_SQL = ", ".join(_SAMPLE_FIELDS)


def _in_ids(ids: list[int]) -> tuple[str, list]:
    """`= ANY(%s)` with one array parameter on PostgreSQL (thousands of placeholders cost more to parse than the
    query runs), an IN list elsewhere."""
    if connection.vendor == "postgresql":
        return "= ANY(%s)", [ids]
    return f"IN ({', '.join(['%s'] * len(ids))})", list(ids)


def _sample_rows(ids: list[int], start: datetime, end: datetime) -> list[tuple]:
    """Samples in (start, end] of these containers, oldest first per container, as plain tuples (_SAMPLE_FIELDS).

    Raw SQL: the ORM's row building took 16 of 77 s of a 6,000-container refresh in profiling.
    """
    if not ids:
        return []
    condition, params = _in_ids(ids)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {_SAMPLE_COLUMNS_SQL} FROM telemetry_sample WHERE container_id {condition} "  # noqa: S608 - constant columns
            "AND ts > %s AND ts <= %s ORDER BY container_id, ts",
            [*params, start, end],
        )
        return cursor.fetchall()


def _latest_sample_rows(ids: list[int], before: datetime) -> list[tuple]:
    """The latest sample at or before `before` of each of these containers (none for a container never sampled)."""
    if not ids:
        return []
    condition, params = _in_ids(ids)
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                f"SELECT DISTINCT ON (container_id) {_SAMPLE_COLUMNS_SQL} FROM telemetry_sample "  # noqa: S608 - constant columns
                f"WHERE container_id {condition} AND ts <= %s ORDER BY container_id, ts DESC",
                [*params, before],
            )
        else:
            cursor.execute(
                f"SELECT {_SAMPLE_COLUMNS_SQL} FROM telemetry_sample s WHERE container_id {condition} AND ts = ("  # noqa: S608 - constant columns
                "SELECT max(ts) FROM telemetry_sample l WHERE l.container_id = s.container_id AND l.ts <= %s)",
                [*params, before],
            )
        return cursor.fetchall()


def _write_findings(findings: list[Finding]) -> None:
    """Insert or replace findings by (container, window).

    PostgreSQL: COPY into a temporary table and one INSERT … ON CONFLICT DO UPDATE — bulk_create's VALUES list of
    60,000 parameters per 2,000 rows spent most of a refresh's 23 s of writing in parsing. Elsewhere bulk_create.
    """
    if not findings:
        return
    fields = [f for f in Finding._meta.concrete_fields if f.name != "id"]
    if connection.vendor != "postgresql":
        Finding.objects.bulk_create(
            findings,
            batch_size=500,
            update_conflicts=True,
            unique_fields=["container", "window"],
            update_fields=[f.name for f in fields if f.name not in {"container", "window"}],
        )
        return
    quote = connection.ops.quote_name
    names = [quote(f.column or f.name) for f in fields]
    columns = ", ".join(names)
    updates = ", ".join(
        f"{name} = excluded.{name}"
        for f, name in zip(fields, names, strict=True)
        if f.name not in {"container", "window"}
    )
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            f"CREATE TEMP TABLE IF NOT EXISTS finding_load ON COMMIT DELETE ROWS AS "  # noqa: S608 - constant columns
            f"SELECT {columns} FROM advisor_finding WITH NO DATA"
        )
        # Plain attribute values (JSON wrapped for jsonb): Django's get_db_prep_save per value took 3.3 s a refresh.
        attnames = [(f.attname, isinstance(f, JSONField)) for f in fields]
        with cursor.cursor.copy(f"COPY finding_load ({columns}) FROM STDIN") as copy:
            for finding in findings:
                copy.write_row(
                    [Jsonb(getattr(finding, a)) if is_json else getattr(finding, a) for a, is_json in attnames]
                )
        cursor.execute(
            f"INSERT INTO advisor_finding ({columns}) SELECT {columns} FROM finding_load "  # noqa: S608 - constant columns
            f"ON CONFLICT (container_id, {quote('window')}) DO UPDATE SET {updates}"
        )
        cursor.execute("TRUNCATE finding_load")


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
        container_id=static.container_id,
        cluster=cluster,
        namespace=static.namespace,
        window=window,
        computed_at=now,
        window_start=summary.window_start,
        window_end=summary.window_end,
        lifetime=summary.lifetime,
        node_cpus=static.node_cpus,
        shares=static.shares,
        shares_floor_mcpu=facts.shares_floor_mcpu,
        quota_ceiling_mcpu=static.quota_ceiling_mcpu,
        period_us=facts.period_us if static.quota_ceiling_mcpu is not None else static.stored_period_us,
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


def _aware(ts: datetime) -> datetime:
    return ts if ts.tzinfo is not None else ts.replace(tzinfo=UTC)


def _chunks(items: list[int], size: int) -> Iterable[list[int]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]
