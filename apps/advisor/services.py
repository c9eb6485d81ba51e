"""From stored series to current findings: one Finding per (container, window), written after each collection.

Reads raw samples for the 1-hour window and hourly rollups for 24 h and 7 d (the last two hours are rolled up
first, so a fresh collection is in them), feeds the pure core (windows, cfs, kernel, rules) and replaces the
cluster's findings in bulk. The explanation is not stored: selectors.explanation() rebuilds it for the pod page.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import NamedTuple

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Count, Max, Q
from django.utils import timezone
from psycopg.types.json import Jsonb

from apps.clusters.cgroup_scheme import weight_formula
from apps.clusters.changes import record_thread_changes
from apps.clusters.kubelet import DEFAULT_PERIOD_US, quota_us_from_limit_mcpu, shares_from_request_mcpu
from apps.clusters.models import POD_CGROUP, Cluster, Container, ContainerChange, Node
from apps.db import analyze_tables, copy_rows
from apps.telemetry.periods import period_sample_rows
from apps.telemetry.rollups import rollup_hours
from apps.telemetry.selectors import aware, latest_sample_rows, rollup_rows, sample_rows

from .advice_followed import note_followed_advice, settle_followed_advice
from .cfs import SharesFloor, container_shares_floor, quota_ceiling_mcpu, shares_floor, weighted_pod_floors
from .change_effect import may_change_level, thread_level_change
from .kernel import kernel_verdict
from .models import WINDOW_SECONDS, Finding, Window
from .pod_quota import pod_ceiling
from .policy import policy_from_settings
from .rules import ContainerFacts, Recommendation, advise, limit_curve
from .runtimes import env_pairs
from .vocabulary import NO_SEVERITY_RANK, SEVERITY_RANK
from .windows import RollupRow, SampleRow, WindowSummary, period_throttled_us, summarize_rollups, summarize_window

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class _Static:
    """What does not depend on the window: identity, resources, node, floor, ceiling, kernel."""

    container_id: int
    pod_id: int
    namespace: str
    pod_last_seen: datetime | None
    stored_period_us: int | None
    facts: ContainerFacts  # with an empty window, replaced per window
    shares: int
    quota_ceiling_mcpu: int | None
    node_cpus: float | None
    kernel_version: str


CHUNK = 2000  # containers computed and written together: memory stays bounded whatever the cluster's size
PART_CONTAINERS = 10_000  # about this many containers per refresh part (one Celery task each, in parallel)


@dataclass(frozen=True)
class RefreshPart:
    """Some of a cluster's nodes, whose containers one task refreshes; `nodeless` adds pods not on any node."""

    node_ids: tuple[int, ...]
    nodeless: bool = False


def refresh_findings(
    cluster: Cluster, *, now: datetime | None = None, windows: Iterable[str] = tuple(Window.values)
) -> int:
    """Recompute the cluster's findings for the given windows, in this process; returns rows written."""
    now = now or timezone.now()
    windows = list(windows)
    prepare_refresh(cluster, now=now, windows=windows)
    return refresh_part(cluster, None, now=now, windows=windows)


def windows_due(cluster: Cluster, *, now: datetime) -> list[str]:
    """The windows a scheduled refresh recomputes: 1 h always; 24 h and 7 d when their findings are older than
    CPUTUNE_LONG_WINDOW_REFRESH seconds, missing, or still young — resting on less history than that interval, as in
    a new install's first minutes, when a refresh is cheap and waiting would leave the long windows empty. With a
    week of history the long windows read 192 hourly rollups per container and took most of a refresh."""
    due = [str(Window.HOUR)]
    every = settings.CPUTUNE_LONG_WINDOW_REFRESH
    for window in (Window.DAY, Window.WEEK):
        latest = Finding.objects.filter(cluster=cluster, window=window).aggregate(
            computed=Max("computed_at"), covered=Max("covered_seconds")
        )
        if (
            latest["computed"] is None
            or (now - latest["computed"]).total_seconds() >= every
            or (latest["covered"] or 0) < every
        ):
            due.append(str(window))
    return due


