"""Storing readings: each container's cumulative counters turned into samples with deltas against its series head.

Idempotent: a batch ingested twice is stored once. On PostgreSQL the readings go to a temporary table by COPY and
one statement computes the deltas, writes the samples and moves the heads; elsewhere the deltas are computed here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from apps.clusters.columns import ColumnSpecs, column_spec, model_column, storable
from apps.clusters.inventory import pod_ids, upsert_nodes, upsert_pods
from apps.clusters.models import Cluster, Container, Node, Pod
from apps.db import chunks, copy_rows

from .counters import MAX_SANE, BadCounter, check_counter, consistency_problem, counter_delta, periods_deltas_agree
from .models import Sample
from .partitions import ensure_partitions
from .readings import Batch, CounterReading

# The cumulative counters of a reading, in the order samples, heads and the SQL below hold them.
COUNTER_FIELDS = (
    "periods_total",
    "throttled_periods_total",
    "throttled_seconds_total",
    "usage_seconds_total",
    "pressure_waiting_seconds_total",
    "pressure_stalled_seconds_total",
)
DELTA_FIELDS = tuple(name.removesuffix("_total") + "_delta" for name in COUNTER_FIELDS)
SAMPLE_COLUMNS = ("container_id", "ts", *COUNTER_FIELDS, "threads", "interval_s", *DELTA_FIELDS, "reset")
HASH_JOIN_MIN_READINGS = 2000  # above this, the PostgreSQL ingest forces hash joins (see _ingest_in_sql)


@dataclass
class IngestResult:
    samples_written: int = 0
    duplicates: int = 0  # readings at or before the container's last stored instant
    resets: int = 0
    containers_created: int = 0
    refused_future: int = 0  # readings stamped beyond this server's clock + CPUTUNE_CLOCK_SKEW
    series_restarted: int = 0  # series whose stored head was that far in the future (see restart_jumped_series)
    problems: list[str] = field(default_factory=list)

    def merge(self, other: IngestResult) -> None:
        self.samples_written += other.samples_written
        self.duplicates += other.duplicates
        self.resets += other.resets
        self.containers_created += other.containers_created
        self.refused_future += other.refused_future
        self.series_restarted += other.series_restarted
        self.problems.extend(other.problems)


# What a reading's values must fit (see apps/clusters/columns.py); its names name the reading.
_READING_COLUMNS: ColumnSpecs = (
    column_spec("namespace", model_column(Pod, "namespace"), True, "namespace"),
    column_spec("pod", model_column(Pod, "name"), True, "pod"),
    column_spec("container", model_column(Container, "name"), True, "container"),
    column_spec("node", model_column(Node, "name"), False, "node"),
    column_spec("threads", model_column(Sample, "threads"), False),
    column_spec("period_us", model_column(Container, "period_us"), False),
)


# --- readings --------------------------------------------------------------------------------------------------------


def ingest(cluster: Cluster, batch: Batch, *, now: datetime | None = None) -> IngestResult:
    """Store one source batch: inventory first, then readings (deltas against each container's last reading)."""
    now = now or timezone.now()
    problems: list[str] = []
    with transaction.atomic():
        node_ids = upsert_nodes(cluster, batch.nodes, now, problems)
        upsert_pods(cluster, batch.pods, now, node_ids, problems)
    result = ingest_readings(cluster, batch.readings, now=now)
    result.problems[:0] = problems
    return result


def ingest_readings(
    cluster: Cluster, readings: Sequence[CounterReading], *, now: datetime | None = None, method: str = "auto"
) -> IngestResult:
    """Turn cumulative readings into samples with deltas and write them; idempotent per (container, ts).

    A reading at or before the container's last stored instant is a duplicate and is skipped. A counter that went
    backwards is a reset: the delta is the new value. Counters that cannot be real (NaN, negative, > 2**53) are
    dropped from that reading with a problem noted; the rest of the reading and of the batch is kept. So is a reading
    whose names cannot be stored (see `unstorable`), and a threads count or period the columns cannot hold.

    Clocks: a reading stamped more than CPUTUNE_CLOCK_SKEW after this server's clock is refused with a problem. A
    series whose stored head is that far in the future (stored while a clock was ahead, then corrected) would block
    every reading until real time caught up: it is restarted instead (see restart_jumped_series), with a problem.
    """
    now = now or timezone.now()
    result = IngestResult()
    readings = _storable_readings(readings, result.problems)
    limit = future_limit(now)
    readings = _not_in_the_future(readings, limit, now, result)
    if not readings:
        return result
    if method == "auto":
        method = "sql" if connection.vendor == "postgresql" else "bulk_create"
    if method == "sql":
        return _ingest_in_sql(cluster, readings, now, limit, result)
    containers = _containers_with_heads(cluster, readings, now, result)
    jumped: JumpedHeads = {
        row[0]: (key, row[2]) for key, row in containers.items() if row[2] is not None and row[2] > limit
    }
    if jumped:
        with transaction.atomic():
            restart_jumped_series(jumped, limit, now, result)
        keys = {key for key, _ in jumped.values() if key is not None}
        containers.update(_lookup_containers(cluster, keys, {(ns, p) for ns, p, _ in keys}))
    rows: list[tuple] = []
    heads: dict[int, tuple] = {}  # container id → (id, ts, *counters): the new head after this batch
    period_updates: dict[int, int] = {}
    for reading in sorted(readings, key=lambda r: r.ts):
        cid, period_us, head_ts, *head_values = containers[(reading.namespace, reading.pod, reading.container)]
        if cid in heads:  # several readings of one container in this batch: chain from the previous one
            head_ts, *head_values = heads[cid][1:]
        values = _checked_counters(reading, result)
        if head_ts is not None and reading.ts <= head_ts:
            result.duplicates += 1
            continue
        reset = False
        interval_s = None
        deltas: list[float | int | None] = [None] * len(COUNTER_FIELDS)
        if head_ts is not None:
            interval_s = (reading.ts - head_ts).total_seconds()
            for i in range(len(COUNTER_FIELDS)):
                deltas[i], was_reset = counter_delta(head_values[i], values[i])
                reset = reset or was_reset
            if not periods_deltas_agree(deltas[0], deltas[1]):
                deltas[0] = deltas[1] = None  # as the SQL path does: no ratio from counters that disagree
        if reset:
            result.resets += 1
        rows.append((cid, reading.ts, *values, reading.threads, interval_s, *deltas, reset))
        heads[cid] = (cid, reading.ts, *values)
        if reading.period_us and reading.period_us != period_us:
            period_updates[cid] = reading.period_us
    if not rows:
        return result
    ensure_partitions({row[1].astimezone(UTC).date() for row in rows})
    with transaction.atomic():
        result.samples_written = write_samples(rows, method=method)
        _upsert_heads(list(heads.values()))
        for period_us in set(period_updates.values()):
            Container.objects.filter(pk__in=[c for c, p in period_updates.items() if p == period_us]).update(
                period_us=period_us
            )
    return result


def _storable_readings(readings: Sequence[CounterReading], problems: list[str]) -> Sequence[CounterReading]:
    """The readings whose values the columns can hold (see ingest_readings); the same sequence when all can."""
    kept: list[CounterReading] = []
    changed = False
    for reading in readings:
        names = (reading.namespace, reading.pod, reading.container)
        checked = storable(reading, _READING_COLUMNS, problems, "reading of {}/{}/{}", *names)
        changed = changed or checked is not reading
        if checked is not None:
            kept.append(checked)
    return kept if changed else readings


def future_limit(now: datetime) -> datetime:
    """The latest instant a reading or head may have: the later of `now` and this server's clock, plus the
    tolerance. The later: a batch replayed with its own old instant (a dump import) must not make newer data look
    like the future."""
    return max(now, timezone.now()) + timedelta(seconds=settings.CPUTUNE_CLOCK_SKEW)


def _ahead(span: timedelta) -> str:
    seconds = span.total_seconds()
    if seconds >= 5400:
        return f"{seconds / 3600:.0f} h"
    if seconds >= 90:
        return f"{seconds / 60:.0f} min"
    return f"{seconds:.0f} s"


def _not_in_the_future(
    readings: Sequence[CounterReading], limit: datetime, now: datetime, result: IngestResult
) -> Sequence[CounterReading]:
    """The readings stamped at or before `limit`; the others are refused, counted and named in one problem (a node
    whose clock jumped sends all its readings ahead: one line, not one per container)."""
    future = [r for r in readings if r.ts > limit]
    if not future:
        return readings
    first = min(future, key=lambda r: r.ts)
    last = max(future, key=lambda r: r.ts)
    result.refused_future += len(future)
    result.problems.append(
        f"{len(future)} reading(s) stamped up to {_ahead(last.ts - max(now, timezone.now()))} ahead of this server's "
        f"clock (more than CPUTUNE_CLOCK_SKEW={settings.CPUTUNE_CLOCK_SKEW} s; a clock jumped?) refused, the first "
        f"{first.namespace}/{first.pod}/{first.container} at {first.ts.isoformat()}"
    )
    return [r for r in readings if r.ts <= limit]


_JUMPED_NAMES = """
SELECT c.id, p.namespace, p.name, c.name FROM clusters_container c JOIN clusters_pod p ON p.id = c.pod_id
WHERE c.id IN ({ids})
"""
_LATEST_KEPT = f"""
SELECT ts, {", ".join(COUNTER_FIELDS)}
FROM telemetry_sample WHERE container_id = %s AND ts <= %s ORDER BY ts DESC LIMIT 1
"""  # noqa: S608 - constant column names


_RESTART_HEAD = (
    "UPDATE telemetry_serieshead SET ts = %s, "  # noqa: S608 - constant column names
    + ", ".join(f"{name} = %s" for name in COUNTER_FIELDS)
    + " WHERE container_id = %s"
)

# Container id → (its names when known, its head's instant).
JumpedHeads = dict[int, tuple[tuple[str, str, str] | None, datetime]]


def restart_jumped_series(
    heads: JumpedHeads,
    limit: datetime,
    now: datetime,
    result: IngestResult,
) -> None:
    """Recover series whose head (container id → (names or None, head instant)) is after `limit`: a clock was
    ahead when they were stored. Their samples stamped after `limit` are deleted (their instants are wrong, and kept
    they would sit in the series' future, out of order with what comes next), with the rollups of the hours they
    could be in; the head goes back to the latest sample left. The next reading then has its deltas against that
    sample: the counters are cumulative, so nothing counted during the jump is lost, and no delta spans the
    jumped instants. With no sample left the head goes and the next reading starts the series afresh.

    Inside the caller's transaction, with the heads locked on PostgreSQL (see _LOCK_HEADS)."""
    ids = sorted(heads)
    with connection.cursor() as cursor:
        missing = [cid for cid in ids if heads[cid][0] is None]
        names = {cid: heads[cid][0] for cid in ids}
        if missing:
            cursor.execute(_JUMPED_NAMES.format(ids=", ".join(["%s"] * len(missing))), missing)
            names.update({cid: (ns, pod, c) for cid, ns, pod, c in cursor.fetchall()})
        placeholders = ", ".join(["%s"] * len(ids))
        for cid in ids:
            cursor.execute("DELETE FROM telemetry_sample WHERE container_id = %s AND ts > %s", [cid, limit])
            removed = max(0, cursor.rowcount)
            cursor.execute(_LATEST_KEPT, [cid, limit])
            kept = cursor.fetchone()
            if kept is None:
                cursor.execute("DELETE FROM telemetry_serieshead WHERE container_id = %s", [cid])
                restarted = "its next reading starts it afresh"
            else:
                cursor.execute(_RESTART_HEAD, [*kept, cid])
                kept_ts = kept[0] if kept[0].tzinfo else kept[0].replace(tzinfo=UTC)  # SQLite returns naive UTC
                restarted = f"restarted from its sample at {kept_ts.isoformat()}"
            ns, pod, container = names.get(cid) or ("?", "?", "?")
            head_ts = heads[cid][1]
            result.problems.append(
                f"{ns}/{pod}/{container}: stored head {head_ts.isoformat()} is "
                f"{_ahead(head_ts - max(now, timezone.now()))} in the future (a clock jumped?): series {restarted}, "
                f"{removed} sample(s) stamped after {limit.isoformat()} removed"
            )
        cursor.execute(
            f"DELETE FROM telemetry_hourlyrollup WHERE container_id IN ({placeholders}) AND hour > %s",  # noqa: S608 - placeholders only
            [*ids, limit - timedelta(hours=1)],
        )
    result.series_restarted += len(ids)


def _checked_counters(reading: CounterReading, result: IngestResult) -> list[float | int | None]:
    """The reading's counters (COUNTER_FIELDS order), with impossible values replaced by None and noted."""
    values: list[float | int | None] = [
        reading.periods_total,
        reading.throttled_periods_total,
        reading.throttled_seconds_total,
        reading.usage_seconds_total,
        reading.pressure_waiting_seconds_total,
        reading.pressure_stalled_seconds_total,
    ]
    for i, value in enumerate(values):
        # The common case in one comparison (NaN fails it too); check_counter words the problem.
        if value is None or 0 <= value <= MAX_SANE:
            continue
        try:
            check_counter(COUNTER_FIELDS[i], value)
        except BadCounter as exc:
            result.problems.append(f"{reading.namespace}/{reading.pod}/{reading.container} at {reading.ts}: {exc}")
            values[i] = None
    if values[0] is not None and values[1] is not None and (problem := consistency_problem(values[0], values[1])):
        # A period is throttled or not: more throttled periods than periods is a broken source, and either count
        # could be the wrong one, so neither is kept (the other counters of the reading are).
        result.problems.append(
            f"{reading.namespace}/{reading.pod}/{reading.container} at {reading.ts}: {problem}; both dropped"
        )
        values[0] = values[1] = None
    return values


def _containers_with_heads(
    cluster: Cluster, readings: Sequence[CounterReading], now: datetime, result: IngestResult
) -> dict[tuple[str, str, str], tuple]:
    """(namespace, pod, container) → (id, period_us, head ts, head counters…) in one query per 5,000 pods.

    Containers not in the inventory yet (a pod started after the list) are created bare, not dropped.
    """
    wanted = {(r.namespace, r.pod, r.container) for r in readings}
    found = _lookup_containers(cluster, wanted, {(ns, p) for ns, p, _ in wanted})
    missing = wanted - found.keys()
    if missing:
        node_of = {(r.namespace, r.pod): r.node for r in readings}
        node_ids = dict(Node.objects.filter(cluster=cluster).values_list("name", "id"))
        pods = {(ns, p) for ns, p, _ in missing}
        Pod.objects.bulk_create(
            [
                Pod(
                    cluster=cluster, namespace=ns, name=p, node_id=node_ids.get(node_of.get((ns, p), "")), last_seen=now
                )
                for ns, p in pods
            ],
            ignore_conflicts=True,
        )
        ids = pod_ids(cluster, pods)
        Container.objects.bulk_create(
            [Container(pod_id=ids[(ns, p)], name=c, last_seen=now) for ns, p, c in missing],
            ignore_conflicts=True,
        )
        result.containers_created += len(missing)
        found.update(_lookup_containers(cluster, missing, pods))
    return found


_LOOKUP_SQL = """
SELECT p.namespace, p.name, c.name, c.id, c.period_us, h.ts, h.periods_total, h.throttled_periods_total,
       h.throttled_seconds_total, h.usage_seconds_total, h.pressure_waiting_seconds_total,
       h.pressure_stalled_seconds_total
FROM clusters_container c
JOIN clusters_pod p ON p.id = c.pod_id
LEFT JOIN telemetry_serieshead h ON h.container_id = c.id
{join}
WHERE p.cluster_id = %s {where}
"""
# PostgreSQL takes the wanted pods as two arrays (thousands of placeholders cost more to parse than the query runs);
# SQLite as a VALUES list of pairs.
_LOOKUP_PG = _LOOKUP_SQL.format(
    join="JOIN unnest(%s::text[], %s::text[]) AS w(namespace, name) ON w.namespace = p.namespace AND w.name = p.name",
    where="",
)


def _lookup_containers(
    cluster: Cluster, wanted: set[tuple[str, str, str]], pods: set[tuple[str, str]]
) -> dict[tuple[str, str, str], tuple]:
    # Raw SQL: building the ORM's values_list rows was a large share of a 10,000-reading batch in profiling.
    found: dict[tuple[str, str, str], tuple] = {}
    with connection.cursor() as cursor:
        for chunk in chunks(sorted(pods), 5000):
            if connection.vendor == "postgresql":
                cursor.execute(_LOOKUP_PG, [[ns for ns, _ in chunk], [name for _, name in chunk], cluster.pk])
            else:
                pairs = ", ".join(["(%s, %s)"] * len(chunk))
                where = f"AND (p.namespace, p.name) IN (VALUES {pairs})"
                cursor.execute(
                    _LOOKUP_SQL.format(join="", where=where), [cluster.pk, *(v for pair in chunk for v in pair)]
                )
            for row in cursor.fetchall():
                if row[:3] in wanted:
                    ts = row[5]
                    if ts is not None and ts.tzinfo is None:  # SQLite returns naive UTC
                        ts = ts.replace(tzinfo=UTC)
                    found[row[:3]] = (row[3], row[4], ts, *row[6:])
    return found


# --- the PostgreSQL path: deltas computed by the database -------------------------------------------------------------

_LOAD_COLUMNS = (
    "namespace",
    "pod",
    "container",
    "node",
    "ts",
    "periods_total",
    "throttled_periods_total",
    "throttled_seconds_total",
    "usage_seconds_total",
    "pressure_waiting_seconds_total",
    "pressure_stalled_seconds_total",
    "threads",
    "period_us",
)
_CREATE_LOAD = """
CREATE TEMP TABLE IF NOT EXISTS reading_load (
    namespace text, pod text, container text, node text, ts timestamptz,
    periods_total bigint, throttled_periods_total bigint, throttled_seconds_total float8, usage_seconds_total float8,
    pressure_waiting_seconds_total float8, pressure_stalled_seconds_total float8,
    threads integer, period_us integer
) ON COMMIT DELETE ROWS
"""
_CREATE_MISSING_PODS = """
INSERT INTO clusters_pod (cluster_id, namespace, name, uid, qos_class, workload_kind, workload_name, last_seen, node_id)
SELECT DISTINCT ON (l.namespace, l.pod) %(cluster)s, l.namespace, l.pod, '', '', '', '', %(now)s, n.id
FROM reading_load l
LEFT JOIN clusters_node n ON n.cluster_id = %(cluster)s AND n.name = l.node
WHERE NOT EXISTS (
    SELECT 1 FROM clusters_pod p WHERE p.cluster_id = %(cluster)s AND p.namespace = l.namespace AND p.name = l.pod
)
ORDER BY l.namespace, l.pod
ON CONFLICT DO NOTHING
"""
_CREATE_MISSING_CONTAINERS = """
INSERT INTO clusters_container (pod_id, name, container_id, restarts, last_seen)
SELECT DISTINCT p.id, l.container, '', 0, %(now)s::timestamptz
FROM reading_load l
JOIN clusters_pod p ON p.cluster_id = %(cluster)s AND p.namespace = l.namespace AND p.name = l.pod
WHERE NOT EXISTS (SELECT 1 FROM clusters_container c WHERE c.pod_id = p.id AND c.name = l.container)
ORDER BY p.id, l.container
ON CONFLICT DO NOTHING
"""
# Two ingests of one container at once (overlapping cycles: a double-started beat, a redelivered task beside the
# next cycle's) would both compute their deltas against the same head and store overlapping intervals, counting the
# seconds between their readings twice. So the batch's series heads are locked first, in id order (two batches never
# wait on each other crosswise): the second ingest waits, and its statement then sees the first one's samples and
# head. Only ingests write heads, so nothing else waits; a container's very first readings have no head to lock.
# It returns each head's instant too: a head in the future is restarted (restart_jumped_series) before the deltas.
_LOCK_HEADS = """
SELECT h.container_id, h.ts FROM telemetry_serieshead h
WHERE h.container_id IN (
    SELECT c.id FROM reading_load l
    JOIN clusters_pod p ON p.cluster_id = %(cluster)s AND p.namespace = l.namespace AND p.name = l.pod
    JOIN clusters_container c ON c.pod_id = p.id AND c.name = l.container
)
ORDER BY h.container_id
FOR UPDATE
"""
# Readings resolved to containers, deduplicated per (container, instant); the stored heads before them; a window
# over both gives each reading its predecessor — the head, or the previous reading of the same batch. The same rules
# as the Python path: a missing side gives no delta, a value below its predecessor is a reset whose delta is itself.
_INGEST = """
WITH r AS (
    SELECT DISTINCT ON (c.id, l.ts) c.id AS cid, l.ts, l.periods_total AS p, l.throttled_periods_total AS tp,
           l.throttled_seconds_total AS tsec, l.usage_seconds_total AS u,
           l.pressure_waiting_seconds_total AS pw, l.pressure_stalled_seconds_total AS ps, l.threads, l.period_us,
           c.period_us AS old_period_us
    FROM reading_load l
    JOIN clusters_pod pd ON pd.cluster_id = %(cluster)s AND pd.namespace = l.namespace AND pd.name = l.pod
    JOIN clusters_container c ON c.pod_id = pd.id AND c.name = l.container
    ORDER BY c.id, l.ts
), h AS (
    SELECT container_id AS cid, ts, periods_total AS p, throttled_periods_total AS tp,
           throttled_seconds_total AS tsec, usage_seconds_total AS u,
           pressure_waiting_seconds_total AS pw, pressure_stalled_seconds_total AS ps
    FROM telemetry_serieshead WHERE container_id IN (SELECT cid FROM r)
), fresh AS (
    SELECT r.* FROM r LEFT JOIN h ON h.cid = r.cid WHERE h.ts IS NULL OR r.ts > h.ts
), seq AS (
    SELECT cid, ts, p, tp, tsec, u, pw, ps, threads, false AS is_head FROM fresh
    UNION ALL
    SELECT cid, ts, p, tp, tsec, u, pw, ps, NULL, true FROM h WHERE cid IN (SELECT cid FROM fresh)
), lagged AS (
    SELECT seq.*, lag(ts) OVER w AS prev_ts, lag(p) OVER w AS pp, lag(tp) OVER w AS ptp,
           lag(tsec) OVER w AS ptsec, lag(u) OVER w AS pu, lag(pw) OVER w AS ppw, lag(ps) OVER w AS pps
    FROM seq WINDOW w AS (PARTITION BY cid ORDER BY ts)
), deltas AS (
    SELECT lagged.*,
        CASE WHEN pp IS NULL OR p IS NULL THEN NULL WHEN p < pp THEN p ELSE p - pp END AS dp,
        CASE WHEN ptp IS NULL OR tp IS NULL THEN NULL WHEN tp < ptp THEN tp ELSE tp - ptp END AS dtp
    FROM lagged WHERE NOT is_head
), inserted AS (
    INSERT INTO telemetry_sample (container_id, ts, periods_total, throttled_periods_total, throttled_seconds_total,
        usage_seconds_total, pressure_waiting_seconds_total, pressure_stalled_seconds_total, threads, interval_s,
        periods_delta, throttled_periods_delta, throttled_seconds_delta, usage_seconds_delta,
        pressure_waiting_seconds_delta, pressure_stalled_seconds_delta, reset)
    SELECT cid, ts, p, tp, tsec, u, pw, ps, threads,
        EXTRACT(EPOCH FROM ts - prev_ts)::float8,
        CASE WHEN dtp > dp THEN NULL ELSE dp END,
        CASE WHEN dtp > dp THEN NULL ELSE dtp END,
        CASE WHEN ptsec IS NULL OR tsec IS NULL THEN NULL WHEN tsec < ptsec THEN tsec ELSE tsec - ptsec END,
        CASE WHEN pu IS NULL OR u IS NULL THEN NULL WHEN u < pu THEN u ELSE u - pu END,
        CASE WHEN ppw IS NULL OR pw IS NULL THEN NULL WHEN pw < ppw THEN pw ELSE pw - ppw END,
        CASE WHEN pps IS NULL OR ps IS NULL THEN NULL WHEN ps < pps THEN ps ELSE ps - pps END,
        COALESCE(p < pp, false) OR COALESCE(tp < ptp, false) OR COALESCE(tsec < ptsec, false) OR COALESCE(u < pu, false)
        OR COALESCE(pw < ppw, false) OR COALESCE(ps < pps, false)
    FROM deltas
    ON CONFLICT DO NOTHING
    RETURNING container_id, ts, periods_total, throttled_periods_total, throttled_seconds_total, usage_seconds_total,
              pressure_waiting_seconds_total, pressure_stalled_seconds_total, reset
), heads AS (
    INSERT INTO telemetry_serieshead (container_id, ts, periods_total, throttled_periods_total,
        throttled_seconds_total, usage_seconds_total, pressure_waiting_seconds_total, pressure_stalled_seconds_total)
    SELECT DISTINCT ON (container_id) container_id, ts, periods_total, throttled_periods_total,
           throttled_seconds_total, usage_seconds_total, pressure_waiting_seconds_total, pressure_stalled_seconds_total
    FROM inserted ORDER BY container_id, ts DESC
    ON CONFLICT (container_id) DO UPDATE SET ts = excluded.ts, periods_total = excluded.periods_total,
        throttled_periods_total = excluded.throttled_periods_total,
        throttled_seconds_total = excluded.throttled_seconds_total, usage_seconds_total = excluded.usage_seconds_total,
        pressure_waiting_seconds_total = excluded.pressure_waiting_seconds_total,
        pressure_stalled_seconds_total = excluded.pressure_stalled_seconds_total
    WHERE telemetry_serieshead.ts < excluded.ts
), periods AS (
    UPDATE clusters_container c SET period_us = x.period_us
    FROM (SELECT DISTINCT ON (cid) cid, period_us, old_period_us FROM r WHERE period_us IS NOT NULL
          ORDER BY cid, ts DESC) x
    WHERE c.id = x.cid AND x.old_period_us IS DISTINCT FROM x.period_us
)
SELECT count(*), count(*) FILTER (WHERE reset) FROM inserted
"""


def _needs_analyze(rows: int) -> bool:
    """Whether this session's reading_load needs fresh statistics for a batch of `rows`: the first time, and when
    the batch is more than twice or less than half the size last analysed. The planner scales the analysed row
    count by the table's current pages, so same-sized batches (a node's scrape, cycle after cycle) plan alike
    without one: the same plans, less time per node read, and no catalog rows (pg_statistic, pg_class) rewritten on
    every read, which pile up as dead rows until a vacuum."""
    session = connection.connection.info.backend_pid
    analysed = _ANALYSED_LOAD_ROWS.get(session)
    if analysed is not None and analysed / 2 <= rows <= analysed * 2:
        return False
    if len(_ANALYSED_LOAD_ROWS) > 256:  # sessions of connections closed since
        _ANALYSED_LOAD_ROWS.clear()
    _ANALYSED_LOAD_ROWS[session] = rows
    return True


_ANALYSED_LOAD_ROWS: dict[int, int] = {}


# The advisory lock class of "writing a cluster's pods" ("cptu"); the second key is the cluster id.
_INGEST_LOCK_CLASS = 0x63707475


def lock_cluster_ingest(cluster: Cluster, *, exclusive: bool) -> None:
    """PostgreSQL: in the current transaction, take the cluster's ingest lock — shared by node ingests (they run
    side by side), exclusive for the inventory's pod upsert. Ingests create the pods and containers they find
    missing and the upsert writes every one: held apart, the two never lock those rows in opposite orders (a
    deadlock), and an ingest waits for the upsert (~2 s at 30,000 pods) rather than the other way round."""
    if connection.vendor != "postgresql":
        return
    function = "pg_advisory_xact_lock" if exclusive else "pg_advisory_xact_lock_shared"
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {function}(%s, %s)", [_INGEST_LOCK_CLASS, cluster.pk])


def _ingest_in_sql(
    cluster: Cluster, readings: Sequence[CounterReading], now: datetime, limit: datetime, result: IngestResult
) -> IngestResult:
    """PostgreSQL: COPY the readings into a temporary table and let one statement resolve containers, compute the
    deltas against the series heads, insert the samples and move the heads (profiling showed the Python path
    spending most of a 10,000-reading batch fetching heads and building rows)."""
    ensure_partitions({r.ts.astimezone(UTC).date() for r in readings})
    params: dict[str, int | datetime] = {"cluster": cluster.pk, "now": now}
    with transaction.atomic(), connection.cursor() as cursor:
        lock_cluster_ingest(cluster, exclusive=False)
        cursor.execute(_CREATE_LOAD)
        rows = (
            (
                reading.namespace,
                reading.pod,
                reading.container,
                reading.node,
                reading.ts,
                *_checked_counters(reading, result),
                reading.threads,
                reading.period_us,
            )
            for reading in readings
        )
        copy_rows(cursor, "reading_load", _LOAD_COLUMNS, rows)
        if _needs_analyze(len(readings)):
            cursor.execute("ANALYZE reading_load")
        cursor.execute(_CREATE_MISSING_PODS, params)
        cursor.execute(_CREATE_MISSING_CONTAINERS, params)
        result.containers_created = max(0, cursor.rowcount)
        cursor.execute(_LOCK_HEADS, params)
        jumped: JumpedHeads = {cid: (None, ts) for cid, ts in cursor.fetchall() if ts > limit}
        if jumped:
            restart_jumped_series(jumped, limit, now, result)
        # The CTEs' row counts are guesses (a fresh temporary table, pods not yet analysed): guessing one row, the
        # planner joins a big batch to its heads in nested loops, far slower than hashing. So big batches get hash
        # joins. A node's batch (tens to hundreds of readings) must not: hashing means reading every container and
        # head of the cluster, per node, which grows with the cluster (quadratic over a cycle).
        big = len(readings) > HASH_JOIN_MIN_READINGS
        if big:
            cursor.execute("SET LOCAL enable_nestloop = off")
        cursor.execute(_INGEST, params)
        written, resets = cursor.fetchone()
        if big:
            cursor.execute("SET LOCAL enable_nestloop TO DEFAULT")
        # Emptied for a caller that ingests twice in one transaction (ON COMMIT empties it at the outermost commit).
        # DELETE, not TRUNCATE: a TRUNCATE is catalog work that every other session has to hear about.
        cursor.execute("DELETE FROM reading_load")
    result.samples_written = written
    result.resets = resets
    result.duplicates = len(readings) - written
    return result


def write_samples(rows: Sequence[tuple], *, method: str = "auto") -> int:
    """Insert sample rows (SAMPLE_COLUMNS order), ignoring ones already stored. Returns rows inserted.

    On PostgreSQL "auto" is COPY into a temporary table then INSERT … ON CONFLICT DO NOTHING (measured faster than
    bulk_create: see benchmarks/bench_ingest.py); elsewhere Django's bulk_create with ignore_conflicts.
    """
    if method == "auto":
        method = "copy" if connection.vendor == "postgresql" else "bulk_create"
    if method == "copy":
        return _copy_samples(rows)
    if method != "bulk_create":
        raise ValueError(f"unknown write method {method!r}")
    before = Sample.objects.count() if connection.vendor != "postgresql" else None
    Sample.objects.bulk_create(
        [Sample(**dict(zip(SAMPLE_COLUMNS, row, strict=True))) for row in rows], batch_size=2000, ignore_conflicts=True
    )
    if before is None:
        return len(rows)  # PostgreSQL's bulk_create does not report ignored rows; readings were deduplicated already
    return Sample.objects.count() - before


def _copy_samples(rows: Sequence[tuple]) -> int:
    cols = ", ".join(SAMPLE_COLUMNS)
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE TEMP TABLE IF NOT EXISTS sample_load (LIKE telemetry_sample INCLUDING DEFAULTS) ON COMMIT DELETE ROWS"
        )
        copy_rows(cursor, "sample_load", SAMPLE_COLUMNS, rows)
        cursor.execute(f"INSERT INTO telemetry_sample ({cols}) SELECT {cols} FROM sample_load ON CONFLICT DO NOTHING")  # noqa: S608 - constant column names
        inserted = cursor.rowcount
        cursor.execute("TRUNCATE sample_load")
    return inserted