def next_refresh_at(window: str, computed_at: datetime, covered_seconds: float | None) -> datetime:
    """When the findings of `window` computed at `computed_at` are next recomputed (the rule of windows_due)."""
    every = settings.CPUTUNE_COLLECT_INTERVAL
    if window != Window.HOUR and (covered_seconds or 0) >= settings.CPUTUNE_LONG_WINDOW_REFRESH:
        every = max(every, settings.CPUTUNE_LONG_WINDOW_REFRESH)
    return computed_at + timedelta(seconds=every)


def prepare_refresh(cluster: Cluster, *, now: datetime, windows: Iterable[str] = tuple(Window.values)) -> None:
    """What a refresh does once before its parts: roll up the current hour (and in its first minutes the previous
    one, whose last samples came in after its last rollup — the beat's rollup task completes it in any case), and
    delete the findings of pods no longer seen in a window (containers deleted altogether took theirs with them)."""
    rollup_hours(now=now, hours=2 if now.minute < 10 else 1)
    # Before the findings are replaced: the plans that stood before the changes seen since the last refresh.
    note_followed_advice(cluster, now, policy_from_settings())
    settle_followed_advice(cluster, now)
    with transaction.atomic():
        for window in windows:
            start = now - timedelta(seconds=WINDOW_SECONDS[Window(window)])
            Finding.objects.filter(cluster=cluster, window=window, container__pod__last_seen__lt=start).delete()
            Finding.objects.filter(cluster=cluster, window=window, container__pod__last_seen__isnull=True).delete()
    # Planner statistics for the pages' reads (the previous refresh wrote as many rows as this one will): without
    # them, where autovacuum is off, a large namespace report nested-loops over every finding (benchmarks/RESULTS.md).
    analyze_tables("advisor_finding")


def refresh_parts(cluster: Cluster, *, now: datetime, size: int = PART_CONTAINERS) -> list[RefreshPart]:
    """The cluster's nodes in groups of about `size` containers (a node is never split: its pods' shares floors
    are computed together); the first part also takes the pods not on a node."""
    since = now - timedelta(seconds=max(WINDOW_SECONDS.values()))
    counts = (
        Container.objects.filter(pod__cluster=cluster, pod__last_seen__gte=since, pod__node__isnull=False)
        .values_list("pod__node_id")
        .annotate(n=Count("id"))
        .order_by("pod__node_id")
    )
    parts: list[RefreshPart] = []
    group: list[int] = []
    held = 0
    for node_id, n in counts:
        if group and held + n > size:
            parts.append(RefreshPart(tuple(group), nodeless=not parts))
            group, held = [], 0
        group.append(node_id)
        held += n
    parts.append(RefreshPart(tuple(group), nodeless=not parts))
    return parts


def refresh_part(
    cluster: Cluster, part: RefreshPart | None, *, now: datetime, windows: Iterable[str] = tuple(Window.values)
) -> int:
    """Recompute the findings of the part's containers (all of the cluster's for None); returns rows written.

    Containers are taken CHUNK at a time: their static facts once, then each window's summaries, advice and rows
    (a 1,000-node cluster held 60,000 containers' samples at once before, 1.4 GB in a worker).
    """
    policy = policy_from_settings()
    windows = list(windows)
    starts = {window: now - timedelta(seconds=WINDOW_SECONDS[Window(window)]) for window in windows}
    written = 0
    for statics in _static_facts(cluster, min(starts.values()), part):
        pod_cgroups = _pod_cgroups({static.pod_id for static in statics.values()})
        for window in windows:
            start = starts[window]
            current = {cid: s for cid, s in statics.items() if s.pod_last_seen is not None and s.pod_last_seen >= start}
            periods: dict[int, int | None] = {cid: st.facts.period_us for cid, st in current.items()}
            # The pods' own cgroups in the same read: their window is the pod-level quota's (raise_pod_limit).
            periods |= dict(pod_cgroups[st.pod_id] for st in current.values() if st.pod_id in pod_cgroups)
            if window == Window.HOUR:
                rows_by = hour_rows(list(periods), start, now)
                summaries = summarize_hour(periods, rows_by, start, now)
                # From the samples just read: the series' own changes, checked against the plan that stood before
                # them while it still stands (this part's findings are written below).
                if found := record_thread_levels(rows_by, current):
                    note_followed_advice(cluster, now, policy, found)
            else:
                summaries = summaries_of(periods, window, start, now)
            per_period = _period_evidence(current, start, now)
            rows = []
            for container_id, static in current.items():
                summary = summaries.get(container_id) or _empty_window(start, now)
                cgroup = pod_cgroups.get(static.pod_id)
                facts = replace(
                    static.facts,
                    window=summary,
                    period_throttled_us=per_period.get(container_id),
                    pod_window=summaries.get(cgroup[0]) if cgroup else None,
                )
                plan = advise(facts, policy)
                curve = limit_curve(facts, policy, plan)
                rows.append(_finding_row(cluster.pk, window, now, static, facts, plan, curve))
            _write_findings(rows)
            written += len(rows)
    return written