HEAD_COLUMNS = ("container_id", "ts", *COUNTER_FIELDS)


def _upsert_heads(heads: list[tuple]) -> None:
    """Move each series head forward (rows in HEAD_COLUMNS order); a head never goes back in time.

    PostgreSQL: COPY into a temporary table, then one INSERT … ON CONFLICT DO UPDATE (an executemany of one upsert
    per head was a large share of a big batch in profiling). Elsewhere: executemany of the same upsert.
    """
    if not heads:
        return
    cols = ", ".join(HEAD_COLUMNS)
    updates = ", ".join(f"{c} = excluded.{c}" for c in HEAD_COLUMNS[1:])
    conflict = f"ON CONFLICT (container_id) DO UPDATE SET {updates} WHERE telemetry_serieshead.ts < excluded.ts"
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "CREATE TEMP TABLE IF NOT EXISTS head_load (LIKE telemetry_serieshead) ON COMMIT DELETE ROWS"
            )
            copy_rows(cursor, "head_load", HEAD_COLUMNS, heads)
            cursor.execute(f"INSERT INTO telemetry_serieshead ({cols}) SELECT {cols} FROM head_load {conflict}")  # noqa: S608 - constant column names
            cursor.execute("TRUNCATE head_load")
        else:
            placeholders = ", ".join(["%s"] * len(HEAD_COLUMNS))
            cursor.executemany(f"INSERT INTO telemetry_serieshead ({cols}) VALUES ({placeholders}) {conflict}", heads)  # noqa: S608 - constant column names