def _pod_cgroups(pod_ids: set[int]) -> dict[int, tuple[int, int | None]]:
    """pod id → (id, CFS period) of its own cgroup's stored series (POD_CGROUP), for the pods that have one."""
    rows = Container.with_pod_cgroups.filter(pod_id__in=pod_ids, name=POD_CGROUP).values_list(
        "pod_id", "pk", "period_us"
    )
    return {pod_id: (cid, period_us) for pod_id, cid, period_us in rows}


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
    "image",
    "cpu_env",
    "pod__limit_mcpu",
    "pod__init_limit_mcpu",
    "pod__init_unlimited",
)
_NODE_FIELDS = (
    "id",
    "capacity_mcpu",
    "allocatable_mcpu",
    "kernel_version",
    "cpu_manager_policy",
    "cfs_slice_us",
    "cgroup_version",
    "weight_mapping",
)


def _static_facts(cluster: Cluster, since: datetime, part: RefreshPart | None = None) -> Iterator[dict[int, _Static]]:
    """Containers of pods seen since `since` (on the part's nodes), CHUNK at a time, with their node, shares floor
    and ceiling. One pass over the rows, long because each row needs the per-node sums built above it."""
    node_rows = Node.objects.filter(cluster=cluster)
    on_nodes = Container.objects.filter(pod__cluster=cluster, pod__node__isnull=False)
    seen = Container.objects.filter(pod__cluster=cluster, pod__last_seen__gte=since)
    if part is not None:
        node_rows = node_rows.filter(id__in=part.node_ids)
        on_nodes = on_nodes.filter(pod__node_id__in=part.node_ids)
        in_part = (
            Q(pod__node_id__in=part.node_ids) | Q(pod__node__isnull=True)
            if part.nodeless
            else Q(pod__node_id__in=part.node_ids)
        )
        seen = seen.filter(in_part)
    nodes = {row[0]: row for row in node_rows.values_list(*_NODE_FIELDS)}
    verdicts = {kv: kernel_verdict(kv) for kv in {row[3] for row in nodes.values() if row[3]}}
    # The floor divides a node among every pod on it, not only the ones in the window's report.
    pod_requests: dict[int, dict[int, int]] = defaultdict(dict)  # node id → pod id → summed request
    siblings: dict[int, list[int | None]] = defaultdict(list)  # pod id → container requests
    pod_limits: dict[int, list[int | None]] = defaultdict(list)  # pod id → container limits (the pod's quota)
    pod_qos: dict[int, str] = {}
    for node_id, pod_id, qos, request, limit in on_nodes.values_list(
        "pod__node_id", "pod_id", "pod__qos_class", "request_mcpu", "limit_mcpu"
    ):
        pod_requests[node_id][pod_id] = pod_requests[node_id].get(pod_id, 0) + (request or 0)
        siblings[pod_id].append(request)
        pod_limits[pod_id].append(limit)
        pod_qos[pod_id] = qos
    pod_floors: dict[int, SharesFloor] = {}
    node_total_shares: dict[int, int] = {}
    rows = seen.order_by("pod_id", "name").values_list(*_CONTAINER_FIELDS)
    statics: dict[int, _Static] = {}
    for (
        cid,
        pod_id,
        namespace,
        last_seen,
        node_id,
        qos_class,
        request,
        limit,
        stored_period,
        image,
        cpu_env,
        pod_limit,
        init_limit,
        init_unlimited,
    ) in rows.iterator(chunk_size=CHUNK):
        node = nodes.get(node_id)
        capacity = allocatable = slice_us = cgroup_version = None
        kernel_version = policy_name = mapping = ""
        if node is not None:
            _, capacity, allocatable, kernel_version, policy_name, slice_us, cgroup_version, mapping = node
        # Weights only where the node's cgroup v2 mapping was seen; otherwise shares, which v1 and the linear
        # mapping split alike.
        weighing = weight_formula(cgroup_version, mapping)
        floor_mcpu = total_shares = None
        if node is not None and (allocatable or capacity):
            pod_floor = pod_floors.get(pod_id)
            if pod_floor is None and weighing:
                on_node = {p: (pod_qos[p], request) for p, request in pod_requests[node_id].items()}
                pod_floors.update(weighted_pod_floors(on_node, allocatable or capacity or 0, weighing))
                pod_floor = pod_floors[pod_id]
            if pod_floor is None:
                # Every pod of the node against the node's summed shares, added up once per node (summing each
                # pod's neighbours made this quadratic in pods per node: 18 share conversions per container).
                own_shares = shares_from_request_mcpu(pod_requests[node_id].get(pod_id) or None)
                node_shares = node_total_shares.get(node_id)
                if node_shares is None:
                    node_shares = sum(shares_from_request_mcpu(r or None) for r in pod_requests[node_id].values())
                    node_total_shares[node_id] = node_shares
                others = node_shares - own_shares
                pod_floor = shares_floor(own_shares, (others,) if others else (), allocatable or capacity or 0)
                pod_floors[pod_id] = pod_floor
            own = list(siblings[pod_id])
            if request in own:
                own.remove(request)
            floor_mcpu = container_shares_floor(pod_floor, request, own, weighing).floor_mcpu
            total_shares = pod_floor.total_shares
        period_us = stored_period or DEFAULT_PERIOD_US
        quota_us = quota_us_from_limit_mcpu(limit, period_us)
        pod_ceiling_mcpu, pod_ceiling_from = pod_ceiling(
            pod_limit, pod_limits.get(pod_id, ()), init_limit, init_unlimited
        )
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
            cgroup_version=cgroup_version,
            weight_mapping=mapping,
            image=image,
            cpu_env=env_pairs(cpu_env),
            pod_limit_mcpu=pod_limit,
            pod_ceiling_mcpu=pod_ceiling_mcpu,
            pod_ceiling_from=pod_ceiling_from,
        )
        statics[cid] = _Static(
            container_id=cid,
            pod_id=pod_id,
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


def hour_rows(ids: list[int], start: datetime, end: datetime) -> dict[int, list[SampleRow]]:
    """Each container's samples in (start, end], oldest first; a container without one there has its latest sample
    before (its lifetime totals: seen once, or idle)."""
    rows_by: dict[int, list[SampleRow]] = defaultdict(list)
    for cid, ts, *rest in sample_rows(ids, start, end):
        rows_by[cid].append(SampleRow(aware(ts), *rest))
    for cid, ts, *rest in latest_sample_rows([cid for cid in ids if cid not in rows_by], start):
        rows_by[cid].append(SampleRow(aware(ts), *rest))
    return rows_by


def summarize_hour(
    period_us: dict[int, int | None], rows_by: dict[int, list[SampleRow]], start: datetime, end: datetime
) -> dict[int, WindowSummary]:
    """The 1 h window's summary of each container from hour_rows (lifetime figures where that is all there is)."""
    interval = float(settings.CPUTUNE_COLLECT_INTERVAL)
    out = {}
    for cid, rows in rows_by.items():
        inside = rows[0].ts > start
        out[cid] = summarize_window(
            rows, start if inside else rows[-1].ts - timedelta(seconds=1), end, interval, period_us=period_us[cid]
        )
    return out


def record_thread_levels(rows_by: dict[int, list[SampleRow]], container_ids: Iterable[int]) -> set[int]:
    """Record each container's thread count settling at a new level in its 1 h samples (docs/domain.md#thread-changes),
    looking only after the level recorded last; returns the groups of the changes recorded."""
    candidates = {
        cid: rows
        for cid in container_ids
        if (rows := rows_by.get(cid))
        and may_change_level([r.threads for r in rows])
        and thread_level_change([(r.ts, r.threads) for r in rows]) is not None
    }
    if not candidates:
        return set()
    recorded = dict(
        ContainerChange.objects.filter(container_id__in=list(candidates), kind=ContainerChange.Kind.THREADS)
        .values("container_id")
        .annotate(last=Max("seen_at"))
        .values_list("container_id", "last")
    )
    found = []
    for cid, rows in candidates.items():
        last = recorded.get(cid)
        change = thread_level_change([(r.ts, r.threads) for r in rows if last is None or r.ts >= last])
        if change is not None:
            found.append((cid, change.since, change.at, change.before, change.after))
    return record_thread_changes(found)


def summaries_of(
    period_us: dict[int, int | None], window: str, start: datetime, end: datetime
) -> dict[int, WindowSummary]:
    """The window's summary of each container id (its CFS period in `period_us`): raw samples for the hour (a
    container without one shows its latest lifetime totals), hourly rollups for longer windows."""
    ids = list(period_us)
    out: dict[int, WindowSummary] = {}
    if window == Window.HOUR:
        return summarize_hour(period_us, hour_rows(ids, start, end), start, end)
    rollups_by: dict[int, list[RollupRow]] = defaultdict(list)
    first_hour = start.replace(minute=0, second=0, microsecond=0)
    for chunk in _chunks(ids, 2000):
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
            waiting,
            stalled,
        ) in rollup_rows(chunk, first_hour):
            rollups_by[cid].append(
                RollupRow(
                    aware(hour),
                    covered,
                    samples,
                    periods,
                    throttled,
                    throttled_s,
                    usage_s,
                    p95,
                    mx,
                    None,
                    threads,
                    waiting,
                    stalled,
                )
            )
    for cid, rollups in rollups_by.items():
        out[cid] = summarize_rollups(rollups, start, end)
    return out


def _period_evidence(statics: dict[int, _Static], start: datetime, end: datetime) -> dict[int, tuple[float, ...]]:
    """Per container with a limit, one throttled-time figure per period the node agent sampled in (start, end]
    under the quota the limit sets now (figures against another quota say nothing of what this limit adds)."""
    quotas = {
        cid: quota_us_from_limit_mcpu(s.facts.limit_mcpu, s.facts.period_us)
        for cid, s in statics.items()
        if s.facts.limit_mcpu
    }
    samples: dict[int, list[tuple[int, tuple[int, ...]]]] = defaultdict(list)
    for chunk in _chunks(list(quotas), 2000):
        for row in period_sample_rows(chunk, start, end):
            if row.quota_us == quotas[row.container_id] and row.period_us == statics[row.container_id].facts.period_us:
                samples[row.container_id].append((row.periods, row.throttled_us))
    evidence = {cid: period_throttled_us(rows) for cid, rows in samples.items()}
    return {cid: values for cid, values in evidence.items() if values}


class FindingRow(NamedTuple):
    """One finding as the refresh writes it: every Finding column but the id, in this order (COPY and the upsert
    take the fields as columns)."""

    container_id: int
    cluster_id: int
    namespace: str
    window: str
    computed_at: datetime
    window_start: datetime | None
    window_end: datetime
    lifetime: bool
    node_cpus: float | None
    shares: int | None
    shares_floor_mcpu: int | None
    quota_ceiling_mcpu: int | None
    period_us: int | None
    usage_avg_mcpu: float | None
    usage_p95_mcpu: float | None
    usage_max_mcpu: float | None
    throttle_ratio: float | None
    throttled_seconds_per_second: float | None
    periods: int | None
    throttled_periods: int | None
    threads: int | None
    samples: int
    kernel_version: str
    kernel_verdict: str
    kernel_bug: str
    recommendations: list[dict[str, object]]
    kinds: str
    severity_rank: int
    covered_seconds: float | None
    gaps_ignored: int
    usage_active_mcpu: float | None
    node_total_shares: int | None
    expected_curve: list[list[float]]
    pressure_waiting_per_second: float | None
    pressure_stalled_per_second: float | None
    throttled_seconds_total: float | None
    pressure_waiting_seconds_total: float | None
    cgroup_version: int | None
    weight_mapping: str
    pod_throttle_ratio: float | None


FINDING_COLUMNS = FindingRow._fields
_JSON_COLUMNS = frozenset({"recommendations", "expected_curve"})


def _write_findings(rows: list[FindingRow]) -> None:
    """Insert or replace findings by (container, window); rows are FindingRows. Parts of two
    refreshes may overlap on a busy queue: on every database the older never overwrites the newer.

    PostgreSQL: COPY into a temporary table and one INSERT … ON CONFLICT DO UPDATE — bulk_create's VALUES list of
    60,000 parameters per 2,000 rows spent most of a refresh's time in parsing. Elsewhere (SQLite) the same upsert
    with one VALUES row per execution: bulk_create's update_conflicts has no WHERE for the newer-wins rule.
    """
    if not rows:
        return
    quote = connection.ops.quote_name
    names = [quote(c) for c in FINDING_COLUMNS]
    columns = ", ".join(names)
    updates = ", ".join(
        f"{name} = excluded.{name}"
        for c, name in zip(FINDING_COLUMNS, names, strict=True)
        if c not in {"container_id", "window"}
    )
    upsert = (
        f"ON CONFLICT (container_id, {quote('window')}) DO UPDATE SET {updates} "
        "WHERE advisor_finding.computed_at <= excluded.computed_at"
    )
    if connection.vendor != "postgresql":
        by_column = {f.attname: f for f in Finding._meta.concrete_fields}
        fields = [by_column[c] for c in FINDING_COLUMNS]
        placeholders = ", ".join(["%s"] * len(fields))
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.executemany(
                f"INSERT INTO advisor_finding ({columns}) VALUES ({placeholders}) {upsert}",  # noqa: S608 - constant columns
                [[f.get_db_prep_save(v, connection) for f, v in zip(fields, row, strict=True)] for row in rows],
            )
        return
    json_at = [i for i, c in enumerate(FINDING_COLUMNS) if c in _JSON_COLUMNS]
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            f"CREATE TEMP TABLE IF NOT EXISTS finding_load ON COMMIT DELETE ROWS AS "  # noqa: S608 - constant columns
            f"SELECT {columns} FROM advisor_finding WITH NO DATA"
        )
        copy_rows(cursor, "finding_load", names, (_with_jsonb(row, json_at) for row in rows))
        cursor.execute(
            f"INSERT INTO advisor_finding ({columns}) SELECT {columns} FROM finding_load {upsert}"  # noqa: S608 - constant columns
        )
        cursor.execute("TRUNCATE finding_load")


def _with_jsonb(row: tuple, json_at: list[int]) -> list:
    values = list(row)
    for i in json_at:
        values[i] = Jsonb(values[i])
    return values


def _finding_row(
    cluster_id: int,
    window: str,
    now: datetime,
    static: _Static,
    facts: ContainerFacts,
    recommendations: tuple[Recommendation, ...],
    curve: tuple[tuple[int, float], ...] = (),
) -> FindingRow:
    """One finding as a row: FindingRow's fields, each named where it is filled."""
    summary = facts.window
    kernel = facts.kernel
    return FindingRow(
        container_id=static.container_id,
        cluster_id=cluster_id,
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
        severity_rank=min((SEVERITY_RANK[r.severity] for r in recommendations), default=NO_SEVERITY_RANK),
        covered_seconds=summary.covered_seconds,
        gaps_ignored=summary.gaps_ignored,
        usage_active_mcpu=summary.usage_active_mcpu,
        node_total_shares=facts.node_total_shares,
        expected_curve=[[limit, ratio] for limit, ratio in curve],
        pressure_waiting_per_second=summary.pressure_waiting_per_second,
        pressure_stalled_per_second=summary.pressure_stalled_per_second,
        throttled_seconds_total=summary.throttled_seconds_total,
        pressure_waiting_seconds_total=summary.pressure_waiting_seconds_total,
        cgroup_version=facts.cgroup_version,
        weight_mapping=facts.weight_mapping,
        pod_throttle_ratio=facts.pod_window.throttle_ratio if facts.pod_window else None,
    )


def recommendation_dict(r: Recommendation) -> dict[str, object]:
    return {
        "kind": r.kind,
        "severity": r.severity,
        "summary": r.summary,
        "detail": r.detail,
        "suggested_request_mcpu": r.suggested_request_mcpu,
        "suggested_limit_mcpu": r.suggested_limit_mcpu,
        "expected_throttle_ratio_max": r.expected_throttle_ratio_max,
        "expected_basis": r.expected_basis,
        "suggested_pod_limit_mcpu": r.suggested_pod_limit_mcpu,
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


def _chunks(items: list[int], size: int) -> Iterable[list[int]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]
